/*
 * mps-skew: where the time of a small all-reduce goes when several ranks
 * share one GPU under MPS.  Each of NRANKS processes replays (or launches
 * eagerly) a one-block barrier kernel: every rank stores the launch's epoch
 * into its slot of every rank's flag row (release), then waits until every
 * slot of its own row holds that epoch (acquire, with a deadline); the
 * scope of both is an argument.  This is the whole synchronisation of a one-shot all-reduce,
 * with no data.  Each launch records, from %globaltimer (one clock for the
 * whole GPU, so comparable across processes), when it started and when its
 * barrier completed; rank 0 gathers every rank's record and prints, over
 * the timed launches:
 *
 *   period     completion of launch e minus completion of launch e-1, on the
 *              slowest rank: the time per all-reduce the ranks achieve
 *   spread     last rank's start minus first rank's start, per launch
 *   tail       completion on the slowest rank minus the last rank's start:
 *              the barrier's own time once every rank is running
 *   restart    a rank's start minus its own previous completion: how long
 *              the GPU takes to start the next kernel of one process
 *   last       how often each rank was the last to start
 *
 * If the period is mostly spread, the ranks' kernels are started one after
 * another by the GPU, and no kernel protocol can be faster than that; if it
 * is mostly tail, the time is in the kernel's cross-process waits.
 *
 *   nvcc -arch=sm_90 -O2 bench/mps-skew.cu -o mps-skew
 *   d=$(mktemp -d); for r in $(seq 0 7); do ./mps-skew 8 $r $d graph 0 & done; wait
 *
 * Arguments: NRANKS RANK DIR MODE (graph | eager) PDL (0 | 1) [GRID]
 * [THREADS] [SCOPE (sys | gpu: the flags' release/acquire scope; gpu is
 * enough only because every rank runs on the same GPU)].
 * DIR is an empty folder the ranks share (IPC handles and records pass
 * through it).  GRID (default 1) blocks per launch, only block 0 takes part
 * in the barrier (the others exit at once): does a larger grid cost start
 * time?  Every wait has a deadline: 10 s on the GPU, 60 s for a peer's file.
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_RANKS 16
#define PER_GRAPH 100 /* launches captured in one graph */
#define WARM 3        /* graph replays before the timed ones */
#define TIMED 10      /* timed graph replays */
#define DEADLINE_NS 10000000000ull

