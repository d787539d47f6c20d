/* conv.c — convolution on the CPU as im2col + GEMM (conv.h).
 *
 * Forward, per image n and group:  y[n, grp] (Og, L) = w[grp] (Og, K) @ cols[grp] (K, L)
 * with cols = im2col(x[n]) (C*kd*kh*kw, L), K = C/groups*kd*kh*kw, L =
 * od*oh*ow (2-d: kd = od = 1); the bias is written into y first and the GEMM
 * adds to it (beta = 1). A 1x1(x1) window with stride 1 and no padding needs
 * no im2col: x[n] (C, D*H*W) is already the column matrix.
 * Backward: gw[grp] += gy[n, grp] @ cols[grp]^T (the columns recomputed),
 * gx[n] = col2im(w[grp]^T @ gy[n, grp]), gb = sum of gy over n and L.
 *
 * Threads: ember's, with single-threaded GEMMs (Note [conv threads]). */
#include "conv.h"
#include "blas.h"
#include "../cpu/reduce.h" /* EM_CLONES */
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

static const EmScalar ONE = {'i', {1}}, ZERO = {'i', {0}};

/* Columns ox in [*lo, *hi) of a kernel column with offset off = kj*dw - pw
 * land inside the image: 0 <= ox*sw + off < W. */
static void inside(int64_t off, int64_t sw, int64_t W, int64_t ow, int64_t *lo, int64_t *hi) {
    int64_t a = off >= 0 ? 0 : (-off + sw - 1) / sw;
    int64_t b = W - 1 - off < 0 ? 0 : (W - 1 - off) / sw + 1;
    if (a > ow) a = ow;
    if (b > ow) b = ow;
    if (b < a) b = a;
    *lo = a;
    *hi = b;
}

/* im2col of planes [c0, c1) of one image x (C, D, H, W) into cols
 * (C*kd*kh*kw, L); col2im: the same walk, adding the columns back into x. */
