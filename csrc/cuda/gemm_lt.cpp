/* gemm_lt.cpp — matrix products with a fused epilogue through cuBLASLt:
 * gemm_bias, C = op(A) @ op(B) + bias with the bias added to every column
 * (CUBLASLT_EPILOGUE_BIAS), column-major as gemm.cpp's products. addmm on a
 * GPU (ops/linalg.c, Note [GPU gemm]) uses it for beta == alpha == 1 and a
 * vector bias broadcast along rows — F.linear's case — which saves copying
 * the bias into C and a read of C by the product.
 *
 * One cuBLASLt handle per device, created at its first use, and a workspace
 * per (device, stream) from the caching allocator (a workspace must not be
 * shared by streams running at once), as gemm.cpp does for cuBLAS. The
 * heuristic's answer is cached by problem (dtype, transposes, sizes,
 * leading dims, operand alignments, TF32): the descriptors are rebuilt per
 * call (cheap host objects), the search is not. When cuBLASLt has no
 * algorithm the entry returns 1 having written nothing, and the caller
 * takes the plain gemm path. */
#include <cublasLt.h>

#include <map>
#include <mutex>
#include <tuple>
#include <utility>

#include "gemm_lt.h"
#include "runtime.h"

namespace {

std::mutex mutex;
cublasLtHandle_t handles[EMC_MAX_DEVICES];
struct Workspace {
    void *ptr = nullptr;
    size_t size = 0;
};
std::map<std::pair<int, cudaStream_t>, Workspace> workspaces;

/* the heuristic's answer for one problem shape: found == false means none */
struct Choice {
    bool found = false;
    cublasLtMatmulAlgo_t algo;
    size_t workspace = 0;
};
using ProblemKey = std::tuple<int, int, int, bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                              uint32_t, uint32_t, uint32_t, uint32_t, bool, size_t>;
std::map<ProblemKey, Choice> choices;

int lt_check(cublasStatus_t st, const char *what) {
    if (st == CUBLAS_STATUS_SUCCESS) return 0;
    return emc_fail("%s: %s (%s)", what, cublasGetStatusName(st), cublasGetStatusString(st));
}

/* The largest power of two (<= 256) dividing the address: the alignment
 * the heuristic may assume for an operand. */
uint32_t alignment_of(const void *p) {
    uintptr_t a = (uintptr_t)p;
    uint32_t al = 256;
    while (al > 1 && a % al) al >>= 1;
    return al;
}

/* The descriptors of one call, destroyed with the scope. */
struct Descs {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulPreference_t pref = nullptr;
    ~Descs() {
        if (pref) cublasLtMatmulPreferenceDestroy(pref);
        if (c) cublasLtMatrixLayoutDestroy(c);
        if (b) cublasLtMatrixLayoutDestroy(b);
        if (a) cublasLtMatrixLayoutDestroy(a);
        if (op) cublasLtMatmulDescDestroy(op);
    }
};

/* The device's handle and its workspace on `stream` (ws->ptr NULL when the
 * allocator had none: cuBLASLt then gets a zero-byte workspace). The caller
 * holds the mutex and has made dev current. */
cublasLtHandle_t handle_for(int dev, cudaStream_t stream, Workspace **ws_out) {
    cublasLtHandle_t &h = handles[dev];
    if (!h && lt_check(cublasLtCreate(&h), "cublasLtCreate") < 0) {
        h = nullptr;
        return nullptr;
    }
    Workspace &ws = workspaces[{dev, stream}];
    if (!ws.ptr) {
        /* 32 MiB on Hopper and later, 8 MiB before, as gemm.cpp */
        int major = 0;
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
        cudaGetLastError();
        size_t size = major >= 9 ? 32u << 20 : 8u << 20;
        ws.ptr = emc_alloc(dev, size, stream);
        ws.size = ws.ptr ? size : 0;
    }
    *ws_out = &ws;
    return h;
}

template <typename T>
int set_attr(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const T &v, const char *what) {
    return lt_check(cublasLtMatmulDescSetAttribute(d, attr, &v, sizeof v), what);
}

template <typename T>
int set_pref(cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t attr, const T &v) {
    return lt_check(cublasLtMatmulPreferenceSetAttribute(p, attr, &v, sizeof v), "cublasLtMatmulPreferenceSetAttribute");
}

} // namespace

