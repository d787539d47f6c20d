/* conv_nhwc.c — 2-d convolution of channels-last images (Note [memory format]).
 *
 * With x laid out (N, H, W, C) and the weight as (O, kh, kw, C), one output
 * pixel's window is kh*kw runs of C contiguous values, and the output
 * (N, oh, ow, O) is a row-major (N*oh*ow, O) matrix:
 *     y[pixel, o] = sum over (ki, kj, c) of rows[pixel, (ki, kj, c)] * w[o, (ki, kj, c)]
 * one GEMM per image with the rows gathered run by run (zeros outside the
 * image; the weight transposed to (K, O) once, which BLAS runs faster) —
 * images on ember's threads, each GEMM on one (Note [conv threads]); for a
 * 1x1 window with stride 1 and no padding each image is its own row matrix.
 * The backward runs the same products transposed: gw (O, K) += gy_n^T @
 * rows_n per image (per-thread partial sums), the rows' gradient gy_n @ w
 * added back into the image where the rows were gathered, gb the column
 * sums of gy. No transposition of the image on either side, which is why
 * channels-last inputs are not slower than contiguous ones. groups == 1
 * only; float32 and float64. */
#include "conv.h"
#include "blas.h"
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

static const EmScalar ONE = {'i', {1}}, ZERO = {'i', {0}};

/* a 1x1 window, stride 1, no padding: each image is its own row matrix */
static bool is_direct(const EmConvGeom *g) {
    return g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0 && g->oh == g->H &&
           g->ow == g->W;
}

/* threads over images (Note [conv threads]): one per image up to ember's count */
static int image_threads(int64_t N) {
#ifdef _OPENMP
    return N >= 2 && em_num_threads > 1 ? (em_num_threads < N ? em_num_threads : (int)N) : 1;
#else
    (void)N;
    return 1;
#endif
}

bool em_conv_nhwc_supported(EmDType d, const EmConvShape *s) {
    const EmConvGeom *g = &s->g;
    return (d == EM_FLOAT32 || d == EM_FLOAT64) && s->groups == 1 && g->D == 1 && g->kd == 1;
}

/* rows (oh*ow, kh*kw*C) of one image x (H, W, C) */
static void gather_rows(const EmConvGeom *g, size_t isz, const char *x, char *rows) {
    size_t run = (size_t)g->C * isz, K = (size_t)(g->kh * g->kw) * run;
    for (int64_t oy = 0; oy < g->oh; oy++)
        for (int64_t ox = 0; ox < g->ow; ox++) {
            char *r = rows + (size_t)(oy * g->ow + ox) * K;
            for (int64_t ki = 0; ki < g->kh; ki++) {
                int64_t iy = oy * g->sh - g->ph + ki * g->dh;
                for (int64_t kj = 0; kj < g->kw; kj++, r += run) {
                    int64_t ix = ox * g->sw - g->pw + kj * g->dw;
                    if (iy < 0 || iy >= g->H || ix < 0 || ix >= g->W) memset(r, 0, run);
                    else memcpy(r, x + (size_t)(iy * g->W + ix) * run, run);
                }
            }
        }
}

/* y (rows, O) = bias broadcast over the rows */
static void fill_bias(EmDType d, char *y, const char *b, int64_t rows, int64_t O) {
    size_t isz = em_dtype_info[d].itemsize, row = (size_t)O * isz;
    for (int64_t i = 0; i < rows; i++) memcpy(y + (size_t)i * row, b, row);
}

