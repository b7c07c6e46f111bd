/*
 * The one list of collectives.  Everything that needs one entry per
 * collective (the enum, names, the selection table's rows, dispatch, the
 * IPC mapping) is made from QCOLL__COLLS, so adding a collective is one
 * line here and the compiler then finds every switch that lacks it.
 */
#ifndef QCOLL_BASE_COLLS_H
#define QCOLL_BASE_COLLS_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* X(ID, name, reduces, rooted, p2p, ipc)
 *   ID       QCOLL__COLL_<ID>; name: "all_reduce", the public qcoll_<name>
 *   reduces  1: takes an op (reduction)
 *   rooted   1: takes a root
 *   p2p      1: one peer (send/recv) instead of every rank
 *   ipc      IPC: collectives.cu has a kernel for it, QCOLL_IPC_COLL_<ID>;
 *            NOIPC: none (send/recv have their own channels) */
#define QCOLL__COLLS(X)                             \
  X(ALL_REDUCE, "all_reduce", 1, 0, 0, IPC)         \
  X(REDUCE, "reduce", 1, 1, 0, IPC)                 \
  X(BROADCAST, "broadcast", 0, 1, 0, IPC)           \
  X(ALL_GATHER, "all_gather", 0, 0, 0, IPC)         \
  X(REDUCE_SCATTER, "reduce_scatter", 1, 0, 0, IPC) \
  X(ALL_TO_ALL, "all_to_all", 0, 0, 0, IPC)         \
  X(SEND, "send", 0, 0, 1, NOIPC)                   \
  X(RECV, "recv", 0, 0, 1, NOIPC)                   \
  X(BARRIER, "barrier", 0, 0, 0, IPC)

/* clang-format off */
typedef enum qcoll__coll {
#define QCOLL__COLL_ENUM_(id, name, reduces, rooted, p2p, ipc) QCOLL__COLL_##id,
  QCOLL__COLLS(QCOLL__COLL_ENUM_)
#undef QCOLL__COLL_ENUM_
  QCOLL__COLL_COUNT
} qcoll__coll_t;
/* clang-format on */

/* "all_reduce", ...; "invalid" out of range. */
const char *qcoll__coll_name(qcoll__coll_t coll);
/* The public function: "qcoll_all_reduce", ...; "invalid" out of range. */
const char *qcoll__coll_fn(qcoll__coll_t coll);
/* The list's columns (false out of range). */
bool qcoll__coll_reduces(qcoll__coll_t coll);
bool qcoll__coll_rooted(qcoll__coll_t coll);
bool qcoll__coll_p2p(qcoll__coll_t coll);

#ifdef __cplusplus
}
#endif

#endif
