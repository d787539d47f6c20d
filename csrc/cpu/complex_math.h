/* complex_math.h — the complex functions C99's <complex.h> lacks (exp2,
 * expm1, log2, log10, log1p), sigmoid and sgn, for the CPU kernels
 * (cpu/unary.c). Each comes in float and double; the em_c* macros pick one
 * from the argument's type, as <tgmath.h> does for csin, casinh, ... C only:
 * the CUDA kernels do not include it. */
#ifndef EMBER_CPU_COMPLEX_MATH_H
#define EMBER_CPU_COMPLEX_MATH_H

#include <complex.h>
#include <math.h>

typedef float _Complex em_cf;
typedef double _Complex em_cd;

#define EM_CGENERIC(name, x) _Generic((x), em_cf: name##_f, default: name##_d)(x)

/* one body per function, written once for both widths: T the complex type,
 * R its real type, S the libm suffix (f or none) */
#define EM_COMPLEX_FNS(sfx, T, R, S)                                           \
    static inline T em_cexp2_##sfx(T z) { return cexp##S(z * (R)M_LN2); }      \
    static inline T em_clog2_##sfx(T z) { return clog##S(z) / (R)M_LN2; }      \
    static inline T em_clog10_##sfx(T z) { return clog##S(z) / (R)M_LN10; }    \
    /* e^x cos y - 1 = expm1(x) cos y - 2 sin^2(y/2): no cancellation near 0 */ \
    static inline T em_cexpm1_##sfx(T z) {                                     \
        R x = creal##S(z), y = cimag##S(z), h = sin##S(y / 2);              \
        R re = expm1##S(x) * cos##S(y) - 2 * h * h;                            \
        return CMPLX_##sfx(re, exp##S(x) * sin##S(y));                          \
    }                                                                          \
    /* log|1+z| = log1p(2x + x^2 + y^2) / 2, exact for small z */              \
    static inline T em_clog1p_##sfx(T z) {                                     \
        R x = creal##S(z), y = cimag##S(z);                                 \
        if (!isfinite(x) || !isfinite(y) || fabs##S(x) > (R)0.5 || fabs##S(y) > (R)0.5) \
            return clog##S(1 + z);                                             \
        return CMPLX_##sfx(log1p##S(x * (2 + x) + y * y) / 2, atan2##S(y, 1 + x)); \
    }                                                                          \
    static inline T em_csigmoid_##sfx(T z) { return 1 / (1 + cexp##S(-z)); }   \
    /* torch's sgn: z / |z|, and 0 at 0 */                                     \
    static inline T em_csgn_##sfx(T z) {                                       \
        R a = cabs##S(z);                                                      \
        return a == 0 ? (T)0 : z / a;                                          \
    }

#define CMPLX_f(re, im) CMPLXF((re), (im))
#define CMPLX_d(re, im) CMPLX((re), (im))
EM_COMPLEX_FNS(f, em_cf, float, f)
EM_COMPLEX_FNS(d, em_cd, double, )

#define em_cexp2(x) EM_CGENERIC(em_cexp2, x)
#define em_clog2(x) EM_CGENERIC(em_clog2, x)
#define em_clog10(x) EM_CGENERIC(em_clog10, x)
#define em_cexpm1(x) EM_CGENERIC(em_cexpm1, x)
#define em_clog1p(x) EM_CGENERIC(em_clog1p, x)
#define em_csigmoid(x) EM_CGENERIC(em_csigmoid, x)
#define em_csgn(x) EM_CGENERIC(em_csgn, x)

#endif
