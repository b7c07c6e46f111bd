/*
 * The bootstrap parsers under one entry point, with their contracts checked
 * on every input (see fuzz_messages.h for the input layout).
 *
 * Parameter bytes after the selector:
 *   FUZZ_PEEK    [bounds 1][min u16][max u16] frame...   bounds % 4 picks the
 *                receiver's real bounds (reply, hello, ring hello) or, for 3,
 *                the two u16 that follow
 *   FUZZ_REPLY   [expect_rank i32][expect_nranks i32] frame...
 *   FUZZ_STREAM  [kind 1][expect_rank i32][expect_nranks i32] bytes...  kind
 *                % 3: hello at the root, reply at a rank, ring hello
 *   FUZZ_RING_ERROR  no parameters: the bytes are what a rank reads where it
 *                expects a ring data header (see fuzz_ring_error)
 * Every parser gets its bytes in a heap block of exactly their length, so a
 * read past the end is caught by AddressSanitizer whoever calls us.
 */
#include "fuzz_messages.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/message.h"

/* Offsets of the reserved byte inside an encoded address, and of the
 * addresses inside the frames that carry one.  The decoders do not check
 * the reserved byte, so a re-encoding may differ from the input there (and
 * only there). */
#define ADDR_RESERVED 1
#define ID_ADDR_OFFSET 5
#define ID_USED_BYTES (5 + QCOLL__BOOT_ADDR_BYTES + QCOLL__BOOT_SECRET_BYTES)
#define HELLO_ADDR_OFFSET \
  (QCOLL__BOOT_FRAME_HDR_BYTES + QCOLL__BOOT_SECRET_BYTES + 8)
#define NEXT_ADDR_OFFSET HELLO_ADDR_OFFSET

static void broken(const char *parser, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));

static void broken(const char *parser, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "fuzz_messages: %s broke its contract: ", parser);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  fflush(stderr);
  abort();
}

static uint32_t be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
         p[3];
}

static uint64_t be64(const uint8_t *p) {
  return (uint64_t)be32(p) << 32 | be32(p + 4);
}

/* A heap block holding exactly n bytes of p, so that a parser reading one
 * byte too far is caught by AddressSanitizer; NULL when out of memory. */
static uint8_t *exact_copy(const uint8_t *p, size_t n) {
  uint8_t *copy = malloc(n ? n : 1);
  if (copy && n) memcpy(copy, p, n);
  return copy;
}

/* ---- the `why` buffer ------------------------------------------------- */

typedef struct why_buf {
  char text[QCOLL__BOOT_WHY_MAX];
  bool null; /* the decoder gets NULL instead */
} why_buf_t;

static char *why_arg(why_buf_t *w) {
  /* No NUL anywhere: a refusal that writes no terminated reason shows. */
  memset(w->text, 'Z', sizeof w->text);
  return w->null ? NULL : w->text;
}

static void check_result(const char *parser, qcoll__msg_result_t r,
                         const why_buf_t *w) {
  if (r != QCOLL__MSG_OK && r != QCOLL__MSG_INCOMPLETE &&
      r != QCOLL__MSG_INVALID)
    broken(parser, "returned %d, not a qcoll__msg_result_t", (int)r);
  if (r != QCOLL__MSG_INVALID || w->null) return;
  if (!memchr(w->text, '\0', sizeof w->text))
    broken(parser, "refused without a NUL-terminated reason");
  if (w->text[0] == '\0') broken(parser, "refused with an empty reason");
}

/* Equal bytes, except at the positions listed in skip (-1 ends the list). */
static bool same_bytes_except(const uint8_t *a, const uint8_t *b, size_t n,
                              const int *skip) {
  for (size_t i = 0; i < n; i++) {
    bool skipped = false;
    for (const int *s = skip; *s >= 0; s++) skipped |= (size_t)*s == i;
    if (!skipped && a[i] != b[i]) return false;
  }
  return true;
}

