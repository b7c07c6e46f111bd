/*
 * GPU soak: two captured all-reduces replayed many times must stay exact,
 * leak nothing and raise no asynchronous error.
 *
 *   qcoll-run -n 2 gpu_soak [REPLAYS] [CHECK_EVERY] [TIME_LIMIT_S]
 *
 * Two CUDA graphs, each captured once and then replayed REPLAYS times
 * (default 100000), alternately, on one stream:
 *   A: fill -> two-shot all-reduce (forced) -> check -> bump, f32
 *   B: fill -> one-shot all-reduce (forced) -> check -> bump, bf16
 * of COUNT elements each.  The fill kernel reads the replay index from
 * device memory and writes small integers that depend on the graph, the
 * rank, the element and the replay (gpu_soak.h); the bump node advances the
 * index.  So the graphs never change, yet every replay reduces new data,
 * and every sum is exact: every rank's result must equal the sum of the
 * inputs bit for bit.
 *
 * What is checked:
 *  - every replay, on the device: a check kernel in the graph compares the
 *    whole result with the expected sums and counts wrong elements;
 *  - every CHECK_EVERY replays (default 1000) and at the end, on the host:
 *    the stream finishes within a deadline, each graph's replay index and
 *    device check count equal the replays done, no wrong element so far,
 *    the last result copied back equals the expected sums exactly, and
 *    qcoll_comm_get_async_error() stays QCOLL_OK.  The ranks agree on the
 *    verdict (a host all-reduce) so all stop together after a failure;
 *  - memory: after the first CHECK_EVERY replays (the warm-up) and at the
 *    end, with every rank idle, VmRSS (/proc/self/status) must grow by less
 *    than RSS_GROWTH_BOUND_KIB, the GPU memory in use (cudaMemGetInfo:
 *    total - free, the whole device, so every rank on it) by less than
 *    GPU_GROWTH_BOUND_BYTES, and open descriptors not at all;
 *  - time: the run must finish within TIME_LIMIT_S (default 180).  After the
 *    warm-up the total is projected from the pace so far; a run that cannot
 *    make it stops at once and says why (usually: ranks sharing a GPU
 *    without the MPS daemon are time-sliced, far slower).
 * Rank 0 prints progress every 10 %; every rank prints a final PASS or FAIL
 * line with the numbers.  Exits 77 ("skipped") without a GPU.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../reliability/proc_readings.h"
#include "gpu_soak.h"

#define COUNT ((size_t)64 * 1024)
/* Nothing in a replay allocates: any per-replay growth of a few bytes
 * would exceed these bounds long before 100 000 replays.  cudaMemGetInfo
 * moves in pages of 2 MiB, so the GPU bound means "no page at all". */
#define RSS_GROWTH_BOUND_KIB 1024L
/* The growth left once the checkpoints' own host work is taken out (see
 * checkpoints_alone): the library runs no host code during a replay, so
 * this is "flat"; an earlier run grew +36 KiB in all over 100 000 replays
 * (steps of 4 KiB), and this bound says which side that came from. */
#define REPLAY_GROWTH_BOUND_KIB 16L
#define GPU_GROWTH_BOUND_BYTES ((long long)1 << 20)
/* A checkpoint waits this long for the stream: longer than the kernels' own
 * deadline (QCOLL_TIMEOUT, 60 s in the CTest), so a stuck all-reduce is
 * reported by the library first. */
#define CHECKPOINT_WAIT_S 120.0

/* AddressSanitizer keeps freed blocks in a quarantine, so RSS grows by
 * design there; its leak checker covers that build instead. */
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

typedef struct settings {
  long replays;     /* of each graph */
  long check_every; /* replays between host checks; also the warm-up */
  double limit_s;   /* wall-clock budget of the replays */
} settings_t;

/* One captured all-reduce and everything it touches. */
typedef struct soak_graph {
  const char *name;
  qcoll_algo_t algo;
  qcoll_dtype_t dtype;
  uint32_t salt;           /* makes its inputs differ from the other graph's */
  void *send, *recv;       /* device */
  unsigned *replay;        /* device: index of the next replay */
  gt_check_state_t *state; /* device: what the in-graph checks found */
  void *result;            /* pinned host copy of recv */
  unsigned long long device_checks; /* as of the last host check */
  long host_checks;
  cudaGraph_t graph;
  cudaGraphExec_t exec;
} soak_graph_t;

typedef struct memory_reading {
  long rss_kib, hwm_kib;
  long long gpu_used; /* bytes, the whole device */
  int fds;
} memory_reading_t;

