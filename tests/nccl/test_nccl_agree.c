/*
 * Ranks that see NCCL differently still agree: each rank loads its own
 * (broken, missing or real) library, and every rank must come out of
 * qcoll__nccl_comm_get() with the same verdict and the same reason, the
 * reason of the lowest failing rank.  Run under qcoll-run:
 *
 *   qcoll-run -n N test_nccl_agree LIB0 [LIB1 ...]
 *
 * Rank r sets QCOLL_NCCL_LIB to LIB(r mod the number of LIBs).  The
 * communicators are host-only, so even a good library is refused ("no
 * GPU"): what is tested is the agreement, which a GPU run shares.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../check.h"
#include "qcoll.h"
#include "core/comm.h"
#include "transport/nccl.h"

#define REASON_BYTES 512

static int rank = -1;

int main(int argc, char **argv) {
  CHECK(argc >= 2, "usage: test_nccl_agree LIB0 [LIB1 ...]");
  const char *r_env = getenv("QCOLL_RANK");
  CHECK(r_env != NULL, "run me under qcoll-run");
  int env_rank = atoi(r_env);
  const char *mine = argv[1 + env_rank % (argc - 1)];
  setenv("QCOLL_NCCL_LIB", mine, 1);
  setenv("QCOLL_DISABLE_CUDA", "1", 1);

  qcoll_config_t cfg;
  qcoll_config_init(&cfg);
  cfg.device = QCOLL_DEVICE_NONE;
  cfg.timeout_s = 30;
  qcoll_comm_t comm = NULL;
  CHECK(qcoll_comm_init_env(&comm, &cfg) == QCOLL_OK, "%s", qcoll_last_error());
  int nranks = 0;
  qcoll_comm_rank(comm, &rank);
  check_rank = rank;
  qcoll_comm_size(comm, &nranks);

  void *nccl = NULL;
  qcoll_status_t st = qcoll__nccl_comm_get(&comm->ctx, &nccl);
  CHECK(st == QCOLL_ERR_UNSUPPORTED, "status %d: %s", (int)st,
        qcoll_comm_last_error(comm));
  CHECK(qcoll__nccl_comm_state(&comm->ctx) == QCOLL__NCCL_REFUSED, "state %d",
        (int)qcoll__nccl_comm_state(&comm->ctx));

  /* The verdict names the lowest failing rank: rank 0 always fails here
   * (a broken library, or no GPU). */
  const char *refusal = qcoll__nccl_comm_refusal(&comm->ctx);
  printf("rank %d (QCOLL_NCCL_LIB=%s): %s\n", rank, mine, refusal);
  CHECK(!strncmp(refusal, "rank 0: ", 8), "%s", refusal);

  /* Every rank holds the same reason, byte for byte. */
  char *all = calloc((size_t)nranks, REASON_BYTES);
  char local[REASON_BYTES] = {0};
  CHECK(all != NULL, "out of memory");
  snprintf(local, sizeof local, "%s", refusal);
  CHECK(qcoll_all_gather(local, all, REASON_BYTES, QCOLL_U8, comm, NULL) ==
            QCOLL_OK,
        "%s", qcoll_comm_last_error(comm));
  for (int r = 0; r < nranks; r++)
    CHECK(!memcmp(all + (size_t)r * REASON_BYTES, local, REASON_BYTES),
          "rank %d says '%s', I say '%s'", r, all + (size_t)r * REASON_BYTES,
          local);

  /* Remembered, identically, without another agreement round. */
  CHECK(qcoll__nccl_comm_get(&comm->ctx, &nccl) == QCOLL_ERR_UNSUPPORTED,
        "again");
  CHECK(!strcmp(qcoll__nccl_comm_refusal(&comm->ctx), local), "reason changed");

  free(all);
  qcoll__nccl_comm_destroy(&comm->ctx);
  CHECK(qcoll_comm_destroy(comm) == QCOLL_OK, "%s", qcoll_last_error());
  return 0;
}
