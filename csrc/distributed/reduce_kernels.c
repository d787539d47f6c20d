/* reduce_kernels.c — the element combine of the CPU transport's reductions:
 * dst[i] = op(dst[i], src[i]) for torch's ReduceOps over every ember dtype.
 * Half types widen to float32 and round once per combine. bool reduces
 * logically (SUM/MAX/BOR: or, PRODUCT/MIN/BAND: and, BXOR: xor). MIN/MAX
 * propagate NaN as torch.minimum/maximum do. Complex reduces part by part,
 * SUM and AVG only (torch refuses the other ops). AVG combines as SUM; the
 * caller divides once at the end (em_dist_divide). */
#include "../ember.h"
#include "transport.h"

#include <math.h>

const char *em_dist_op_error(int dtype, int op) {
    if (op < 0 || op >= EM_DIST_NUM_OPS) return "unsupported reduce op";
    /* torch checks complex first: its ValueError, whatever the op */
    if (em_is_complex((EmDType)dtype) && op != EM_DIST_SUM && op != EM_DIST_AVG) {
        static const char *msg[] = {NULL, NULL, "does not support ReduceOp.PRODUCT on complex tensors",
                                    "does not support ReduceOp.MIN on complex tensors",
                                    "does not support ReduceOp.MAX on complex tensors",
                                    "does not support ReduceOp.BAND on complex tensors",
                                    "does not support ReduceOp.BOR on complex tensors",
                                    "does not support ReduceOp.BXOR on complex tensors"};
        return msg[op];
    }
    bool fl = em_is_float((EmDType)dtype);
    if (fl && (op == EM_DIST_BAND || op == EM_DIST_BOR || op == EM_DIST_BXOR)) {
        static const char *msg[] = {"Cannot use ReduceOp.BAND with non-integral dtype",
                                    "Cannot use ReduceOp.BOR with non-integral dtype",
                                    "Cannot use ReduceOp.BXOR with non-integral dtype"};
        return msg[op - EM_DIST_BAND];
    }
    if (dtype == EM_BOOL && op == EM_DIST_AVG) return "Cannot use ReduceOp.AVG with bool tensors";
    return NULL;
}

int em_dist_check_op(int dtype, int op, const char *what) {
    const char *e = em_dist_op_error(dtype, op);
    if (!e) return 0;
    if (em_is_complex((EmDType)dtype)) PyErr_Format(PyExc_ValueError, "%s %s", what, e); /* torch's type */
    else PyErr_SetString(PyExc_RuntimeError, e);
    return -1;
}

#define MINF(a, b) ((a) != (a) ? (a) : (b) != (b) ? (b) : (a) < (b) ? (a) : (b))
#define MAXF(a, b) ((a) != (a) ? (a) : (b) != (b) ? (b) : (a) > (b) ? (a) : (b))
#define MINI(a, b) ((a) < (b) ? (a) : (b))
#define MAXI(a, b) ((a) > (b) ? (a) : (b))

#define LOOP(T, EXPR)                                                                          \
    do {                                                                                       \
        T *d = (T *)dst;                                                                       \
        const T *s = (const T *)src;                                                           \
        for (size_t i = 0; i < n; i++) {                                                       \
            T a = d[i], b = s[i];                                                              \
            d[i] = (T)(EXPR);                                                                  \
        }                                                                                      \
    } while (0)

/* unsigned arithmetic for integer SUM/PRODUCT: wraps as torch's does, no UB */
#define INT_KERNEL(T, U)                                                                       \
    static void combine_##T(char *dst, const char *src, size_t n, int op) {                    \
        switch (op) {                                                                          \
        case EM_DIST_SUM: case EM_DIST_AVG: LOOP(T, (U)a + (U)b); break;                       \
        case EM_DIST_PRODUCT: LOOP(T, (U)a * (U)b); break;                                     \
        case EM_DIST_MIN: LOOP(T, MINI(a, b)); break;                                          \
        case EM_DIST_MAX: LOOP(T, MAXI(a, b)); break;                                          \
        case EM_DIST_BAND: LOOP(T, a & b); break;                                              \
        case EM_DIST_BOR: LOOP(T, a | b); break;                                               \
        case EM_DIST_BXOR: LOOP(T, a ^ b); break;                                              \
        }                                                                                      \
    }
INT_KERNEL(uint8_t, uint8_t)
INT_KERNEL(int8_t, uint8_t)
INT_KERNEL(int16_t, uint16_t)
INT_KERNEL(int32_t, uint32_t)
INT_KERNEL(int64_t, uint64_t)

