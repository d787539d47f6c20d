/* ternary.c — kernels with three or more operands: where, clamp, lerp,
 * addcmul/addcdiv, add/sub with alpha, nan_to_num, round(decimals=), and the
 * byte-copy kernels behind copy_ / fill_ / dtype conversion. */
#include "loops.h"

/* out = a + alpha * b; alpha arrives as a broadcast operand */
#define ALPHA_EXPR a + c * b
EM_TYPES_NUM(EM_INST_TERNARY, add_alpha, ALPHA_EXPR)
EM_TABLE(add_alpha, EM_TYPES_NUM(EM_ENTRY, add_alpha))

/* where(cond, b, c): the condition is read as bool */
EM_TYPES_ALL(EM_INST_TERNARY_BOOLA, where, a ? b : c)
EM_TABLE(where, EM_TYPES_ALL(EM_ENTRY, where))

EM_KERNELS_SPLIT(TERNARY, clamp, EM_TYPES_INT, em_min_int(em_max_int(a, b), c), em_min_nan(em_max_nan(a, b), c))

EM_KERNELS(TERNARY, lerp, EM_TYPES_FLOAT, em_lerp(a, b, c))

/* round(decimals=d): c is 10^|d| */
EM_KERNELS(BINARY, round_scaled_up, EM_TYPES_FLOAT, nearbyint(a * b) / b)
EM_KERNELS(BINARY, round_scaled_down, EM_TYPES_FLOAT, nearbyint(a / b) * b)

EM_TYPES_NUM(EM_INST_QUATERNARY, addcmul, a + e * b * c)
EM_TABLE(addcmul, EM_TYPES_NUM(EM_ENTRY, addcmul))
EM_TYPES_FLOAT(EM_INST_QUATERNARY, addcdiv, a + e * (b / c))
EM_TABLE(addcdiv, EM_TYPES_FLOAT(EM_ENTRY, addcdiv))

/* nan_to_num(x, nan, posinf, neginf) */
EM_TYPES_FLOAT(EM_INST_QUATERNARY, nan_to_num, a != a ? b : a == INFINITY ? c : a == -INFINITY ? e : a)
EM_TABLE(nan_to_num, EM_TYPES_FLOAT(EM_ENTRY, nan_to_num))

/* copy: dtype-agnostic by element size (the iterator casts around it) */
#define COPY_FN(W, T)                                                          \
    static void copy_##W(char **d, const int64_t *s, int64_t n) {              \
        if (s[0] == W && s[1] == W) {                                          \
            memmove(d[0], d[1], (size_t)(n * W));                              \
        } else if (s[0] == W && s[1] == 0) {                                   \
            T v = *(const T *)d[1], *o = (T *)d[0];                            \
            for (int64_t i = 0; i < n; i++) o[i] = v;                          \
        } else {                                                               \
            for (int64_t i = 0; i < n; i++)                                    \
                *(T *)(d[0] + i * s[0]) = *(const T *)(d[1] + i * s[1]);       \
        }                                                                      \
    }
COPY_FN(1, uint8_t)
COPY_FN(2, uint16_t)
COPY_FN(4, uint32_t)
COPY_FN(8, uint64_t)
const EmKernels em_kernels_copy = {{
    [EM_BOOL] = copy_1, [EM_UINT8] = copy_1, [EM_INT8] = copy_1, [EM_INT16] = copy_2,
    [EM_INT32] = copy_4, [EM_INT64] = copy_8, [EM_FLOAT16] = copy_2, [EM_BFLOAT16] = copy_2,
    [EM_FLOAT32] = copy_4, [EM_FLOAT64] = copy_8,
}, "copy"};
EM_REGISTER_KERNELS(em_kernels_copy)
