/* dtype.c — dtype traits, torch's promotion lattice, casts between dtypes,
 * scalars, and the Python `ember.dtype` objects (ember.float32, ...). */
#include "../ember.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NPY_NONE (-1)
/* NumPy type numbers (stable ABI values), so this file needs no NumPy header. */
enum { NPY_BOOL_ = 0, NPY_BYTE_ = 1, NPY_UBYTE_ = 2, NPY_SHORT_ = 3, NPY_INT_ = 5,
       NPY_LONG_ = 7, NPY_FLOAT_ = 11, NPY_DOUBLE_ = 12, NPY_CFLOAT_ = 14,
       NPY_CDOUBLE_ = 15, NPY_HALF_ = 23, NPY_USHORT_ = 4, NPY_UINT_ = 6, NPY_ULONG_ = 8 };

const EmDTypeInfo em_dtype_info[EM_NUM_DTYPES] = {
    [EM_BOOL] = {"bool", "Bool", "bool", 1, false, false, '?', NPY_BOOL_},
    [EM_UINT8] = {"uint8", "Byte", "unsigned char", 1, false, false, 'B', NPY_UBYTE_},
    [EM_INT8] = {"int8", "Char", "signed char", 1, false, true, 'b', NPY_BYTE_},
    [EM_INT16] = {"int16", "Short", "short int", 2, false, true, 'h', NPY_SHORT_},
    [EM_INT32] = {"int32", "Int", "int", 4, false, true, 'i', NPY_INT_},
    [EM_INT64] = {"int64", "Long", "long int", 8, false, true, 'q', NPY_LONG_},
    [EM_FLOAT16] = {"float16", "Half", "c10::Half", 2, true, true, 'e', NPY_HALF_},
    [EM_BFLOAT16] = {"bfloat16", "BFloat16", "c10::BFloat16", 2, true, true, 0, NPY_NONE},
    [EM_FLOAT32] = {"float32", "Float", "float", 4, true, true, 'f', NPY_FLOAT_},
    [EM_FLOAT64] = {"float64", "Double", "double", 8, true, true, 'd', NPY_DOUBLE_},
    /* the buffer protocol spells complex with two characters ("Zf"): none here */
    [EM_COMPLEX64] = {"complex64", "ComplexFloat", "c10::complex<float>", 8, false, true, 0, NPY_CFLOAT_},
    [EM_COMPLEX128] = {"complex128", "ComplexDouble", "c10::complex<double>", 16, false, true, 0, NPY_CDOUBLE_},
    [EM_UINT16] = {"uint16", "UInt16", "uint16_t", 2, false, false, 'H', NPY_USHORT_},
    [EM_UINT32] = {"uint32", "UInt32", "uint32_t", 4, false, false, 'I', NPY_UINT_},
    [EM_UINT64] = {"uint64", "UInt64", "uint64_t", 8, false, false, 'Q', NPY_ULONG_},
};

EmDType em_default_float = EM_FLOAT32;

/* ------------------------------------------------------------- promotion */

EmDType em_promote_types(EmDType a, EmDType b) {
    if (a == b) return a;
    /* Note [wide unsigned dtypes]: with a real float, the float; else torch refuses */
    if (em_is_wide_unsigned(a) || em_is_wide_unsigned(b)) {
        if (em_is_real_float(a)) return a;
        if (em_is_real_float(b)) return b;
        PyErr_Format(PyExc_RuntimeError,
                     "Promotion for uint16, uint32, uint64 types is not supported, attempted to promote %s and %s",
                     em_dtype_name(a), em_dtype_name(b));
        return EM_DTYPE_ERROR;
    }
    /* complex with anything: the complex type whose parts hold both (complex64
     * with float64 is complex128) */
    if (em_is_complex(a) || em_is_complex(b)) {
        EmDType pa = em_is_complex(a) ? em_complex_part(a) : a;
        EmDType pb = em_is_complex(b) ? em_complex_part(b) : b;
        return em_promote_types(pa, pb) == EM_FLOAT64 ? EM_COMPLEX128 : EM_COMPLEX64;
    }
    if (a == EM_BOOL) return b;
    if (b == EM_BOOL) return a;
    bool fa = em_is_float(a), fb = em_is_float(b);
    if (fa != fb) return fa ? a : b; /* int with float: the float */
    if (fa) {
        /* float16 and bfloat16 have no common 16-bit type */
        if ((a == EM_FLOAT16 && b == EM_BFLOAT16) || (a == EM_BFLOAT16 && b == EM_FLOAT16))
            return EM_FLOAT32;
        return a > b ? a : b;
    }
    /* integers: uint8 meets a signed type */
    if (a == EM_UINT8 || b == EM_UINT8) {
        EmDType s = a == EM_UINT8 ? b : a;
        return s == EM_INT8 ? EM_INT16 : s;
    }
    return a > b ? a : b;
}

