/* unary.c — kernels of the unary elementwise ops. Ops that turn integers
 * into floats (exp, sqrt, ...) only have float kernels: the front-end
 * promotes their inputs. Rounding ops are the identity on integers. */
/* selects on float compares (exp_f32's range checks) may be if-converted,
 * so its loop vectorizes: no code here reads floating-point exception flags */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include "loops.h"
#include "fast_exp.h"
#include "vec_math.h"
#include "complex_math.h"

EM_KERNELS(UNARY, neg, EM_TYPES_NUMC, -x)
/* conj_physical: the identity on real dtypes (torch returns them as they are) */
EM_TYPES_ALL(EM_INST_UNARY, conj, x)
EM_TYPES_COMPLEX(EM_INST_UNARY, conj, conj(x))
EM_TABLE(conj, EM_TYPES_ALLC(EM_ENTRY, conj))
EM_KERNELS_SPLIT(UNARY, abs, EM_TYPES_INT, x < 0 ? -x : x, fabs(x))
EM_TYPES_INT(EM_INST_UNARY, sign, (x > 0) - (x < 0))
EM_INST_UNARY(sign, x, BOOL, bool)
EM_TYPES_FLOAT(EM_INST_UNARY, sign, em_sign_float(x))
EM_TABLE(sign, EM_TYPES_INTB(EM_ENTRY, sign) EM_TYPES_FLOAT(EM_ENTRY, sign))
/* sgn: sign on real dtypes, z / |z| on complex ones (sign refuses complex) */
EM_TYPES_INT(EM_INST_UNARY, sgn, (x > 0) - (x < 0))
EM_INST_UNARY(sgn, x, BOOL, bool)
EM_TYPES_FLOAT(EM_INST_UNARY, sgn, em_sign_float(x))
EM_TYPES_COMPLEX(EM_INST_UNARY, sgn, em_csgn(x))
EM_TABLE(sgn, EM_TYPES_INTB(EM_ENTRY, sgn) EM_TYPES_FLOATC(EM_ENTRY, sgn))
EM_KERNELS(UNARY, square, EM_TYPES_NUMC, x * x)
EM_KERNELS_SPLIT(UNARY, relu, EM_TYPES_INTU, x > 0 ? x : 0, x > 0 ? x : (x != x ? x : 0))

/* rounding: identity on integers */
#define ROUNDING(name, fn) EM_KERNELS_SPLIT(UNARY, name, EM_TYPES_INTU, x, fn(x))
ROUNDING(floor, floor)
ROUNDING(ceil, ceil)
ROUNDING(trunc, trunc)
ROUNDING(round, nearbyint) /* half to even, like torch */
EM_KERNELS(UNARY, frac, EM_TYPES_FLOAT, x - trunc(x))

/* float-valued math */
/* float32 exp, tanh and sigmoid: branch-free math (fast_exp.h's exp_f32,
 * about 1 ulp with subnormal results; vec_math.h's tanh_f32 and sigmoid_f32,
 * Note [vector math accuracy]) so that the contiguous loop vectorizes; it is
 * built for AVX2 and for AVX-512 (full-width vectors) and picked at run
 * time. libm's expf/tanhf are a call per element. */
#if defined(__x86_64__) && !defined(EM_NO_CLONES) && !defined(__clang__) && __GNUC__ >= 12
#define F32_AVX512_BUILD(name, FN)                                             \
    __attribute__((target("arch=x86-64-v4,prefer-vector-width=512")))         \
    static void name##_f32_contiguous_avx512(float *o, const float *in, int64_t n) { \
        for (int64_t i = 0; i < n; i++) o[i] = FN(in[i]);                      \
    }
#define F32_AVX512_CALL(name)                                                  \
    if (__builtin_cpu_supports("avx512f")) {                                   \
        name##_f32_contiguous_avx512((float *)d[0], (const float *)d[1], n);   \
        return;                                                                \
    }
