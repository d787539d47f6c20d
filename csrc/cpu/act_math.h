/* act_math.h — per-element math of the activation kernels (cpu/activation.c),
 * kept apart so that the CUDA kernels can share it.
 *
 * Note [vector gelu]: float32 GELU is the hot activation of transformer
 * training, so its kernel must vectorize. libm's erff and expf are calls the
 * compiler cannot vectorize, so float32 uses branch-free versions written
 * here: an exp by Cody-Waite range reduction and a degree-7 Taylor
 * polynomial with the exponent put in by integer arithmetic, and Φ(x) (the
 * normal CDF, 0.5·(1 + erf(x/√2))) from two polynomials fitted (weighted
 * least squares, NumPy, over Chebyshev nodes) to
 *   erf(z)/z                 as a polynomial in s = z², z in [0, 1]
 *                            (relative error 4.5e-9),
 *   z·exp(z²)·erfc(z)        as a polynomial in v = (1/z - 0.55)/0.45,
 *                            z in [1, 9.5] (relative error 4.2e-8).
 * Both branches are computed and one is selected, so a loop of them is plain
 * arithmetic. The tail uses erfc directly (Φ(x) = erfc(|x|/√2)/2 for x < 0),
 * so GELU keeps its relative accuracy far into the negative side.
 * tests/test_nn_activation.py checks it against math.erf over a dense grid.
 * float64 uses libm (erf, tanh, exp) as torch's double kernels do. */
#ifndef EMBER_CPU_ACT_MATH_H
#define EMBER_CPU_ACT_MATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* forced inline: the kernels' AVX2/AVX-512 clones (cpu/activation.c) only
 * vectorize what is inlined into them */
#if defined(EM_ACT_INLINE) /* the CUDA kernels' own (__host__ __device__) */
#elif defined(__GNUC__)
#define EM_ACT_INLINE static inline __attribute__((always_inline))
#else
#define EM_ACT_INLINE static inline
#endif

EM_ACT_INLINE float em_bits_to_f32(int32_t i) {
    float f;
    memcpy(&f, &i, 4);
    return f;
}
EM_ACT_INLINE int32_t em_f32_to_bits(float f) {
    int32_t i;
    memcpy(&i, &f, 4);
    return i;
}

/* exp(x) for float32, branch-free: inf above 88.72, 0 below -87.33 (the
 * subnormal range is flushed: activations never need it), NaN stays NaN. */
EM_ACT_INLINE float em_vexpf(float x) {
    const float hi = 88.7228394f, lo = -87.3365479f;
    float xc = x > hi ? hi : x;
    xc = xc < lo ? lo : xc;
    /* k = round(x / ln2) via the 1.5·2^23 trick (the sum's low bits hold k) */
    const float shifter = 12582912.0f;
    float t = xc * 1.44269502f + shifter;
    int32_t k = em_f32_to_bits(t) - em_f32_to_bits(shifter);
    float kf = t - shifter;
    float r = xc - kf * 0.693145752f; /* ln2 split in two: hi part exact in kf·hi */
    r = r - kf * 1.42860677e-06f;
    float p = 1.98412701e-04f; /* 1/5040 */
    p = p * r + 1.38888892e-03f;
    p = p * r + 8.33333377e-03f;
    p = p * r + 4.16666679e-02f;
    p = p * r + 1.66666672e-01f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    /* 2^k as two factors, so that k = 128 (x near 88.72) stays finite */
    int32_t k1 = k > 0 ? 1 : 0;
    float res = p * em_bits_to_f32((k - k1 + 127) << 23) * em_bits_to_f32((k1 + 127) << 23);
    res = x > hi ? INFINITY : res;
    res = x < lo ? 0.0f : res;
    return x != x ? x : res;
}

/* exp(-x²/2) without the rounding of x² (which would cost ~x² ulp far in
 * the tail): x = h + l with h holding x's top 12 bits, so h² is exact and
 * exp(-(h² + l(2h + l))/2) = exp(-h²/2)·exp(-l(2h + l)/2); the second
 * factor's argument is below 2^-11·x², small enough for a short series
 * where it matters (past |x| ~ 13 the result is 0 anyway). */
EM_ACT_INLINE float em_vexp_neg_half_sq(float x) {
    float ax = fabsf(x);
    float h = em_bits_to_f32(em_f32_to_bits(ax) & (int32_t)0xfffff000);
    float l = ax - h;
    float r = -0.5f * (l * (h + h + l));
    r = r == r ? r : 0.0f; /* |x| = inf: exp(-inf) is 0 without help */
    float corr = 1.0f + r * (1.0f + r * (0.5f + r * (0.166666672f + r * 0.0416666679f)));
    return em_vexpf(-0.5f * (h * h)) * corr;
}

