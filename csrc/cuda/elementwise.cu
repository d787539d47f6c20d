/* elementwise.cu — the CUDA elementwise kernels, Note [CUDA elementwise]
 * (csrc/cuda_backend.h).
 *
 * The core's iterator describes a launch exactly as for its CPU loops (merged
 * shape innermost first, byte strides, storage and kernel dtype per operand,
 * scalars by value) and names the CPU kernel table. Each table has a functor
 * here, F_<name><T>, computing the same expression per compute dtype — the
 * integer/float rules come from the CPU's own csrc/cpu/math.h and act_math.h,
 * included here as __host__ __device__ functions, so the two devices cannot
 * drift. Two launchers run a functor:
 *   ew_vec      every tensor operand contiguous (or one broadcast element),
 *               stored in its kernel dtype — or, for float32 math, all in one
 *               half type — with aligned 16-byte accesses;
 *   ew_general  anything else: per-element offsets from the merged shape
 *               (32-bit magic-number division when the index fits, 64-bit
 *               divmod otherwise) and a dtype conversion around each access.
 * Conversions follow csrc/core/dtype.c bit for bit, including x86's float to
 * int overflow result (INT_MIN) and the half NaN encodings.
 *
 * Built with -DEM_CUDA_EW_HOST_TEST (tests/test_cuda_elementwise.py), both
 * launchers run on the host over host pointers instead of launching: with the
 * fake backend (Note [fake CUDA]) that checks every functor, conversion and
 * offset computation here against the CPU kernels on a machine without a GPU. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <type_traits>

#include "elementwise.h"

/* the CPU's per-element math, compiled for both sides */
#define EM_MATH_FN static __host__ __device__ __forceinline__
#define EM_ACT_INLINE static __host__ __device__ __forceinline__
#include "../cpu/act_math.h"
#include "../cpu/math.h"
/* their _Generic dispatch macros are C only: overloads below instead */
#undef em_floordiv
#undef em_remainder
#undef em_logaddexp
#undef em_sigmoid
#undef em_erfinv
#undef em_gelu
#undef em_gelu_tanh
#undef em_gelu_grad
#undef em_gelu_tanh_grad
#undef em_silu
#undef em_silu_grad
#undef em_digamma
#undef em_polygamma
#undef em_mvlgamma
#undef em_i0
#undef em_i1
#undef em_logaddexp2
#undef em_frexp_mantissa

#define EW_FN __host__ __device__ __forceinline__

#pragma nv_diag_suppress 186 /* the CPU's `x < 0` on unsigned types */
#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wunknown-pragmas" /* #pragma unroll, for the host pass */
#endif

/* ------------------------------------------------------- runtime hooks */

#ifdef EM_CUDA_EW_HOST_TEST
/* The host build has no runtime: its own error buffer and the default stream. */
static char ew_error[512];
static void em_cuda_set_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ew_error, sizeof ew_error, fmt, ap);
    va_end(ap);
}
extern "C" const char *em_cuda_ew_host_last_error(void) { return ew_error; }
/* launches by launcher (0 vector, 1 general): the tests check both ran */
static long long ew_host_launches[2];
extern "C" long long em_cuda_ew_host_launches(int which) { return ew_host_launches[which & 1]; }
static cudaStream_t em_cuda_current_stream_handle(int dev) {
    (void)dev;
    return 0;
}
#else
/* The runtime's error buffer and current stream (csrc/cuda/runtime.h; not
 * included here because its dtype enum would clash with this file's). */
int emc_fail(const char *fmt, ...);
EmCudaStream emc_current_stream(int dev);
#define em_cuda_set_error emc_fail
static inline cudaStream_t em_cuda_current_stream_handle(int dev) {
    return static_cast<cudaStream_t>(emc_current_stream(dev));
}
#endif

/* ------------------------------------------------------------- dtypes */

/* EmDType codes (csrc/ember.h) */
enum { DT_BOOL, DT_U8, DT_I8, DT_I16, DT_I32, DT_I64, DT_F16, DT_BF16, DT_F32, DT_F64, DT_N };

/* Half types as plain bits: only `copy` computes in them, everything else
 * reads them as float32. */
struct em_half { uint16_t bits; };
struct em_bf16 { uint16_t bits; };

template <class T> struct dt_code;
template <> struct dt_code<bool> { static constexpr int v = DT_BOOL; };
template <> struct dt_code<uint8_t> { static constexpr int v = DT_U8; };
template <> struct dt_code<int8_t> { static constexpr int v = DT_I8; };
template <> struct dt_code<int16_t> { static constexpr int v = DT_I16; };
template <> struct dt_code<int32_t> { static constexpr int v = DT_I32; };
template <> struct dt_code<int64_t> { static constexpr int v = DT_I64; };
template <> struct dt_code<em_half> { static constexpr int v = DT_F16; };
template <> struct dt_code<em_bf16> { static constexpr int v = DT_BF16; };
template <> struct dt_code<float> { static constexpr int v = DT_F32; };
template <> struct dt_code<double> { static constexpr int v = DT_F64; };

template <class T> constexpr bool is_half_v = std::is_same<T, em_half>::value || std::is_same<T, em_bf16>::value;

/* float32 <-> half bits as em_f16_to_f32 & co. (csrc/ember.h): the hardware
 * conversions round the same way; NaNs keep the CPU's encodings. */
EW_FN float ew_f16_to_f32(uint16_t h) {
    if ((h & 0x7fffu) > 0x7c00u) {
        uint32_t bits = ((uint32_t)(h & 0x8000u) << 16) | 0x7f800000u | ((uint32_t)(h & 0x3ffu) << 13);
        float f;
        memcpy(&f, &bits, 4);
        return f;
    }
    return __half2float(__ushort_as_half(h));
}
EW_FN uint16_t ew_f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)(((x >> 16) & 0x8000u) | 0x7c00u | 0x200u | ((x >> 13) & 0x3ffu));
    return __half_as_ushort(__float2half_rn(f));
}
EW_FN float ew_bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}
EW_FN uint16_t ew_f32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
    return __bfloat16_as_ushort(__float2bfloat16_rn(f));
}

/* float -> integer as x86's cvtt does for csrc/core/dtype.c's casts: NaN and
 * out-of-range values give the minimum (CUDA's own conversion saturates). */
