/* poolnorm.c — CPU loops of max / average pooling over [H, W] planes and the
 * run-wise sums and affine maps batch and group norm are built from
 * (Note [pool planes], Note [norm runs] in poolnorm.h).
 *
 * Every kernel is written once as a macro over the element type (float,
 * double) and threaded over independent planes or runs when the work is big.
 * Run loops keep LANES independent accumulators so that they vectorize
 * without reassociating a single sum; each run's lanes are then added in
 * double. */
#include "poolnorm.h"
#include "reduce.h" /* EM_CLONES */
#include <math.h>

#ifdef _OPENMP
#define OMP_FOR _Pragma("omp parallel for num_threads(nt) schedule(static) if (nt > 1)")
#else
#define OMP_FOR
#endif


/* ------------------------------------------------------------------ max pool */

/* The first in-range tap of a window starting at `start` (may be negative). */
static inline int64_t first_tap(int64_t start, int64_t d) {
    while (start < 0) start += d;
    return start;
}

#define MAX_POOL(NAME, T)                                                                            \
    static void NAME(const EmPool2d *p, const T *in, T *out, int64_t *idx) {                         \
        int64_t H = p->H, W = p->W, OH = p->OH, OW = p->OW, plane_out = OH * OW;                     \
        int nt = em_threads_for(p->planes, p->planes * plane_out * p->kh * p->kw);                      \
        (void)nt;                                                                                    \
        OMP_FOR                                                                                      \
        for (int64_t q = 0; q < p->planes; q++) {                                                    \
            const T *x = in + q * H * W;                                                             \
            T *y = out + q * plane_out;                                                              \
            int64_t *ix = idx + q * plane_out;                                                       \
            for (int64_t oh = 0; oh < OH; oh++) {                                                    \
                int64_t h_start = oh * p->sh - p->ph;                                                \
                int64_t hs = first_tap(h_start, p->dh);                                              \
                int64_t he = h_start + (p->kh - 1) * p->dh + 1;                                      \
                if (he > H) he = H;                                                                  \
                for (int64_t ow = 0; ow < OW; ow++) {                                                \
                    int64_t w_start = ow * p->sw - p->pw;                                            \
                    int64_t ws = first_tap(w_start, p->dw);                                          \
                    int64_t we = w_start + (p->kw - 1) * p->dw + 1;                                  \
                    if (we > W) we = W;                                                              \
                    T m = -INFINITY;                                                                 \
                    int64_t best = hs * W + ws;                                                      \
                    for (int64_t h = hs; h < he; h += p->dh)                                         \
                        for (int64_t w = ws; w < we; w += p->dw) {                                   \
                            T v = x[h * W + w];                                                      \
                            if (v > m || v != v) { /* NaN propagates, as torch's */                  \
                                m = v;                                                               \
                                best = h * W + w;                                                    \
                            }                                                                        \
                        }                                                                            \
                    y[oh * OW + ow] = m;                                                             \
                    ix[oh * OW + ow] = best;                                                         \
                }                                                                                    \
            }                                                                                        \
        }                                                                                            \
    }
MAX_POOL(max_pool_f32, float)
MAX_POOL(max_pool_f64, double)

/* 2x2 windows with stride 2 and no padding or dilation (the common
 * downsampling): two rows at a time, no bounds checks. */