static void check_addr(const char *parser, const qcoll__boot_addr_t *a,
                       bool allow_none) {
  if (a->family == 0 && allow_none) return;
  if (a->family != 4 && a->family != 6)
    broken(parser, "accepted address family %u", a->family);
  if (a->port == 0) broken(parser, "accepted port 0");
}

static bool same_addr(const qcoll__boot_addr_t *a,
                      const qcoll__boot_addr_t *b) {
  return a->family == b->family && a->port == b->port &&
         !memcmp(a->ip, b->ip, sizeof a->ip);
}

/* ---- one parser each -------------------------------------------------- */

static int fuzz_id(const uint8_t *p, size_t n, why_buf_t *w) {
  qcoll_unique_id_t id;
  memset(&id, 0, sizeof id);
  memcpy(id.bytes, p, n < sizeof id.bytes ? n : sizeof id.bytes);
  qcoll__boot_id_t out, again;
  qcoll__msg_result_t r = qcoll__id_decode(&id, &out, why_arg(w));
  check_result("id_decode", r, w);
  if (r == QCOLL__MSG_INCOMPLETE) broken("id_decode", "said incomplete");
  if (r != QCOLL__MSG_OK) return r;
  check_addr("id_decode", &out.root, false);
  qcoll_unique_id_t re;
  qcoll__id_encode(&out, &re);
  static const int skip[] = {ID_ADDR_OFFSET + ADDR_RESERVED, -1};
  if (!same_bytes_except(re.bytes, id.bytes, ID_USED_BYTES, skip))
    broken("id_decode", "accepted an id whose re-encoding differs");
  if (qcoll__id_decode(&re, &again, NULL) != QCOLL__MSG_OK ||
      !same_addr(&again.root, &out.root) ||
      memcmp(again.secret, out.secret, sizeof out.secret))
    broken("id_decode", "re-encoded id decodes differently");
  return r;
}

typedef struct bounds {
  size_t min, max;
} bounds_t;

static bounds_t receiver_bounds(unsigned which, const uint8_t *param) {
  switch (which % 4) {
    case 0:
      return (bounds_t){QCOLL__BOOT_ERROR_MIN_BYTES,
                        QCOLL__BOOT_REPLY_MAX_BYTES};
    case 1: return (bounds_t){QCOLL__BOOT_HELLO_BYTES, QCOLL__BOOT_HELLO_BYTES};
    case 2:
      return (bounds_t){QCOLL__BOOT_RING_HELLO_BYTES,
                        QCOLL__BOOT_RING_HELLO_BYTES};
    default:
      return (bounds_t){(size_t)param[0] << 8 | param[1],
                        (size_t)param[2] << 8 | param[3]};
  }
}

static int check_peek(const uint8_t *p, size_t n, bounds_t b, why_buf_t *w,
                      size_t *frame) {
  *frame = 0;
  qcoll__msg_result_t r =
      qcoll__msg_peek_length(p, n, b.min, b.max, frame, why_arg(w));
  check_result("peek_length", r, w);
  if ((r == QCOLL__MSG_INCOMPLETE) != (n < 4))
    broken("peek_length", "result %d for %zu bytes", (int)r, n);
  if (r == QCOLL__MSG_INCOMPLETE) return r;
  size_t announced = 4 + (size_t)be32(p);
  bool in_bounds = announced >= b.min && announced <= b.max;
  if ((r == QCOLL__MSG_OK) != in_bounds)
    broken("peek_length", "result %d for a %zu-byte frame with bounds %zu..%zu",
           (int)r, announced, b.min, b.max);
  if (r == QCOLL__MSG_OK && *frame != announced)
    broken("peek_length", "frame %zu, the length field says %zu", *frame,
           announced);
  return r;
}