template <class F> EW_FN int32_t ew_f2i32(F v) {
    return (v >= (F)-2147483648.0 && v < (F)2147483648.0) ? (int32_t)v : INT32_MIN;
}
template <class F> EW_FN int64_t ew_f2i64(F v) {
    return (v >= (F)-9223372036854775808.0 && v < (F)9223372036854775808.0) ? (int64_t)v : INT64_MIN;
}

/* D from S, as em_cast_fns[S][D]: small integers from floats through int32,
 * half types through float32 (so float64 -> half rounds twice, as torch). */
template <class D, class S> EW_FN D ew_cvt(S v) {
    if constexpr (std::is_same<D, S>::value) {
        return v;
    } else if constexpr (std::is_same<S, em_half>::value) {
        return ew_cvt<D>(ew_f16_to_f32(v.bits));
    } else if constexpr (std::is_same<S, em_bf16>::value) {
        return ew_cvt<D>(ew_bf16_to_f32(v.bits));
    } else if constexpr (std::is_same<D, em_half>::value) {
        return em_half{ew_f32_to_f16(ew_cvt<float>(v))};
    } else if constexpr (std::is_same<D, em_bf16>::value) {
        return em_bf16{ew_f32_to_bf16(ew_cvt<float>(v))};
    } else if constexpr (std::is_same<D, bool>::value) {
        return v != 0;
    } else if constexpr (std::is_floating_point<D>::value || !std::is_floating_point<S>::value) {
        return (D)v;
    } else if constexpr (sizeof(D) == 8) {
        return (D)ew_f2i64(v);
    } else {
        return (D)ew_f2i32(v);
    }
}

/* Read (write) an element stored as dtype `dt` as (from) the C type T. */
template <class T> EW_FN T ew_load(const char *p, int dt) {
    switch (dt) {
    case DT_BOOL: return ew_cvt<T>(*(const uint8_t *)p != 0);
    case DT_U8: return ew_cvt<T>(*(const uint8_t *)p);
    case DT_I8: return ew_cvt<T>(*(const int8_t *)p);
    case DT_I16: return ew_cvt<T>(*(const int16_t *)p);
    case DT_I32: return ew_cvt<T>(*(const int32_t *)p);
    case DT_I64: return ew_cvt<T>(*(const int64_t *)p);
    case DT_F16: return ew_cvt<T>(em_half{*(const uint16_t *)p});
    case DT_BF16: return ew_cvt<T>(em_bf16{*(const uint16_t *)p});
    case DT_F32: return ew_cvt<T>(*(const float *)p);
    default: return ew_cvt<T>(*(const double *)p);
    }
}
template <class T> EW_FN void ew_store(char *p, int dt, T v) {
    switch (dt) {
    case DT_BOOL: *(bool *)p = ew_cvt<bool>(v); break;
    case DT_U8: *(uint8_t *)p = ew_cvt<uint8_t>(v); break;
    case DT_I8: *(int8_t *)p = ew_cvt<int8_t>(v); break;
    case DT_I16: *(int16_t *)p = ew_cvt<int16_t>(v); break;
    case DT_I32: *(int32_t *)p = ew_cvt<int32_t>(v); break;
    case DT_I64: *(int64_t *)p = ew_cvt<int64_t>(v); break;
    case DT_F16: *(uint16_t *)p = ew_cvt<em_half>(v).bits; break;
    case DT_BF16: *(uint16_t *)p = ew_cvt<em_bf16>(v).bits; break;
    case DT_F32: *(float *)p = ew_cvt<float>(v); break;
    default: *(double *)p = ew_cvt<double>(v); break;
    }
}

/* ------------------------------------------ per-element math (CPU twins) */

/* The C macros of math.h dispatch with _Generic; these are their overloads. */
EW_FN float em_floordiv(float a, float b) { return em_floordiv_f(a, b); }
EW_FN double em_floordiv(double a, double b) { return em_floordiv_d(a, b); }
EW_FN float em_remainder(float a, float b) { return em_remainder_f(a, b); }
EW_FN double em_remainder(double a, double b) { return em_remainder_d(a, b); }
EW_FN float em_logaddexp(float a, float b) { return em_logaddexp_f(a, b); }
EW_FN double em_logaddexp(double a, double b) { return em_logaddexp_d(a, b); }
EW_FN float em_sigmoid(float x) { return em_sigmoid_f(x); }
EW_FN double em_sigmoid(double x) { return em_sigmoid_d(x); }
EW_FN float em_erfinv(float x) { return em_erfinv_f(x); }
EW_FN double em_erfinv(double x) { return em_erfinv_d(x); }
EW_FN float em_gelu(float x) { return em_gelu_f(x); }
EW_FN double em_gelu(double x) { return em_gelu_d(x); }
EW_FN float em_gelu_tanh(float x) { return em_gelu_tanh_f(x); }
EW_FN double em_gelu_tanh(double x) { return em_gelu_tanh_d(x); }
EW_FN float em_gelu_grad(float x) { return em_gelu_grad_f(x); }
EW_FN double em_gelu_grad(double x) { return em_gelu_grad_d(x); }
EW_FN float em_gelu_tanh_grad(float x) { return em_gelu_tanh_grad_f(x); }
EW_FN double em_gelu_tanh_grad(double x) { return em_gelu_tanh_grad_d(x); }
EW_FN float em_silu(float x) { return em_silu_f(x); }
EW_FN double em_silu(double x) { return em_silu_d(x); }
EW_FN float em_silu_grad(float x) { return em_silu_grad_f(x); }
EW_FN double em_silu_grad(double x) { return em_silu_grad_d(x); }
EW_FN float em_digamma(float x) { return em_digamma_f(x); }
EW_FN double em_digamma(double x) { return em_digamma_d(x); }
EW_FN float em_polygamma(float n, float x) { return em_polygamma_f(n, x); }
EW_FN double em_polygamma(double n, double x) { return em_polygamma_d(n, x); }
EW_FN float em_mvlgamma(float x, float p) { return em_mvlgamma_f(x, p); }
EW_FN double em_mvlgamma(double x, double p) { return em_mvlgamma_d(x, p); }
EW_FN float em_i0(float x) { return em_i0_f(x); }
EW_FN double em_i0(double x) { return em_i0_d(x); }
EW_FN float em_i1(float x) { return em_i1_f(x); }
EW_FN double em_i1(double x) { return em_i1_d(x); }
EW_FN float em_logaddexp2(float a, float b) { return em_logaddexp2_f(a, b); }
EW_FN double em_logaddexp2(double a, double b) { return em_logaddexp2_d(a, b); }
EW_FN float em_frexp_mantissa(float x) { return em_frexp_mantissa_f(x); }
EW_FN double em_frexp_mantissa(double x) { return em_frexp_mantissa_d(x); }
/* gcd / lcm's width argument: binary.c's 0 for uint8, else the bits */
#define EW_INT_BITS (std::is_unsigned<T>::value ? 0 : 8 * (int)sizeof(T))

