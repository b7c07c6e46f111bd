/*
 * Public buffer registration (qcoll.h): argument checks and the handle;
 * the exchange and the mappings are the ipc backend's (transport/cuda_reg.c).
 * A rank whose arguments are wrong still takes part in the collective
 * exchange, with nothing to register, so its peers never wait in vain.
 */
#include <stdint.h>
#include <stdlib.h>

#include "../backend/backend.h"
#include "comm.h"

#define QCOLL_REG_MAGIC 0x7163726567ull /* "qcreg" */

struct qcoll_reg {
  uint64_t magic;
  qcoll_comm_t comm;
  qcoll__reg_result_t reg;
};

/* The reason this rank has nothing to register, or NULL. */
static const char *bad_arguments(const void *buf, size_t bytes,
                                 const qcoll_reg_t *handle) {
  if (!handle) return "handle is NULL";
  if (!buf) return "buf is NULL";
  if (bytes == 0) return "bytes is 0";
  return NULL;
}

qcoll_status_t qcoll_comm_register(qcoll_comm_t comm, void *buf, size_t bytes,
                                   qcoll_reg_t *handle) {
  const char *fn = "qcoll_comm_register";
  qcoll_status_t st = qcoll__comm_check_usable(comm, fn);
  if (st != QCOLL_OK) return st;
  if (handle) *handle = NULL;
  const char *bad = bad_arguments(buf, bytes, handle);
  qcoll__reg_result_t reg = {QCOLL_REG_NONE, 0, 0};
  const qcoll__backend_t *ipc = &qcoll__backend_ipc;
  /* Host-only communicators have nothing to register (no exchange on any
   * rank: the device is known to all alike). */
  if (comm->ctx.device >= 0 && ipc->register_buffer)
    st = ipc->register_buffer(&comm->ctx, bad ? NULL : buf, bad ? 0 : bytes,
                              &reg);
  if (bad)
    return qcoll__error(&comm->ctx, QCOLL_ERR_INVALID_ARGUMENT,
                        "%s: %s (this rank registered nothing)", fn, bad);
  if (st != QCOLL_OK) return st;
  struct qcoll_reg *h = calloc(1, sizeof *h);
  if (!h)
    return qcoll__error(&comm->ctx, QCOLL_ERR_OUT_OF_MEMORY,
                        "%s: cannot allocate the handle", fn);
  *h = (struct qcoll_reg){QCOLL_REG_MAGIC, comm, reg};
  *handle = h;
  return QCOLL_OK;
}

qcoll_status_t qcoll_comm_deregister(qcoll_comm_t comm, qcoll_reg_t handle) {
  const char *fn = "qcoll_comm_deregister";
  qcoll_status_t st = qcoll__comm_check_usable(comm, fn);
  if (st != QCOLL_OK) return st;
  const char *bad = NULL;
  if (handle && handle->magic != QCOLL_REG_MAGIC)
    bad = "handle is not a registration of qcoll_comm_register (or was "
          "deregistered already)";
  else if (handle && handle->comm != comm)
    bad = "handle is a registration of another communicator";
  const qcoll__reg_result_t *reg = handle && !bad ? &handle->reg : NULL;
  const qcoll__backend_t *ipc = &qcoll__backend_ipc;
  if (comm->ctx.device >= 0 && ipc->deregister_buffer)
    st = ipc->deregister_buffer(&comm->ctx, reg);
  if (bad)
    return qcoll__error(&comm->ctx, QCOLL_ERR_INVALID_ARGUMENT,
                        "%s: %s (this rank deregistered nothing)", fn, bad);
  if (handle) {
    handle->magic = 0;
    free(handle);
  }
  return st;
}