static qcoll_comm_t comm;
static cudaStream_t stream;

/* ---- arguments ----------------------------------------------------------- */

static void usage(const char *why) {
  fprintf(stderr,
          "gpu_soak: %s\n"
          "usage: qcoll-run -n N gpu_soak [REPLAYS] [CHECK_EVERY] "
          "[TIME_LIMIT_S]\n"
          "  REPLAYS      replays of each graph (default 100000)\n"
          "  CHECK_EVERY  replays between host checks, also the warm-up "
          "(default 1000; REPLAYS >= 2 * CHECK_EVERY)\n"
          "  TIME_LIMIT_S wall-clock budget in seconds (default 180)\n",
          why);
  exit(2);
}

static settings_t parse_args(int argc, char **argv) {
  settings_t s = {100000, 1000, 180};
  if (argc > 4) usage("too many arguments");
  char *end;
  if (argc > 1 && ((s.replays = strtol(argv[1], &end, 10)) < 1 || *end))
    usage("REPLAYS must be a positive integer");
  if (argc > 2 && ((s.check_every = strtol(argv[2], &end, 10)) < 1 || *end))
    usage("CHECK_EVERY must be a positive integer");
  if (argc > 3 && (!((s.limit_s = strtod(argv[3], &end)) > 0) || *end))
    usage("TIME_LIMIT_S must be a positive number");
  /* Memory growth is measured between the warm-up and the end. */
  if (s.replays < 2 * s.check_every)
    usage("REPLAYS must be at least twice CHECK_EVERY (warm-up + soak)");
  if (s.replays > (long)UINT32_MAX)
    usage("REPLAYS must fit the 32-bit replay index");
  return s;
}

/* ---- memory readings ---------------------------------------------------- */

static memory_reading_t read_memory(void) {
  memory_reading_t m;
  size_t free_b = 0, total_b = 0;
  GT_CUDA(cudaMemGetInfo(&free_b, &total_b));
  m.gpu_used = (long long)total_b - (long long)free_b;
  m.fds = proc_open_fds();
  m.rss_kib = proc_status_kib("VmRSS");
  m.hwm_kib = proc_status_kib("VmHWM");
  return m;
}

static double mib(long long bytes) {
  return (double)bytes / (1024.0 * 1024.0);
}

/* ---- the graphs -----------------------------------------------------------
 */

static void graph_setup(soak_graph_t *g) {
  size_t bytes = COUNT * gt_dtype_size(g->dtype);
  GT_CUDA(cudaMalloc(&g->send, bytes));
  GT_CUDA(cudaMalloc(&g->recv, bytes));
  GT_CUDA(cudaMalloc((void **)&g->replay, sizeof *g->replay));
  GT_CUDA(cudaMalloc((void **)&g->state, sizeof *g->state));
  GT_CUDA(cudaMallocHost(&g->result, bytes));
  GT_CUDA(cudaMemset(g->replay, 0, sizeof *g->replay));
  GT_CUDA(cudaMemset(g->state, 0, sizeof *g->state));
  GT_CUDA(cudaDeviceSynchronize());

  qcoll_all_reduce_options_t opts;
  GT_QCOLL(comm, qcoll_all_reduce_options_init(&opts));
  opts.algo = g->algo;
  GT_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  GT_CUDA(soak_fill_launch(g->send, COUNT, g->dtype, g->salt, gt_rank,
                           g->replay, stream));
  qcoll_status_t st = qcoll_all_reduce_ex(g->send, g->recv, COUNT, g->dtype,
                                          QCOLL_SUM, comm, stream, &opts);
  if (st != QCOLL_OK) {
    gt_fail("%s: capturing qcoll_all_reduce_ex returned %s: %s", g->name,
            qcoll_status_string(st), gt_last_error(comm));
    exit(1);
  }
  GT_CUDA(soak_check_launch(g->recv, COUNT, g->dtype, g->salt, gt_nranks,
                            g->replay, g->state, stream));
  GT_CUDA(gt_bump_launch(g->replay, stream));
  GT_CUDA(cudaStreamEndCapture(stream, &g->graph));
  GT_CUDA(cudaGraphInstantiate(&g->exec, g->graph, 0));
}

static void graph_teardown(soak_graph_t *g) {
  GT_CUDA(cudaGraphExecDestroy(g->exec));
  GT_CUDA(cudaGraphDestroy(g->graph));
}