/* Shifts (math.h's EM_SHL/EM_SHR use sizeof(T) of the kernel's type) */
template <class T> EW_FN T ew_shl(T a, T b) { return EM_SHL(T, a, b); }
template <class T> EW_FN T ew_shr(T a, T b) { return EM_SHR(T, a, b); }

/* activation.c's clamp */
#define CLAMP(t, lo, hi) ((t) < (lo) ? (lo) : (t) > (hi) ? (hi) : (t))

/* A functor per CPU table. Operands: the output (out_t), the first input
 * (in0_t: bool for where's condition) and up to three more (T). The body
 * binds the CPU expression's names: x (unary), a b (binary), a b c
 * (ternary), a b c e (quaternary), x a b c (activation: input and three
 * parameters), g x (activation backward). */
#define BIND_X const auto x = p0; (void)x;
#define BIND_AB const auto a = p0; const auto b = p1; (void)a; (void)b;
#define BIND_ABC BIND_AB const auto c = p2; (void)c;
#define BIND_ABCE BIND_ABC const auto e = p3; (void)e;
#define BIND_ACT const auto x = p0, a = p1, b = p2, c = p3; (void)x; (void)a; (void)b; (void)c;
#define BIND_BW const auto g = p0, x = p1; (void)g; (void)x;
#define NIN_X 1
#define NIN_AB 2
#define NIN_ABC 3
#define NIN_ABCE 4
#define NIN_ACT 4
#define NIN_BW 2

#define EW_DEF(name, BIND, OUT, IN0, ...)                                      \
    template <class T> struct F_##name {                                       \
        using out_t = OUT;                                                     \
        using in0_t = IN0;                                                     \
        using in_t = T;                                                        \
        static constexpr int nin = NIN_##BIND;                                 \
        EW_FN out_t operator()(IN0 p0, T p1, T p2, T p3) const {               \
            (void)p0, (void)p1, (void)p2, (void)p3;                            \
            BIND_##BIND __VA_ARGS__                                            \
        }                                                                      \
    };
#define IS_FLOAT std::is_floating_point<T>::value
#define IS_BOOL std::is_same<T, bool>::value
/* one expression */
#define EW_1(name, BIND, expr) EW_DEF(name, BIND, T, T, return (T)(expr);)
/* integer / float expressions */
#define EW_SPLIT(name, BIND, iexpr, fexpr)                                     \
    EW_DEF(name, BIND, T, T, if constexpr (IS_FLOAT) return (T)(fexpr); else return (T)(iexpr);)
/* bool result */
#define EW_BOOL(name, BIND, iexpr, fexpr)                                      \
    EW_DEF(name, BIND, bool, T, if constexpr (IS_FLOAT) return (bool)(fexpr); else return (bool)(iexpr);)

/* binary.c */
EW_SPLIT(add, AB, IS_BOOL ? (a || b) : (a + b), a + b)
EW_1(sub, AB, a - b)
EW_SPLIT(mul, AB, IS_BOOL ? (a && b) : (a * b), a * b)
EW_1(div, AB, a / b)
EW_SPLIT(div_trunc, AB, em_idiv_trunc(a, b), trunc(a / b))
EW_SPLIT(floor_divide, AB, em_idiv_floor(a, b), em_floordiv(a, b))
EW_SPLIT(remainder, AB, em_iremainder(a, b), em_remainder(a, b))
EW_SPLIT(fmod, AB, em_ifmod(a, b), fmod(a, b))
EW_SPLIT(pow, AB, em_ipow(a, b), pow(a, b))
EW_1(atan2, AB, atan2(a, b))
EW_1(hypot, AB, hypot(a, b))
EW_1(copysign, AB, copysign(a, b))
EW_1(logaddexp, AB, em_logaddexp(a, b))
EW_SPLIT(maximum, AB, em_max_int(a, b), em_max_nan(a, b))
EW_SPLIT(minimum, AB, em_min_int(a, b), em_min_nan(a, b))
EW_SPLIT(fmax, AB, em_max_int(a, b), fmax(a, b))
EW_SPLIT(fmin, AB, em_min_int(a, b), fmin(a, b))
EW_BOOL(eq, AB, a == b, a == b)
EW_BOOL(ne, AB, a != b, a != b)
EW_BOOL(lt, AB, a < b, a < b)
EW_BOOL(le, AB, a <= b, a <= b)
EW_BOOL(gt, AB, a > b, a > b)
EW_BOOL(ge, AB, a >= b, a >= b)
EW_1(bitwise_and, AB, a & b)
EW_1(bitwise_or, AB, a | b)
EW_1(bitwise_xor, AB, a ^ b)
EW_1(shift_left, AB, ew_shl<T>(a, b))
EW_1(shift_right, AB, ew_shr<T>(a, b))
EW_1(logical_and, AB, a && b)
EW_1(logical_or, AB, a || b)
EW_1(logical_xor, AB, a != b)
EW_1(logical_not, X, !x)
EW_SPLIT(clamp_min, AB, em_max_int(a, b), em_max_nan(a, b))
EW_SPLIT(clamp_max, AB, em_min_int(a, b), em_min_nan(a, b))

/* unary.c */
EW_1(neg, X, -x)
EW_SPLIT(abs, X, x < 0 ? -x : x, fabs(x))
EW_DEF(sign, X, T, T,
       if constexpr (IS_FLOAT) return (T)em_sign_float(x);
       else if constexpr (IS_BOOL) return x;
       else return (T)((x > 0) - (x < 0));)
