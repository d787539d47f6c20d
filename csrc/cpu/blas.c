/* blas.c — matrix multiply kernels. Float32/float64 go to OpenBLAS (the
 * scipy-openblas32 wheel's prefixed symbols, or a system OpenBLAS) when the
 * build found one; otherwise, and for int64, a blocked loop. All matrices are
 * row-major with a leading dimension; transposed operands arrive as BLAS
 * transposes, not copies. */
#include "../ember.h"
#include "blas.h"
#include "lowp_gemm.h"
#include <complex.h>
#include <string.h>

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
void EM_CBLAS(sgemv)(int order, int trans, int m, int n, float alpha, const float *a, int lda,
                     const float *x, int incx, float beta, float *y, int incy);
void EM_CBLAS(dgemv)(int order, int trans, int m, int n, double alpha, const double *a, int lda,
                     const double *x, int incx, double beta, double *y, int incy);
/* complex: alpha and beta by address */
void EM_CBLAS(cgemm)(int order, int ta, int tb, int m, int n, int k, const void *alpha, const void *a,
                     int lda, const void *b, int ldb, const void *beta, void *c, int ldc);
void EM_CBLAS(zgemm)(int order, int ta, int tb, int m, int n, int k, const void *alpha, const void *a,
                     int lda, const void *b, int ldb, const void *beta, void *c, int ldc);
float EM_CBLAS(sdot)(int n, const float *x, int incx, const float *y, int incy);
double EM_CBLAS(ddot)(int n, const double *x, int incx, const double *y, int incy);
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

/* Note [GEMM threads]: OpenBLAS's own threaded GEMM splits one product
 * between threads that wait on each other at every panel, and they spin
 * (in OpenBLAS's pool, apart from ember's OpenMP team) while they wait. On
 * a busy 2-core machine a descheduled partner stalls the whole product: a
 * GPT step took 2.7x longer on two threads than on one, half of it in
 * OpenBLAS's wait loop. So OpenBLAS always runs single-threaded, and ember
 * splits big products itself into independent slabs of rows (or columns)
 * of C, run by its OpenMP team: no slab waits for another. Each slab
 * re-packs the operand it shares with the other slabs, so the split is
 * along the side that makes that operand the smaller one. */
void em_blas_init(void) { em_blas_set_threads(1); }

bool em_gemm_uses_blas(EmDType d) {
#ifdef EM_CBLAS
    return d == EM_FLOAT32 || d == EM_FLOAT64;
#else
    (void)d;
    return false;
#endif
}

/* The loops: C = alpha * op(A) @ B + beta * C, B not transposed (the
 * front-end copies a transposed B for them). Rows of C are split into
 * blocks of MB (one block per OpenMP task); inside a block the k and n
 * ranges are tiled so that a KB x NB tile of B stays in cache while every
 * row of the block streams over it (i-k-j order: the inner loop is a
 * vectorizable axpy over a row of B into a row of C). */
