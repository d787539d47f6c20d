/* cross_entropy.c — the fused cross-entropy forward and backward (Note
 * [fused cross-entropy] in cross_entropy.h, layout Note [nll layout] in
 * softmax.h).
 *
 * Forward, per position: the max of its C logits, then one pass summing
 * exp(x - max) (and, with label smoothing, the weighted sum of x - max); the
 * loss term follows in double. Backward, per position: one pass writing
 * a * exp(x - lse) - b * w[c], then the target's element corrected.
 * Contiguous float32 rows (inner == 1) run in AVX2 where the CPU has it;
 * float64 and rows strided by `inner` (N, C, d1, ...) run plain loops over
 * `inner` lanes. Positions are split across OpenMP threads. */
#include "cross_entropy.h"
#include "fast_exp.h"
#include <stdlib.h>
#ifdef _OPENMP
#include <omp.h>
static inline int em_thread_id(void) { return omp_get_thread_num(); }
#else
static inline int em_thread_id(void) { return 0; }
#endif

#define XE_PRAGMA(x) _Pragma(#x)
#ifdef _OPENMP
#define SIMD_SUM(v) XE_PRAGMA(omp simd reduction(+ : v))
#define SIMD_SUM2(u, v) XE_PRAGMA(omp simd reduction(+ : u, v))
#define SIMD_MAX(v) XE_PRAGMA(omp simd reduction(max : v))
#define OMP_FOR XE_PRAGMA(omp parallel for num_threads(nt) schedule(static) if (nt > 1))
#else
#define SIMD_SUM(v)
#define SIMD_SUM2(u, v)
#define SIMD_MAX(v)
#define OMP_FOR
#endif
static inline double exp_f64(double x) { return exp(x); }

/* ------------------------------------------------- rows and blocks, by type */

/* row_stats: max *mx, log(sum exp(x - max)) *logsum and, when smooth,
 * sum_c w[c] (x[c] - max) *dot of one contiguous row. row_bwd: gi = a *
 * exp(x - lse) - b * w (b == 0: no smoothing term). The block versions do
 * the same for one [C, inner] block, `inner` lanes at once. */
#define XENT_KERNELS(T, EXP)                                                                  \
    SM_CLONES static void row_stats_##T(const T *x, const T *w, int64_t C, bool smooth, T *mx,  \
                                        double *logsum, double *dot) {                        \
        T m = -INFINITY, s = 0, d = 0;                                                        \
        SIMD_MAX(m)                                                                           \
        for (int64_t c = 0; c < C; c++) m = x[c] > m ? x[c] : m;                              \
        if (!smooth) {                                                                        \
            SIMD_SUM(s)                                                                       \
            for (int64_t c = 0; c < C; c++) s += EXP(x[c] - m);                               \
        } else if (!w) {                                                                      \
            SIMD_SUM2(s, d)                                                                   \
            for (int64_t c = 0; c < C; c++) {                                                 \
                T v = x[c] - m;                                                               \
                s += EXP(v);                                                                  \
                d += v;                                                                       \
            }                                                                                 \
        } else {                                                                              \
            SIMD_SUM2(s, d)                                                                   \
            for (int64_t c = 0; c < C; c++) {                                                 \
                T v = x[c] - m;                                                               \
                s += EXP(v);                                                                  \
                d += w[c] * v;                                                                \
            }                                                                                 \
        }                                                                                     \
        *mx = m;                                                                              \
        *logsum = log((double)s);                                                             \
        *dot = (double)d;                                                                     \
    }                                                                                         \
    SM_CLONES static void row_bwd_##T(const T *x, const T *w, int64_t C, T lse, T a, T b,      \
                                      T *gi) {                                                \
        if (b == 0)                                                                           \
            for (int64_t c = 0; c < C; c++) gi[c] = a * EXP(x[c] - lse);                      \
        else if (!w)                                                                          \
            for (int64_t c = 0; c < C; c++) gi[c] = a * EXP(x[c] - lse) - b;                  \
        else                                                                                  \
            for (int64_t c = 0; c < C; c++) gi[c] = a * EXP(x[c] - lse) - b * w[c];           \
    }                                                                                         \
    /* m, s, d: scratch lanes of `inner` elements */                                          \
    static void block_stats_##T(const T *x, const T *w, int64_t C, int64_t inner, bool smooth, \
                                T *m, T *s, T *d) {                                           \
        for (int64_t j = 0; j < inner; j++) {                                                 \
            m[j] = -INFINITY;                                                                 \
            s[j] = 0;                                                                         \
            d[j] = 0;                                                                         \
        }                                                                                     \
        for (int64_t c = 0; c < C; c++) {                                                     \
            const T *xr = x + c * inner;                                                      \
            for (int64_t j = 0; j < inner; j++) m[j] = xr[j] > m[j] ? xr[j] : m[j];           \
        }                                                                                     \
        for (int64_t c = 0; c < C; c++) {                                                     \
            const T *xr = x + c * inner;                                                      \
            T wc = w ? w[c] : (T)1;                                                           \
            for (int64_t j = 0; j < inner; j++) {                                             \
                T v = xr[j] - m[j];                                                           \
                s[j] += EXP(v);                                                               \
                if (smooth) d[j] += wc * v;                                                   \
            }                                                                                 \
        }                                                                                     \
    }                                                                                         \
    static void block_bwd_##T(const T *x, const T *w, int64_t C, int64_t inner, const T *lse,  \
                              const T *a, const T *b, T *gi) {                                \
        for (int64_t c = 0; c < C; c++) {                                                     \
            T wc = w ? w[c] : (T)1;                                                           \
            const T *xr = x + c * inner;                                                      \
            T *gr = gi + c * inner;                                                           \
            for (int64_t j = 0; j < inner; j++) gr[j] = a[j] * EXP(xr[j] - lse[j]) - b[j] * wc; \
        }                                                                                     \
    }
