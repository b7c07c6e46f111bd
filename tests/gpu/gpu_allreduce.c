/*
 * qcoll_all_reduce on GPU buffers through the public API, every rank a
 * process started by qcoll-run, all on one GPU when only one is present.
 * Exact results (bit for bit against a CPU reference that reduces in rank
 * order in fp32) for f16/bf16/f32 x sum/min/max, one-shot and two-shot
 * forced through qcoll_all_reduce_ex and the automatic choice, counts 1, 7,
 * 1000 and 1<<20, pointers offset by one element, in place and out of
 * place, messages larger than the IPC data region, bytes outside the output
 * untouched, and the same bits on every rank.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_test.h"

static qcoll_comm_t comm;
static cudaStream_t stream;
static char *dev_send, *dev_recv; /* capacity bytes each, with guards */
static char *host_buf, *host_expected;
static size_t capacity;

static void run_case(qcoll_algo_t algo, qcoll_dtype_t dtype, qcoll_op_t op,
                     size_t count, const gt_placement_t *pl,
                     gt_pattern_t pattern, uint32_t seed) {
  char what[256];
  snprintf(what, sizeof what, "%s %s/%s count=%zu %s %s", qcoll_algo_name(algo),
           qcoll_dtype_name(dtype), qcoll_op_name(op), count, pl->name,
           pattern == GT_SMALL_INTS ? "small-ints" : "mixed-magnitudes");
  size_t es = qcoll_dtype_size(dtype);
  size_t bytes = (count + 2 * GT_GUARD_ELEMS) * es;
  if (bytes > capacity) {
    gt_fail("%s: needs %zu bytes, test buffers hold %zu", what, bytes,
            capacity);
    return;
  }
  char *send_base = dev_send, *recv_base = pl->in_place ? dev_send : dev_recv;
  memset(host_buf, GT_GUARD_BYTE, bytes);
  gt_upload(recv_base, host_buf, bytes);
  gt_fill_inputs(host_buf + (GT_GUARD_ELEMS + pl->send_offset) * es, count,
                 pattern, gt_rank, seed, dtype);
  gt_upload(send_base, host_buf, bytes);
  size_t recv_lead =
      (GT_GUARD_ELEMS + (pl->in_place ? pl->send_offset : pl->recv_offset)) *
      es;
  const void *send = send_base + (GT_GUARD_ELEMS + pl->send_offset) * es;
  void *recv = recv_base + recv_lead;

  qcoll_all_reduce_options_t opts;
  GT_QCOLL(comm, qcoll_all_reduce_options_init(&opts));
  opts.algo = algo;
  qcoll_status_t st =
      qcoll_all_reduce_ex(send, recv, count, dtype, op, comm, stream, &opts);
  if (st != QCOLL_OK) {
    gt_fail("%s: qcoll_all_reduce_ex returned %s: %s", what,
            qcoll_status_string(st), gt_last_error(comm));
    exit(1); /* the other ranks would wait for this one */
  }
  gt_wait_stream(stream, 120, what);
  GT_CUDA(cudaMemcpy(host_buf, recv_base, bytes, cudaMemcpyDeviceToHost));
  gt_reference(host_expected, count, pattern, gt_nranks, seed, dtype, op);
  gt_compare(host_expected, host_buf + recv_lead, count, dtype, what);
  if (!pl->in_place) {
    for (size_t b = 0; b < bytes; b++) {
      if (b >= recv_lead && b < recv_lead + count * es) continue;
      if ((unsigned char)host_buf[b] != GT_GUARD_BYTE) {
        gt_fail(
            "%s: byte %lld relative to recvbuf changed to 0x%02x (outside the "
            "output)",
            what, (long long)b - (long long)recv_lead,
            (unsigned char)host_buf[b]);
        break;
      }
    }
  }
  gt_check_same_on_all_ranks(comm, host_buf + recv_lead, count * es, what);
}

