/* scan.c — kernels that work on whole lines along one dim (Note [line
 * kernels] in ember.h): cumulative sums and products (accumulated in int64
 * or double, as torch's CPU accumulate types), running max / min with the
 * index where it was reached, and the selections median / nanmedian / mode
 * over the rows of a contiguous block.
 *
 * Selections sort (value, index) pairs in lexicographic order with NaN
 * above everything, so equal values resolve to a definite index: mode
 * reports the last occurrence of the smallest most frequent value (as torch
 * does) and median the index of the ((n - 1) / 2)-th pair.
 */
#include "reduce.h"
#include <stdlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define ST_PLAIN(T, v) ((T)(v))
#define ST_F16(T, v) em_f32_to_f16((float)(v))
#define ST_BF16(T, v) em_f32_to_bf16((float)(v))

/* X(op, DT, T, LD, ST, AT): the dtypes cumsum and cumprod write */
#define SCAN_TYPES(X, op)                                                                \
    X(op, UINT8, uint8_t, LD_PLAIN, ST_PLAIN, int64_t)                                   \
    X(op, INT8, int8_t, LD_PLAIN, ST_PLAIN, int64_t)                                     \
    X(op, INT16, int16_t, LD_PLAIN, ST_PLAIN, int64_t)                                   \
    X(op, INT32, int32_t, LD_PLAIN, ST_PLAIN, int64_t)                                   \
    X(op, INT64, int64_t, LD_PLAIN, ST_PLAIN, int64_t)                                   \
    X(op, FLOAT16, uint16_t, LD_F16, ST_F16, double)                                     \
    X(op, BFLOAT16, uint16_t, LD_BF16, ST_BF16, double)                                  \
    X(op, FLOAT32, float, LD_PLAIN, ST_PLAIN, double)                                    \
    X(op, FLOAT64, double, LD_PLAIN, ST_PLAIN, double)

/* Reads element i before writing it: safe when out is the input (cumsum_). */
#define CUM_DEFINE(op, DT, T, LD, ST, AT)                                                \
    static void op##_##DT(char *o, int64_t so, char *o1, int64_t s1, const char *in,      \
                          int64_t si, int64_t n) {                                        \
        (void)o1;                                                                         \
        (void)s1;                                                                         \
        AT acc = op##_INIT;                                                               \
        for (int64_t i = 0; i < n; i++) {                                                 \
            acc op##_OPER(AT) LD((const T *)(in + i * si));                               \
            *(T *)(o + i * so) = ST(T, acc);                                              \
        }                                                                                 \
    }
#define SCAN_ENTRY(op, DT, ...) [EM_##DT] = op##_##DT,

#define cumsum_INIT 0
#define cumsum_OPER(AT) += (AT)
#define cumprod_INIT 1
#define cumprod_OPER(AT) *= (AT)
SCAN_TYPES(CUM_DEFINE, cumsum)
SCAN_TYPES(CUM_DEFINE, cumprod)
const EmLineKernels em_scan_cumsum = {{SCAN_TYPES(SCAN_ENTRY, cumsum)}};
const EmLineKernels em_scan_cumprod = {{SCAN_TYPES(SCAN_ENTRY, cumprod)}};

/* Running extremes: a NaN is taken whenever it appears, and nothing replaces
 * it; ties move the index forward (>= for max, <= for min), as torch. */
