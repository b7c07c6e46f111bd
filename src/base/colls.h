/*
 * The one list of collectives.  Everything that needs one entry per
 * collective (the enum, names, the selection table's rows, dispatch, the
 * IPC mapping) is made from QCOLL__COLLS, so adding a collective is one
 * line here and the compiler then finds every switch that lacks it.
 */
#ifndef QCOLL_BASE_COLLS_H
#define QCOLL_BASE_COLLS_H

#ifdef __cplusplus
extern "C" {
#endif

/* X(ENUM suffix, name) */
#define QCOLL__COLLS(X)                \
  X(ALL_REDUCE, "all_reduce")          \
  X(REDUCE, "reduce")                  \
  X(BROADCAST, "broadcast")            \
  X(ALL_GATHER, "all_gather")          \
  X(REDUCE_SCATTER, "reduce_scatter")  \
  X(ALL_TO_ALL, "all_to_all")          \
  X(SEND, "send")                      \
  X(RECV, "recv")                      \
  X(BARRIER, "barrier")

typedef enum qcoll__coll {
#define QCOLL__COLL_ENUM_(id, name) QCOLL__COLL_##id,
  QCOLL__COLLS(QCOLL__COLL_ENUM_)
#undef QCOLL__COLL_ENUM_
  QCOLL__COLL_COUNT
} qcoll__coll_t;

/* "all_reduce", ...; "invalid" out of range. */
const char *qcoll__coll_name(qcoll__coll_t coll);

#ifdef __cplusplus
}
#endif

#endif