static int fuzz_peek(const uint8_t *p, size_t n, why_buf_t *w) {
  if (n < 5) return -1;
  bounds_t b = receiver_bounds(p[0], p + 1);
  size_t frame;
  return check_peek(p + 5, n - 5, b, w, &frame);
}

static int fuzz_hello(const uint8_t *p, size_t n, why_buf_t *w) {
  qcoll__boot_hello_t out, again;
  qcoll__msg_result_t r = qcoll__msg_decode_hello(p, n, &out, why_arg(w));
  check_result("decode_hello", r, w);
  if (r == QCOLL__MSG_INCOMPLETE) broken("decode_hello", "said incomplete");
  if (r != QCOLL__MSG_OK) return r;
  if (n != QCOLL__BOOT_HELLO_BYTES)
    broken("decode_hello", "accepted %zu bytes", n);
  check_addr("decode_hello", &out.listen, true);
  uint8_t re[QCOLL__BOOT_HELLO_BYTES];
  if (qcoll__msg_encode_hello(&out, re, sizeof re) != sizeof re)
    broken("decode_hello", "decoded hello cannot be encoded");
  static const int skip[] = {HELLO_ADDR_OFFSET + ADDR_RESERVED, -1};
  if (!same_bytes_except(re, p, sizeof re, skip))
    broken("decode_hello", "accepted a hello whose re-encoding differs");
  if (qcoll__msg_decode_hello(re, sizeof re, &again, NULL) != QCOLL__MSG_OK ||
      again.rank != out.rank || again.nranks != out.nranks ||
      again.timeout_ms != out.timeout_ms ||
      !same_addr(&again.listen, &out.listen) ||
      memcmp(again.secret, out.secret, sizeof out.secret))
    broken("decode_hello", "re-encoded hello decodes differently");
  return r;
}

static int fuzz_ring_hello(const uint8_t *p, size_t n, why_buf_t *w) {
  qcoll__boot_ring_hello_t out;
  qcoll__msg_result_t r = qcoll__msg_decode_ring_hello(p, n, &out, why_arg(w));
  check_result("decode_ring_hello", r, w);
  if (r == QCOLL__MSG_INCOMPLETE)
    broken("decode_ring_hello", "said incomplete");
  if (r != QCOLL__MSG_OK) return r;
  uint8_t re[QCOLL__BOOT_RING_HELLO_BYTES];
  if (n != sizeof re) broken("decode_ring_hello", "accepted %zu bytes", n);
  if (qcoll__msg_encode_ring_hello(&out, re, sizeof re) != sizeof re ||
      memcmp(re, p, sizeof re))
    broken("decode_ring_hello", "accepted a frame whose re-encoding differs");
  return r;
}

static bool printable(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (s[i] < 0x20 || s[i] >= 0x7f) return false;
  return true;
}

static void check_error_reply(const uint8_t *p, size_t n,
                              const qcoll__boot_reply_t *out) {
  const char *parser = "decode_reply (error)";
  if (out->status > QCOLL_ERR_INVALID_ARGUMENT ||
      out->status < QCOLL_ERR_INTERNAL)
    broken(parser, "accepted status %d", out->status);
  size_t len = strnlen(out->text, sizeof out->text);
  if (len == sizeof out->text) broken(parser, "text is not NUL-terminated");
  if (len != n - QCOLL__BOOT_ERROR_MIN_BYTES)
    broken(parser, "text of %zu bytes from a %zu-byte frame", len, n);
  if (!printable(out->text, len)) broken(parser, "text is not printable");
  uint8_t re[QCOLL__BOOT_ERROR_MAX_BYTES];
  size_t k = qcoll__msg_encode_error(out->secret, out->status, out->text, re,
                                     sizeof re);
  if (k != n) broken(parser, "re-encoding has %zu bytes, input %zu", k, n);
  /* Unprintable input bytes became '?': only the text may differ. */
  if (memcmp(re, p, QCOLL__BOOT_ERROR_MIN_BYTES))
    broken(parser, "accepted a frame whose re-encoding differs");
  qcoll__boot_reply_t again;
  if (qcoll__msg_decode_reply(re, k, 0, 1, &again, NULL) != QCOLL__MSG_OK ||
      again.status != out->status || strcmp(again.text, out->text))
    broken(parser, "re-encoded error decodes differently");
}