#define CUMEXT_DEFINE(op, DT, T, CT, LD, AT, LO, HI)                                     \
    static void op##_##DT(char *o, int64_t so, char *oi, int64_t si_, const char *in,     \
                          int64_t si, int64_t n) {                                        \
        T best_raw = 0;                                                                   \
        CT best = 0;                                                                      \
        int64_t bi = 0;                                                                   \
        for (int64_t i = 0; i < n; i++) {                                                 \
            const T *p = (const T *)(in + i * si);                                        \
            CT x = LD(p);                                                                 \
            if (i == 0 || x != x || (best == best && x op##_CMP best)) {                  \
                best = x;                                                                 \
                best_raw = *p;                                                            \
                bi = i;                                                                   \
            }                                                                             \
            *(T *)(o + i * so) = best_raw;                                                \
            *(int64_t *)(oi + i * si_) = bi;                                              \
        }                                                                                 \
    }
#define CUMEXT_ENTRY(op, DT, ...) [EM_##DT] = op##_##DT,
#define cummax_CMP >=
#define cummin_CMP <=
RT_ALL(CUMEXT_DEFINE, cummax)
RT_ALL(CUMEXT_DEFINE, cummin)
const EmLineKernels em_scan_cummax = {{RT_ALL(CUMEXT_ENTRY, cummax)}};
const EmLineKernels em_scan_cummin = {{RT_ALL(CUMEXT_ENTRY, cummin)}};

/* ------------------------------------------------------------ selections */

#define SEL_DEFINE(op, DT, T, CT, LD, AT, LO, HI)                                        \
    typedef struct {                                                                      \
        CT v;                                                                             \
        int64_t i;                                                                        \
    } pair_##DT;                                                                          \
    static inline bool less_##DT(pair_##DT a, pair_##DT b) {                              \
        bool an = a.v != a.v, bn = b.v != b.v;                                            \
        if (an || bn) return an != bn ? bn : a.i < b.i; /* NaN above all */               \
        return a.v < b.v || (a.v == b.v && a.i < b.i);                                    \
    }                                                                                     \
    /* Hoare partition of a[lo..hi] around its middle; returns j: a[lo..j] are not        \
     * above a[j+1..hi], and lo <= j < hi */                                              \
    static int64_t partition_##DT(pair_##DT *a, int64_t lo, int64_t hi) {                 \
        pair_##DT p = a[lo + (hi - lo) / 2];                                              \
        int64_t i = lo - 1, j = hi + 1;                                                   \
        for (;;) {                                                                        \
            do i++;                                                                       \
            while (less_##DT(a[i], p));                                                   \
            do j--;                                                                       \
            while (less_##DT(p, a[j]));                                                   \
            if (i >= j) return j;                                                         \
            pair_##DT t = a[i];                                                           \
            a[i] = a[j];                                                                  \
            a[j] = t;                                                                     \
        }                                                                                 \
    }                                                                                     \
    static void sort_##DT(pair_##DT *a, int64_t lo, int64_t hi) {                         \
        while (hi - lo > 16) {                                                            \
            int64_t j = partition_##DT(a, lo, hi);                                        \
            if (j - lo < hi - j) { /* recurse into the smaller side */                   \
                sort_##DT(a, lo, j);                                                      \
                lo = j + 1;                                                               \
            } else {                                                                      \
                sort_##DT(a, j + 1, hi);                                                  \
                hi = j;                                                                   \
            }                                                                             \
        }                                                                                 \
        for (int64_t i = lo + 1; i <= hi; i++) {                                          \
            pair_##DT x = a[i];                                                           \
            int64_t j = i;                                                                \
            while (j > lo && less_##DT(x, a[j - 1])) {                                    \
                a[j] = a[j - 1];                                                          \
                j--;                                                                      \
            }                                                                             \
            a[j] = x;                                                                     \
        }                                                                                 \
    }                                                                                     \
    /* a[k] becomes the k-th pair in order */                                             \
    static void nth_##DT(pair_##DT *a, int64_t n, int64_t k) {                            \
        int64_t lo = 0, hi = n - 1;                                                       \
        while (hi - lo > 16) {                                                            \
            int64_t j = partition_##DT(a, lo, hi);                                        \
            if (k <= j)                                                                   \
                hi = j;                                                                   \
            else                                                                          \
                lo = j + 1;                                                               \
        }                                                                                 \
        sort_##DT(a, lo, hi);                                                             \
    }                                                                                     \
    static int64_t pick_##DT(EmSelectKind kind, const T *row, int64_t n, pair_##DT *buf) { \
        int64_t m = 0, first_nan = -1;                                                    \
        for (int64_t i = 0; i < n; i++) {                                                 \
            CT x = LD(&row[i]);                                                           \
            if (x != x) {                                                                 \
                if (first_nan < 0) first_nan = i;                                         \
                if (kind != EM_SELECT_MODE) continue;                                     \
            }                                                                             \
            buf[m].v = x;                                                                 \
            buf[m++].i = i;                                                               \
        }                                                                                 \
        if (kind == EM_SELECT_MEDIAN && first_nan >= 0) return first_nan;                 \
        if (m == 0) return 0; /* nanmedian of NaNs only */                                \
        if (kind != EM_SELECT_MODE) {                                                     \
            nth_##DT(buf, m, (m - 1) / 2);                                                \
            return buf[(m - 1) / 2].i;                                                    \
        }                                                                                 \
        sort_##DT(buf, 0, m - 1);                                                         \
        int64_t best = 0, best_at = 0, run = 0;                                           \
        for (int64_t i = 0; i < m; i++) {                                                 \
            run++;                                                                        \
            if (i == m - 1 || !(buf[i].v == buf[i + 1].v)) {                              \
                if (run > best) {                                                         \
                    best = run;                                                           \
                    best_at = buf[i].i;                                                   \
                }                                                                         \
                run = 0;                                                                  \
            }                                                                             \
        }                                                                                 \
        return best_at;                                                                   \
    }                                                                                     \
    static void select_##DT(EmSelectKind kind, const char *rows, int64_t lines, int64_t n, \
                            char *vals, int64_t *idx, char *scratch, int nt) {            \
        (void)nt;                                                                         \
        SEL_OMP_FOR                                                                       \
        for (int64_t l = 0; l < lines; l++) {                                             \
            int tid = 0;                                                                  \
            SEL_THREAD_ID(tid);                                                           \
            pair_##DT *buf = (pair_##DT *)(scratch + (size_t)tid * (size_t)n * 16);       \
            const T *row = (const T *)rows + l * n;                                       \
            int64_t at = pick_##DT(kind, row, n, buf);                                    \
            ((T *)vals)[l] = row[at];                                                     \
            idx[l] = at;                                                                  \
        }                                                                                 \
    }
#ifdef _OPENMP
#define SEL_OMP_FOR _Pragma("omp parallel for num_threads(nt) schedule(static) if (nt > 1)")
#define SEL_THREAD_ID(t) t = omp_get_thread_num()
#else
#define SEL_OMP_FOR
#define SEL_THREAD_ID(t) (void)t
#endif
#define SEL_ENTRY(op, DT, ...) [EM_##DT] = select_##DT,
RT_ALL(SEL_DEFINE, select)
const EmSelectFn em_select_fns[EM_NUM_DTYPES] = {RT_ALL(SEL_ENTRY, select)};