static void graph_free(soak_graph_t *g) {
  GT_CUDA(cudaFree(g->send));
  GT_CUDA(cudaFree(g->recv));
  GT_CUDA(cudaFree(g->replay));
  GT_CUDA(cudaFree(g->state));
  GT_CUDA(cudaFreeHost(g->result));
}

/* After `done` replays (the stream idle): the replay index and the device
 * checks account for every replay, none found a wrong element, and the last
 * result, read back, is exact.  Returns the number of problems. */
static int graph_verify(soak_graph_t *g, long done) {
  int problems = 0;
  unsigned replay = 0;
  gt_check_state_t s;
  GT_CUDA(
      cudaMemcpy(&replay, g->replay, sizeof replay, cudaMemcpyDeviceToHost));
  GT_CUDA(cudaMemcpy(&s, g->state, sizeof s, cudaMemcpyDeviceToHost));
  if ((long)replay != done) {
    gt_fail("%s: the replay index is %u after %ld replays", g->name, replay,
            done);
    problems++;
  }
  if ((long)s.checks != done) {
    gt_fail("%s: %llu device checks ran in %ld replays", g->name, s.checks,
            done);
    problems++;
  }
  if (gt_report_check(&s, g->name)) problems++;
  g->device_checks = s.checks;

  GT_CUDA(cudaMemcpy(g->result, g->recv, COUNT * gt_dtype_size(g->dtype),
                     cudaMemcpyDeviceToHost));
  g->host_checks++;
  uint32_t last = (uint32_t)(done - 1);
  size_t wrong = 0;
  for (size_t i = 0; i < COUNT; i++) {
    float want = soak_expected(g->salt, gt_nranks, (uint32_t)i, last);
    float got = gt_load(g->result, i, g->dtype);
    if (got == want) continue;
    if (wrong < 5)
      gt_fail("%s: replay %u, element %zu: expected %g, got %g (0x%x)", g->name,
              last, i, want, got, gt_bits(g->result, i, g->dtype));
    wrong++;
  }
  if (wrong) {
    gt_fail("%s: replay %u: %zu of %zu elements wrong (read on the host)",
            g->name, last, wrong, COUNT);
    problems++;
  }
  return problems;
}

/* ---- the soak ---------------------------------------------------------------
 */

/* What every rank learns at a checkpoint: did any rank fail, is any rank
 * over its time budget (a host all-reduce, MAX). */
typedef struct verdict {
  int failed, too_slow;
} verdict_t;

static verdict_t agree(verdict_t mine) {
  int32_t v[2] = {mine.failed, mine.too_slow};
  GT_QCOLL(comm, qcoll_all_reduce(v, v, 2, QCOLL_I32, QCOLL_MAX, comm, NULL));
  return (verdict_t){v[0], v[1]};
}

static int check_async_error(void) {
  qcoll_status_t async = QCOLL_OK;
  GT_QCOLL(comm, qcoll_comm_get_async_error(comm, &async));
  if (async == QCOLL_OK) return 0;
  gt_fail("asynchronous error: %s: %s", qcoll_status_string(async),
          gt_last_error(comm));
  return 1;
}

/* The pace after `done` replays, against the budget: the projection counts
 * from the first checkpoint on, later ones compare the time used. */
static int over_budget(const settings_t *s, long done, double elapsed) {
  double projected = elapsed / (double)done * (double)s->replays;
  if (projected <= s->limit_s && elapsed <= s->limit_s) return 0;
  gt_fail(
      "too slow: %ld replays of both graphs took %.1f s (%.1f us per pair), "
      "so %ld would take about %.0f s, over the limit of %.0f s.  Ranks "
      "sharing a GPU without the MPS daemon are time-sliced, which is far "
      "slower than the tens of microseconds a pair should take: start it "
      "(scripts/gpu-tests.sh does), or give fewer REPLAYS",
      done, elapsed, elapsed / (double)done * 1e6, s->replays, projected,
      s->limit_s);
  return 1;
}

static void print_progress(const settings_t *s, long done, double elapsed,
                           const memory_reading_t *base) {
  memory_reading_t m = read_memory();
  char growth[96] = "";
  if (base)
    snprintf(growth, sizeof growth, " (%+ld KiB since the warm-up)",
             m.rss_kib - base->rss_kib);
  gt_note(
      "%ld/%ld replays (%.0f %%) in %.1f s, %.1f us per pair; VmRSS %ld KiB%s; "
      "GPU in use %.1f MiB%s",
      done, s->replays, 100.0 * (double)done / (double)s->replays, elapsed,
      elapsed / (double)done * 1e6, m.rss_kib, growth, mib(m.gpu_used),
      base ? "" : " (warm-up)");
}