static void check_next_reply(const uint8_t *p, size_t n, int rank, int nranks,
                             const qcoll__boot_reply_t *out) {
  const char *parser = "decode_reply (ring address)";
  if (n != QCOLL__BOOT_NEXT_BYTES) broken(parser, "accepted %zu bytes", n);
  if (out->rank != rank || out->nranks != nranks)
    broken(parser, "accepted rank %d of %d, expected %d of %d", out->rank,
           out->nranks, rank, nranks);
  check_addr(parser, &out->next, nranks == 1);
  uint8_t re[QCOLL__BOOT_NEXT_BYTES];
  if (qcoll__msg_encode_next(out->secret, out->rank, out->nranks, &out->next,
                             re, sizeof re) != sizeof re)
    broken(parser, "decoded address cannot be encoded");
  static const int skip[] = {NEXT_ADDR_OFFSET + ADDR_RESERVED, -1};
  if (!same_bytes_except(re, p, sizeof re, skip))
    broken(parser, "accepted a frame whose re-encoding differs");
}

static int decode_reply(const uint8_t *p, size_t n, int rank, int nranks,
                        why_buf_t *w) {
  qcoll__boot_reply_t out;
  qcoll__msg_result_t r =
      qcoll__msg_decode_reply(p, n, rank, nranks, &out, why_arg(w));
  check_result("decode_reply", r, w);
  if (r == QCOLL__MSG_INCOMPLETE) broken("decode_reply", "said incomplete");
  if (r != QCOLL__MSG_OK) return r;
  if (out.type == QCOLL__BOOT_MSG_ERROR)
    check_error_reply(p, n, &out);
  else if (out.type == QCOLL__BOOT_MSG_NEXT)
    check_next_reply(p, n, rank, nranks, &out);
  else
    broken("decode_reply", "accepted message type %d", out.type);
  return r;
}

static int fuzz_reply(const uint8_t *p, size_t n, why_buf_t *w) {
  if (n < 8) return -1;
  return decode_reply(p + 8, n - 8, (int32_t)be32(p), (int32_t)be32(p + 4), w);
}

static int fuzz_data_hdr(const uint8_t *p, size_t n, why_buf_t *w) {
  qcoll__boot_data_hdr_t out;
  qcoll__msg_result_t r = qcoll__msg_decode_data_hdr(p, n, &out, why_arg(w));
  check_result("decode_data_hdr", r, w);
  if ((r == QCOLL__MSG_INCOMPLETE) != (n < QCOLL__BOOT_DATA_HDR_BYTES))
    broken("decode_data_hdr", "result %d for %zu bytes", (int)r, n);
  if (r != QCOLL__MSG_OK) return r;
  if (out.kind < QCOLL__BOOT_DATA_ALLGATHER ||
      out.kind > QCOLL__BOOT_DATA_BARRIER)
    broken("decode_data_hdr", "accepted kind %u", out.kind);
  if (!strcmp(qcoll__msg_data_kind_name(out.kind), "unknown"))
    broken("decode_data_hdr", "accepted kind %u has no name", out.kind);
  uint8_t re[QCOLL__BOOT_DATA_HDR_BYTES];
  qcoll__msg_encode_data_hdr(&out, re);
  if (memcmp(re, p, sizeof re))
    broken("decode_data_hdr", "accepted a header whose re-encoding differs");
  return r;
}

