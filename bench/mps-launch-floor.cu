/*
 * mps-launch-floor: how many kernels per second one GPU starts for several
 * processes that share it under MPS, with no work and no dependency between
 * the processes.  Each process replays a CUDA graph of K empty one-block
 * kernels (or launches them eagerly) on its own stream and prints the GPU
 * time per kernel (CUDA events around R replays) and the host time per
 * eager launch.  Started together by the caller (every process waits for
 * the wall-clock second given as START), so their loops overlap.
 *
 * What it answers: whether the time a multi-rank collective takes per call
 * on one GPU grows with the number of processes because the GPU starts the
 * processes' grids one after another.  If the time per kernel of each
 * process grows in proportion to the number of processes, a collective
 * that needs one kernel per rank per call cannot be faster than that
 * product, whatever the kernel does.
 *
 *   nvcc -arch=sm_90 -O2 bench/mps-launch-floor.cu -o mps-launch-floor
 *   start=$(( $(date +%s) + 2 ))
 *   for i in 1 2 3 4; do ./mps-launch-floor graph 1 $start & done; wait
 *
 * Arguments: MODE (graph | eager), PDL (0 | 1: programmatic stream
 * serialisation on every launch), START (Unix seconds; 0 = now).
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define KERNELS 100
#define REPS 200

#define CHECK(x)                                                        \
  do {                                                                  \
    cudaError_t e_ = (x);                                               \
    if (e_ != cudaSuccess) {                                            \
      fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));          \
      exit(1);                                                          \
    }                                                                   \
  } while (0)

__global__ void empty_kernel(int *p) {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;");
#endif
  if (p && threadIdx.x == 1000) *p = 1;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static void launch(cudaStream_t s, int pdl, int *d) {
  cudaLaunchAttribute at;
  memset(&at, 0, sizeof at);
  at.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.gridDim = dim3(1);
  cfg.blockDim = dim3(32);
  cfg.stream = s;
  cfg.attrs = &at;
  cfg.numAttrs = pdl ? 1 : 0;
  void *args[] = {&d};
  CHECK(cudaLaunchKernelExC(&cfg, (const void *)empty_kernel, args));
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s graph|eager PDL START\n", argv[0]);
    return 2;
  }
  const int graph = strcmp(argv[1], "graph") == 0;
  const int pdl = atoi(argv[2]);
  const double start = atof(argv[3]);
  int *d;
  cudaStream_t s;
  CHECK(cudaMalloc(&d, 4096));
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaGraphExec_t exec = NULL;
  if (graph) {
    cudaGraph_t g;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int k = 0; k < KERNELS; k++) launch(s, pdl, d);
    CHECK(cudaStreamEndCapture(s, &g));
    CHECK(cudaGraphInstantiate(&exec, g, 0));
  }
  for (int w = 0; w < 5; w++) {
    if (graph)
      CHECK(cudaGraphLaunch(exec, s));
    else
      for (int k = 0; k < KERNELS; k++) launch(s, pdl, d);
  }
  CHECK(cudaStreamSynchronize(s));
  while (start > 0 && now_s() < start) usleep(100);
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  const double t0 = now_s();
  CHECK(cudaEventRecord(e0, s));
  for (int r = 0; r < REPS; r++) {
    if (graph)
      CHECK(cudaGraphLaunch(exec, s));
    else
      for (int k = 0; k < KERNELS; k++) launch(s, pdl, d);
  }
  CHECK(cudaEventRecord(e1, s));
  const double host = now_s() - t0;
  CHECK(cudaEventSynchronize(e1));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, e0, e1));
  printf("pid %d %s pdl=%d: GPU %.3f us per kernel, host %.3f us per "
         "kernel issued\n",
         (int)getpid(), graph ? "graph" : "eager", pdl,
         ms * 1e3 / (KERNELS * REPS), host * 1e6 / (KERNELS * REPS));
  return 0;
}
