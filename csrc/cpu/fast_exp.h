/* fast_exp.h — the float32 exp the fused softmax-family kernels share
 * (cpu/softmax.c, cpu/cross_entropy.c): a branch-free scalar version that
 * loops vectorize, and on x86-64 an eight-lane AVX2 one with horizontal
 * sum/max helpers, chosen at run time (use_avx2). Everything is static
 * inline: each kernel file gets its own copy. */
#ifndef EMBER_CPU_FAST_EXP_H
#define EMBER_CPU_FAST_EXP_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && !defined(EM_NO_CLONES) && \
    ((defined(__clang__) && __clang_major__ >= 14) || (!defined(__clang__) && __GNUC__ >= 8))
#define SM_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define SM_CLONES
#endif

/* exp for float32, within 1 ulp, written without branches so that loops
 * over it vectorize: x = k ln2 + r with |r| <= ln2/2 (k by the 1.5*2^23
 * rounding trick), e^r by a degree-6 polynomial (Cephes' coefficients), 2^k
 * through the exponent bits. Subnormal results come out (as torch's);
 * below -103.97 the result is 0, above 88.72 inf; NaN passes through. */
static inline float exp_f32(float x) {
    const float lo = -103.972077f, hi = 88.72283f; /* e^lo is half the smallest subnormal */
    float xc = x < lo ? lo : (x > hi ? hi : x);
    float t = xc * 1.44269504f + 12582912.0f; /* round(x / ln2) in the low mantissa bits */
    int32_t tb;
    memcpy(&tb, &t, 4);
    int32_t k = tb - 0x4b400000;
    float kf = t - 12582912.0f;
    float r = xc - kf * 0.693359375f;
    r = r + kf * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    /* 2^k as two normal factors: k = 128 (x in (88.38, 88.72]) stays finite
     * and k < -126 gives the subnormal results */
    int32_t k1 = k > 0 ? 1 : (k < -125 ? -25 : 0), sb = (k - k1 + 127) << 23, sb1 = (k1 + 127) << 23;
    float s, s1;
    memcpy(&s, &sb, 4);
    memcpy(&s1, &sb1, 4);
    float y = p * s * s1;
    y = x < lo ? 0.0f : y;
    y = x > hi ? INFINITY : y;
    return x != x ? x : y;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define SM_HAVE_AVX2 1
#define SM_AVX2 __attribute__((target("avx2,fma")))

/* Only ever called on x <= 0 (x - max, log-probabilities), so there is no
 * overflow branch; operands are ordered so that a NaN x passes through the
 * clamp (max/min return their second operand on NaN) and stays NaN. */
SM_AVX2 static inline __m256 exp8(__m256 x) {
    const __m256 lo = _mm256_set1_ps(-87.33654f);
    __m256 xc = _mm256_max_ps(lo, x);
    __m256 t = _mm256_fmadd_ps(xc, _mm256_set1_ps(1.44269504f), _mm256_set1_ps(12582912.0f));
    __m256i k = _mm256_sub_epi32(_mm256_castps_si256(t), _mm256_set1_epi32(0x4b400000));
    __m256 kf = _mm256_sub_ps(t, _mm256_set1_ps(12582912.0f));
    __m256 r = _mm256_fnmadd_ps(kf, _mm256_set1_ps(0.693359375f), xc);
    r = _mm256_fmadd_ps(kf, _mm256_set1_ps(2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256 sc = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k, _mm256_set1_epi32(127)), 23));
    /* below the normal range (and -inf): 0 */
    return _mm256_andnot_ps(_mm256_cmp_ps(x, lo, _CMP_LT_OQ), _mm256_mul_ps(p, sc));
}

SM_AVX2 static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

SM_AVX2 static inline float hmax8(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline bool use_avx2(void) {
    static int has = -1;
    if (has < 0) has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    return has;
}
#else
#define SM_HAVE_AVX2 0
static inline bool use_avx2(void) { return false; }
#endif

#endif
