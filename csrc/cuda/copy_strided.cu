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
 * The per-element rules (casts: Note [CUDA casts]; offsets; collapsing) are
 * in copy_rules.h. All on the device's current stream; launches checked. */
#include "copy_rules.h"

namespace {

/* ---- the strided kernel */
template <class D, class S>
__global__ void copy_strided_kernel(D *__restrict__ dst, const S *__restrict__ src, int64_t n,
                                    const Geometry g) {
    int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        int64_t od, os;
        element_offsets(g, i, od, os);
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

const int itemsizes[DT_COUNT] = {1, 1, 1, 2, 4, 8, 2, 2, 4, 8};
constexpr int kThreads = 256;

unsigned grid_for(int dev, int64_t work) {
    int64_t blocks = (work + kThreads - 1) / kThreads;
    int64_t cap = (int64_t)emc_multiprocessors(dev) * 16; /* enough to fill it; then loop */
    return (unsigned)std::max<int64_t>(1, std::min(blocks, cap));
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
