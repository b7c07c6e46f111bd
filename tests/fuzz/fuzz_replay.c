/*
 * Plain (non-fuzzer) driver of the bootstrap parsers, so they are exercised
 * in every build, sanitizers included:
 *
 *   fuzz_replay [-m MUTATIONS] [-s SEED] [FILE|DIR ...]
 *
 * 1. Every seed made by the encoders must be accepted by its parser.
 * 2. MUTATIONS (default 20000) deterministic mutations of the seeds (bit
 *    flips, interesting bytes and lengths, truncation, extension, splices)
 *    go through the same entry point as the fuzzer's, whose contract checks
 *    abort on a violation.  Every parser must have both accepted and refused
 *    some of them, so the mutations reach past the first check.
 * 3. Each FILE (or every file in DIR) is run too: a crash input saved by
 *    the fuzzer, or a whole corpus.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bootstrap/message.h"
#include "fuzz_messages.h"

#define MAX_SEEDS 64
#define INPUT_MAX_BYTES 2048
#define RING_HDR QCOLL__BOOT_RING_ERROR_MIN_BYTES

typedef struct seed {
  char name[48];
  uint8_t bytes[FUZZ_SEED_MAX_BYTES];
  size_t size;
} seed_t;

static seed_t seeds[MAX_SEEDS];
static int nseeds;
static const char *const parser_names[FUZZ_PARSER_COUNT] = {
    "id_decode",    "peek_length",     "decode_hello", "decode_ring_hello",
    "decode_reply", "decode_data_hdr", "stream",       "ring_error"};
/* Where the frame starts behind the selector and parameter bytes. */
static const size_t frame_start[FUZZ_PARSER_COUNT] = {1, 6, 1, 1, 9, 1, 10, 1};
/* Where the frame's length field (its low 32 bits) sits: at the start of a
 * rendezvous frame, in bytes 20..23 of a ring failure report. */
static const size_t length_field[FUZZ_PARSER_COUNT] = {1, 6, 1,  1,
                                                       9, 1, 10, 21};
/* tally[parser][result]: result 0 OK, 1 INCOMPLETE, 2 INVALID, 3 too short */
static long tally[FUZZ_PARSER_COUNT][4];

static void keep_seed(const char *name, const uint8_t *bytes, size_t size,
                      void *ctx) {
  (void)ctx;
  if (nseeds == MAX_SEEDS || size > FUZZ_SEED_MAX_BYTES) {
    fprintf(stderr, "fuzz_replay: too many or too large seeds\n");
    exit(1);
  }
  seed_t *s = &seeds[nseeds++];
  snprintf(s->name, sizeof s->name, "%s", name);
  memcpy(s->bytes, bytes, size);
  s->size = size;
}

static void count(fuzz_outcome_t o) {
  if (o.parser < 0) return;
  tally[o.parser][o.result >= 0 && o.result <= 2 ? o.result : 3]++;
}

/* ---- deterministic mutations ------------------------------------------ */

static uint64_t rng_state;

static uint32_t rnd(uint32_t bound) {
  /* xorshift64*: fixed sequence for a fixed seed, on every platform. */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  uint64_t x = rng_state * 2685821657736338717ull;
  return bound ? (uint32_t)((x >> 32) % bound) : 0;
}

static void put_be32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16);
  p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

static uint32_t interesting_u32(size_t frame_bytes) {
  const uint32_t text_bytes = (uint32_t)frame_bytes - RING_HDR;
  const uint32_t values[] = {0,
                             1,
                             3,
                             4,
                             (uint32_t)frame_bytes - 4,
                             (uint32_t)frame_bytes - 3,
                             (uint32_t)frame_bytes - 5,
                             QCOLL__BOOT_HELLO_BYTES - 4,
                             QCOLL__BOOT_ERROR_MIN_BYTES - 5,
                             QCOLL__BOOT_ERROR_MAX_BYTES - 4,
                             QCOLL__BOOT_ERROR_MAX_BYTES - 3,
                             0x7fffffffu,
                             0x80000000u,
                             0xfffffffcu,
                             0xffffffffu,
                             (uint32_t)QCOLL_ERR_INTERNAL - 1u,
                             (uint32_t)QCOLL_OK,
                             text_bytes,
                             text_bytes + 1,
                             text_bytes - 1,
                             QCOLL__BOOT_RING_ERRTEXT_MAX,
                             QCOLL__BOOT_RING_ERRTEXT_MAX + 1,
                             QCOLL__BOOT_MAX_RANKS - 1,
                             QCOLL__BOOT_MAX_RANKS};
  return values[rnd(sizeof values / sizeof values[0])];
}

static uint8_t interesting_u8(void) {
  const uint8_t values[] = {0,    1,    2,    3,    4,    5,    6,   7,
                            0x1f, 0x20, 0x7e, 0x7f, 0x80, 0xfe, 0xff};
  return values[rnd(sizeof values)];
}

