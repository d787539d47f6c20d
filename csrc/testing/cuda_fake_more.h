/* cuda_fake_more.h — the fake backend's (Note [fake CUDA]) implementations
 * of the cudamisc and cudaconv entries: randperm, unique along a dim, the
 * bias epilogue, im2col / col2im and upsampling. Included once, by
 * cuda_fake.c, where its helpers (untag, fake_fail, FakePair, ...) are in
 * scope; a header only to keep cuda_fake.c under 1,500 lines. */
#ifndef EMBER_TESTING_CUDA_FAKE_MORE_H
#define EMBER_TESTING_CUDA_FAKE_MORE_H

/* ---- misc fallbacks and epilogues (cudamisc) on the fake: randperm from
 * the keys of Note [GPU randperm] (csrc/cuda/randperm.h) sorted stably on the
 * host, so a seed gives the GPU's permutation; unique along a dim with the
 * row logic of unique_dim.h; gemm_bias as the fake gemm plus the bias.
 * Calls are counted by entry name in ember._cuda_fake.counters(). */
#include "../cuda/randperm.h"

static const char *misc_names[] = {"randperm", "unique_dim", "gemm_bias"};
enum { MISC_N = sizeof misc_names / sizeof misc_names[0] };
static int64_t misc_calls[MISC_N];

/* ---- convolution and upsampling on the fake (cudaconv; Note [CUDA im2col]
 * in csrc/cuda/conv.h): the GPU kernels' per-element index math
 * (csrc/cuda/conv_math.h) run over every element on untagged pointers, with
 * the kernels' accumulator types. Calls are counted by entry name in
 * ember._cuda_fake.counters(). */
#include "../cuda/conv_math.h"

static const char *conv_names[] = {"im2col", "col2im", "interp_nearest", "interp"};
enum { NCONV = sizeof conv_names / sizeof conv_names[0] };
static int64_t conv_calls[NCONV];

static int fake_randperm(int dev, int dtype, void *out, int64_t n, uint64_t seed, uint64_t offset) {
    misc_calls[0]++;
    if (n < 0 || dtype == EM_BOOL) return fake_fail("randperm: bad arguments");
    if (n == 0) return 0;
    FakePair *p = malloc((size_t)n * sizeof(FakePair));
    if (!p) return fake_fail("out of host memory");
    for (int64_t i = 0; i < n; i++) p[i] = (FakePair){em_randperm_key(seed, offset, i), i};
    qsort(p, (size_t)n, sizeof(FakePair), fake_pair_cmp);
    char *o = untag(out);
    int isz = em_itemsize((EmDType)dtype);
    for (int64_t i = 0; i < n; i++) host->scalar_store((EmScalar){'i', {.i = p[i].idx}}, (EmDType)dtype, o + i * isz);
    free(p);
    return 0;
}

/* unique along a dim: the row logic of Note [CUDA unique dim] on the host;
 * qsort with emc_row_less (a total order: ties by index) sorts as stably as
 * the device's merge sort. */
#include "../cuda/unique_dim.h"

static const void *ud_x;
static int ud_dt;
static int64_t ud_rl;
static int fake_row_cmp(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x == y ? 0 : emc_row_less(ud_x, ud_dt, ud_rl, x, y) ? -1 : 1;
}

static int fake_unique_dim(int dev, int dtype, const void *tx, int64_t m, int64_t rl, bool sorted, void *tvals,
                           int64_t *tinverse, int64_t *tcounts, int64_t *groups) {
    misc_calls[1]++;
    *groups = 0;
    if (m < 1 || rl < 1) return fake_fail("unique: no rows");
    const char *x = untag(tx);
    char *vals = untag(tvals);
    int64_t *inverse = tinverse ? untag(tinverse) : NULL, *counts = tcounts ? untag(tcounts) : NULL;
    int64_t *order = malloc((size_t)m * sizeof(int64_t));
    if (!order) return fake_fail("out of host memory");
    for (int64_t i = 0; i < m; i++) order[i] = i;
    if (sorted) {
        ud_x = x, ud_dt = dtype, ud_rl = rl;
        qsort(order, (size_t)m, sizeof(int64_t), fake_row_cmp);
    }
    int64_t g = -1;
    size_t rb = (size_t)rl * em_itemsize((EmDType)dtype);
    for (int64_t i = 0; i < m; i++) {
        if (emc_row_group_start(x, dtype, rl, order, i)) {
            g++;
            memcpy(vals + g * rb, x + order[i] * rb, rb);
            if (counts) counts[g] = 0;
        }
        if (counts) counts[g]++;
        if (inverse) inverse[order[i]] = g;
    }
    free(order);
    *groups = g + 1;
    return 0;
}

/* C = op(A) @ op(B) + bias (column-major, bias along C's rows): what the
 * CPU's addmm computes — the bias copied into C, then the product added —
 * and one rounding for the halves (float32 accumulation plus the bias).
 * k == 0 answers 1 ("no algorithm") as ember._cuda does. */
