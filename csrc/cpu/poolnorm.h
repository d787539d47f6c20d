/* poolnorm.h — CPU kernels of the 2-d pools and of batch / group norm
 * (cpu/poolnorm.c), called by their front-ends (ops/poolnorm.c).
 *
 * Note [pool planes]: pools see a contiguous input as `planes` independent
 * [H, W] planes (N * C of them) and write [OH, OW] planes; max pool's indices
 * are positions h * W + w inside the input plane, as torch's. Planes are split
 * across OpenMP threads. Data is float32 or float64 (`dt`); half types are
 * widened by the front-end.
 *
 * Note [norm runs]: batch and group norm see a contiguous [N, C, S] input as
 * R = N * C runs of S elements (S: the product of the spatial sizes). The
 * kernels work run by run — sums, centered sums of squares, dot products and
 * per-run affine maps with per-run coefficients in double — and the front-end
 * combines the runs of a channel (batch norm) or of a group (group norm). */
#ifndef EMBER_CPU_POOLNORM_H
#define EMBER_CPU_POOLNORM_H

#include "../ember.h"

typedef struct {
    int64_t planes, H, W, OH, OW;
    int64_t kh, kw, sh, sw, ph, pw, dh, dw;
} EmPool2d;

/* out[p, oh, ow] = max over the window (NaN wins, the first maximum among
 * ties); idx gets its position. */
void em_cpu_max_pool2d(const EmPool2d *p, EmDType dt, const char *in, char *out, int64_t *idx);
/* gi (zero-filled, [planes, H, W]) += g at each output's index. */
void em_cpu_max_pool2d_backward(const EmPool2d *p, EmDType dt, const char *g, const int64_t *idx, char *gi);

/* Average windows: output row oh covers input rows [h0[oh], h1[oh]), column
 * ow covers [w0[ow], w1[ow]) (already clamped to the input), and its sum is
 * divided by divisor[oh * OW + ow]. */
typedef struct {
    int64_t planes, H, W, OH, OW;
    const int64_t *h0, *h1, *w0, *w1;
    const double *divisor;
} EmAvgPool;
void em_cpu_avg_pool2d(const EmAvgPool *p, EmDType dt, const char *in, char *out);
/* gi (zero-filled) += g / divisor over each window */
void em_cpu_avg_pool2d_backward(const EmAvgPool *p, EmDType dt, const char *g, char *gi);

/* sum[r] = sum of run r */
void em_cpu_runs_sum(EmDType dt, const char *x, int64_t R, int64_t S, double *sum);
/* ss[r] = sum of (x - center[r])^2 over run r */
void em_cpu_runs_centered_ss(EmDType dt, const char *x, int64_t R, int64_t S, const double *center, double *ss);
/* sg[r] = sum of g, sgx[r] = sum of g * (x - center[r]) over run r */
void em_cpu_runs_dot(EmDType dt, const char *g, const char *x, int64_t R, int64_t S, const double *center, double *sg,
                     double *sgx);
/* y = a[r] * x + b[r] */
void em_cpu_runs_affine(EmDType dt, const char *x, char *y, int64_t R, int64_t S, const double *a, const double *b);
/* y = a[r] * g + b[r] * x + c[r] */
void em_cpu_runs_affine2(EmDType dt, const char *g, const char *x, char *y, int64_t R, int64_t S, const double *a,
                         const double *b, const double *c);

#endif
