/*
 * The selection table.  Its thresholds come from the QCOLL_* table so they
 * can be tuned without a rebuild; their defaults are set from the
 * measurements in docs/results/.
 */
#include "select.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../base/config.h"

/* One row: a predicate over the call and the path it gives. */
typedef struct row {
  const char *when; /* the condition, as printed by qcoll-info */
  bool (*holds)(const qcoll__select_in_t *in);
  qcoll__path_t path;
} row_t;

static bool is_all_reduce_on_ipc(const qcoll__select_in_t *in) {
  return in->gpu && in->coll == QCOLL__COLL_ALL_REDUCE && in->ipc &&
         qcoll__ipc_kernel_supports(in->dtype, in->op);
}
/* Where all ranks share a GPU no byte crosses a link: quantising saves only
 * memory traffic on the one GPU and adds the codec's work, so a format pays
 * only from a size of its own, if at all.  The smallest size from which a
 * format was measured faster than the exact two-shot on the same
 * unregistered buffers at every size up to 256 MiB (one H200 under MPS,
 * docs/results/2026-12-04-h200-quant-floors.md): with two ranks INT4 from
 * 32 MiB and INT8 from 256 MiB; FP8, INT6 and INT3 never; with four and
 * eight ranks (halved grids) no format at any size.  SIZE_MAX: never. */
static size_t shared_gpu_floor(qcoll_quant_t quant, int ranks_per_gpu) {
  if (ranks_per_gpu > 2) return SIZE_MAX;
  switch (quant) {
    case QCOLL_QUANT_INT4: return (size_t)32 << 20;
    case QCOLL_QUANT_INT8: return (size_t)256 << 20;
    default: return SIZE_MAX;
  }
}

/* Only where every rank is on one GPU: with ranks on several GPUs bytes do
 * cross links, and no floor was measured there. */
static bool all_ranks_on_one_gpu(const qcoll__select_in_t *in) {
  return in->ranks_per_gpu > 1 && in->ranks_per_gpu >= in->nranks;
}

size_t qcoll__select_quant_floor(const qcoll__select_in_t *in) {
  size_t floor = in->config->quant_min_bytes;
  if (!in->config->quant_shared_gpu_floors || !all_ranks_on_one_gpu(in))
    return floor;
  size_t measured = shared_gpu_floor(in->quant, in->ranks_per_gpu);
  return measured > floor ? measured : floor;
}

/* Quantised transfer serves sums only: min/max of rounded values would
 * change which element wins. */
bool qcoll__select_quantises(const qcoll__select_in_t *in) {
  return in->quant != QCOLL_QUANT_NONE && in->op == QCOLL_SUM &&
         in->bytes >= qcoll__select_quant_floor(in);
}

static bool host_buffers(const qcoll__select_in_t *in) {
  return !in->gpu;
}
static bool quantised_all_reduce(const qcoll__select_in_t *in) {
  return is_all_reduce_on_ipc(in) && qcoll__select_quantises(in);
}
static bool small_all_reduce(const qcoll__select_in_t *in) {
  return is_all_reduce_on_ipc(in) &&
         in->bytes <= qcoll__config_oneshot_max_bytes(in->config, in->nranks);
}
static bool medium_all_reduce(const qcoll__select_in_t *in) {
  return is_all_reduce_on_ipc(in) && in->bytes <= in->config->twoshot_max_bytes;
}
/* Ranks sharing a GPU: NCCL (where it accepts them at all) was slower
 * than the IPC kernels up to 2 MiB for reduce, broadcast, all-gather,
 * reduce-scatter and all-to-all, and faster for send/recv
 * (docs/results/2026-11-h200-collectives-mps.md).  All-reduce has its own
 * rows above. */