#define WINDOW_KERNELS(SUF, T)                                                                          \
    EM_CLONES static void im2col_##SUF(const EmConvGeom *g, const T *x, T *cols, int64_t c0, int64_t c1) { \
        const int64_t L = g->od * g->oh * g->ow, plane = g->oh * g->ow;                                 \
        for (int64_t c = c0; c < c1; c++) {                                                             \
            const T *xc = x + c * g->D * g->H * g->W;                                                   \
            for (int64_t kz = 0; kz < g->kd; kz++)                                                      \
                for (int64_t ki = 0; ki < g->kh; ki++)                                                  \
                    for (int64_t kj = 0; kj < g->kw; kj++) {                                            \
                        T *row = cols + (((c * g->kd + kz) * g->kh + ki) * g->kw + kj) * L;             \
                        int64_t off = kj * g->dw - g->pw, lo, hi;                                       \
                        inside(off, g->sw, g->W, g->ow, &lo, &hi);                                      \
                        for (int64_t oz = 0; oz < g->od; oz++) {                                        \
                            int64_t iz = oz * g->sd - g->pd + kz * g->dd;                               \
                            if (iz < 0 || iz >= g->D) {                                                 \
                                memset(row + oz * plane, 0, (size_t)plane * sizeof(T));                 \
                                continue;                                                               \
                            }                                                                           \
                            for (int64_t oy = 0; oy < g->oh; oy++) {                                    \
                                T *r = row + oz * plane + oy * g->ow;                                   \
                                int64_t iy = oy * g->sh - g->ph + ki * g->dh;                           \
                                if (iy < 0 || iy >= g->H) {                                             \
                                    memset(r, 0, (size_t)g->ow * sizeof(T));                            \
                                    continue;                                                           \
                                }                                                                       \
                                const T *src = xc + (iz * g->H + iy) * g->W;                            \
                                for (int64_t j = 0; j < lo; j++) r[j] = 0;                              \
                                if (g->sw == 1)                                                         \
                                    memcpy(r + lo, src + lo + off, (size_t)(hi - lo) * sizeof(T));      \
                                else                                                                    \
                                    for (int64_t j = lo; j < hi; j++) r[j] = src[j * g->sw + off];      \
                                for (int64_t j = hi; j < g->ow; j++) r[j] = 0;                          \
                            }                                                                           \
                        }                                                                               \
                    }                                                                                   \
        }                                                                                               \
    }                                                                                                   \
    EM_CLONES static void col2im_##SUF(const EmConvGeom *g, const T *cols, T *x, int64_t c0, int64_t c1) { \
        const int64_t L = g->od * g->oh * g->ow, plane = g->oh * g->ow;                                 \
        for (int64_t c = c0; c < c1; c++) {                                                             \
            T *xc = x + c * g->D * g->H * g->W;                                                         \
            memset(xc, 0, (size_t)(g->D * g->H * g->W) * sizeof(T));                                    \
            for (int64_t kz = 0; kz < g->kd; kz++)                                                      \
                for (int64_t ki = 0; ki < g->kh; ki++)                                                  \
                    for (int64_t kj = 0; kj < g->kw; kj++) {                                            \
                        const T *row = cols + (((c * g->kd + kz) * g->kh + ki) * g->kw + kj) * L;       \
                        int64_t off = kj * g->dw - g->pw, lo, hi;                                       \
                        inside(off, g->sw, g->W, g->ow, &lo, &hi);                                      \
                        for (int64_t oz = 0; oz < g->od; oz++) {                                        \
                            int64_t iz = oz * g->sd - g->pd + kz * g->dd;                               \
                            if (iz < 0 || iz >= g->D) continue;                                         \
                            for (int64_t oy = 0; oy < g->oh; oy++) {                                    \
                                int64_t iy = oy * g->sh - g->ph + ki * g->dh;                           \
                                if (iy < 0 || iy >= g->H) continue;                                     \
                                const T *r = row + oz * plane + oy * g->ow;                             \
                                T *dst = xc + (iz * g->H + iy) * g->W;                                  \
                                if (g->sw == 1)                                                         \
                                    for (int64_t j = lo; j < hi; j++) dst[j + off] += r[j];             \
                                else                                                                    \
                                    for (int64_t j = lo; j < hi; j++) dst[j * g->sw + off] += r[j];     \
                            }                                                                           \
                        }                                                                               \
                    }                                                                                   \
        }                                                                                               \
    }                                                                                                   \
    /* y (O, L): each row o set to b[o] */                                                              \
    static void fill_bias_##SUF(T *y, const T *b, int64_t O, int64_t L) {                               \
        for (int64_t o = 0; o < O; o++)                                                                 \
            for (int64_t l = 0; l < L; l++) y[o * L + l] = b[o];                                        \
    }                                                                                                   \
    /* gb[o] = sum of gy (N, O, L) over n and l, accumulated in A */                                    \
    static void bias_grad_##SUF(const T *gy, T *gb, int64_t N, int64_t O, int64_t L, int nt) {          \
        OMP_FOR_NT                                                                                  \
        for (int64_t o = 0; o < O; o++) {                                                               \
            ACC_##SUF acc = 0;                                                                          \
            for (int64_t n = 0; n < N; n++) {                                                           \
                const T *p = gy + (n * O + o) * L;                                                      \
                for (int64_t l = 0; l < L; l++) acc += p[l];                                            \
            }                                                                                           \
            gb[o] = (T)acc;                                                                             \
        }                                                                                               \
    }

/* a parallel loop on `nt` threads: the variable of that name in scope */
#ifdef _OPENMP
#define OMP_FOR_NT _Pragma("omp parallel for num_threads(nt) schedule(static) if (nt > 1)")
#else
#define OMP_FOR_NT
#endif
#define ACC_f32 double
#define ACC_f64 double
#define ACC_i64 int64_t
WINDOW_KERNELS(f32, float)
WINDOW_KERNELS(f64, double)
WINDOW_KERNELS(i64, int64_t)

/* dtype dispatch of the kernels above, on planes [c0, c1) */
static void im2col_planes(EmDType d, const EmConvGeom *g, const void *x, void *cols, int64_t c0, int64_t c1) {
    if (d == EM_FLOAT32) im2col_f32(g, x, cols, c0, c1);
    else if (d == EM_FLOAT64) im2col_f64(g, x, cols, c0, c1);
    else im2col_i64(g, x, cols, c0, c1);
}
static void col2im_planes(EmDType d, const EmConvGeom *g, const void *cols, void *x, int64_t c0, int64_t c1) {
    if (d == EM_FLOAT32) col2im_f32(g, cols, x, c0, c1);
    else if (d == EM_FLOAT64) col2im_f64(g, cols, x, c0, c1);
    else col2im_i64(g, cols, x, c0, c1);
}