int em_conv_forward_nhwc(EmDType d, const EmConvShape *s, const void *x, const void *w, const void *b, void *y) {
    const EmConvGeom *g = &s->g;
    size_t isz = em_dtype_info[d].itemsize;
    int64_t L = g->oh * g->ow, K = g->kh * g->kw * g->C, O = s->O;
    bool direct = is_direct(g);
    const EmStop *stop = em_stop_current; /* Note [interrupts]: between the images */
    /* the weight as (K, O): BLAS runs these tall products at about twice the
     * speed with B untransposed */
    char *wt = malloc((size_t)K * (size_t)O * isz + 1);
    if (!wt) return -1;
    for (int64_t o = 0; o < O; o++)
        for (int64_t k = 0; k < K; k++)
            memcpy(wt + (size_t)(k * O + o) * isz, (const char *)w + (size_t)(o * K + k) * isz, isz);
    int nt = image_threads(s->N);
    size_t per = direct ? 0 : (size_t)L * (size_t)K * isz;
    char *buf = per ? malloc(per * (size_t)nt) : NULL;
    if (!buf && per) {
        free(wt);
        return -1;
    }
    const char *xc = x, *wc = wt, *bc = b;
    char *yc = y;
    size_t xstep = (size_t)(g->H * g->W * g->C) * isz, ystep = (size_t)(L * O) * isz;
#ifdef _OPENMP
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1) if (nt > 1)
#endif
    for (int64_t n = 0; n < s->N; n++) {
        if (em_stop_now(stop)) continue;
        int t = 0;
#ifdef _OPENMP
        t = omp_get_thread_num();
#endif
        char *yn = yc + (size_t)n * ystep;
        const char *rows = xc + (size_t)n * xstep; /* direct: the image is its own row matrix */
        if (!direct) {
            gather_rows(g, isz, rows, buf + (size_t)t * per);
            rows = buf + (size_t)t * per;
        }
        if (bc) fill_bias(d, yn, bc, L, O);
        /* one image in a thread of its own: single-threaded GEMM (Note [conv threads]) */
        em_gemm_ex(d, false, false, L, O, K, rows, K, wc, O, yn, O, ONE, bc ? ONE : ZERO, nt == 1);
    }
    free(buf);
    free(wt);
    return 0;
}

/* image x (H, W, C) += the rows (oh*ow, kh*kw*C) added back where
 * gather_rows read them (its adjoint; windows outside the image read zeros) */
static void scatter_rows(EmDType d, const EmConvGeom *g, const char *rows, char *x) {
    size_t isz = em_dtype_info[d].itemsize;
    int64_t C = g->C;
    const char *r = rows;
    for (int64_t oy = 0; oy < g->oh; oy++)
        for (int64_t ox = 0; ox < g->ow; ox++)
            for (int64_t ki = 0; ki < g->kh; ki++) {
                int64_t iy = oy * g->sh - g->ph + ki * g->dh;
                for (int64_t kj = 0; kj < g->kw; kj++, r += (size_t)C * isz) {
                    int64_t ix = ox * g->sw - g->pw + kj * g->dw;
                    if (iy < 0 || iy >= g->H || ix < 0 || ix >= g->W) continue;
                    char *dst = x + (size_t)(iy * g->W + ix) * (size_t)C * isz;
                    if (d == EM_FLOAT32)
                        for (int64_t c = 0; c < C; c++) ((float *)dst)[c] += ((const float *)r)[c];
                    else
                        for (int64_t c = 0; c < C; c++) ((double *)dst)[c] += ((const double *)r)[c];
                }
            }
}

/* gb (O) = the sum of gy's rows (rows, O), in double: row blocks on ember's
 * threads, each with its own sums (the inner loop over O vectorizes) */
static int bias_grad(EmDType d, const char *gy, char *gb, int64_t rows, int64_t O) {
    int nt = em_threads_for(rows, (double)rows * (double)O);
    double *acc = calloc((size_t)nt * (size_t)O + 1, sizeof(double));
    if (!acc) return -1;
#ifdef _OPENMP
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
#endif
    for (int t = 0; t < nt; t++) {
        double *a = acc + (size_t)t * (size_t)O;
        for (int64_t i = rows * t / nt; i < rows * (t + 1) / nt; i++) {
            if (d == EM_FLOAT32) {
                const float *r = (const float *)gy + i * O;
                for (int64_t o = 0; o < O; o++) a[o] += r[o];
            } else {
                const double *r = (const double *)gy + i * O;
                for (int64_t o = 0; o < O; o++) a[o] += r[o];
            }
        }
    }
    for (int64_t o = 0; o < O; o++) {
        double v = 0;
        for (int t = 0; t < nt; t++) v += acc[(size_t)t * (size_t)O + o];
        if (d == EM_FLOAT32) ((float *)gb)[o] = (float)v;
        else ((double *)gb)[o] = v;
    }
    free(acc);
    return 0;
}

