/* conv.h — the CPU convolution kernels (cpu/conv.c) behind ops/conv.c:
 * im2col / col2im over contiguous images and the GEMM-based convolution
 * forward and backward. Every buffer is contiguous; dtypes are float32,
 * float64 and int64 (the front-end converts the rest). */
#ifndef EMBER_CPU_CONV_H
#define EMBER_CPU_CONV_H
#include "../ember.h"

/* The geometry of sliding kh x kw windows over an image of C planes H x W:
 * window (oy, ox) reads rows oy*sh - ph + ki*dh and columns ox*sw - pw +
 * kj*dw, zeros outside the image. Column matrix: (C*kh*kw, oh*ow), row
 * (c*kh + ki)*kw + kj. */
typedef struct {
    int64_t C, H, W;
    int64_t kh, kw, sh, sw, ph, pw, dh, dw;
    int64_t oh, ow;
} EmConvGeom;

/* A convolution of N images: geometry g of the input, O output channels,
 * `groups` groups (input and output channels split evenly). */
typedef struct {
    EmConvGeom g;
    int64_t N, O, groups;
} EmConvShape;

/* cols (N, C*kh*kw, oh*ow) from x (N, C, H, W); threaded over planes. */
void em_im2col_batch(EmDType d, const EmConvGeom *g, int64_t N, const void *x, void *cols);
/* x (N, C, H, W) = the sum of the columns over the positions they came from
 * (the adjoint of im2col); x is overwritten. */
void em_col2im_batch(EmDType d, const EmConvGeom *g, int64_t N, const void *cols, void *x);

/* y (N, O, oh, ow) = conv(x (N, C, H, W), w (O, C/groups, kh, kw)) + b (O;
 * may be NULL). Returns -1 when a work buffer cannot be allocated (no
 * exception set: the caller may not hold the GIL). */
int em_conv_forward(EmDType d, const EmConvShape *s, const void *x, const void *w, const void *b, void *y);
/* The gradients of em_conv_forward for gy (N, O, oh, ow): gx like x, gw like
 * w, gb (O); each NULL when not wanted. -1 as above. */
int em_conv_backward(EmDType d, const EmConvShape *s, const void *gy, const void *x, const void *w, void *gx,
                     void *gw, void *gb);
#endif