static bool shared_gpu_collective(const qcoll__select_in_t *in) {
  bool measured = in->coll == QCOLL__COLL_REDUCE ||
                  in->coll == QCOLL__COLL_BROADCAST ||
                  in->coll == QCOLL__COLL_ALL_GATHER ||
                  in->coll == QCOLL__COLL_REDUCE_SCATTER ||
                  in->coll == QCOLL__COLL_ALL_TO_ALL;
  return in->gpu && in->ipc && in->ranks_per_gpu > 1 && measured &&
         in->bytes <= in->config->shared_gpu_ipc_max_bytes;
}
/* More ranks on one GPU than NCCL was seen to serve: with 4 ranks on one
 * H200, NCCL 2.32 (its default channels) never completed a reduce,
 * broadcast, all-gather or reduce-scatter of 2 MiB, where the IPC kernels
 * took 15-19 us (same results page).  Send/recv completed there and was
 * faster through NCCL, so it alone is still delegated. */
static bool crowded_gpu(const qcoll__select_in_t *in) {
  bool p2p = in->coll == QCOLL__COLL_SEND || in->coll == QCOLL__COLL_RECV;
  return in->gpu && in->ipc && !p2p &&
         in->ranks_per_gpu > in->config->shared_gpu_nccl_max_ranks;
}
bool qcoll__select_nccl_stalls(const qcoll__select_in_t *in) {
  return crowded_gpu(in);
}
static bool crowded_gpu_all_reduce(const qcoll__select_in_t *in) {
  return is_all_reduce_on_ipc(in) && crowded_gpu(in);
}
static bool nccl_serves(const qcoll__select_in_t *in) {
  return in->gpu && in->nccl && in->coll != QCOLL__COLL_BARRIER;
}
static bool large_all_reduce(const qcoll__select_in_t *in) {
  return is_all_reduce_on_ipc(in);
}
/* The kernels of collectives.cu serve every collective, dtype and op
 * (send/recv and the stream barrier included) wherever IPC is usable. */
static bool any_gpu_on_ipc(const qcoll__select_in_t *in) {
  return in->gpu && in->ipc;
}
static bool any_gpu(const qcoll__select_in_t *in) {
  return in->gpu;
}

static const row_t rows[] = {
    {"host buffers", host_buffers, QCOLL__PATH_HOST},
    {"GPU all_reduce sum on IPC, quantised, bytes >= QCOLL_QUANT_MIN_BYTES "
     "and, where all ranks share a GPU, >= the format's floor",
     quantised_all_reduce, QCOLL__PATH_TWOSHOT},
    {"GPU all_reduce on IPC, bytes <= QCOLL_ONESHOT_MAX_BYTES (0: 4 MiB at 2 "
     "ranks, else 4 MiB / nranks)",
     small_all_reduce, QCOLL__PATH_ONESHOT},
    {"GPU all_reduce on IPC, bytes <= QCOLL_TWOSHOT_MAX_BYTES",
     medium_all_reduce, QCOLL__PATH_TWOSHOT},
    {"GPU reduce/broadcast/all_gather/reduce_scatter/all_to_all on IPC, "
     "ranks share a GPU, bytes <= QCOLL_SHARED_GPU_IPC_MAX_BYTES",
     shared_gpu_collective, QCOLL__PATH_IPC},
    {"GPU all_reduce on IPC, more than QCOLL_SHARED_GPU_NCCL_MAX_RANKS ranks "
     "on one GPU",
     crowded_gpu_all_reduce, QCOLL__PATH_TWOSHOT},
    {"GPU collective but send/recv on IPC, more than "
     "QCOLL_SHARED_GPU_NCCL_MAX_RANKS ranks on one GPU",
     crowded_gpu, QCOLL__PATH_IPC},
    {"GPU collective, NCCL accepts the ranks", nccl_serves, QCOLL__PATH_NCCL},
    {"GPU all_reduce on IPC, any size", large_all_reduce, QCOLL__PATH_TWOSHOT},
    {"GPU collective on IPC (any dtype/op, send/recv, stream barrier)",
     any_gpu_on_ipc, QCOLL__PATH_IPC},
    {"GPU buffers, IPC not usable", any_gpu, QCOLL__PATH_STAGED},
};

#define ROW_COUNT ((int)(sizeof rows / sizeof rows[0]))

