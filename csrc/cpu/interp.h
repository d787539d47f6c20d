/* interp.h — the upsampling kernels of F.interpolate (cpu/interp.c) and
 * what their front-ends (ops/interp.c) call.
 *
 * Note [interp layout]: a contiguous input is [planes, ih, iw] (planes = N*C;
 * a 1-d op has ih = oh = 1). Each spatial axis is described by an EmInterpAxis:
 * for every output position o, `taps` input positions idx[o*taps + k] and
 * their weights w[o*taps + k] (1 tap for nearest, 2 for linear, 4 for cubic).
 * The 2-d result is separable: y[oh, ow] = sum_k sum_j wh[k] ww[j] x[hk, wj],
 * and the backward op is its adjoint (each gradient element scattered back
 * with the same weights). The index and weight rules are torch's, computed
 * in float for float32 and double for float64 as torch's CPU kernels do. */
#ifndef EMBER_CPU_INTERP_H
#define EMBER_CPU_INTERP_H

#include "../ember.h"

/* NEAREST_2D: nearest as torch's upsample_nearest2d computes it, which copies
 * rows when out == in and takes o / 2 when out == 2 * in whatever the scale
 * factor (its 1-d op applies the formula in every case). */
typedef enum {
    EM_INTERP_NEAREST,
    EM_INTERP_NEAREST_2D,
    EM_INTERP_NEAREST_EXACT,
    EM_INTERP_LINEAR,
    EM_INTERP_CUBIC
} EmInterpMode;

typedef struct {
    int taps;
    int64_t in, out;
    int64_t *idx; /* [out * taps], each in [0, in) */
    void *w;      /* [out * taps] float or double (the kernel's dtype) */
} EmInterpAxis;

/* Fill a (malloc'ed idx and w) for one axis; scale is torch's optional
 * scale factor (<= 0 or NaN: none given). -1 with MemoryError set. */
int em_interp_axis(EmInterpAxis *a, EmInterpMode mode, int64_t in, int64_t out, bool align_corners, double scale,
                   EmDType dt);
/* The trivial axis of a 1-d op: in = out = 1, one tap of weight 1. */
int em_interp_axis_unit(EmInterpAxis *a, EmDType dt);
void em_interp_axis_free(EmInterpAxis *a);

/* y = nearest upsampling of x, copying elements of `itemsize` bytes (any
 * dtype); only h->idx and w->idx are read. */
void em_cpu_interp_nearest(const char *x, char *y, int itemsize, int64_t planes, const EmInterpAxis *h,
                           const EmInterpAxis *w);
/* y = the weighted (separable) interpolation of x; dt float32 or float64.
 * false when scratch memory could not be had. */
bool em_cpu_interp_forward(const char *x, char *y, EmDType dt, int64_t planes, const EmInterpAxis *h,
                           const EmInterpAxis *w);
/* gi ([planes, h->in, w->in]) = the adjoint of the forward applied to
 * g ([planes, h->out, w->out]). */
bool em_cpu_interp_backward(const char *g, char *gi, EmDType dt, int64_t planes, const EmInterpAxis *h,
                            const EmInterpAxis *w);

#endif