/* sgn on real dtypes is sign (the CPU's complex sgn has no GPU kernel yet) */
EW_DEF(sgn, X, T, T,
       if constexpr (IS_FLOAT) return (T)em_sign_float(x);
       else if constexpr (IS_BOOL) return x;
       else return (T)((x > 0) - (x < 0));)
EW_1(square, X, x * x)
EW_SPLIT(relu, X, x > 0 ? x : 0, x > 0 ? x : (x != x ? x : 0))
EW_SPLIT(floor, X, x, floor(x))
EW_SPLIT(ceil, X, x, ceil(x))
EW_SPLIT(trunc, X, x, trunc(x))
EW_SPLIT(round, X, x, nearbyint(x)) /* half to even */
EW_1(frac, X, x - trunc(x))
EW_1(exp, X, exp(x))
EW_1(exp2, X, exp2(x))
EW_1(expm1, X, expm1(x))
EW_1(log, X, log(x))
EW_1(log2, X, log2(x))
EW_1(log10, X, log10(x))
EW_1(log1p, X, log1p(x))
EW_1(sqrt, X, sqrt(x))
EW_1(rsqrt, X, 1 / sqrt(x))
EW_1(sin, X, sin(x))
EW_1(cos, X, cos(x))
EW_1(tan, X, tan(x))
EW_1(asin, X, asin(x))
EW_1(acos, X, acos(x))
EW_1(atan, X, atan(x))
EW_1(sinh, X, sinh(x))
EW_1(cosh, X, cosh(x))
EW_1(tanh, X, tanh(x))
EW_1(asinh, X, asinh(x))
EW_1(acosh, X, acosh(x))
EW_1(atanh, X, atanh(x))
EW_1(sigmoid, X, em_sigmoid(x))
EW_1(erf, X, erf(x))
EW_1(erfc, X, erfc(x))
EW_1(erfinv, X, em_erfinv(x))
EW_1(reciprocal, X, 1 / x)
EW_BOOL(isnan, X, false, x != x)
EW_BOOL(isinf, X, false, isinf(x))
EW_BOOL(isfinite, X, true, isfinite(x))
EW_BOOL(isposinf, X, false, isinf(x) && x > 0)
EW_BOOL(isneginf, X, false, isinf(x) && x < 0)
EW_DEF(signbit, X, bool, T,
       if constexpr (IS_FLOAT) return (bool)signbit(x);
       else if constexpr (IS_BOOL) return false;
       else return x < 0;)
EW_DEF(bitwise_not, X, T, T, if constexpr (IS_BOOL) return !x; else return (T)~x;)

/* binary.c: step, gcd / lcm, powers of two, log2-sum-exp2, x log y */
EW_1(heaviside, AB, a == 0 ? b : (T)(a > 0))
EW_1(gcd, AB, em_gcd(a, b, EW_INT_BITS))
EW_1(lcm, AB, em_lcm(a, b, EW_INT_BITS))
EW_1(ldexp, AB, a * exp2(b))
EW_1(logaddexp2, AB, em_logaddexp2(a, b))
EW_1(xlogy, AB, em_xlogy(a, b))

/* special.c */
EW_1(lgamma, X, lgamma((double)x))
EW_1(digamma, X, em_digamma(x))
EW_1(i0, X, em_i0(x))
EW_1(i1, X, em_i1(x))
EW_1(polygamma, AB, em_polygamma(b, a))
EW_1(mvlgamma, AB, em_mvlgamma(a, b))
EW_1(rad2deg, X, x * (180.0 / 3.14159265358979323846))
EW_1(deg2rad, X, x * (3.14159265358979323846 / 180.0))
EW_1(frexp_mantissa, X, em_frexp_mantissa(x))
EW_1(frexp_exponent, X, em_frexp_exponent(x))

/* ternary.c */
EW_1(add_alpha, ABC, a + c * b)
EW_DEF(where, ABC, T, bool, return a ? b : c;)
EW_SPLIT(clamp, ABC, em_min_int(em_max_int(a, b), c), em_min_nan(em_max_nan(a, b), c))
EW_1(lerp, ABC, em_lerp(a, b, c))
EW_1(round_scaled_up, AB, nearbyint(a * b) / b)
EW_1(round_scaled_down, AB, nearbyint(a / b) * b)
EW_1(addcmul, ABCE, a + e * b * c)
EW_1(addcdiv, ABCE, a + e * (b / c))
EW_1(nan_to_num, ABCE, a != a ? b : a == (T)INFINITY ? c : a == -(T)INFINITY ? e : a)
EW_DEF(copy, X, T, T, return x;)

/* activation.c */
EW_1(gelu, ACT, em_gelu(x))
EW_1(gelu_tanh, ACT, em_gelu_tanh(x))
EW_1(silu, ACT, em_silu(x))
EW_1(mish, ACT, x * tanh(log1p(exp(x))))
EW_1(softplus, ACT, x * a > b ? x : log1p(exp(x * a)) / a)
EW_1(elu, ACT, x <= 0 ? expm1(x * c) * a : x * b)
EW_1(leaky_relu, ACT, x > 0 ? x : x * a)
EW_1(hardtanh, ACT, (x > b ? b : x) < a ? a : (x > b ? b : x))
EW_1(hardswish, ACT, x * CLAMP(x + 3, 0, 6) / 6)
EW_1(hardsigmoid, ACT, CLAMP(x + 3, 0, 6) / 6)
EW_1(log_sigmoid, ACT, (x < 0 ? x : 0) - log1p(exp(-fabs(x))))
EW_1(threshold, ACT, x <= a ? b : x)
EW_1(gelu_backward, BW, g * em_gelu_grad(x))
EW_1(gelu_tanh_backward, BW, g * em_gelu_tanh_grad(x))
EW_1(silu_backward, BW, g * em_silu_grad(x))
EW_1(glu, BW, g * em_sigmoid(x))

/* ------------------------------------------------------------ launchers */

constexpr int NOPS = EM_CUDA_MAX_OPS;
constexpr int MAXD = EM_CUDA_MAX_DIMS;
constexpr int THREADS = 256;

