/*
 * Bootstrap wire formats: pure encoders and bounded decoders (see
 * message.h).  Nothing here allocates or touches a socket.
 */
#include "message.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- byte order --------------------------------------------------- */

static void put_u16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)(v >> 8);
  p[1] = (uint8_t)v;
}
static void put_u32(uint8_t *p, uint32_t v) {
  put_u16(p, (uint16_t)(v >> 16));
  put_u16(p + 2, (uint16_t)v);
}
static void put_u64(uint8_t *p, uint64_t v) {
  put_u32(p, (uint32_t)(v >> 32));
  put_u32(p + 4, (uint32_t)v);
}
static uint16_t get_u16(const uint8_t *p) {
  return (uint16_t)((unsigned)p[0] << 8 | p[1]);
}
static uint32_t get_u32(const uint8_t *p) {
  return (uint32_t)get_u16(p) << 16 | get_u16(p + 2);
}
static uint64_t get_u64(const uint8_t *p) {
  return (uint64_t)get_u32(p) << 32 | get_u32(p + 4);
}

static qcoll__msg_result_t refuse(char *why, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static qcoll__msg_result_t refuse(char *why, const char *fmt, ...) {
  if (why) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, QCOLL__BOOT_WHY_MAX, fmt, ap);
    va_end(ap);
  }
  return QCOLL__MSG_INVALID;
}

/* Printable ASCII only: the text ends up in logs and error strings. */
static char printable_or_mark(uint8_t c) {
  return (c >= 0x20 && c < 0x7f) ? (char)c : '?';
}

bool qcoll__secret_equal(const uint8_t *a, const uint8_t *b) {
  /* Accumulate every difference so the time does not depend on where the
   * first wrong byte is. */
  volatile uint8_t diff = 0;
  for (size_t i = 0; i < QCOLL__BOOT_SECRET_BYTES; i++) diff |= a[i] ^ b[i];
  return diff == 0;
}

/* ---- addresses ---------------------------------------------------- */

static void put_addr(uint8_t *p, const qcoll__boot_addr_t *a) {
  p[0] = a->family;
  p[1] = 0;
  put_u16(p + 2, a->port);
  memcpy(p + 4, a->ip, 16);
}

static qcoll__msg_result_t get_addr(const uint8_t *p, bool allow_none,
                                    qcoll__boot_addr_t *a, char *why) {
  a->family = p[0];
  a->port = get_u16(p + 2);
  memcpy(a->ip, p + 4, 16);
  if (a->family == 0 && allow_none) return QCOLL__MSG_OK;
  if (a->family != 4 && a->family != 6)
    return refuse(why, "address family %u is neither 4 nor 6", a->family);
  if (a->port == 0) return refuse(why, "address has port 0");
  return QCOLL__MSG_OK;
}

/* ---- unique id ---------------------------------------------------- */
/*  0 u32 magic | 4 u8 version | 5..24 address | 25..56 secret | rest 0 */

void qcoll__id_encode(const qcoll__boot_id_t *in, qcoll_unique_id_t *out) {
  memset(out, 0, sizeof *out);
  uint8_t *p = out->bytes;
  put_u32(p, QCOLL__BOOT_ID_MAGIC);
  p[4] = QCOLL__BOOT_VERSION;
  put_addr(p + 5, &in->root);
  memcpy(p + 5 + QCOLL__BOOT_ADDR_BYTES, in->secret, QCOLL__BOOT_SECRET_BYTES);
}

qcoll__msg_result_t qcoll__id_decode(const qcoll_unique_id_t *in,
                                     qcoll__boot_id_t *out, char *why) {
  const uint8_t *p = in->bytes;
  uint32_t magic = get_u32(p);
  if (magic != QCOLL__BOOT_ID_MAGIC)
    return refuse(why,
                  "bad magic 0x%08x (expected 0x%08x): not made by "
                  "qcoll_get_unique_id",
                  magic, QCOLL__BOOT_ID_MAGIC);
  if (p[4] != QCOLL__BOOT_VERSION)
    return refuse(why, "format version %u, this library reads version %u", p[4],
                  QCOLL__BOOT_VERSION);
  char addr_why[QCOLL__BOOT_WHY_MAX];
  if (get_addr(p + 5, false, &out->root, addr_why) != QCOLL__MSG_OK)
    return refuse(why, "root %s", addr_why);
  memcpy(out->secret, p + 5 + QCOLL__BOOT_ADDR_BYTES, QCOLL__BOOT_SECRET_BYTES);
  return QCOLL__MSG_OK;
}