int emc_gemm_bias(int dev, int dtype, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const void *a,
                  int64_t lda, const void *b, int64_t ldb, const void *bias, void *c, int64_t ldc, bool allow_tf32) {
    cudaDataType type;
    cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
    switch (dtype) {
    case DT_FLOAT32:
        type = CUDA_R_32F;
        if (allow_tf32) compute = CUBLAS_COMPUTE_32F_FAST_TF32;
        break;
    case DT_FLOAT16: type = CUDA_R_16F; break;
    case DT_BFLOAT16: type = CUDA_R_16BF; break;
    default: return emc_fail("gemm_bias: dtype code %d is not float32, float16 or bfloat16", dtype);
    }
    if (m < 0 || n < 0 || k < 0)
        return emc_fail("gemm_bias: negative size (m=%lld, n=%lld, k=%lld)", (long long)m, (long long)n,
                        (long long)k);
    if (m == 0 || n == 0) return 0;
    if (k == 0) return 1; /* C = bias broadcast: the plain path does it without a product */
    EmcDeviceGuard guard(dev);
    if (!guard.ok) return -1;
    std::lock_guard<std::mutex> lock(mutex);
    cudaStream_t stream = (cudaStream_t)emc_current_stream(dev);
    Workspace *ws = nullptr;
    cublasLtHandle_t h = handle_for(dev, stream, &ws);
    if (!h) return -1;

    Descs d;
    cublasOperation_t ta = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, tb = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    int32_t bias_type = (int32_t)type; /* the bias has C's type */
    if (lt_check(cublasLtMatmulDescCreate(&d.op, compute, CUDA_R_32F), "cublasLtMatmulDescCreate") < 0 ||
        set_attr(d.op, CUBLASLT_MATMUL_DESC_TRANSA, ta, "set TRANSA") < 0 ||
        set_attr(d.op, CUBLASLT_MATMUL_DESC_TRANSB, tb, "set TRANSB") < 0 ||
        set_attr(d.op, CUBLASLT_MATMUL_DESC_EPILOGUE, epi, "set EPILOGUE") < 0 ||
        set_attr(d.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias, "set BIAS_POINTER") < 0 ||
        set_attr(d.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, bias_type, "set BIAS_DATA_TYPE") < 0)
        return -1;
    /* the stored matrices: op(A) is m x k, op(B) k x n, C m x n */
    if (lt_check(cublasLtMatrixLayoutCreate(&d.a, type, trans_a ? k : m, trans_a ? m : k, lda), "layout A") < 0 ||
        lt_check(cublasLtMatrixLayoutCreate(&d.b, type, trans_b ? n : k, trans_b ? k : n, ldb), "layout B") < 0 ||
        lt_check(cublasLtMatrixLayoutCreate(&d.c, type, m, n, ldc), "layout C") < 0)
        return -1;

    uint32_t al_a = alignment_of(a), al_b = alignment_of(b), al_c = alignment_of(c), al_bias = alignment_of(bias);
    ProblemKey key{dev, dtype, 0, trans_a, trans_b, m, n, k, lda, ldb, ldc, al_a, al_b, al_c, al_bias,
                   allow_tf32, ws->size};
    auto it = choices.find(key);
    if (it == choices.end()) {
        Choice ch;
        uint64_t max_ws = ws->size;
        if (lt_check(cublasLtMatmulPreferenceCreate(&d.pref), "cublasLtMatmulPreferenceCreate") < 0 ||
            set_pref(d.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, max_ws) < 0 ||
            set_pref(d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, al_a) < 0 ||
            set_pref(d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, al_b) < 0 ||
            set_pref(d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, al_c) < 0 ||
            set_pref(d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, al_c) < 0)
            return -1;
        cublasLtMatmulHeuristicResult_t res = {};
        int found = 0;
        cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(h, d.op, d.a, d.b, d.c, d.c, d.pref, 1, &res, &found);
        if (st != CUBLAS_STATUS_SUCCESS && st != CUBLAS_STATUS_NOT_SUPPORTED)
            return lt_check(st, "cublasLtMatmulAlgoGetHeuristic");
        if (st == CUBLAS_STATUS_SUCCESS && found > 0 && res.state == CUBLAS_STATUS_SUCCESS &&
            res.workspaceSize <= ws->size) {
            ch.found = true;
            ch.algo = res.algo;
            ch.workspace = res.workspaceSize;
        }
        it = choices.emplace(key, ch).first;
    }
    if (!it->second.found) return 1;
    const float one = 1.0f, zero = 0.0f; /* beta 0: C is only written */
    cublasStatus_t st = cublasLtMatmul(h, d.op, &one, a, d.a, b, d.b, &zero, c, d.c, c, d.c, &it->second.algo,
                                       it->second.workspace ? ws->ptr : nullptr, it->second.workspace, stream);
    if (st == CUBLAS_STATUS_NOT_SUPPORTED) { /* refused before launching: remember, and take the plain path */
        it->second.found = false;
        return 1;
    }
    return lt_check(st, "cublasLtMatmul");
}