/* The kernel type of operand op */
template <class F, int op> using kt_t =
    std::conditional_t<op == 0, typename F::out_t,
                       std::conditional_t<op == 1, typename F::in0_t, typename F::in_t>>;

template <class T> EW_FN T ew_scalar(const unsigned char *s) {
    T v;
    memcpy(&v, s, sizeof(T));
    return v;
}

/* Unsigned 32-bit division by a run-time constant as a multiply-high and a
 * shift (for n, d < 2^31): q = (umulhi(n, m) + n) >> s, m = 2^32·(2^s - d)/d + 1. */
struct Div32 {
    uint32_t magic;
    uint32_t shift;
};
static Div32 ew_div32(uint32_t d) {
    uint32_t s = 0;
    while (s < 31 && (1u << s) < d) s++;
    uint64_t m = ((uint64_t)1 << 32) * (((uint64_t)1 << s) - d) / d + 1;
    return Div32{(uint32_t)m, s};
}
EW_FN uint32_t ew_umulhi(uint32_t a, uint32_t b) {
#ifdef __CUDA_ARCH__
    return __umulhi(a, b);
#else
    return (uint32_t)(((uint64_t)a * b) >> 32);
#endif
}

/* ew_general's parameters (under the 4 KB classic kernel-parameter limit) */
struct GenArgs {
    char *data[NOPS];                  /* NULL: a scalar operand */
    alignas(8) unsigned char scalar[NOPS][8];
    int64_t numel;
    int64_t shape[MAXD];               /* innermost first */
    int64_t strides[MAXD][NOPS];       /* bytes */
    uint32_t magic[MAXD];
    uint8_t shift[MAXD];
    int8_t dtype[NOPS];                /* storage dtypes */
    int32_t ndim;
    int32_t use32;                     /* numel < 2^31: 32-bit index math */
};
static_assert(sizeof(GenArgs) <= 4096, "GenArgs must fit the classic parameter limit");

/* Byte offsets of element i for each operand. */
template <int N> EW_FN void ew_offsets(const GenArgs &g, int64_t i, int64_t (&off)[N]) {
#pragma unroll
    for (int op = 0; op < N; op++) off[op] = 0;
    const int last = g.ndim - 1;
    if (g.use32) {
        uint32_t rem = (uint32_t)i;
        for (int d = 0; d < last; d++) {
            uint32_t q = (ew_umulhi(rem, g.magic[d]) + rem) >> g.shift[d];
            uint32_t c = rem - q * (uint32_t)g.shape[d];
            rem = q;
#pragma unroll
            for (int op = 0; op < N; op++) off[op] += (int64_t)c * g.strides[d][op];
        }
#pragma unroll
        for (int op = 0; op < N; op++) off[op] += (int64_t)rem * g.strides[last][op];
    } else {
        int64_t rem = i;
        for (int d = 0; d < last; d++) {
            int64_t q = rem / g.shape[d];
            int64_t c = rem - q * g.shape[d];
            rem = q;
#pragma unroll
            for (int op = 0; op < N; op++) off[op] += c * g.strides[d][op];
        }
#pragma unroll
        for (int op = 0; op < N; op++) off[op] += rem * g.strides[last][op];
    }
}

template <class F, int op> EW_FN kt_t<F, op> ew_in(const GenArgs &g, const int64_t *off) {
    using K = kt_t<F, op>;
    if constexpr (op > F::nin) {
        return K{};
    } else {
        if (!g.data[op]) return ew_scalar<K>(g.scalar[op]);
        return ew_load<K>(g.data[op] + off[op], g.dtype[op]);
    }
}

/* One element of the general launcher (also run on the host by the
 * EM_CUDA_EW_HOST_TEST build). */
template <class F> EW_FN void ew_general_element(const GenArgs &g, int64_t i) {
    constexpr int N = F::nin + 1;
    int64_t off[N];
    ew_offsets<N>(g, i, off);
    F f;
    auto r = f(ew_in<F, 1>(g, off), ew_in<F, 2>(g, off), ew_in<F, 3>(g, off), ew_in<F, 4>(g, off));
    ew_store<typename F::out_t>(g.data[0] + off[0], g.dtype[0], r);
}

template <class F> __global__ void __launch_bounds__(THREADS) ew_general(const __grid_constant__ GenArgs g) {
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < g.numel; i += step)
        ew_general_element<F>(g, i);
}

/* ---- the contiguous launcher */

/* Storage type of operand op: the kernel type, or the half type H for
 * float32 operands (H = void: no half storage). */
template <class F, class H, int op> using st_t =
    std::conditional_t<!std::is_void<H>::value && std::is_same<kt_t<F, op>, float>::value, H, kt_t<F, op>>;

/* Elements per thread: 16 bytes of the output, at least 4 */
template <class F, class H>
constexpr int vec_elems = 16 / (int)sizeof(st_t<F, H, 0>) > 4 ? 16 / (int)sizeof(st_t<F, H, 0>) : 4;

/* E elements as one aligned access (16-byte pieces when the pack is larger) */
template <class T, int E> struct alignas(sizeof(T) * E < 16 ? sizeof(T) * E : 16) Pack {
    T v[E];
};

struct VecArgs {
    char *data[NOPS];
    alignas(8) unsigned char scalar[NOPS][8];
    int64_t numel;
    uint32_t bcast; /* bit op: a tensor operand read at element 0 only */
};

template <class F, class H, int op, int E>
EW_FN void ew_vec_load(const VecArgs &a, int64_t base, kt_t<F, op> (&v)[E]) {
    using K = kt_t<F, op>;
    using S = st_t<F, H, op>;
    if constexpr (op <= F::nin) {
        if (!a.data[op] || (a.bcast >> op & 1)) {
            K s = a.data[op] ? ew_cvt<K>(*(const S *)a.data[op]) : ew_scalar<K>(a.scalar[op]);
#pragma unroll
            for (int j = 0; j < E; j++) v[j] = s;
        } else {
            Pack<S, E> p = *(const Pack<S, E> *)((const S *)a.data[op] + base);
#pragma unroll
            for (int j = 0; j < E; j++) v[j] = ew_cvt<K>(p.v[j]);
        }
    }
}