/* Growth from the warm-up to the end, against the bounds. */
static void check_growth(const memory_reading_t *base,
                         const memory_reading_t *end) {
  if (RSS_BOUNDED && end->rss_kib - base->rss_kib >= RSS_GROWTH_BOUND_KIB)
    gt_fail("VmRSS grew from %ld to %ld KiB (+%ld KiB, bound %ld KiB)",
            base->rss_kib, end->rss_kib, end->rss_kib - base->rss_kib,
            RSS_GROWTH_BOUND_KIB);
  if (!RSS_BOUNDED)
    gt_note("built with AddressSanitizer: VmRSS growth not bounded");
  if (end->gpu_used - base->gpu_used >= GPU_GROWTH_BOUND_BYTES)
    gt_fail(
        "GPU memory in use grew from %.1f to %.1f MiB (+%lld bytes, bound "
        "%lld; cudaMemGetInfo covers the whole device: was anything else "
        "running on it?)",
        mib(base->gpu_used), mib(end->gpu_used), end->gpu_used - base->gpu_used,
        GPU_GROWTH_BOUND_BYTES);
  if (end->fds > base->fds)
    gt_fail("open descriptors went from %d to %d", base->fds, end->fds);
}

/* The host work of n checkpoints without any replay (the same stream wait,
 * device reads, async-error poll and host all-reduce): returns the VmRSS
 * growth it alone causes, so the soak's growth can be split between the
 * replays and the checkpoints. */
static long checkpoints_alone(const soak_graph_t *graphs, long n,
                              cudaStream_t stream) {
  GT_QCOLL(comm, qcoll_barrier(comm, NULL));
  long before = proc_status_kib("VmRSS");
  for (long k = 0; k < n; k++) {
    gt_wait_stream(stream, CHECKPOINT_WAIT_S, "the checkpoints alone");
    for (int g = 0; g < 2; g++) {
      unsigned replay = 0;
      GT_CUDA(cudaMemcpy(&replay, graphs[g].replay, sizeof replay,
                         cudaMemcpyDeviceToHost));
    }
    (void)check_async_error();
    (void)agree((verdict_t){0, 0});
  }
  GT_QCOLL(comm, qcoll_barrier(comm, NULL));
  return proc_status_kib("VmRSS") - before;
}

