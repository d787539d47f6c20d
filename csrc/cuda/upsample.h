/* upsample.h — the GPU upsampling kernels (F.interpolate) behind the
 * interp_nearest / interp entries of EmCudaBackend ("convolution and
 * upsampling" in cuda_backend.h).
 *
 * Note [CUDA upsample]: the front-end (ops/interp.c) builds each axis's
 * index and weight table with the CPU's own code (em_interp_axis,
 * cpu/interp.c: align_corners, scale factors, nearest / nearest-exact /
 * linear / cubic rules, float rounding of float32) and copies it to the
 * device with its inverse map, so both devices read the same tables and no
 * index formula is written twice. Forward: one thread per output element.
 * Backward (the adjoint): one thread per INPUT element that gathers the
 * gradient elements reading it through the inverse maps, in the CPU's
 * order (output rows, then their taps; the width likewise) — no atomics, so
 * results are deterministic for every mode, bicubic included. Halves
 * compute in float32 with float32 weights, as the CPU. */
#ifndef EMBER_CUDA_UPSAMPLE_H
#define EMBER_CUDA_UPSAMPLE_H

#include "../cuda_backend.h"

#ifdef __cplusplus
extern "C" {
#endif

int em_cuda_interp_nearest(int dev, int itemsize, int64_t planes, const EmCudaInterpAxis *h, const EmCudaInterpAxis *w,
                           const void *x, void *y);
int em_cuda_interp(int dev, int dtype, int64_t planes, const EmCudaInterpAxis *h, const EmCudaInterpAxis *w,
                   const void *in, void *out, bool backward);

#ifdef __cplusplus
}
#endif
#endif