/* Calls every build must refuse or serve otherwise. */
static void test_edges(void) {
  /* Count 0: nothing happens, nothing is written. */
  memset(host_buf, GT_GUARD_BYTE, 64);
  gt_upload(dev_recv, host_buf, 64);
  GT_QCOLL(comm, qcoll_all_reduce(dev_send, dev_recv, 0, QCOLL_F32, QCOLL_SUM,
                                  comm, stream));
  gt_wait_stream(stream, 60, "count 0");
  GT_CUDA(cudaMemcpy(host_buf, dev_recv, 64, cudaMemcpyDeviceToHost));
  for (int i = 0; i < 64; i++)
    if ((unsigned char)host_buf[i] != GT_GUARD_BYTE) {
      gt_fail("count 0: recvbuf byte %d changed to 0x%02x", i,
              (unsigned char)host_buf[i]);
      break;
    }
  /* A dtype the IPC kernels do not handle, forced onto them: refused,
   * with a reason, and the communicator still works afterwards. */
  qcoll_all_reduce_options_t opts;
  GT_QCOLL(comm, qcoll_all_reduce_options_init(&opts));
  opts.algo = QCOLL_ALGO_ONESHOT;
  qcoll_status_t st = qcoll_all_reduce_ex(dev_send, dev_recv, 16, QCOLL_I32,
                                          QCOLL_SUM, comm, stream, &opts);
  if (st != QCOLL_ERR_UNSUPPORTED)
    gt_fail("i32 sum forced one-shot: expected %s, got %s (%s)",
            qcoll_status_string(QCOLL_ERR_UNSUPPORTED), qcoll_status_string(st),
            gt_last_error(comm));
  else
    gt_note("i32 sum forced one-shot refused as expected: %s",
            gt_last_error(comm));
  /* The same without forcing: served some other way, exactly. */
  const size_t n = 1000;
  int32_t *in = (int32_t *)host_buf, *out = (int32_t *)host_expected;
  for (size_t i = 0; i < n; i++) in[i] = (int32_t)(i % 100) * (gt_rank + 1);
  gt_upload(dev_send, in, n * 4);
  GT_QCOLL(comm, qcoll_all_reduce(dev_send, dev_recv, n, QCOLL_I32, QCOLL_SUM,
                                  comm, stream));
  gt_wait_stream(stream, 60, "i32 sum");
  GT_CUDA(cudaMemcpy(out, dev_recv, n * 4, cudaMemcpyDeviceToHost));
  int32_t ranks_sum = gt_nranks * (gt_nranks + 1) / 2;
  for (size_t i = 0; i < n; i++)
    if (out[i] != (int32_t)(i % 100) * ranks_sum) {
      gt_fail("i32 sum (automatic path): element %zu expected %d got %d", i,
              (int)(i % 100) * ranks_sum, out[i]);
      break;
    }
}

int main(void) {
  gt_skip_without_gpu("gpu_allreduce");
  comm = gt_init();
  GT_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const size_t ipc_bytes = gt_env_bytes("QCOLL_IPC_BYTES", (size_t)64 << 20);
  /* Larger than the whole IPC buffer, so certainly larger than a region. */
  const size_t big_f32 = ipc_bytes / 4 + 5;
  const size_t big_bf16 = ipc_bytes / 2 + 3;
  capacity = big_f32 * 4;
  if (big_bf16 * 2 > capacity) capacity = big_bf16 * 2;
  if (((size_t)4 << 20) > capacity) capacity = (size_t)4 << 20; /* 1<<20 f32 */
  capacity += 2 * GT_GUARD_ELEMS * 4;
  GT_CUDA(cudaMalloc((void **)&dev_send, capacity));
  GT_CUDA(cudaMalloc((void **)&dev_recv, capacity));
  host_buf = malloc(capacity);
  host_expected = malloc(capacity);
  if (!host_buf || !host_expected) {
    gt_fail("out of host memory (%zu bytes)", capacity);
    return 1;
  }
  gt_note("device %d, QCOLL_IPC_BYTES %zu", gt_device(), ipc_bytes);

  test_edges();

  static const qcoll_dtype_t dtypes[] = {QCOLL_F16, QCOLL_BF16, QCOLL_F32};
  static const qcoll_op_t ops[] = {QCOLL_SUM, QCOLL_MIN, QCOLL_MAX};
  static const qcoll_algo_t algos[] = {QCOLL_ALGO_ONESHOT, QCOLL_ALGO_TWOSHOT,
                                       QCOLL_ALGO_AUTO};
  static const size_t counts[] = {1, 7, 1000, (size_t)1 << 20};
  uint32_t seed = 7;
  int cases = 0, before = gt_failures();
  for (size_t d = 0; d < 3; d++)
    for (size_t o = 0; o < 3; o++)
      for (size_t a = 0; a < 3; a++)
        for (size_t c = 0; c < 4; c++)
          for (size_t p = 0; p < gt_placement_count; p++) {
            gt_pattern_t pattern = (c + p) % 2 ? GT_SMALL_INTS : GT_MIXED;
            run_case(algos[a], dtypes[d], ops[o], counts[c], &gt_placements[p],
                     pattern, seed++);
            cases++;
          }
  /* Larger than the data region: several launches per call. */
  for (size_t a = 0; a < 2; a++) {
    run_case(algos[a], QCOLL_F32, QCOLL_SUM, big_f32, &gt_placements[0],
             GT_MIXED, seed++);
    run_case(algos[a], QCOLL_F32, QCOLL_SUM, big_f32, &gt_placements[4],
             GT_SMALL_INTS, seed++);
    cases += 2;
  }
  run_case(QCOLL_ALGO_TWOSHOT, QCOLL_BF16, QCOLL_MAX, big_bf16,
           &gt_placements[4], GT_MIXED, seed++);
  cases++;
  int failed = gt_failures() - before;
  gt_note("%d cases, %d failure(s)", cases, failed);

  gt_check_async_and_destroy(comm);
  GT_CUDA(cudaFree(dev_send));
  GT_CUDA(cudaFree(dev_recv));
  return gt_failures() ? 1 : 0;
}
