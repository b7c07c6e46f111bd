/*
 * Soak: many small all-reduces on the host back end, every result exact,
 * memory and file descriptors flat.
 *
 *   qcoll-run -n 4 rel_soak [ITERATIONS] [PROGRESS_EVERY]
 *
 * ITERATIONS (default 1000000) all-reduces of 8 f32 whose sums are exact
 * (small integers that change with the iteration).  VmRSS and the number of
 * open descriptors are read after a warm-up of 1000 calls and at the end:
 * RSS may grow by at most RSS_GROWTH_KIB, descriptors not at all.  Rank 0
 * prints progress every PROGRESS_EVERY calls (default 100000).
 */
#include <stdint.h>

#include "rel_util.h"

#define COUNT 8
#define WARMUP 1000
/* Allocator noise and the odd page of stack: anything growing per call
 * would pass this bound within a few thousand calls of a 1M run. */
#define RSS_GROWTH_KIB 256

/* AddressSanitizer keeps freed blocks in a quarantine of up to 256 MiB, so
 * RSS grows with every allocation there by design; its leak checker covers
 * that build instead. */
#if defined(__SANITIZE_ADDRESS__)
#define RSS_BOUNDED 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RSS_BOUNDED 0
#endif
#endif
#ifndef RSS_BOUNDED
#define RSS_BOUNDED 1
#endif

int main(int argc, char **argv) {
  long iterations = argc > 1 ? atol(argv[1]) : 1000000;
  long progress = argc > 2 ? atol(argv[2]) : 100000;
  if (iterations <= WARMUP || progress < 1) {
    fprintf(stderr, "usage: %s [ITERATIONS > %d] [PROGRESS_EVERY]\n", argv[0],
            WARMUP);
    return 2;
  }
  qcoll_comm_t comm = rel_init(0);
  float x[COUNT];
  const float ranks_sum = (float)(rel_size * (rel_size + 1) / 2);
  long rss_start = 0, shmem_start = 0;
  int fds_start = 0;
  double t0 = rel_now(), t_warm = t0;
  long wrong = 0;
  for (long it = 0; it < iterations; it++) {
    int v = (int)(it % 4096);
    for (int i = 0; i < COUNT; i++)
      x[i] = (float)((rel_rank + 1) * (i + 1) + v);
    qcoll_status_t st =
        qcoll_all_reduce(x, x, COUNT, QCOLL_F32, QCOLL_SUM, comm, NULL);
    if (st != QCOLL_OK) {
      EXPECT(false, "all-reduce %ld: %s (%s)", it, qcoll_status_string(st),
             qcoll_comm_last_error(comm));
      break;
    }
    for (int i = 0; i < COUNT; i++)
      wrong += x[i] != ranks_sum * (float)(i + 1) + (float)(rel_size * v);
    if (it + 1 == WARMUP) {
      rss_start = proc_status_kib("VmRSS");
      shmem_start = proc_status_kib("RssShmem");
      fds_start = proc_open_fds();
      t_warm = rel_now();
    }
    if (rel_rank == 0 && (it + 1) % progress == 0) {
      double dt = rel_now() - t0;
      printf(
          "rank 0: %ld all-reduces in %.1f s (%.1f us each), VmRSS %ld KiB, "
          "wrong %ld\n",
          it + 1, dt, dt / (double)(it + 1) * 1e6, proc_status_kib("VmRSS"),
          wrong);
      fflush(stdout);
    }
  }
  double t1 = rel_now();
  long rss_end = proc_status_kib("VmRSS"),
       shmem_end = proc_status_kib("RssShmem");
  long hwm = proc_status_kib("VmHWM");
  int fds_end = proc_open_fds();
  EXPECT(wrong == 0, "%ld wrong values", wrong);
  if (!RSS_BOUNDED && rel_rank == 0)
    printf("rank 0: built with AddressSanitizer: VmRSS growth not bounded\n");
  EXPECT(!RSS_BOUNDED || rss_end - rss_start < RSS_GROWTH_KIB,
         "VmRSS grew from %ld to %ld KiB (bound %d KiB)", rss_start, rss_end,
         RSS_GROWTH_KIB);
  EXPECT(fds_end == fds_start, "open descriptors went from %d to %d", fds_start,
         fds_end);
  qcoll_status_t st = qcoll_comm_destroy(comm);
  EXPECT(st == QCOLL_OK, "destroy: %s", qcoll_status_string(st));
  printf(
      "rank %d: %s %ld all-reduces of %d f32 on %d ranks in %.1f s "
      "(%.2f us each after warm-up), %ld wrong; VmRSS %ld -> %ld KiB "
      "(RssShmem %ld -> %ld, VmHWM %ld), descriptors %d -> %d\n",
      rel_rank, check_failures ? "FAIL" : "PASS", iterations, COUNT, rel_size,
      t1 - t0, (t1 - t_warm) / (double)(iterations - WARMUP) * 1e6, wrong,
      rss_start, rss_end, shmem_start, shmem_end, hwm, fds_start, fds_end);
  return check_failures ? 1 : 0;
}