/* torch.can_cast: no cast that lowers the category (float -> int, int -> bool). */
bool em_can_cast(EmDType from, EmDType to) {
    if (em_is_complex(from) && !em_is_complex(to)) return false;
    if (em_is_float(from) && !em_is_float(to)) return false;
    if (from != EM_BOOL && to == EM_BOOL) return false;
    return true;
}

/* ------------------------------------------------------------------ casts */

/* Reading any dtype as a C value of its compute type. */
#define EM_LOAD_bool(p) (*(const bool *)(p))
#define EM_LOAD_uint8_t(p) (*(const uint8_t *)(p))
#define EM_LOAD_int8_t(p) (*(const int8_t *)(p))
#define EM_LOAD_int16_t(p) (*(const int16_t *)(p))
#define EM_LOAD_int32_t(p) (*(const int32_t *)(p))
#define EM_LOAD_int64_t(p) (*(const int64_t *)(p))
#define EM_LOAD_uint16_t(p) (*(const uint16_t *)(p))
#define EM_LOAD_uint32_t(p) (*(const uint32_t *)(p))
#define EM_LOAD_uint64_t(p) (*(const uint64_t *)(p))
#define EM_LOAD_float(p) (*(const float *)(p))
#define EM_LOAD_double(p) (*(const double *)(p))

/* Converting a value v of source C type S to destination type D. Floats go to
 * small integers through int32 (what x86 does for torch's static_cast), so
 * out-of-range values wrap or saturate to INT_MIN the same way. */
#define TO_bool(v) ((v) != 0)
#define TO_uint8_t(v) ((uint8_t)(int32_t)(v))
#define TO_int8_t(v) ((int8_t)(int32_t)(v))
#define TO_int16_t(v) ((int16_t)(int32_t)(v))
#define TO_int32_t(v) ((int32_t)(v))
#define TO_int64_t(v) ((int64_t)(v))
#define TO_uint16_t(v) ((uint16_t)(int32_t)(v))
#define TO_uint32_t(v) ((uint32_t)(int64_t)(v))
#define TO_uint64_t(v) _Generic((v), float: em_real_to_u64(v), double: em_real_to_u64(v), default: (uint64_t)(v))
#define TO_float(v) ((float)(v))
#define TO_double(v) ((double)(v))

/* A float to uint64 as torch's static_cast compiles on x86: values from 2**63
 * up are offset by 2**63 and converted as signed, and a value outside the
 * signed range converts to INT64_MIN (what cvttsd2si gives), so -3.5 -> 2**64-3
 * and 1e20 -> 0. Written out because the C conversion is undefined there. */
static inline int64_t em_real_to_i64(double x) {
    return x >= -9223372036854775808.0 && x < 9223372036854775808.0 ? (int64_t)x : INT64_MIN;
}
static inline uint64_t em_real_to_u64(double x) {
    if (x >= 9223372036854775808.0)
        return (uint64_t)em_real_to_i64(x - 9223372036854775808.0) ^ ((uint64_t)1 << 63);
    return (uint64_t)em_real_to_i64(x);
}

#define CAST_FN(SN, S, DN, D)                                                  \
    static void cast_##SN##_##DN(const char *src, int64_t ss, char *dst,      \
                                 int64_t ds, int64_t n) {                      \
        if (ss == sizeof(S) && ds == sizeof(D)) {                              \
            const S *s = (const S *)src;                                       \
            D *d = (D *)dst;                                                   \
            for (int64_t i = 0; i < n; i++) d[i] = TO_##D(s[i]);               \
        } else {                                                               \
            for (int64_t i = 0; i < n; i++)                                    \
                *(D *)(dst + i * ds) = TO_##D(*(const S *)(src + i * ss));     \
        }                                                                      \
    }

