/* math.h — per-element math shared by the CPU kernels (and written so the
 * CUDA kernels can share it): the small functions whose semantics must match
 * torch's exactly — floor division, remainder sign rules, NaN-propagating
 * max/min, integer powers, shifts, erfinv. <tgmath.h> makes exp/log/...
 * resolve to the float or double routine from the argument's type. */
#ifndef EMBER_CPU_MATH_H
#define EMBER_CPU_MATH_H

#include <stdbool.h>
#include <stdint.h>
#ifdef __cplusplus
#include <cmath> /* the CUDA kernels (csrc/cuda/elementwise.cu): C++ overloads stand in for tgmath */
#else
#include <tgmath.h>
#endif

/* The CUDA kernels define EM_MATH_FN as a __host__ __device__ inline. */
#ifndef EM_MATH_FN
#define EM_MATH_FN static inline
#endif

/* ---- integers (b != 0 is checked by the front-end before the kernel runs) */

EM_MATH_FN int64_t em_idiv_trunc(int64_t a, int64_t b) {
    return b == -1 ? (int64_t)(0 - (uint64_t)a) : a / b; /* INT64_MIN / -1 wraps */
}
EM_MATH_FN int64_t em_idiv_floor(int64_t a, int64_t b) {
    if (b == -1) return (int64_t)(0 - (uint64_t)a);
    int64_t q = a / b, r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? q - 1 : q;
}
EM_MATH_FN int64_t em_iremainder(int64_t a, int64_t b) {
    if (b == -1) return 0;
    int64_t r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
EM_MATH_FN int64_t em_ifmod(int64_t a, int64_t b) { return b == -1 ? 0 : a % b; }

/* Integer power by squaring; negative exponents follow torch: 1 and -1 keep
 * their magnitude, everything else truncates to 0. Wraps on overflow. */
EM_MATH_FN int64_t em_ipow(int64_t base, int64_t e) {
    if (e < 0) {
        if (base == 1) return 1;
        if (base == -1) return (e & 1) ? -1 : 1;
        return 0;
    }
    uint64_t r = 1, b = (uint64_t)base;
    while (e) {
        if (e & 1) r *= b;
        b *= b;
        e >>= 1;
    }
    return (int64_t)r;
}

/* Shifts by >= the bit width (or negative) give 0, or the sign for >> */
#define EM_SHL(T, a, b)                                                        \
    ((int64_t)(b) < 0 || (int64_t)(b) >= (int64_t)(8 * sizeof(T))              \
         ? (T)0                                                                \
         : (T)((uint64_t)(a) << (b)))
#define EM_SHR(T, a, b)                                                        \
    ((int64_t)(b) < 0 || (int64_t)(b) >= (int64_t)(8 * sizeof(T))              \
         ? (T)((a) < 0 ? -1 : 0)                                               \
         : (T)((a) >> (b)))

/* ---- floats */

/* Python-style floor division, as torch's div(rounding_mode='floor'). */
#define EM_DEFINE_FLOORDIV(T, SUF)                                             \
    EM_MATH_FN T em_floordiv_##SUF(T a, T b) {                              \
        if (b == 0) return a / b;                                              \
        T mod = fmod(a, b);                                                    \
        T div = (a - mod) / b;                                                 \
        if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1;                      \
        T fl;                                                                  \
        if (div != 0) {                                                        \
            fl = floor(div);                                                   \
            if (div - fl > (T)0.5) fl += 1;                                    \
        } else {                                                               \
            fl = copysign((T)0, a / b);                                        \
        }                                                                      \
        return fl;                                                             \
    }                                                                          \
    EM_MATH_FN T em_remainder_##SUF(T a, T b) {                             \
        T mod = fmod(a, b);                                                    \
        if (mod != 0 && ((b < 0) != (mod < 0))) mod += b;                      \
        return mod;                                                            \
    }
EM_DEFINE_FLOORDIV(float, f)
EM_DEFINE_FLOORDIV(double, d)
#define em_floordiv(a, b) _Generic((a), float: em_floordiv_f, default: em_floordiv_d)(a, b)
#define em_remainder(a, b) _Generic((a), float: em_remainder_f, default: em_remainder_d)(a, b)

