/* copy_rules.h — the per-element rules of the strided copy-and-cast
 * (copy_strided.cu), kept apart from its kernels so that they can also be
 * compiled as plain host code: tests/test_cuda_build.py runs them on the CPU
 * against NumPy's casts, where there is no GPU.
 *
 * Note [CUDA casts] follows torch: halves and bfloat16 go through float; to
 * bool is `!= 0` (NaN is true) and from bool reads any non-zero byte as 1;
 * floating to an integer type narrower than 64 bits converts through int64
 * and keeps the low bits, as the CPU kernels do (-1.0 -> 255 as uint8). */
#ifndef EMBER_CUDA_COPY_RULES_H
#define EMBER_CUDA_COPY_RULES_H

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "runtime.h"

#define EMC_HD __host__ __device__ __forceinline__

namespace {

struct Bool8 {
    uint8_t v;
};

/* ---- Note [CUDA casts] */
EMC_HD uint8_t arith(Bool8 b) { return b.v != 0; }
EMC_HD float arith(__half h) { return __half2float(h); }
EMC_HD float arith(__nv_bfloat16 h) { return __bfloat162float(h); }
template <class T> EMC_HD T arith(T x) { return x; }

template <class D> struct To {
    template <class X> EMC_HD static D from(X x) {
        if constexpr (std::is_floating_point<X>::value && std::is_integral<D>::value &&
                      sizeof(D) < 8)
            return (D)(int64_t)x; /* low bits, as the CPU cast */
        else
            return (D)x;
    }
};
template <> struct To<Bool8> {
    template <class X> EMC_HD static Bool8 from(X x) { return Bool8{(uint8_t)(x != 0)}; }
};
template <> struct To<__half> {
    template <class X> EMC_HD static __half from(X x) { return __float2half_rn((float)x); }
};
template <> struct To<__nv_bfloat16> {
    template <class X> EMC_HD static __nv_bfloat16 from(X x) {
        return __float2bfloat16_rn((float)x);
    }
};

template <class D, class S> EMC_HD D convert(S s) {
    return To<D>::from(arith(s));
}

/* ---- the index space of the strided kernel */
struct Geometry {
    int ndim; /* >= 1 after collapsing */
    int64_t sizes[EM_CUDA_MAX_DIMS];
    int64_t dst_strides[EM_CUDA_MAX_DIMS];
    int64_t src_strides[EM_CUDA_MAX_DIMS];
};

EMC_HD uint64_t divide(uint64_t a, uint64_t b) {
    if (((a | b) >> 32) == 0) return (uint32_t)a / (uint32_t)b; /* far cheaper */
    return a / b;
}

/* Element offsets of linear index i in dst and src (row-major over g). */
EMC_HD void element_offsets(const Geometry &g, int64_t i, int64_t &od, int64_t &os) {
    uint64_t rest = (uint64_t)i;
    od = 0;
    os = 0;
    for (int d = g.ndim - 1; d > 0; d--) {
        uint64_t size = (uint64_t)g.sizes[d];
        uint64_t q = divide(rest, size);
        int64_t r = (int64_t)(rest - q * size);
        od += r * g.dst_strides[d];
        os += r * g.src_strides[d];
        rest = q;
    }
    od += (int64_t)rest * g.dst_strides[0];
    os += (int64_t)rest * g.src_strides[0];
}

/* ---- host side: dtype dispatch and dim collapsing */
template <class T> struct Tag {
    using type = T;
};

/* f(Tag<C type of dtype>{}); false for an unknown code. */
template <class F> bool with_type(int dtype, F &&f) {
    switch (dtype) {
    case DT_BOOL: f(Tag<Bool8>{}); return true;
    case DT_UINT8: f(Tag<uint8_t>{}); return true;
    case DT_INT8: f(Tag<int8_t>{}); return true;
    case DT_INT16: f(Tag<int16_t>{}); return true;
    case DT_INT32: f(Tag<int32_t>{}); return true;
    case DT_INT64: f(Tag<int64_t>{}); return true;
    case DT_FLOAT16: f(Tag<__half>{}); return true;
    case DT_BFLOAT16: f(Tag<__nv_bfloat16>{}); return true;
    case DT_FLOAT32: f(Tag<float>{}); return true;
    case DT_FLOAT64: f(Tag<double>{}); return true;
    }
    return false;
}

/* Same-dtype copies move bits: the unsigned type of each element size. */
template <class F> bool with_bits(int itemsize, F &&f) {
    switch (itemsize) {
    case 1: f(Tag<uint8_t>{}); return true;
    case 2: f(Tag<uint16_t>{}); return true;
    case 4: f(Tag<uint32_t>{}); return true;
    case 8: f(Tag<uint64_t>{}); return true;
    }
    return false;
}

/* Drop size-1 dims, order by dst stride (largest first), merge dims that
 * are contiguous in both. Returns the new ndim (>= 1). */
int collapse(int ndim, const int64_t *sizes, const int64_t *ds, const int64_t *ss, Geometry &g) {
    int perm[EM_CUDA_MAX_DIMS], n = 0;
    for (int d = 0; d < ndim; d++)
        if (sizes[d] != 1) perm[n++] = d;
    auto mag = [](int64_t s) { return s < 0 ? -s : s; };
    std::stable_sort(perm, perm + n, [&](int a, int b) { return mag(ds[a]) > mag(ds[b]); });
    int out = 0;
    for (int i = 0; i < n; i++) {
        int d = perm[i];
        if (out > 0 && g.dst_strides[out - 1] == ds[d] * sizes[d] &&
            g.src_strides[out - 1] == ss[d] * sizes[d]) { /* inner dim continues outer one */
            g.sizes[out - 1] *= sizes[d];
            g.dst_strides[out - 1] = ds[d];
            g.src_strides[out - 1] = ss[d];
            continue;
        }
        g.sizes[out] = sizes[d];
        g.dst_strides[out] = ds[d];
        g.src_strides[out] = ss[d];
        out++;
    }
    if (out == 0) { /* one element */
        g.sizes[0] = 1;
        g.dst_strides[0] = g.src_strides[0] = 1;
        out = 1;
    }
    g.ndim = out;
    return out;
}

} // namespace

#endif
