/* vec_math.h — branch-free float32 tanh, sigmoid and normal CDF that loops
 * vectorize (cpu/unary.c's tanh and sigmoid, cpu/activation.c's GELU and
 * SiLU; softmax-style kernels may share them). Everything is static inline
 * and written with fmaf, so the AVX2/AVX-512 builds of a loop become plain
 * vector arithmetic: no libm calls, no divisions on the common paths, and
 * selects (blends) instead of branches. (A build for a CPU without FMA
 * calls libm's fmaf: the same numbers, slowly.)
 *
 * Note [vector math accuracy]: measured against float64 references over
 * dense grids by tests/test_vector_math.py (in ulps of the float32 answer):
 *   tanh_f32      <= 2 ulp  (-(e^-2|x| - 1)/(1 + e^-2|x|), no cancellation;
 *                           1.83 at most over every float, checked once)
 *   sigmoid_f32   <= 2 ulp  (1/(1+q) or q/(1+q) with q = e^-|x|; 1.98 at
 *                           most over every float with a normal result)
 *   GELU x·Φ(x)   <= 5 ulp, relative into the far negative tail, and its
 *                 derivative Φ(x) + x·φ(x) within 5 ulp of the larger term
 *                 (Φ(x) = e^(-x²/2)·G(|x|) or 1 minus that, cpu/act_math.h;
 *                 4.64 and 4.12 the largest over 4M sampled floats: G's
 *                 Horner sum near |x| = 0.1 is most of it)
 * 1/(1+q) comes from a degree-5 polynomial refined by one Newton step, so it
 * costs no division. Polynomial coefficients were fitted in float64 (NumPy,
 * Lawson-weighted least squares on Chebyshev nodes, each coefficient rounded
 * to float32 before the rest were refitted). */
#ifndef EMBER_CPU_VEC_MATH_H
#define EMBER_CPU_VEC_MATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* forced inline: the callers' vector clones only vectorize what is inlined */
#if defined(__GNUC__)
#define VM_INLINE static inline __attribute__((always_inline))
#else
#define VM_INLINE static inline
#endif

