/* binary.c — kernels of the binary elementwise ops: arithmetic, division
 * with torch's rounding rules, powers, comparisons, bitwise and logical ops.
 * Integer divisors were checked for zero by the front-end. */
#include "loops.h"

EM_TYPES_NUM(EM_INST_BINARY, add, a + b)
EM_INST_BINARY(add, a || b, BOOL, bool)
EM_TABLE(add, EM_TYPES_ALL(EM_ENTRY, add))
EM_KERNELS(BINARY, sub, EM_TYPES_NUM, a - b)
EM_TYPES_NUM(EM_INST_BINARY, mul, a * b)
EM_INST_BINARY(mul, a && b, BOOL, bool)
EM_TABLE(mul, EM_TYPES_ALL(EM_ENTRY, mul))
EM_KERNELS(BINARY, div, EM_TYPES_FLOAT, a / b)

/* div(rounding_mode='trunc'|'floor'), floor_divide, remainder, fmod */
EM_TYPES_INT(EM_INST_BINARY, div_trunc, em_idiv_trunc(a, b))
EM_TYPES_FLOAT(EM_INST_BINARY, div_trunc, trunc(a / b))
EM_TABLE(div_trunc, EM_TYPES_INT(EM_ENTRY, div_trunc) EM_TYPES_FLOAT(EM_ENTRY, div_trunc))

EM_TYPES_INT(EM_INST_BINARY, floor_divide, em_idiv_floor(a, b))
EM_TYPES_FLOAT(EM_INST_BINARY, floor_divide, em_floordiv(a, b))
EM_TABLE(floor_divide, EM_TYPES_INT(EM_ENTRY, floor_divide) EM_TYPES_FLOAT(EM_ENTRY, floor_divide))

EM_TYPES_INT(EM_INST_BINARY, remainder, em_iremainder(a, b))
EM_TYPES_FLOAT(EM_INST_BINARY, remainder, em_remainder(a, b))
EM_TABLE(remainder, EM_TYPES_INT(EM_ENTRY, remainder) EM_TYPES_FLOAT(EM_ENTRY, remainder))

EM_TYPES_INT(EM_INST_BINARY, fmod, em_ifmod(a, b))
EM_TYPES_FLOAT(EM_INST_BINARY, fmod, fmod(a, b))
EM_TABLE(fmod, EM_TYPES_INT(EM_ENTRY, fmod) EM_TYPES_FLOAT(EM_ENTRY, fmod))

EM_TYPES_INT(EM_INST_BINARY, pow, em_ipow(a, b))
EM_TYPES_FLOAT(EM_INST_BINARY, pow, pow(a, b))
EM_TABLE(pow, EM_TYPES_INT(EM_ENTRY, pow) EM_TYPES_FLOAT(EM_ENTRY, pow))

EM_KERNELS(BINARY, atan2, EM_TYPES_FLOAT, atan2(a, b))
EM_KERNELS(BINARY, hypot, EM_TYPES_FLOAT, hypot(a, b))
EM_KERNELS(BINARY, copysign, EM_TYPES_FLOAT, copysign(a, b))
EM_KERNELS(BINARY, logaddexp, EM_TYPES_FLOAT, em_logaddexp(a, b))

EM_TYPES_INTB(EM_INST_BINARY, maximum, em_max_int(a, b))
EM_TYPES_FLOAT(EM_INST_BINARY, maximum, em_max_nan(a, b))
EM_TABLE(maximum, EM_TYPES_INTB(EM_ENTRY, maximum) EM_TYPES_FLOAT(EM_ENTRY, maximum))
EM_TYPES_INTB(EM_INST_BINARY, minimum, em_min_int(a, b))
EM_TYPES_FLOAT(EM_INST_BINARY, minimum, em_min_nan(a, b))
EM_TABLE(minimum, EM_TYPES_INTB(EM_ENTRY, minimum) EM_TYPES_FLOAT(EM_ENTRY, minimum))
EM_TYPES_INTB(EM_INST_BINARY, fmax, em_max_int(a, b))
EM_TYPES_FLOAT(EM_INST_BINARY, fmax, fmax(a, b))
EM_TABLE(fmax, EM_TYPES_INTB(EM_ENTRY, fmax) EM_TYPES_FLOAT(EM_ENTRY, fmax))
EM_TYPES_INTB(EM_INST_BINARY, fmin, em_min_int(a, b))
EM_TYPES_FLOAT(EM_INST_BINARY, fmin, fmin(a, b))
EM_TABLE(fmin, EM_TYPES_INTB(EM_ENTRY, fmin) EM_TYPES_FLOAT(EM_ENTRY, fmin))

