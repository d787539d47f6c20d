/* blas.c — matrix multiply kernels. Float32/float64 go to OpenBLAS (the
 * scipy-openblas32 wheel's prefixed symbols, or a system OpenBLAS) when the
 * build found one; otherwise, and for integer dtypes, a plain blocked loop.
 * All matrices are row-major with a leading dimension; transposed operands
 * arrive as BLAS transposes, not copies. */
#include "../ember.h"
#include "blas.h"

#if defined(EM_BLAS_SCIPY)
#define EM_CBLAS(name) scipy_cblas_##name
#define EM_BLAS_THREADS scipy_openblas_set_num_threads
#elif defined(EM_BLAS_SYSTEM)
#define EM_CBLAS(name) cblas_##name
#define EM_BLAS_THREADS openblas_set_num_threads
#endif

#ifdef EM_CBLAS
enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111, CBLAS_TRANS = 112 };
void EM_CBLAS(sgemm)(int order, int ta, int tb, int m, int n, int k, float alpha, const float *a,
                     int lda, const float *b, int ldb, float beta, float *c, int ldc);
void EM_CBLAS(dgemm)(int order, int ta, int tb, int m, int n, int k, double alpha, const double *a,
                     int lda, const double *b, int ldb, double beta, double *c, int ldc);
void EM_BLAS_THREADS(int n);
const char *em_blas_name = "OpenBLAS";
#else
const char *em_blas_name = "none (built-in loops)";
#endif

void em_blas_set_threads(int n) {
#ifdef EM_CBLAS
    EM_BLAS_THREADS(n);
#else
    (void)n;
#endif
}

/* C = A @ B for row-major blocks: C[i, j] += sum_k A[i, k] * B[k, j], where
 * the transposes are read through the strides. A plain loop, i-k-j ordered
 * so the innermost loop streams a row of B and a row of C. */
#define GEMM_LOOP(NAME, T, ACC)                                                    \
    static void NAME(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T *a,   \
                     int64_t lda, const T *b, int64_t ldb, T *c, int64_t ldc) {        \
        for (int64_t i = 0; i < m; i++) {                                              \
            T *crow = c + i * ldc;                                                     \
            for (int64_t j = 0; j < n; j++) crow[j] = 0;                               \
            for (int64_t p = 0; p < k; p++) {                                          \
                ACC av = ta ? a[p * lda + i] : a[i * lda + p];                         \
                if (av == 0) continue;                                                 \
                if (!tb) {                                                             \
                    const T *brow = b + p * ldb;                                       \
                    for (int64_t j = 0; j < n; j++) crow[j] += (T)(av * brow[j]);      \
                } else {                                                               \
                    for (int64_t j = 0; j < n; j++) crow[j] += (T)(av * b[j * ldb + p]); \
                }                                                                      \
            }                                                                          \
        }                                                                              \
    }
GEMM_LOOP(gemm_loop_f32, float, float)
GEMM_LOOP(gemm_loop_f64, double, double)
GEMM_LOOP(gemm_loop_i64, int64_t, int64_t)

static bool fits_int(int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb, int64_t ldc) {
    return m < INT32_MAX && n < INT32_MAX && k < INT32_MAX && lda < INT32_MAX && ldb < INT32_MAX &&
           ldc < INT32_MAX;
}

void em_gemm(EmDType d, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void *a,
             int64_t lda, const void *b, int64_t ldb, void *c, int64_t ldc) {
#ifdef EM_CBLAS
    if ((d == EM_FLOAT32 || d == EM_FLOAT64) && fits_int(m, n, k, lda, ldb, ldc) && k > 0) {
        int A = ta ? CBLAS_TRANS : CBLAS_NO_TRANS, B = tb ? CBLAS_TRANS : CBLAS_NO_TRANS;
        if (d == EM_FLOAT32)
            EM_CBLAS(sgemm)(CBLAS_ROW_MAJOR, A, B, (int)m, (int)n, (int)k, 1.0f, a, (int)lda, b,
                            (int)ldb, 0.0f, c, (int)ldc);
        else
            EM_CBLAS(dgemm)(CBLAS_ROW_MAJOR, A, B, (int)m, (int)n, (int)k, 1.0, a, (int)lda, b,
                            (int)ldb, 0.0, c, (int)ldc);
        return;
    }
#endif
    (void)fits_int;
    if (d == EM_FLOAT32)
        gemm_loop_f32(ta, tb, m, n, k, a, lda, b, ldb, c, ldc);
    else if (d == EM_FLOAT64)
        gemm_loop_f64(ta, tb, m, n, k, a, lda, b, ldb, c, ldc);
    else
        gemm_loop_i64(ta, tb, m, n, k, a, lda, b, ldb, c, ldc);
}