template <class F, class H, int op>
EW_FN kt_t<F, op> ew_vec_load1(const VecArgs &a, int64_t i) {
    using K = kt_t<F, op>;
    using S = st_t<F, H, op>;
    if constexpr (op > F::nin) {
        return K{};
    } else {
        if (!a.data[op]) return ew_scalar<K>(a.scalar[op]);
        return ew_cvt<K>(((const S *)a.data[op])[(a.bcast >> op & 1) ? 0 : i]);
    }
}

/* The work of thread `tid` of `step` (also run on the host by the
 * EM_CUDA_EW_HOST_TEST build) */
template <class F, class H> EW_FN void ew_vec_thread(const VecArgs &a, int64_t tid, int64_t step) {
    constexpr int E = vec_elems<F, H>;
    using O = typename F::out_t;
    using SO = st_t<F, H, 0>;
    F f;
    const int64_t nvec = a.numel / E;
    for (int64_t k = tid; k < nvec; k += step) {
        const int64_t base = k * E;
        kt_t<F, 1> v1[E];
        kt_t<F, 2> v2[E];
        kt_t<F, 3> v3[E];
        kt_t<F, 4> v4[E];
        ew_vec_load<F, H, 1, E>(a, base, v1); /* all loads in flight before the math */
        ew_vec_load<F, H, 2, E>(a, base, v2);
        ew_vec_load<F, H, 3, E>(a, base, v3);
        ew_vec_load<F, H, 4, E>(a, base, v4);
        Pack<SO, E> out;
#pragma unroll
        for (int j = 0; j < E; j++) {
            O r = f(v1[j], F::nin >= 2 ? v2[j] : kt_t<F, 2>{}, F::nin >= 3 ? v3[j] : kt_t<F, 3>{},
                    F::nin >= 4 ? v4[j] : kt_t<F, 4>{});
            out.v[j] = ew_cvt<SO>(r);
        }
        *(Pack<SO, E> *)((SO *)a.data[0] + base) = out;
    }
    /* the tail: fewer than E elements */
    for (int64_t i = nvec * E + tid; i < a.numel; i += step) {
        O r = f(ew_vec_load1<F, H, 1>(a, i), ew_vec_load1<F, H, 2>(a, i), ew_vec_load1<F, H, 3>(a, i),
                ew_vec_load1<F, H, 4>(a, i));
        ((SO *)a.data[0])[i] = ew_cvt<SO>(r);
    }
}

template <class F, class H> __global__ void __launch_bounds__(THREADS) ew_vec(const __grid_constant__ VecArgs a) {
    ew_vec_thread<F, H>(a, (int64_t)blockIdx.x * blockDim.x + threadIdx.x, (int64_t)gridDim.x * blockDim.x);
}

/* ---- host side */

#ifndef EM_CUDA_EW_HOST_TEST
static int ew_grid(int dev, int64_t work) {
    static int sms[64];
    int n = 0;
    if (dev >= 0 && dev < 64) {
        if (!sms[dev] && cudaDeviceGetAttribute(&sms[dev], cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
            cudaGetLastError();
            sms[dev] = 0;
        }
        n = sms[dev];
    }
    int64_t cap = (int64_t)(n > 0 ? n : 108) * (2048 / THREADS); /* one full wave */
    int64_t blocks = (work + THREADS - 1) / THREADS;
    if (blocks > cap) blocks = cap;
    return blocks < 1 ? 1 : (int)blocks;
}
#endif

template <class F, int op> static bool ew_kdtype_ok(const EmCudaElementwise *e) {
    if constexpr (op > F::nin) return true;
    else return e->kernel_dtype[op] == dt_code<kt_t<F, op>>::v && ew_kdtype_ok<F, op + 1>(e);
}

template <class F, class H, int op> static bool ew_vec_operand_ok(const EmCudaElementwise *e, uint32_t *bcast) {
    if constexpr (op > F::nin) {
        return true;
    } else {
        using S = st_t<F, H, op>;
        constexpr int E = vec_elems<F, H>;
        if (e->data[op]) {
            if (e->dtype[op] != dt_code<S>::v) return false;
            int64_t st = e->strides[0][op];
            if (st == 0 && op > 0) {
                *bcast |= 1u << op;
            } else {
                if (st != (int64_t)sizeof(S)) return false;
                if ((uintptr_t)e->data[op] % alignof(Pack<S, E>)) return false;
            }
        }
        return ew_vec_operand_ok<F, H, op + 1>(e, bcast);
    }
}

template <class F, class H> static bool ew_try_vec(const EmCudaElementwise *e, int dev, cudaStream_t s) {
    if (e->ndim != 1 || !e->data[0]) return false;
    VecArgs a;
    memset(&a, 0, sizeof a);
    if (!ew_vec_operand_ok<F, H, 0>(e, &a.bcast)) return false;
    for (int op = 0; op < e->nops; op++) {
        a.data[op] = (char *)e->data[op];
        memcpy(a.scalar[op], e->scalar[op], 8);
    }
    a.numel = e->numel;
    constexpr int E = vec_elems<F, H>;
    int64_t work = e->numel / E > 0 ? e->numel / E : 1;
#ifdef EM_CUDA_EW_HOST_TEST
    (void)dev, (void)s, (void)work;
    for (int64_t tid = 0; tid < 3; tid++) ew_vec_thread<F, H>(a, tid, 3); /* a grid of 3 threads */
    ew_host_launches[0]++;
#else
    ew_vec<F, H><<<ew_grid(dev, work), THREADS, 0, s>>>(a);
#endif
    return true;
}

template <class F> static int ew_launch(int dev, const EmCudaElementwise *e, cudaStream_t s) {
    if (e->nops != F::nin + 1 || !ew_kdtype_ok<F, 0>(e)) {
        em_cuda_set_error("elementwise kernel \"%s\": unexpected operands (%d) or kernel dtypes",
                          e->kernel, e->nops);
        return -1;
    }
    if (e->numel <= 0) return 0;
    bool launched = ew_try_vec<F, void>(e, dev, s);
    if constexpr (std::is_same<typename F::in_t, float>::value) {
        if (!launched) launched = ew_try_vec<F, em_half>(e, dev, s);
        if (!launched) launched = ew_try_vec<F, em_bf16>(e, dev, s);
    }
    if (!launched) {
        GenArgs g;
        memset(&g, 0, sizeof g);
        for (int op = 0; op < e->nops; op++) {
            g.data[op] = (char *)e->data[op];
            memcpy(g.scalar[op], e->scalar[op], 8);
            g.dtype[op] = (int8_t)e->dtype[op];
        }
        g.numel = e->numel;
        g.ndim = e->ndim > 0 ? e->ndim : 1;
        g.use32 = e->numel < ((int64_t)1 << 31);
        for (int d = 0; d < g.ndim; d++) {
            g.shape[d] = e->ndim > 0 ? e->shape[d] : 1;
            for (int op = 0; op < e->nops; op++) g.strides[d][op] = e->ndim > 0 ? e->strides[d][op] : 0;
            if (g.use32) {
                Div32 q = ew_div32((uint32_t)g.shape[d]);
                g.magic[d] = q.magic;
                g.shift[d] = (uint8_t)q.shift;
            }
        }
#ifdef EM_CUDA_EW_HOST_TEST
        if (e->numel % 3 == 1) g.use32 = 0; /* the 64-bit index path too */
        for (int64_t i = 0; i < e->numel; i++) ew_general_element<F>(g, i);
        ew_host_launches[1]++;
#else
        ew_general<F><<<ew_grid(dev, e->numel), THREADS, 0, s>>>(g);
#endif
    }
#ifndef EM_CUDA_EW_HOST_TEST
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) {
        em_cuda_set_error("CUDA error launching \"%s\": %s", e->kernel, cudaGetErrorString(err));
        return -1;
    }
#endif
    return 0;
}