/* What a receiver does: read the length, then decode exactly that frame. */
static int fuzz_stream(const uint8_t *p, size_t n, why_buf_t *w) {
  if (n < 9) return -1;
  unsigned kind = p[0] % 3;
  int rank = (int32_t)be32(p + 1), nranks = (int32_t)be32(p + 5);
  p += 9;
  n -= 9;
  static const unsigned bounds_of_kind[] = {1, 0, 2};
  bounds_t b = receiver_bounds(bounds_of_kind[kind], NULL);
  size_t frame;
  int r = check_peek(p, n, b, w, &frame);
  if (r != QCOLL__MSG_OK || frame > n) return r;
  /* The receiver holds exactly the frame it announced. */
  uint8_t *copy = exact_copy(p, frame);
  if (!copy) return -1;
  if (kind == 0)
    r = fuzz_hello(copy, frame, w);
  else if (kind == 1)
    r = decode_reply(copy, frame, rank, nranks, w);
  else
    r = fuzz_ring_hello(copy, frame, w);
  free(copy);
  return r;
}

/* ---- the ring failure report ------------------------------------------- */

#define RING_HDR QCOLL__BOOT_RING_ERROR_MIN_BYTES

static bool printable_byte(uint8_t c) {
  return c >= 0x20 && c < 0x7f;
}

/* Only the magic and the type decide, and a report never passes for data. */
static void check_is_ring_error(const uint8_t *p, size_t n) {
  const char *parser = "is_ring_error";
  bool expected = n >= 6 && be32(p) == QCOLL__BOOT_DATA_MAGIC &&
                  p[5] == QCOLL__BOOT_MSG_RING_ERROR;
  bool is = qcoll__msg_is_ring_error(p, n);
  if (is != expected)
    broken(parser, "said %s for %zu bytes", is ? "yes" : "no", n);
  qcoll__boot_data_hdr_t data;
  if (is && n >= QCOLL__BOOT_DATA_HDR_BYTES &&
      qcoll__msg_decode_data_hdr(p, n, &data, NULL) != QCOLL__MSG_INVALID)
    broken(parser, "a failure report also passes as a data header");
}

/* The header alone decides the frame: a header-only copy must read the same,
 * and an accepted header holds only values the format allows. */
static int check_peek_ring_error(const uint8_t *p, size_t n, why_buf_t *w,
                                 size_t *frame) {
  const char *parser = "peek_ring_error";
  *frame = 0;
  qcoll__msg_result_t r = qcoll__msg_peek_ring_error(p, n, frame, why_arg(w));
  check_result(parser, r, w);
  if ((r == QCOLL__MSG_INCOMPLETE) != (n < RING_HDR))
    broken(parser, "result %d for %zu bytes", (int)r, n);
  if (r != QCOLL__MSG_OK) return r;
  if (!qcoll__msg_is_ring_error(p, n))
    broken(parser, "accepted a header that is_ring_error denies");
  if (p[4] != QCOLL__BOOT_VERSION) broken(parser, "accepted version %u", p[4]);
  if (p[6] | p[7] | p[12] | p[13] | p[14] | p[15])
    broken(parser, "accepted a header with reserved bits set");
  if (be32(p + 8) >= QCOLL__BOOT_MAX_RANKS)
    broken(parser, "accepted reporter %u", be32(p + 8));
  uint64_t text = be64(p + 16);
  if (text > QCOLL__BOOT_RING_ERRTEXT_MAX)
    broken(parser, "accepted %llu bytes of text, over the bound of %d",
           (unsigned long long)text, QCOLL__BOOT_RING_ERRTEXT_MAX);
  if (*frame != RING_HDR + text)
    broken(parser, "frame of %zu bytes, the header announces %llu of text",
           *frame, (unsigned long long)text);
  uint8_t *hdr = exact_copy(p, RING_HDR);
  size_t again = 0;
  if (hdr && (qcoll__msg_peek_ring_error(hdr, RING_HDR, &again, NULL) !=
                  QCOLL__MSG_OK ||
              again != *frame))
    broken(parser, "the header alone reads differently");
  free(hdr);
  return r;
}

