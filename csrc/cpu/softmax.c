/* softmax.c — fused softmax / log-softmax along one dim, their backward, and
 * the negative log-likelihood loss (Note [softmax layout], Note [nll layout]
 * in softmax.h).
 *
 * A contiguous row takes three passes: max, exp and sum (stored for softmax,
 * only summed for log_softmax), then a scale (softmax) or a shift
 * (log_softmax). Rows strided by `inner` run the same passes across `inner`
 * lanes at once, so every loop is a unit-stride loop the compiler
 * vectorizes. float32 uses a branch-free exp (fast_exp.h) that vectorizes;
 * float64 calls libm. Rows are split across OpenMP threads.
 */
#include "softmax.h"
#include "fast_exp.h"
#include <math.h>
#include <stdlib.h>

/* Reductions in vector lanes (reassociated sums, as torch's vectorized
 * kernels): OpenMP's simd reductions where the compiler has OpenMP. */
#define SM_PRAGMA(x) _Pragma(#x)
#ifdef _OPENMP
#define SIMD_SUM(v) SM_PRAGMA(omp simd reduction(+ : v))
#define SIMD_MAX(v) SM_PRAGMA(omp simd reduction(max : v))
#define OMP_FOR SM_PRAGMA(omp parallel for num_threads(nt) schedule(static) if (nt > 1))
#define OMP_PARALLEL SM_PRAGMA(omp parallel num_threads(nt) if (nt > 1))
#define OMP_FOR_IN SM_PRAGMA(omp for schedule(static))
#else
#define SIMD_SUM(v)
#define SIMD_MAX(v)
#define OMP_FOR
#define OMP_PARALLEL
#define OMP_FOR_IN
#endif
static inline double exp_f64(double x) { return exp(x); }

/* ------------------------------------------------------------ forward */

/* T: element type, EXP its exp. Contiguous rows of length n. */
#define ROW_FWD(T, EXP)                                                                  \
    SM_CLONES static void row_fwd_##T(const T *x, T *y, int64_t n, bool lg) {           \
        /* a NaN is skipped by the max but then makes the sum, so the row, NaN */        \
        T m = -INFINITY;                                                                 \
        SIMD_MAX(m)                                                                      \
        for (int64_t i = 0; i < n; i++) m = x[i] > m ? x[i] : m;                         \
        T sum = 0;                                                                       \
        if (lg) {                                                                       \
            SIMD_SUM(sum)                                                                \
            for (int64_t i = 0; i < n; i++) sum += EXP(x[i] - m);                        \
            T shift = m + (T)log((double)sum);                                           \
            for (int64_t i = 0; i < n; i++) y[i] = x[i] - shift;                         \
        } else {                                                                         \
            SIMD_SUM(sum)                                                                \
            for (int64_t i = 0; i < n; i++) {                                            \
                T e = EXP(x[i] - m);                                                     \
                y[i] = e;                                                                \
                sum += e;                                                                \
            }                                                                            \
            T inv = (T)1 / sum;                                                          \
            for (int64_t i = 0; i < n; i++) y[i] *= inv;                                 \
        }                                                                                \
    }                                                                                    \
    /* one [n, inner] block; m and s are scratch of `inner` elements */                  \
    SM_CLONES static void block_fwd_##T(const T *x, T *y, int64_t n, int64_t inner,      \
                                        bool lg, T *m, T *s) {                          \
        for (int64_t j = 0; j < inner; j++) {                                            \
            m[j] = -INFINITY;                                                            \
            s[j] = 0;                                                                    \
        }                                                                                \
        for (int64_t i = 0; i < n; i++) {                                                \
            const T *xr = x + i * inner;                                                 \
            for (int64_t j = 0; j < inner; j++)                                          \
                m[j] = xr[j] > m[j] ? xr[j] : m[j];                                    \
        }                                                                                \
        for (int64_t i = 0; i < n; i++) {                                                \
            const T *xr = x + i * inner;                                                 \
            T *yr = y + i * inner;                                                       \
            for (int64_t j = 0; j < inner; j++) {                                        \
                T e = EXP(xr[j] - m[j]);                                                 \
                if (!lg) yr[j] = e;                                                     \
                s[j] += e;                                                               \
            }                                                                            \
        }                                                                                \
        if (lg) {                                                                       \
            for (int64_t j = 0; j < inner; j++) s[j] = m[j] + (T)log((double)s[j]);   \
            for (int64_t i = 0; i < n; i++)                                              \
                for (int64_t j = 0; j < inner; j++) y[i * inner + j] = x[i * inner + j] - s[j]; \
        } else {                                                                         \
            for (int64_t j = 0; j < inner; j++) s[j] = (T)1 / s[j];                      \
            for (int64_t i = 0; i < n; i++)                                              \
                for (int64_t j = 0; j < inner; j++) y[i * inner + j] *= s[j];            \
        }                                                                                \
    }
