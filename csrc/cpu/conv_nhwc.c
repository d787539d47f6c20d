/* conv_nhwc.c — 2-d convolution of channels-last images (Note [memory format]).
 *
 * With x laid out (N, H, W, C) and the weight as (O, kh, kw, C), one output
 * pixel's window is kh*kw runs of C contiguous values, and the output
 * (N, oh, ow, O) is a row-major (N*oh*ow, O) matrix:
 *     y[pixel, o] = sum over (ki, kj, c) of rows[pixel, (ki, kj, c)] * w[o, (ki, kj, c)]
 * one GEMM per image with the rows gathered run by run (zeros outside the
 * image; the weight transposed to (K, O) once, which BLAS runs faster) —
 * images on ember's threads, each GEMM on one (Note [conv threads]); for a
 * 1x1 window with stride 1 and no padding the batch itself is the row
 * matrix of a single GEMM. No transposition of
 * the image on either side, which is why channels-last inputs are not slower
 * than contiguous ones. groups == 1 only; float32 and float64. */
#include "conv.h"
#include "blas.h"
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

static const EmScalar ONE = {'i', {1}}, ZERO = {'i', {0}};

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
    bool direct = g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0 &&
                  g->oh == g->H && g->ow == g->W;
    const EmStop *stop = em_stop_current; /* Note [interrupts]: between the images */
    /* the weight as (K, O): BLAS runs these tall products at about twice the
     * speed with B untransposed */
    char *wt = malloc((size_t)K * (size_t)O * isz + 1);
    if (!wt) return -1;
    for (int64_t o = 0; o < O; o++)
        for (int64_t k = 0; k < K; k++)
            memcpy(wt + (size_t)(k * O + o) * isz, (const char *)w + (size_t)(o * K + k) * isz, isz);
    if (direct) { /* x is the (N*H*W, C) row matrix: one GEMM, split by BLAS's threads */
        if (b) fill_bias(d, y, b, s->N * L, O);
        em_gemm_ex(d, false, false, s->N * L, O, K, x, K, wt, O, y, O, ONE, b ? ONE : ZERO, true);
        free(wt);
        return 0;
    }
    int nt = 1;
#ifdef _OPENMP
    nt = s->N >= 2 && em_num_threads > 1 ? (em_num_threads < s->N ? em_num_threads : (int)s->N) : 1;
#endif
    size_t per = (size_t)L * (size_t)K * isz;
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
        char *rows = buf + (size_t)t * per, *yn = yc + (size_t)n * ystep;
        gather_rows(g, isz, xc + (size_t)n * xstep, rows);
        if (bc) fill_bias(d, yn, bc, L, O);
        /* one image in a thread of its own: single-threaded GEMM (Note [conv threads]) */
        em_gemm_ex(d, false, false, L, O, K, rows, K, wc, O, yn, O, ONE, bc ? ONE : ZERO, nt == 1);
    }
    free(buf);
    free(wt);
    return 0;
}