/* NaN-propagating max / min (torch.maximum, clamp) */
#define em_max_nan(a, b) ((a) != (a) ? (a) : (b) != (b) ? (b) : (a) > (b) ? (a) : (b))
#define em_min_nan(a, b) ((a) != (a) ? (a) : (b) != (b) ? (b) : (a) < (b) ? (a) : (b))
#define em_max_int(a, b) ((a) > (b) ? (a) : (b))
#define em_min_int(a, b) ((a) < (b) ? (a) : (b))

/* sign: -1, 0, 1 (NaN gives 0, as torch's) */
#define em_sign_float(x) (((x) > 0) - ((x) < 0))

EM_MATH_FN float em_sigmoid_f(float x) { return 1.0f / (1.0f + expf(-x)); }
EM_MATH_FN double em_sigmoid_d(double x) { return 1.0 / (1.0 + exp(-x)); }
#define em_sigmoid(x) _Generic((x), float: em_sigmoid_f, default: em_sigmoid_d)(x)

/* log(exp(a) + exp(b)) without overflow */
#define EM_DEFINE_LOGADDEXP(T, SUF)                                            \
    EM_MATH_FN T em_logaddexp_##SUF(T a, T b) {                             \
        if (isinf(a) && a == b) return a;                                      \
        T m = a > b ? a : b;                                                   \
        if (m != m) return m;                                                  \
        return m + log1p(exp(-fabs(a - b)));                                   \
    }
EM_DEFINE_LOGADDEXP(float, f)
EM_DEFINE_LOGADDEXP(double, d)
#define em_logaddexp(a, b) _Generic((a), float: em_logaddexp_f, default: em_logaddexp_d)(a, b)

/* erfinv: Winitzki's closed-form estimate, refined by Newton steps on erf
 * (quadratic convergence: three steps reach double precision). */
EM_MATH_FN double em_erfinv_d(double y) {
    if (!(y > -1.0 && y < 1.0)) {
        if (y == 1.0) return INFINITY;
        if (y == -1.0) return -INFINITY;
        return NAN;
    }
    if (y == 0.0) return y;
    const double a = 0.147, two_over_pi_a = 2.0 / (3.14159265358979323846 * 0.147);
    double ln = log1p(-y * y);
    double t = two_over_pi_a + 0.5 * ln;
    double x = sqrt(sqrt(t * t - ln / a) - t);
    if (y < 0) x = -x;
    const double two_over_sqrt_pi = 1.12837916709551257390;
    for (int i = 0; i < 3; i++) {
        double err = erf(x) - y;
        double deriv = two_over_sqrt_pi * exp(-x * x);
        if (deriv == 0) break;
        /* Halley's correction keeps the step accurate far in the tails */
        x -= err / (deriv + x * err);
    }
    return x;
}
EM_MATH_FN float em_erfinv_f(float y) { return (float)em_erfinv_d((double)y); }
#define em_erfinv(x) _Generic((x), float: em_erfinv_f, default: em_erfinv_d)(x)

/* ---- special functions (lgamma comes from libm). Each is computed in
 * double; the float32 kernels round the result. */

/* psi(x): upward recurrence to x >= 10, then the asymptotic series
 * log x - 1/(2x) - sum B_2k / (2k x^2k); the reflection
 * psi(1 - x) - pi / tan(pi x) below 0 (with x's fractional part, so that
 * tan keeps its accuracy far from 0). psi(+-0) = -+inf, negative integers
 * and -inf give NaN, as torch. */
EM_MATH_FN double em_digamma_d(double x) {
    const double pi = 3.14159265358979323846;
    if (x == 0) return copysign(INFINITY, -x);
    double acc = 0;
    if (x < 0) {
        if (x == floor(x)) return NAN;
        acc = -pi / tan(pi * (x - trunc(x)));
        x = 1 - x;
    }
    while (x < 10) {
        acc -= 1 / x;
        x += 1;
    }
    if (isinf(x)) return x;
    /* B_2k / (2k) for k = 1..7 */
    const double c[7] = {1.0 / 12, -1.0 / 120, 1.0 / 252, -1.0 / 240, 1.0 / 132, -691.0 / 32760, 1.0 / 12};
    double inv2 = 1 / (x * x), series = 0;
    for (int k = 6; k >= 0; k--) series = (series + c[k]) * inv2;
    return acc + log(x) - 0.5 / x - series;
}
EM_MATH_FN float em_digamma_f(float x) { return (float)em_digamma_d((double)x); }
#define em_digamma(x) _Generic((x), float: em_digamma_f, default: em_digamma_d)(x)

