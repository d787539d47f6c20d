/* ternary.c — kernels with three or more operands: where, clamp, lerp,
 * addcmul/addcdiv, add/sub with alpha, nan_to_num, round(decimals=). (The
 * byte-copy kernels behind copy_ / fill_ / dtype conversion are in core/copy.c.) */
#include "loops.h"

/* out = a + alpha * b; alpha arrives as a broadcast operand */
#define ALPHA_EXPR a + c * b
EM_TYPES_NUMC(EM_INST_TERNARY, add_alpha, ALPHA_EXPR)
EM_TABLE(add_alpha, EM_TYPES_NUMC(EM_ENTRY, add_alpha))

/* where(cond, b, c): the condition is read as bool */
EM_TYPES_ALLCU(EM_INST_TERNARY_BOOLA, where, a ? b : c)
EM_TABLE(where, EM_TYPES_ALLCU(EM_ENTRY, where))

EM_KERNELS_SPLIT(TERNARY, clamp, EM_TYPES_INTU, em_min_int(em_max_int(a, b), c), em_min_nan(em_max_nan(a, b), c))

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