enum { MB = 16, KB = 128, NB = 512 };
#ifdef _OPENMP
#define OMP_ROW_BLOCKS _Pragma("omp parallel for schedule(static) num_threads(nt) if(nt > 1)")
#else
#define OMP_ROW_BLOCKS
#endif
#define GEMM_LOOP(NAME, T)                                                                 \
    static void NAME(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T *a,       \
                     int64_t lda, const T *b, int64_t ldb, T *c, int64_t ldc, T alpha,     \
                     T beta, bool parallel) {                                              \
        int64_t nblocks = (m + MB - 1) / MB;                                               \
        int nt = 1;                                                                        \
        if (parallel && (double)m * n * k >= 65536.0 && nblocks > 1)                       \
            nt = em_num_threads < nblocks ? em_num_threads : (int)nblocks;                 \
        OMP_ROW_BLOCKS                                                                     \
        for (int64_t blk = 0; blk < nblocks; blk++) {                                      \
            int64_t i0 = blk * MB, i1 = i0 + MB < m ? i0 + MB : m;                         \
            for (int64_t i = i0; i < i1; i++) {                                            \
                T *crow = c + i * ldc;                                                     \
                if (beta == 0)                                                             \
                    for (int64_t j = 0; j < n; j++) crow[j] = 0;                           \
                else if (beta != 1)                                                        \
                    for (int64_t j = 0; j < n; j++) crow[j] *= beta;                       \
            }                                                                              \
            if (alpha == 0) continue; /* BLAS: A and B are not read */                     \
            for (int64_t p0 = 0; p0 < k; p0 += KB) {                                       \
                int64_t p1 = p0 + KB < k ? p0 + KB : k;                                    \
                for (int64_t j0 = 0; j0 < n; j0 += NB) {                                   \
                    int64_t j1 = j0 + NB < n ? j0 + NB : n;                                \
                    for (int64_t i = i0; i < i1; i++) {                                    \
                        T *crow = c + i * ldc;                                             \
                        for (int64_t p = p0; p < p1; p++) {                                \
                            T av = alpha * (ta ? a[p * lda + i] : a[i * lda + p]);         \
                            if (!tb) {                                                     \
                                const T *brow = b + p * ldb;                               \
                                for (int64_t j = j0; j < j1; j++) crow[j] += av * brow[j]; \
                            } else { /* strided: only as a fallback (see blas.h) */        \
                                for (int64_t j = j0; j < j1; j++)                          \
                                    crow[j] += av * b[j * ldb + p];                        \
                            }                                                              \
                        }                                                                  \
                    }                                                                      \
                }                                                                          \
            }                                                                              \
        }                                                                                  \
    }
GEMM_LOOP(gemm_loop_f32, float)
GEMM_LOOP(gemm_loop_f64, double)
GEMM_LOOP(gemm_loop_i64, int64_t)
GEMM_LOOP(gemm_loop_c64, float _Complex)
GEMM_LOOP(gemm_loop_c128, double _Complex)

static bool fits_int(int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb, int64_t ldc) {
    return m < INT32_MAX && n < INT32_MAX && k < INT32_MAX && lda < INT32_MAX && ldb < INT32_MAX &&
           ldc < INT32_MAX;
}

#ifdef EM_CBLAS
/* y = alpha * op(A) x + beta * y with A row-major (rows x cols, lda); y is
 * zeroed first when beta == 0 so that NaN there never leaks, whatever the
 * BLAS version does with beta == 0. */
static void gemv(EmDType d, bool trans, int64_t rows, int64_t cols, double alpha, const void *a,
                 int64_t lda, const void *x, int64_t incx, double beta, void *y, int64_t incy) {
    int64_t ny = trans ? cols : rows;
    int T = trans ? CBLAS_TRANS : CBLAS_NO_TRANS;
    if (d == EM_FLOAT32) {
        if (beta == 0)
            for (int64_t i = 0; i < ny; i++) ((float *)y)[i * incy] = 0;
        EM_CBLAS(sgemv)(CBLAS_ROW_MAJOR, T, (int)rows, (int)cols, (float)alpha, a, (int)lda, x,
                        (int)incx, (float)beta, y, (int)incy);
    } else {
        if (beta == 0)
            for (int64_t i = 0; i < ny; i++) ((double *)y)[i * incy] = 0;
        EM_CBLAS(dgemv)(CBLAS_ROW_MAJOR, T, (int)rows, (int)cols, alpha, a, (int)lda, x, (int)incx,
                        beta, y, (int)incy);
    }
}
#endif

#ifdef EM_CBLAS
static void blas_gemm(EmDType d, int A, int B, int64_t m, int64_t n, int64_t k, double fa, const void *a,
                      int64_t lda, const void *b, int64_t ldb, double fb, void *c, int64_t ldc) {
    if (d == EM_FLOAT32)
        EM_CBLAS(sgemm)(CBLAS_ROW_MAJOR, A, B, (int)m, (int)n, (int)k, (float)fa, a, (int)lda, b, (int)ldb,
                        (float)fb, c, (int)ldc);
    else
        EM_CBLAS(dgemm)(CBLAS_ROW_MAJOR, A, B, (int)m, (int)n, (int)k, fa, a, (int)lda, b, (int)ldb, fb, c,
                        (int)ldc);
}
#endif /* the bias fill below also serves the loops' em_gemm_bias (a build without BLAS) */

