/* special.c — kernels of the special functions (the gamma family, Bessel
 * I0 / I1), angle conversion and frexp's two halves. Float kernels only:
 * the front-ends promote integer inputs to the default float. The math is
 * in math.h, shared with the CUDA kernels. */
#include "loops.h"

EM_KERNELS(UNARY, lgamma, EM_TYPES_FLOAT, lgamma((double)x)) /* float32 too: in double, then rounded */
EM_KERNELS(UNARY, digamma, EM_TYPES_FLOAT, em_digamma(x))
EM_KERNELS(UNARY, i0, EM_TYPES_FLOAT, em_i0(x))
EM_KERNELS(UNARY, i1, EM_TYPES_FLOAT, em_i1(x))
/* (x, n) and (x, p): the integer is the second operand, a scalar */
EM_KERNELS(BINARY, polygamma, EM_TYPES_FLOAT, em_polygamma(b, a))
EM_KERNELS(BINARY, mvlgamma, EM_TYPES_FLOAT, em_mvlgamma(a, b))

EM_KERNELS(UNARY, rad2deg, EM_TYPES_FLOAT, x * (180.0 / 3.14159265358979323846))
EM_KERNELS(UNARY, deg2rad, EM_TYPES_FLOAT, x * (3.14159265358979323846 / 180.0))

/* frexp: the mantissa in the input's dtype; the exponent as a float of the
 * input's dtype (exact: |exponent| < 1100), which the front-end casts to int32 */
EM_KERNELS(UNARY, frexp_mantissa, EM_TYPES_FLOAT, em_frexp_mantissa(x))
EM_KERNELS(UNARY, frexp_exponent, EM_TYPES_FLOAT, em_frexp_exponent(x))
