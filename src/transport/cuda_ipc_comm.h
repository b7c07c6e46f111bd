/*
 * The state of the CUDA IPC transport of one communicator (ctx->cuda),
 * shared by the transport (cuda_ipc.c: buffers, mapping, probe, agreement,
 * error words) and the ipc backend's launches (backend/cuda_ipc_launch.c).
 * CUDA builds only.
 */
#ifndef QCOLL_TRANSPORT_CUDA_IPC_COMM_H
#define QCOLL_TRANSPORT_CUDA_IPC_COMM_H

#include <stdbool.h>
#include <stddef.h>

#include "../coll/cuda/collectives.h"
#include <cuda_runtime_api.h>

#include "../base/context.h"
#include "../coll/cuda/launch.h"
#include "cuda_push.h"

#define REASON_MAX 200

struct qcoll__cuda_comm {
  bool usable;
  char reason[REASON_MAX]; /* why IPC is not usable */
  int device;
  char *buffer; /* this rank's IPC buffer */
  size_t buffer_bytes;
  /* Host-mapped pinned words: [0] the kernels' error word, [1] the abort
   * request that kernels poll. */
  volatile unsigned long long *host_words;
  unsigned long long *host_words_dev;
  char *peers[QCOLL_IPC_MAX_RANKS];      /* peers' buffers, mapped here */
  bool peer_opened[QCOLL_IPC_MAX_RANKS]; /* mapped through the registry */
  int ranks_on_gpu;
  int most_ranks_per_gpu; /* the most ranks any one GPU holds (the same on
                            every rank; 1: no GPU is shared) */
  size_t oneshot_max_bytes;
  qcoll__ipc_view_t view;
  /* The kernels of collectives.cu: the same view with their own grid limit
   * (their occupancy may differ from the all-reduce kernels'), and where
   * the send/recv inboxes are. */
  qcoll__ipc_view_t coll_view;
  qcoll__ipc_p2p_t p2p;
  /* The push one-shot (cuda_push.c): its area follows the inboxes;
   * push.slot_bytes 0 when the ranks did not all ask for the same slots. */
  size_t push_area_offset;
  qcoll__push_view_t push;
  /* Buffer registration (cuda_reg.c): peers in this very process (their
   * addresses are valid here, no handle to open), the descriptor area's
   * offset (after the inboxes, before the push area) and the registry. */
  bool peer_same_process[QCOLL_IPC_MAX_RANKS];
  size_t desc_offset;
  struct qcoll__cuda_reg *reg;
};

/* The process-wide cache of opened IPC handles (cuda_ipc.c): a handle is
 * opened once per (device, handle) and shared; closed with the last user. */
cudaError_t qcoll__ipc_handle_open(int device, const cudaIpcMemHandle_t *handle,
                                   void **ptr);
void qcoll__ipc_handle_close(qcoll__ctx_t *comm, int device, void *ptr);


#endif
