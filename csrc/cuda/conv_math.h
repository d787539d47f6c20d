/* conv_math.h — the per-element index math of the GPU im2col / col2im
 * kernels (csrc/cuda/conv.cu, Note [CUDA im2col] in conv.h), written once
 * for the device and the host. The fake backend (csrc/testing/cuda_fake.c,
 * Note [fake CUDA]) runs these same functions on host memory, so the tests
 * on a machine without a GPU check them against the CPU's loops
 * (cpu/conv.c). Plain C that nvcc compiles __host__ __device__. */
#ifndef EMBER_CUDA_CONV_MATH_H
#define EMBER_CUDA_CONV_MATH_H

#include <stdint.h>

#include "../cuda_backend.h"

#ifdef __CUDACC__
#define EMC_CONV_HD static __host__ __device__ inline
#else
#define EMC_CONV_HD static inline
#endif

/* Column element (row, l) of one image, row = (c*kh + ki)*kw + kj and
 * l = oy*ow + ox, reads the image element at the returned offset
 * c*H*W + iy*W + ix, or nothing (-1: the window pokes into the padding). */
EMC_CONV_HD int64_t emc_im2col_source(const EmCudaConvGeom *g, int64_t row, int64_t l) {
    const int64_t kj = row % g->kw, ki = (row / g->kw) % g->kh, c = row / (g->kw * g->kh);
    const int64_t ox = l % g->ow, oy = l / g->ow;
    const int64_t iy = oy * g->sh - g->ph + ki * g->dh, ix = ox * g->sw - g->pw + kj * g->dw;
    if (iy < 0 || iy >= g->H || ix < 0 || ix >= g->W) return -1;
    return (c * g->H + iy) * g->W + ix;
}

/* The window position o (0 <= o < count) whose kernel tap k lands on image
 * coordinate i (o*s - p + k*d == i), or -1 when there is none: col2im's
 * inverse map along one axis (at most one o per tap). */
EMC_CONV_HD int64_t emc_conv_window_of(int64_t i, int64_t k, int64_t s, int64_t p, int64_t d, int64_t count) {
    const int64_t t = i + p - k * d;
    if (t < 0 || t % s != 0) return -1;
    const int64_t o = t / s;
    return o < count ? o : -1;
}

#endif
