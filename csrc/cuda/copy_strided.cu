/* copy_strided.cu — dst[i] = (dst dtype) src[i] over an ndim index space
 * with arbitrary element strides (0 broadcasts): the strided copy and dtype
 * cast behind every device-side .to() / .contiguous() / copy_ / fill_.
 *
 * The host side first drops size-1 dims, orders the dims by dst's strides
 * (so consecutive threads write neighbouring elements) and merges dims that
 * are contiguous in both tensors, so most copies end up 1- or 2-d. Then:
 *  - same dtype, both contiguous: cudaMemcpyAsync;
 *  - both contiguous and 4-element aligned: a kernel moving 4 elements per
 *    thread through one vector load and one vector store;
 *  - anything else: a kernel that turns each linear index into two element
 *    offsets (64-bit; 32-bit division whenever the numbers fit).
 * A same-dtype strided copy moves raw bits (one kernel per element size),
 * so a NaN's payload or a -0.0 survive it.
 *
 * Casts (Note [CUDA casts]) follow torch: halves and bfloat16 go through
 * float; to bool is `!= 0` (NaN is true) and from bool reads any non-zero
 * byte as 1; floating to an integer type narrower than 64 bits converts
 * through int64 and keeps the low bits, as the CPU kernels do (-1.0 -> 255
 * as uint8). All on the device's current stream; launches are checked. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "runtime.h"

namespace {

struct Bool8 {
    uint8_t v;
};

/* ---- Note [CUDA casts] */
__device__ __forceinline__ uint8_t arith(Bool8 b) { return b.v != 0; }
__device__ __forceinline__ float arith(__half h) { return __half2float(h); }
__device__ __forceinline__ float arith(__nv_bfloat16 h) { return __bfloat162float(h); }
template <class T> __device__ __forceinline__ T arith(T x) { return x; }

template <class D> struct To {
    template <class X> __device__ static D from(X x) {
        if constexpr (std::is_floating_point<X>::value && std::is_integral<D>::value &&
                      sizeof(D) < 8)
            return (D)(int64_t)x; /* low bits, as the CPU cast */
        else
            return (D)x;
    }
};
template <> struct To<Bool8> {
    template <class X> __device__ static Bool8 from(X x) { return Bool8{(uint8_t)(x != 0)}; }
};
template <> struct To<__half> {
    template <class X> __device__ static __half from(X x) { return __float2half_rn((float)x); }
};
template <> struct To<__nv_bfloat16> {
    template <class X> __device__ static __nv_bfloat16 from(X x) {
        return __float2bfloat16_rn((float)x);
    }
};

template <class D, class S> __device__ __forceinline__ D convert(S s) {
    return To<D>::from(arith(s));
}

/* ---- the strided kernel */
struct Geometry {
    int ndim; /* >= 1 after collapsing */
    int64_t sizes[EM_CUDA_MAX_DIMS];
    int64_t dst_strides[EM_CUDA_MAX_DIMS];
    int64_t src_strides[EM_CUDA_MAX_DIMS];
};

__device__ __forceinline__ uint64_t divide(uint64_t a, uint64_t b) {
    if (((a | b) >> 32) == 0) return (uint32_t)a / (uint32_t)b; /* far cheaper */
    return a / b;
}

template <class D, class S>
__global__ void copy_strided_kernel(D *__restrict__ dst, const S *__restrict__ src, int64_t n,
                                    const Geometry g) {
    int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        uint64_t rest = (uint64_t)i;
        int64_t od = 0, os = 0;
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
        dst[od] = convert<D>(src[os]);
    }
}

/* ---- the contiguous kernel: 4 elements per thread, one vector each way */
template <class T> struct alignas(4 * sizeof(T)) Vec4 {
    T v[4];
};

template <class D, class S>
__global__ void cast_contiguous_kernel(D *__restrict__ dst, const S *__restrict__ src, int64_t n) {
    int64_t step = (int64_t)gridDim.x * blockDim.x;
    int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    int64_t nvec = n / 4;
    for (int64_t v = tid; v < nvec; v += step) {
        Vec4<S> in = reinterpret_cast<const Vec4<S> *>(src)[v];
        Vec4<D> out;
#pragma unroll
        for (int j = 0; j < 4; j++) out.v[j] = convert<D>(in.v[j]);
        reinterpret_cast<Vec4<D> *>(dst)[v] = out;
    }
    for (int64_t i = nvec * 4 + tid; i < n; i += step) dst[i] = convert<D>(src[i]);
}