static int fake_gemm_bias(int dev, int dtype, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void *a,
                          int64_t lda, const void *b, int64_t ldb, const void *tbias, void *c, int64_t ldc,
                          bool tf32) {
    misc_calls[2]++;
    if (dtype != EM_FLOAT32 && dtype != EM_FLOAT16 && dtype != EM_BFLOAT16) return fake_fail("gemm_bias: bad dtype");
    if (m == 0 || n == 0) return 0;
    if (k == 0) return 1;
    const char *bias = untag(tbias);
    char *C = untag(c);
    int isz = em_itemsize((EmDType)dtype);
    if (dtype == EM_FLOAT32) {
        for (int64_t col = 0; col < n; col++) memcpy(C + col * ldc * isz, bias, (size_t)m * isz);
        return fake_gemm(dev, dtype, ta, tb, m, n, k, 1.0, a, lda, 0, b, ldb, 0, 1.0, c, ldc, 0, 1, tf32);
    }
    const char *A = untag(a), *B = untag(b);
    for (int64_t col = 0; col < n; col++)
        for (int64_t row = 0; row < m; row++) {
            float acc = 0;
            for (int64_t p = 0; p < k; p++)
                acc += load_half(A, dtype, ta ? p + row * lda : row + p * lda) *
                       load_half(B, dtype, tb ? col + p * ldb : p + col * ldb);
            float v = acc + load_half(bias, dtype, row);
            ((uint16_t *)C)[row + col * ldc] = dtype == EM_FLOAT16 ? em_f32_to_f16(v) : em_f32_to_bf16(v);
        }
    return 0;
}

static bool fake_conv_dtype(int dtype) {
    return dtype == EM_FLOAT16 || dtype == EM_BFLOAT16 || dtype == EM_FLOAT32 || dtype == EM_FLOAT64;
}

static int fake_im2col(int dev, int dtype, const EmCudaConvGeom *g, int64_t N, const void *x, void *cols,
                       int64_t col_n, int64_t col_row) {
    conv_calls[0]++;
    if (!fake_conv_dtype(dtype)) return fake_fail("im2col: unsupported dtype");
    const int64_t isz = em_itemsize((EmDType)dtype), L = g->oh * g->ow, rows = g->C * g->kh * g->kw;
    const char *xs = untag(x);
    char *cs = untag(cols);
    for (int64_t t = 0; t < N * rows * L; t++) {
        const int64_t l = t % L, row = (t / L) % rows, n = t / (L * rows);
        const int64_t src = emc_im2col_source(g, row, l);
        char *dst = cs + (n * col_n + row * col_row + l) * isz;
        if (src >= 0) memcpy(dst, xs + (n * g->C * g->H * g->W + src) * isz, (size_t)isz);
        else memset(dst, 0, (size_t)isz);
    }
    return 0;
}

static int fake_col2im(int dev, int dtype, const EmCudaConvGeom *g, int64_t N, const void *cols, int64_t col_n,
                       int64_t col_row, void *x) {
    conv_calls[1]++;
    if (!fake_conv_dtype(dtype)) return fake_fail("col2im: unsupported dtype");
    const char *cs = untag(cols);
    char *xs = untag(x);
    for (int64_t t = 0; t < N * g->C * g->H * g->W; t++) {
        const int64_t ix = t % g->W, iy = (t / g->W) % g->H, c = (t / (g->W * g->H)) % g->C;
        const int64_t n = t / (g->W * g->H * g->C);
        float sf = 0;  /* the kernels' accumulators: float for float32 and the halves */
        double sd = 0; /* double for float64 */
        for (int64_t ki = 0; ki < g->kh; ki++) {
            const int64_t oy = emc_conv_window_of(iy, ki, g->sh, g->ph, g->dh, g->oh);
            if (oy < 0) continue;
            for (int64_t kj = 0; kj < g->kw; kj++) {
                const int64_t ox = emc_conv_window_of(ix, kj, g->sw, g->pw, g->dw, g->ow);
                if (ox < 0) continue;
                const int64_t at = n * col_n + ((c * g->kh + ki) * g->kw + kj) * col_row + oy * g->ow + ox;
                if (dtype == EM_FLOAT64) sd += ((const double *)cs)[at];
                else if (dtype == EM_FLOAT32) sf += ((const float *)cs)[at];
                else sf += load_half(cs, dtype, at);
            }
        }
        if (dtype == EM_FLOAT64) ((double *)xs)[t] = sd;
        else if (dtype == EM_FLOAT32) ((float *)xs)[t] = sf;
        else ((uint16_t *)xs)[t] = dtype == EM_FLOAT16 ? em_f32_to_f16(sf) : em_f32_to_bf16(sf);
    }
    return 0;
}

/* upsampling (Note [CUDA upsample] in csrc/cuda/upsample.h): the kernels'
 * loops, one output (forward) or input (backward) element at a time, with
 * their accumulator types, over the device tables the front-end made */