/* Hurwitz zeta(s, q) = sum_k (q + k)^-s for s > 1: the first terms summed
 * until q + k >= 10, then Euler-Maclaurin's tail with ten Bernoulli terms.
 * Non-positive integer q (and -inf) are poles: +inf; other negative q need
 * an integer s (q^-s is real only then). */
EM_MATH_FN double em_zeta_d(double s, double q) {
    if (q <= 0) {
        if (q == floor(q)) return INFINITY;
        if (s != floor(s)) return NAN;
    }
    /* far below 0 the shift to q >= 10 would take -q steps: ember stops at 2^24
     * of them and answers NaN rather than running for hours */
    if (q < -16777216.0) return NAN;
    double sum = 0;
    while (q < 10) {
        sum += pow(q, -s);
        q += 1;
    }
    /* B_2j / (2j)! for j = 1..10 */
    const double b[10] = {1.0 / 12, -1.0 / 720, 1.0 / 30240, -1.0 / 1209600, 1.0 / 47900160,
                          -691.0 / 1307674368000.0, 1.0 / 74724249600.0, -3617.0 / 10670622842880000.0,
                          43867.0 / 5109094217170944000.0, -174611.0 / 802857662698291200000.0};
    double qs = pow(q, -s);
    sum += q * qs / (s - 1) + 0.5 * qs;
    double rising = s, qpow = qs / q; /* s (s+1) ... (s+2j-2), q^(-s-2j+1) */
    for (int j = 0; j < 10; j++) {
        double term = b[j] * rising * qpow;
        sum += term;
        if (fabs(term) <= 1e-17 * fabs(sum)) break;
        rising *= (s + 2 * j + 1) * (s + 2 * j + 2);
        qpow /= q * q;
    }
    return sum;
}

/* polygamma(n, x) = (-1)^(n+1) n! zeta(n + 1, x) for n >= 1 (n >= 0 is
 * checked by the front-end); n == 0 is digamma. At +inf torch gives 0 for
 * n == 1 and NaN beyond. */
EM_MATH_FN double em_polygamma_d(double n, double x) {
    if (n == 0) return em_digamma_d(x);
    if (x != x) return x;
    if (x == INFINITY) return n == 1 ? 0.0 : NAN;
    double fact = 1; /* n! overflows a double from 171 on */
    if (n > 170) fact = INFINITY;
    else
        for (int k = 2; k <= (int)n; k++) fact *= k;
    double sign = ((int64_t)n % 2 == 1) ? 1.0 : -1.0;
    return sign * fact * em_zeta_d(n + 1, x);
}
EM_MATH_FN float em_polygamma_f(float n, float x) { return (float)em_polygamma_d((double)n, (double)x); }
#define em_polygamma(n, x) _Generic((x), float: em_polygamma_f, default: em_polygamma_d)(n, x)

/* The multivariate log-gamma sum_j<p lgamma(x - j/2) + p (p - 1) / 4 log(pi) */
EM_MATH_FN double em_mvlgamma_d(double x, double p) {
    double r = p * (p - 1) / 4 * 1.14472988584940017414; /* log(pi) */
    for (int64_t j = 0; j < (int64_t)p; j++) r += lgamma(x - (double)j / 2);
    return r;
}
EM_MATH_FN float em_mvlgamma_f(float x, float p) { return (float)em_mvlgamma_d((double)x, (double)p); }
#define em_mvlgamma(x, p) _Generic((x), float: em_mvlgamma_f, default: em_mvlgamma_d)(x, p)

/* Modified Bessel functions of the first kind I0 and I1: the power series
 * (all terms positive: no cancellation) up to |x| = 15, the asymptotic
 * series e^x / sqrt(2 pi x) sum_k (-1)^k prod_j (4 nu^2 - (2j-1)^2) / (k! (8x)^k)
 * beyond. Infinite arguments give NaN, as torch. */
