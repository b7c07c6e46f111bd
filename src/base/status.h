/*
 * The one list of statuses: every qcoll_status_t of include/qcoll.h with
 * its short description, as qcoll_status_string returns it.  errors.c
 * makes the strings from it with a switch that the compiler rejects when a
 * status of the public enum has no row here; the Python binding's table
 * (python/qcoll/_errors.py) is checked against the library's strings by
 * tests/python/test_status_names.py.
 */
#ifndef QCOLL_BASE_STATUS_H
#define QCOLL_BASE_STATUS_H

/* X(status, description) */
#define QCOLL__STATUSES(X)                          \
  X(QCOLL_OK, "success")                            \
  X(QCOLL_ERR_INVALID_ARGUMENT, "invalid argument") \
  X(QCOLL_ERR_INVALID_USAGE, "invalid usage")       \
  X(QCOLL_ERR_SYSTEM, "system error")               \
  X(QCOLL_ERR_TIMEOUT, "timeout")                   \
  X(QCOLL_ERR_PEER_FAILURE, "peer failure")         \
  X(QCOLL_ERR_ABORTED, "aborted")                   \
  X(QCOLL_ERR_UNSUPPORTED, "unsupported")           \
  X(QCOLL_ERR_CUDA, "CUDA error")                   \
  X(QCOLL_ERR_NCCL, "NCCL error")                   \
  X(QCOLL_ERR_OUT_OF_MEMORY, "out of memory")       \
  X(QCOLL_ERR_MISMATCH, "mismatch between ranks")   \
  X(QCOLL_ERR_BOOTSTRAP, "bootstrap error")         \
  X(QCOLL_ERR_INTERNAL, "internal error")

#endif