/* ---- frames ------------------------------------------------------- */

static const char *type_name(unsigned type) {
  switch (type) {
    case QCOLL__BOOT_MSG_HELLO: return "hello";
    case QCOLL__BOOT_MSG_NEXT: return "ring address";
    case QCOLL__BOOT_MSG_ERROR: return "error";
    case QCOLL__BOOT_MSG_RING_HELLO: return "ring hello";
    case QCOLL__BOOT_MSG_DATA: return "data";
    case QCOLL__BOOT_MSG_RING_ERROR: return "ring failure report";
  }
  return "unknown";
}

qcoll__msg_result_t qcoll__msg_peek_length(const uint8_t *buf, size_t len,
                                           size_t min_bytes, size_t max_bytes,
                                           size_t *frame_bytes, char *why) {
  if (len < 4) return QCOLL__MSG_INCOMPLETE;
  size_t frame = 4 + (size_t)get_u32(buf);
  if (frame < min_bytes || frame > max_bytes) {
    if (min_bytes == max_bytes)
      return refuse(why, "announced a %zu-byte message, expected exactly %zu",
                    frame, min_bytes);
    return refuse(why, "announced a %zu-byte message, expected %zu..%zu", frame,
                  min_bytes, max_bytes);
  }
  *frame_bytes = frame;
  return QCOLL__MSG_OK;
}

static void put_frame_hdr(uint8_t *p, size_t frame_bytes, unsigned type) {
  put_u32(p, (uint32_t)(frame_bytes - 4));
  put_u32(p + 4, QCOLL__BOOT_MSG_MAGIC);
  p[8] = QCOLL__BOOT_VERSION;
  p[9] = (uint8_t)type;
  put_u16(p + 10, 0);
}

/* Check the common frame header of a whole frame of len bytes. */
static qcoll__msg_result_t check_frame_hdr(const uint8_t *buf, size_t len,
                                           unsigned *type, char *why) {
  if (len < QCOLL__BOOT_FRAME_HDR_BYTES)
    return refuse(why, "message of %zu bytes is shorter than its header", len);
  if ((size_t)get_u32(buf) != len - 4)
    return refuse(why, "length field says %u bytes, the frame holds %zu",
                  get_u32(buf), len - 4);
  uint32_t magic = get_u32(buf + 4);
  if (magic != QCOLL__BOOT_MSG_MAGIC)
    return refuse(why, "bad magic 0x%08x", magic);
  if (buf[8] != QCOLL__BOOT_VERSION)
    return refuse(why, "protocol version %u, this library speaks %u", buf[8],
                  QCOLL__BOOT_VERSION);
  if (get_u16(buf + 10) != 0) return refuse(why, "reserved header bits set");
  *type = buf[9];
  return QCOLL__MSG_OK;
}

static qcoll__msg_result_t expect_frame(const uint8_t *buf, size_t len,
                                        unsigned want_type, size_t want_len,
                                        char *why) {
  unsigned type = 0; /* set by check_frame_hdr when it returns OK */
  qcoll__msg_result_t r = check_frame_hdr(buf, len, &type, why);
  if (r != QCOLL__MSG_OK) return r;
  if (type != want_type)
    return refuse(why, "got a %s message (type %u), expected a %s",
                  type_name(type), type, type_name(want_type));
  if (len != want_len)
    return refuse(why, "%s of %zu bytes, expected %zu", type_name(type), len,
                  want_len);
  return QCOLL__MSG_OK;
}