ROW_FWD(float, exp_f32)
ROW_FWD(double, exp_f64)

/* ------------------------------------------------------------ backward */

#define ROW_BWD(T, EXP)                                                                  \
    SM_CLONES static void row_bwd_##T(const T *g, const T *y, T *gi, int64_t n, bool lg) { \
        T s = 0;                                                                         \
        if (lg) {                                                                       \
            SIMD_SUM(s)                                                                  \
            for (int64_t i = 0; i < n; i++) s += g[i];                                   \
            for (int64_t i = 0; i < n; i++) gi[i] = g[i] - EXP(y[i]) * s;                \
        } else {                                                                         \
            SIMD_SUM(s)                                                                  \
            for (int64_t i = 0; i < n; i++) s += g[i] * y[i];                            \
            for (int64_t i = 0; i < n; i++) gi[i] = y[i] * (g[i] - s);                   \
        }                                                                                \
    }                                                                                    \
    SM_CLONES static void block_bwd_##T(const T *g, const T *y, T *gi, int64_t n,        \
                                        int64_t inner, bool lg, T *s) {                 \
        for (int64_t j = 0; j < inner; j++) s[j] = 0;                                    \
        for (int64_t i = 0; i < n; i++)                                                  \
            for (int64_t j = 0; j < inner; j++)                                          \
                s[j] += lg ? g[i * inner + j] : g[i * inner + j] * y[i * inner + j];    \
        for (int64_t i = 0; i < n; i++)                                                  \
            for (int64_t j = 0; j < inner; j++) {                                        \
                int64_t k = i * inner + j;                                               \
                gi[k] = lg ? g[k] - EXP(y[k]) * s[j] : y[k] * (g[k] - s[j]);            \
            }                                                                            \
    }
ROW_BWD(float, exp_f32)
ROW_BWD(double, exp_f64)

/* ------------------------------------------- AVX2 rows (float32, x86-64) */

/* GCC does not vectorize the exp-and-sum loop above (it keeps the integer
 * exponent trick scalar), so the contiguous float32 rows get explicit AVX2
 * code: the same exp as exp_f32, eight lanes at a time. */
#if SM_HAVE_AVX2
SM_AVX2 static void row_fwd_avx2(const float *x, float *y, int64_t n, bool lg) {
    int64_t v = n & ~(int64_t)7, i;
    __m256 mv = _mm256_set1_ps(-INFINITY);
    for (i = 0; i < v; i += 8) mv = _mm256_max_ps(_mm256_loadu_ps(x + i), mv); /* NaN lanes keep mv */
    float m = hmax8(mv);
    for (; i < n; i++) m = x[i] > m ? x[i] : m;
    __m256 mb = _mm256_set1_ps(m), s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    for (i = 0; i + 16 <= v; i += 16) {
        __m256 e0 = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), mb));
        __m256 e1 = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), mb));
        if (!lg) {
            _mm256_storeu_ps(y + i, e0);
            _mm256_storeu_ps(y + i + 8, e1);
        }
        s0 = _mm256_add_ps(s0, e0);
        s1 = _mm256_add_ps(s1, e1);
    }
    for (; i < v; i += 8) {
        __m256 e0 = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), mb));
        if (!lg) _mm256_storeu_ps(y + i, e0);
        s0 = _mm256_add_ps(s0, e0);
    }
    float sum = hsum8(_mm256_add_ps(s0, s1));
    for (; i < n; i++) {
        float e = exp_f32(x[i] - m);
        if (!lg) y[i] = e;
        sum += e;
    }
    if (lg) {
        __m256 sh = _mm256_set1_ps(m + logf(sum));
        for (i = 0; i < v; i += 8) _mm256_storeu_ps(y + i, _mm256_sub_ps(_mm256_loadu_ps(x + i), sh));
        for (; i < n; i++) y[i] = x[i] - (m + logf(sum));
    } else {
        float inv = 1.0f / sum;
        __m256 iv = _mm256_set1_ps(inv);
        for (i = 0; i < v; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), iv));
        for (; i < n; i++) y[i] *= inv;
    }
}

