/* conv.h — the CPU convolution kernels (cpu/conv.c) behind ops/conv.c:
 * im2col / col2im over contiguous images and the GEMM-based convolution
 * forward and backward. Every buffer is contiguous; dtypes are float32,
 * float64 and int64 (the front-end converts the rest). */
#ifndef EMBER_CPU_CONV_H
#define EMBER_CPU_CONV_H
#include "../ember.h"

/* The geometry of sliding kd x kh x kw windows over an image of C volumes
 * D x H x W: window (oz, oy, ox) reads slices oz*sd - pd + kz*dd, rows
 * oy*sh - ph + ki*dh and columns ox*sw - pw + kj*dw, zeros outside the
 * image. Column matrix: (C*kd*kh*kw, od*oh*ow), row ((c*kd + kz)*kh + ki)*kw
 * + kj. A 2-d geometry has D = kd = sd = dd = od = 1, pd = 0 (em_geom_2d). */
typedef struct {
    int64_t C, H, W;
    int64_t kh, kw, sh, sw, ph, pw, dh, dw;
    int64_t oh, ow;
    int64_t D, kd, sd, pd, dd, od; /* the depth axis of a 3-d convolution */
} EmConvGeom;

/* g's depth axis set to a single slice (a 2-d geometry) */
static inline void em_geom_2d(EmConvGeom *g) { g->D = g->kd = g->sd = g->dd = g->od = 1, g->pd = 0; }

/* A convolution of N images: geometry g of the input, O output channels,
 * `groups` groups (input and output channels split evenly). */
typedef struct {
    EmConvGeom g;
    int64_t N, O, groups;
} EmConvShape;

/* cols (N, C*kd*kh*kw, od*oh*ow) from x (N, C, D, H, W); threaded over planes. */
void em_im2col_batch(EmDType d, const EmConvGeom *g, int64_t N, const void *x, void *cols);
/* x (N, C, D, H, W) = the sum of the columns over the positions they came from
 * (the adjoint of im2col); x is overwritten. */
void em_col2im_batch(EmDType d, const EmConvGeom *g, int64_t N, const void *cols, void *x);

/* y (N, O, od, oh, ow) = conv(x (N, C, D, H, W), w (O, C/groups, kd, kh, kw)) + b (O;
 * may be NULL). Returns -1 when a work buffer cannot be allocated (no
 * exception set: the caller may not hold the GIL). */
int em_conv_forward(EmDType d, const EmConvShape *s, const void *x, const void *w, const void *b, void *y);
/* The gradients of em_conv_forward for gy (N, O, od, oh, ow): gx like x, gw like
 * w, gb (O); each NULL when not wanted (x may be NULL without gw). -1 as above. */
int em_conv_backward(EmDType d, const EmConvShape *s, const void *gy, const void *x, const void *w, void *gx,
                     void *gw, void *gb);
/* The channels-last forward (conv_nhwc.c): x (N, H, W, C), w (O, kh, kw, C),
 * y (N, oh, ow, O), b (O; may be NULL); 2-d, groups == 1, float32/float64
 * (em_conv_nhwc_supported). -1 as above. */
bool em_conv_nhwc_supported(EmDType d, const EmConvShape *s);
int em_conv_forward_nhwc(EmDType d, const EmConvShape *s, const void *x, const void *w, const void *b, void *y);
/* Its gradients for gy (N, oh, ow, O): gx (N, H, W, C), gw (O, kh, kw, C), gb (O),
 * each NULL when not wanted (x may be NULL without gw). -1 as above. */
int em_conv_backward_nhwc(EmDType d, const EmConvShape *s, const void *gy, const void *x, const void *w, void *gx,
                          void *gw, void *gb);
#endif