static void mutate_once(uint8_t *buf, size_t *size, int parser) {
  size_t n = *size;
  size_t start = frame_start[parser] < n ? frame_start[parser] : 0;
  size_t length_at = length_field[parser];
  switch (rnd(8)) {
    case 0: /* flip a bit anywhere after the selector */
      if (n > 1) buf[1 + rnd((uint32_t)n - 1)] ^= (uint8_t)(1u << rnd(8));
      break;
    case 1: /* an interesting byte */
      if (n > 1) buf[1 + rnd((uint32_t)n - 1)] = interesting_u8();
      break;
    case 2: /* an interesting length field, where frames keep it */
      if (length_at + 4 <= n)
        put_be32(buf + length_at, interesting_u32(n - start));
      break;
    case 3: /* an interesting u32 anywhere */
      if (n >= 5)
        put_be32(buf + 1 + rnd((uint32_t)n - 4), interesting_u32(n - start));
      break;
    case 4: /* truncate */
      if (n > 1) *size = 1 + rnd((uint32_t)n - 1);
      break;
    case 5: { /* extend with random bytes */
      size_t add = 1 + rnd(64);
      for (size_t i = 0; i < add && n < INPUT_MAX_BYTES; i++)
        buf[n++] = (uint8_t)rnd(256);
      *size = n;
      break;
    }
    case 6: { /* splice a piece of another seed in */
      const seed_t *o = &seeds[rnd((uint32_t)nseeds)];
      if (n < 2 || o->size < 2) break;
      size_t from = 1 + rnd((uint32_t)o->size - 1);
      size_t to = 1 + rnd((uint32_t)n - 1);
      size_t len = 1 + rnd(32);
      if (from + len > o->size) len = o->size - from;
      if (to + len > n) len = n - to;
      memcpy(buf + to, o->bytes + from, len);
      break;
    }
    default: /* the same bytes through another parser */
      buf[0] = (uint8_t)rnd(256);
      break;
  }
}

static void run_mutations(long count_wanted) {
  static uint8_t buf[INPUT_MAX_BYTES];
  for (long i = 0; i < count_wanted; i++) {
    const seed_t *s = &seeds[i % nseeds];
    memcpy(buf, s->bytes, s->size);
    size_t size = s->size;
    int parser = (s->bytes[0] & 0x7f) % FUZZ_PARSER_COUNT;
    int rounds = 1 + (int)rnd(3);
    for (int k = 0; k < rounds; k++) mutate_once(buf, &size, parser);
    count(fuzz_messages_one(buf, size));
  }
}

/* ---- files ----------------------------------------------------------------
 */

static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    perror(path);
    return 1;
  }
  static uint8_t buf[1 << 20];
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  count(fuzz_messages_one(buf, n));
  return 0;
}

static int run_path(const char *path, int *files) {
  struct stat sb;
  if (stat(path, &sb) != 0) {
    perror(path);
    return 1;
  }
  if (!S_ISDIR(sb.st_mode)) {
    ++*files;
    return run_file(path);
  }
  DIR *d = opendir(path);
  if (!d) {
    perror(path);
    return 1;
  }
  int bad = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char child[4096];
    snprintf(child, sizeof child, "%s/%s", path, e->d_name);
    bad |= run_path(child, files);
  }
  closedir(d);
  return bad;
}

int main(int argc, char **argv) {
  long mutations = 20000;
  unsigned long long seed = 0x5eed;
  int argi = 1;
  for (; argi < argc && argv[argi][0] == '-'; argi += 2) {
    if (argi + 1 >= argc) break;
    if (!strcmp(argv[argi], "-m"))
      mutations = strtol(argv[argi + 1], NULL, 10);
    else if (!strcmp(argv[argi], "-s"))
      seed = strtoull(argv[argi + 1], NULL, 0);
    else
      break;
  }
  if (argi < argc && argv[argi][0] == '-') {
    fprintf(stderr, "usage: %s [-m MUTATIONS] [-s SEED] [FILE|DIR ...]\n",
            argv[0]);
    return 2;
  }
  rng_state = seed * 0x9e3779b97f4a7c15ull + 1;

  fuzz_messages_seeds(keep_seed, NULL);
  int failures = 0;
  for (int i = 0; i < nseeds; i++) {
    fuzz_outcome_t o = fuzz_messages_one(seeds[i].bytes, seeds[i].size);
    if (o.result != QCOLL__MSG_OK) {
      fprintf(stderr, "FAIL: seed %s was not accepted by %s (result %d)\n",
              seeds[i].name, parser_names[o.parser], o.result);
      failures++;
    }
  }
  printf("%d seeds made by the encoders, all accepted: %s\n", nseeds,
         failures ? "no" : "yes");

  run_mutations(mutations);
  printf("%ld mutations (seed 0x%llx):\n", mutations, seed);
  printf("  %-18s %8s %8s %8s %8s\n", "parser", "ok", "partial", "refused",
         "short");
  for (int p = 0; p < FUZZ_PARSER_COUNT; p++) {
    printf("  %-18s %8ld %8ld %8ld %8ld\n", parser_names[p], tally[p][0],
           tally[p][1], tally[p][2], tally[p][3]);
    if (mutations >= 1000 && (tally[p][0] == 0 || tally[p][2] == 0)) {
      fprintf(stderr, "FAIL: the mutations of %s were never %s\n",
              parser_names[p], tally[p][0] == 0 ? "accepted" : "refused");
      failures++;
    }
  }

  int files = 0;
  for (; argi < argc; argi++) failures += run_path(argv[argi], &files);
  if (files) printf("%d input file(s) replayed\n", files);
  printf("%s\n", failures ? "FAILED" : "all parser contracts held");
  return failures ? 1 : 0;
}