int main(int argc, char **argv) {
  settings_t s = parse_args(argc, argv);
  gt_skip_without_gpu("gpu_soak");
  comm = gt_init();
  if (gt_nranks < 2 || gt_nranks > SOAK_MAX_RANKS) {
    gt_fail(
        "needs 2..%d ranks (sums must stay exact in bf16), got %d: run "
        "it as qcoll-run -n 2 gpu_soak",
        SOAK_MAX_RANKS, gt_nranks);
    return 1;
  }
  GT_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  soak_graph_t graphs[2] = {
      {.name = "graph A: two-shot f32",
       .algo = QCOLL_ALGO_TWOSHOT,
       .dtype = QCOLL_F32,
       .salt = 1},
      {.name = "graph B: one-shot bf16",
       .algo = QCOLL_ALGO_ONESHOT,
       .dtype = QCOLL_BF16,
       .salt = 2},
  };
  for (int g = 0; g < 2; g++) graph_setup(&graphs[g]);
  if (gt_rank == 0)
    gt_note(
        "%ld replays of 2 graphs (fill -> all-reduce of %zu elements -> "
        "check -> bump): %s, %s; %d ranks on device %d; host check every %ld "
        "replays; time limit %.0f s; bounds: VmRSS +%ld KiB, GPU +%lld bytes",
        s.replays, COUNT, graphs[0].name, graphs[1].name, gt_nranks,
        gt_device(), s.check_every, s.limit_s, RSS_GROWTH_BOUND_KIB,
        GPU_GROWTH_BOUND_BYTES);
  /* Everything a checkpoint does outside the replays runs once before the
   * loop, so nothing lazy in it lands between the two memory readings. */
  (void)read_memory();
  (void)check_async_error();
  GT_QCOLL(comm, qcoll_barrier(comm, NULL));

  memory_reading_t base = {0}, end = {0};
  const long progress_step = (s.replays + 9) / 10;
  long next_progress = progress_step, done = 0;
  double t0 = gt_now(), t_warm = t0;
  while (done < s.replays) {
    long batch =
        s.check_every < s.replays - done ? s.check_every : s.replays - done;
    for (long k = 0; k < batch; k++)
      for (int g = 0; g < 2; g++)
        GT_CUDA(cudaGraphLaunch(graphs[g].exec, stream));
    done += batch;

    char what[96];
    snprintf(what, sizeof what, "the replays up to %ld", done);
    gt_wait_stream(stream, CHECKPOINT_WAIT_S, what);
    double elapsed = gt_now() - t0;
    verdict_t mine = {0, 0};
    for (int g = 0; g < 2; g++)
      mine.failed |= graph_verify(&graphs[g], done) != 0;
    mine.failed |= check_async_error();
    mine.too_slow = done < s.replays && over_budget(&s, done, elapsed);
    verdict_t all = agree(mine);
    if (all.failed || all.too_slow) {
      if (!mine.failed && !mine.too_slow)
        gt_fail("stopping after %ld replays: another rank %s", done,
                all.failed ? "reported a failure" : "is over the time limit");
      break;
    }
    bool warm_up = done == s.check_every, last = done == s.replays;
    if (warm_up || last) {
      /* Every rank is idle here (past the agreement), so the device-wide
       * reading sees no one's work in progress; the barrier keeps it so
       * until every rank has read. */
      memory_reading_t m = read_memory();
      if (warm_up) base = m, t_warm = gt_now();
      if (last) end = m;
      GT_QCOLL(comm, qcoll_barrier(comm, NULL));
    }
    if (gt_rank == 0 && (warm_up || done >= next_progress)) {
      print_progress(&s, done, elapsed, warm_up ? NULL : &base);
      while (next_progress <= done) next_progress += progress_step;
    }
  }
  double t_end = gt_now();

  bool completed = done == s.replays && !gt_failures();
  if (completed) check_growth(&base, &end);
  if (completed) {
    long checkpoints = s.replays / s.check_every - 1; /* after the warm-up */
    long alone = checkpoints_alone(graphs, checkpoints, stream);
    long replays_part = end.rss_kib - base.rss_kib - alone;
    gt_note("VmRSS split: %+ld KiB over %ld checkpoints alone (no replays), "
            "so %+ld KiB from %ld replays of each graph (bound %ld KiB)",
            alone, checkpoints, replays_part, s.replays - s.check_every,
            REPLAY_GROWTH_BOUND_KIB);
    if (RSS_BOUNDED && replays_part > REPLAY_GROWTH_BOUND_KIB)
      gt_fail("VmRSS grew %+ld KiB with the replays beyond what the "
              "checkpoints alone grow (bound %ld KiB): the library runs no "
              "host code in a replay, so look at cudaGraphLaunch",
              replays_part, REPLAY_GROWTH_BOUND_KIB);
  }
  for (int g = 0; g < 2; g++) graph_teardown(&graphs[g]);
  double t_destroy = gt_now();
  GT_QCOLL(comm, qcoll_comm_destroy(comm));
  if (gt_now() - t_destroy > 30)
    gt_fail("qcoll_comm_destroy took %.1f s", gt_now() - t_destroy);
  for (int g = 0; g < 2; g++) graph_free(&graphs[g]);
  GT_CUDA(cudaStreamDestroy(stream));

  if (completed)
    gt_note(
        "%s %ld replays of 2 graphs (%s, %s; %zu elements) on %d ranks in "
        "%.1f s (%.1f us per pair after the warm-up); device checks %llu + "
        "%llu, host checks %ld + %ld, 0 wrong; VmRSS %ld -> %ld KiB (%+ld, "
        "bound %ld; VmHWM %ld), GPU in use %.1f -> %.1f MiB (%+lld bytes, "
        "bound %lld), descriptors %d -> %d; async error none",
        gt_failures() ? "FAIL" : "PASS", s.replays, graphs[0].name,
        graphs[1].name, COUNT, gt_nranks, t_end - t0,
        (t_end - t_warm) / (double)(s.replays - s.check_every) * 1e6,
        graphs[0].device_checks, graphs[1].device_checks, graphs[0].host_checks,
        graphs[1].host_checks, base.rss_kib, end.rss_kib,
        end.rss_kib - base.rss_kib, RSS_GROWTH_BOUND_KIB, end.hwm_kib,
        mib(base.gpu_used), mib(end.gpu_used), end.gpu_used - base.gpu_used,
        GPU_GROWTH_BOUND_BYTES, base.fds, end.fds);
  else
    gt_note("FAIL after %ld of %ld replays in %.1f s", done, s.replays,
            t_end - t0);
  return gt_failures() ? 1 : 0;
}