/* ------------------------------------------------------------- the table */

typedef int (*EwLaunchFn)(int dev, const EmCudaElementwise *e, cudaStream_t s);

/* dtype sets, as csrc/cpu/loops.h's type lists (bit = EmDType code) */
#define M_BOOL (1u << DT_BOOL)
#define M_INT ((1u << DT_U8) | (1u << DT_I8) | (1u << DT_I16) | (1u << DT_I32) | (1u << DT_I64))
#define M_FLOAT ((1u << DT_F32) | (1u << DT_F64))
#define M_INTB (M_BOOL | M_INT)
#define M_NUM (M_INT | M_FLOAT)
#define M_ALL (M_INTB | M_FLOAT)
#define M_COPY (M_ALL | (1u << DT_F16) | (1u << DT_BF16))

template <template <class> class F, unsigned M, class T> constexpr EwLaunchFn ew_fn() {
    if constexpr ((M >> dt_code<T>::v) & 1u) return &ew_launch<F<T>>;
    else return nullptr;
}

struct EwEntry {
    const char *name;
    EwLaunchFn fn[DT_N];
};

#define EW_ENTRY(name, MASK)                                                   \
    {#name,                                                                    \
     {ew_fn<F_##name, MASK, bool>(), ew_fn<F_##name, MASK, uint8_t>(),         \
      ew_fn<F_##name, MASK, int8_t>(), ew_fn<F_##name, MASK, int16_t>(),       \
      ew_fn<F_##name, MASK, int32_t>(), ew_fn<F_##name, MASK, int64_t>(),      \
      ew_fn<F_##name, MASK, em_half>(), ew_fn<F_##name, MASK, em_bf16>(),      \
      ew_fn<F_##name, MASK, float>(), ew_fn<F_##name, MASK, double>()}},

/* Every em_kernels_<name> of csrc/cpu/ (*.c) with its dtypes there
 * (tests/test_cuda_elementwise.py checks the names against the CPU's). */
static EwEntry ew_table[] = {
    /* binary.c */
    EW_ENTRY(add, M_ALL) EW_ENTRY(sub, M_NUM) EW_ENTRY(mul, M_ALL) EW_ENTRY(div, M_FLOAT)
    EW_ENTRY(div_trunc, M_NUM) EW_ENTRY(floor_divide, M_NUM) EW_ENTRY(remainder, M_NUM)
    EW_ENTRY(fmod, M_NUM) EW_ENTRY(pow, M_NUM) EW_ENTRY(atan2, M_FLOAT) EW_ENTRY(hypot, M_FLOAT)
    EW_ENTRY(copysign, M_FLOAT) EW_ENTRY(logaddexp, M_FLOAT)
    EW_ENTRY(maximum, M_ALL) EW_ENTRY(minimum, M_ALL) EW_ENTRY(fmax, M_ALL) EW_ENTRY(fmin, M_ALL)
    EW_ENTRY(eq, M_ALL) EW_ENTRY(ne, M_ALL) EW_ENTRY(lt, M_ALL) EW_ENTRY(le, M_ALL)
    EW_ENTRY(gt, M_ALL) EW_ENTRY(ge, M_ALL)
    EW_ENTRY(bitwise_and, M_INTB) EW_ENTRY(bitwise_or, M_INTB) EW_ENTRY(bitwise_xor, M_INTB)
    EW_ENTRY(shift_left, M_INT) EW_ENTRY(shift_right, M_INT)
    EW_ENTRY(logical_and, M_BOOL) EW_ENTRY(logical_or, M_BOOL) EW_ENTRY(logical_xor, M_BOOL)
    EW_ENTRY(logical_not, M_BOOL) EW_ENTRY(clamp_min, M_ALL) EW_ENTRY(clamp_max, M_ALL)
    EW_ENTRY(heaviside, M_ALL) EW_ENTRY(gcd, M_INT) EW_ENTRY(lcm, M_INT) EW_ENTRY(ldexp, M_FLOAT)
    EW_ENTRY(logaddexp2, M_FLOAT) EW_ENTRY(xlogy, M_FLOAT)
    /* special.c */
    EW_ENTRY(lgamma, M_FLOAT) EW_ENTRY(digamma, M_FLOAT) EW_ENTRY(i0, M_FLOAT) EW_ENTRY(i1, M_FLOAT)
    EW_ENTRY(polygamma, M_FLOAT) EW_ENTRY(mvlgamma, M_FLOAT) EW_ENTRY(rad2deg, M_FLOAT)
    EW_ENTRY(deg2rad, M_FLOAT) EW_ENTRY(frexp_mantissa, M_FLOAT) EW_ENTRY(frexp_exponent, M_FLOAT)
    /* unary.c */
    EW_ENTRY(neg, M_NUM) EW_ENTRY(abs, M_NUM) EW_ENTRY(sign, M_ALL) EW_ENTRY(sgn, M_ALL) EW_ENTRY(square, M_NUM)
    EW_ENTRY(relu, M_NUM) EW_ENTRY(floor, M_NUM) EW_ENTRY(ceil, M_NUM) EW_ENTRY(trunc, M_NUM)
    EW_ENTRY(round, M_NUM) EW_ENTRY(frac, M_FLOAT) EW_ENTRY(exp, M_FLOAT) EW_ENTRY(exp2, M_FLOAT)
    EW_ENTRY(expm1, M_FLOAT) EW_ENTRY(log, M_FLOAT) EW_ENTRY(log2, M_FLOAT) EW_ENTRY(log10, M_FLOAT)
    EW_ENTRY(log1p, M_FLOAT) EW_ENTRY(sqrt, M_FLOAT) EW_ENTRY(rsqrt, M_FLOAT) EW_ENTRY(sin, M_FLOAT)
    EW_ENTRY(cos, M_FLOAT) EW_ENTRY(tan, M_FLOAT) EW_ENTRY(asin, M_FLOAT) EW_ENTRY(acos, M_FLOAT)
    EW_ENTRY(atan, M_FLOAT) EW_ENTRY(sinh, M_FLOAT) EW_ENTRY(cosh, M_FLOAT) EW_ENTRY(tanh, M_FLOAT)
    EW_ENTRY(asinh, M_FLOAT) EW_ENTRY(acosh, M_FLOAT) EW_ENTRY(atanh, M_FLOAT)
    EW_ENTRY(sigmoid, M_FLOAT) EW_ENTRY(erf, M_FLOAT) EW_ENTRY(erfc, M_FLOAT)
    EW_ENTRY(erfinv, M_FLOAT) EW_ENTRY(reciprocal, M_FLOAT)
    EW_ENTRY(isnan, M_ALL) EW_ENTRY(isinf, M_ALL) EW_ENTRY(isfinite, M_ALL)
    EW_ENTRY(isposinf, M_ALL) EW_ENTRY(isneginf, M_ALL) EW_ENTRY(signbit, M_ALL)
    EW_ENTRY(bitwise_not, M_INTB)
    /* ternary.c */
    EW_ENTRY(add_alpha, M_NUM) EW_ENTRY(where, M_ALL) EW_ENTRY(clamp, M_NUM) EW_ENTRY(lerp, M_FLOAT)
    EW_ENTRY(round_scaled_up, M_FLOAT) EW_ENTRY(round_scaled_down, M_FLOAT)
    EW_ENTRY(addcmul, M_NUM) EW_ENTRY(addcdiv, M_FLOAT) EW_ENTRY(nan_to_num, M_FLOAT)
    EW_ENTRY(copy, M_COPY)
    /* activation.c */
    EW_ENTRY(gelu, M_FLOAT) EW_ENTRY(gelu_tanh, M_FLOAT) EW_ENTRY(silu, M_FLOAT)
    EW_ENTRY(mish, M_FLOAT) EW_ENTRY(softplus, M_FLOAT) EW_ENTRY(elu, M_FLOAT)
    EW_ENTRY(leaky_relu, M_FLOAT) EW_ENTRY(hardtanh, M_NUM) EW_ENTRY(hardswish, M_FLOAT)
    EW_ENTRY(hardsigmoid, M_FLOAT) EW_ENTRY(log_sigmoid, M_FLOAT) EW_ENTRY(threshold, M_NUM)
    EW_ENTRY(gelu_backward, M_FLOAT) EW_ENTRY(gelu_tanh_backward, M_FLOAT)
    EW_ENTRY(silu_backward, M_FLOAT) EW_ENTRY(glu, M_FLOAT)
};
constexpr int EW_TABLE_LEN = (int)(sizeof ew_table / sizeof ew_table[0]);

/* binary search over the table, sorted by name once (thread-safe static) */
static const EwEntry *ew_find(const char *name) {
    static const bool sorted = [] {
        std::sort(ew_table, ew_table + EW_TABLE_LEN,
                  [](const EwEntry &x, const EwEntry &y) { return strcmp(x.name, y.name) < 0; });
        return true;
    }();
    (void)sorted;
    if (!name) return nullptr;
    int lo = 0, hi = EW_TABLE_LEN - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2, c = strcmp(name, ew_table[mid].name);
        if (c == 0) return &ew_table[mid];
        if (c < 0) hi = mid - 1;
        else lo = mid + 1;
    }
    return nullptr;
}

extern "C" bool em_cuda_has_elementwise(const char *kernel, int compute_dtype) {
    const EwEntry *en = ew_find(kernel);
    return en && compute_dtype >= 0 && compute_dtype < DT_N && en->fn[compute_dtype];
}

extern "C" int em_cuda_elementwise(int dev, const EmCudaElementwise *e) {
    const EwEntry *en = ew_find(e->kernel);
    if (!en || e->compute_dtype < 0 || e->compute_dtype >= DT_N || !en->fn[e->compute_dtype]) {
        em_cuda_set_error("no CUDA elementwise kernel \"%s\" for dtype %d", e->kernel ? e->kernel : "?",
                          e->compute_dtype);
        return -1;
    }
    if (e->nops < 1 || e->nops > NOPS || e->ndim < 0 || e->ndim > MAXD) {
        em_cuda_set_error("elementwise \"%s\": bad launch description", e->kernel);
        return -1;
    }
#ifdef EM_CUDA_EW_HOST_TEST
    return en->fn[e->compute_dtype](dev, e, 0);
#endif
    int cur = -1;
    if (cudaGetDevice(&cur) != cudaSuccess || cur != dev) {
        cudaError_t err = cudaSetDevice(dev);
        if (err != cudaSuccess) {
            em_cuda_set_error("cudaSetDevice(%d): %s", dev, cudaGetErrorString(err));
            return -1;
        }
    }
    return en->fn[e->compute_dtype](dev, e, em_cuda_current_stream_handle(dev));
}
