/* The bootstrap's wire formats: round trips and refusals of bad input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* cmocka needs setjmp.h, stdarg.h and stddef.h first. */
#include <cmocka.h>

#include "bootstrap/message.h"
#include "qcoll.h"

static void fill_secret(uint8_t *s, uint8_t seed) {
  for (int i = 0; i < QCOLL__BOOT_SECRET_BYTES; i++)
    s[i] = (uint8_t)(seed + 7 * i);
}

static qcoll__boot_addr_t addr4(uint8_t a, uint8_t b, uint8_t c, uint8_t d,
                                uint16_t port) {
  qcoll__boot_addr_t x;
  memset(&x, 0, sizeof x);
  x.family = 4;
  x.port = port;
  x.ip[0] = a, x.ip[1] = b, x.ip[2] = c, x.ip[3] = d;
  return x;
}

static qcoll__boot_hello_t sample_hello(void) {
  qcoll__boot_hello_t h;
  memset(&h, 0, sizeof h);
  fill_secret(h.secret, 3);
  h.rank = 5;
  h.nranks = 9;
  h.listen = addr4(10, 1, 2, 3, 40001);
  return h;
}

static void unique_id_round_trips(void **state) {
  qcoll__boot_id_t in, out;
  memset(&in, 0, sizeof in);
  in.root = addr4(192, 168, 7, 9, 29500);
  fill_secret(in.secret, 11);
  qcoll_unique_id_t id;
  qcoll__id_encode(&in, &id);
  char why[QCOLL__BOOT_WHY_MAX];
  assert_int_equal(qcoll__id_decode(&id, &out, why), QCOLL__MSG_OK);
  assert_int_equal(out.root.family, 4);
  assert_int_equal(out.root.port, 29500);
  assert_memory_equal(out.root.ip, in.root.ip, 16);
  assert_memory_equal(out.secret, in.secret, QCOLL__BOOT_SECRET_BYTES);

  /* IPv6 too. */
  in.root.family = 6;
  for (int i = 0; i < 16; i++) in.root.ip[i] = (uint8_t)(0x20 + i);
  qcoll__id_encode(&in, &id);
  assert_int_equal(qcoll__id_decode(&id, &out, why), QCOLL__MSG_OK);
  assert_int_equal(out.root.family, 6);
  assert_memory_equal(out.root.ip, in.root.ip, 16);

  /* A zeroed id (never filled in) is refused with a reason. */
  memset(&id, 0, sizeof id);
  assert_int_equal(qcoll__id_decode(&id, &out, why), QCOLL__MSG_INVALID);
  assert_non_null(strstr(why, "bad magic"));
  /* A bad family is refused. */
  qcoll__id_encode(&in, &id);
  id.bytes[5] = 5;
  assert_int_equal(qcoll__id_decode(&id, &out, why), QCOLL__MSG_INVALID);
  assert_non_null(strstr(why, "family 5"));
}

static void hello_round_trips(void **state) {
  qcoll__boot_hello_t h = sample_hello(), back;
  uint8_t buf[QCOLL__BOOT_HELLO_BYTES];
  assert_int_equal(qcoll__msg_encode_hello(&h, buf, sizeof buf),
                   QCOLL__BOOT_HELLO_BYTES);
  char why[QCOLL__BOOT_WHY_MAX];
  assert_int_equal(qcoll__msg_decode_hello(buf, sizeof buf, &back, why),
                   QCOLL__MSG_OK);
  assert_memory_equal(back.secret, h.secret, QCOLL__BOOT_SECRET_BYTES);
  assert_int_equal(back.rank, 5);
  assert_int_equal(back.nranks, 9);
  assert_int_equal(back.listen.port, 40001);
  assert_memory_equal(back.listen.ip, h.listen.ip, 16);
  /* Too small a buffer writes nothing. */
  assert_int_equal(qcoll__msg_encode_hello(&h, buf, sizeof buf - 1), 0);
  /* Negative ranks survive the trip (the root, not the parser, refuses). */
  h.rank = -1;
  qcoll__msg_encode_hello(&h, buf, sizeof buf);
  assert_int_equal(qcoll__msg_decode_hello(buf, sizeof buf, &back, why),
                   QCOLL__MSG_OK);
  assert_int_equal(back.rank, -1);
}