#define MAX_POOL_2X2(NAME, T)                                                                        \
    static void NAME(const EmPool2d *p, const T *in, T *out, int64_t *idx) {                         \
        int64_t H = p->H, W = p->W, OH = p->OH, OW = p->OW, plane_out = OH * OW;                     \
        int nt = em_threads_for(p->planes, p->planes * plane_out * 4);                                  \
        (void)nt;                                                                                    \
        OMP_FOR                                                                                      \
        for (int64_t q = 0; q < p->planes; q++) {                                                    \
            const T *x = in + q * H * W;                                                             \
            T *y = out + q * plane_out;                                                              \
            int64_t *ix = idx + q * plane_out;                                                       \
            for (int64_t oh = 0; oh < OH; oh++) {                                                    \
                const T *r0 = x + 2 * oh * W, *r1 = r0 + W;                                          \
                T *yo = y + oh * OW;                                                                 \
                int64_t *io = ix + oh * OW, base = 2 * oh * W;                                       \
                for (int64_t ow = 0; ow < OW; ow++) {                                                \
                    T a = r0[2 * ow], b = r0[2 * ow + 1], c = r1[2 * ow], d = r1[2 * ow + 1];        \
                    T m = a;                                                                         \
                    int64_t k = 0;                                                                   \
                    if (b > m || b != b) m = b, k = 1; /* NaN wins, as in the general loop */          \
                    if (c > m || c != c) m = c, k = W;                                               \
                    if (d > m || d != d) m = d, k = W + 1;                                           \
                    yo[ow] = m;                                                                      \
                    io[ow] = base + 2 * ow + k;                                                      \
                }                                                                                    \
            }                                                                                        \
        }                                                                                            \
    }
MAX_POOL_2X2(max_pool_2x2_f32, float)
MAX_POOL_2X2(max_pool_2x2_f64, double)

void em_cpu_max_pool2d(const EmPool2d *p, EmDType dt, const char *in, char *out, int64_t *idx) {
    bool two = p->kh == 2 && p->kw == 2 && p->sh == 2 && p->sw == 2 && !p->ph && !p->pw && p->dh == 1 &&
               p->dw == 1 && p->OH * 2 <= p->H && p->OW * 2 <= p->W;
    if (dt == EM_FLOAT32)
        (two ? max_pool_2x2_f32 : max_pool_f32)(p, (const float *)in, (float *)out, idx);
    else
        (two ? max_pool_2x2_f64 : max_pool_f64)(p, (const double *)in, (double *)out, idx);
}

#define MAX_POOL_BW(NAME, T)                                                                         \
    static void NAME(const EmPool2d *p, const T *g, const int64_t *idx, T *gi) {                     \
        int64_t plane_in = p->H * p->W, plane_out = p->OH * p->OW;                                   \
        int nt = em_threads_for(p->planes, p->planes * (plane_out + plane_in));                         \
        (void)nt;                                                                                    \
        OMP_FOR                                                                                      \
        for (int64_t q = 0; q < p->planes; q++) {                                                    \
            const T *gq = g + q * plane_out;                                                         \
            const int64_t *iq = idx + q * plane_out;                                                 \
            T *dq = gi + q * plane_in;                                                               \
            for (int64_t o = 0; o < plane_out; o++) dq[iq[o]] += gq[o];                              \
        }                                                                                            \
    }
MAX_POOL_BW(max_pool_bw_f32, float)
MAX_POOL_BW(max_pool_bw_f64, double)

void em_cpu_max_pool2d_backward(const EmPool2d *p, EmDType dt, const char *g, const int64_t *idx, char *gi) {
    if (dt == EM_FLOAT32) max_pool_bw_f32(p, (const float *)g, idx, (float *)gi);
    else max_pool_bw_f64(p, (const double *)g, idx, (double *)gi);
}

/* ------------------------------------------------------------------ avg pool */

#define AVG_POOL(NAME, T)                                                                            \
    static void NAME(const EmAvgPool *p, const T *in, T *out) {                                      \
        int64_t H = p->H, W = p->W, OH = p->OH, OW = p->OW, plane_out = OH * OW;                     \
        int nt = em_threads_for(p->planes, p->planes * (plane_out + H * W));                            \
        (void)nt;                                                                                    \
        OMP_FOR                                                                                      \
        for (int64_t q = 0; q < p->planes; q++) {                                                    \
            const T *x = in + q * H * W;                                                             \
            T *y = out + q * plane_out;                                                              \
            for (int64_t oh = 0; oh < OH; oh++)                                                      \
                for (int64_t ow = 0; ow < OW; ow++) {                                                \
                    T s = 0;                                                                         \
                    for (int64_t h = p->h0[oh]; h < p->h1[oh]; h++)                                  \
                        for (int64_t w = p->w0[ow]; w < p->w1[ow]; w++) s += x[h * W + w];           \
                    y[oh * OW + ow] = (T)(s / (T)p->divisor[oh * OW + ow]);                         \
                }                                                                                    \
        }                                                                                            \
    }