SM_AVX2 static void row_bwd_avx2(const float *g, const float *y, float *gi, int64_t n, bool lg) {
    int64_t v = n & ~(int64_t)7, i;
    __m256 acc = _mm256_setzero_ps();
    for (i = 0; i < v; i += 8) {
        __m256 gv = _mm256_loadu_ps(g + i);
        acc = lg ? _mm256_add_ps(acc, gv) : _mm256_fmadd_ps(gv, _mm256_loadu_ps(y + i), acc);
    }
    float s = hsum8(acc);
    for (; i < n; i++) s += lg ? g[i] : g[i] * y[i];
    __m256 sv = _mm256_set1_ps(s);
    for (i = 0; i < v; i += 8) {
        __m256 gv = _mm256_loadu_ps(g + i), yv = _mm256_loadu_ps(y + i);
        _mm256_storeu_ps(gi + i, lg ? _mm256_fnmadd_ps(exp8(yv), sv, gv) : _mm256_mul_ps(yv, _mm256_sub_ps(gv, sv)));
    }
    for (; i < n; i++) gi[i] = lg ? g[i] - exp_f32(y[i]) * s : y[i] * (g[i] - s);
}

#else
static void row_fwd_avx2(const float *x, float *y, int64_t n, bool lg) { row_fwd_float(x, y, n, lg); }
static void row_bwd_avx2(const float *g, const float *y, float *gi, int64_t n, bool lg) {
    row_bwd_float(g, y, gi, n, lg);
}
#endif

/* Threads over the outer blocks (or, with one block, none: a single row of a
 * huge vocabulary is one pass of memory anyway). */

#define DRIVE(T, ROWCALL, BLOCKCALL, NSCR)                                               \
    do {                                                                                 \
        int nt = em_threads_for(outer, outer * n * inner);                                  \
        (void)nt;                                                                        \
        if (inner == 1) {                                                                \
            OMP_FOR                                                                      \
            for (int64_t o = 0; o < outer; o++) ROWCALL;                                 \
        } else {                                                                         \
            OMP_PARALLEL                                                                 \
            {                                                                            \
                T *scr = malloc((size_t)(NSCR) * (size_t)inner * sizeof(T));             \
                if (!scr) __atomic_store_n(&failed, 1, __ATOMIC_RELAXED);                \
                /* every thread meets the work-sharing loop, with scratch or not */      \
                OMP_FOR_IN                                                               \
                for (int64_t o = 0; o < outer; o++)                                      \
                    if (scr) BLOCKCALL;                                                  \
                free(scr);                                                               \
            }                                                                            \
        }                                                                                \
    } while (0)
/* Note [softmax of half types]: each [n, inner] block is widened into float32
 * scratch of the thread, run through the float32 code, and rounded back, so
 * no float32 copy of the whole tensor is made and the results are those of
 * the float32 kernel rounded once. HALF_BLOCKS widens the nin half inputs of
 * a block to f[0..nin-1]; BODY writes f[nin]; `aux` is 2 * inner more floats
 * for the strided blocks. Returns (from the enclosing function) -1 when
 * scratch could not be had. */
#define HALF_BLOCKS(nin, ins, outp, BODY)                                                \
    do {                                                                                 \
        int64_t b = n * inner;                                                           \
        bool bf = dt == EM_BFLOAT16;                                                     \
        int nt = em_threads_for(outer, outer * b);                                       \
        int failed = 0;                                                                  \
        (void)nt;                                                                        \
        OMP_PARALLEL                                                                     \
        {                                                                                \
            float *f[4] = {NULL};                                                        \
            float *base = malloc(((size_t)(nin + 1) * (size_t)b + 2 * (size_t)inner) * sizeof(float)); \
            if (!base) __atomic_store_n(&failed, 1, __ATOMIC_RELAXED);                   \
            for (int k = 0; base && k <= (nin); k++) f[k] = base + (size_t)k * (size_t)b; \
            float *aux = base ? base + (size_t)((nin) + 1) * (size_t)b : NULL;           \
            (void)aux;                                                                   \
            OMP_FOR_IN                                                                   \
            for (int64_t o = 0; o < outer; o++) {                                        \
                if (!base) continue;                                                     \
                for (int k = 0; k < (nin); k++) em_half_to_f32_run((ins)[k] + o * b, f[k], b, bf); \
                BODY;                                                                    \
                em_f32_to_half_run(f[nin], (outp) + o * b, b, bf);                       \
            }                                                                            \
            free(base);                                                                  \
        }                                                                                \
        return failed ? -1 : 0;                                                          \
    } while (0)

static int softmax_half(const uint16_t *x, uint16_t *y, EmDType dt, int64_t outer, int64_t n,
                        int64_t inner, bool lg) {
    const uint16_t *ins[1] = {x};
    bool v = use_avx2();
    HALF_BLOCKS(1, ins, y,
                inner == 1 ? (v ? row_fwd_avx2 : row_fwd_float)(f[0], f[1], n, lg)
                           : block_fwd_float(f[0], f[1], n, inner, lg, aux, aux + inner));
}

