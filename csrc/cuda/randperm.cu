// randperm.cu — Note [GPU randperm] (randperm.h): randperm(n, device='cuda').
// Keys from the Philox stream, one CUB radix sort of (key, index) pairs over
// all 64 key bits (stable: ties keep index order), then the sorted indices
// converted to the result's dtype. Scratch from the caching allocator on the
// device's current stream; the entry returns when queued.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cub/cub.cuh>

#include "randperm.h"
#include "runtime.h"

namespace {

constexpr int kThreads = 256;

// At most 65535 * 16 blocks: kernels stride over the rest.
unsigned grid_for(int64_t work) {
    int64_t b = (work + kThreads - 1) / kThreads;
    return (unsigned)(b < 1 ? 1 : b > 65535 * 16 ? 65535 * 16 : b);
}

// scratch memory for the entry (runtime.h)
struct Scratch : EmcScratch {
    Scratch(int d, cudaStream_t st) : EmcScratch(d, st, "randperm") {}
};

__global__ void keys_kernel(uint64_t seed, uint64_t offset, int64_t n, uint64_t *keys, int64_t *idx) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        keys[i] = em_randperm_key(seed, offset, i);
        idx[i] = i;
    }
}

// out[i] = (T) idx[i]; the front-end made sure every value is exact in T.
template <typename T>
__device__ __forceinline__ T from_index(int64_t v) { return static_cast<T>(v); }
template <>
__device__ __forceinline__ __half from_index<__half>(int64_t v) { return __float2half_rn((float)v); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_index<__nv_bfloat16>(int64_t v) {
    return __float2bfloat16_rn((float)v);
}

template <typename T>
__global__ void cast_kernel(const int64_t *idx, int64_t n, T *out) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        out[i] = from_index<T>(idx[i]);
}

template <typename T>
int cast(const int64_t *idx, int64_t n, void *out, cudaStream_t s) {
    cast_kernel<T><<<grid_for(n), kThreads, 0, s>>>(idx, n, static_cast<T *>(out));
    return emc_check(cudaGetLastError(), "randperm cast launch");
}

}  // namespace

extern "C" int em_cuda_randperm(int dev, int dtype, void *out, int64_t n, uint64_t seed, uint64_t offset) {
    if (n < 0) return emc_fail("randperm: n = %lld is negative", (long long)n);
    if (dtype <= DT_BOOL || dtype >= DT_COUNT) return emc_fail("randperm: dtype code %d has no kernel", dtype);
    if (n == 0) return 0;
    EmcDeviceGuard guard(dev);
    if (!guard.ok) return -1;
    cudaStream_t s = static_cast<cudaStream_t>(emc_current_stream(dev));
    Scratch sc(dev, s);
    size_t bytes = (size_t)n * 8;
    uint64_t *k0 = (uint64_t *)sc.get(bytes), *k1 = k0 ? (uint64_t *)sc.get(bytes) : nullptr;
    int64_t *i0 = k1 ? (int64_t *)sc.get(bytes) : nullptr;
    // int64 results are sorted straight into out
    int64_t *i1 = !i0 ? nullptr : dtype == DT_INT64 ? static_cast<int64_t *>(out) : (int64_t *)sc.get(bytes);
    if (!i1) return -1;
    keys_kernel<<<grid_for(n), kThreads, 0, s>>>(seed, offset, n, k0, i0);
    if (emc_check(cudaGetLastError(), "randperm keys launch") < 0) return -1;
    size_t temp = 0;
    if (EMC_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp, k0, k1, i0, i1, n, 0, 64, s)) < 0) return -1;
    void *t = sc.get(temp);
    if (!t || EMC_CHECK(cub::DeviceRadixSort::SortPairs(t, temp, k0, k1, i0, i1, n, 0, 64, s)) < 0) return -1;
    switch (dtype) {
    case DT_UINT8: return cast<uint8_t>(i1, n, out, s);
    case DT_INT8: return cast<int8_t>(i1, n, out, s);
    case DT_INT16: return cast<int16_t>(i1, n, out, s);
    case DT_INT32: return cast<int32_t>(i1, n, out, s);
    case DT_INT64: return 0;
    case DT_FLOAT16: return cast<__half>(i1, n, out, s);
    case DT_BFLOAT16: return cast<__nv_bfloat16>(i1, n, out, s);
    case DT_FLOAT32: return cast<float>(i1, n, out, s);
    default: return cast<double>(i1, n, out, s);
    }
}
