/* index_math.h — the per-element index math of the GPU indexing kernels
 * (Note [CUDA indexing] in index.h): where element i of a launch reads and
 * writes. Plain C++ with no CUDA types, compiled __host__ __device__ by
 * nvcc for index.cu and by the host compiler for the index-math test
 * (tests/test_cuda_index_math.py checks it against loops written out in
 * Python, in the CPU loops' order). */
#ifndef EMBER_CUDA_INDEX_MATH_H
#define EMBER_CUDA_INDEX_MATH_H

#include <stdint.h>

#include "../cuda_backend.h"

#ifdef __CUDACC__
#define EMC_HD __host__ __device__
#else
#define EMC_HD
#endif


// Note [indirect loops]: element i of P x J x A (A fastest) -> the byte
// offsets of its x and d elements.
EMC_HD inline void emc_index_locate(const EmCudaIndirect &g, int64_t A, int64_t i, int64_t *xo,
                                    int64_t *dofs) {
    int64_t a = i % A, r = i / A, j = r % g.nj, p = r / g.nj;
    int64_t x = g.off[j], d = g.dense_off ? g.dense_off[j] : j * g.dense_jstride;
    for (int k = g.na - 1; k >= 0 && a; k--) {
        const int64_t c = a % g.asize[k];
        a /= g.asize[k];
        x += c * g.as_x[k];
        d += c * g.as_d[k];
    }
    for (int k = g.np - 1; k >= 0 && p; k--) {
        const int64_t c = p % g.psize[k];
        p /= g.psize[k];
        x += c * g.ps_x[k];
        d += c * g.ps_d[k];
    }
    *xo = x;
    *dofs = d;
}

// Note [scatter loops]: index element i (rows x n, n fastest) -> the byte
// offsets of its x row position (before the index's own step), y and the
// index value.
EMC_HD inline void emc_index_scatter_locate(const EmCudaScatter &g, int64_t i, int64_t *xo, int64_t *yo,
                                            int64_t *io) {
    const int64_t k = i % g.n;
    int64_t r = i / g.n, x = k * g.xs, y = k * g.ys, ix = k * g.is;
    for (int d = g.nrow - 1; d >= 0 && r; d--) {
        const int64_t c = r % g.rsize[d];
        r /= g.rsize[d];
        x += c * g.rs_x[d];
        y += c * g.rs_y[d];
        ix += c * g.rs_i[d];
    }
    *xo = x;
    *yo = y;
    *io = ix;
}

// A strided walk: logical position i (row-major over sizes) -> the sum of
// its coordinates times `strides` (bytes or elements, as given).
struct EmcShape {
    int nd;
    int64_t size[EM_CUDA_MAX_DIMS];
    int64_t stride[EM_CUDA_MAX_DIMS];
    int64_t ostride[EM_CUDA_MAX_DIMS]; // nonzero_fill's offsets
};
EMC_HD inline int64_t emc_index_strided(const EmcShape &s, int64_t i) {
    int64_t o = 0;
    for (int d = s.nd - 1; d >= 0 && i; d--) {
        o += (i % s.size[d]) * s.stride[d];
        i /= s.size[d];
    }
    return o;
}

// An index value after wrapping, or -1 when it is outside [0, size).
EMC_HD inline int64_t emc_index_wrap(int64_t v, int64_t size, bool wrap) {
    const int64_t u = (wrap && v < 0) ? v + size : v;
    return (uint64_t)u < (uint64_t)size ? u : -1;
}

#endif