/* ---- hello -------------------------------------------------------- */

size_t qcoll__msg_encode_hello(const qcoll__boot_hello_t *in, uint8_t *buf,
                               size_t cap) {
  if (cap < QCOLL__BOOT_HELLO_BYTES) return 0;
  uint8_t *p = buf;
  put_frame_hdr(p, QCOLL__BOOT_HELLO_BYTES, QCOLL__BOOT_MSG_HELLO);
  p += QCOLL__BOOT_FRAME_HDR_BYTES;
  memcpy(p, in->secret, QCOLL__BOOT_SECRET_BYTES);
  p += QCOLL__BOOT_SECRET_BYTES;
  put_u32(p, (uint32_t)in->rank);
  put_u32(p + 4, (uint32_t)in->nranks);
  put_addr(p + 8, &in->listen);
  put_u32(p + 8 + QCOLL__BOOT_ADDR_BYTES, in->timeout_ms);
  return QCOLL__BOOT_HELLO_BYTES;
}

qcoll__msg_result_t qcoll__msg_decode_hello(const uint8_t *buf, size_t len,
                                            qcoll__boot_hello_t *out,
                                            char *why) {
  qcoll__msg_result_t r = expect_frame(buf, len, QCOLL__BOOT_MSG_HELLO,
                                       QCOLL__BOOT_HELLO_BYTES, why);
  if (r != QCOLL__MSG_OK) return r;
  const uint8_t *p = buf + QCOLL__BOOT_FRAME_HDR_BYTES;
  memcpy(out->secret, p, QCOLL__BOOT_SECRET_BYTES);
  p += QCOLL__BOOT_SECRET_BYTES;
  out->rank = (int32_t)get_u32(p);
  out->nranks = (int32_t)get_u32(p + 4);
  char addr_why[QCOLL__BOOT_WHY_MAX];
  if (get_addr(p + 8, true, &out->listen, addr_why) != QCOLL__MSG_OK)
    return refuse(why, "listen %s", addr_why);
  out->timeout_ms = get_u32(p + 8 + QCOLL__BOOT_ADDR_BYTES);
  return QCOLL__MSG_OK;
}

/* ---- ring hello --------------------------------------------------- */

size_t qcoll__msg_encode_ring_hello(const qcoll__boot_ring_hello_t *in,
                                    uint8_t *buf, size_t cap) {
  if (cap < QCOLL__BOOT_RING_HELLO_BYTES) return 0;
  uint8_t *p = buf;
  put_frame_hdr(p, QCOLL__BOOT_RING_HELLO_BYTES, QCOLL__BOOT_MSG_RING_HELLO);
  p += QCOLL__BOOT_FRAME_HDR_BYTES;
  memcpy(p, in->secret, QCOLL__BOOT_SECRET_BYTES);
  p += QCOLL__BOOT_SECRET_BYTES;
  put_u32(p, (uint32_t)in->rank);
  put_u32(p + 4, (uint32_t)in->nranks);
  return QCOLL__BOOT_RING_HELLO_BYTES;
}

qcoll__msg_result_t qcoll__msg_decode_ring_hello(const uint8_t *buf, size_t len,
                                                 qcoll__boot_ring_hello_t *out,
                                                 char *why) {
  qcoll__msg_result_t r = expect_frame(buf, len, QCOLL__BOOT_MSG_RING_HELLO,
                                       QCOLL__BOOT_RING_HELLO_BYTES, why);
  if (r != QCOLL__MSG_OK) return r;
  const uint8_t *p = buf + QCOLL__BOOT_FRAME_HDR_BYTES;
  memcpy(out->secret, p, QCOLL__BOOT_SECRET_BYTES);
  p += QCOLL__BOOT_SECRET_BYTES;
  out->rank = (int32_t)get_u32(p);
  out->nranks = (int32_t)get_u32(p + 4);
  return QCOLL__MSG_OK;
}

/* ---- replies: error and ring address -------------------------------- */

