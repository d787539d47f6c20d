// random.cu — Note [GPU random numbers]: the random fill kernel behind
// EmCudaBackend.random_fill. One thread per Philox block (csrc/cuda/philox.h):
// it draws four 32-bit words from (seed, offset, block index) and writes the
// block's 2 or 4 elements, so any element is computed independently and the
// numbers equal the fake backend's host computation bit for bit (up to the
// device's log/sin/cos in normals and exponentials).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "philox.h"
#include "runtime.h"

namespace {

enum { BOOL_ = DT_BOOL, U8, I8, I16, I32, I64, F16, BF16, F32, F64 };

template <typename T>
__device__ __forceinline__ T from_double(double v) { return static_cast<T>(v); }
template <>
__device__ __forceinline__ __half from_double<__half>(double v) { return __double2half(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_double<__nv_bfloat16>(double v) {
    return __float2bfloat16(static_cast<float>(v));
}
template <>
__device__ __forceinline__ bool from_double<bool>(double v) { return v != 0.0; }

template <typename T>
__global__ void fill_kernel(T *out, int64_t numel, uint64_t seed, uint64_t offset, int kind, int dtype,
                            double a, double b, int64_t from, uint64_t range, int per) {
    const int64_t blocks = (numel + per - 1) / per;
    for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < blocks;
         j += (int64_t)gridDim.x * blockDim.x) {
        EmPhilox4 w = em_philox_block(seed, offset, (uint64_t)j);
        for (int i = 0; i < per; i++) {
            int64_t e = j * per + i;
            if (e >= numel) break;
            int64_t iv = 0;
            double v = em_philox_value(w, i, kind, dtype, a, b, range, from, &iv);
            if (kind == EM_RANDOM_INTEGER && dtype != F16 && dtype != BF16 && dtype != F32 && dtype != F64)
                out[e] = static_cast<T>(iv);  // exact for 64-bit integers
            else
                out[e] = from_double<T>(v);
        }
    }
}

template <typename T>
int launch(void *out, int64_t numel, uint64_t seed, uint64_t offset, int kind, int dtype, double a, double b,
           int64_t from, uint64_t range, cudaStream_t stream) {
    const int per = em_philox_per_block(kind, dtype, range);
    const int64_t blocks = (numel + per - 1) / per;
    const int threads = 256;
    int64_t grid = (blocks + threads - 1) / threads;
    if (grid > 65535 * 8) grid = 65535 * 8;  // grid-stride beyond this
    fill_kernel<T><<<(unsigned)grid, threads, 0, stream>>>(static_cast<T *>(out), numel, seed, offset, kind, dtype,
                                                          a, b, from, range, per);
    return emc_check(cudaGetLastError(), "random fill launch");
}

}  // namespace

int emc_random_fill(int dev, int kind, int dtype, void *out, int64_t numel, uint64_t seed, uint64_t offset,
                    double a, double b, int64_t from, uint64_t range) {
    EmcDeviceGuard guard(dev);
    if (!guard.ok) return -1;
    if (numel <= 0) return 0;
    cudaStream_t s = static_cast<cudaStream_t>(emc_current_stream(dev));
    switch (dtype) {
    case BOOL_: return launch<bool>(out, numel, seed, offset, kind, dtype, a, b, from, range, s);
    case U8: return launch<uint8_t>(out, numel, seed, offset, kind, dtype, a, b, from, range, s);
    case I8: return launch<int8_t>(out, numel, seed, offset, kind, dtype, a, b, from, range, s);
    case I16: return launch<int16_t>(out, numel, seed, offset, kind, dtype, a, b, from, range, s);
    case I32: return launch<int32_t>(out, numel, seed, offset, kind, dtype, a, b, from, range, s);
    case I64: return launch<int64_t>(out, numel, seed, offset, kind, dtype, a, b, from, range, s);
    case F16: return launch<__half>(out, numel, seed, offset, kind, dtype, a, b, from, range, s);
    case BF16: return launch<__nv_bfloat16>(out, numel, seed, offset, kind, dtype, a, b, from, range, s);
    case F32: return launch<float>(out, numel, seed, offset, kind, dtype, a, b, from, range, s);
    case F64: return launch<double>(out, numel, seed, offset, kind, dtype, a, b, from, range, s);
    default:
        return emc_fail("random fill: unknown dtype code %d", dtype);
    }
}