AVG_POOL(avg_pool_f32, float)
AVG_POOL(avg_pool_f64, double)

void em_cpu_avg_pool2d(const EmAvgPool *p, EmDType dt, const char *in, char *out) {
    if (dt == EM_FLOAT32) avg_pool_f32(p, (const float *)in, (float *)out);
    else avg_pool_f64(p, (const double *)in, (double *)out);
}

#define AVG_POOL_BW(NAME, T)                                                                         \
    static void NAME(const EmAvgPool *p, const T *g, T *gi) {                                        \
        int64_t H = p->H, W = p->W, OH = p->OH, OW = p->OW, plane_out = OH * OW;                     \
        int nt = em_threads_for(p->planes, p->planes * (plane_out + H * W));                            \
        (void)nt;                                                                                    \
        OMP_FOR                                                                                      \
        for (int64_t q = 0; q < p->planes; q++) {                                                    \
            const T *gq = g + q * plane_out;                                                         \
            T *d = gi + q * H * W;                                                                   \
            for (int64_t oh = 0; oh < OH; oh++)                                                      \
                for (int64_t ow = 0; ow < OW; ow++) {                                                \
                    T v = (T)(gq[oh * OW + ow] / (T)p->divisor[oh * OW + ow]);                      \
                    for (int64_t h = p->h0[oh]; h < p->h1[oh]; h++)                                  \
                        for (int64_t w = p->w0[ow]; w < p->w1[ow]; w++) d[h * W + w] += v;           \
                }                                                                                    \
        }                                                                                            \
    }
AVG_POOL_BW(avg_pool_bw_f32, float)
AVG_POOL_BW(avg_pool_bw_f64, double)

void em_cpu_avg_pool2d_backward(const EmAvgPool *p, EmDType dt, const char *g, char *gi) {
    if (dt == EM_FLOAT32) avg_pool_bw_f32(p, (const float *)g, (float *)gi);
    else avg_pool_bw_f64(p, (const double *)g, (double *)gi);
}

/* ------------------------------------------------------------------ norm runs */

#define LANES 16

#define RUN_SUM(NAME, T)                                                                             \
    EM_CLONES static double NAME(const T *x, int64_t n) {                                            \
        T acc[LANES] = {0};                                                                          \
        int64_t i = 0;                                                                               \
        for (; i + LANES <= n; i += LANES)                                                           \
            for (int j = 0; j < LANES; j++) acc[j] += x[i + j];                                      \
        double s = 0;                                                                                \
        for (; i < n; i++) s += (double)x[i];                                                        \
        for (int j = 0; j < LANES; j++) s += (double)acc[j];                                         \
        return s;                                                                                    \
    }
RUN_SUM(run_sum_f32, float)
RUN_SUM(run_sum_f64, double)

#define RUN_SS(NAME, T)                                                                              \
    EM_CLONES static double NAME(const T *x, int64_t n, double center) {                             \
        T acc[LANES] = {0}, c = (T)center;                                                           \
        int64_t i = 0;                                                                               \
        for (; i + LANES <= n; i += LANES)                                                           \
            for (int j = 0; j < LANES; j++) {                                                        \
                T d = x[i + j] - c;                                                                  \
                acc[j] += d * d;                                                                     \
            }                                                                                        \
        double s = 0;                                                                                \
        for (; i < n; i++) s += ((double)x[i] - center) * ((double)x[i] - center);                   \
        for (int j = 0; j < LANES; j++) s += (double)acc[j];                                         \
        return s;                                                                                    \
    }
RUN_SS(run_ss_f32, float)
RUN_SS(run_ss_f64, double)

