/* softmax.h — the fused softmax / log-softmax and NLL kernels (cpu/softmax.c)
 * and what their front-ends (ops/softmax.c, ops/loss.c) call.
 *
 * Note [softmax layout]: a contiguous tensor reduced along `dim` is seen as
 * [outer, n, inner] (inner = product of the sizes after dim). inner == 1 is
 * the fast path: each row is contiguous. Kernels take float32 or float64
 * data, and float16/bfloat16 in their own dtype: Note [softmax of half types]
 * in softmax.c widens one block at a time. */
#ifndef EMBER_CPU_SOFTMAX_H
#define EMBER_CPU_SOFTMAX_H

#include "../ember.h"

/* out = softmax(in) or log_softmax(in) along n. Returns -1 (no error set:
 * the caller raises MemoryError, with the GIL) when scratch memory ran out. */
int em_cpu_softmax(const char *in, char *out, EmDType dt, int64_t outer, int64_t n,
                   int64_t inner, bool lg);
/* gi = y * (g - sum(g * y))  (softmax)  or  g - exp(y) * sum(g)  (log); -1 as above. */
int em_cpu_softmax_backward(const char *g, const char *y, char *gi, EmDType dt, int64_t outer,
                            int64_t n, int64_t inner, bool lg);

/* Note [nll layout]: input x is [N, C, inner] contiguous, target t is
 * [N, inner] int64, weight w is [C] or NULL (all ones). A target equal to
 * `ignore` contributes nothing. */
typedef struct {
    const char *x;
    const int64_t *t;
    const char *w;
    EmDType dt; /* of x and w: float32 or float64 */
    int64_t N, C, inner, ignore;
} EmNll;
/* -1 when every target is ignore or in [0, C); else the first bad one's position. */
int64_t em_cpu_nll_check(const EmNll *p);
/* out_none ([N, inner], dt) gets -w[t] x[t] per element when not NULL;
 * always returns the sum in *total and the sum of the weights in *total_w. */
void em_cpu_nll_forward(const EmNll *p, char *out_none, double *total, double *total_w);
/* gi ([N, C, inner], dt, zero-filled) gets -w[t] * g * scale at each target:
 * g is [N, inner] (g_scalar false) or one element. */
void em_cpu_nll_backward(const EmNll *p, const char *g, bool g_scalar, double scale, char *gi);

#endif