/* Plain C types: every pair. */
#define CAST_ROW(SN, S)                                                        \
    CAST_FN(SN, S, b, bool) CAST_FN(SN, S, u8, uint8_t) CAST_FN(SN, S, i8, int8_t)  \
    CAST_FN(SN, S, i16, int16_t) CAST_FN(SN, S, i32, int32_t)                  \
    CAST_FN(SN, S, i64, int64_t) CAST_FN(SN, S, f32, float) CAST_FN(SN, S, f64, double) \
    CAST_FN(SN, S, u16, uint16_t) CAST_FN(SN, S, u32, uint32_t) CAST_FN(SN, S, u64, uint64_t)
CAST_ROW(b, bool)
CAST_ROW(u8, uint8_t)
CAST_ROW(i8, int8_t)
CAST_ROW(i16, int16_t)
CAST_ROW(i32, int32_t)
CAST_ROW(i64, int64_t)
CAST_ROW(f32, float)
CAST_ROW(f64, double)
CAST_ROW(u16, uint16_t)
CAST_ROW(u32, uint32_t)
CAST_ROW(u64, uint64_t)
#undef CAST_ROW

/* Contiguous half runs (declared in ember.h): bfloat16 written branch-free
 * so the loops vectorize; float16 through the F16C instructions where the
 * CPU has them (exact both ways, round to nearest even, NaN quieted as
 * em_f32_to_f16 does). EMBER_F16C=0 forces the portable loops (tests run both). */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define EM_F16C_BUILT 1
__attribute__((target("avx,f16c"))) static void f16_to_f32_f16c(const uint16_t *h, float *f, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(f + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + i))));
    for (; i < n; i++) f[i] = em_f16_to_f32(h[i]);
}
__attribute__((target("avx,f16c"))) static void f32_to_f16_f16c(const float *f, uint16_t *h, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(h + i), _mm256_cvtps_ph(_mm256_loadu_ps(f + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) h[i] = em_f32_to_f16(f[i]);
}
static bool use_f16c(void) {
    static int cached = -1; /* racing first calls (kernel threads) store the same answer */
    int c = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (c < 0) {
        const char *env = getenv("EMBER_F16C");
        c = (!env || strcmp(env, "0")) && __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
        __atomic_store_n(&cached, c, __ATOMIC_RELAXED);
    }
    return c;
}
#else
#define EM_F16C_BUILT 0
#endif

EM_CLONES void em_half_to_f32_run(const uint16_t *h, float *f, int64_t n, bool bf) {
#if EM_F16C_BUILT
    if (!bf && use_f16c()) {
        f16_to_f32_f16c(h, f, n);
        return;
    }
#endif
    if (bf) {
        for (int64_t i = 0; i < n; i++) {
            uint32_t bits = (uint32_t)h[i] << 16;
            memcpy(&f[i], &bits, 4);
        }
    } else {
        for (int64_t i = 0; i < n; i++) f[i] = em_f16_to_f32(h[i]);
    }
}

EM_CLONES void em_f32_to_half_run(const float *f, uint16_t *h, int64_t n, bool bf) {
#if EM_F16C_BUILT
    if (!bf && use_f16c()) {
        f32_to_f16_f16c(f, h, n);
        return;
    }
#endif
    if (bf) {
        for (int64_t i = 0; i < n; i++) {
            uint32_t x;
            memcpy(&x, &f[i], 4);
            uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1)) >> 16;
            uint32_t quiet_nan = (x >> 16) | 0x40;
            h[i] = (uint16_t)((x & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
        }
    } else {
        for (int64_t i = 0; i < n; i++) h[i] = em_f32_to_f16(f[i]);
    }
}

/* Half types: through float (contiguous runs to or from float32 directly). */
#define HALF_CASTS(HN, TO_F32, FROM_F32)                                       \
    static void cast_##HN##_to(const char *src, int64_t ss, char *dst,         \
                               int64_t ds, int64_t n, EmDType to) {            \
        if (to == EM_FLOAT32 && ss == 2 && ds == 4) {                          \
            em_half_to_f32_run((const uint16_t *)src, (float *)dst, n, HALF_IS_BF_##HN); \
            return;                                                            \
        }                                                                      \
        float buf[256];                                                        \
        for (int64_t i0 = 0; i0 < n; i0 += 256) {                              \
            int64_t m = n - i0 < 256 ? n - i0 : 256;                           \
            for (int64_t i = 0; i < m; i++)                                    \
                buf[i] = TO_F32(*(const uint16_t *)(src + (i0 + i) * ss));     \
            em_cast_fns[EM_FLOAT32][to]((const char *)buf, 4, dst + i0 * ds,   \
                                        ds, m);                                \
        }                                                                      \
    }                                                                          \
    static void cast_##HN##_from(const char *src, int64_t ss, char *dst,       \
                                 int64_t ds, int64_t n, EmDType from) {        \
        if (from == EM_FLOAT32 && ss == 4 && ds == 2) {                        \
            em_f32_to_half_run((const float *)src, (uint16_t *)dst, n, HALF_IS_BF_##HN); \
            return;                                                            \
        }                                                                      \
        float buf[256];                                                        \
        for (int64_t i0 = 0; i0 < n; i0 += 256) {                              \
            int64_t m = n - i0 < 256 ? n - i0 : 256;                           \
            em_cast_fns[from][EM_FLOAT32](src + i0 * ss, ss, (char *)buf, 4, m); \
            for (int64_t i = 0; i < m; i++)                                    \
                *(uint16_t *)(dst + (i0 + i) * ds) = FROM_F32(buf[i]);         \
        }                                                                      \
    }
#define HALF_IS_BF_f16 false
#define HALF_IS_BF_bf16 true
HALF_CASTS(f16, em_f16_to_f32, em_f32_to_f16)
HALF_CASTS(bf16, em_bf16_to_f32, em_f32_to_bf16)

/* float64 -> half goes through float32 (two roundings), as torch's does. */

#define HALF_WRAPPERS(HN, PN, PE)                                              \
    static void cast_##HN##_##PN(const char *s, int64_t ss, char *d,           \
                                 int64_t ds, int64_t n) {                      \
        cast_##HN##_to(s, ss, d, ds, n, PE);                                   \
    }                                                                          \
    static void cast_##PN##_##HN(const char *s, int64_t ss, char *d,           \
                                 int64_t ds, int64_t n) {                      \
        cast_##HN##_from(s, ss, d, ds, n, PE);                                 \
    }
