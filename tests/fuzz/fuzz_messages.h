/*
 * One entry point over every bootstrap parser (src/bootstrap/message.h),
 * shared by the libFuzzer target, the seed generator and the plain replay
 * driver that CTest runs in every build.
 *
 * Input layout: byte 0 chooses the parser ((byte & 0x7f) % FUZZ_PARSER_COUNT)
 * and, in its top bit, whether the decoder gets a NULL `why`; the bytes after
 * it are the parser's input (some parsers take a few parameter bytes first,
 * see fuzz_messages.c).  Besides "no crash, no read past the end", every
 * accepted input must satisfy the parser's contract (fields in range,
 * printable text, a canonical re-encoding that decodes to the same value)
 * and every refusal must carry a NUL-terminated reason.  A broken contract
 * prints what was wrong and aborts, which the fuzzer records as a crash.
 */
#ifndef QCOLL_TESTS_FUZZ_MESSAGES_H
#define QCOLL_TESTS_FUZZ_MESSAGES_H

#include <stddef.h>
#include <stdint.h>

typedef enum fuzz_parser {
  FUZZ_ID = 0,         /* qcoll__id_decode */
  FUZZ_PEEK = 1,       /* qcoll__msg_peek_length */
  FUZZ_HELLO = 2,      /* qcoll__msg_decode_hello */
  FUZZ_RING_HELLO = 3, /* qcoll__msg_decode_ring_hello */
  FUZZ_REPLY = 4,      /* qcoll__msg_decode_reply */
  FUZZ_DATA_HDR = 5,   /* qcoll__msg_decode_data_hdr */
  FUZZ_STREAM = 6,     /* peek_length then the matching decoder, as a
                          receiver does */
  FUZZ_RING_ERROR = 7, /* the ring failure report: is_ring_error,
                          peek_ring_error, decode_ring_error as a receiver
                          calls them, and encode_ring_error */
  FUZZ_PARSER_COUNT = 8
} fuzz_parser_t;

/* Outcome of one input, for the replay driver's statistics. */
typedef struct fuzz_outcome {
  int parser; /* fuzz_parser_t, or -1 for an empty input */
  int result; /* qcoll__msg_result_t of the (last) parser called */
} fuzz_outcome_t;

/* Run one input; aborts when a parser breaks its contract. */
fuzz_outcome_t fuzz_messages_one(const uint8_t *data, size_t size);

/* Seeds made by the encoders: calls emit(name, bytes, size, ctx) for each
 * (name is a short file-name-safe label).  Returns the number of seeds. */
typedef void (*fuzz_emit_fn)(const char *name, const uint8_t *bytes,
                             size_t size, void *ctx);
int fuzz_messages_seeds(fuzz_emit_fn emit, void *ctx);

/* The largest seed fuzz_messages_seeds() emits. */
#define FUZZ_SEED_MAX_BYTES 1024

#endif
