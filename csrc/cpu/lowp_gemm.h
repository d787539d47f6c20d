/* lowp_gemm.h — bfloat16 / float16 GEMM on the CPU through oneDNN, loaded
 * at run time (Note [low-precision GEMM] in lowp_gemm.c). */
#ifndef EMBER_CPU_LOWP_GEMM_H
#define EMBER_CPU_LOWP_GEMM_H
#include "../ember.h"

/* Which path half-precision products take: EMBER_LOWP_GEMM=auto (the
 * default: the library where it loads and runs the dtype), library (an
 * error when it cannot be loaded) or convert (float32 copies and sgemm). */
typedef enum { EM_LOWP_AUTO = 0, EM_LOWP_LIBRARY, EM_LOWP_CONVERT } EmLowpMode;

/* With the GIL: 1 when products in half dtype d go to the library (loading
 * it on the first call), 0 when they take the float32 conversion, -1 with
 * an exception (mode "library" and no library, a bad EMBER_LOWP_GEMM). */
int em_lowp_gemm_prepare(EmDType d);

/* C (m x n, dtype d, row-major, ldc) = alpha * op(A) @ op(B) + beta * C
 * with A, B in d, accumulated in float32 and rounded once into C; beta ==
 * 0: C is not read. Only after em_lowp_gemm_prepare(d) returned 1; no GIL
 * needed. A shape the library refuses is computed by conversion instead. */
void em_lowp_gemm(EmDType d, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void *a, int64_t lda,
                  const void *b, int64_t ldb, void *c, int64_t ldc, float alpha, float beta, bool parallel);

/* `batch` products at once (one library call), the matrices of A, B and C
 * sa, sb, sc elements apart (sa or sb 0: one matrix shared by the batch).
 * false when the library did not take it (C untouched): the caller runs
 * the matrices one by one. Same conditions as em_lowp_gemm. */
bool em_lowp_gemm_batched(EmDType d, bool ta, bool tb, int64_t batch, int64_t m, int64_t n, int64_t k, const void *a,
                          int64_t lda, int64_t sa, const void *b, int64_t ldb, int64_t sb, void *c, int64_t ldc,
                          int64_t sc, float alpha, float beta);

/* Failures inside em_lowp_gemm(_batched) since the last call: 0 none, 1 no
 * memory for a conversion (the front-end raises MemoryError), 2 the
 * library failed to run a product (RuntimeError). */
int em_lowp_gemm_take_failure(void);

/* What ember._C._lowp_gemm_info() reports. mode: -1 not yet read, else an
 * EmLowpMode; loaded: 0 not tried, 1 loaded, -1 failed (error says why);
 * per dtype ([0] bfloat16, [1] float16): the library builds a kernel, and
 * a fast one (not its reference kernel), and that kernel's name. */
typedef struct {
    int mode, loaded;
    const char *path, *error;
    bool dtype_ok[2], fast[2];
    const char *impl[2];
    char version[32];
    long long calls; /* matrix products the library has run */
} EmLowpStatus;
void em_lowp_gemm_status(EmLowpStatus *s);
/* With the GIL: read EMBER_LOWP_GEMM and try loading, as a first product would. -1: a bad mode. */
int em_lowp_gemm_load_now(void);
/* With the GIL: "auto", "library" or "convert" (-1 with ValueError otherwise). */
int em_lowp_gemm_set_mode(const char *mode);
/* Tests: when on, the library "refuses" every shape, so its products take the conversion inside em_lowp_gemm. */
void em_lowp_gemm_refuse_for_tests(bool on);
#endif
