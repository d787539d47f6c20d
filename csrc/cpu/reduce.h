/* reduce.h — what the reduction, scan and selection kernels (cpu/reduce.c,
 * cpu/scan.c) share with their front-ends (ops/reduce.c): the per-dtype
 * type lists and the kernel tables that are not reduce-iterator kernels. */
#ifndef EMBER_CPU_REDUCE_H
#define EMBER_CPU_REDUCE_H

#include "loops.h"
#include <float.h>

/* EM_CLONES, EM_AVX512: ember.h */

#define LD_PLAIN(p) (*(p))
#define LD_F16(p) em_f16_to_f32(*(p))
#define LD_BF16(p) em_bf16_to_f32(*(p))

/* X(op, DT, T, CT, LD, AT, LO, HI): storage type T; CT the type values are
 * compared in (float for the half types, converted as loaded by LD); AT the
 * wide accumulator (int64_t for integers and bool, double for floats); LO/HI
 * the identities of max/min. */
#define RT_BOOL(X, op) X(op, BOOL, bool, bool, LD_PLAIN, int64_t, false, true)
#define RT_INT(X, op)                                                                    \
    X(op, UINT8, uint8_t, uint8_t, LD_PLAIN, int64_t, 0, UINT8_MAX)                      \
    X(op, INT8, int8_t, int8_t, LD_PLAIN, int64_t, INT8_MIN, INT8_MAX)                   \
    X(op, INT16, int16_t, int16_t, LD_PLAIN, int64_t, INT16_MIN, INT16_MAX)              \
    X(op, INT32, int32_t, int32_t, LD_PLAIN, int64_t, INT32_MIN, INT32_MAX)              \
    X(op, INT64, int64_t, int64_t, LD_PLAIN, int64_t, INT64_MIN, INT64_MAX)
#define RT_FLOAT(X, op)                                                                  \
    X(op, FLOAT16, uint16_t, float, LD_F16, double, -INFINITY, INFINITY)                 \
    X(op, BFLOAT16, uint16_t, float, LD_BF16, double, -INFINITY, INFINITY)               \
    X(op, FLOAT32, float, float, LD_PLAIN, double, -INFINITY, INFINITY)                  \
    X(op, FLOAT64, double, double, LD_PLAIN, double, -INFINITY, INFINITY)
#define RT_INTB(X, op) RT_BOOL(X, op) RT_INT(X, op)
#define RT_ALL(X, op) RT_INTB(X, op) RT_FLOAT(X, op)
/* complex types accumulate in complex128 (C's complex arithmetic) */
#define RT_COMPLEX(X, op)                                                                \
    X(op, COMPLEX64, float _Complex, float _Complex, LD_PLAIN, double _Complex, 0, 0)    \
    X(op, COMPLEX128, double _Complex, double _Complex, LD_PLAIN, double _Complex, 0, 0)
#define RT_ALLC(X, op) RT_ALL(X, op) RT_COMPLEX(X, op)
/* uint16/32/64: only in the reductions torch has them for (sum, prod, any,
 * all), accumulating in int64 as torch does (a uint64 sum wraps) */
#define RT_UWIDE(X, op)                                                                  \
    X(op, UINT16, uint16_t, uint16_t, LD_PLAIN, int64_t, 0, UINT16_MAX)                  \
    X(op, UINT32, uint32_t, uint32_t, LD_PLAIN, int64_t, 0, UINT32_MAX)                  \
    X(op, UINT64, uint64_t, uint64_t, LD_PLAIN, int64_t, 0, UINT64_MAX)
#define RT_ALLU(X, op) RT_ALL(X, op) RT_UWIDE(X, op)
#define RT_ALLCU(X, op) RT_ALLC(X, op) RT_UWIDE(X, op)

/* Scans along a line (cumsum, cumprod: output dtype == input dtype;
 * cummax, cummin: values and int64 indices). Note [line kernels]. */
typedef struct {
    EmLineFn fn[EM_NUM_DTYPES];
} EmLineKernels;
extern const EmLineKernels em_scan_cumsum, em_scan_cumprod, em_scan_cummax, em_scan_cummin;

/* Selections over the rows of a contiguous (lines, n) block, n >= 1: one
 * value (the input dtype, contiguous) and one int64 index per row. scratch
 * holds nt * n * 16 bytes; nt threads. */
typedef enum { EM_SELECT_MEDIAN, EM_SELECT_NANMEDIAN, EM_SELECT_MODE } EmSelectKind;
typedef void (*EmSelectFn)(EmSelectKind kind, const char *rows, int64_t lines, int64_t n,
                           char *vals, int64_t *idx, char *scratch, int nt);
extern const EmSelectFn em_select_fns[EM_NUM_DTYPES];

#endif