#else
#define F32_AVX512_BUILD(name, FN)
#define F32_AVX512_CALL(name)
#endif
/* x86-64-v3 (AVX2 + FMA): vec_math.h is written with fmaf, which must be an
 * instruction, not a libm call, for the loop to vectorize */
#if defined(__x86_64__) && !defined(EM_NO_CLONES) && !defined(__clang__) && __GNUC__ >= 8
#define F32_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define F32_CLONES
#endif
#define F32_VECTOR_KERNEL(name, FN)                                            \
    F32_AVX512_BUILD(name, FN)                                                 \
    F32_CLONES static void EM_KNAME(name, FLOAT32)(char **d, const int64_t *s, int64_t n) { \
        if (s[0] == 4 && s[1] == 4) {                                          \
            F32_AVX512_CALL(name)                                              \
            float *o = (float *)d[0];                                          \
            const float *in = (const float *)d[1];                             \
            for (int64_t i = 0; i < n; i++) o[i] = FN(in[i]);                  \
            return;                                                            \
        }                                                                      \
        for (int64_t i = 0; i < n; i++)                                        \
            *(float *)(d[0] + i * s[0]) = FN(*(const float *)(d[1] + i * s[1])); \
    }
F32_VECTOR_KERNEL(exp, exp_f32)
F32_VECTOR_KERNEL(tanh, tanh_f32)
F32_VECTOR_KERNEL(sigmoid, sigmoid_f32)
EM_INST_UNARY(exp, exp(x), FLOAT64, double)
EM_TYPES_COMPLEX(EM_INST_UNARY, exp, exp(x))
EM_TABLE(exp, EM_TYPES_FLOATC(EM_ENTRY, exp))
EM_TYPES_FLOAT(EM_INST_UNARY, exp2, exp2(x))
EM_TYPES_COMPLEX(EM_INST_UNARY, exp2, em_cexp2(x))
EM_TABLE(exp2, EM_TYPES_FLOATC(EM_ENTRY, exp2))
EM_TYPES_FLOAT(EM_INST_UNARY, expm1, expm1(x))
EM_TYPES_COMPLEX(EM_INST_UNARY, expm1, em_cexpm1(x))
EM_TABLE(expm1, EM_TYPES_FLOATC(EM_ENTRY, expm1))
EM_KERNELS(UNARY, log, EM_TYPES_FLOATC, log(x)) /* tgmath.h: clog */
EM_TYPES_FLOAT(EM_INST_UNARY, log2, log2(x))
EM_TYPES_COMPLEX(EM_INST_UNARY, log2, em_clog2(x))
EM_TABLE(log2, EM_TYPES_FLOATC(EM_ENTRY, log2))
EM_TYPES_FLOAT(EM_INST_UNARY, log10, log10(x))
EM_TYPES_COMPLEX(EM_INST_UNARY, log10, em_clog10(x))
EM_TABLE(log10, EM_TYPES_FLOATC(EM_ENTRY, log10))
EM_TYPES_FLOAT(EM_INST_UNARY, log1p, log1p(x))
EM_TYPES_COMPLEX(EM_INST_UNARY, log1p, em_clog1p(x))
EM_TABLE(log1p, EM_TYPES_FLOATC(EM_ENTRY, log1p))
EM_KERNELS(UNARY, sqrt, EM_TYPES_FLOATC, sqrt(x)) /* tgmath.h: csqrt */
EM_KERNELS(UNARY, rsqrt, EM_TYPES_FLOATC, 1 / sqrt(x))
EM_KERNELS(UNARY, sin, EM_TYPES_FLOATC, sin(x)) /* tgmath.h: csin */
EM_KERNELS(UNARY, cos, EM_TYPES_FLOATC, cos(x)) /* tgmath.h: ccos */
EM_KERNELS(UNARY, tan, EM_TYPES_FLOATC, tan(x)) /* tgmath.h: ctan */
EM_KERNELS(UNARY, asin, EM_TYPES_FLOATC, asin(x)) /* tgmath.h: casin */
EM_KERNELS(UNARY, acos, EM_TYPES_FLOATC, acos(x)) /* tgmath.h: cacos */
EM_KERNELS(UNARY, atan, EM_TYPES_FLOATC, atan(x)) /* tgmath.h: catan */
EM_KERNELS(UNARY, sinh, EM_TYPES_FLOATC, sinh(x)) /* tgmath.h: csinh */
EM_KERNELS(UNARY, cosh, EM_TYPES_FLOATC, cosh(x)) /* tgmath.h: ccosh */
EM_INST_UNARY(tanh, tanh(x), FLOAT64, double)
EM_TYPES_COMPLEX(EM_INST_UNARY, tanh, tanh(x))
EM_TABLE(tanh, EM_TYPES_FLOATC(EM_ENTRY, tanh))
EM_KERNELS(UNARY, asinh, EM_TYPES_FLOATC, asinh(x)) /* tgmath.h: casinh */
EM_KERNELS(UNARY, acosh, EM_TYPES_FLOATC, acosh(x)) /* tgmath.h: cacosh */
EM_KERNELS(UNARY, atanh, EM_TYPES_FLOATC, atanh(x)) /* tgmath.h: catanh */
EM_INST_UNARY(sigmoid, em_sigmoid(x), FLOAT64, double)
EM_TYPES_COMPLEX(EM_INST_UNARY, sigmoid, em_csigmoid(x))
EM_TABLE(sigmoid, EM_TYPES_FLOATC(EM_ENTRY, sigmoid))
EM_KERNELS(UNARY, erf, EM_TYPES_FLOAT, erf(x))
EM_KERNELS(UNARY, erfc, EM_TYPES_FLOAT, erfc(x))
EM_KERNELS(UNARY, erfinv, EM_TYPES_FLOAT, em_erfinv(x))
EM_KERNELS(UNARY, reciprocal, EM_TYPES_FLOATC, 1 / x)

