/* elementwise.h — the CUDA elementwise kernels (csrc/cuda/elementwise.cu)
 * behind EmCudaBackend.has_elementwise / .elementwise, Note [CUDA
 * elementwise] in csrc/cuda_backend.h. One kernel per CPU kernel table
 * (em_kernels_<name> in csrc/cpu/) with the same per-dtype math. */
#ifndef EMBER_CUDA_ELEMENTWISE_H
#define EMBER_CUDA_ELEMENTWISE_H

#include <stdbool.h>

#include "../cuda_backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Whether `kernel` has a CUDA version for compute_dtype (an EmDType code):
 * exact, so that the core falls back to the CPU for any other pair. */
bool em_cuda_has_elementwise(const char *kernel, int compute_dtype);
/* Queue one elementwise launch on dev's current stream; 0, or -1 with the
 * message set through em_cuda_set_error. */
int em_cuda_elementwise(int dev, const EmCudaElementwise *e);

#ifdef __cplusplus
}
#endif
#endif