/* Note [GEMM threads]: slabs of C's rows when C is taller than wide (each
 * slab re-packs B), else of its columns (each re-packs A); one slab per
 * thread, at least 64 wide, multiples of 16. (Two per thread, for balance
 * on a busy machine, re-packed twice as much: GPT-shaped linears took
 * 1.07-1.20x torch's time with two, 1.04x with one.) */
/* Note [bias in the slabs]: addmm with a bias broadcast along C's rows
 * (F.linear) writes beta * bias into C and lets BLAS add the product with
 * beta = 1. Each slab writes its own part of C just before its product, so
 * there is no separate parallel pass over C, and BLAS finds that part in
 * the cache of the thread that wrote it. */
typedef struct {
    const void *p; /* bias[j] at p + j * stride elements */
    int64_t stride;
    double beta;
} RowBias;

/* C[i, j] = beta * bias[col0 + j] for the rows x cols block at c */
static void fill_row_bias(EmDType d, const RowBias *rb, int64_t rows, int64_t cols, int64_t col0, void *c,
                          int64_t ldc) {
    if (d == EM_FLOAT32) {
        const float *b = (const float *)rb->p + col0 * rb->stride;
        float beta = (float)rb->beta, *c0 = c;
        for (int64_t i = 0; i < rows; i++) {
            float *row = c0 + i * ldc;
            if (rb->stride == 1 && rb->beta == 1)
                memcpy(row, b, cols * sizeof(float));
            else
                for (int64_t j = 0; j < cols; j++) row[j] = beta * b[j * rb->stride];
        }
    } else {
        const double *b = (const double *)rb->p + col0 * rb->stride;
        double *c0 = c;
        for (int64_t i = 0; i < rows; i++) {
            double *row = c0 + i * ldc;
            if (rb->stride == 1 && rb->beta == 1)
                memcpy(row, b, cols * sizeof(double));
            else
                for (int64_t j = 0; j < cols; j++) row[j] = rb->beta * b[j * rb->stride];
        }
    }
}

#ifdef EM_CBLAS
/* Slabs of C; with `rb`, each slab first writes its part of the bias and
 * BLAS adds the product to it (fb is then ignored). */
static void blas_gemm_split(EmDType d, int A, int B, int64_t m, int64_t n, int64_t k, double fa, const void *a,
                            int64_t lda, const void *b, int64_t ldb, double fb, void *c, int64_t ldc,
                            const RowBias *rb, const EmStop *stop) {
    const int nt = em_num_threads;
    const bool rows = m >= n;
    const int64_t len = rows ? m : n, isz = d == EM_FLOAT32 ? 4 : 8;
    int64_t step = (len + nt - 1) / nt;
    /* armed for interrupts: slabs of at most ~2^31 multiply-adds, each a
     * fraction of a second, polled in between (Note [interrupts]) */
    if (stop && stop->on) {
        int64_t most = (int64_t)((double)(1u << 31) / ((double)(rows ? n : m) * (double)k));
        if (step > most) step = most;
    }
    step = (step + 15) / 16 * 16;
    if (step < 64) step = 64;
    const int64_t slabs = (len + step - 1) / step;
    const bool ta = A == CBLAS_TRANS, tb = B == CBLAS_TRANS;
#ifdef _OPENMP
#pragma omp parallel for schedule(static, 1) num_threads(nt) if (slabs > 1)
#endif
    for (int64_t s = 0; s < slabs; s++) {
        if (em_stop_now(stop)) continue;
        int64_t lo = s * step, w = len - lo < step ? len - lo : step;
        char *cs = (char *)c + (rows ? lo * ldc : lo) * isz;
        if (rb) fill_row_bias(d, rb, rows ? w : m, rows ? n : w, rows ? 0 : lo, cs, ldc);
        double beta = rb ? 1.0 : fb;
        if (rows) /* rows lo.. of op(A) and C */
            blas_gemm(d, A, B, w, n, k, fa, (const char *)a + (ta ? lo : lo * lda) * isz, lda, b, ldb, beta, cs,
                      ldc);
        else /* columns lo.. of op(B) and C */
            blas_gemm(d, A, B, m, w, k, fa, a, lda, (const char *)b + (tb ? lo * ldb : lo) * isz, ldb, beta,
                      cs, ldc);
    }
}
#endif

