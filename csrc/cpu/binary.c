/* binary.c — kernels of the binary elementwise ops: arithmetic, division
 * with torch's rounding rules, powers, comparisons, bitwise and logical ops.
 * Integer divisors were checked for zero by the front-end. */
#include "loops.h"

EM_TYPES_NUMC(EM_INST_BINARY, add, a + b)
EM_INST_BINARY(add, a || b, BOOL, bool)
EM_TABLE(add, EM_TYPES_ALLC(EM_ENTRY, add))
EM_KERNELS(BINARY, sub, EM_TYPES_NUMC, a - b)
EM_TYPES_NUMC(EM_INST_BINARY, mul, a * b)
EM_TYPES_UWIDE(EM_INST_BINARY, mul, a * b) /* uint16 * uint16 is an int product: -fwrapv keeps it defined */
EM_INST_BINARY(mul, a && b, BOOL, bool)
EM_TABLE(mul, EM_TYPES_ALLCU(EM_ENTRY, mul))
EM_KERNELS(BINARY, div, EM_TYPES_FLOATC, a / b)

/* div(rounding_mode='trunc'|'floor'), floor_divide, remainder, fmod */
EM_KERNELS_SPLIT(BINARY, div_trunc, EM_TYPES_INT, em_idiv_trunc(a, b), trunc(a / b))
EM_KERNELS_SPLIT(BINARY, floor_divide, EM_TYPES_INT, em_idiv_floor(a, b), em_floordiv(a, b))
EM_KERNELS_SPLIT(BINARY, remainder, EM_TYPES_INT, em_iremainder(a, b), em_remainder(a, b))
EM_KERNELS_SPLIT(BINARY, fmod, EM_TYPES_INT, em_ifmod(a, b), fmod(a, b))
EM_TYPES_INT(EM_INST_BINARY, pow, em_ipow(a, b))
EM_TYPES_FLOATC(EM_INST_BINARY, pow, pow(a, b)) /* tgmath.h: cpow for complex */
EM_TABLE(pow, EM_TYPES_INT(EM_ENTRY, pow) EM_TYPES_FLOATC(EM_ENTRY, pow))

EM_KERNELS(BINARY, atan2, EM_TYPES_FLOAT, atan2(a, b))
EM_KERNELS(BINARY, hypot, EM_TYPES_FLOAT, hypot(a, b))
EM_KERNELS(BINARY, copysign, EM_TYPES_FLOAT, copysign(a, b))
EM_KERNELS(BINARY, logaddexp, EM_TYPES_FLOAT, em_logaddexp(a, b))

EM_KERNELS_SPLIT(BINARY, maximum, EM_TYPES_INTBU, em_max_int(a, b), em_max_nan(a, b))
EM_KERNELS_SPLIT(BINARY, minimum, EM_TYPES_INTBU, em_min_int(a, b), em_min_nan(a, b))
EM_KERNELS_SPLIT(BINARY, fmax, EM_TYPES_INTBU, em_max_int(a, b), fmax(a, b))
EM_KERNELS_SPLIT(BINARY, fmin, EM_TYPES_INTBU, em_min_int(a, b), fmin(a, b))

/* comparisons write bool */
EM_KERNELS(BINARY_BOOL, eq, EM_TYPES_ALLCU, a == b)
EM_KERNELS(BINARY_BOOL, ne, EM_TYPES_ALLCU, a != b)
EM_KERNELS(BINARY_BOOL, lt, EM_TYPES_ALL, a < b)
EM_KERNELS(BINARY_BOOL, le, EM_TYPES_ALL, a <= b)
EM_KERNELS(BINARY_BOOL, gt, EM_TYPES_ALL, a > b)
EM_KERNELS(BINARY_BOOL, ge, EM_TYPES_ALL, a >= b)

EM_KERNELS(BINARY, bitwise_and, EM_TYPES_INTBU, a & b)
EM_KERNELS(BINARY, bitwise_or, EM_TYPES_INTBU, a | b)
EM_KERNELS(BINARY, bitwise_xor, EM_TYPES_INTBU, a ^ b)
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

/* complex(real, imag) and polar(abs, angle): the iterator hands the real
 * inputs over as complex values with zero imaginary parts */
EM_KERNELS(BINARY, make_complex, EM_TYPES_COMPLEX, __real__ a + __real__ b * I)
EM_KERNELS(BINARY, polar, EM_TYPES_COMPLEX, __real__ a * exp(I * __real__ b))

/* clamp with one bound */
EM_KERNELS_SPLIT(BINARY, clamp_min, EM_TYPES_INTBU, em_max_int(a, b), em_max_nan(a, b))
EM_KERNELS_SPLIT(BINARY, clamp_max, EM_TYPES_INTBU, em_min_int(a, b), em_min_nan(a, b))

/* step, integer gcd / lcm, scaling by powers of two, log2-sum-exp2, x log y */
EM_KERNELS(BINARY, heaviside, EM_TYPES_ALL, a == 0 ? b : (a > 0))
EM_INST_BINARY(gcd, em_gcd(a, b, 0), UINT8, uint8_t)
EM_INST_BINARY(gcd, em_gcd(a, b, 8), INT8, int8_t)
EM_INST_BINARY(gcd, em_gcd(a, b, 16), INT16, int16_t)
EM_INST_BINARY(gcd, em_gcd(a, b, 32), INT32, int32_t)
EM_INST_BINARY(gcd, em_gcd(a, b, 64), INT64, int64_t)
EM_TABLE(gcd, EM_TYPES_INT(EM_ENTRY, gcd))
EM_INST_BINARY(lcm, em_lcm(a, b, 0), UINT8, uint8_t)
EM_INST_BINARY(lcm, em_lcm(a, b, 8), INT8, int8_t)
EM_INST_BINARY(lcm, em_lcm(a, b, 16), INT16, int16_t)
EM_INST_BINARY(lcm, em_lcm(a, b, 32), INT32, int32_t)
EM_INST_BINARY(lcm, em_lcm(a, b, 64), INT64, int64_t)
EM_TABLE(lcm, EM_TYPES_INT(EM_ENTRY, lcm))
EM_KERNELS(BINARY, ldexp, EM_TYPES_FLOAT, a * exp2(b))
EM_KERNELS(BINARY, logaddexp2, EM_TYPES_FLOAT, em_logaddexp2(a, b))
EM_KERNELS(BINARY, xlogy, EM_TYPES_FLOAT, em_xlogy(a, b))