XENT_KERNELS(float, exp_f32)
XENT_KERNELS(double, exp_f64)

/* ------------------------------------------- AVX2 rows (float32, x86-64) */

#if SM_HAVE_AVX2
SM_AVX2 static void row_stats_avx2(const float *x, const float *w, int64_t C, bool smooth, float *mx,
                                   double *logsum, double *dot) {
    int64_t v = C & ~(int64_t)7, i;
    __m256 mv = _mm256_set1_ps(-INFINITY);
    for (i = 0; i < v; i += 8) mv = _mm256_max_ps(_mm256_loadu_ps(x + i), mv); /* NaN lanes keep mv */
    float m = hmax8(mv);
    for (; i < C; i++) m = x[i] > m ? x[i] : m;
    __m256 mb = _mm256_set1_ps(m), s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps(), d0 = _mm256_setzero_ps();
    if (!smooth) {
        for (i = 0; i + 16 <= v; i += 16) {
            s0 = _mm256_add_ps(s0, exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), mb)));
            s1 = _mm256_add_ps(s1, exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), mb)));
        }
        for (; i < v; i += 8) s0 = _mm256_add_ps(s0, exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), mb)));
    } else {
        for (i = 0; i < v; i += 8) {
            __m256 d = _mm256_sub_ps(_mm256_loadu_ps(x + i), mb);
            s0 = _mm256_add_ps(s0, exp8(d));
            d0 = w ? _mm256_fmadd_ps(_mm256_loadu_ps(w + i), d, d0) : _mm256_add_ps(d0, d);
        }
    }
    float s = hsum8(_mm256_add_ps(s0, s1)), d = hsum8(d0);
    for (; i < C; i++) {
        s += exp_f32(x[i] - m);
        if (smooth) d += (w ? w[i] : 1.0f) * (x[i] - m);
    }
    *mx = m;
    *logsum = log((double)s);
    *dot = (double)d;
}

SM_AVX2 static void row_bwd_avx2(const float *x, const float *w, int64_t C, float lse, float a, float b,
                                 float *gi) {
    int64_t v = C & ~(int64_t)7, i;
    __m256 lv = _mm256_set1_ps(lse), av = _mm256_set1_ps(a), bv = _mm256_set1_ps(b);
    for (i = 0; i < v; i += 8) {
        __m256 p = _mm256_mul_ps(av, exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), lv)));
        if (b != 0) p = _mm256_fnmadd_ps(bv, w ? _mm256_loadu_ps(w + i) : _mm256_set1_ps(1.0f), p);
        _mm256_storeu_ps(gi + i, p);
    }
    for (; i < C; i++) gi[i] = a * exp_f32(x[i] - lse) - b * (w ? w[i] : 1.0f);
}
#else
static void row_stats_avx2(const float *x, const float *w, int64_t C, bool smooth, float *mx, double *logsum,
                           double *dot) {
    row_stats_float(x, w, C, smooth, mx, logsum, dot);
}
static void row_bwd_avx2(const float *x, const float *w, int64_t C, float lse, float a, float b, float *gi) {
    row_bwd_float(x, w, C, lse, a, b, gi);
}
#endif