/* comparisons write bool */
EM_KERNELS(BINARY_BOOL, eq, EM_TYPES_ALL, a == b)
EM_KERNELS(BINARY_BOOL, ne, EM_TYPES_ALL, a != b)
EM_KERNELS(BINARY_BOOL, lt, EM_TYPES_ALL, a < b)
EM_KERNELS(BINARY_BOOL, le, EM_TYPES_ALL, a <= b)
EM_KERNELS(BINARY_BOOL, gt, EM_TYPES_ALL, a > b)
EM_KERNELS(BINARY_BOOL, ge, EM_TYPES_ALL, a >= b)

EM_KERNELS(BINARY, bitwise_and, EM_TYPES_INTB, a & b)
EM_KERNELS(BINARY, bitwise_or, EM_TYPES_INTB, a | b)
EM_KERNELS(BINARY, bitwise_xor, EM_TYPES_INTB, a ^ b)
EM_INST_BINARY(shift_left, EM_SHL(uint8_t, a, b), UINT8, uint8_t)
EM_INST_BINARY(shift_left, EM_SHL(int8_t, a, b), INT8, int8_t)
EM_INST_BINARY(shift_left, EM_SHL(int16_t, a, b), INT16, int16_t)
EM_INST_BINARY(shift_left, EM_SHL(int32_t, a, b), INT32, int32_t)
EM_INST_BINARY(shift_left, EM_SHL(int64_t, a, b), INT64, int64_t)
EM_TABLE(shift_left, EM_TYPES_INT(EM_ENTRY, shift_left))
EM_INST_BINARY(shift_right, EM_SHR(uint8_t, a, b), UINT8, uint8_t)
EM_INST_BINARY(shift_right, EM_SHR(int8_t, a, b), INT8, int8_t)
EM_INST_BINARY(shift_right, EM_SHR(int16_t, a, b), INT16, int16_t)
EM_INST_BINARY(shift_right, EM_SHR(int32_t, a, b), INT32, int32_t)
EM_INST_BINARY(shift_right, EM_SHR(int64_t, a, b), INT64, int64_t)
EM_TABLE(shift_right, EM_TYPES_INT(EM_ENTRY, shift_right))

/* logical ops: the iterator hands every operand over as bool */
EM_KERNELS(BINARY, logical_and, EM_TYPES_BOOL, a && b)
EM_KERNELS(BINARY, logical_or, EM_TYPES_BOOL, a || b)
EM_KERNELS(BINARY, logical_xor, EM_TYPES_BOOL, a != b)
EM_KERNELS(UNARY, logical_not, EM_TYPES_BOOL, !x)

/* clamp with one bound */
EM_TYPES_INTB(EM_INST_BINARY, clamp_min, em_max_int(a, b))
EM_TYPES_FLOAT(EM_INST_BINARY, clamp_min, em_max_nan(a, b))
EM_TABLE(clamp_min, EM_TYPES_INTB(EM_ENTRY, clamp_min) EM_TYPES_FLOAT(EM_ENTRY, clamp_min))
EM_TYPES_INTB(EM_INST_BINARY, clamp_max, em_min_int(a, b))
EM_TYPES_FLOAT(EM_INST_BINARY, clamp_max, em_min_nan(a, b))
EM_TABLE(clamp_max, EM_TYPES_INTB(EM_ENTRY, clamp_max) EM_TYPES_FLOAT(EM_ENTRY, clamp_max))
