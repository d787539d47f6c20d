/* act_math.h — per-element math of the activation kernels (cpu/activation.c),
 * kept apart so that the CUDA kernels can share it.
 *
 * Note [vector gelu]: float32 GELU is the hot activation of transformer
 * training, so its kernels must vectorize: float32 uses vec_math.h's
 * branch-free, division-free pieces (Note [vector math accuracy]).
 *   exact:  Φ(x) from h = Φ(-|x|) = e^(-x²/2)·G(|x|) (Note [gaussian tail
 *           ratio]): h below 0, 1 - h above, so neither side cancels and
 *           the negative tail keeps its relative accuracy; the backward
 *           Φ(x) + x·φ(x) reuses the same e^(-x²/2).
 *   tanh:   0.5·x·(1 + tanh(u)) = x·σ(2u), again without cancellation.
 * tests/test_nn_activation.py and tests/test_vector_math.py check them
 * against math.erf/erfc over dense grids. float64 uses libm (erf, tanh, exp)
 * as torch's double kernels do. */
#ifndef EMBER_CPU_ACT_MATH_H
#define EMBER_CPU_ACT_MATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "vec_math.h"

/* forced inline: the kernels' AVX2/AVX-512 clones (cpu/activation.c) only
 * vectorize what is inlined into them */
#if defined(EM_ACT_INLINE) /* the CUDA kernels' own (__host__ __device__) */
#elif defined(__GNUC__)
#define EM_ACT_INLINE static inline __attribute__((always_inline))
#else
#define EM_ACT_INLINE static inline
#endif

/* GELU, exact form: x·Φ(x) */
EM_ACT_INLINE float em_gelu_f(float x) {
    float a = fabsf(x);
    return x * normcdf_from_f32(x, exp_neg_half_sq_f32(a), gauss_ratio_f32(a));
}
/* the same for |x| < VM_TAIL_SPLIT only (cpu/activation.c's blocks that
 * have no larger input): the identical numbers without the far form */
EM_ACT_INLINE float em_gelu_near_f(float x) {
    float a = fabsf(x);
    return x * normcdf_from_f32(x, exp_neg_half_sq_small_f32(a), gauss_ratio_near_f32(a));
}
EM_ACT_INLINE double em_gelu_d(double x) { return x * 0.5 * (1.0 + erf(x * M_SQRT1_2)); }

/* GELU, tanh form: 0.5·x·(1 + tanh(k·(x + 0.044715·x³))), k = √(2/π).
 * float32 uses 0.5·(1 + tanh(y)) = σ(2y): no cancellation. */
#define EM_GELU_BETA 0.7978845608028654 /* √2 · (2/√π) · 0.5, as torch spells it */
#define EM_GELU_KAPPA 0.044715
EM_ACT_INLINE float em_gelu_tanh_f(float x) {
    float inner = (float)EM_GELU_BETA * fmaf((float)EM_GELU_KAPPA * x, x * x, x);
    return x * sigmoid_f32(2.0f * inner);
}
EM_ACT_INLINE double em_gelu_tanh_d(double x) {
    double inner = EM_GELU_BETA * (x + EM_GELU_KAPPA * x * x * x);
    return 0.5 * x * (1.0 + tanh(inner));
}

/* d/dx GELU = Φ(x) + x·φ(x), φ the normal density */
#define EM_INV_SQRT_2PI 0.3989422804014327
EM_ACT_INLINE float em_gelu_grad_f(float x) {
    float a = fabsf(x), gauss = exp_neg_half_sq_f32(a);
    return fmaf(x * (float)EM_INV_SQRT_2PI, gauss, normcdf_from_f32(x, gauss, gauss_ratio_f32(a)));
}
EM_ACT_INLINE float em_gelu_grad_near_f(float x) {
    float a = fabsf(x), gauss = exp_neg_half_sq_small_f32(a);
    return fmaf(x * (float)EM_INV_SQRT_2PI, gauss, normcdf_from_f32(x, gauss, gauss_ratio_near_f32(a)));
}
EM_ACT_INLINE double em_gelu_grad_d(double x) {
    return 0.5 * (1.0 + erf(x * M_SQRT1_2)) + x * EM_INV_SQRT_2PI * exp(-0.5 * x * x);
}
/* d/dx of the tanh form: 0.5(1 + t) + 0.5·x·(1 - t²)·k·(1 + 3·0.044715·x²) */
#define EM_DEFINE_GELU_TANH_GRAD(T, SUF, TANH)                                 \
    EM_ACT_INLINE T em_gelu_tanh_grad_##SUF(T x) {                             \
        T inner = (T)EM_GELU_BETA * (x + (T)EM_GELU_KAPPA * x * x * x);        \
        T t = TANH(inner);                                                     \
        T dinner = (T)EM_GELU_BETA * (1 + 3 * (T)EM_GELU_KAPPA * x * x);       \
        return (T)0.5 * (1 + t) + (T)0.5 * x * (1 - t * t) * dinner;           \
    }
/* float32: 1 + t and 1 - t² straight from E = exp(-2|u|) (1 + t = 2/(1 + E)
 * for u >= 0, 2E/(1 + E) below; 1 - t² = 4E/(1 + E)²), with no cancellation
 * and no division */
EM_ACT_INLINE float em_gelu_tanh_grad_f(float x) {
    float x2 = x * x;
    float inner = (float)EM_GELU_BETA * fmaf((float)EM_GELU_KAPPA * x, x2, x);
    float dinner = (float)EM_GELU_BETA * fmaf(3.0f * (float)EM_GELU_KAPPA, x2, 1.0f);
    float e = exp_neg_f32(-2.0f * fabsf(inner));
    float inv = recip_1p_f32(e);
    float half_one_plus_t = (inner >= 0 ? 1.0f : e) * inv;
    float half_sech2 = 2.0f * e * inv * inv;
    return fmaf(x * half_sech2, dinner, half_one_plus_t);
}
EM_DEFINE_GELU_TANH_GRAD(double, d, tanh)

/* SiLU x·σ(x) and its derivative σ(x)·(1 + x·(1 - σ(x))) */
EM_ACT_INLINE float em_silu_f(float x) { return x * sigmoid_f32(x); }
EM_ACT_INLINE double em_silu_d(double x) { return x / (1.0 + exp(-x)); }
EM_ACT_INLINE float em_silu_grad_f(float x) {
    float s = sigmoid_f32(x);
    return s * fmaf(x, 1.0f - s, 1.0f);
}
EM_ACT_INLINE double em_silu_grad_d(double x) {
    double s = 1.0 / (1.0 + exp(-x));
    return s * (1.0 + x * (1.0 - s));
}

#define em_gelu(x) _Generic((x), float: em_gelu_f, default: em_gelu_d)(x)
#define em_gelu_tanh(x) _Generic((x), float: em_gelu_tanh_f, default: em_gelu_tanh_d)(x)
#define em_gelu_grad(x) _Generic((x), float: em_gelu_grad_f, default: em_gelu_grad_d)(x)
#define em_gelu_tanh_grad(x) _Generic((x), float: em_gelu_tanh_grad_f, default: em_gelu_tanh_grad_d)(x)
#define em_silu(x) _Generic((x), float: em_silu_f, default: em_silu_d)(x)
#define em_silu_grad(x) _Generic((x), float: em_silu_grad_f, default: em_silu_grad_d)(x)

#endif