int em_conv_backward_nhwc(EmDType d, const EmConvShape *s, const void *gy, const void *x, const void *w, void *gx,
                          void *gw, void *gb) {
    const EmConvGeom *g = &s->g;
    size_t isz = em_dtype_info[d].itemsize;
    int64_t L = g->oh * g->ow, K = g->kh * g->kw * g->C, O = s->O, N = s->N;
    bool direct = is_direct(g);
    if (gb && bias_grad(d, gy, gb, N * L, O) < 0) return -1;
    if (gw && (N == 0 || L == 0)) memset(gw, 0, (size_t)(O * K) * isz);
    if (N == 0 || L == 0) {
        if (gx) memset(gx, 0, (size_t)(N * g->H * g->W * g->C) * isz);
        return 0;
    }
    if (direct && gx) { /* the batch is one (N*H*W, C) row matrix: gx in one GEMM, split by BLAS's threads */
        em_gemm_ex(d, false, false, N * L, K, O, gy, O, w, K, gx, K, ONE, ZERO, true);
        gx = NULL; /* gw: per image below (one GEMM over the batch would be 64x64 with a huge inner size) */
    }
    if (!gw && !gx) return 0;
    int nt = image_threads(N);
    /* per thread: rows of x (for gw), rows of the input gradient (for gx), and a partial gw */
    size_t per = (size_t)L * (size_t)K * isz, wbytes = (size_t)(O * K) * isz;
    size_t xper = direct ? 0 : per; /* direct: each image is its own row matrix */
    size_t mine = (gw ? xper : 0) + (gx ? per : 0) + (gw && nt > 1 ? wbytes : 0);
    char *buf = mine ? calloc((size_t)nt, mine) : NULL;
    if (mine && !buf) return -1;
    if (gw) memset(gw, 0, wbytes);
    if (gx) memset(gx, 0, (size_t)(N * g->H * g->W * g->C) * isz);
    const char *gyc = gy, *xc = x, *wc = w;
    char *gxc = gx, *gwc = gw;
    size_t xstep = (size_t)(g->H * g->W * g->C) * isz, ystep = (size_t)(L * O) * isz;
    const EmStop *stop = em_stop_current; /* Note [interrupts]: between the images */
#ifdef _OPENMP
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1) if (nt > 1)
#endif
    for (int64_t n = 0; n < N; n++) {
        if (em_stop_now(stop)) continue;
        int t = 0;
#ifdef _OPENMP
        t = omp_get_thread_num();
#endif
        char *b = buf + (size_t)t * mine, *grows = gxc ? b + (gwc ? xper : 0) : NULL;
        const char *gyn = gyc + (size_t)n * ystep;
        if (gwc) { /* gw (O, K) += gy_n^T (O, L) @ rows (L, K) */
            char *acc = nt > 1 ? b + (gwc ? xper : 0) + (gxc ? per : 0) : gwc;
            const char *xrows = xc + (size_t)n * xstep;
            if (!direct) {
                gather_rows(g, isz, xrows, b);
                xrows = b;
            }
            em_gemm_ex(d, true, false, O, K, L, gyn, O, xrows, K, acc, K, ONE, ONE, nt == 1);
        }
        if (gxc) { /* the rows' gradient gy_n (L, O) @ w (O, K), added back into the image */
            em_gemm_ex(d, false, false, L, K, O, gyn, O, wc, K, grows, K, ONE, ZERO, nt == 1);
            scatter_rows(d, g, grows, gxc + (size_t)n * xstep);
        }
    }
    if (gw && nt > 1)
        for (int t = 0; t < nt; t++) {
            const char *part = buf + (size_t)t * mine + xper + (gx ? per : 0);
            for (int64_t i = 0; i < O * K; i++) {
                if (d == EM_FLOAT32) ((float *)gw)[i] += ((const float *)part)[i];
                else ((double *)gw)[i] += ((const double *)part)[i];
            }
        }
    free(buf);
    return 0;
}