static double fake_interp_ld(const void *p, int dtype, int64_t i) {
    if (dtype == EM_FLOAT64) return ((const double *)p)[i];
    if (dtype == EM_FLOAT32) return ((const float *)p)[i];
    return load_half(p, dtype, i);
}
static void fake_interp_st(void *p, int dtype, int64_t i, double v) {
    if (dtype == EM_FLOAT64) ((double *)p)[i] = v;
    else if (dtype == EM_FLOAT32) ((float *)p)[i] = (float)v;
    else ((uint16_t *)p)[i] = dtype == EM_FLOAT16 ? em_f32_to_f16((float)v) : em_f32_to_bf16((float)v);
}
/* an axis with host (untagged) pointers */
static EmCudaInterpAxis fake_axis(const EmCudaInterpAxis *a) {
    EmCudaInterpAxis h = *a;
    h.idx = untag(a->idx);
    h.w = a->w ? untag(a->w) : NULL;
    h.inv_off = a->inv_off ? untag(a->inv_off) : NULL;
    h.inv = a->inv ? untag(a->inv) : NULL;
    return h;
}

static int fake_interp_nearest(int dev, int itemsize, int64_t planes, const EmCudaInterpAxis *ha,
                               const EmCudaInterpAxis *wa, const void *x, void *y) {
    conv_calls[2]++;
    const EmCudaInterpAxis h = fake_axis(ha), w = fake_axis(wa);
    const char *xs = untag(x);
    char *ys = untag(y);
    for (int64_t t = 0; t < planes * h.out * w.out; t++) {
        const int64_t q = t % w.out, o = (t / w.out) % h.out, p = t / (w.out * h.out);
        memcpy(ys + t * itemsize, xs + ((p * h.in + h.idx[o]) * w.in + w.idx[q]) * itemsize, (size_t)itemsize);
    }
    return 0;
}

/* the kernels' loops with accumulator A and weights W (float, or double for float64) */
#define FAKE_INTERP(A, W)                                                                                         \
    static void fake_interp_##A(int dtype, int64_t planes, const EmCudaInterpAxis *h, const EmCudaInterpAxis *w,  \
                                const char *in, char *out, bool backward) {                                       \
        const W *wh = h->w, *ww = w->w;                                                                           \
        if (!backward) {                                                                                          \
            for (int64_t t = 0; t < planes * h->out * w->out; t++) {                                              \
                const int64_t q = t % w->out, o = (t / w->out) % h->out, p = t / (w->out * h->out);               \
                A acc = 0;                                                                                        \
                for (int k = 0; k < h->taps; k++) {                                                               \
                    const int64_t row = p * h->in * w->in + h->idx[o * h->taps + k] * w->in;                      \
                    A a = 0;                                                                                      \
                    for (int j = 0; j < w->taps; j++) {                                                           \
                        A v = (A)ww[q * w->taps + j] * (A)fake_interp_ld(in, dtype, row + w->idx[q * w->taps + j]); \
                        a = j ? a + v : v;                                                                        \
                    }                                                                                             \
                    if (h->taps == 1) acc = a;                                                                    \
                    else acc = k ? acc + (A)wh[o * h->taps + k] * a : (A)wh[o * h->taps] * a;                     \
                }                                                                                                 \
                fake_interp_st(out, dtype, t, acc);                                                               \
            }                                                                                                     \
            return;                                                                                               \
        }                                                                                                         \
        for (int64_t t = 0; t < planes * h->in * w->in; t++) {                                                    \
            const int64_t r = t % w->in, i = (t / w->in) % h->in, p = t / (w->in * h->in);                       \
            A acc = 0;                                                                                            \
            for (int64_t e = h->inv_off[i]; e < h->inv_off[i + 1]; e++) {                                         \
                const int64_t te = h->inv[e], grow = p * h->out * w->out + (te / h->taps) * w->out;               \
                A b = 0;                                                                                          \
                for (int64_t f = w->inv_off[r]; f < w->inv_off[r + 1]; f++)                                       \
                    b += (A)ww[w->inv[f]] * (A)fake_interp_ld(in, dtype, grow + w->inv[f] / w->taps);             \
                acc += (A)wh[te] * b;                                                                             \
            }                                                                                                     \
            fake_interp_st(out, dtype, t, acc);                                                                   \
        }                                                                                                         \
    }
FAKE_INTERP(float, float)
FAKE_INTERP(double, double)

static int fake_interp(int dev, int dtype, int64_t planes, const EmCudaInterpAxis *ha, const EmCudaInterpAxis *wa,
                       const void *in, void *out, bool backward) {
    conv_calls[3]++;
    if (!fake_conv_dtype(dtype)) return fake_fail("interp: unsupported dtype");
    const EmCudaInterpAxis h = fake_axis(ha), w = fake_axis(wa);
    if (dtype == EM_FLOAT64) fake_interp_double(dtype, planes, &h, &w, untag(in), untag(out), backward);
    else fake_interp_float(dtype, planes, &h, &w, untag(in), untag(out), backward);
    return 0;
}

#endif
