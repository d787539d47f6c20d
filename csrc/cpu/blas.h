/* blas.h — the GEMM and dot entry points shared by the linear-algebra
 * front-ends (ops/linalg.c). */
#ifndef EMBER_CPU_BLAS_H
#define EMBER_CPU_BLAS_H
#include "../ember.h"

/* C (m x n, row-major, ldc) = alpha * op(A) @ op(B) + beta * C, where op(A)
 * is m x k read from row-major A with leading dimension lda (transposed when
 * ta). beta == 0: C is not read (NaN there does not leak), and alpha == 0:
 * A and B are not read, as in BLAS. Dtypes: float32 and float64 (BLAS when
 * em_gemm_uses_blas; gemv when m or n is 1), bfloat16 / float16 (oneDNN: only once
 * em_lowp_gemm_prepare said so, Note [low-precision GEMM]) and int64 (a loop; alpha/beta taken as integers). The
 * loops read a transposed B with strides, slowly: front-ends give them B
 * untransposed (BLAS also falls back to them for sizes past INT32_MAX).
 * `parallel`: the loops may use OpenMP threads (false when the caller
 * already runs GEMMs in parallel). */
void em_gemm_ex(EmDType d, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void *a,
                int64_t lda, const void *b, int64_t ldb, void *c, int64_t ldc, EmScalar alpha,
                EmScalar beta, bool parallel);
/* alpha = 1, beta = 0 */
void em_gemm(EmDType d, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void *a,
             int64_t lda, const void *b, int64_t ldb, void *c, int64_t ldc);
/* C = alpha * op(A) @ op(B) + beta * bias, bias (n elements, `bias_stride`
 * apart) broadcast along C's rows; float32 / float64 only (Note [bias in
 * the slabs] in blas.c). */
void em_gemm_bias(EmDType d, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void *a, int64_t lda,
                  const void *b, int64_t ldb, void *c, int64_t ldc, EmScalar alpha, const void *bias,
                  int64_t bias_stride, EmScalar beta);
/* Whether dtype d goes to BLAS (which takes a transposed B as is). */
bool em_gemm_uses_blas(EmDType d);
/* GEMMs of at most this m*n*k run on one thread: waking a second costs
 * more than it saves below about 2M (a 320x32x96 product took 3x longer on
 * two threads of a busy 2-core machine). Bigger ones are split into slabs
 * (Note [GEMM threads] in blas.c); batches of small ones are what ember
 * splits across its threads instead. */
#define EM_BLAS_SINGLE_THREAD_MNK 2097152.0
double em_dot_f64(int64_t n, const double *x, int64_t incx, const double *y, int64_t incy);
float em_dot_f32(int64_t n, const float *x, int64_t incx, const float *y, int64_t incy);
void em_blas_set_threads(int n);
/* At import: OpenBLAS runs single-threaded; ember splits big GEMMs (Note [GEMM threads]). */
void em_blas_init(void);
extern const char *em_blas_name;
#endif
