/*
 * Seed inputs for the bootstrap parsers, made by the library's own encoders
 * (so the corpus follows the wire format wherever it changes), in the input
 * layout of fuzz_messages.h.
 */
#include <stdio.h>
#include <string.h>

#include "bootstrap/message.h"
#include "fuzz_messages.h"

typedef struct seed {
  uint8_t bytes[FUZZ_SEED_MAX_BYTES];
  size_t size;
} seed_t;

static void seed_start(seed_t *s, fuzz_parser_t parser) {
  s->bytes[0] = (uint8_t)parser;
  s->size = 1;
}

static void seed_add(seed_t *s, const void *p, size_t n) {
  if (s->size + n > sizeof s->bytes) return;
  memcpy(s->bytes + s->size, p, n);
  s->size += n;
}

static void seed_add_be32(seed_t *s, int32_t v) {
  uint8_t b[4] = {(uint8_t)((uint32_t)v >> 24), (uint8_t)((uint32_t)v >> 16),
                  (uint8_t)((uint32_t)v >> 8), (uint8_t)v};
  seed_add(s, b, 4);
}

static void fill_secret(uint8_t *secret, uint8_t seed) {
  for (int i = 0; i < QCOLL__BOOT_SECRET_BYTES; i++)
    secret[i] = (uint8_t)(seed * 31 + i * 7);
}

static qcoll__boot_addr_t addr(int family, uint16_t port) {
  qcoll__boot_addr_t a;
  memset(&a, 0, sizeof a);
  a.family = (uint8_t)family;
  a.port = port;
  if (family == 4) {
    a.ip[0] = 127, a.ip[3] = 1;
  } else if (family == 6) {
    a.ip[0] = 0xfe, a.ip[1] = 0x80, a.ip[15] = 1;
  }
  return a;
}

typedef struct emitter {
  fuzz_emit_fn emit;
  void *ctx;
  int count;
} emitter_t;

static void emit(emitter_t *e, const char *name, const seed_t *s) {
  e->emit(name, s->bytes, s->size, e->ctx);
  e->count++;
}

static void seeds_id(emitter_t *e) {
  static const int families[] = {4, 6};
  for (int i = 0; i < 2; i++) {
    qcoll__boot_id_t id;
    id.root = addr(families[i], (uint16_t)(29500 + i));
    fill_secret(id.secret, (uint8_t)i);
    qcoll_unique_id_t out;
    qcoll__id_encode(&id, &out);
    seed_t s;
    seed_start(&s, FUZZ_ID);
    seed_add(&s, out.bytes, sizeof out.bytes);
    emit(e, i ? "id_ipv6" : "id_ipv4", &s);
  }
}

static size_t sample_hello(int family, int rank, int nranks, uint8_t *buf) {
  qcoll__boot_hello_t h;
  memset(&h, 0, sizeof h);
  fill_secret(h.secret, 3);
  h.rank = rank;
  h.nranks = nranks;
  h.listen = addr(family, 40001);
  h.timeout_ms = 300000;
  return qcoll__msg_encode_hello(&h, buf, QCOLL__BOOT_HELLO_BYTES);
}

static size_t sample_ring_hello(uint8_t *buf) {
  qcoll__boot_ring_hello_t h;
  fill_secret(h.secret, 4);
  h.rank = 2;
  h.nranks = 3;
  return qcoll__msg_encode_ring_hello(&h, buf, QCOLL__BOOT_RING_HELLO_BYTES);
}

static size_t sample_error(size_t text_len, uint8_t *buf) {
  char text[QCOLL__BOOT_ERRTEXT_MAX + 1];
  for (size_t i = 0; i < text_len && i < QCOLL__BOOT_ERRTEXT_MAX; i++)
    text[i] = (char)('a' + i % 26);
  text[text_len < QCOLL__BOOT_ERRTEXT_MAX ? text_len
                                          : QCOLL__BOOT_ERRTEXT_MAX] = 0;
  uint8_t secret[QCOLL__BOOT_SECRET_BYTES];
  fill_secret(secret, 5);
  return qcoll__msg_encode_error(secret, QCOLL_ERR_MISMATCH, text, buf,
                                 QCOLL__BOOT_ERROR_MAX_BYTES);
}

static size_t sample_next(int rank, int nranks, int family, uint8_t *buf) {
  uint8_t secret[QCOLL__BOOT_SECRET_BYTES];
  fill_secret(secret, 6);
  qcoll__boot_addr_t next = addr(family, 40002);
  return qcoll__msg_encode_next(secret, rank, nranks, &next, buf,
                                QCOLL__BOOT_NEXT_BYTES);
}