/* complex64 / complex128: cgemm / zgemm (one call: OpenBLAS runs single-
 * threaded, Note [GEMM threads]), or the loop */
static void gemm_complex(EmDType d, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void *a,
                         int64_t lda, const void *b, int64_t ldb, void *c, int64_t ldc, EmScalar alpha,
                         EmScalar beta, bool parallel) {
    double _Complex za = em_scalar_to_double(alpha) + (alpha.kind == 'c' ? alpha.im : 0) * I;
    double _Complex zb = em_scalar_to_double(beta) + (beta.kind == 'c' ? beta.im : 0) * I;
    float _Complex ca = (float _Complex)za, cb = (float _Complex)zb;
#ifdef EM_CBLAS
    if (fits_int(m, n, k, lda, ldb, ldc) && k > 0) {
        int A = ta ? CBLAS_TRANS : CBLAS_NO_TRANS, B = tb ? CBLAS_TRANS : CBLAS_NO_TRANS;
        if (zb == 0) { /* C is not read: NaN there never leaks */
            int64_t isz = em_itemsize(d);
            for (int64_t i = 0; i < m; i++) memset((char *)c + i * ldc * isz, 0, (size_t)(n * isz));
        }
        if (d == EM_COMPLEX64)
            EM_CBLAS(cgemm)(CBLAS_ROW_MAJOR, A, B, (int)m, (int)n, (int)k, &ca, a, (int)lda, b, (int)ldb, &cb,
                            c, (int)ldc);
        else
            EM_CBLAS(zgemm)(CBLAS_ROW_MAJOR, A, B, (int)m, (int)n, (int)k, &za, a, (int)lda, b, (int)ldb, &zb,
                            c, (int)ldc);
        return;
    }
#endif
    if (d == EM_COMPLEX64)
        gemm_loop_c64(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, ca, cb, parallel);
    else
        gemm_loop_c128(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, za, zb, parallel);
}

void em_gemm_ex(EmDType d, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void *a,
                int64_t lda, const void *b, int64_t ldb, void *c, int64_t ldc, EmScalar alpha,
                EmScalar beta, bool parallel) {
    if (em_is_complex(d)) {
        gemm_complex(d, ta, tb, m, n, k, a, lda, b, ldb, c, ldc, alpha, beta, parallel);
        return;
    }
    double fa = em_scalar_to_double(alpha), fb = em_scalar_to_double(beta);
    if (d == EM_BFLOAT16 || d == EM_FLOAT16) { /* only once em_lowp_gemm_prepare(d) said so */
        em_lowp_gemm(d, ta, tb, m, n, k, a, lda, b, ldb, c, ldc, (float)fa, (float)fb, parallel);
        return;
    }
#ifdef EM_CBLAS
    if (em_gemm_uses_blas(d) && fits_int(m, n, k, lda, ldb, ldc) && k > 0 && n == 1) {
        /* matrix @ vector: B's column is x (stride ldb, or 1 when B is transposed) */
        gemv(d, ta, ta ? k : m, ta ? m : k, fa, a, lda, b, tb ? 1 : ldb, fb, c, ldc);
        return;
    }
    if (em_gemm_uses_blas(d) && fits_int(m, n, k, lda, ldb, ldc) && k > 0 && m == 1) {
        /* vector @ matrix: C^T = op(B)^T x with x A's row (stride 1, or lda when transposed) */
        gemv(d, !tb, tb ? n : k, tb ? k : n, fa, b, ldb, a, ta ? lda : 1, fb, c, 1);
        return;
    }
    if (em_gemm_uses_blas(d) && fits_int(m, n, k, lda, ldb, ldc) && k > 0) {
        int A = ta ? CBLAS_TRANS : CBLAS_NO_TRANS, B = tb ? CBLAS_TRANS : CBLAS_NO_TRANS;
        const EmStop *stop = em_stop_current;
        if ((parallel && em_num_threads > 1 && (double)m * n * k > EM_BLAS_SINGLE_THREAD_MNK) ||
            (stop && stop->on && (double)m * n * k > (double)(1u << 31))) {
            blas_gemm_split(d, A, B, m, n, k, fa, a, lda, b, ldb, fb, c, ldc, NULL, stop);
            return;
        }
        blas_gemm(d, A, B, m, n, k, fa, a, lda, b, ldb, fb, c, ldc);
        return;
    }
#endif
    (void)fits_int;
    if (d == EM_FLOAT32)
        gemm_loop_f32(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, (float)fa, (float)fb, parallel);
    else if (d == EM_FLOAT64)
        gemm_loop_f64(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, fa, fb, parallel);
    else
        gemm_loop_i64(ta, tb, m, n, k, a, lda, b, ldb, c, ldc,
                      alpha.kind == 'f' ? (int64_t)alpha.v.f : alpha.v.i,
                      beta.kind == 'f' ? (int64_t)beta.v.f : beta.v.i, parallel);
}

