/* Device helpers of the collectives GPU test (coll_test_kernels.cu). */
#ifndef QCOLL_TESTS_GPU_COLL_TEST_H
#define QCOLL_TESTS_GPU_COLL_TEST_H

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Hold stream for ns nanoseconds of the GPU's global timer, then write the
 * timer into *end (device memory). */
cudaError_t ct_spin_launch(unsigned long long ns, unsigned long long *end,
                           cudaStream_t stream);
/* Write the GPU's global timer into *stamp (device memory). */
cudaError_t ct_stamp_launch(unsigned long long *stamp, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
