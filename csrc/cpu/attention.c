/* attention.c — fused scaled-dot-product attention on the CPU, flash style
 * (Note [attention layout] in attention.h).
 *
 * Forward: for each (batch, head, block of BQ query rows) the key/value
 * rows stream by in blocks of BK. Each block's scores (BQ x BK) come from
 * one GEMM (q k^T), get the mask, and update every row's running max and
 * sum (the online softmax: when the max grows, what was summed so far and
 * the output accumulator are rescaled by exp(old - new)); a second GEMM
 * adds p v into the accumulator. Nothing of size L x S is ever allocated.
 * Causal problems skip the key blocks that lie wholly right of a query
 * block's last row. Tasks run on OpenMP threads, dynamic schedule (causal
 * blocks differ in cost), with per-thread buffers.
 *
 * Backward (FlashAttention-2's): p is recomputed block by block as
 * exp(s - lse); with Di = rowsum(dO o O),
 *   dv += p^T dO,  dp = dO v^T,  ds = p o (dp - Di),
 *   dq += scale ds k,  dk += scale ds^T q.
 * One task owns a (batch, key/value head) pair and every query head that
 * reads it, so dk and dv accumulate without races. With fewer such pairs
 * than threads, two passes instead: dq by (batch, head, query block), then
 * dk and dv by (batch, key/value head, key block), recomputing p and ds.
 *
 * Block sizes keep each GEMM at most EM_BLAS_SINGLE_THREAD_MNK, so OpenBLAS
 * runs it on the calling thread (ember's threads are the parallel layer). */
#include "attention.h"
#include "blas.h"
#include "fast_exp.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#define AT_PRAGMA(x) _Pragma(#x)
#define OMP_PARALLEL AT_PRAGMA(omp parallel num_threads(nt) if (nt > 1))
#define OMP_FOR_DYNAMIC AT_PRAGMA(omp for schedule(dynamic, 1))
#define SIMD_MAX(v) AT_PRAGMA(omp simd reduction(max : v))
#define SIMD_SUM(v) AT_PRAGMA(omp simd reduction(+ : v))
#else
#define OMP_PARALLEL
#define OMP_FOR_DYNAMIC
#define SIMD_MAX(v)
#define SIMD_SUM(v)
#endif

/* the block loops (mask, max, rescale, ds) also in an AVX2 build, chosen at load time */
#if defined(__x86_64__) && !defined(EM_NO_CLONES) && \
    ((defined(__clang__) && __clang_major__ >= 14) || (!defined(__clang__) && __GNUC__ >= 8))
#define AT_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define AT_CLONES
#endif

/* ------------------------------------------------------------ exp rows */

/* x[i] = exp(x[i] - m); returns the sum (when `sum`). m is finite. */
static float exp_rows_f32_plain(float *x, int64_t n, float m, bool sum) {
    float s = 0;
    for (int64_t i = 0; i < n; i++) {
        float e = expf(x[i] - m);
        x[i] = e;
        s += e;
    }
    return sum ? s : 0;
}

static double exp_rows_f64(double *x, int64_t n, double m, bool sum) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = exp(x[i] - m);
        x[i] = e;
        s += e;
    }
    return sum ? s : 0;
}

/* One row's online-softmax step (n scores, after the mask): the running
 * max *mx grows to nm = max(*mx, max(x)), x becomes exp(x - nm) and the
 * running sum *sm is rescaled and grown; returns alpha = exp(old max - nm),
 * the factor the row's output accumulator must be rescaled by. A row where
 * nothing took part yet (nm = -inf) is zeroed and returns 1; maxima skip
 * NaN, so an all-NaN row counts as fully masked, as in torch's kernel. */
#define ROW_STEP_PLAIN(NAME, T, EXPR)                                                 \
    static T NAME(T *x, int64_t n, T *mx, T *sm) {                                    \
        T bm = -INFINITY;                                                              \
        SIMD_MAX(bm)                                                                   \
        for (int64_t c = 0; c < n; c++) bm = x[c] > bm ? x[c] : bm;                    \
        T nm = bm > *mx ? bm : *mx;                                                    \
        if (nm == -INFINITY) {                                                         \
            memset(x, 0, (size_t)n * sizeof(T));                                       \
            return 1;                                                                  \
        }                                                                              \
        T alpha = *mx == nm ? 1 : (T)exp((double)(*mx - nm)); /* 0 from -inf */        \
        *sm = *sm * alpha + EXPR(x, n, nm, true);                                      \
        *mx = nm;                                                                      \
        return alpha;                                                                  \
    }
ROW_STEP_PLAIN(row_step_f32_plain, float, exp_rows_f32_plain)
ROW_STEP_PLAIN(row_step_f64, double, exp_rows_f64)

#if SM_HAVE_AVX2 /* exp8, hsum8, hmax8: cpu/fast_exp.h */
#define AT_AVX2 SM_AVX2

