/* Stands in for every GPU test in builds without the CUDA back end. */
#include <stdio.h>

int main(void) {
  printf(
      "SKIP: no CUDA device (this build has no CUDA back end: no CUDA compiler "
      "was "
      "found, or QCOLL_WITH_CUDA=OFF)\n");
  return 77;
}