/* Φ(x) = P(X <= x) for X ~ N(0, 1), float32, see Note [vector gelu]. */
EM_ACT_INLINE float em_vnormcdf(float x) {
    const float rsqrt2 = 0.707106781f;
    float z = fabsf(x) * rsqrt2;
    /* |z| < 1: 0.5 + 0.5·erf(x/√2), erf(z) = z·P(z²) */
    float s = z * z;
    float p = 7.62833018e-05f;
    p = p * s - 0.000793932754f;
    p = p * s + 0.00517983989f;
    p = p * s - 0.026849001f;
    p = p * s + 0.112834559f;
    p = p * s - 0.376126117f;
    p = p * s + 1.12837916f;
    float near = 0.5f + 0.5f * (x * rsqrt2) * p;
    /* |z| >= 1: erfc(z) = exp(-z²)·u·Q(v), u = 1/z */
    float zc = z < 1.0f ? 1.0f : z; /* keeps the unused branch finite */
    float u = 1.0f / zc;
    float v = (u - 0.55f) * 2.22222222f;
    float q = 1.28705463e-05f;
    q = q * v - 1.45315203e-05f;
    q = q * v - 5.88171547e-05f;
    q = q * v + 0.000173546002f;
    q = q * v - 0.000238499557f;
    q = q * v + 8.33813399e-05f;
    q = q * v + 0.000924954988f;
    q = q * v - 0.00397511598f;
    q = q * v + 0.00896205787f;
    q = q * v - 0.00412392831f;
    q = q * v - 0.0765157681f;
    q = q * v + 0.502353426f;
    float half_erfc = 0.5f * em_vexp_neg_half_sq(x) * u * q;
    float far = x < 0 ? half_erfc : 1.0f - half_erfc;
    return z < 1.0f ? near : far;
}

/* GELU, exact form: x·Φ(x) */
EM_ACT_INLINE float em_gelu_f(float x) { return x * em_vnormcdf(x); }
EM_ACT_INLINE double em_gelu_d(double x) { return x * 0.5 * (1.0 + erf(x * M_SQRT1_2)); }

/* GELU, tanh form: 0.5·x·(1 + tanh(k·(x + 0.044715·x³))), k = √(2/π).
 * float32 uses 0.5·(1 + tanh(y)) = 1 / (1 + exp(-2y)): no cancellation. */
#define EM_GELU_BETA 0.7978845608028654 /* √2 · (2/√π) · 0.5, as torch spells it */
#define EM_GELU_KAPPA 0.044715
EM_ACT_INLINE float em_gelu_tanh_f(float x) {
    float inner = (float)EM_GELU_BETA * (x + (float)EM_GELU_KAPPA * x * x * x);
    return x / (1.0f + em_vexpf(-2.0f * inner));
}
EM_ACT_INLINE double em_gelu_tanh_d(double x) {
    double inner = EM_GELU_BETA * (x + EM_GELU_KAPPA * x * x * x);
    return 0.5 * x * (1.0 + tanh(inner));
}

/* d/dx GELU = Φ(x) + x·φ(x), φ the normal density */
#define EM_INV_SQRT_2PI 0.3989422804014327
EM_ACT_INLINE float em_gelu_grad_f(float x) {
    return em_vnormcdf(x) + x * (float)EM_INV_SQRT_2PI * em_vexpf(-0.5f * x * x);
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
 * for u >= 0, 2E/(1 + E) below; 1 - t² = 4E/(1 + E)²), with no cancellation */
EM_ACT_INLINE float em_gelu_tanh_grad_f(float x) {
    float x2 = x * x;
    float inner = (float)EM_GELU_BETA * (x + (float)EM_GELU_KAPPA * x2 * x);
    float dinner = (float)EM_GELU_BETA * (1.0f + 3.0f * (float)EM_GELU_KAPPA * x2);
    float e = em_vexpf(-2.0f * fabsf(inner));
    float inv = 1.0f / (1.0f + e);
    float one_plus_t = (inner >= 0 ? 2.0f : 2.0f * e) * inv;
    float sech2 = 4.0f * e * inv * inv;
    return 0.5f * one_plus_t + 0.5f * x * sech2 * dinner;
}
EM_DEFINE_GELU_TANH_GRAD(double, d, tanh)

/* SiLU x·σ(x) and its derivative σ(x)·(1 + x·(1 - σ(x))) */
EM_ACT_INLINE float em_silu_f(float x) { return x / (1.0f + em_vexpf(-x)); }
EM_ACT_INLINE double em_silu_d(double x) { return x / (1.0 + exp(-x)); }
EM_ACT_INLINE float em_silu_grad_f(float x) {
    float s = 1.0f / (1.0f + em_vexpf(-x));
    return s * (1.0f + x * (1.0f - s));
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