static void hello_refuses_bad_frames(void **state) {
  qcoll__boot_hello_t h = sample_hello(), back;
  uint8_t good[QCOLL__BOOT_HELLO_BYTES], buf[QCOLL__BOOT_HELLO_BYTES];
  qcoll__msg_encode_hello(&h, good, sizeof good);
  char why[QCOLL__BOOT_WHY_MAX];

  /* Every truncation is refused. */
  for (size_t len = 0; len < sizeof good; len++)
    assert_int_equal(qcoll__msg_decode_hello(good, len, &back, why),
                     QCOLL__MSG_INVALID);
  /* Bad magic. */
  memcpy(buf, good, sizeof buf);
  buf[5] ^= 0xff;
  assert_int_equal(qcoll__msg_decode_hello(buf, sizeof buf, &back, why),
                   QCOLL__MSG_INVALID);
  assert_non_null(strstr(why, "magic"));
  /* Another version. */
  memcpy(buf, good, sizeof buf);
  buf[8] = 99;
  assert_int_equal(qcoll__msg_decode_hello(buf, sizeof buf, &back, why),
                   QCOLL__MSG_INVALID);
  assert_non_null(strstr(why, "version 99"));
  /* Right size, wrong type. */
  memcpy(buf, good, sizeof buf);
  buf[9] = QCOLL__BOOT_MSG_NEXT;
  assert_int_equal(qcoll__msg_decode_hello(buf, sizeof buf, &back, why),
                   QCOLL__MSG_INVALID);
  assert_non_null(strstr(why, "ring address"));
  /* The length field disagrees with the frame. */
  memcpy(buf, good, sizeof buf);
  buf[3] ^= 1;
  assert_int_equal(qcoll__msg_decode_hello(buf, sizeof buf, &back, why),
                   QCOLL__MSG_INVALID);
  /* Port 0 in the listen address. */
  memcpy(buf, good, sizeof buf);
  buf[QCOLL__BOOT_FRAME_HDR_BYTES + QCOLL__BOOT_SECRET_BYTES + 8 + 2] = 0;
  buf[QCOLL__BOOT_FRAME_HDR_BYTES + QCOLL__BOOT_SECRET_BYTES + 8 + 3] = 0;
  assert_int_equal(qcoll__msg_decode_hello(buf, sizeof buf, &back, why),
                   QCOLL__MSG_INVALID);
  assert_non_null(strstr(why, "port 0"));
}

static void peek_length_bounds_the_frame(void **state) {
  size_t frame = 0;
  char why[QCOLL__BOOT_WHY_MAX];
  const uint8_t http[] = "GET / HTTP/1.1\r\n";
  assert_int_equal(qcoll__msg_peek_length(http, 3, 72, 72, &frame, why),
                   QCOLL__MSG_INCOMPLETE);
  /* "GET " as a length is about 1.2 GB: refused before any allocation. */
  assert_int_equal(
      qcoll__msg_peek_length(http, sizeof http - 1, 72, 72, &frame, why),
      QCOLL__MSG_INVALID);
  assert_non_null(strstr(why, "1195725860-byte"));
  const uint8_t ok[4] = {0, 0, 0, 68};
  assert_int_equal(qcoll__msg_peek_length(ok, 4, 72, 72, &frame, why),
                   QCOLL__MSG_OK);
  assert_int_equal(frame, 72);
  const uint8_t huge[4] = {0xff, 0xff, 0xff, 0xff};
  assert_int_equal(qcoll__msg_peek_length(huge, 4, 50, 1000, &frame, why),
                   QCOLL__MSG_INVALID);
}

static void ring_hello_round_trips(void **state) {
  qcoll__boot_ring_hello_t h, back;
  fill_secret(h.secret, 99);
  h.rank = 63;
  h.nranks = 64;
  uint8_t buf[QCOLL__BOOT_RING_HELLO_BYTES];
  assert_int_equal(qcoll__msg_encode_ring_hello(&h, buf, sizeof buf),
                   QCOLL__BOOT_RING_HELLO_BYTES);
  char why[QCOLL__BOOT_WHY_MAX];
  assert_int_equal(qcoll__msg_decode_ring_hello(buf, sizeof buf, &back, why),
                   QCOLL__MSG_OK);
  assert_int_equal(back.rank, 63);
  assert_int_equal(back.nranks, 64);
  assert_memory_equal(back.secret, h.secret, QCOLL__BOOT_SECRET_BYTES);
  /* A rendezvous hello is not a ring hello. */
  qcoll__boot_hello_t rh = sample_hello();
  uint8_t hb[QCOLL__BOOT_HELLO_BYTES];
  qcoll__msg_encode_hello(&rh, hb, sizeof hb);
  assert_int_equal(qcoll__msg_decode_ring_hello(hb, sizeof hb, &back, why),
                   QCOLL__MSG_INVALID);
}