#define HALF_ALL(HN)                                                           \
    HALF_WRAPPERS(HN, b, EM_BOOL) HALF_WRAPPERS(HN, u8, EM_UINT8)              \
    HALF_WRAPPERS(HN, i8, EM_INT8) HALF_WRAPPERS(HN, i16, EM_INT16)            \
    HALF_WRAPPERS(HN, i32, EM_INT32) HALF_WRAPPERS(HN, i64, EM_INT64)          \
    HALF_WRAPPERS(HN, f32, EM_FLOAT32) HALF_WRAPPERS(HN, f64, EM_FLOAT64)    \
    HALF_WRAPPERS(HN, u16, EM_UINT16) HALF_WRAPPERS(HN, u32, EM_UINT32)        \
    HALF_WRAPPERS(HN, u64, EM_UINT64)
HALF_ALL(f16)
HALF_ALL(bf16)

static void cast_f16_bf16(const char *s, int64_t ss, char *d, int64_t ds, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        *(uint16_t *)(d + i * ds) = em_f32_to_bf16(em_f16_to_f32(*(const uint16_t *)(s + i * ss)));
}
static void cast_bf16_f16(const char *s, int64_t ss, char *d, int64_t ds, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        *(uint16_t *)(d + i * ds) = em_f32_to_f16(em_bf16_to_f32(*(const uint16_t *)(s + i * ss)));
}
static void cast_same16(const char *s, int64_t ss, char *d, int64_t ds, int64_t n) {
    for (int64_t i = 0; i < n; i++) *(uint16_t *)(d + i * ds) = *(const uint16_t *)(s + i * ss);
}

/* Complex types: real to complex with a zero imaginary part; complex to real
 * keeps the real part (torch's copy_ does the same; its to() warns). C's own
 * conversions do both; to integers and bool through the real part, as torch
 * (so complex -> bool tests the real part only, like torch's static_cast). */
#define CREAL_bool(v) ((v) != 0)
#define CX_FN(SN, S, DN, D, CONV)                                              \
    static void cast_##SN##_##DN(const char *src, int64_t ss, char *dst,      \
                                 int64_t ds, int64_t n) {                      \
        for (int64_t i = 0; i < n; i++) {                                      \
            S v = *(const S *)(src + i * ss);                                  \
            *(D *)(dst + i * ds) = CONV;                                       \
        }                                                                      \
    }
