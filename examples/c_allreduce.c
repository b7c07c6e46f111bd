/* Every rank contributes rank+1; every rank must end with 1+2+...+N.
 *   build/tools/qcoll-run/qcoll-run -n 4 --tag-output ./c_allreduce */
#include <stdio.h>

#include <qcoll.h>

int main(void) {
  qcoll_comm_t comm;
  if (qcoll_comm_init_env(&comm, NULL) != QCOLL_OK) {
    fprintf(stderr, "qcoll init failed: %s\n", qcoll_last_error());
    return 1;
  }
  int rank, size;
  qcoll_comm_rank(comm, &rank);
  qcoll_comm_size(comm, &size);
  float x[4];
  for (int i = 0; i < 4; i++) x[i] = (float)(rank + 1);
  qcoll_status_t st =
      qcoll_all_reduce(x, x, 4, QCOLL_F32, QCOLL_SUM, comm, NULL);
  if (st != QCOLL_OK) {
    fprintf(stderr, "all_reduce failed: %s\n", qcoll_comm_last_error(comm));
    return 1;
  }
  float expected = (float)size * (float)(size + 1) / 2;
  printf("rank %d of %d: sum = %g (expected %g)\n", rank, size, x[0], expected);
  qcoll_comm_destroy(comm);
  return x[0] == expected ? 0 : 1;
}
