/*
 * Collectives on host buffers over the shared-memory transport.  Called by
 * core after argument validation, only when every rank of the communicator
 * is on this host (comm->nhosts == 1).  Synchronous: results are in recvbuf
 * on return.  Every dtype and op, in place and out of place, any count
 * including 0.  Reductions run in rank order in the accumulation type
 * (f32 for f16/bf16), so every rank gets bitwise-identical results.
 */
#ifndef QCOLL_COLL_HOST_H
#define QCOLL_COLL_HOST_H

#include "../../base/context.h"

#ifdef __cplusplus
extern "C" {
#endif

qcoll_status_t qcoll__host_all_reduce(qcoll__ctx_t *comm, const void *sendbuf,
                                      void *recvbuf, size_t count,
                                      qcoll_dtype_t dtype, qcoll_op_t op);
qcoll_status_t qcoll__host_reduce(qcoll__ctx_t *comm, const void *sendbuf,
                                  void *recvbuf, size_t count,
                                  qcoll_dtype_t dtype, qcoll_op_t op, int root);
qcoll_status_t qcoll__host_broadcast(qcoll__ctx_t *comm, const void *sendbuf,
                                     void *recvbuf, size_t count,
                                     qcoll_dtype_t dtype, int root);
qcoll_status_t qcoll__host_all_gather(qcoll__ctx_t *comm, const void *sendbuf,
                                      void *recvbuf, size_t sendcount,
                                      qcoll_dtype_t dtype);
qcoll_status_t qcoll__host_reduce_scatter(qcoll__ctx_t *comm,
                                          const void *sendbuf, void *recvbuf,
                                          size_t recvcount, qcoll_dtype_t dtype,
                                          qcoll_op_t op);
qcoll_status_t qcoll__host_all_to_all(qcoll__ctx_t *comm, const void *sendbuf,
                                      void *recvbuf, size_t count,
                                      qcoll_dtype_t dtype);
qcoll_status_t qcoll__host_send(qcoll__ctx_t *comm, const void *sendbuf,
                                size_t count, qcoll_dtype_t dtype, int peer);
qcoll_status_t qcoll__host_recv(qcoll__ctx_t *comm, void *recvbuf, size_t count,
                                qcoll_dtype_t dtype, int peer);
qcoll_status_t qcoll__host_barrier(qcoll__ctx_t *comm);

/* dst[i] = op(srcs[0][i], ..., srcs[nsrcs-1][i]) in that order, accumulating
 * in the dtype's accumulation type; AVG divides by avg_divisor at the end.
 * dst may alias srcs[0].  Also the CPU reference used by tests. */
void qcoll__reduce_ranks(void *dst, const void *const *srcs, int nsrcs,
                         size_t count, qcoll_dtype_t dtype, qcoll_op_t op,
                         int avg_divisor);
/* The same, storing the result to dst and, when dst2 is not NULL, to dst2
 * as well (either may alias a source at the same offset; dst2 is dst or
 * does not overlap it). */
void qcoll__reduce_ranks2(void *dst, void *dst2, const void *const *srcs,
                          int nsrcs, size_t count, qcoll_dtype_t dtype,
                          qcoll_op_t op, int avg_divisor);

#ifdef __cplusplus
}
#endif

#endif
