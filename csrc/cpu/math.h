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

/* torch.lerp: two formulas so that weight 0 and 1 are exact */
#define em_lerp(a, b, w) ((fabs(w) < 0.5) ? (a) + (w) * ((b) - (a)) : (b) - ((b) - (a)) * (1 - (w)))

#endif