/* threads for `work` element moves split over `parts` independent pieces */

static double window_work(const EmConvGeom *g) {
    return (double)g->kd * g->kh * g->kw * g->od * g->oh * g->ow;
}

void em_im2col_batch(EmDType d, const EmConvGeom *g, int64_t N, const void *x, void *cols) {
    const int64_t isz = em_dtype_info[d].itemsize, planes = N * g->C;
    const int64_t xplane = g->D * g->H * g->W, cplane = g->kd * g->kh * g->kw * g->od * g->oh * g->ow;
    int nt = em_threads_for(planes, window_work(g) * (double)planes);
    OMP_FOR_NT
    for (int64_t p = 0; p < planes; p++) /* plane p alone: offsets chosen so that its channel index is 0 */
        im2col_planes(d, g, (const char *)x + p * xplane * isz, (char *)cols + p * cplane * isz, 0, 1);
}

void em_col2im_batch(EmDType d, const EmConvGeom *g, int64_t N, const void *cols, void *x) {
    const int64_t isz = em_dtype_info[d].itemsize, planes = N * g->C;
    const int64_t xplane = g->D * g->H * g->W, cplane = g->kd * g->kh * g->kw * g->od * g->oh * g->ow;
    int nt = em_threads_for(planes, window_work(g) * (double)planes);
    OMP_FOR_NT
    for (int64_t p = 0; p < planes; p++)
        col2im_planes(d, g, (const char *)cols + p * cplane * isz, (char *)x + p * xplane * isz, 0, 1);
}

/* one image's im2col / col2im on nt threads (over its channels) */
static void im2col_image(EmDType d, const EmConvGeom *g, const void *x, void *cols, int nt) {
    nt = nt > 1 ? em_threads_for(g->C, window_work(g) * (double)g->C) : 1;
    OMP_FOR_NT
    for (int64_t c = 0; c < g->C; c++) im2col_planes(d, g, x, cols, c, c + 1);
}
static void col2im_image(EmDType d, const EmConvGeom *g, const void *cols, void *x, int nt) {
    nt = nt > 1 ? em_threads_for(g->C, window_work(g) * (double)g->C) : 1;
    OMP_FOR_NT
    for (int64_t c = 0; c < g->C; c++) col2im_planes(d, g, cols, x, c, c + 1);
}

/* C (m x n) = op(A) @ op(B) + beta C, on ember's threads when nt > 1
 * (em_gemm_ex splits it into slabs: Note [GEMM threads] in blas.c) */
static void gemm_split(EmDType d, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const char *a, int64_t lda,
                       const char *b, int64_t ldb, char *c, int64_t ldc, EmScalar beta, int nt) {
    em_gemm_ex(d, ta, tb, m, n, k, a, lda, b, ldb, c, ldc, ONE, beta, nt > 1);
}

/* The sizes every driver needs. */
typedef struct {
    int64_t isz, L, K, Og, xstep, ystep, cols; /* cols: elements of one image's column matrix (0 when direct) */
    bool direct;
} Plan;

static Plan plan_of(EmDType d, const EmConvShape *s) {
    const EmConvGeom *g = &s->g;
    Plan p;
    p.isz = em_dtype_info[d].itemsize;
    p.L = g->od * g->oh * g->ow;
    p.K = g->C / s->groups * g->kd * g->kh * g->kw;
    p.Og = s->O / s->groups;
    p.xstep = g->C * g->D * g->H * g->W;
    p.ystep = s->O * p.L;
    /* (a transposed convolution's image may outgrow its windows: output_padding) */
    p.direct = g->kd == 1 && g->kh == 1 && g->kw == 1 && g->sd == 1 && g->sh == 1 && g->sw == 1 && g->pd == 0 &&
               g->ph == 0 && g->pw == 0 && g->od == g->D && g->oh == g->H && g->ow == g->W;
    p.cols = p.direct ? 0 : g->C * g->kd * g->kh * g->kw * p.L;
    return p;
}

/* Note [conv threads]: ember's OpenMP threads do all the splitting and
 * every GEMM runs single-threaded in BLAS (Note [GEMM threads] in blas.c).
 * Batches split by image, each thread with its own column
 * buffer (and, for gw, its own partial sum); a single image splits its
 * im2col/col2im by channel and its GEMMs by column blocks. */
