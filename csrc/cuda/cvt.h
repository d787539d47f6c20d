/* cvt.h (CUDA C++ only) — storage type <-> compute type for the kernels that keep data in
 * its own dtype and compute in float32 (halves) or the type itself
 * (nn_fused.cu, nn_kernels.cu, index.cu). */
#ifndef EMBER_CUDA_CVT_H
#define EMBER_CUDA_CVT_H

#include <cuda_bf16.h>
#include <cuda_fp16.h>

// Storage type T <-> compute type A (float for float32 and the halves).
template <typename T>
struct Cvt {
    using A = T;
    static __device__ __forceinline__ A ld(T v) { return v; }
    static __device__ __forceinline__ T st(A v) { return v; }
};
template <>
struct Cvt<__half> {
    using A = float;
    static __device__ __forceinline__ A ld(__half v) { return __half2float(v); }
    static __device__ __forceinline__ __half st(A v) { return __float2half_rn(v); }
};
template <>
struct Cvt<__nv_bfloat16> {
    using A = float;
    static __device__ __forceinline__ A ld(__nv_bfloat16 v) { return __bfloat162float(v); }
    static __device__ __forceinline__ __nv_bfloat16 st(A v) { return __float2bfloat16_rn(v); }
};

#endif