size_t qcoll__msg_encode_error(const uint8_t *secret, int32_t status,
                               const char *text, uint8_t *buf, size_t cap) {
  size_t n = strnlen(text, QCOLL__BOOT_ERRTEXT_MAX);
  size_t frame = QCOLL__BOOT_ERROR_MIN_BYTES + n;
  if (cap < frame) return 0;
  uint8_t *p = buf;
  put_frame_hdr(p, frame, QCOLL__BOOT_MSG_ERROR);
  p += QCOLL__BOOT_FRAME_HDR_BYTES;
  memcpy(p, secret, QCOLL__BOOT_SECRET_BYTES);
  p += QCOLL__BOOT_SECRET_BYTES;
  put_u32(p, (uint32_t)status);
  put_u16(p + 4, (uint16_t)n);
  memcpy(p + 6, text, n);
  return frame;
}

size_t qcoll__msg_encode_next(const uint8_t *secret, int rank, int nranks,
                              const qcoll__boot_addr_t *next, uint8_t *buf,
                              size_t cap) {
  if (cap < QCOLL__BOOT_NEXT_BYTES) return 0;
  uint8_t *p = buf;
  put_frame_hdr(p, QCOLL__BOOT_NEXT_BYTES, QCOLL__BOOT_MSG_NEXT);
  p += QCOLL__BOOT_FRAME_HDR_BYTES;
  memcpy(p, secret, QCOLL__BOOT_SECRET_BYTES);
  p += QCOLL__BOOT_SECRET_BYTES;
  put_u32(p, (uint32_t)rank);
  put_u32(p + 4, (uint32_t)nranks);
  put_addr(p + 8, next);
  return QCOLL__BOOT_NEXT_BYTES;
}

static bool is_status_error(int32_t s) {
  return s <= QCOLL_ERR_INVALID_ARGUMENT && s >= QCOLL_ERR_INTERNAL;
}

static qcoll__msg_result_t decode_error(const uint8_t *buf, size_t len,
                                        qcoll__boot_reply_t *out, char *why) {
  if (len < QCOLL__BOOT_ERROR_MIN_BYTES || len > QCOLL__BOOT_ERROR_MAX_BYTES)
    return refuse(why, "error message of %zu bytes, expected %d..%d", len,
                  QCOLL__BOOT_ERROR_MIN_BYTES, QCOLL__BOOT_ERROR_MAX_BYTES);
  const uint8_t *p = buf + QCOLL__BOOT_FRAME_HDR_BYTES;
  memcpy(out->secret, p, QCOLL__BOOT_SECRET_BYTES);
  p += QCOLL__BOOT_SECRET_BYTES;
  out->status = (int32_t)get_u32(p);
  size_t n = get_u16(p + 4);
  if (!is_status_error(out->status))
    return refuse(why, "error message carries status %d, not an error",
                  out->status);
  if (n != len - QCOLL__BOOT_ERROR_MIN_BYTES)
    return refuse(why, "error text of %zu bytes in a frame with room for %zu",
                  n, len - QCOLL__BOOT_ERROR_MIN_BYTES);
  for (size_t i = 0; i < n; i++) out->text[i] = printable_or_mark(p[6 + i]);
  out->text[n] = '\0';
  return QCOLL__MSG_OK;
}

static qcoll__msg_result_t decode_next(const uint8_t *buf, size_t len,
                                       int expect_rank, int expect_nranks,
                                       qcoll__boot_reply_t *out, char *why) {
  if (len != QCOLL__BOOT_NEXT_BYTES)
    return refuse(why, "ring address of %zu bytes, expected %d", len,
                  QCOLL__BOOT_NEXT_BYTES);
  const uint8_t *p = buf + QCOLL__BOOT_FRAME_HDR_BYTES;
  memcpy(out->secret, p, QCOLL__BOOT_SECRET_BYTES);
  p += QCOLL__BOOT_SECRET_BYTES;
  out->rank = (int32_t)get_u32(p);
  out->nranks = (int32_t)get_u32(p + 4);
  if (out->rank != expect_rank || out->nranks != expect_nranks)
    return refuse(why, "ring address for rank %d of %d, expected rank %d of %d",
                  out->rank, out->nranks, expect_rank, expect_nranks);
  /* A lone rank listens nowhere; in a larger world everyone must. */
  char addr_why[QCOLL__BOOT_WHY_MAX];
  if (get_addr(p + 8, expect_nranks == 1, &out->next, addr_why) !=
      QCOLL__MSG_OK)
    return refuse(why, "ring address: %s", addr_why);
  return QCOLL__MSG_OK;
}