static void seeds_frames(emitter_t *e) {
  uint8_t buf[QCOLL__BOOT_ERROR_MAX_BYTES];
  seed_t s;
  static const int families[] = {4, 6, 0};
  static const char *const hello_names[] = {"hello_ipv4", "hello_ipv6",
                                            "hello_alone"};
  for (int i = 0; i < 3; i++) {
    seed_start(&s, FUZZ_HELLO);
    seed_add(&s, buf, sample_hello(families[i], i, 4, buf));
    emit(e, hello_names[i], &s);
  }
  seed_start(&s, FUZZ_RING_HELLO);
  seed_add(&s, buf, sample_ring_hello(buf));
  emit(e, "ring_hello", &s);

  /* Replies: the expected rank and world size come first. */
  seed_start(&s, FUZZ_REPLY);
  seed_add_be32(&s, 1), seed_add_be32(&s, 4);
  seed_add(&s, buf, sample_next(1, 4, 4, buf));
  emit(e, "reply_next", &s);
  seed_start(&s, FUZZ_REPLY);
  seed_add_be32(&s, 0), seed_add_be32(&s, 1);
  seed_add(&s, buf, sample_next(0, 1, 0, buf));
  emit(e, "reply_next_alone", &s);
  static const size_t text_lens[] = {0, 40, QCOLL__BOOT_ERRTEXT_MAX};
  static const char *const error_names[] = {"reply_error_empty", "reply_error",
                                            "reply_error_longest"};
  for (int i = 0; i < 3; i++) {
    seed_start(&s, FUZZ_REPLY);
    s.bytes[0] |= (uint8_t)(i == 1 ? 0x80 : 0); /* one with a NULL why */
    seed_add_be32(&s, 0), seed_add_be32(&s, 2);
    seed_add(&s, buf, sample_error(text_lens[i], buf));
    emit(e, error_names[i], &s);
  }
}

static void seeds_data_hdr(emitter_t *e) {
  static const char *const names[] = {"data_allgather", "data_broadcast",
                                      "data_barrier"};
  for (int k = QCOLL__BOOT_DATA_ALLGATHER; k <= QCOLL__BOOT_DATA_BARRIER; k++) {
    qcoll__boot_data_hdr_t h = {(uint16_t)k, (uint32_t)(k * 3),
                                (uint64_t)k << 20};
    uint8_t hdr[QCOLL__BOOT_DATA_HDR_BYTES];
    qcoll__msg_encode_data_hdr(&h, hdr);
    seed_t s;
    seed_start(&s, FUZZ_DATA_HDR);
    seed_add(&s, hdr, sizeof hdr);
    emit(e, names[k - 1], &s);
  }
}

/* Peek and stream: a real frame behind the parameter bytes. */
static void seeds_receivers(emitter_t *e) {
  uint8_t buf[QCOLL__BOOT_ERROR_MAX_BYTES];
  seed_t s;
  for (int bounds = 0; bounds < 4; bounds++) {
    seed_start(&s, FUZZ_PEEK);
    uint8_t param[5] = {(uint8_t)bounds, 0, 16, 0, 128};
    seed_add(&s, param, sizeof param);
    /* Bounds 2 are a ring hello's, the others admit a hello. */
    seed_add(&s, buf,
             bounds == 2 ? sample_ring_hello(buf) : sample_hello(4, 1, 3, buf));
    char name[32];
    snprintf(name, sizeof name, "peek_bounds%d", bounds);
    emit(e, name, &s);
  }
  static const struct {
    const char *name;
    uint8_t kind; /* FUZZ_STREAM's kind byte: 0 hello, 1 reply, 2 ring */
  } frames[4] = {{"stream_hello", 0},
                 {"stream_error", 1},
                 {"stream_next", 1},
                 {"stream_ring_hello", 2}};
  for (int i = 0; i < 4; i++) {
    seed_start(&s, FUZZ_STREAM);
    seed_add(&s, &frames[i].kind, 1);
    seed_add_be32(&s, 1), seed_add_be32(&s, 4);
    size_t n = i == 0   ? sample_hello(6, 1, 4, buf)
               : i == 1 ? sample_error(17, buf)
               : i == 2 ? sample_next(1, 4, 6, buf)
                        : sample_ring_hello(buf);
    seed_add(&s, buf, n);
    /* Bytes of the next frame already arrived behind this one. */
    seed_add(&s, buf, 7);
    emit(e, frames[i].name, &s);
  }
}

/* Ring failure reports: no text, a real one, the longest (from a text the
 * encoder cuts) from the last rank of the largest world, and one with the
 * next bytes of the stream already behind it. */
static void seeds_ring_error(emitter_t *e) {
  char longer[QCOLL__BOOT_RING_ERRTEXT_MAX + 40];
  for (size_t i = 0; i + 1 < sizeof longer; i++)
    longer[i] = (char)('A' + i % 26);
  longer[sizeof longer - 1] = '\0';
  static const struct {
    const char *name;
    int32_t reporter;
    const char *text; /* NULL: one longer than the bound */
    uint8_t flags;    /* 0x80: the decoder gets a NULL why */
    size_t behind;    /* bytes of what follows on the stream */
  } reports[4] = {
      {"ring_error_empty", 0, "", 0, 0},
      {"ring_error", 3,
       "bootstrap all-gather: timed out after 30 s waiting for rank 2", 0x80,
       0},
      {"ring_error_longest", QCOLL__BOOT_MAX_RANKS - 1, NULL, 0, 0},
      {"ring_error_then_data", 1, "rank 1 aborted", 0, 7},
  };
  uint8_t buf[QCOLL__BOOT_RING_ERROR_MAX_BYTES];
  for (int i = 0; i < 4; i++) {
    seed_t s;
    seed_start(&s, FUZZ_RING_ERROR);
    s.bytes[0] |= reports[i].flags;
    size_t n = qcoll__msg_encode_ring_error(
        reports[i].reporter, reports[i].text ? reports[i].text : longer, buf,
        sizeof buf);
    seed_add(&s, buf, n);
    seed_add(&s, buf, reports[i].behind);
    emit(e, reports[i].name, &s);
  }
}

int fuzz_messages_seeds(fuzz_emit_fn fn, void *ctx) {
  emitter_t e = {fn, ctx, 0};
  seeds_id(&e);
  seeds_frames(&e);
  seeds_data_hdr(&e);
  seeds_receivers(&e);
  seeds_ring_error(&e);
  return e.count;
}