/* ------------------------------------------------------------- drivers */


static inline double ldv(const char *p, EmDType dt, int64_t i) {
    return dt == EM_FLOAT32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
}
static inline void stv(char *p, EmDType dt, int64_t i, double v) {
    if (dt == EM_FLOAT32)
        ((float *)p)[i] = (float)v;
    else
        ((double *)p)[i] = v;
}

static double weight_sum(const EmNll *q) {
    if (!q->w) return (double)q->C;
    double s = 0;
    for (int64_t c = 0; c < q->C; c++) s += ldv(q->w, q->dt, c);
    return s;
}

/* The loss term of position k = nn * inner + j from its row statistics. */
static inline void position_term(const EmXent *p, int64_t nn, int64_t j, double m, double logsum, double dot,
                                 double wsum, char *lse, double *terms, double *wt) {
    const EmNll *q = &p->nll;
    int64_t k = nn * q->inner + j, t = q->t[k];
    double l = m + logsum, e = p->smoothing;
    stv(lse, q->dt, k, l);
    if (t == q->ignore) {
        terms[k] = wt[k] = 0;
        return;
    }
    double w = q->w ? ldv(q->w, q->dt, t) : 1.0;
    double v = (1 - e) * w * (l - ldv(q->x, q->dt, (nn * q->C + t) * q->inner + j));
    if (e > 0) v += e / (double)q->C * (wsum * logsum - dot);
    terms[k] = v;
    wt[k] = w;
}

#define FWD_ROWS(T, STATS)                                                                   \
    do {                                                                                     \
        const T *x = (const T *)q->x, *w = (const T *)q->w;                                  \
        OMP_FOR                                                                              \
        for (int64_t nn = 0; nn < N; nn++) {                                                 \
            T m;                                                                             \
            double logsum, dot;                                                              \
            STATS(x + nn * C, w, C, smooth, &m, &logsum, &dot);                              \
            position_term(p, nn, 0, m, logsum, dot, wsum, lse, terms, wt);                   \
        }                                                                                    \
    } while (0)

#define FWD_BLOCKS(T)                                                                        \
    do {                                                                                     \
        const T *x = (const T *)q->x, *w = (const T *)q->w;                                  \
        T *scr = (T *)scratch;                                                               \
        OMP_FOR                                                                              \
        for (int64_t nn = 0; nn < N; nn++) {                                                 \
            int tid = em_thread_id();                                                        \
            T *m = scr + (size_t)tid * 3 * (size_t)inner, *s = m + inner, *d = s + inner;     \
            block_stats_##T(x + nn * C * inner, w, C, inner, smooth, m, s, d);               \
            for (int64_t j = 0; j < inner; j++)                                              \
                position_term(p, nn, j, m[j], log((double)s[j]), d[j], wsum, lse, terms, wt); \
        }                                                                                    \
    } while (0)

int em_cpu_xent_forward(const EmXent *p, char *lse, double *terms, double *wt) {
    const EmNll *q = &p->nll;
    int64_t N = q->N, C = q->C, inner = q->inner;
    bool smooth = p->smoothing > 0;
    double wsum = weight_sum(q);
    int nt = em_threads_for(N, N * C * inner);
    (void)nt;
    if (inner == 1) {
        if (q->dt == EM_FLOAT32 && use_avx2())
            FWD_ROWS(float, row_stats_avx2);
        else if (q->dt == EM_FLOAT32)
            FWD_ROWS(float, row_stats_float);
        else
            FWD_ROWS(double, row_stats_double);
        return 0;
    }
    size_t isz = q->dt == EM_FLOAT32 ? sizeof(float) : sizeof(double);
    void *scratch = malloc((size_t)nt * 3 * (size_t)inner * isz);
    if (!scratch) return -1;
    if (q->dt == EM_FLOAT32)
        FWD_BLOCKS(float);
    else
        FWD_BLOCKS(double);
    free(scratch);
    return 0;
}