qcoll__msg_result_t qcoll__msg_decode_reply(const uint8_t *buf, size_t len,
                                            int expect_rank, int expect_nranks,
                                            qcoll__boot_reply_t *out,
                                            char *why) {
  unsigned type = 0; /* set by check_frame_hdr when it returns OK */
  qcoll__msg_result_t r = check_frame_hdr(buf, len, &type, why);
  if (r != QCOLL__MSG_OK) return r;
  memset(out, 0, sizeof *out);
  out->type = (int)type;
  if (type == QCOLL__BOOT_MSG_ERROR) return decode_error(buf, len, out, why);
  if (type == QCOLL__BOOT_MSG_NEXT)
    return decode_next(buf, len, expect_rank, expect_nranks, out, why);
  return refuse(why,
                "got a %s message (type %u), expected a ring address or an "
                "error",
                type_name(type), type);
}

/* ---- ring data header ---------------------------------------------- */
/* 0 u32 magic | 4 u8 version | 5 u8 type | 6 u16 kind | 8 u32 arg |
 * 12 u32 0 | 16 u64 bytes */

void qcoll__msg_encode_data_hdr(const qcoll__boot_data_hdr_t *in,
                                uint8_t out[QCOLL__BOOT_DATA_HDR_BYTES]) {
  put_u32(out, QCOLL__BOOT_DATA_MAGIC);
  out[4] = QCOLL__BOOT_VERSION;
  out[5] = QCOLL__BOOT_MSG_DATA;
  put_u16(out + 6, in->kind);
  put_u32(out + 8, in->arg);
  put_u32(out + 12, 0);
  put_u64(out + 16, in->bytes);
}

qcoll__msg_result_t qcoll__msg_decode_data_hdr(const uint8_t *buf, size_t len,
                                               qcoll__boot_data_hdr_t *out,
                                               char *why) {
  if (len < QCOLL__BOOT_DATA_HDR_BYTES) return QCOLL__MSG_INCOMPLETE;
  uint32_t magic = get_u32(buf);
  if (magic != QCOLL__BOOT_DATA_MAGIC)
    return refuse(why, "bad data magic 0x%08x", magic);
  if (buf[5] == QCOLL__BOOT_MSG_RING_ERROR)
    return refuse(why, "a failure report, not a data header");
  if (buf[4] != QCOLL__BOOT_VERSION || buf[5] != QCOLL__BOOT_MSG_DATA ||
      get_u32(buf + 12) != 0)
    return refuse(why, "malformed data header (version %u, type %u)", buf[4],
                  buf[5]);
  out->kind = get_u16(buf + 6);
  out->arg = get_u32(buf + 8);
  out->bytes = get_u64(buf + 16);
  if (out->kind < QCOLL__BOOT_DATA_ALLGATHER ||
      out->kind > QCOLL__BOOT_DATA_BARRIER)
    return refuse(why, "unknown data kind %u", out->kind);
  return QCOLL__MSG_OK;
}

const char *qcoll__msg_data_kind_name(unsigned kind) {
  switch (kind) {
    case QCOLL__BOOT_DATA_ALLGATHER: return "all-gather";
    case QCOLL__BOOT_DATA_BROADCAST: return "broadcast";
    case QCOLL__BOOT_DATA_BARRIER: return "barrier";
  }
  return "unknown";
}

/* ---- ring failure report ------------------------------------------- */

