/* loops.h — macros that stamp out elementwise kernels (Note [kernels] in
 * ember.h) and their per-dtype tables. A kernel body is an expression in the
 * element variables (x for unary; a, b for binary; a, b, c[, e] beyond), so
 * each op's math is written once and instantiated for every dtype it
 * supports. The contiguous and scalar-broadcast branches are plain indexed
 * loops that the compiler vectorizes. */
#ifndef EMBER_CPU_LOOPS_H
#define EMBER_CPU_LOOPS_H

#include "../ember.h"
#include "math.h"

/* Type lists: X(args..., DTYPE enum suffix, C type) */
#define EM_TYPES_FLOAT(X, ...) X(__VA_ARGS__, FLOAT32, float) X(__VA_ARGS__, FLOAT64, double)
#define EM_TYPES_INT(X, ...)                                                   \
    X(__VA_ARGS__, UINT8, uint8_t) X(__VA_ARGS__, INT8, int8_t)                \
    X(__VA_ARGS__, INT16, int16_t) X(__VA_ARGS__, INT32, int32_t)              \
    X(__VA_ARGS__, INT64, int64_t)
#define EM_TYPES_BOOL(X, ...) X(__VA_ARGS__, BOOL, bool)
#define EM_TYPES_INTB(X, ...) EM_TYPES_BOOL(X, __VA_ARGS__) EM_TYPES_INT(X, __VA_ARGS__)
#define EM_TYPES_NUM(X, ...) EM_TYPES_INT(X, __VA_ARGS__) EM_TYPES_FLOAT(X, __VA_ARGS__)
#define EM_TYPES_ALL(X, ...) EM_TYPES_INTB(X, __VA_ARGS__) EM_TYPES_FLOAT(X, __VA_ARGS__)
/* C99 complex types: the arithmetic operators and == work on them as they are */
#define EM_TYPES_COMPLEX(X, ...)                                               \
    X(__VA_ARGS__, COMPLEX64, float _Complex) X(__VA_ARGS__, COMPLEX128, double _Complex)
#define EM_TYPES_NUMC(X, ...) EM_TYPES_NUM(X, __VA_ARGS__) EM_TYPES_COMPLEX(X, __VA_ARGS__)
#define EM_TYPES_FLOATC(X, ...) EM_TYPES_FLOAT(X, __VA_ARGS__) EM_TYPES_COMPLEX(X, __VA_ARGS__)
#define EM_TYPES_ALLC(X, ...) EM_TYPES_ALL(X, __VA_ARGS__) EM_TYPES_COMPLEX(X, __VA_ARGS__)
/* uint16/32/64 (Note [wide unsigned dtypes]): listed only by the ops torch has
 * kernels for them */
#define EM_TYPES_UWIDE(X, ...)                                                 \
    X(__VA_ARGS__, UINT16, uint16_t) X(__VA_ARGS__, UINT32, uint32_t) X(__VA_ARGS__, UINT64, uint64_t)
#define EM_TYPES_INTU(X, ...) EM_TYPES_INT(X, __VA_ARGS__) EM_TYPES_UWIDE(X, __VA_ARGS__)
#define EM_TYPES_INTBU(X, ...) EM_TYPES_INTB(X, __VA_ARGS__) EM_TYPES_UWIDE(X, __VA_ARGS__)
#define EM_TYPES_ALLCU(X, ...) EM_TYPES_ALLC(X, __VA_ARGS__) EM_TYPES_UWIDE(X, __VA_ARGS__)

#define EM_KNAME(name, DT) k_##name##_##DT

/* The body of a unary loop over (d, s, n): out[i] = EXPR(x), with a
 * contiguous fast path the compiler vectorizes. */
#define EM_UNARY_BODY(EXPR, OT, T)                                             \
    if (s[0] == sizeof(OT) && s[1] == sizeof(T)) {                             \
        OT *o = (OT *)d[0];                                                    \
        const T *in = (const T *)d[1];                                         \
        for (int64_t i = 0; i < n; i++) {                                      \
            T x = in[i];                                                       \
            o[i] = (OT)(EXPR);                                                 \
        }                                                                      \
    } else {                                                                   \
        for (int64_t i = 0; i < n; i++) {                                      \
            T x = *(const T *)(d[1] + i * s[1]);                               \
            *(OT *)(d[0] + i * s[0]) = (OT)(EXPR);                             \
        }                                                                      \
    }

/* out[i] = EXPR(x) */
#define EM_INST_UNARY_OT(name, EXPR, OT, DT, T)                                \
    static void EM_KNAME(name, DT)(char **d, const int64_t *s, int64_t n) {    \
        EM_UNARY_BODY(EXPR, OT, T)                                             \
    }
#define EM_INST_UNARY(name, EXPR, DT, T) EM_INST_UNARY_OT(name, EXPR, T, DT, T)
#define EM_INST_UNARY_BOOL(name, EXPR, DT, T) EM_INST_UNARY_OT(name, EXPR, bool, DT, T)