/* Accepts exactly one whole report; the text is bounded, NUL-terminated and
 * printable (input bytes kept, unprintable ones as '?'), and re-encoding
 * gives the input's header and that text. */
static int check_decode_ring_error(const uint8_t *p, size_t n, why_buf_t *w) {
  const char *parser = "decode_ring_error";
  qcoll__boot_ring_error_t out;
  memset(&out, 'Z', sizeof out); /* an unterminated text shows */
  qcoll__msg_result_t r = qcoll__msg_decode_ring_error(p, n, &out, why_arg(w));
  check_result(parser, r, w);
  if (r == QCOLL__MSG_INCOMPLETE) broken(parser, "said incomplete");
  size_t frame = 0;
  bool one_whole_report =
      qcoll__msg_peek_ring_error(p, n, &frame, NULL) == QCOLL__MSG_OK &&
      frame == n;
  if ((r == QCOLL__MSG_OK) != one_whole_report)
    broken(parser, "result %d for %zu bytes whose header announces %zu", (int)r,
           n, frame);
  if (r != QCOLL__MSG_OK) return r;
  if (out.reporter < 0 || out.reporter >= QCOLL__BOOT_MAX_RANKS ||
      (uint32_t)out.reporter != be32(p + 8))
    broken(parser, "reporter %d from a header that says %u", out.reporter,
           be32(p + 8));
  size_t len = strnlen(out.text, sizeof out.text);
  if (len == sizeof out.text) broken(parser, "text is not NUL-terminated");
  if (len != n - RING_HDR)
    broken(parser, "text of %zu bytes from a %zu-byte report", len, n);
  if (!printable(out.text, len)) broken(parser, "text is not printable");
  for (size_t i = 0; i < len; i++) {
    uint8_t in = p[RING_HDR + i];
    if (out.text[i] != (printable_byte(in) ? (char)in : '?'))
      broken(parser, "text byte %zu is 0x%02x, the input has 0x%02x", i,
             (uint8_t)out.text[i], in);
  }
  uint8_t re[QCOLL__BOOT_RING_ERROR_MAX_BYTES];
  size_t k =
      qcoll__msg_encode_ring_error(out.reporter, out.text, re, sizeof re);
  if (k != n) broken(parser, "re-encoding has %zu bytes, input %zu", k, n);
  if (memcmp(re, p, RING_HDR) || memcmp(re + RING_HDR, out.text, len))
    broken(parser, "accepted a report whose re-encoding differs");
  qcoll__boot_ring_error_t again;
  if (qcoll__msg_decode_ring_error(re, k, &again, NULL) != QCOLL__MSG_OK ||
      again.reporter != out.reporter || strcmp(again.text, out.text))
    broken(parser, "re-encoded report decodes differently");
  return r;
}

/* The encoder fed from the input: the reporter from bytes 8..11, the text
 * from byte 24 to its first NUL (perhaps longer than the bound), and a
 * buffer of exactly the input's length.  It refuses a reporter outside the
 * largest world and a buffer too small, writes nothing past what it
 * returns, and its report decodes to what it was given, cut at the bound. */