size_t qcoll__msg_encode_ring_error(int32_t reporter, const char *text,
                                    uint8_t *buf, size_t cap) {
  if (reporter < 0 || reporter >= QCOLL__BOOT_MAX_RANKS) return 0;
  size_t n = text ? strnlen(text, QCOLL__BOOT_RING_ERRTEXT_MAX) : 0;
  size_t frame = QCOLL__BOOT_RING_ERROR_MIN_BYTES + n;
  if (cap < frame) return 0;
  put_u32(buf, QCOLL__BOOT_DATA_MAGIC);
  buf[4] = QCOLL__BOOT_VERSION;
  buf[5] = QCOLL__BOOT_MSG_RING_ERROR;
  put_u16(buf + 6, 0);
  put_u32(buf + 8, (uint32_t)reporter);
  put_u32(buf + 12, 0);
  put_u64(buf + 16, n);
  if (n) memcpy(buf + QCOLL__BOOT_RING_ERROR_MIN_BYTES, text, n);
  return frame;
}

bool qcoll__msg_is_ring_error(const uint8_t *buf, size_t len) {
  return len >= 6 && get_u32(buf) == QCOLL__BOOT_DATA_MAGIC &&
         buf[5] == QCOLL__BOOT_MSG_RING_ERROR;
}

qcoll__msg_result_t qcoll__msg_peek_ring_error(const uint8_t *buf, size_t len,
                                               size_t *frame_bytes, char *why) {
  if (len < QCOLL__BOOT_RING_ERROR_MIN_BYTES) return QCOLL__MSG_INCOMPLETE;
  uint32_t magic = get_u32(buf);
  if (magic != QCOLL__BOOT_DATA_MAGIC)
    return refuse(why, "bad ring magic 0x%08x", magic);
  if (buf[5] != QCOLL__BOOT_MSG_RING_ERROR)
    return refuse(why, "got a %s message (type %u), expected a %s",
                  type_name(buf[5]), buf[5],
                  type_name(QCOLL__BOOT_MSG_RING_ERROR));
  if (buf[4] != QCOLL__BOOT_VERSION)
    return refuse(why, "protocol version %u, this library speaks %u", buf[4],
                  QCOLL__BOOT_VERSION);
  if (get_u16(buf + 6) != 0 || get_u32(buf + 12) != 0)
    return refuse(why, "reserved failure report bits set");
  uint32_t reporter = get_u32(buf + 8);
  if (reporter >= QCOLL__BOOT_MAX_RANKS)
    return refuse(why, "failure report from rank %u, beyond the largest world",
                  reporter);
  uint64_t n = get_u64(buf + 16);
  if (n > QCOLL__BOOT_RING_ERRTEXT_MAX)
    return refuse(why,
                  "failure report announces %llu bytes of text, at most "
                  "%d allowed",
                  (unsigned long long)n, QCOLL__BOOT_RING_ERRTEXT_MAX);
  *frame_bytes = QCOLL__BOOT_RING_ERROR_MIN_BYTES + (size_t)n;
  return QCOLL__MSG_OK;
}

qcoll__msg_result_t qcoll__msg_decode_ring_error(const uint8_t *buf, size_t len,
                                                 qcoll__boot_ring_error_t *out,
                                                 char *why) {
  if (len < QCOLL__BOOT_RING_ERROR_MIN_BYTES)
    return refuse(why, "failure report of %zu bytes is shorter than its header",
                  len);
  size_t frame = 0;
  qcoll__msg_result_t r = qcoll__msg_peek_ring_error(buf, len, &frame, why);
  if (r != QCOLL__MSG_OK) return r;
  if (len != frame)
    return refuse(why, "failure report of %zu bytes announces %zu", len, frame);
  size_t n = frame - QCOLL__BOOT_RING_ERROR_MIN_BYTES;
  out->reporter = (int32_t)get_u32(buf + 8);
  for (size_t i = 0; i < n; i++)
    out->text[i] = printable_or_mark(buf[QCOLL__BOOT_RING_ERROR_MIN_BYTES + i]);
  out->text[n] = '\0';
  return QCOLL__MSG_OK;
}
