/* What the fake NCCL of qcoll-perf's tests records (fake_nccl_perf.c). */
#ifndef FAKE_NCCL_PERF_H
#define FAKE_NCCL_PERF_H

#include <stddef.h>

struct fake_nccl_call {
  char fn[32]; /* "ncclAllReduce", ... */
  const void *send;
  void *recv;
  size_t count;
  int dtype, op;  /* NCCL's enum values; -1 when the call has none */
  int root, peer; /* -1 when the call has none */
  int calls;      /* calls so far, this one included */
};

/* The last entry point called. */
const struct fake_nccl_call *fake_nccl_last_call(void);
/* Communicators created, destroyed and aborted in this process. */
void fake_nccl_counts(int *n_init, int *n_destroy, int *n_abort);

#endif
