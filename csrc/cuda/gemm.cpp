/* gemm.cpp — batched matrix products through cuBLAS:
 *   C = alpha * op(A) @ op(B) + beta * C, column-major, `batch` matrices
 * apart by stride_a / stride_b / stride_c elements (0: the same matrix).
 *
 * One cuBLAS handle per device, created at its first product (never at
 * import) and bound at every call to the device's current stream, with a
 * workspace taken from the caching allocator for that (device, stream):
 * cublasSetStream drops any workspace set before, and a workspace must not
 * be shared by two streams running at once. float32 uses TF32 tensor cores
 * only when allow_tf32; float16 / bfloat16 accumulate in float32
 * (CUBLAS_COMPUTE_32F); float64 in float64. The _64 entry point takes
 * 64-bit sizes, so no dimension needs to fit an int. */
#include <cublas_v2.h>

#include <map>
#include <mutex>
#include <utility>

#include "runtime.h"

namespace {

std::mutex mutex;
cublasHandle_t handles[EMC_MAX_DEVICES];
struct Workspace {
    void *ptr = nullptr;
    size_t size = 0;
};
std::map<std::pair<int, cudaStream_t>, Workspace> workspaces;

int cublas_check(cublasStatus_t st, const char *what) {
    if (st == CUBLAS_STATUS_SUCCESS) return 0;
    return emc_fail("%s: %s (%s)", what, cublasGetStatusName(st), cublasGetStatusString(st));
}

/* The device's handle, on `stream`, with its workspace; NULL on failure.
 * The caller holds the mutex and has made dev current. */
cublasHandle_t handle_for(int dev, cudaStream_t stream) {
    cublasHandle_t &h = handles[dev];
    if (!h && cublas_check(cublasCreate(&h), "cublasCreate") < 0) {
        h = nullptr;
        return nullptr;
    }
    if (cublas_check(cublasSetStream(h, stream), "cublasSetStream") < 0) return nullptr;
    Workspace &ws = workspaces[{dev, stream}];
    if (!ws.ptr) {
        /* 32 MiB on Hopper and later, 8 MiB before: what cuBLAS itself suggests */
        int major = 0;
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
        cudaGetLastError();
        ws.size = major >= 9 ? 32u << 20 : 8u << 20;
        ws.ptr = emc_alloc(dev, ws.size, stream);
    }
    if (ws.ptr &&
        cublas_check(cublasSetWorkspace(h, ws.ptr, ws.size), "cublasSetWorkspace") < 0)
        return nullptr;
    /* without one (out of memory) cuBLAS uses its own: slower, still right */
    return h;
}

} // namespace

int emc_gemm(int dev, int dtype, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
             double alpha, const void *a, int64_t lda, int64_t stride_a, const void *b,
             int64_t ldb, int64_t stride_b, double beta, void *c, int64_t ldc, int64_t stride_c,
             int64_t batch, bool allow_tf32) {
    cudaDataType type;
    cublasComputeType_t compute;
    switch (dtype) {
    case DT_FLOAT32:
        type = CUDA_R_32F;
        compute = allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
        break;
    case DT_FLOAT64: type = CUDA_R_64F; compute = CUBLAS_COMPUTE_64F; break;
    case DT_FLOAT16: type = CUDA_R_16F; compute = CUBLAS_COMPUTE_32F; break;
    case DT_BFLOAT16: type = CUDA_R_16BF; compute = CUBLAS_COMPUTE_32F; break;
    default: return emc_fail("gemm: dtype code %d is not float32, float64, float16 or bfloat16", dtype);
    }
    if (m < 0 || n < 0 || k < 0 || batch < 0)
        return emc_fail("gemm: negative size (m=%lld, n=%lld, k=%lld, batch=%lld)", (long long)m,
                        (long long)n, (long long)k, (long long)batch);
    if (m == 0 || n == 0 || batch == 0) return 0;
    EmcDeviceGuard guard(dev);
    if (!guard.ok) return -1;
    std::lock_guard<std::mutex> lock(mutex);
    cublasHandle_t h = handle_for(dev, (cudaStream_t)emc_current_stream(dev));
    if (!h) return -1;
    float alpha32 = (float)alpha, beta32 = (float)beta; /* scalars in the compute type */
    bool f64 = dtype == DT_FLOAT64;
    return cublas_check(
        cublasGemmStridedBatchedEx_64(
            h, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k,
            f64 ? (const void *)&alpha : &alpha32, a, type, lda, stride_a, b, type, ldb, stride_b,
            f64 ? (const void *)&beta : &beta32, c, type, ldc, stride_c, batch, compute,
            CUBLAS_GEMM_DEFAULT),
        "cublasGemmStridedBatchedEx");
}