static void check_encode_ring_error(const uint8_t *p, size_t n) {
  const char *parser = "encode_ring_error";
  if (n < 12) return;
  int32_t reporter = (int32_t)be32(p + 8);
  size_t avail = n > RING_HDR ? n - RING_HDR : 0;
  char *text = malloc(avail + 1);
  uint8_t *buf = malloc(n);
  if (!text || !buf) goto out;
  if (avail) memcpy(text, p + RING_HDR, avail);
  text[avail] = '\0';
  size_t tlen = strlen(text);
  if (tlen > QCOLL__BOOT_RING_ERRTEXT_MAX) tlen = QCOLL__BOOT_RING_ERRTEXT_MAX;
  size_t want = RING_HDR + tlen;
  bool encodable = reporter >= 0 && reporter < QCOLL__BOOT_MAX_RANKS;
  memset(buf, 0xa5, n);
  size_t k = qcoll__msg_encode_ring_error(reporter, text, buf, n);
  if (k != (encodable && n >= want ? want : 0))
    broken(parser, "wrote %zu bytes for reporter %d, %zu of text, cap %zu", k,
           reporter, tlen, n);
  for (size_t i = k; i < n; i++)
    if (buf[i] != 0xa5) broken(parser, "wrote byte %zu past its %zu", i, k);
  if (k == 0) goto out;
  qcoll__boot_ring_error_t back;
  size_t frame = 0;
  if (!qcoll__msg_is_ring_error(buf, k) ||
      qcoll__msg_peek_ring_error(buf, k, &frame, NULL) != QCOLL__MSG_OK ||
      frame != k ||
      qcoll__msg_decode_ring_error(buf, k, &back, NULL) != QCOLL__MSG_OK ||
      back.reporter != reporter || strlen(back.text) != tlen)
    broken(parser, "its report of %zu bytes does not read back", k);
  for (size_t i = 0; i < tlen; i++)
    if (buf[RING_HDR + i] != (uint8_t)text[i])
      broken(parser, "text byte %zu changed on the wire", i);
  /* One byte less room is too little, and nothing is written then. */
  free(buf);
  buf = malloc(k - 1);
  if (!buf) goto out;
  memset(buf, 0xa5, k - 1);
  if (qcoll__msg_encode_ring_error(reporter, text, buf, k - 1) != 0)
    broken(parser, "encoded a %zu-byte report into %zu bytes", k, k - 1);
  for (size_t i = 0; i < k - 1; i++)
    if (buf[i] != 0xa5) broken(parser, "refused but wrote byte %zu", i);
out:
  free(text);
  free(buf);
}

/* What a rank does with the header where it expects ring data: if it is a
 * report, peek at the header alone, then decode exactly the frame it
 * announces (bytes behind it are the stream's next).  The whole input also
 * goes to the decoder as one would-be report, and feeds the encoder. */
static int fuzz_ring_error(const uint8_t *p, size_t n, why_buf_t *w) {
  check_is_ring_error(p, n);
  size_t frame;
  int peeked = check_peek_ring_error(p, n, w, &frame);
  int whole = check_decode_ring_error(p, n, w);
  check_encode_ring_error(p, n);
  if (peeked != QCOLL__MSG_OK || frame >= n) return whole;
  uint8_t *report = exact_copy(p, frame);
  if (!report) return -1;
  int r = check_decode_ring_error(report, frame, w);
  free(report);
  return r;
}

fuzz_outcome_t fuzz_messages_one(const uint8_t *data, size_t size) {
  fuzz_outcome_t o = {-1, -1};
  if (size == 0) return o;
  why_buf_t w;
  w.null = (data[0] & 0x80) != 0;
  o.parser = (data[0] & 0x7f) % FUZZ_PARSER_COUNT;
  size_t n = size - 1;
  uint8_t *p = exact_copy(data + 1, n);
  if (!p) return o;
  switch (o.parser) {
    case FUZZ_ID: o.result = fuzz_id(p, n, &w); break;
    case FUZZ_PEEK: o.result = fuzz_peek(p, n, &w); break;
    case FUZZ_HELLO: o.result = fuzz_hello(p, n, &w); break;
    case FUZZ_RING_HELLO: o.result = fuzz_ring_hello(p, n, &w); break;
    case FUZZ_REPLY: o.result = fuzz_reply(p, n, &w); break;
    case FUZZ_DATA_HDR: o.result = fuzz_data_hdr(p, n, &w); break;
    case FUZZ_STREAM: o.result = fuzz_stream(p, n, &w); break;
    case FUZZ_RING_ERROR: o.result = fuzz_ring_error(p, n, &w); break;
  }
  free(p);
  return o;
}