/* predicates write bool; integers are always finite */
#define PREDICATE(name, int_expr, float_expr) \
    EM_KERNELS_SPLIT(UNARY_BOOL, name, EM_TYPES_INTBU, int_expr, float_expr)
/* ... and for complex: either part NaN / infinite; finite when both are (torch) */
#define PREDICATE_C(name, int_expr, float_expr, complex_expr)                  \
    EM_TYPES_INTBU(EM_INST_UNARY_BOOL, name, int_expr)                         \
    EM_TYPES_FLOAT(EM_INST_UNARY_BOOL, name, float_expr)                       \
    EM_TYPES_COMPLEX(EM_INST_UNARY_BOOL, name, complex_expr)                   \
    EM_TABLE(name, EM_TYPES_INTBU(EM_ENTRY, name) EM_TYPES_FLOATC(EM_ENTRY, name))
PREDICATE_C(isnan, ((void)x, false), x != x, x != x)
PREDICATE_C(isinf, ((void)x, false), isinf(x), isinf(__real__ x) || isinf(__imag__ x))
PREDICATE_C(isfinite, ((void)x, true), isfinite(x), isfinite(__real__ x) && isfinite(__imag__ x))
PREDICATE(isposinf, ((void)x, false), isinf(x) && x > 0)
PREDICATE(isneginf, ((void)x, false), isinf(x) && x < 0)
EM_TYPES_INTU(EM_INST_UNARY_BOOL, signbit, x < 0)
EM_INST_UNARY_BOOL(signbit, ((void)x, false), BOOL, bool)
EM_TYPES_FLOAT(EM_INST_UNARY_BOOL, signbit, signbit(x))
EM_TABLE(signbit, EM_TYPES_INTBU(EM_ENTRY, signbit) EM_TYPES_FLOAT(EM_ENTRY, signbit))

EM_TYPES_INT(EM_INST_UNARY, bitwise_not, ~x)
EM_INST_UNARY(bitwise_not, !x, BOOL, bool)
EM_TABLE(bitwise_not, EM_TYPES_INTB(EM_ENTRY, bitwise_not))