VM_INLINE uint32_t vm_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
VM_INLINE float vm_float(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* The shared reduction of e^x: x = k·ln2 + r (k by the 1.5·2^23 rounding
 * trick, r in [-ln2/2, ln2/2]), e^r - 1 = r + r²·P(r) with Cephes'
 * degree-6 polynomial. Returns e^r - 1 and sets *scale = 2^k, built from k's
 * bits (a multiply keeps NaN a NaN; k >= -126 keeps 2^k normal). *kf gets k. */
VM_INLINE float exp_reduce_f32(float x, float *scale, float *kf) {
    const float shifter = 12582912.0f;
    float t = fmaf(x, 1.44269504f, shifter);
    *kf = t - shifter;
    float r = fmaf(*kf, -0.693359375f, x);
    r = fmaf(*kf, 2.12194440e-4f, r);
    float p = 1.9875691500e-4f;
    p = fmaf(p, r, 1.3981999507e-3f);
    p = fmaf(p, r, 8.3334519073e-3f);
    p = fmaf(p, r, 4.1665795894e-2f);
    p = fmaf(p, r, 1.6666665459e-1f);
    p = fmaf(p, r, 5.0000001201e-1f);
    /* k sits in t's low mantissa bits: shifted up it is 2^k's exponent field */
    *scale = vm_float((vm_bits(t) << 23) + 0x3f800000u);
    return fmaf(p, r * r, r);
}

/* e^x for x in [-87.3, 0] within 1 ulp (NaN passes); the product may round
 * to a subnormal. */
VM_INLINE float exp_neg_core_f32(float x) {
    float scale, kf, em1 = exp_reduce_f32(x, &scale, &kf);
    return (em1 + 1.0f) * scale;
}
/* e^x for x <= 0: 0 below -87.3 (results under float's normal range, which
 * activations never need) */
VM_INLINE float exp_neg_f32(float x) {
    const float lo = -87.3f;
    float y = exp_neg_core_f32(x < lo ? lo : x);
    return x < lo ? 0.0f : y;
}

/* 1/(1 + q) for q in [0, 1] within 0.5 ulp, without a division: a degree-5
 * polynomial in q - 0.5 gives r (relative error 5e-5), and one Newton step
 * r·(1 + e), e = 1 - (1 + q)·r, refines it; e is formed without rounding
 * (1 - r is exact for r in [0.5, 1]). recip_1p_parts_f32 returns r and e, so
 * a caller can fold the step into its own product (tanh_f32). */
VM_INLINE float recip_1p_parts_f32(float q, float *e) {
    float v = q - 0.5f;
    float r = -1.044801921e-01f;
    r = fmaf(r, v, 1.567257345e-01f);
    r = fmaf(r, v, -1.959096938e-01f);
    r = fmaf(r, v, 2.938628495e-01f);
    r = fmaf(r, v, -4.444670379e-01f);
    r = fmaf(r, v, 6.667006612e-01f);
    *e = fmaf(-q, r, 1.0f - r);
    return r;
}
VM_INLINE float recip_1p_f32(float q) {
    float e, r = recip_1p_parts_f32(q, &e);
    return fmaf(r, e, r);
}

/* σ(x) = 1/(1 + e^-x): with q = e^-|x|, 1/(1+q) for x >= 0 and q/(1+q)
 * below, so both sides keep their relative accuracy */
VM_INLINE float sigmoid_f32(float x) {
    float q = exp_neg_f32(-fabsf(x));
    float r = recip_1p_f32(q);
    return x >= 0.0f ? r : q * r;
}

/* tanh for float32 within 2 ulp, one formula for every |x|: with u = -2|x|,
 * E = e^u - 1 and q = e^u = 1 + E, tanh|x| = -E/(1 + q) = -E·recip_1p(q).
 * E comes from exp's own pieces without cancellation: u = k·ln2 + r,
 * e^r - 1 = r + r²·P(r), E = 2^k·(e^r - 1) + (2^k - 1).
 * Subnormal x come out within 1 ulp (E = u, q = 1); past |x| = 9.1 the
 * result rounds to 1 (±inf give ±1). The sign is copied back, so tanh(-0) =
 * -0; NaN stays NaN. */
VM_INLINE float tanh_f32(float x) {
    float a = fabsf(x);
    float u = -2.0f * (a > 9.1f ? 9.1f : a); /* a NaN stays NaN through every step */
    float scale, kf, em1 = exp_reduce_f32(u, &scale, &kf); /* e^r - 1 and 2^k */
    /* with s = 2^k: q = s·em1 + s and tanh|x| = -E/(1 + q) = (A + B)/(1 + q)
     * where A = -s·em1, B = 1 - s for k >= -1 (|x| < 0.87) and A = -q,
     * B = 1 beyond (q <= 1/2 there); B is 0, 1/2 or 1, so B·w is exact.
     * 1/(1 + q) = w·(1 + e), the residual e taken from 1 + q's exact parts
     * (1 + s) + s·em1 rather than from the rounded q. The sum rounds once
     * for k = 0, A·w + (A + B)·w·e, and twice otherwise,
     * (A·w + B·w) + (A + B)·w·e, each time at about the result's ulp. */
    float sem1 = scale * em1;
    float q = sem1 + scale;
    float e, w = recip_1p_parts_f32(q, &e);
    e = fmaf(-sem1, w, fmaf(-(1.0f + scale), w, 1.0f));
    int near = kf > -1.5f;
    float A = near ? -sem1 : -q, B = near ? 1.0f - scale : 1.0f;
    float nwe = (A + B) * w * e;
    float y = kf > -0.5f ? fmaf(A, w, nwe) : fmaf(A, w, B * w) + nwe;
    return copysignf(y, x);
}

/* e^(-a²/2) for a >= 0 without the rounding of a² (which would cost ~a²
 * ulp): a² = p + e exactly (e by an fma), e^(-(p+e)/2) = e^(-p/2)·(1 - e/2)
 * as |e| <= 2^-24·a². Past 13 the result is 0 (a = inf included); the
 * _small form is for a < 13 only (the same numbers, no range checks). */
VM_INLINE float exp_neg_half_sq_small_f32(float a) {
    float p = a * a;
    float e = fmaf(a, a, -p);
    float E = exp_neg_core_f32(-0.5f * p);
    return fmaf(E, -0.5f * e, E);
}
VM_INLINE float exp_neg_half_sq_f32(float a) {
    float E = exp_neg_half_sq_small_f32(a < 13.0f ? a : 13.0f); /* NaN: 13 */
    return a < 13.0f ? E : 0.0f; /* NaN: 0, the caller's G(a) keeps the NaN */
}

/* Note [gaussian tail ratio]: Φ(-a) = e^(-a²/2)·G(a) with G(a) =
 * ½·erfcx(a/√2), smooth and positive, from 0.5 at a = 0 to ~1/(a√(2π)).
 * Below VM_TAIL_SPLIT G is a degree-12 polynomial in a - 2 (relative error
 * 2e-7 in float32 evaluation); from there on G = F(1/a²)/a with F of degree
 * 6 (relative error 6e-8), the one place that divides. Kernels that see a
 * block of inputs all below the split skip the far form (cpu/activation.c). */
#define VM_TAIL_SPLIT 4.0f
VM_INLINE float gauss_ratio_near_f32(float a) {
    float t = a - 2.0f;
    float g = 3.581292773e-08f;
    g = fmaf(g, t, -1.874376210e-07f);
    g = fmaf(g, t, 4.241323381e-07f);
    g = fmaf(g, t, -1.662542672e-06f);
    g = fmaf(g, t, 9.054316251e-06f);
    g = fmaf(g, t, -3.804951484e-05f);
    g = fmaf(g, t, 1.459245250e-04f);
    g = fmaf(g, t, -5.491788615e-04f);
    g = fmaf(g, t, 1.975876745e-03f);
    g = fmaf(g, t, -6.704888772e-03f);
    g = fmaf(g, t, 2.131280117e-02f);
    g = fmaf(g, t, -6.273819506e-02f);
    return fmaf(g, t, 1.681019962e-01f);
}
VM_INLINE float gauss_ratio_far_f32(float a) {
    float v = 1.0f / (a > VM_TAIL_SPLIT ? a : VM_TAIL_SPLIT); /* NaN keeps the NaN */
    float w = v * v;
    float f = 4.058973999e+02f;
    f = fmaf(f, w, -1.623260956e+02f);
    f = fmaf(f, w, 3.355587769e+01f);
    f = fmaf(f, w, -5.791347027e+00f);
    f = fmaf(f, w, 1.194471836e+00f);
    f = fmaf(f, w, -3.989298046e-01f);
    f = fmaf(f, w, 3.989422619e-01f);
    return f * v;
}
VM_INLINE float gauss_ratio_f32(float a) {
    return a < VM_TAIL_SPLIT ? gauss_ratio_near_f32(a) : gauss_ratio_far_f32(a);
}

/* Φ(x) from h = Φ(-|x|) = e^(-x²/2)·G(|x|): h for x < 0, 1 - h above (h <=
 * 0.5, so nothing cancels). `gauss` is e^(-x²/2) and `ratio` G(|x|), passed
 * in so that GELU's backward reuses the Gaussian. */
VM_INLINE float normcdf_from_f32(float x, float gauss, float ratio) {
    float h = gauss * ratio;
    return x < 0.0f ? h : 1.0f - h;
}

#endif