typedef struct {
    int images; /* threads over images (1: one image after another) */
    int inner;  /* threads inside one image */
} Threads;

static Threads threads_of(const EmConvShape *s, const Plan *p) {
    Threads t = {1, 1};
    double work = (double)s->N * (double)s->O * (double)p->K * (double)p->L;
    if (em_num_threads <= 1 || work < 1048576.0) return t; /* too little to pay for threads */
    if (s->N >= em_num_threads) t.images = em_num_threads;
    else if (s->N > 1 && (double)p->Og * p->K * p->L * s->groups < 4.0 * EM_BLAS_SINGLE_THREAD_MNK)
        t.images = (int)s->N; /* fewer images than threads, but too little work in one to split it */
    else t.inner = em_num_threads;
    return t;
}

static int thread_id(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

/* n_bufs buffers of `elems` elements for each of nt threads (NULL when
 * none are needed; *fail set when allocation fails or sizes overflow). */
static char *buffers(int nt, int n_bufs, int64_t elems, int64_t isz, bool *fail) {
    *fail = false;
    if (elems == 0 || n_bufs == 0) return NULL;
    double bytes = (double)nt * n_bufs * (double)elems * (double)isz;
    char *b = bytes < 9e18 ? malloc((size_t)bytes) : NULL;
    if (!b) *fail = true;
    return b;
}

static void forward_image(EmDType d, const EmConvShape *s, const Plan *p, const char *x, const char *w,
                          const char *b, char *y, char *buf, int nt) {
    const char *cols = x;
    if (!p->direct) {
        im2col_image(d, &s->g, x, buf, nt);
        cols = buf;
    }
    if (b) {
        if (d == EM_FLOAT32) fill_bias_f32((float *)y, (const float *)b, s->O, p->L);
        else if (d == EM_FLOAT64) fill_bias_f64((double *)y, (const double *)b, s->O, p->L);
        else fill_bias_i64((int64_t *)y, (const int64_t *)b, s->O, p->L);
    }
    for (int64_t grp = 0; grp < s->groups; grp++)
        gemm_split(d, false, false, p->Og, p->L, p->K, w + grp * p->Og * p->K * p->isz, p->K,
                   cols + grp * p->K * p->L * p->isz, p->L, y + grp * p->Og * p->L * p->isz, p->L, b ? ONE : ZERO, nt);
}

int em_conv_forward(EmDType d, const EmConvShape *s, const void *x, const void *w, const void *b, void *y) {
    Plan p = plan_of(d, s);
    Threads th = threads_of(s, &p);
    bool fail;
    char *buf = buffers(th.images, 1, p.cols, p.isz, &fail);
    if (fail) return -1;
    const char *xc = x, *wc = w, *bc = b;
    char *yc = y;
    const EmStop *stop = em_stop_current; /* Note [interrupts]: between the images */
    if (th.images > 1) {
#ifdef _OPENMP
#pragma omp parallel for num_threads(th.images) schedule(dynamic, 1)
#endif
        for (int64_t n = 0; n < s->N; n++)
            if (!em_stop_now(stop))
                forward_image(d, s, &p, xc + n * p.xstep * p.isz, wc, bc, yc + n * p.ystep * p.isz,
                              buf ? buf + thread_id() * p.cols * p.isz : NULL, 1);
    } else {
        for (int64_t n = 0; n < s->N && !em_stop_now(stop); n++)
            forward_image(d, s, &p, xc + n * p.xstep * p.isz, wc, bc, yc + n * p.ystep * p.isz, buf, th.inner);
    }
    free(buf);
    return 0;
}

/* gw_acc (O, K) += this image's weight gradient; gx (C, H, W) = its input gradient */
static void backward_image(EmDType d, const EmConvShape *s, const Plan *p, const char *gy, const char *x,
                           const char *w, char *gx, char *gw_acc, char *colx, char *colg, int nt) {
    if (gw_acc) {
        const char *cols = x;
        if (!p->direct) {
            im2col_image(d, &s->g, x, colx, nt);
            cols = colx;
        }
        for (int64_t grp = 0; grp < s->groups; grp++)
            gemm_split(d, false, true, p->Og, p->K, p->L, gy + grp * p->Og * p->L * p->isz, p->L,
                       cols + grp * p->K * p->L * p->isz, p->L, gw_acc + grp * p->Og * p->K * p->isz, p->K, ONE, nt);
    }
    if (gx) {
        char *target = p->direct ? gx : colg;
        for (int64_t grp = 0; grp < s->groups; grp++)
            gemm_split(d, true, false, p->K, p->L, p->Og, w + grp * p->Og * p->K * p->isz, p->K,
                       gy + grp * p->Og * p->L * p->isz, p->L, target + grp * p->K * p->L * p->isz, p->L, ZERO, nt);
        if (!p->direct) col2im_image(d, &s->g, colg, gx, nt);
    }
}

/* dst += src, n elements */
static void add_into(EmDType d, char *dst, const char *src, int64_t n) {
    if (d == EM_FLOAT32)
        for (int64_t i = 0; i < n; i++) ((float *)dst)[i] += ((const float *)src)[i];
    else if (d == EM_FLOAT64)
        for (int64_t i = 0; i < n; i++) ((double *)dst)[i] += ((const double *)src)[i];
    else
        for (int64_t i = 0; i < n; i++) ((int64_t *)dst)[i] += ((const int64_t *)src)[i];
}

int em_conv_backward(EmDType d, const EmConvShape *s, const void *gy, const void *x, const void *w, void *gx,
                     void *gw, void *gb) {
    Plan p = plan_of(d, s);
    if (gb) {
        int nt = em_threads_for(s->O, (double)s->N * (double)s->O * (double)p.L);
        if (d == EM_FLOAT32) bias_grad_f32(gy, gb, s->N, s->O, p.L, nt);
        else if (d == EM_FLOAT64) bias_grad_f64(gy, gb, s->N, s->O, p.L, nt);
        else bias_grad_i64(gy, gb, s->N, s->O, p.L, nt);
    }
    if (!gx && !gw) return 0;
    const int64_t wsize = s->O * p.K; /* elements of w and gw */
    const EmStop *stop = em_stop_current; /* Note [interrupts]: between the images */
    if (gw) memset(gw, 0, (size_t)(wsize * p.isz));
    Threads th = threads_of(s, &p);
    bool fail, fail_w = false;
    /* per thread: the input's columns (for gw) and the gradient's (for gx) */
    const int nbuf = (gw ? 1 : 0) + (gx ? 1 : 0);
    const int64_t per = p.cols;
    char *buf = buffers(th.images, nbuf, per, p.isz, &fail);
    char *partial = th.images > 1 && gw ? buffers(th.images, 1, wsize, p.isz, &fail_w) : NULL;
    if (fail || fail_w) {
        free(buf);
        free(partial);
        return -1;
    }
    if (partial) memset(partial, 0, (size_t)(th.images * wsize * p.isz));
    const char *gyc = gy, *xc = x, *wc = w;
    char *gxc = gx;
    if (th.images > 1) {
#ifdef _OPENMP
#pragma omp parallel for num_threads(th.images) schedule(dynamic, 1)
#endif
        for (int64_t n = 0; n < s->N; n++) {
            if (em_stop_now(stop)) continue;
            int t = thread_id();
            char *mine = buf ? buf + (int64_t)t * nbuf * per * p.isz : NULL;
            char *colx = gw ? mine : NULL, *colg = mine ? mine + (gw ? per * p.isz : 0) : NULL;
            backward_image(d, s, &p, gyc + n * p.ystep * p.isz, xc ? xc + n * p.xstep * p.isz : NULL, wc,
                           gxc ? gxc + n * p.xstep * p.isz : NULL, partial ? partial + t * wsize * p.isz : NULL,
                           colx, colg, 1);
        }
        if (partial)
            for (int t = 0; t < th.images; t++) add_into(d, gw, partial + t * wsize * p.isz, wsize);
    } else {
        char *colx = gw ? buf : NULL, *colg = buf ? buf + (gw ? per * p.isz : 0) : NULL;
        for (int64_t n = 0; n < s->N && !em_stop_now(stop); n++)
            backward_image(d, s, &p, gyc + n * p.ystep * p.isz, xc ? xc + n * p.xstep * p.isz : NULL, wc,
                           gxc ? gxc + n * p.xstep * p.isz : NULL, gw, colx, colg, th.inner);
    }
    free(buf);
    free(partial);
    return 0;
}