#define FLOAT_KERNEL(T)                                                                        \
    static void combine_##T(char *dst, const char *src, size_t n, int op) {                    \
        switch (op) {                                                                          \
        case EM_DIST_SUM: case EM_DIST_AVG: LOOP(T, a + b); break;                             \
        case EM_DIST_PRODUCT: LOOP(T, a * b); break;                                           \
        case EM_DIST_MIN: LOOP(T, MINF(a, b)); break;                                          \
        case EM_DIST_MAX: LOOP(T, MAXF(a, b)); break;                                          \
        }                                                                                      \
    }
FLOAT_KERNEL(float)
FLOAT_KERNEL(double)

static void combine_bool(char *dst, const char *src, size_t n, int op) {
    bool any = op == EM_DIST_SUM || op == EM_DIST_MAX || op == EM_DIST_BOR;
    bool all = op == EM_DIST_PRODUCT || op == EM_DIST_MIN || op == EM_DIST_BAND;
    for (size_t i = 0; i < n; i++) {
        bool a = dst[i] != 0, b = src[i] != 0;
        dst[i] = any ? (a || b) : all ? (a && b) : (a != b);
    }
}

static void combine_half(char *dst, const char *src, size_t n, int op, bool bf) {
    uint16_t *d = (uint16_t *)dst;
    const uint16_t *s = (const uint16_t *)src;
    for (size_t i = 0; i < n; i++) {
        float a = bf ? em_bf16_to_f32(d[i]) : em_f16_to_f32(d[i]);
        float b = bf ? em_bf16_to_f32(s[i]) : em_f16_to_f32(s[i]);
        float r = op == EM_DIST_PRODUCT ? a * b : op == EM_DIST_MIN ? MINF(a, b)
                : op == EM_DIST_MAX     ? MAXF(a, b) : a + b;
        d[i] = bf ? em_f32_to_bf16(r) : em_f32_to_f16(r);
    }
}

int em_dist_combine(char *dst, const char *src, size_t n, int dtype, int op) {
    if (em_dist_op_error(dtype, op)) return -1;
    switch ((EmDType)dtype) {
    case EM_BOOL: combine_bool(dst, src, n, op); break;
    case EM_UINT8: combine_uint8_t(dst, src, n, op); break;
    case EM_INT8: combine_int8_t(dst, src, n, op); break;
    case EM_INT16: combine_int16_t(dst, src, n, op); break;
    case EM_INT32: combine_int32_t(dst, src, n, op); break;
    case EM_INT64: combine_int64_t(dst, src, n, op); break;
    case EM_FLOAT16: combine_half(dst, src, n, op, false); break;
    case EM_BFLOAT16: combine_half(dst, src, n, op, true); break;
    case EM_FLOAT32: combine_float(dst, src, n, op); break;
    case EM_FLOAT64: combine_double(dst, src, n, op); break;
    /* complex: SUM (and AVG's sum) only, part by part (the caller checks the op) */
    case EM_COMPLEX64: combine_float(dst, src, 2 * n, op); break;
    case EM_COMPLEX128: combine_double(dst, src, 2 * n, op); break;
    default: return -1;
    }
    return 0;
}

/* Integer AVG truncates toward zero (C division), as NCCL's does. */
void em_dist_divide(char *buf, size_t n, int dtype, int64_t by) {
#define DIV(T)                                                                                 \
    do {                                                                                       \
        T *d = (T *)buf;                                                                       \
        for (size_t i = 0; i < n; i++) d[i] = (T)(d[i] / (T)by);                               \
    } while (0)
    switch ((EmDType)dtype) {
    case EM_UINT8: DIV(uint8_t); break;
    case EM_INT8: DIV(int8_t); break;
    case EM_INT16: DIV(int16_t); break;
    case EM_INT32: DIV(int32_t); break;
    case EM_INT64: DIV(int64_t); break;
    case EM_FLOAT32: DIV(float); break;
    case EM_FLOAT64: DIV(double); break;
    case EM_COMPLEX64: em_dist_divide(buf, 2 * n, EM_FLOAT32, by); break;
    case EM_COMPLEX128: em_dist_divide(buf, 2 * n, EM_FLOAT64, by); break;
    case EM_FLOAT16: case EM_BFLOAT16: {
        bool bf = dtype == EM_BFLOAT16;
        uint16_t *d = (uint16_t *)buf;
        for (size_t i = 0; i < n; i++) {
            float v = (bf ? em_bf16_to_f32(d[i]) : em_f16_to_f32(d[i])) / (float)by;
            d[i] = bf ? em_f32_to_bf16(v) : em_f32_to_f16(v);
        }
        break;
    }
    default: break;
    }
#undef DIV
}