#define CHECK(x)                                                           \
  do {                                                                     \
    cudaError_t e_ = (x);                                                  \
    if (e_ != cudaSuccess) {                                               \
      fprintf(stderr, "rank %d: %s: %s\n", g_rank, #x, cudaGetErrorString(e_)); \
      exit(1);                                                             \
    }                                                                      \
  } while (0)

static int g_rank = -1;

struct Rows {
  unsigned long long *row[MAX_RANKS]; /* every rank's flag row (mapped) */
};

__device__ __forceinline__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/* GpuScope: release/acquire at GPU scope, which covers every thread of
 * the device, other MPS clients' included; otherwise at system scope, which
 * ranks on different GPUs need. */
template <bool GpuScope>
__device__ __forceinline__ void store_release(unsigned long long *p,
                                              unsigned long long v) {
  if (GpuScope)
    asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
  else
    asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

template <bool GpuScope>
__device__ __forceinline__ unsigned long long load_acquire(
    const unsigned long long *p) {
  unsigned long long v;
  if (GpuScope)
    asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  else
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

/* ctl[0]: launches completed by this rank; ctl[1]: 1 once a wait timed out.
 * trace[2e], trace[2e+1]: start and completion of launch e (0-based). */
template <bool GpuScope>
__global__ void barrier_kernel(Rows rows, int nranks, int rank,
                               unsigned long long *ctl,
                               unsigned long long *trace, int capacity) {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  if (blockIdx.x != 0) return;
  __shared__ unsigned long long epoch, start;
  if (threadIdx.x == 0) {
    start = now_ns();
    epoch = *(volatile unsigned long long *)&ctl[0] + 1;
  }
  __syncthreads();
  const unsigned long long e = epoch;
  const int p = threadIdx.x;
  if (p < nranks) {
    store_release<GpuScope>(&rows.row[p][rank], e);
    const unsigned long long *mine = &rows.row[rank][p];
    const unsigned long long give_up = now_ns() + DEADLINE_NS;
    while (load_acquire<GpuScope>(mine) < e) {
      if (now_ns() > give_up) {
        ctl[1] = 1;
        break;
      }
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned long long done = now_ns();
    if (e <= (unsigned long long)capacity) {
      trace[2 * (e - 1)] = start;
      trace[2 * (e - 1) + 1] = done;
    }
    *(volatile unsigned long long *)&ctl[0] = e;
  }
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;");
#endif
}

static void wait_for_file(const char *path) {
  for (int i = 0; i < 600000; i++) {
    if (access(path, R_OK) == 0) return;
    usleep(100);
  }
  fprintf(stderr, "rank %d: %s did not appear within 60 s\n", g_rank, path);
  exit(1);
}

/* Write size bytes to DIR/name.rank atomically (write, then rename). */
static void publish(const char *dir, const char *name, int rank,
                    const void *bytes, size_t size) {
  char tmp[512], path[512];
  snprintf(tmp, sizeof tmp, "%s/.%s.%d", dir, name, rank);
  snprintf(path, sizeof path, "%s/%s.%d", dir, name, rank);
  FILE *f = fopen(tmp, "wb");
  if (!f || fwrite(bytes, 1, size, f) != size || fclose(f) != 0) {
    perror(tmp);
    exit(1);
  }
  if (rename(tmp, path) != 0) {
    perror(path);
    exit(1);
  }
}

static void fetch(const char *dir, const char *name, int rank, void *bytes,
                  size_t size) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s.%d", dir, name, rank);
  wait_for_file(path);
  FILE *f = fopen(path, "rb");
  if (!f || fread(bytes, 1, size, f) != size) {
    fprintf(stderr, "rank %d: short read of %s\n", g_rank, path);
    exit(1);
  }
  fclose(f);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* One line: the median, 10th and 90th percentiles of n values (ns), in us
 * (sorts v). */
static void print_stat(const char *name, double *v, int n) {
  if (n == 0) return;
  qsort(v, n, sizeof *v, cmp_double);
  printf("  %s median %.3f us  p10 %.3f  p90 %.3f\n", name, v[n / 2] / 1e3,
         v[(int)(0.1 * (n - 1))] / 1e3, v[(int)(0.9 * (n - 1))] / 1e3);
}

/* Rank 0: every rank's records of the timed launches, summarised. */
static void report(int nranks, const unsigned long long *all, int capacity,
                   int first, const char *mode, int pdl, int grid,
                   int threads, int gpu_scope) {
  const int n = capacity - first;
  double *period = (double *)calloc(n, sizeof(double));
  double *spread = (double *)calloc(n, sizeof(double));
  double *tail = (double *)calloc(n, sizeof(double));
  double *restart = (double *)calloc((size_t)n * nranks, sizeof(double));
  int last_count[MAX_RANKS] = {0};
  unsigned long long step = ~0ull;
  int np = 0, nr = 0;
#define START(r, e) all[(size_t)(r) * 2 * capacity + 2 * (e)]
#define DONE(r, e) all[(size_t)(r) * 2 * capacity + 2 * (e) + 1]
  for (int e = first; e < capacity; e++) {
    unsigned long long s_min = ~0ull, s_max = 0, d_max = 0, prev_d_max = 0;
    int last = 0;
    for (int r = 0; r < nranks; r++) {
      if (START(r, e) < s_min) s_min = START(r, e);
      if (START(r, e) > s_max) {
        s_max = START(r, e);
        last = r;
      }
      if (DONE(r, e) > d_max) d_max = DONE(r, e);
      if (DONE(r, e - 1) > prev_d_max) prev_d_max = DONE(r, e - 1);
      restart[nr++] = (double)START(r, e) - (double)DONE(r, e - 1);
      unsigned long long d = DONE(r, e) - START(r, e);
      if (d && d < step) step = d;
    }
    last_count[last]++;
    period[np] = (double)(d_max - prev_d_max);
    spread[np] = (double)(s_max - s_min);
    tail[np] = (double)d_max - (double)s_max;
    np++;
  }
  printf("mps-skew: %d ranks, %s, pdl %d, grid %d x %d threads, %s scope, "
         "%d timed launches; smallest start-to-done seen %.3f us\n",
         nranks, mode, pdl, grid, threads, gpu_scope ? "gpu" : "sys", np,
         step / 1e3);
  print_stat("period ", period, np);
  print_stat("spread ", spread, np);
  print_stat("tail   ", tail, np);
  print_stat("restart", restart, nr);
  printf("  last to start:");
  for (int r = 0; r < nranks; r++) printf(" r%d %d", r, last_count[r]);
  printf("\n");
#undef START
#undef DONE
  free(period);
  free(spread);
  free(tail);
  free(restart);
}

static void launch(cudaStream_t s, int gpu_scope, int pdl, int grid, int threads, Rows rows,
                   int nranks, int rank, unsigned long long *ctl,
                   unsigned long long *trace, int capacity) {
  cudaLaunchAttribute at;
  memset(&at, 0, sizeof at);
  at.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.gridDim = dim3(grid);
  cfg.blockDim = dim3(threads);
  cfg.stream = s;
  cfg.attrs = &at;
  cfg.numAttrs = pdl ? 1 : 0;
  if (gpu_scope)
    CHECK(cudaLaunchKernelEx(&cfg, barrier_kernel<true>, rows, nranks, rank,
                             ctl, trace, capacity));
  else
    CHECK(cudaLaunchKernelEx(&cfg, barrier_kernel<false>, rows, nranks, rank,
                             ctl, trace, capacity));
}

int main(int argc, char **argv) {
  if (argc < 6) {
    fprintf(stderr, "usage: %s NRANKS RANK DIR graph|eager PDL [GRID] [THREADS] [sys|gpu]\n",
            argv[0]);
    return 2;
  }
  const int nranks = atoi(argv[1]);
  g_rank = atoi(argv[2]);
  const char *dir = argv[3];
  const int graph = strcmp(argv[4], "graph") == 0;
  const int pdl = atoi(argv[5]);
  const int grid = argc > 6 ? atoi(argv[6]) : 1;
  const int threads = argc > 7 ? atoi(argv[7]) : 32;
  const int gpu_scope = argc > 8 && strcmp(argv[8], "gpu") == 0;
  if (nranks < 2 || nranks > MAX_RANKS || g_rank < 0 || g_rank >= nranks ||
      grid < 1 || threads < nranks || threads > 1024) {
    fprintf(stderr, "mps-skew: NRANKS 2..%d, RANK < NRANKS, GRID >= 1, "
                    "NRANKS <= THREADS <= 1024\n", MAX_RANKS);
    return 2;
  }
  const int rank = g_rank;
  CHECK(cudaSetDevice(0));
  unsigned long long *row, *ctl, *trace;
  CHECK(cudaMalloc(&row, 4096));
  CHECK(cudaMemset(row, 0, 4096));
  CHECK(cudaMalloc(&ctl, 2 * sizeof(unsigned long long)));
  CHECK(cudaMemset(ctl, 0, 2 * sizeof(unsigned long long)));
  const int capacity = PER_GRAPH * (WARM + TIMED);
  CHECK(cudaMalloc(&trace, 2 * sizeof(unsigned long long) * capacity));
  CHECK(cudaMemset(trace, 0, 2 * sizeof(unsigned long long) * capacity));
  CHECK(cudaDeviceSynchronize());

  cudaIpcMemHandle_t handle;
  CHECK(cudaIpcGetMemHandle(&handle, row));
  publish(dir, "handle", rank, &handle, sizeof handle);
  Rows rows;
  memset(&rows, 0, sizeof rows);
  for (int r = 0; r < nranks; r++) {
    if (r == rank) {
      rows.row[r] = row;
      continue;
    }
    cudaIpcMemHandle_t h;
    fetch(dir, "handle", r, &h, sizeof h);
    void *p;
    CHECK(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess));
    rows.row[r] = (unsigned long long *)p;
  }

  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaGraphExec_t exec = NULL;
  if (graph) {
    cudaGraph_t g;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int k = 0; k < PER_GRAPH; k++)
      launch(s, gpu_scope, pdl, grid, threads, rows, nranks, rank, ctl, trace, capacity);
    CHECK(cudaStreamEndCapture(s, &g));
    CHECK(cudaGraphInstantiate(&exec, g, 0));
  }
  for (int rep = 0; rep < WARM + TIMED; rep++) {
    if (graph)
      CHECK(cudaGraphLaunch(exec, s));
    else
      for (int k = 0; k < PER_GRAPH; k++)
        launch(s, gpu_scope, pdl, grid, threads, rows, nranks, rank, ctl, trace, capacity);
  }
  CHECK(cudaStreamSynchronize(s));
  unsigned long long host_ctl[2];
  CHECK(cudaMemcpy(host_ctl, ctl, sizeof host_ctl, cudaMemcpyDeviceToHost));
  if (host_ctl[1] || host_ctl[0] != (unsigned long long)capacity) {
    fprintf(stderr, "rank %d: %s after %llu of %d launches\n", rank,
            host_ctl[1] ? "a wait timed out" : "launches went missing",
            host_ctl[0], capacity);
    return 1;
  }
  const size_t bytes = 2 * sizeof(unsigned long long) * capacity;
  unsigned long long *mine = (unsigned long long *)malloc(bytes);
  CHECK(cudaMemcpy(mine, trace, bytes, cudaMemcpyDeviceToHost));
  publish(dir, "trace", rank, mine, bytes);
  if (rank == 0) {
    unsigned long long *all = (unsigned long long *)malloc(bytes * nranks);
    for (int r = 0; r < nranks; r++)
      fetch(dir, "trace", r, all + (size_t)r * 2 * capacity, bytes);
    report(nranks, all, capacity, PER_GRAPH * WARM, graph ? "graph" : "eager",
           pdl, grid, threads, gpu_scope);
    free(all);
  }
  /* Peers may still read this rank's row until they finish: wait for every
   * trace before freeing (the trace files appear only after the last
   * launch of their rank). */
  for (int r = 0; r < nranks; r++) {
    char path[512];
    snprintf(path, sizeof path, "%s/trace.%d", dir, r);
    wait_for_file(path);
  }
  free(mine);
  return 0;
}