static void ring_address_is_for_its_recipient_only(void **state) {
  uint8_t secret[QCOLL__BOOT_SECRET_BYTES];
  fill_secret(secret, 1);
  qcoll__boot_addr_t next = addr4(10, 0, 0, 4, 1004);
  uint8_t buf[QCOLL__BOOT_NEXT_BYTES];
  assert_int_equal(qcoll__msg_encode_next(secret, 3, 5, &next, buf, sizeof buf),
                   QCOLL__BOOT_NEXT_BYTES);
  qcoll__boot_reply_t reply;
  char why[QCOLL__BOOT_WHY_MAX];
  assert_int_equal(qcoll__msg_decode_reply(buf, sizeof buf, 3, 5, &reply, why),
                   QCOLL__MSG_OK);
  assert_int_equal(reply.type, QCOLL__BOOT_MSG_NEXT);
  assert_int_equal(reply.rank, 3);
  assert_int_equal(reply.nranks, 5);
  assert_memory_equal(reply.secret, secret, QCOLL__BOOT_SECRET_BYTES);
  assert_int_equal(reply.next.port, 1004);
  assert_int_equal(reply.next.ip[3], 4);
  /* Meant for another rank, or another world size: refused. */
  assert_int_equal(qcoll__msg_decode_reply(buf, sizeof buf, 2, 5, &reply, why),
                   QCOLL__MSG_INVALID);
  assert_non_null(strstr(why, "for rank 3 of 5, expected rank 2 of 5"));
  assert_int_equal(qcoll__msg_decode_reply(buf, sizeof buf, 3, 6, &reply, why),
                   QCOLL__MSG_INVALID);
  /* No address is fine for a world of one only. */
  qcoll__boot_addr_t none;
  memset(&none, 0, sizeof none);
  qcoll__msg_encode_next(secret, 0, 1, &none, buf, sizeof buf);
  assert_int_equal(qcoll__msg_decode_reply(buf, sizeof buf, 0, 1, &reply, why),
                   QCOLL__MSG_OK);
  qcoll__msg_encode_next(secret, 0, 2, &none, buf, sizeof buf);
  assert_int_equal(qcoll__msg_decode_reply(buf, sizeof buf, 0, 2, &reply, why),
                   QCOLL__MSG_INVALID);
  assert_non_null(strstr(why, "family 0"));
}

static void error_text_is_bounded_and_printable(void **state) {
  uint8_t secret[QCOLL__BOOT_SECRET_BYTES];
  fill_secret(secret, 2);
  uint8_t buf[QCOLL__BOOT_ERROR_MAX_BYTES];
  size_t n = qcoll__msg_encode_error(
      secret, QCOLL_ERR_MISMATCH, "rank 2 joined twice\n\x01", buf, sizeof buf);
  assert_int_equal(n, QCOLL__BOOT_ERROR_MIN_BYTES + 21);
  qcoll__boot_reply_t reply;
  char why[QCOLL__BOOT_WHY_MAX];
  assert_int_equal(qcoll__msg_decode_reply(buf, n, 0, 4, &reply, why),
                   QCOLL__MSG_OK);
  assert_int_equal(reply.type, QCOLL__BOOT_MSG_ERROR);
  assert_int_equal(reply.status, QCOLL_ERR_MISMATCH);
  assert_string_equal(reply.text, "rank 2 joined twice??");

  /* Text longer than the limit is cut, not overflowed. */
  char longtext[2000];
  memset(longtext, 'x', sizeof longtext - 1);
  longtext[sizeof longtext - 1] = '\0';
  n = qcoll__msg_encode_error(secret, QCOLL_ERR_TIMEOUT, longtext, buf,
                              sizeof buf);
  assert_int_equal(n, QCOLL__BOOT_ERROR_MAX_BYTES);
  assert_int_equal(qcoll__msg_decode_reply(buf, n, 0, 4, &reply, why),
                   QCOLL__MSG_OK);
  assert_int_equal(strlen(reply.text), QCOLL__BOOT_ERRTEXT_MAX);

  /* A status that is not an error is refused. */
  n = qcoll__msg_encode_error(secret, QCOLL_OK, "fine", buf, sizeof buf);
  assert_int_equal(qcoll__msg_decode_reply(buf, n, 0, 4, &reply, why),
                   QCOLL__MSG_INVALID);
  /* A text length that disagrees with the frame is refused. */
  n = qcoll__msg_encode_error(secret, QCOLL_ERR_TIMEOUT, "abc", buf,
                              sizeof buf);
  buf[QCOLL__BOOT_FRAME_HDR_BYTES + QCOLL__BOOT_SECRET_BYTES + 5] = 200;
  assert_int_equal(qcoll__msg_decode_reply(buf, n, 0, 4, &reply, why),
                   QCOLL__MSG_INVALID);
}