#define CX_FROM(CN, C, CR)                                                     \
    CX_FN(CN, C, b, bool, (__real__ v) != 0 || (__imag__ v) != 0)             \
    CX_FN(CN, C, u8, uint8_t, TO_uint8_t((CR)__real__ v))                      \
    CX_FN(CN, C, i8, int8_t, TO_int8_t((CR)__real__ v))                        \
    CX_FN(CN, C, i16, int16_t, TO_int16_t((CR)__real__ v))                     \
    CX_FN(CN, C, i32, int32_t, TO_int32_t((CR)__real__ v))                     \
    CX_FN(CN, C, i64, int64_t, TO_int64_t((CR)__real__ v))                     \
    CX_FN(CN, C, f16, uint16_t, em_f32_to_f16((float)__real__ v))              \
    CX_FN(CN, C, bf16, uint16_t, em_f32_to_bf16((float)__real__ v))            \
    CX_FN(CN, C, f32, float, (float)__real__ v)                                \
    CX_FN(CN, C, f64, double, (double)__real__ v)                              \
    CX_FN(CN, C, c64, float _Complex, (float _Complex)v)                       \
    CX_FN(CN, C, c128, double _Complex, (double _Complex)v)                    \
    CX_FN(CN, C, u16, uint16_t, TO_uint16_t((CR)__real__ v))                   \
    CX_FN(CN, C, u32, uint32_t, TO_uint32_t((CR)__real__ v))                   \
    CX_FN(CN, C, u64, uint64_t, TO_uint64_t((CR)__real__ v))
CX_FROM(c64, float _Complex, float)
CX_FROM(c128, double _Complex, double)
#define CX_TO(SN, S, LOAD)                                                     \
    CX_FN(SN, S, c64, float _Complex, (float _Complex)(LOAD))                  \
    CX_FN(SN, S, c128, double _Complex, (double _Complex)(LOAD))
CX_TO(b, bool, v)
CX_TO(u8, uint8_t, v)
CX_TO(i8, int8_t, v)
CX_TO(i16, int16_t, v)
CX_TO(i32, int32_t, v)
CX_TO(i64, int64_t, v)
CX_TO(f16, uint16_t, em_f16_to_f32(v))
CX_TO(bf16, uint16_t, em_bf16_to_f32(v))
CX_TO(f32, float, v)
CX_TO(f64, double, v)
CX_TO(u16, uint16_t, v)
CX_TO(u32, uint32_t, v)
CX_TO(u64, uint64_t, v)

