/* interp.c — upsampling kernels (nearest, nearest-exact, linear, bilinear,
 * bicubic) and their adjoints, Note [interp layout] in interp.h.
 *
 * Forward: an output row is a weighted sum of `taps` input rows, each first
 * interpolated along the width (a gather, done once per input row: a small
 * ring keeps the last rows, since the rows an output row needs only move
 * forward). The sum over rows is then a unit-stride loop that vectorizes.
 * Backward: per gradient row, the width adjoint scatters into a row buffer
 * of the input's width, which is then added, weighted, into the `taps`
 * gradient rows. Planes are independent: OpenMP splits them, each thread
 * with its own scratch, so no atomics are needed. */
#include "interp.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && !defined(EM_NO_CLONES) && \
    ((defined(__clang__) && __clang_major__ >= 14) || (!defined(__clang__) && __GNUC__ >= 8))
#define IP_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define IP_CLONES
#endif

#define IP_PRAGMA(x) _Pragma(#x)
#ifdef _OPENMP
#define OMP_PARALLEL IP_PRAGMA(omp parallel num_threads(nt) if (nt > 1))
#define OMP_FOR_IN IP_PRAGMA(omp for schedule(static))
#define OMP_FOR IP_PRAGMA(omp parallel for num_threads(nt) schedule(static) if (nt > 1))
#define OMP_ATOMIC_WRITE IP_PRAGMA(omp atomic write)
#else
#define OMP_ATOMIC_WRITE
#define OMP_PARALLEL
#define OMP_FOR_IN
#define OMP_FOR
#endif


/* Forward work is split into (plane, band of output rows) items, so that a
 * few big planes still keep every thread busy (output rows are independent;
 * the backward's are not: it splits planes only). */
static int64_t bands_for(int64_t planes, int64_t rows) {
    int64_t nt = em_num_threads;
    if (nt <= 1 || planes >= nt) return 1;
    int64_t b = (nt + planes - 1) / planes;
    return b > rows ? rows : b;
}

static void band_of(int64_t item, int64_t bands, int64_t rows, int64_t *p, int64_t *o0, int64_t *o1) {
    int64_t b = item % bands;
    *p = item / bands;
    *o0 = rows * b / bands;
    *o1 = rows * (b + 1) / bands;
}

/* ------------------------------------------------------------ index rules */

/* torch's cubic convolution weights (Keys, A = -0.75) at distance t of the
 * sample before the source point: taps at -1, 0, 1, 2. */
#define CUBIC_COEFFS(T)                                                                  \
    static void cubic_coeffs_##T(T t, T *c) {                                            \
        const T A = (T)-0.75;                                                            \
        T x1 = t + 1, x2 = 1 - t, x3 = 2 - t;                                            \
        c[0] = ((A * x1 - 5 * A) * x1 + 8 * A) * x1 - 4 * A;                             \
        c[1] = ((A + 2) * t - (A + 3)) * t * t + 1;                                      \
        c[2] = ((A + 2) * x2 - (A + 3)) * x2 * x2 + 1;                                   \
        c[3] = ((A * x3 - 5 * A) * x3 + 8 * A) * x3 - 4 * A;                             \
    }
CUBIC_COEFFS(float)
CUBIC_COEFFS(double)

static inline int64_t clamp_index(int64_t i, int64_t in) { return i < 0 ? 0 : (i > in - 1 ? in - 1 : i); }

/* The linear and cubic rules in T (float for float32, double for float64):
 *   scale   align_corners: (in-1)/(out-1) (0 for out == 1); else 1/scale_factor
 *           when one was given, in/out otherwise
 *   source  align_corners: scale*o; else scale*(o+0.5)-0.5 (clamped at 0 for
 *           linear); index floor(source) (at most in-1), lambda source-index
 *           clamped to [0, 1]. Linear of an unchanged size copies. */
