/* shape_rules.h — the per-element rules of the shape kernels (shape.cu):
 * arange's and linspace's value at index i, the triangle test of tril/triu,
 * and repeat_interleave's source index. Plain C that nvcc also compiles as
 * __host__ __device__ code, so the fake backend (csrc/testing/cuda_fake.c)
 * runs these very functions on the host and tests/test_cuda_shape.py
 * checks them against NumPy and the CPU ops without a GPU.
 *
 * Each mirrors the CPU front-end's formula (csrc/ops/factory.c, shape_ops.c,
 * join.c) operation for operation. The core is compiled without FMA
 * contraction (no -mfma), so the device side spells its float arithmetic
 * with the _rn intrinsics, which nvcc never fuses. */
#ifndef EMBER_CUDA_SHAPE_RULES_H
#define EMBER_CUDA_SHAPE_RULES_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __CUDACC__
#define EMS_HD static __host__ __device__ __forceinline__
#else
#define EMS_HD static inline
#endif

#if defined(__CUDA_ARCH__)
#define EMS_DADD(a, b) __dadd_rn((a), (b))
#define EMS_DSUB(a, b) __dsub_rn((a), (b))
#define EMS_DMUL(a, b) __dmul_rn((a), (b))
#define EMS_DDIV(a, b) __ddiv_rn((a), (b))
#define EMS_FADD(a, b) __fadd_rn((a), (b))
#define EMS_FSUB(a, b) __fsub_rn((a), (b))
#define EMS_FMUL(a, b) __fmul_rn((a), (b))
#define EMS_FDIV(a, b) __fdiv_rn((a), (b))
#else
#define EMS_DADD(a, b) ((a) + (b))
#define EMS_DSUB(a, b) ((a) - (b))
#define EMS_DMUL(a, b) ((a) * (b))
#define EMS_DDIV(a, b) ((a) / (b))
#define EMS_FADD(a, b) ((a) + (b))
#define EMS_FSUB(a, b) ((a) - (b))
#define EMS_FMUL(a, b) ((a) * (b))
#define EMS_FDIV(a, b) ((a) / (b))
#endif

/* arange, integer math: start + i * step, wrapping as the CPU (-fwrapv) */
EMS_HD int64_t em_shape_arange_int(int64_t i, int64_t start, int64_t step) {
    return (int64_t)((uint64_t)start + (uint64_t)i * (uint64_t)step);
}

/* arange in float64: xs + i * xt (one rounding each, no fused multiply-add) */
EMS_HD double em_shape_arange_float(int64_t i, double xs, double xt) {
    return EMS_DADD(xs, EMS_DMUL((double)i, xt));
}

/* torch's symmetric linspace, element i of steps (> 0): the first half
 * counts up from start, the second down from end. single: float32
 * arithmetic (the 16/32-bit float dtypes), else float64. */
EMS_HD double em_shape_linspace(int64_t i, int64_t steps, double xs, double xe, bool single) {
    if (steps == 1) return xs;
    int64_t half = steps / 2;
    if (single) {
        float fs = (float)xs, fe = (float)xe;
        float st = EMS_FDIV(EMS_FSUB(fe, fs), (float)(steps - 1));
        return i < half ? (double)EMS_FADD(fs, EMS_FMUL(st, (float)i))
                        : (double)EMS_FSUB(fe, EMS_FMUL(st, (float)(steps - i - 1)));
    }
    double st = EMS_DDIV(EMS_DSUB(xe, xs), (double)(steps - 1));
    return i < half ? EMS_DADD(xs, EMS_DMUL(st, (double)i)) : EMS_DSUB(xe, EMS_DMUL(st, (double)(steps - i - 1)));
}

/* tril keeps j - i <= k, triu keeps j - i >= k (row i, column j) */
EMS_HD bool em_shape_tri_keep(int64_t i, int64_t j, int64_t k, bool lower) {
    return lower ? j - i <= k : j - i >= k;
}

/* Element offset of linear index lin (row-major over sizes), with the row
 * and column (the last two dims) it falls on. ndim >= 2. */
EMS_HD int64_t em_shape_offset_rc(int64_t lin, int ndim, const int64_t *sizes, const int64_t *strides,
                                  int64_t *row, int64_t *col) {
    int64_t off = 0;
    for (int d = ndim - 1; d >= 0; d--) {
        int64_t q = lin / sizes[d], r = lin - q * sizes[d];
        if (d == ndim - 1) *col = r;
        if (d == ndim - 2) *row = r;
        off += r * strides[d];
        lin = q;
    }
    return off;
}

/* repeat_interleave: the source index of output position j along the dim,
 * the largest i < n with cum[i] <= j (indices repeated 0 times share their
 * cum with the next one and are skipped). cum[0] = 0 <= j < cum[n]. */
EMS_HD int64_t em_shape_interleave_src(const int64_t *cum, int64_t n, int64_t j) {
    int64_t lo = 0, hi = n - 1;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2;
        if (cum[mid] <= j)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

#endif