/* ---- host side */
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

const int itemsizes[DT_COUNT] = {1, 1, 1, 2, 4, 8, 2, 2, 4, 8};
constexpr int kThreads = 256;

unsigned grid_for(int dev, int64_t work) {
    int64_t blocks = (work + kThreads - 1) / kThreads;
    int64_t cap = (int64_t)emc_multiprocessors(dev) * 16; /* enough to fill it; then loop */
    return (unsigned)std::max<int64_t>(1, std::min(blocks, cap));
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

template <class D, class S>
void launch(int dev, cudaStream_t stream, void *dst, const void *src, int64_t n, const Geometry &g) {
    bool contiguous = g.ndim == 1 && g.dst_strides[0] == 1 && g.src_strides[0] == 1;
    bool aligned = (uintptr_t)dst % sizeof(Vec4<D>) == 0 && (uintptr_t)src % sizeof(Vec4<S>) == 0;
    if constexpr (!std::is_same<D, S>::value) {
        if (contiguous && aligned) {
            cast_contiguous_kernel<D, S><<<grid_for(dev, (n + 3) / 4), kThreads, 0, stream>>>(
                (D *)dst, (const S *)src, n);
            return;
        }
    }
    copy_strided_kernel<D, S><<<grid_for(dev, n), kThreads, 0, stream>>>((D *)dst, (const S *)src,
                                                                           n, g);
}

} // namespace

int emc_copy_strided(int dev, int ndim, const int64_t *sizes, void *dst, int dst_dtype,
                     const int64_t *dst_strides, const void *src, int src_dtype,
                     const int64_t *src_strides) {
    if (dst_dtype < 0 || dst_dtype >= DT_COUNT || src_dtype < 0 || src_dtype >= DT_COUNT)
        return emc_fail("copy_strided: unknown dtype code (%d, %d)", dst_dtype, src_dtype);
    if (ndim < 0 || ndim > EM_CUDA_MAX_DIMS)
        return emc_fail("copy_strided: %d dims (at most %d)", ndim, EM_CUDA_MAX_DIMS);
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) {
        if (sizes[d] < 0) return emc_fail("copy_strided: negative size %lld", (long long)sizes[d]);
        if (sizes[d] == 0) return 0;
        if (n > INT64_MAX / sizes[d]) return emc_fail("copy_strided: too many elements");
        n *= sizes[d];
    }
    if (!dst || !src) return emc_fail("copy_strided: a NULL pointer for %lld elements", (long long)n);
    EmcDeviceGuard guard(dev);
    if (!guard.ok) return -1;
    cudaStream_t stream = (cudaStream_t)emc_current_stream(dev);
    static thread_local Geometry g; /* 1.5 KB: not on the stack of every caller */
    collapse(ndim, sizes, dst_strides, src_strides, g);
    bool contiguous = g.ndim == 1 && g.dst_strides[0] == 1 && g.src_strides[0] == 1;
    if (dst_dtype == src_dtype) {
        size_t item = (size_t)itemsizes[dst_dtype];
        if (contiguous) return EMC_CHECK(cudaMemcpyAsync(dst, src, (size_t)n * item,
                                                         cudaMemcpyDeviceToDevice, stream));
        with_bits((int)item, [&](auto t) {
            using T = typename decltype(t)::type;
            launch<T, T>(dev, stream, dst, src, n, g);
        });
    } else {
        with_type(dst_dtype, [&](auto dt) {
            with_type(src_dtype, [&](auto st) {
                using D = typename decltype(dt)::type;
                using S = typename decltype(st)::type;
                if constexpr (!std::is_same<D, S>::value) launch<D, S>(dev, stream, dst, src, n, g);
            });
        });
    }
    return emc_check(cudaGetLastError(), "copy_strided kernel launch");
}