#define AXIS_FILL(T, FLOOR)                                                              \
    static void axis_fill_##T(EmInterpAxis *a, EmInterpMode mode, bool ac, double scale) { \
        int64_t in = a->in, out = a->out, *idx = a->idx;                                 \
        T *w = a->w;                                                                     \
        T s = ac ? (out > 1 ? (T)(in - 1) / (T)(out - 1) : (T)0)                         \
                 : (scale > 0 ? (T)(1.0 / scale) : (T)in / (T)out);                      \
        for (int64_t o = 0; o < out; o++) {                                              \
            T r = ac ? s * (T)o : s * ((T)o + (T)0.5) - (T)0.5;                          \
            if (mode == EM_INTERP_LINEAR) {                                              \
                if (in == out) {                                                         \
                    idx[2 * o] = idx[2 * o + 1] = o;                                     \
                    w[2 * o] = 1;                                                        \
                    w[2 * o + 1] = 0;                                                    \
                    continue;                                                            \
                }                                                                        \
                if (r < 0) r = 0;                                                        \
            }                                                                            \
            if (!(r <= (T)in)) r = (T)in; /* same index and lambda; a safe cast (huge scales, NaN) */ \
            int64_t i0 = (int64_t)FLOOR(r);                                              \
            if (i0 > in - 1) i0 = in - 1;                                                \
            T l = r - (T)i0;                                                             \
            l = l < 0 ? 0 : (l > 1 ? 1 : l);                                             \
            if (mode == EM_INTERP_LINEAR) {                                              \
                idx[2 * o] = i0;                                                         \
                idx[2 * o + 1] = i0 + (i0 < in - 1 ? 1 : 0);                             \
                w[2 * o] = 1 - l;                                                        \
                w[2 * o + 1] = l;                                                        \
            } else {                                                                     \
                cubic_coeffs_##T(l, w + 4 * o);                                          \
                for (int k = 0; k < 4; k++) idx[4 * o + k] = clamp_index(i0 - 1 + k, in); \
            }                                                                            \
        }                                                                                \
    }
AXIS_FILL(float, floorf)
AXIS_FILL(double, floor)

/* nearest: floor(o * scale), nearest-exact: floor((o + 0.5) * scale), both
 * at most in-1, with a float scale (1/scale_factor or in/out) whatever the
 * dtype — torch's rule, whose float rounding decides ties. */
static void axis_fill_nearest(EmInterpAxis *a, EmInterpMode mode, double scale) {
    int64_t in = a->in, out = a->out;
    bool exact = mode == EM_INTERP_NEAREST_EXACT;
    if (mode == EM_INTERP_NEAREST_2D && (out == in || out == 2 * in)) {
        for (int64_t o = 0; o < out; o++) a->idx[o] = out == in ? o : o / 2;
        return;
    }
    float s = scale > 0 ? (float)(1.0 / scale) : (float)in / (float)out;
    for (int64_t o = 0; o < out; o++) {
        float src = exact ? (float)(((double)o + 0.5) * (double)s) : (float)o * s;
        int64_t i = src < (float)in ? (int64_t)floorf(src) : in - 1; /* a safe cast for huge scales */
        a->idx[o] = i > in - 1 ? in - 1 : i;
    }
}