EM_MATH_FN double em_bessel_i_d(int nu, double x) {
    double ax = fabs(x), r;
    if (ax <= 15) {
        double q = ax * ax / 4, term = nu ? ax / 2 : 1, sum = term;
        for (int k = 1; k < 100; k++) {
            term *= q / ((double)k * (k + nu));
            sum += term;
            if (term <= 1e-17 * sum) break;
        }
        r = sum;
    } else {
        double sum = 1, term = 1;
        for (int k = 1; k <= 25; k++) {
            term *= -(4.0 * nu * nu - (2.0 * k - 1) * (2.0 * k - 1)) / (k * 8.0 * ax);
            sum += term;
        }
        r = exp(ax) / sqrt(2 * 3.14159265358979323846 * ax) * sum;
    }
    return nu && x < 0 ? -r : r;
}
EM_MATH_FN double em_i0_d(double x) { return em_bessel_i_d(0, x); }
EM_MATH_FN float em_i0_f(float x) { return (float)em_bessel_i_d(0, (double)x); }
EM_MATH_FN double em_i1_d(double x) { return em_bessel_i_d(1, x); }
EM_MATH_FN float em_i1_f(float x) { return (float)em_bessel_i_d(1, (double)x); }
#define em_i0(x) _Generic((x), float: em_i0_f, default: em_i0_d)(x)
#define em_i1(x) _Generic((x), float: em_i1_f, default: em_i1_d)(x)

/* log2(2^a + 2^b) without overflow */
#define EM_DEFINE_LOGADDEXP2(T, SUF)                                           \
    EM_MATH_FN T em_logaddexp2_##SUF(T a, T b) {                            \
        if (isinf(a) && a == b) return a;                                      \
        T m = a > b ? a : b;                                                   \
        if (m != m) return m;                                                  \
        return m + log1p(exp2(-fabs(a - b))) / (T)0.69314718055994530942;      \
    }
EM_DEFINE_LOGADDEXP2(float, f)
EM_DEFINE_LOGADDEXP2(double, d)
#define em_logaddexp2(a, b) _Generic((a), float: em_logaddexp2_f, default: em_logaddexp2_d)(a, b)

/* x log(y), 0 where x == 0 unless y is NaN (torch.xlogy) */
#define em_xlogy(a, b) ((a) == 0 && (b) == (b) ? (a) * 0 : (a) * log(b))

/* gcd by Euclid on C's wrapping abs and truncating remainder, as torch's
 * (gcd(0, 0) == 0; the minimum integer stays negative). bits: the signed
 * operand type's width, 0 for uint8 (no abs). % -1 is skipped (it traps on
 * the minimum integer and is 0 anyway). */
EM_MATH_FN int64_t em_wrap(uint64_t v, int bits) { /* v in a signed `bits`-wide integer */
    if (bits == 0 || bits == 64) return (int64_t)v;
    const uint64_t sign = 1ull << (bits - 1);
    return (int64_t)(((v & ((sign << 1) - 1)) ^ sign) - sign);
}
EM_MATH_FN int64_t em_wrap_abs(int64_t v, int bits) {
    return bits == 0 ? v : em_wrap(v < 0 ? 0 - (uint64_t)v : (uint64_t)v, bits);
}
EM_MATH_FN int64_t em_gcd(int64_t a, int64_t b, int bits) {
    int64_t x = em_wrap_abs(a, bits), y = em_wrap_abs(b, bits);
    while (x != 0) {
        int64_t r = x == -1 ? 0 : y % x;
        y = x;
        x = r;
    }
    return y;
}
/* lcm = |a / gcd * b|: types narrower than int compute in int (exact here),
 * int32 and int64 wrap in their own width, as torch's */
EM_MATH_FN int64_t em_lcm(int64_t a, int64_t b, int bits) {
    int64_t g = em_gcd(a, b, bits);
    if (g == 0) return 0;
    int64_t q = g == -1 ? (int64_t)(0 - (uint64_t)a) : a / g;
    if (bits < 32) {
        int64_t p = q * b;
        return p < 0 ? -p : p;
    }
    return em_wrap_abs(em_wrap((uint64_t)q * (uint64_t)b, bits), bits);
}

/* frexp: x = mantissa * 2^exponent with |mantissa| in [0.5, 1); inf and NaN
 * keep their value with exponent 0, as torch */
EM_MATH_FN double em_frexp_mantissa_d(double x) { int e; return frexp(x, &e); }
EM_MATH_FN float em_frexp_mantissa_f(float x) { int e; return frexpf(x, &e); }
EM_MATH_FN int em_frexp_exponent(double x) {
    int e = 0;
    if (isfinite(x)) frexp(x, &e);
    return e;
}
#define em_frexp_mantissa(x) _Generic((x), float: em_frexp_mantissa_f, default: em_frexp_mantissa_d)(x)

/* torch.lerp: two formulas so that weight 0 and 1 are exact */
#define em_lerp(a, b, w) ((fabs(w) < 0.5) ? (a) + (w) * ((b) - (a)) : (b) - ((b) - (a)) * (1 - (w)))

#endif