#define RUN_DOT(NAME, T)                                                                             \
    EM_CLONES static void NAME(const T *g, const T *x, int64_t n, double center, double *sg, double *sgx) { \
        T a[LANES] = {0}, b[LANES] = {0}, c = (T)center;                                             \
        int64_t i = 0;                                                                               \
        for (; i + LANES <= n; i += LANES)                                                           \
            for (int j = 0; j < LANES; j++) {                                                        \
                a[j] += g[i + j];                                                                    \
                b[j] += g[i + j] * (x[i + j] - c);                                                       \
            }                                                                                        \
        double s = 0, t = 0;                                                                         \
        for (; i < n; i++) s += (double)g[i], t += (double)g[i] * ((double)x[i] - center);                      \
        for (int j = 0; j < LANES; j++) s += (double)a[j], t += (double)b[j];                        \
        *sg = s;                                                                                     \
        *sgx = t;                                                                                    \
    }
RUN_DOT(run_dot_f32, float)
RUN_DOT(run_dot_f64, double)

#define RUN_AFFINE(NAME, T)                                                                          \
    EM_CLONES static void NAME(const T *x, T *y, int64_t n, T a, T b) {                              \
        for (int64_t i = 0; i < n; i++) y[i] = a * x[i] + b;                                         \
    }
RUN_AFFINE(run_affine_f32, float)
RUN_AFFINE(run_affine_f64, double)

#define RUN_AFFINE2(NAME, T)                                                                         \
    EM_CLONES static void NAME(const T *g, const T *x, T *y, int64_t n, T a, T b, T c) {             \
        for (int64_t i = 0; i < n; i++) y[i] = a * g[i] + b * x[i] + c;                              \
    }
RUN_AFFINE2(run_affine2_f32, float)
RUN_AFFINE2(run_affine2_f64, double)

/* for r < R: BODY32 on float data, BODY64 on double, threaded over runs */
#define OVER_RUNS(BODY32, BODY64)                                                                    \
    do {                                                                                             \
        int nt = em_threads_for(R, R * S);                                                              \
        (void)nt;                                                                                    \
        if (dt == EM_FLOAT32) {                                                                      \
            OMP_FOR                                                                                  \
            for (int64_t r = 0; r < R; r++) BODY32;                                                  \
        } else {                                                                                     \
            OMP_FOR                                                                                  \
            for (int64_t r = 0; r < R; r++) BODY64;                                                  \
        }                                                                                            \
    } while (0)
#define F32(p) ((const float *)(p) + r * S)
#define F64(p) ((const double *)(p) + r * S)
#define W32(p) ((float *)(p) + r * S)
#define W64(p) ((double *)(p) + r * S)

void em_cpu_runs_sum(EmDType dt, const char *x, int64_t R, int64_t S, double *sum) {
    OVER_RUNS(sum[r] = run_sum_f32(F32(x), S), sum[r] = run_sum_f64(F64(x), S));
}

void em_cpu_runs_centered_ss(EmDType dt, const char *x, int64_t R, int64_t S, const double *center, double *ss) {
    OVER_RUNS(ss[r] = run_ss_f32(F32(x), S, center[r]), ss[r] = run_ss_f64(F64(x), S, center[r]));
}

void em_cpu_runs_dot(EmDType dt, const char *g, const char *x, int64_t R, int64_t S, const double *center, double *sg,
                     double *sgx) {
    OVER_RUNS(run_dot_f32(F32(g), F32(x), S, center[r], sg + r, sgx + r),
              run_dot_f64(F64(g), F64(x), S, center[r], sg + r, sgx + r));
}

void em_cpu_runs_affine(EmDType dt, const char *x, char *y, int64_t R, int64_t S, const double *a, const double *b) {
    OVER_RUNS(run_affine_f32(F32(x), W32(y), S, (float)a[r], (float)b[r]),
              run_affine_f64(F64(x), W64(y), S, a[r], b[r]));
}

void em_cpu_runs_affine2(EmDType dt, const char *g, const char *x, char *y, int64_t R, int64_t S, const double *a,
                         const double *b, const double *c) {
    OVER_RUNS(run_affine2_f32(F32(g), F32(x), W32(y), S, (float)a[r], (float)b[r], (float)c[r]),
              run_affine2_f64(F64(g), F64(x), W64(y), S, a[r], b[r], c[r]));
}
