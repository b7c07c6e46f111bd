/*
 * A short job for memory checkers: a few calls of every collective (small
 * one-shot and larger chunked sizes), each result checked exactly, then
 * destroy.  rel_valgrind.sh runs every rank under valgrind.
 *
 *   qcoll-run -n 2 valgrind ... rel_valgrind
 */
#include <stdint.h>

#include "rel_util.h"

static qcoll_comm_t comm;

static void check(const char *what, qcoll_status_t st, const int32_t *got,
                  const int32_t *want, size_t n) {
  EXPECT(st == QCOLL_OK, "%s: %s (%s)", what, qcoll_status_string(st),
         qcoll_comm_last_error(comm));
  size_t wrong = 0;
  for (size_t i = 0; st == QCOLL_OK && i < n; i++) wrong += got[i] != want[i];
  EXPECT(wrong == 0, "%s: %zu wrong values", what, wrong);
}

static void round_of_calls(size_t count, int round) {
  int n = rel_size, me = rel_rank;
  size_t wide = count * (size_t)n;
  int32_t *in = malloc(wide * sizeof *in), *out = malloc(wide * sizeof *out);
  int32_t *want = malloc(wide * sizeof *want);
  int32_t ranks_sum = n * (n + 1) / 2;
  for (size_t i = 0; i < wide; i++)
    in[i] = (me + 1) * (int32_t)(i % 97 + round);

  for (size_t i = 0; i < count; i++)
    want[i] = ranks_sum * (int32_t)(i % 97 + round);
  check("all_reduce",
        qcoll_all_reduce(in, out, count, QCOLL_I32, QCOLL_SUM, comm, NULL), out,
        want, count);
  int root = round % n;
  memset(out, 0, wide * sizeof *out);
  qcoll_status_t st = qcoll_reduce(in, me == root ? out : NULL, count,
                                   QCOLL_I32, QCOLL_SUM, root, comm, NULL);
  check("reduce", st, out, want, me == root ? count : 0);

  for (size_t i = 0; i < count; i++)
    want[i] = (root + 1) * (int32_t)(i % 97 + round);
  check("broadcast",
        qcoll_broadcast(in, out, count, QCOLL_I32, root, comm, NULL), out, want,
        count);

  for (size_t i = 0; i < wide; i++)
    want[i] = (int32_t)(i / count + 1) * (int32_t)(i % count % 97 + round);
  check("all_gather", qcoll_all_gather(in, out, count, QCOLL_I32, comm, NULL),
        out, want, wide);

  for (size_t i = 0; i < count; i++)
    want[i] = ranks_sum * (int32_t)((me * count + i) % 97 + round);
  check("reduce_scatter",
        qcoll_reduce_scatter(in, out, count, QCOLL_I32, QCOLL_SUM, comm, NULL),
        out, want, count);

  for (size_t i = 0; i < wide; i++)
    want[i] = (int32_t)(i / count + 1) *
              (int32_t)((me * count + i % count) % 97 + round);
  check("all_to_all", qcoll_all_to_all(in, out, count, QCOLL_I32, comm, NULL),
        out, want, wide);

  /* A ring of send/recv: even ranks send first, so nothing waits on itself. */
  int next = (me + 1) % n, prev = (me + n - 1) % n;
  for (size_t i = 0; i < count; i++)
    want[i] = (prev + 1) * (int32_t)(i % 97 + round);
  if (n > 1) {
    qcoll_status_t s1, s2;
    if (me % 2 == 0) {
      s1 = qcoll_send(in, count, QCOLL_I32, next, comm, NULL);
      s2 = qcoll_recv(out, count, QCOLL_I32, prev, comm, NULL);
    } else {
      s2 = qcoll_recv(out, count, QCOLL_I32, prev, comm, NULL);
      s1 = qcoll_send(in, count, QCOLL_I32, next, comm, NULL);
    }
    EXPECT(s1 == QCOLL_OK, "send: %s", qcoll_status_string(s1));
    check("recv", s2, out, want, count);
  }
  check("barrier", qcoll_barrier(comm, NULL), NULL, NULL, 0);
  free(in);
  free(out);
  free(want);
}

int main(void) {
  comm = rel_init(0);
  static const size_t counts[] = {8, 1000, 70000};
  for (int round = 0; round < 3; round++)
    round_of_calls(counts[round], round + 1);
  qcoll_status_t st = qcoll_comm_destroy(comm);
  EXPECT(st == QCOLL_OK, "destroy: %s", qcoll_status_string(st));
  printf("rank %d: %s\n", rel_rank, check_failures ? "FAIL" : "PASS");
  return check_failures ? 1 : 0;
}