#define ROW(SN)                                                                \
    {cast_##SN##_b, cast_##SN##_u8, cast_##SN##_i8, cast_##SN##_i16,           \
     cast_##SN##_i32, cast_##SN##_i64, cast_##SN##_f16, cast_##SN##_bf16,      \
     cast_##SN##_f32, cast_##SN##_f64, cast_##SN##_c64, cast_##SN##_c128,      \
     cast_##SN##_u16, cast_##SN##_u32, cast_##SN##_u64}
#define cast_f16_f16 cast_same16
#define cast_bf16_bf16 cast_same16
EmCastFn em_cast_fns[EM_NUM_DTYPES][EM_NUM_DTYPES] = {
    ROW(b), ROW(u8), ROW(i8), ROW(i16), ROW(i32), ROW(i64), ROW(f16), ROW(bf16), ROW(f32), ROW(f64),
    ROW(c64), ROW(c128), ROW(u16), ROW(u32), ROW(u64),
};

/* ---------------------------------------------------------------- scalars */

void em_scalar_store(EmScalar s, EmDType d, void *dst) {
    if (s.kind == 'c') {
        double _Complex z;
        __real__ z = s.v.f;
        __imag__ z = s.im;
        em_cast_fns[EM_COMPLEX128][d]((const char *)&z, 0, dst, 0, 1);
    } else if (s.kind == 'f')
        em_cast_fns[EM_FLOAT64][d]((const char *)&s.v.f, 0, dst, 0, 1);
    else if (s.kind == 'b') {
        bool b = s.v.i != 0;
        em_cast_fns[EM_BOOL][d]((const char *)&b, 0, dst, 0, 1);
    } else
        em_cast_fns[s.kind == 'u' ? EM_UINT64 : EM_INT64][d]((const char *)&s.v.i, 0, dst, 0, 1);
}

EmScalar em_scalar_load(const void *src, EmDType d) {
    EmScalar s;
    s.im = 0;
    if (em_is_complex(d)) {
        double _Complex z;
        em_cast_fns[d][EM_COMPLEX128](src, 0, (char *)&z, 0, 1);
        s.kind = 'c';
        s.v.f = __real__ z;
        s.im = __imag__ z;
    } else if (em_is_float(d)) {
        s.kind = 'f';
        em_cast_fns[d][EM_FLOAT64](src, 0, (char *)&s.v.f, 0, 1);
    } else {
        s.kind = d == EM_BOOL ? 'b' : 'i';
        em_cast_fns[d][EM_INT64](src, 0, (char *)&s.v.i, 0, 1);
        if (d == EM_UINT64 && s.v.i < 0) s.kind = 'u';
    }
    return s;
}

int em_scalar_from_py(PyObject *o, EmScalar *out) {
    out->im = 0;
    if (PyComplex_Check(o)) { /* Python complex and NumPy's complex128 scalars */
        out->kind = 'c';
        out->v.f = PyComplex_RealAsDouble(o);
        out->im = PyComplex_ImagAsDouble(o);
        return 0;
    }
    if (PyBool_Check(o)) {
        out->kind = 'b';
        out->v.i = o == Py_True;
        return 0;
    }
    if (PyLong_Check(o)) {
        int overflow;
        long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (overflow) { /* torch's Scalars hold up to 2**64 - 1, as uint64 */
            /* beyond: Python's OverflowError ("int too big to convert", "can't
             * convert negative int to unsigned"), as torch's */
            unsigned long long u = PyLong_AsUnsignedLongLong(o);
            if (u == (unsigned long long)-1 && PyErr_Occurred()) return -1;
            out->kind = 'u';
            out->v.i = (int64_t)u;
            return 0;
        }
        if (v == -1 && PyErr_Occurred()) return -1;
        out->kind = 'i';
        out->v.i = v;
        return 0;
    }
    if (PyFloat_Check(o)) {
        out->kind = 'f';
        out->v.f = PyFloat_AS_DOUBLE(o);
        return 0;
    }
    if (em_is_tensor(o)) {
        EmTensor *t = (EmTensor *)o;
        if (t->numel != 1) {
            PyErr_Format(PyExc_RuntimeError,
                         "a Tensor with %lld elements cannot be converted to Scalar",
                         (long long)t->numel);
            return -1;
        }
        if (!em_is_cpu(t)) { /* a GPU scalar: read through the host */
            EmTensor *h = em_to_device(t, em_cpu(), false);
            if (!h) return -1;
            *out = em_scalar_load(em_data(h), (EmDType)h->dtype);
            Py_DECREF(h);
            return 0;
        }
        *out = em_scalar_load(em_data(t), (EmDType)t->dtype);
        return 0;
    }
    /* NumPy scalars and other numbers: via __index__ or __float__ */
    if (PyIndex_Check(o)) {
        PyObject *i = PyNumber_Index(o);
        if (!i) return -1;
        int r = em_scalar_from_py(i, out);
        Py_DECREF(i);
        return r;
    }
    if (!PyComplex_Check(o) && Py_TYPE(o)->tp_as_number && Py_TYPE(o)->tp_as_number->nb_float) {
        double v = PyFloat_AsDouble(o);
        if (v == -1.0 && PyErr_Occurred()) return -1;
        out->kind = 'f';
        out->v.f = v;
        return 0;
    }
    PyErr_Format(PyExc_TypeError, "expected a number, not %.100s", Py_TYPE(o)->tp_name);
    return -1;
}

int em_scalar_check_range(EmScalar s, EmDType d) {
    static const char *ctype[EM_NUM_DTYPES] = {
        [EM_UINT8] = "uint8_t", [EM_INT8] = "int8_t", [EM_INT16] = "int16_t", [EM_INT32] = "int",
        [EM_INT64] = "int64_t", [EM_UINT16] = "uint16_t", [EM_UINT32] = "uint32_t", [EM_UINT64] = "uint64_t"};
    if (!em_is_int(d) || s.kind == 'b') return 0;
    const bool sgn = em_dtype_info[d].is_signed;
    const int bits = 8 * em_itemsize(d);
    bool ok;
    if (s.kind == 'f' || s.kind == 'c') {
        double lim = ldexp(1.0, sgn ? bits - 1 : bits); /* the first value out of range */
        ok = s.v.f >= (sgn ? -lim : -(lim - 1)) && (bits == 64 ? s.v.f < lim : s.v.f <= lim - 1);
    } else if (s.kind == 'u') {
        ok = d == EM_UINT64;
    } else if (bits == 64) {
        ok = true; /* a negative int wraps into uint64, as torch */
    } else {
        int64_t max = sgn ? ((int64_t)1 << (bits - 1)) - 1 : ((int64_t)1 << bits) - 1;
        ok = s.v.i >= (sgn ? -max - 1 : -max) && s.v.i <= max; /* unsigned: -1 wraps, as torch */
    }
    if (ok) return 0;
    PyErr_Format(PyExc_RuntimeError, "value cannot be converted to type %s without overflow", ctype[d]);
    return -1;
}

PyObject *em_scalar_to_py(EmScalar s) {
    if (s.kind == 'c') return PyComplex_FromDoubles(s.v.f, s.im);
    if (s.kind == 'f') return PyFloat_FromDouble(s.v.f);
    if (s.kind == 'b') return PyBool_FromLong((long)s.v.i);
    if (s.kind == 'u') return PyLong_FromUnsignedLongLong((unsigned long long)s.v.i);
    return PyLong_FromLongLong(s.v.i);
}

/* -------------------------------------------------------- Python dtypes */

/* Note [dtypes without tensors]: torch dtypes ember has no storage or kernels
 * for. Their objects exist, with torch's traits, so that code naming them
 * loads (safetensors' and transformers' dtype tables, finfo(float8_e4m3fn));
 * every path that turns a dtype object into an EmDType (em_dtype_from_py)
 * refuses them, so making or casting to a tensor of one raises RuntimeError.
 * Their objects carry dtype EM_NUM_DTYPES + index into this table. */
typedef struct {
    const char *name;
    int itemsize;
    bool is_float, is_signed, is_complex;
} EmNoTensorDType;

static const EmNoTensorDType no_tensor_dtypes[] = {
    {"float8_e4m3fn", 1, true, true, false},
    {"float8_e5m2", 1, true, true, false},   {"float8_e4m3fnuz", 1, true, true, false},
    {"float8_e5m2fnuz", 1, true, true, false}, {"complex32", 4, false, true, true},
};
#define EM_NUM_NO_TENSOR_DTYPES ((int)(sizeof no_tensor_dtypes / sizeof no_tensor_dtypes[0]))

static EmDTypeObject dtype_objects[EM_NUM_DTYPES + EM_NUM_NO_TENSOR_DTYPES];

PyObject *em_dtype_object(EmDType d) { return (PyObject *)&dtype_objects[d]; }

static const EmNoTensorDType *no_tensor_info(const EmDTypeObject *o) {
    return (int)o->dtype >= EM_NUM_DTYPES ? &no_tensor_dtypes[o->dtype - EM_NUM_DTYPES] : NULL;
}

int em_dtype_from_py(PyObject *o, EmDType *out) {
    if (Py_TYPE(o) == &EmDTypeType) {
        const EmNoTensorDType *x = no_tensor_info((EmDTypeObject *)o);
        if (x) {
            PyErr_Format(PyExc_RuntimeError,
                         "ember has no tensors of dtype ember.%s: it knows the dtype's traits (finfo/iinfo, "
                         "itemsize) but has no storage or kernels for it; convert the data to a dtype ember "
                         "has (float32, bfloat16, int64, ...) first", x->name);
            return -1;
        }
        *out = ((EmDTypeObject *)o)->dtype;
        return 0;
    }
    /* torch accepts the Python types as dtypes */
    if (o == (PyObject *)&PyFloat_Type) { *out = EM_FLOAT64; return 0; }
    if (o == (PyObject *)&PyComplex_Type) { *out = EM_COMPLEX128; return 0; }
    if (o == (PyObject *)&PyLong_Type) { *out = EM_INT64; return 0; }
    if (o == (PyObject *)&PyBool_Type) { *out = EM_BOOL; return 0; }
    PyErr_Format(PyExc_TypeError, "expected an ember.dtype, not %.100s", Py_TYPE(o)->tp_name);
    return -1;
}

static const char *dtype_name(EmDTypeObject *self) {
    const EmNoTensorDType *x = no_tensor_info(self);
    return x ? x->name : em_dtype_info[self->dtype].name;
}

static PyObject *dtype_repr(EmDTypeObject *self) {
    return PyUnicode_FromFormat("ember.%s", dtype_name(self));
}

static PyObject *dtype_is_floating_point(EmDTypeObject *self, void *c) {
    const EmNoTensorDType *x = no_tensor_info(self);
    return PyBool_FromLong(x ? x->is_float : em_is_real_float(self->dtype));
}
static PyObject *dtype_is_signed(EmDTypeObject *self, void *c) {
    const EmNoTensorDType *x = no_tensor_info(self);
    return PyBool_FromLong(x ? x->is_signed : em_dtype_info[self->dtype].is_signed);
}
static PyObject *dtype_is_complex(EmDTypeObject *self, void *c) {
    const EmNoTensorDType *x = no_tensor_info(self);
    return PyBool_FromLong(x ? x->is_complex : em_is_complex(self->dtype));
}
static PyObject *dtype_itemsize(EmDTypeObject *self, void *c) {
    const EmNoTensorDType *x = no_tensor_info(self);
    return PyLong_FromLong(x ? x->itemsize : em_itemsize(self->dtype));
}
static PyObject *dtype_reduce(EmDTypeObject *self, PyObject *unused) {
    /* pickled as the global ember.<name> */
    return PyUnicode_FromString(dtype_name(self));
}
static PyObject *dtype_to_real(EmDTypeObject *self, PyObject *unused) {
    if (!no_tensor_info(self) && em_is_complex(self->dtype))
        return Py_NewRef(em_dtype_object(em_complex_part(self->dtype)));
    return Py_NewRef(self);
}
static PyObject *dtype_to_complex(EmDTypeObject *self, PyObject *unused) {
    if (no_tensor_info(self) || !em_is_float(self->dtype) || self->dtype == EM_BFLOAT16) {
        PyErr_Format(PyExc_RuntimeError, "Unknown Complex ScalarType for %s",
                     no_tensor_info(self) ? dtype_name(self) : em_dtype_name(self->dtype));
        return NULL;
    }
    if (self->dtype == EM_FLOAT16) { /* torch's complex32: ember has no tensors of it */
        PyErr_SetString(PyExc_RuntimeError, "ember has no complex32 (chalf) tensors");
        return NULL;
    }
    return Py_NewRef(em_dtype_object(em_complex_of(self->dtype)));
}

static PyGetSetDef dtype_getset[] = {
    {"is_floating_point", (getter)dtype_is_floating_point, NULL, NULL, NULL},
    {"is_signed", (getter)dtype_is_signed, NULL, NULL, NULL},
    {"is_complex", (getter)dtype_is_complex, NULL, NULL, NULL},
    {"itemsize", (getter)dtype_itemsize, NULL, NULL, NULL},
    {NULL},
};
static PyMethodDef dtype_methods[] = {
    {"__reduce__", (PyCFunction)dtype_reduce, METH_NOARGS, NULL},
    {"to_real", (PyCFunction)dtype_to_real, METH_NOARGS, NULL},
    {"to_complex", (PyCFunction)dtype_to_complex, METH_NOARGS, NULL},
    {NULL},
};

PyTypeObject EmDTypeType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ember.dtype",
    .tp_basicsize = sizeof(EmDTypeObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_repr = (reprfunc)dtype_repr,
    .tp_getset = dtype_getset,
    .tp_methods = dtype_methods,
    .tp_doc = "The data type of a tensor's elements (ember.float32, ...).",
};

int em_init_dtypes(PyObject *m) {
    if (PyType_Ready(&EmDTypeType) < 0) return -1;
    if (PyModule_AddObjectRef(m, "dtype", (PyObject *)&EmDTypeType) < 0) return -1;
    PyObject *all = PyDict_New();
    if (!all) return -1;
    for (int d = 0; d < EM_NUM_DTYPES; d++) {
        PyObject_Init((PyObject *)&dtype_objects[d], &EmDTypeType);
        dtype_objects[d].dtype = (EmDType)d;
        if (PyDict_SetItemString(all, em_dtype_info[d].name, (PyObject *)&dtype_objects[d]) < 0)
            goto fail;
    }
    PyObject *others = PyDict_New(); /* Note [dtypes without tensors] */
    if (!others) goto fail;
    for (int k = 0; k < EM_NUM_NO_TENSOR_DTYPES; k++) {
        EmDTypeObject *o = &dtype_objects[EM_NUM_DTYPES + k];
        PyObject_Init((PyObject *)o, &EmDTypeType);
        o->dtype = (EmDType)(EM_NUM_DTYPES + k);
        if (PyDict_SetItemString(others, no_tensor_dtypes[k].name, (PyObject *)o) < 0) {
            Py_DECREF(others);
            goto fail;
        }
    }
    if (PyModule_AddObject(m, "_dtypes_without_tensors", others) < 0) {
        Py_DECREF(others);
        goto fail;
    }
    if (PyModule_AddObjectRef(m, "_dtypes", all) < 0) goto fail;
    Py_DECREF(all);
    return 0;
fail:
    Py_DECREF(all);
    return -1;
}