/* out[i] = EXPR(a, b), with branches for a scalar on either side */
#define EM_INST_BINARY_OT(name, EXPR, OT, DT, T)                               \
    static void EM_KNAME(name, DT)(char **d, const int64_t *s, int64_t n) {    \
        OT *o = (OT *)d[0];                                                    \
        const T *pa = (const T *)d[1], *pb = (const T *)d[2];                  \
        if (s[0] == sizeof(OT) && s[1] == sizeof(T) && s[2] == sizeof(T)) {    \
            for (int64_t i = 0; i < n; i++) {                                  \
                T a = pa[i], b = pb[i];                                        \
                o[i] = (OT)(EXPR);                                             \
            }                                                                  \
        } else if (s[0] == sizeof(OT) && s[1] == sizeof(T) && s[2] == 0) {     \
            const T b = *pb;                                                   \
            for (int64_t i = 0; i < n; i++) {                                  \
                T a = pa[i];                                                   \
                o[i] = (OT)(EXPR);                                             \
            }                                                                  \
        } else if (s[0] == sizeof(OT) && s[1] == 0 && s[2] == sizeof(T)) {     \
            const T a = *pa;                                                   \
            for (int64_t i = 0; i < n; i++) {                                  \
                T b = pb[i];                                                   \
                o[i] = (OT)(EXPR);                                             \
            }                                                                  \
        } else {                                                               \
            for (int64_t i = 0; i < n; i++) {                                  \
                T a = *(const T *)(d[1] + i * s[1]);                           \
                T b = *(const T *)(d[2] + i * s[2]);                           \
                *(OT *)(d[0] + i * s[0]) = (OT)(EXPR);                         \
            }                                                                  \
        }                                                                      \
    }
#define EM_INST_BINARY(name, EXPR, DT, T) EM_INST_BINARY_OT(name, EXPR, T, DT, T)
#define EM_INST_BINARY_BOOL(name, EXPR, DT, T) EM_INST_BINARY_OT(name, EXPR, bool, DT, T)

/* out[i] = EXPR(a, b, c); operand types TA (first input) and T (others) */
#define EM_INST_TERNARY_TA(name, EXPR, TA, DT, T)                              \
    static void EM_KNAME(name, DT)(char **d, const int64_t *s, int64_t n) {    \
        if (s[0] == sizeof(T) && s[1] == sizeof(TA) && s[2] == sizeof(T) &&    \
            s[3] == sizeof(T)) {                                               \
            T *o = (T *)d[0];                                                  \
            const TA *pa = (const TA *)d[1];                                   \
            const T *pb = (const T *)d[2], *pc = (const T *)d[3];              \
            for (int64_t i = 0; i < n; i++) {                                  \
                TA a = pa[i];                                                  \
                T b = pb[i], c = pc[i];                                        \
                o[i] = (T)(EXPR);                                              \
            }                                                                  \
        } else {                                                               \
            for (int64_t i = 0; i < n; i++) {                                  \
                TA a = *(const TA *)(d[1] + i * s[1]);                         \
                T b = *(const T *)(d[2] + i * s[2]);                           \
                T c = *(const T *)(d[3] + i * s[3]);                           \
                *(T *)(d[0] + i * s[0]) = (T)(EXPR);                           \
            }                                                                  \
        }                                                                      \
    }
#define EM_INST_TERNARY(name, EXPR, DT, T) EM_INST_TERNARY_TA(name, EXPR, T, DT, T)
#define EM_INST_TERNARY_BOOLA(name, EXPR, DT, T) EM_INST_TERNARY_TA(name, EXPR, bool, DT, T)

/* out[i] = EXPR(a, b, c, e) */
#define EM_INST_QUATERNARY(name, EXPR, DT, T)                                  \
    static void EM_KNAME(name, DT)(char **d, const int64_t *s, int64_t n) {    \
        for (int64_t i = 0; i < n; i++) {                                      \
            T a = *(const T *)(d[1] + i * s[1]);                               \
            T b = *(const T *)(d[2] + i * s[2]);                               \
            T c = *(const T *)(d[3] + i * s[3]);                               \
            T e = *(const T *)(d[4] + i * s[4]);                               \
            *(T *)(d[0] + i * s[0]) = (T)(EXPR);                               \
        }                                                                      \
    }

/* A table entry and the table itself:
 *   EM_TABLE(exp, EM_TYPES_FLOAT(EM_ENTRY, exp)) */
#define EM_ENTRY(name, DT, T) [EM_##DT] = EM_KNAME(name, DT),
#define EM_TABLE(name, ...)                                                    \
    const EmKernels em_kernels_##name = {{__VA_ARGS__}, #name};                \
    EM_REGISTER_KERNELS(em_kernels_##name)

/* One expression for the integer types INTS (EM_TYPES_INT or, with bool,
 * EM_TYPES_INTB) and another for the float types. */
#define EM_KERNELS_SPLIT(kind, name, INTS, int_expr, float_expr)               \
    INTS(EM_INST_##kind, name, int_expr)                                       \
    EM_TYPES_FLOAT(EM_INST_##kind, name, float_expr)                           \
    EM_TABLE(name, INTS(EM_ENTRY, name) EM_TYPES_FLOAT(EM_ENTRY, name))

/* The common case: one expression for one type list. */
#define EM_KERNELS(kind, name, TYPES, EXPR)                                    \
    TYPES(EM_INST_##kind, name, EXPR)                                          \
    EM_TABLE(name, TYPES(EM_ENTRY, name))

#endif