static void data_header_round_trips(void **state) {
  qcoll__boot_data_hdr_t h = {QCOLL__BOOT_DATA_BROADCAST, 17, 0x123456789abull},
                         back;
  uint8_t buf[QCOLL__BOOT_DATA_HDR_BYTES];
  qcoll__msg_encode_data_hdr(&h, buf);
  char why[QCOLL__BOOT_WHY_MAX];
  assert_int_equal(qcoll__msg_decode_data_hdr(buf, sizeof buf, &back, why),
                   QCOLL__MSG_OK);
  assert_int_equal(back.kind, QCOLL__BOOT_DATA_BROADCAST);
  assert_int_equal(back.arg, 17);
  assert_true(back.bytes == 0x123456789abull);
  assert_int_equal(qcoll__msg_decode_data_hdr(buf, 23, &back, why),
                   QCOLL__MSG_INCOMPLETE);
  buf[7] = 9; /* unknown kind */
  assert_int_equal(qcoll__msg_decode_data_hdr(buf, sizeof buf, &back, why),
                   QCOLL__MSG_INVALID);
}

static void ring_error_round_trips(void **state) {
  uint8_t buf[QCOLL__BOOT_RING_ERROR_MAX_BYTES];
  const char *text =
      "rank 0 timed out after 2.0 s waiting for rank 2 in the bootstrap "
      "all-gather";
  size_t n = qcoll__msg_encode_ring_error(0, text, buf, sizeof buf);
  assert_int_equal(n, QCOLL__BOOT_RING_ERROR_MIN_BYTES + strlen(text));
  /* It sits where a data header would: the same magic, its own type. */
  assert_true(qcoll__msg_is_ring_error(buf, n));
  qcoll__boot_data_hdr_t dh;
  char why[QCOLL__BOOT_WHY_MAX];
  assert_int_equal(qcoll__msg_decode_data_hdr(buf, n, &dh, why),
                   QCOLL__MSG_INVALID);
  assert_non_null(strstr(why, "failure report"));
  size_t frame = 0;
  assert_int_equal(qcoll__msg_peek_ring_error(buf, 23, &frame, why),
                   QCOLL__MSG_INCOMPLETE);
  assert_int_equal(qcoll__msg_peek_ring_error(buf, 24, &frame, why),
                   QCOLL__MSG_OK);
  assert_int_equal(frame, n);
  qcoll__boot_ring_error_t out;
  assert_int_equal(qcoll__msg_decode_ring_error(buf, n, &out, why),
                   QCOLL__MSG_OK);
  assert_int_equal(out.reporter, 0);
  assert_string_equal(out.text, text);

  /* Another reporter, an empty text. */
  n = qcoll__msg_encode_ring_error(65535, "", buf, sizeof buf);
  assert_int_equal(n, QCOLL__BOOT_RING_ERROR_MIN_BYTES);
  assert_int_equal(qcoll__msg_decode_ring_error(buf, n, &out, why),
                   QCOLL__MSG_OK);
  assert_int_equal(out.reporter, 65535);
  assert_string_equal(out.text, "");

  /* A data header is not a report. */
  qcoll__boot_data_hdr_t h = {QCOLL__BOOT_DATA_BARRIER, 0, 0};
  uint8_t hdr[QCOLL__BOOT_DATA_HDR_BYTES];
  qcoll__msg_encode_data_hdr(&h, hdr);
  assert_false(qcoll__msg_is_ring_error(hdr, sizeof hdr));
  assert_int_equal(qcoll__msg_peek_ring_error(hdr, sizeof hdr, &frame, why),
                   QCOLL__MSG_INVALID);
  assert_non_null(strstr(why, "expected a ring failure report"));
  assert_false(qcoll__msg_is_ring_error(buf, 5));
}