qcoll__path_t qcoll__select(const qcoll__select_in_t *in, int *row) {
  for (int i = 0; i < ROW_COUNT; i++)
    if (rows[i].holds(in)) {
      if (row) *row = i;
      return rows[i].path;
    }
  if (row) *row = ROW_COUNT;
  return in->gpu ? QCOLL__PATH_STAGED : QCOLL__PATH_HOST;
}

static int append(char *buf, size_t len, size_t *used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int append(char *buf, size_t len, size_t *used, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  bool room = buf && *used < len;
  int n = vsnprintf(room ? buf + *used : NULL, room ? len - *used : 0, fmt, ap);
  va_end(ap);
  if (n > 0) *used += (size_t)n;
  return n;
}

/* One line: each format's floor where two ranks share a GPU, and where
 * three or more do (every rank of the communicator on it). */
static void append_shared_gpu_floors(char *buf, size_t len, size_t *used,
                                     const qcoll__config_t *config) {
  append(buf, len, used,
         "quantised where all ranks share a GPU "
         "(QCOLL_QUANT_SHARED_GPU_FLOORS=%d), from:",
         config->quant_shared_gpu_floors);
  for (int shared = 2; shared <= 3; shared++) {
    append(buf, len, used, shared == 2 ? " 2 per GPU:" : "; 3 or more:");
    for (int q = QCOLL_QUANT_FP8; q < QCOLL_QUANT_COUNT; q++) {
      qcoll__select_in_t in = {.quant = (qcoll_quant_t)q,
                               .nranks = shared,
                               .ranks_per_gpu = shared,
                               .config = config};
      size_t floor = qcoll__select_quant_floor(&in);
      const char *name = qcoll_quant_name((qcoll_quant_t)q);
      if (floor == SIZE_MAX)
        append(buf, len, used, " %s never", name);
      else
        append(buf, len, used, " %s %zu", name, floor);
    }
  }
  append(buf, len, used, " (bytes)\n");
}

qcoll_status_t qcoll_selection_table_format(char *buf, size_t len,
                                            size_t *needed) {
  qcoll__config_t config;
  qcoll__config_read(&config);
  char oneshot[48];
  if (config.oneshot_max_bytes)
    snprintf(oneshot, sizeof oneshot, "%zu", config.oneshot_max_bytes);
  else
    snprintf(oneshot, sizeof oneshot, "0 (%zu/nranks)",
             qcoll__config_oneshot_max_bytes(&config, 1));
  size_t used = 0;
  append(buf, len, &used, "%-4s %-8s %s\n", "row", "path",
         "when (first match wins)");
  for (int i = 0; i < ROW_COUNT; i++)
    append(buf, len, &used, "%-4d %-8s %s\n", i, qcoll__path_name(rows[i].path),
           rows[i].when);
  append(buf, len, &used,
         "thresholds: QCOLL_ONESHOT_MAX_BYTES=%s QCOLL_TWOSHOT_MAX_BYTES=%zu "
         "QCOLL_QUANT_MIN_BYTES=%zu QCOLL_SHARED_GPU_IPC_MAX_BYTES=%zu "
         "QCOLL_SHARED_GPU_NCCL_MAX_RANKS=%lld; "
         "one-shot: the push kernel up to QCOLL_IPC_PUSH_BYTES=%zu and "
         "QCOLL_IPC_PUSH_MAX_RANKS=%lld ranks, the flag-barrier kernel "
         "otherwise; one-shot/two-shot kernels: f16/bf16/f32 x "
         "sum/min/max, ipc kernels: every dtype and op; "
         "forced by QCOLL_ALGO=%s or per call\n",
         oneshot, config.twoshot_max_bytes,
         config.quant_min_bytes, config.shared_gpu_ipc_max_bytes,
         config.shared_gpu_nccl_max_ranks, config.ipc_push_bytes,
         config.ipc_push_max_ranks, qcoll__env_str("QCOLL_ALGO"));
  append_shared_gpu_floors(buf, len, &used, &config);
  return qcoll__format_result("qcoll_selection_table_format", buf, len, used,
                              needed);
}