static int softmax_backward_half(const uint16_t *g, const uint16_t *y, uint16_t *gi, EmDType dt,
                                 int64_t outer, int64_t n, int64_t inner, bool lg) {
    const uint16_t *ins[2] = {g, y};
    bool v = use_avx2();
    HALF_BLOCKS(2, ins, gi,
                inner == 1 ? (v ? row_bwd_avx2 : row_bwd_float)(f[0], f[1], f[2], n, lg)
                           : block_bwd_float(f[0], f[1], f[2], n, inner, lg, aux));
}

int em_cpu_softmax(const char *in, char *out, EmDType dt, int64_t outer, int64_t n,
                   int64_t inner, bool lg) {
    int64_t b = n * inner;
    int failed = 0;
    if (dt == EM_FLOAT16 || dt == EM_BFLOAT16)
        return softmax_half((const uint16_t *)in, (uint16_t *)out, dt, outer, n, inner, lg);
    if (dt == EM_FLOAT32) {
        const float *x = (const float *)in;
        float *y = (float *)out;
        bool v = use_avx2();
        DRIVE(float, (v ? row_fwd_avx2 : row_fwd_float)(x + o * b, y + o * b, n, lg),
              block_fwd_float(x + o * b, y + o * b, n, inner, lg, scr, scr + inner), 2);
    } else {
        const double *x = (const double *)in;
        double *y = (double *)out;
        DRIVE(double, row_fwd_double(x + o * b, y + o * b, n, lg),
              block_fwd_double(x + o * b, y + o * b, n, inner, lg, scr, scr + inner), 2);
    }
    return failed ? -1 : 0;
}

int em_cpu_softmax_backward(const char *gp, const char *yp, char *gip, EmDType dt,
                            int64_t outer, int64_t n, int64_t inner, bool lg) {
    int64_t b = n * inner;
    int failed = 0;
    if (dt == EM_FLOAT16 || dt == EM_BFLOAT16)
        return softmax_backward_half((const uint16_t *)gp, (const uint16_t *)yp, (uint16_t *)gip, dt, outer, n,
                                     inner, lg);
    if (dt == EM_FLOAT32) {
        const float *g = (const float *)gp, *y = (const float *)yp;
        float *gi = (float *)gip;
        bool v = use_avx2();
        DRIVE(float, (v ? row_bwd_avx2 : row_bwd_float)(g + o * b, y + o * b, gi + o * b, n, lg),
              block_bwd_float(g + o * b, y + o * b, gi + o * b, n, inner, lg, scr), 1);
    } else {
        const double *g = (const double *)gp, *y = (const double *)yp;
        double *gi = (double *)gip;
        DRIVE(double, row_bwd_double(g + o * b, y + o * b, gi + o * b, n, lg),
              block_bwd_double(g + o * b, y + o * b, gi + o * b, n, inner, lg, scr), 1);
    }
    return failed ? -1 : 0;
}

/* ---------------------------------------------------------------- NLL */

static inline double ld(const char *p, EmDType dt, int64_t i) {
    return dt == EM_FLOAT32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
}
static inline void st(char *p, EmDType dt, int64_t i, double v) {
    if (dt == EM_FLOAT32)
        ((float *)p)[i] = (float)v;
    else
        ((double *)p)[i] = v;
}

int64_t em_cpu_nll_check(const EmNll *p) {
    int64_t m = p->N * p->inner;
    for (int64_t k = 0; k < m; k++) {
        int64_t t = p->t[k];
        if (t != p->ignore && (t < 0 || t >= p->C)) return k;
    }
    return -1;
}

/* The loss terms are few (one per row), so a serial double sum is exact enough and cheap. */
void em_cpu_nll_forward(const EmNll *p, char *out_none, double *total, double *total_w) {
    double tot = 0, tw = 0;
    for (int64_t nn = 0; nn < p->N; nn++)
        for (int64_t j = 0; j < p->inner; j++) {
            int64_t k = nn * p->inner + j, t = p->t[k];
            double v = 0;
            if (t != p->ignore) {
                double w = p->w ? ld(p->w, p->dt, t) : 1.0;
                v = -w * ld(p->x, p->dt, (nn * p->C + t) * p->inner + j);
                tw += w;
            }
            if (out_none) st(out_none, p->dt, k, v);
            tot += v;
        }
    *total = tot;
    *total_w = tw;
}

void em_cpu_nll_backward(const EmNll *p, const char *g, bool g_scalar, double scale, char *gi) {
    double g0 = g_scalar ? ld(g, p->dt, 0) : 0;
    for (int64_t nn = 0; nn < p->N; nn++)
        for (int64_t j = 0; j < p->inner; j++) {
            int64_t k = nn * p->inner + j, t = p->t[k];
            if (t == p->ignore) continue;
            double w = p->w ? ld(p->w, p->dt, t) : 1.0;
            double gv = g_scalar ? g0 : ld(g, p->dt, k);
            st(gi, p->dt, (nn * p->C + t) * p->inner + j, -w * gv * scale);
        }
}
