/* gemm_lt.h — the cuBLASLt epilogue entry of ember._cuda (gemm_lt.cpp),
 * behind EmCudaBackend's `gemm_bias` (cuda_backend.h). */
#ifndef EMBER_CUDA_GEMM_LT_H
#define EMBER_CUDA_GEMM_LT_H

#include "../cuda_backend.h"

/* C = op(A) @ op(B) + bias, column-major; 1 when cuBLASLt has no algorithm */
int emc_gemm_bias(int dev, int dtype, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const void *a,
                  int64_t lda, const void *b, int64_t ldb, const void *bias, void *c, int64_t ldc, bool allow_tf32);

#endif