static int axis_alloc(EmInterpAxis *a, int taps, int64_t in, int64_t out, EmDType dt) {
    size_t n = (size_t)out * (size_t)taps, wsize = dt == EM_FLOAT64 ? sizeof(double) : sizeof(float);
    a->taps = taps;
    a->in = in;
    a->out = out;
    a->idx = malloc((n ? n : 1) * sizeof(int64_t));
    a->w = malloc((n ? n : 1) * wsize);
    if (!a->idx || !a->w) {
        em_interp_axis_free(a);
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static void fill_ones(EmInterpAxis *a, EmDType dt) {
    for (int64_t o = 0; o < a->out * a->taps; o++) {
        if (dt == EM_FLOAT64) ((double *)a->w)[o] = 1;
        else ((float *)a->w)[o] = 1;
    }
}

int em_interp_axis(EmInterpAxis *a, EmInterpMode mode, int64_t in, int64_t out, bool align_corners, double scale,
                   EmDType dt) {
    int taps = mode == EM_INTERP_LINEAR ? 2 : (mode == EM_INTERP_CUBIC ? 4 : 1);
    if (dt != EM_FLOAT64) dt = EM_FLOAT32;
    if (!(scale > 0)) scale = 0; /* NaN too */
    if (axis_alloc(a, taps, in, out, dt) < 0) return -1;
    if (taps == 1) {
        axis_fill_nearest(a, mode, scale);
        fill_ones(a, dt);
    } else if (dt == EM_FLOAT64) {
        axis_fill_double(a, mode, align_corners, scale);
    } else {
        axis_fill_float(a, mode, align_corners, scale);
    }
    return 0;
}

int em_interp_axis_unit(EmInterpAxis *a, EmDType dt) {
    if (dt != EM_FLOAT64) dt = EM_FLOAT32;
    if (axis_alloc(a, 1, 1, 1, dt) < 0) return -1;
    a->idx[0] = 0;
    fill_ones(a, dt);
    return 0;
}

void em_interp_axis_free(EmInterpAxis *a) {
    free(a->idx);
    free(a->w);
    a->idx = NULL;
    a->w = NULL;
}

/* ------------------------------------------------------------ nearest */

/* One output row. rep > 0: the row repeats each input element rep times
 * (an integer upscale), written without the index table so that it vectorizes. */
#define GATHER(U)                                                                        \
    do {                                                                                 \
        const U *xr = (const U *)src;                                                    \
        U *yr = (U *)dst;                                                                \
        if (rep == 2) {                                                                  \
            for (int64_t i = 0; i < ow / 2; i++) yr[2 * i] = yr[2 * i + 1] = xr[i];     \
        } else if (rep > 0) {                                                            \
            for (int64_t i = 0; i < ow / rep; i++)                                       \
                for (int64_t j = 0; j < rep; j++) yr[i * rep + j] = xr[i];               \
        } else {                                                                         \
            for (int64_t o = 0; o < ow; o++) yr[o] = xr[widx[o]];                        \
        }                                                                                \
    } while (0)

IP_CLONES static void nearest_row(const char *src, char *dst, int itemsize, int64_t ow, const int64_t *widx,
                                  int64_t rep) {
    switch (itemsize) {
    case 1: GATHER(uint8_t); break;
    case 2: GATHER(uint16_t); break;
    case 4: GATHER(uint32_t); break;
    default: GATHER(uint64_t); break;
    }
}

/* k when idx[o] == o / k for every o (out == k * in), else 0 */
static int64_t repeat_factor(const EmInterpAxis *a) {
    if (a->out % a->in) return 0;
    int64_t k = a->out / a->in;
    for (int64_t o = 0; o < a->out; o++)
        if (a->idx[o] != o / k) return 0;
    return k;
}

void em_cpu_interp_nearest(const char *x, char *y, int itemsize, int64_t planes, const EmInterpAxis *h,
                           const EmInterpAxis *w) {
    int64_t ih = h->in, oh = h->out, iw = w->in, ow = w->out;
    size_t in_plane = (size_t)(ih * iw) * (size_t)itemsize, row = (size_t)ow * (size_t)itemsize;
    const int64_t *hidx = h->idx, *widx = w->idx, rep = repeat_factor(w);
    int64_t bands = bands_for(planes, oh), items = planes * bands;
    int nt = em_threads_for(items, planes * oh * ow);
    (void)nt;
    OMP_FOR
    for (int64_t it = 0; it < items; it++) {
        int64_t p, o0, o1;
        band_of(it, bands, oh, &p, &o0, &o1);
        const char *xp = x + (size_t)p * in_plane;
        char *yp = y + (size_t)p * (size_t)oh * row;
        for (int64_t o = o0; o < o1; o++) {
            char *yr = yp + (size_t)o * row;
            if (o > o0 && hidx[o] == hidx[o - 1]) /* a repeated row: copy the one just made */
                memcpy(yr, yr - row, row);
            else
                nearest_row(xp + (size_t)hidx[o] * (size_t)iw * (size_t)itemsize, yr, itemsize, ow, widx, rep);
        }
    }
}

/* ------------------------------------------------------------ weighted */

#define WEIGHTED(T)                                                                      \
    /* dst[o] = sum_j w[o*K+j] src[idx[o*K+j]]: one input row along the width */          \
    IP_CLONES static void width_pass_##T(const T *src, T *dst, const EmInterpAxis *a) {  \
        const int64_t *idx = a->idx, n = a->out;                                         \
        const T *w = a->w;                                                               \
        switch (a->taps) {                                                               \
        case 1:                                                                          \
            for (int64_t o = 0; o < n; o++) dst[o] = w[o] * src[idx[o]];                 \
            break;                                                                       \
        case 2:                                                                          \
            for (int64_t o = 0; o < n; o++)                                              \
                dst[o] = w[2 * o] * src[idx[2 * o]] + w[2 * o + 1] * src[idx[2 * o + 1]]; \
            break;                                                                       \
        default:                                                                         \
            for (int64_t o = 0; o < n; o++) {                                            \
                const int64_t *i = idx + 4 * o;                                          \
                const T *c = w + 4 * o;                                                  \
                dst[o] = c[0] * src[i[0]] + c[1] * src[i[1]] + c[2] * src[i[2]] + c[3] * src[i[3]]; \
            }                                                                            \
        }                                                                                \
    }                                                                                    \
    /* output rows [o0, o1) of one plane; ring: taps rows of the output width */        \
    IP_CLONES static void plane_fwd_##T(const T *x, T *y, const EmInterpAxis *h,         \
                                        const EmInterpAxis *w, T *ring, int64_t o0,      \
                                        int64_t o1) {                                    \
        int64_t iw = w->in, ow = w->out, K = h->taps;                                    \
        const T *wh = h->w;                                                              \
        int64_t tag[4] = {-1, -1, -1, -1};                                               \
        for (int64_t o = o0; o < o1; o++) {                                              \
            const int64_t *r = h->idx + o * K;                                           \
            T *yr = y + o * ow;                                                          \
            if (K == 1) { /* nearest rows (weight 1), or the unit axis of 1-d ops */      \
                if (o > o0 && r[0] == r[-1]) memcpy(yr, yr - ow, (size_t)ow * sizeof(T)); \
                else width_pass_##T(x + r[0] * iw, yr, w);                              \
                continue;                                                                \
            }                                                                            \
            for (int64_t k = 0; k < K; k++) { /* rows in a window of K: distinct mod K */ \
                int64_t s = r[k] % K;                                                    \
                if (tag[s] != r[k]) {                                                    \
                    width_pass_##T(x + r[k] * iw, ring + s * ow, w);                     \
                    tag[s] = r[k];                                                       \
                }                                                                        \
            }                                                                            \
            const T *c = wh + o * K;                                                     \
            const T *a0 = ring + (r[0] % K) * ow, *a1 = ring + (r[1] % K) * ow;          \
            if (K == 2) {                                                                \
                T c0 = c[0], c1 = c[1];                                                  \
                for (int64_t i = 0; i < ow; i++) yr[i] = c0 * a0[i] + c1 * a1[i];        \
            } else {                                                                     \
                const T *a2 = ring + (r[2] % K) * ow, *a3 = ring + (r[3] % K) * ow;      \
                T c0 = c[0], c1 = c[1], c2 = c[2], c3 = c[3];                            \
                for (int64_t i = 0; i < ow; i++)                                         \
                    yr[i] = c0 * a0[i] + c1 * a1[i] + c2 * a2[i] + c3 * a3[i];           \
            }                                                                            \
        }                                                                                \
    }                                                                                    \
    /* the adjoint of plane_fwd; gi zeroed here; buf: the input's width */               \
    IP_CLONES static void plane_bwd_##T(const T *g, T *gi, const EmInterpAxis *h,        \
                                        const EmInterpAxis *w, T *buf) {                 \
        int64_t iw = w->in, ow = w->out, K = h->taps, Kw = w->taps;                      \
        const int64_t *widx = w->idx;                                                    \
        const T *ww = w->w, *wh = h->w;                                                  \
        memset(gi, 0, (size_t)(h->in * iw) * sizeof(T));                                 \
        for (int64_t o = 0; o < h->out; o++) {                                           \
            const T *gr = g + o * ow;                                                    \
            memset(buf, 0, (size_t)iw * sizeof(T));                                      \
            for (int64_t q = 0; q < ow; q++)                                             \
                for (int64_t j = 0; j < Kw; j++) buf[widx[q * Kw + j]] += ww[q * Kw + j] * gr[q]; \
            for (int64_t k = 0; k < K; k++) {                                            \
                T *row = gi + h->idx[o * K + k] * iw, c = wh[o * K + k];                 \
                for (int64_t i = 0; i < iw; i++) row[i] += c * buf[i];                   \
            }                                                                            \
        }                                                                                \
    }                                                                                    \
    static bool drive_##T(const T *src, T *dst, int64_t planes, const EmInterpAxis *h,  \
                          const EmInterpAxis *w, bool fwd) {                             \
        int64_t in_plane = h->in * w->in, out_plane = h->out * w->out;                   \
        int64_t scratch = fwd ? h->taps * w->out : w->in;                                \
        int64_t bands = fwd ? bands_for(planes, h->out) : 1, items = planes * bands;     \
        int nt = em_threads_for(items, planes * (in_plane + out_plane));                    \
        bool ok = true;                                                                  \
        (void)nt;                                                                        \
        OMP_PARALLEL                                                                     \
        {                                                                                \
            T *scr = malloc((size_t)(scratch > 0 ? scratch : 1) * sizeof(T));            \
            if (!scr) {                                                                  \
                OMP_ATOMIC_WRITE                                                         \
                ok = false;                                                              \
            }                                                                            \
            OMP_FOR_IN                                                                   \
            for (int64_t it = 0; it < items; it++) {                                     \
                int64_t p, o0, o1;                                                       \
                if (!scr) continue;                                                      \
                band_of(it, bands, h->out, &p, &o0, &o1);                                \
                if (fwd)                                                                 \
                    plane_fwd_##T(src + p * in_plane, dst + p * out_plane, h, w, scr, o0, o1); \
                else                                                                     \
                    plane_bwd_##T(src + p * out_plane, dst + p * in_plane, h, w, scr);   \
            }                                                                            \
            free(scr);                                                                   \
        }                                                                                \
        return ok;                                                                       \
    }
WEIGHTED(float)
WEIGHTED(double)

bool em_cpu_interp_forward(const char *x, char *y, EmDType dt, int64_t planes, const EmInterpAxis *h,
                           const EmInterpAxis *w) {
    if (dt == EM_FLOAT64) return drive_double((const double *)x, (double *)y, planes, h, w, true);
    return drive_float((const float *)x, (float *)y, planes, h, w, true);
}

bool em_cpu_interp_backward(const char *g, char *gi, EmDType dt, int64_t planes, const EmInterpAxis *h,
                            const EmInterpAxis *w) {
    if (dt == EM_FLOAT64) return drive_double((const double *)g, (double *)gi, planes, h, w, false);
    return drive_float((const float *)g, (float *)gi, planes, h, w, false);
}
