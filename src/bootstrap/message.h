/*
 * Wire formats of the bootstrap: the unique id, the rendezvous messages
 * (hello, ring address, error), the ring hello, the header of ring data and
 * the ring's failure report.
 *
 * Everything here is a pure function over a byte buffer: no sockets, no
 * allocation, no global state, so the parsers can be driven by a fuzzer.
 * Every decoder takes the buffer and its length, reads nothing past it,
 * and either fills its output struct or says why it refused.
 *
 * Integers travel big-endian.  A rendezvous frame is
 *
 *   u32 body_bytes | u32 magic "qcBS" | u8 version | u8 type | u16 0 | payload
 *
 * where body_bytes counts everything after itself.  Every frame has a
 * fixed size (the error text a bounded one), so a receiver never allocates
 * at a size a peer chose.
 */
#ifndef QCOLL_BOOTSTRAP_MESSAGE_H
#define QCOLL_BOOTSTRAP_MESSAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qcoll.h"

#ifdef __cplusplus
extern "C" {
#endif

#define QCOLL__BOOT_SECRET_BYTES 32
/* The largest world the bootstrap accepts. */
#define QCOLL__BOOT_MAX_RANKS 65536
/* Longest error text the root sends (bytes, without a NUL). */
#define QCOLL__BOOT_ERRTEXT_MAX 480
/* Room for a "why" explanation written by the decoders. */
#define QCOLL__BOOT_WHY_MAX 160

#define QCOLL__BOOT_ID_MAGIC 0x71634944u   /* "qcID" */
#define QCOLL__BOOT_MSG_MAGIC 0x71634253u  /* "qcBS" */
#define QCOLL__BOOT_DATA_MAGIC 0x71634454u /* "qcDT" */
#define QCOLL__BOOT_VERSION 1

typedef enum qcoll__boot_msg_type {
  QCOLL__BOOT_MSG_HELLO = 1,      /* rank -> root */
  QCOLL__BOOT_MSG_NEXT = 2,       /* root -> rank: where rank+1 listens */
  QCOLL__BOOT_MSG_ERROR = 3,      /* root -> rank: why the rendezvous failed */
  QCOLL__BOOT_MSG_RING_HELLO = 4, /* rank -> rank+1 */
  QCOLL__BOOT_MSG_DATA = 5,       /* ring collective data */
  QCOLL__BOOT_MSG_RING_ERROR = 6  /* ring: why a rank's ring failed */
} qcoll__boot_msg_type_t;

/* Kinds of ring data, so ranks that call different collectives (or the
 * same one with different sizes) are told so instead of misreading bytes. */
typedef enum qcoll__boot_data_kind {
  QCOLL__BOOT_DATA_ALLGATHER = 1,
  QCOLL__BOOT_DATA_BROADCAST = 2,
  QCOLL__BOOT_DATA_BARRIER = 3
} qcoll__boot_data_kind_t;

typedef enum qcoll__msg_result {
  QCOLL__MSG_OK = 0,
  QCOLL__MSG_INCOMPLETE = 1, /* valid so far: more bytes are needed */
  QCOLL__MSG_INVALID = 2     /* refused; `why` says why */
} qcoll__msg_result_t;

/* An IP endpoint: family 4 or 6 (0 = none, for a rank that listens
 * nowhere because it is alone), port in host order, address in network
 * order (IPv4 uses the first 4 bytes). */
typedef struct qcoll__boot_addr {
  uint8_t family;
  uint16_t port;
  uint8_t ip[16];
} qcoll__boot_addr_t;

/* What a unique id holds. */
typedef struct qcoll__boot_id {
  qcoll__boot_addr_t root;
  uint8_t secret[QCOLL__BOOT_SECRET_BYTES];
} qcoll__boot_id_t;

typedef struct qcoll__boot_hello {
  uint8_t secret[QCOLL__BOOT_SECRET_BYTES];
  int32_t rank;
  int32_t nranks;
  qcoll__boot_addr_t listen; /* where this rank accepts its ring peer */
  /* The rank's deadline (its config or QCOLL_TIMEOUT) in milliseconds; 0 =
   * none given.  The root keeps the smallest one it was told, so the
   * rendezvous ends (naming the missing ranks) before any rank's own wait
   * for the answer does. */
  uint32_t timeout_ms;
} qcoll__boot_hello_t;

typedef struct qcoll__boot_ring_hello {
  uint8_t secret[QCOLL__BOOT_SECRET_BYTES];
  int32_t rank; /* the sender */
  int32_t nranks;
} qcoll__boot_ring_hello_t;

/* The root's answer: the ring address of the recipient's successor (each
 * rank needs only that one, so the root sends O(nranks) bytes in all, not
 * a whole table to everyone), or an error. */
typedef struct qcoll__boot_reply {
  int type; /* QCOLL__BOOT_MSG_NEXT or QCOLL__BOOT_MSG_ERROR */
  uint8_t secret[QCOLL__BOOT_SECRET_BYTES];
  int32_t status;                         /* error: a negative qcoll status */
  char text[QCOLL__BOOT_ERRTEXT_MAX + 1]; /* error: printable, NUL-ended */
  int32_t rank, nranks;                   /* next: the recipient */
  qcoll__boot_addr_t next;                /* next: where rank+1 listens */
} qcoll__boot_reply_t;

typedef struct qcoll__boot_data_hdr {
  uint16_t kind; /* qcoll__boot_data_kind_t */
  uint32_t arg;  /* all-gather: block index; broadcast: root */
  uint64_t bytes;
} qcoll__boot_data_hdr_t;

/* Longest text of a ring failure report (bytes, without a NUL): a few
 * hundred, so a rank can send one without waiting on a full socket. */
#define QCOLL__BOOT_RING_ERRTEXT_MAX 400

/* A ring failure report.  A rank whose ring fails sends one to both
 * neighbours before it shuts its sockets; a rank that receives one fails
 * with its text and passes it on unchanged, so every rank learns the first
 * failure instead of seeing only connections close. */
typedef struct qcoll__boot_ring_error {
  int32_t reporter; /* the rank that failed first and wrote the text */
  char text[QCOLL__BOOT_RING_ERRTEXT_MAX + 1]; /* printable, NUL-ended */
} qcoll__boot_ring_error_t;

/* Sizes on the wire. */
#define QCOLL__BOOT_FRAME_HDR_BYTES 12
#define QCOLL__BOOT_ADDR_BYTES 20
#define QCOLL__BOOT_HELLO_BYTES                                 \
  (QCOLL__BOOT_FRAME_HDR_BYTES + QCOLL__BOOT_SECRET_BYTES + 8 + \
   QCOLL__BOOT_ADDR_BYTES + 4)
#define QCOLL__BOOT_RING_HELLO_BYTES \
  (QCOLL__BOOT_FRAME_HDR_BYTES + QCOLL__BOOT_SECRET_BYTES + 8)
#define QCOLL__BOOT_ERROR_MIN_BYTES \
  (QCOLL__BOOT_FRAME_HDR_BYTES + QCOLL__BOOT_SECRET_BYTES + 6)
#define QCOLL__BOOT_ERROR_MAX_BYTES \
  (QCOLL__BOOT_ERROR_MIN_BYTES + QCOLL__BOOT_ERRTEXT_MAX)
#define QCOLL__BOOT_NEXT_BYTES                                  \
  (QCOLL__BOOT_FRAME_HDR_BYTES + QCOLL__BOOT_SECRET_BYTES + 8 + \
   QCOLL__BOOT_ADDR_BYTES)
/* The largest answer of the root (an error with the longest text). */
#define QCOLL__BOOT_REPLY_MAX_BYTES QCOLL__BOOT_ERROR_MAX_BYTES
#define QCOLL__BOOT_DATA_HDR_BYTES 24
/* A ring failure report: a header the size of a data header, then text. */
#define QCOLL__BOOT_RING_ERROR_MIN_BYTES QCOLL__BOOT_DATA_HDR_BYTES
#define QCOLL__BOOT_RING_ERROR_MAX_BYTES \
  (QCOLL__BOOT_RING_ERROR_MIN_BYTES + QCOLL__BOOT_RING_ERRTEXT_MAX)

/* Constant-time comparison of two secrets. */
bool qcoll__secret_equal(const uint8_t *a, const uint8_t *b);

/* ---- unique id ---------------------------------------------------- */
void qcoll__id_encode(const qcoll__boot_id_t *in, qcoll_unique_id_t *out);
qcoll__msg_result_t qcoll__id_decode(const qcoll_unique_id_t *in,
                                     qcoll__boot_id_t *out, char *why);

/* ---- frames ------------------------------------------------------- */

/* Look at the first len bytes of a frame: INCOMPLETE until the 4-byte
 * length is there; INVALID when the whole frame would be outside
 * [min_bytes, max_bytes]; else OK with *frame_bytes = 4 + body_bytes. */
qcoll__msg_result_t qcoll__msg_peek_length(const uint8_t *buf, size_t len,
                                           size_t min_bytes, size_t max_bytes,
                                           size_t *frame_bytes, char *why);

/* Encoders return the bytes written, or 0 when cap is too small or the
 * input cannot be encoded. */
size_t qcoll__msg_encode_hello(const qcoll__boot_hello_t *in, uint8_t *buf,
                               size_t cap);
size_t qcoll__msg_encode_ring_hello(const qcoll__boot_ring_hello_t *in,
                                    uint8_t *buf, size_t cap);
size_t qcoll__msg_encode_error(const uint8_t *secret, int32_t status,
                               const char *text, uint8_t *buf, size_t cap);
/* next may have family 0 only when nranks is 1. */
size_t qcoll__msg_encode_next(const uint8_t *secret, int rank, int nranks,
                              const qcoll__boot_addr_t *next, uint8_t *buf,
                              size_t cap);

/* Decoders take exactly one whole frame (len bytes, length prefix
 * included).  They check framing and field syntax; semantic checks (is the
 * secret right, is the rank in range) are the caller's. */
qcoll__msg_result_t qcoll__msg_decode_hello(const uint8_t *buf, size_t len,
                                            qcoll__boot_hello_t *out,
                                            char *why);
qcoll__msg_result_t qcoll__msg_decode_ring_hello(const uint8_t *buf, size_t len,
                                                 qcoll__boot_ring_hello_t *out,
                                                 char *why);
/* A ring address must be addressed to expect_rank of expect_nranks. */
qcoll__msg_result_t qcoll__msg_decode_reply(const uint8_t *buf, size_t len,
                                            int expect_rank, int expect_nranks,
                                            qcoll__boot_reply_t *out,
                                            char *why);

/* ---- ring data header --------------------------------------------- */
void qcoll__msg_encode_data_hdr(const qcoll__boot_data_hdr_t *in,
                                uint8_t out[QCOLL__BOOT_DATA_HDR_BYTES]);
qcoll__msg_result_t qcoll__msg_decode_data_hdr(const uint8_t *buf, size_t len,
                                               qcoll__boot_data_hdr_t *out,
                                               char *why);

const char *qcoll__msg_data_kind_name(unsigned kind);

/* ---- ring failure report ------------------------------------------- */
/* It travels where a data header is expected (and, backwards, on the
 * connection nobody otherwise writes to): the data header's layout with
 * type QCOLL__BOOT_MSG_RING_ERROR, the reporter where data has the block
 * index and the text's length where data has the payload's, then the text.
 *
 *   0 u32 magic "qcDT" | 4 u8 version | 5 u8 type 6 | 6 u16 0 |
 *   8 u32 reporter | 12 u32 0 | 16 u64 text bytes | 24 text */

/* Encode (text cut at QCOLL__BOOT_RING_ERRTEXT_MAX bytes): the bytes
 * written, or 0 when cap is too small or reporter is outside
 * [0, QCOLL__BOOT_MAX_RANKS). */
size_t qcoll__msg_encode_ring_error(int32_t reporter, const char *text,
                                    uint8_t *buf, size_t cap);
/* Does this ring header (len >= 6 bytes) start a failure report rather
 * than data?  Only the magic and the type are looked at. */
bool qcoll__msg_is_ring_error(const uint8_t *buf, size_t len);
/* Read a report's header: INCOMPLETE below QCOLL__BOOT_RING_ERROR_MIN_BYTES;
 * INVALID when it is not a well-formed report header (or announces a text
 * over the bound); else OK with *frame_bytes, the whole report's size. */
qcoll__msg_result_t qcoll__msg_peek_ring_error(const uint8_t *buf, size_t len,
                                               size_t *frame_bytes, char *why);
/* Decode exactly one whole report; unprintable text bytes become '?'.
 * Whether the reporter is in the world is the caller's check. */
qcoll__msg_result_t qcoll__msg_decode_ring_error(const uint8_t *buf, size_t len,
                                                 qcoll__boot_ring_error_t *out,
                                                 char *why);

#ifdef __cplusplus
}
#endif

#endif
