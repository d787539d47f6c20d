/* blas.h — the GEMM entry point shared by the linear-algebra front-ends. */
#ifndef EMBER_CPU_BLAS_H
#define EMBER_CPU_BLAS_H
#include "../ember.h"

/* C (m x n, row-major, ldc) = op(A) @ op(B), where op(A) is m x k read from
 * row-major A with leading dimension lda (transposed when ta). Dtypes:
 * float32, float64 (BLAS when available) and int64 (a loop). */
void em_gemm(EmDType d, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void *a,
             int64_t lda, const void *b, int64_t ldb, void *c, int64_t ldc);
void em_blas_set_threads(int n);
extern const char *em_blas_name;
#endif