AT_AVX2 static float exp_rows_f32_avx2(float *x, int64_t n, float m, bool sum) {
    __m256 mb = _mm256_set1_ps(m), s8 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), mb));
        _mm256_storeu_ps(x + i, e);
        s8 = _mm256_add_ps(s8, e);
    }
    if (i < n) { /* the tail through a padded lane block */
        float tmp[8];
        int64_t r = n - i;
        for (int j = 0; j < 8; j++) tmp[j] = j < r ? x[i + j] : -INFINITY;
        __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(tmp), mb));
        _mm256_storeu_ps(tmp, e);
        s8 = _mm256_add_ps(s8, e);
        for (int64_t j = 0; j < r; j++) x[i + j] = tmp[j];
    }
    return sum ? hsum8(s8) : 0;
}

AT_AVX2 static float row_step_f32_avx2(float *x, int64_t n, float *mx, float *sm) {
    __m256 mv = _mm256_set1_ps(-INFINITY);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) mv = _mm256_max_ps(_mm256_loadu_ps(x + i), mv); /* NaN lanes keep mv */
    float bm = hmax8(mv);
    for (; i < n; i++) bm = x[i] > bm ? x[i] : bm;
    float nm = bm > *mx ? bm : *mx;
    if (nm == -INFINITY) {
        memset(x, 0, (size_t)n * sizeof(float));
        return 1;
    }
    float alpha = *mx == nm ? 1.0f : expf(*mx - nm); /* most rows: the max stands */
    *sm = *sm * alpha + exp_rows_f32_avx2(x, n, nm, true);
    *mx = nm;
    return alpha;
}

static float exp_rows_f32(float *x, int64_t n, float m, bool sum) {
    return use_avx2() ? exp_rows_f32_avx2(x, n, m, sum) : exp_rows_f32_plain(x, n, m, sum);
}
static float row_step_f32(float *x, int64_t n, float *mx, float *sm) {
    return use_avx2() ? row_step_f32_avx2(x, n, mx, sm) : row_step_f32_plain(x, n, mx, sm);
}
#else
static float exp_rows_f32(float *x, int64_t n, float m, bool sum) { return exp_rows_f32_plain(x, n, m, sum); }
static float row_step_f32(float *x, int64_t n, float *mx, float *sm) { return row_step_f32_plain(x, n, mx, sm); }
#endif

/* ------------------------------------------------------------ blocking */

enum { BQ_MAX = 64, BK_MAX = 512, BK_MIN = 16 };

/* Query rows per block and key rows per block: GEMMs of at most
 * EM_BLAS_SINGLE_THREAD_MNK multiply-adds, key blocks a multiple of 16. */
static void block_sizes(const EmAttn *p, int64_t *bq, int64_t *bk) {
    int64_t d = p->D > p->Dv ? p->D : p->Dv;
    if (d < 1) d = 1;
    int64_t q = p->L < BQ_MAX ? p->L : BQ_MAX;
    if ((double)q * BK_MIN * (double)d > EM_BLAS_SINGLE_THREAD_MNK) /* huge head dims: fewer rows */
        q = (int64_t)(EM_BLAS_SINGLE_THREAD_MNK / (BK_MIN * (double)d));
    if (q < 1) q = 1;
    int64_t k = (int64_t)(EM_BLAS_SINGLE_THREAD_MNK / ((double)q * (double)d));
    k = k / BK_MIN * BK_MIN;
    if (k < BK_MIN) k = BK_MIN;
    if (k > BK_MAX) k = BK_MAX;
    if (k > p->S) k = p->S;
    *bq = q;
    *bk = k;
}

double em_cpu_attention_work(const EmAttn *p) {
    return (double)p->B * (double)p->H * (double)p->L * (double)p->S * (double)(p->D + p->Dv);
}

static int thread_count(const EmAttn *p, int64_t tasks) {
    if (em_num_threads <= 1 || tasks < 2 || em_cpu_attention_work(p) < 65536.0) return 1;
    return em_num_threads < tasks ? em_num_threads : (int)tasks;
}

/* ------------------------------------------------------------ kernels */

#define T float
#define SUF f32
#define EXP_ROWS exp_rows_f32
#define ROW_STEP row_step_f32
#include "attention_tmpl.h"
#undef T
#undef SUF
#undef EXP_ROWS
#undef ROW_STEP

#define T double
#define SUF f64
#define EXP_ROWS exp_rows_f64
#define ROW_STEP row_step_f64
#include "attention_tmpl.h"
#undef T
#undef SUF
#undef EXP_ROWS
#undef ROW_STEP

int em_cpu_attention_forward(const EmAttn *p, char *out, char *lse) {
    if (p->dt == EM_FLOAT32) return attention_forward_f32(p, (float *)out, (float *)lse);
    return attention_forward_f64(p, (double *)out, (double *)lse);
}

int em_cpu_attention_backward(const EmAttn *p, const EmAttnOperand *grad_out, const EmAttnOperand *out,
                              const char *lse, char *dq, char *dk, char *dv) {
    if (p->dt == EM_FLOAT32)
        return attention_backward_f32(p, grad_out, out, (const float *)lse, (float *)dq, (float *)dk, (float *)dv);
    return attention_backward_f64(p, grad_out, out, (const double *)lse, (double *)dq, (double *)dk, (double *)dv);
}