static void ring_error_is_bounded_and_printable(void **state) {
  uint8_t buf[QCOLL__BOOT_RING_ERROR_MAX_BYTES + 16];
  qcoll__boot_ring_error_t out;
  char why[QCOLL__BOOT_WHY_MAX];
  size_t n =
      qcoll__msg_encode_ring_error(3, "rank 3 died\n\x01\x7f", buf, sizeof buf);
  assert_int_equal(n, QCOLL__BOOT_RING_ERROR_MIN_BYTES + 14);
  assert_int_equal(qcoll__msg_decode_ring_error(buf, n, &out, why),
                   QCOLL__MSG_OK);
  assert_string_equal(out.text, "rank 3 died???");

  /* Text over the bound is cut by the encoder. */
  char longtext[2000];
  memset(longtext, 'y', sizeof longtext - 1);
  longtext[sizeof longtext - 1] = '\0';
  n = qcoll__msg_encode_ring_error(1, longtext, buf, sizeof buf);
  assert_int_equal(n, QCOLL__BOOT_RING_ERROR_MAX_BYTES);
  assert_int_equal(qcoll__msg_decode_ring_error(buf, n, &out, why),
                   QCOLL__MSG_OK);
  assert_int_equal(strlen(out.text), QCOLL__BOOT_RING_ERRTEXT_MAX);
  /* ... and a receiver refuses a header that announces more. */
  buf[16 + 6] = 0x01, buf[16 + 7] = 0x91; /* 401 bytes */
  size_t frame = 0;
  assert_int_equal(qcoll__msg_peek_ring_error(buf, n, &frame, why),
                   QCOLL__MSG_INVALID);
  assert_non_null(strstr(why, "401 bytes of text, at most 400"));
  buf[16] = 0x80; /* 2^63 bytes */
  assert_int_equal(qcoll__msg_peek_ring_error(buf, n, &frame, why),
                   QCOLL__MSG_INVALID);

  /* A cap too small, a reporter outside any world: nothing encoded. */
  assert_int_equal(qcoll__msg_encode_ring_error(1, "abc", buf, 26), 0);
  assert_int_equal(qcoll__msg_encode_ring_error(-1, "abc", buf, sizeof buf), 0);
  assert_int_equal(qcoll__msg_encode_ring_error(QCOLL__BOOT_MAX_RANKS, "abc",
                                                buf, sizeof buf),
                   0);

  /* Field by field: each corruption is refused with a reason. */
  n = qcoll__msg_encode_ring_error(2, "abc", buf, sizeof buf);
  static const struct {
    size_t at;
    uint8_t value;
    const char *reason;
  } bad[] = {
      {0, 0x00, "bad ring magic"},
      {4, 9, "protocol version 9"},
      {6, 1, "reserved"},
      {12, 1, "reserved"},
      {8, 0x01, "beyond the largest world"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    uint8_t copy[64];
    memcpy(copy, buf, n);
    copy[bad[i].at] = bad[i].value;
    memset(why, 0, sizeof why);
    assert_int_equal(qcoll__msg_decode_ring_error(copy, n, &out, why),
                     QCOLL__MSG_INVALID);
    assert_non_null(strstr(why, bad[i].reason));
  }
  /* A frame shorter or longer than it announces. */
  assert_int_equal(qcoll__msg_decode_ring_error(buf, n - 1, &out, why),
                   QCOLL__MSG_INVALID);
  assert_non_null(strstr(why, "announces"));
  buf[n] = 'z';
  assert_int_equal(qcoll__msg_decode_ring_error(buf, n + 1, &out, why),
                   QCOLL__MSG_INVALID);
  assert_int_equal(qcoll__msg_decode_ring_error(buf, 10, &out, why),
                   QCOLL__MSG_INVALID);
  assert_non_null(strstr(why, "shorter than its header"));
}

static void secrets_compare_exactly(void **state) {
  uint8_t a[QCOLL__BOOT_SECRET_BYTES], b[QCOLL__BOOT_SECRET_BYTES];
  fill_secret(a, 5);
  memcpy(b, a, sizeof b);
  assert_true(qcoll__secret_equal(a, b));
  for (int i = 0; i < QCOLL__BOOT_SECRET_BYTES; i++) {
    b[i] ^= 0x80;
    assert_false(qcoll__secret_equal(a, b));
    b[i] ^= 0x80;
  }
}

/* Random bytes into every decoder: no crash, no read past the length
 * (run under the sanitizer build to check the latter). */
static void decoders_survive_random_bytes(void **state) {
  uint8_t buf[600];
  qcoll__boot_hello_t h;
  qcoll__boot_ring_hello_t rh;
  qcoll__boot_reply_t reply;
  qcoll__boot_data_hdr_t dh;
  qcoll__boot_ring_error_t re;
  char why[QCOLL__BOOT_WHY_MAX];
  int reports = 0; /* random texts accepted behind a valid report header */
  uint32_t x = 12345;
  for (int iter = 0; iter < 20000; iter++) {
    size_t len = (size_t)(iter % (int)sizeof buf);
    for (size_t i = 0; i < len; i++) {
      x = x * 1664525u + 1013904223u;
      buf[i] = (uint8_t)(x >> 24);
    }
    /* Half the time give it a plausible header so deeper code runs. */
    if (iter & 1 && len >= QCOLL__BOOT_FRAME_HDR_BYTES) {
      uint32_t body = (uint32_t)len - 4;
      buf[0] = (uint8_t)(body >> 24), buf[1] = (uint8_t)(body >> 16);
      buf[2] = (uint8_t)(body >> 8), buf[3] = (uint8_t)body;
      buf[4] = 0x71, buf[5] = 0x63, buf[6] = 0x42, buf[7] = 0x53;
      buf[8] = QCOLL__BOOT_VERSION, buf[9] = (uint8_t)(1 + iter % 5);
      buf[10] = buf[11] = 0;
    }
    (void)qcoll__msg_decode_hello(buf, len, &h, why);
    (void)qcoll__msg_decode_ring_hello(buf, len, &rh, why);
    if (qcoll__msg_decode_reply(buf, len, 1, 4, &reply, why) == QCOLL__MSG_OK &&
        reply.type == QCOLL__BOOT_MSG_ERROR)
      assert_true(strlen(reply.text) <= QCOLL__BOOT_ERRTEXT_MAX);
    (void)qcoll__msg_decode_data_hdr(buf, len, &dh, why);
    /* And as a ring failure report, a third of the time with its header. */
    if (iter % 3 == 0 && len >= QCOLL__BOOT_RING_ERROR_MIN_BYTES) {
      uint8_t hdr[QCOLL__BOOT_RING_ERROR_MIN_BYTES];
      size_t text = len - QCOLL__BOOT_RING_ERROR_MIN_BYTES;
      qcoll__msg_encode_ring_error((int32_t)(x % 65536), "", hdr, sizeof hdr);
      hdr[23] = (uint8_t)text, hdr[22] = (uint8_t)(text >> 8);
      memcpy(buf, hdr, sizeof hdr);
    }
    size_t frame;
    (void)qcoll__msg_peek_ring_error(buf, len, &frame, why);
    if (qcoll__msg_decode_ring_error(buf, len, &re, why) == QCOLL__MSG_OK) {
      assert_true(strlen(re.text) <= QCOLL__BOOT_RING_ERRTEXT_MAX);
      assert_int_equal(strlen(re.text) + QCOLL__BOOT_RING_ERROR_MIN_BYTES, len);
      reports++;
    }
  }
  /* Lengths 24..424 with a valid header, every third of 20000 inputs. */
  assert_true(reports > 1000);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(unique_id_round_trips),
      cmocka_unit_test(hello_round_trips),
      cmocka_unit_test(hello_refuses_bad_frames),
      cmocka_unit_test(peek_length_bounds_the_frame),
      cmocka_unit_test(ring_hello_round_trips),
      cmocka_unit_test(ring_address_is_for_its_recipient_only),
      cmocka_unit_test(error_text_is_bounded_and_printable),
      cmocka_unit_test(data_header_round_trips),
      cmocka_unit_test(ring_error_round_trips),
      cmocka_unit_test(ring_error_is_bounded_and_printable),
      cmocka_unit_test(secrets_compare_exactly),
      cmocka_unit_test(decoders_survive_random_bytes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