void em_gemm(EmDType d, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void *a,
             int64_t lda, const void *b, int64_t ldb, void *c, int64_t ldc) {
    EmScalar one = {'i', {1}}, zero = {'i', {0}};
    em_gemm_ex(d, ta, tb, m, n, k, a, lda, b, ldb, c, ldc, one, zero, true);
}

void em_gemm_bias(EmDType d, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void *a, int64_t lda,
                  const void *b, int64_t ldb, void *c, int64_t ldc, EmScalar alpha, const void *bias,
                  int64_t bias_stride, EmScalar beta) {
    RowBias rb = {bias, bias_stride, em_scalar_to_double(beta)};
    EmScalar one = {'i', {1}};
#ifdef EM_CBLAS
    if (em_gemm_uses_blas(d) && fits_int(m, n, k, lda, ldb, ldc) && k > 0 && m > 1 && n > 1 &&
        em_num_threads > 1 && (double)m * n * k > EM_BLAS_SINGLE_THREAD_MNK) {
        blas_gemm_split(d, ta ? CBLAS_TRANS : CBLAS_NO_TRANS, tb ? CBLAS_TRANS : CBLAS_NO_TRANS, m, n, k,
                        em_scalar_to_double(alpha), a, lda, b, ldb, 1.0, c, ldc, &rb, em_stop_current);
        return;
    }
#endif
    fill_row_bias(d, &rb, m, n, 0, c, ldc);
    em_gemm_ex(d, ta, tb, m, n, k, a, lda, b, ldb, c, ldc, alpha, one, true);
}

/* Dot products with element strides (any sign, 0 included). */
double em_dot_f64(int64_t n, const double *x, int64_t incx, const double *y, int64_t incy) {
#ifdef EM_CBLAS
    if (n < INT32_MAX && incx > 0 && incy > 0 && incx < INT32_MAX && incy < INT32_MAX)
        return EM_CBLAS(ddot)((int)n, x, (int)incx, y, (int)incy);
#endif
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += x[i * incx] * y[i * incy];
    return s;
}

float em_dot_f32(int64_t n, const float *x, int64_t incx, const float *y, int64_t incy) {
#ifdef EM_CBLAS
    if (n < INT32_MAX && incx > 0 && incy > 0 && incx < INT32_MAX && incy < INT32_MAX)
        return EM_CBLAS(sdot)((int)n, x, (int)incx, y, (int)incy);
#endif
    float s = 0;
    for (int64_t i = 0; i < n; i++) s += x[i * incx] * y[i * incy];
    return s;
}