/* Position k's coefficients: a multiplies exp(x - lse), b the weights; the
 * target's element gets -s (1 - e) w[t] besides. */
static inline void position_coefs(const EmXent *p, int64_t k, double s, double wsum, double *a, double *b,
                                  double *at_target) {
    const EmNll *q = &p->nll;
    double e = p->smoothing, w = q->w ? ldv(q->w, q->dt, q->t[k]) : 1.0;
    *a = s * ((1 - e) * w + e / (double)q->C * wsum);
    *b = s * e / (double)q->C;
    *at_target = s * (1 - e) * w;
}

#define BWD_ROWS(T, ROW)                                                                     \
    do {                                                                                     \
        const T *x = (const T *)q->x, *w = (const T *)q->w, *l = (const T *)lse;             \
        T *g = (T *)gi;                                                                      \
        OMP_FOR                                                                              \
        for (int64_t nn = 0; nn < N; nn++) {                                                 \
            int64_t t = q->t[nn];                                                            \
            if (t == q->ignore) {                                                            \
                memset(g + nn * C, 0, (size_t)C * sizeof(T));                                \
                continue;                                                                    \
            }                                                                                \
            double a, b, at;                                                                 \
            position_coefs(p, nn, s[nn], wsum, &a, &b, &at);                                 \
            ROW(x + nn * C, w, C, l[nn], (T)a, (T)b, g + nn * C);                            \
            g[nn * C + t] -= (T)at;                                                          \
        }                                                                                    \
    } while (0)

#define BWD_BLOCKS(T)                                                                        \
    do {                                                                                     \
        const T *x = (const T *)q->x, *w = (const T *)q->w, *l = (const T *)lse;             \
        T *g = (T *)gi, *scr = (T *)scratch;                                                 \
        OMP_FOR                                                                              \
        for (int64_t nn = 0; nn < N; nn++) {                                                 \
            T *a = scr + (size_t)em_thread_id() * 2 * (size_t)inner, *b = a + inner;         \
            for (int64_t j = 0; j < inner; j++) {                                            \
                int64_t k = nn * inner + j;                                                  \
                double av = 0, bv = 0, at = 0;                                               \
                if (q->t[k] != q->ignore) position_coefs(p, k, s[k], wsum, &av, &bv, &at);   \
                a[j] = (T)av;                                                                \
                b[j] = (T)bv;                                                                \
            }                                                                                \
            T *gb = g + nn * C * inner;                                                      \
            block_bwd_##T(x + nn * C * inner, w, C, inner, l + nn * inner, a, b, gb);        \
            for (int64_t j = 0; j < inner; j++) {                                            \
                int64_t k = nn * inner + j, t = q->t[k];                                     \
                if (t == q->ignore) { /* the whole lane is zero, NaN logits included */      \
                    for (int64_t c = 0; c < C; c++) gb[c * inner + j] = 0;                   \
                    continue;                                                                \
                }                                                                            \
                double av, bv, at;                                                           \
                position_coefs(p, k, s[k], wsum, &av, &bv, &at);                             \
                gb[t * inner + j] -= (T)at;                                                  \
            }                                                                                \
        }                                                                                    \
    } while (0)

int em_cpu_xent_backward(const EmXent *p, const char *lse, const double *s, char *gi) {
    const EmNll *q = &p->nll;
    int64_t N = q->N, C = q->C, inner = q->inner;
    double wsum = weight_sum(q);
    int nt = em_threads_for(N, N * C * inner);
    (void)nt;
    if (inner == 1) {
        if (q->dt == EM_FLOAT32 && use_avx2())
            BWD_ROWS(float, row_bwd_avx2);
        else if (q->dt == EM_FLOAT32)
            BWD_ROWS(float, row_bwd_float);
        else
            BWD_ROWS(double, row_bwd_double);
        return 0;
    }
    size_t isz = q->dt == EM_FLOAT32 ? sizeof(float) : sizeof(double);
    void *scratch = malloc((size_t)nt * 2 * (size_t)inner * isz);
    if (!scratch) return -1;
    if (q->dt == EM_FLOAT32)
        BWD_BLOCKS(float);
    else
        BWD_BLOCKS(double);
    free(scratch);
    return 0;
}
