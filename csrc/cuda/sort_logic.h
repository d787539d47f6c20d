/* sort_logic.h — the per-element and per-row logic of the GPU sort,
 * selection, scan and search kernels (csrc/cuda/sort.cu), written once for
 * the device and the host. The fake backend (csrc/testing/cuda_fake.c, Note
 * [fake CUDA]) runs these same functions on host memory, so the tests on a
 * machine without a GPU check them against the CPU kernels (cpu/sort.c,
 * cpu/scan.c, ops/sort.c). Plain C that nvcc compiles __host__ __device__.
 *
 * Note [CUDA sort keys]: the keys are cpu/sort.c's (Note [sort keys]):
 * unsigned integers whose order is torch's order — NaN the largest (all
 * NaNs one key), -0.0 == +0.0 — flipped within their width for descending
 * order. Sorting (key, original index) pairs stably gives the CPU's order in
 * both directions. */
#ifndef EMBER_CUDA_SORT_LOGIC_H
#define EMBER_CUDA_SORT_LOGIC_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define EMC_HD static __host__ __device__ inline
#else
#define EMC_HD static inline
#endif

/* EmDType codes (csrc/ember.h) */
enum {
    EMC_BOOL, EMC_UINT8, EMC_INT8, EMC_INT16, EMC_INT32, EMC_INT64,
    EMC_FLOAT16, EMC_BFLOAT16, EMC_FLOAT32, EMC_FLOAT64
};

/* select_rows kinds: EmSelectKind's order (cpu/reduce.h), then kthvalue */
enum { EMC_SEL_MEDIAN = 0, EMC_SEL_NANMEDIAN = 1, EMC_SEL_MODE = 2, EMC_SEL_KTH = 3 };
/* scan ops */
enum { EMC_SCAN_CUMSUM = 0, EMC_SCAN_CUMPROD = 1, EMC_SCAN_CUMMAX = 2, EMC_SCAN_CUMMIN = 3 };

EMC_HD int emc_itemsize(int dt) {
    return dt <= EMC_INT8 ? 1 : dt == EMC_INT16 || dt == EMC_FLOAT16 || dt == EMC_BFLOAT16 ? 2
           : dt == EMC_INT32 || dt == EMC_FLOAT32 ? 4 : 8;
}
EMC_HD bool emc_is_float(int dt) { return dt >= EMC_FLOAT16; }

/* float16 / bfloat16 <-> float32 as csrc/ember.h's em_* conversions (round
 * to nearest even, quiet NaNs kept): bit for bit the CPU's results. */
EMC_HD float emc_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else if (exp != 0) {
        bits = sign | ((exp + 112) << 23) | (mant << 13);
    } else if (mant == 0) {
        bits = sign;
    } else { /* subnormal: mant * 2^-24 is exact in float */
        float f = (float)mant * 5.9604644775390625e-08f;
        memcpy(&bits, &f, 4);
        bits |= sign;
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}
EMC_HD uint16_t emc_f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000, absx = x & 0x7fffffffu;
    if (absx >= 0x7f800000u)
        return (uint16_t)(sign | 0x7c00 | (absx > 0x7f800000u ? 0x200 | ((absx >> 13) & 0x3ff) : 0));
    if (absx >= 0x477ff000u) return (uint16_t)(sign | 0x7c00);
    if (absx < 0x38800000u) { /* subnormal half: let float addition round */
        float a;
        memcpy(&a, &absx, 4);
        a += 0.5f;
        uint32_t b;
        memcpy(&b, &a, 4);
        return (uint16_t)(sign | (b - 0x3f000000u));
    }
    absx += 0xc8000fffu + ((absx >> 13) & 1);
    return (uint16_t)(sign | (absx >> 13));
}
EMC_HD float emc_bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}
EMC_HD uint16_t emc_f32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);
    x += 0x7fffu + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

/* ------------------------------------------------------------------ keys */

/* The ascending key of element i of a contiguous array of dtype dt. */
EMC_HD uint64_t emc_sort_key(const void *base, int64_t i, int dt) {
    const char *p = (const char *)base + i * emc_itemsize(dt);
    switch (dt) {
    case EMC_BOOL: return *(const uint8_t *)p != 0;
    case EMC_UINT8: return *(const uint8_t *)p;
    case EMC_INT8: return (uint8_t)(*(const uint8_t *)p ^ 0x80u);
    case EMC_INT16: { uint16_t u; memcpy(&u, p, 2); return (uint16_t)(u ^ 0x8000u); }
    case EMC_INT32: { uint32_t u; memcpy(&u, p, 4); return u ^ 0x80000000u; }
    case EMC_INT64: { uint64_t u; memcpy(&u, p, 8); return u ^ 0x8000000000000000ull; }
    case EMC_FLOAT16:
    case EMC_BFLOAT16: {
        uint16_t h;
        memcpy(&h, p, 2);
        uint16_t exp_all = dt == EMC_FLOAT16 ? 0x7c00 : 0x7f80;
        if ((h & 0x7fff) > exp_all) return 0xFFFFu; /* NaN */
        if ((h & 0x7fff) == 0) h = 0;               /* -0.0 */
        return (h & 0x8000) ? (uint16_t)~h : (uint16_t)(h | 0x8000);
    }
    case EMC_FLOAT32: {
        uint32_t u;
        memcpy(&u, p, 4);
        if ((u & 0x7fffffffu) > 0x7f800000u) return 0xFFFFFFFFu;
        if ((u & 0x7fffffffu) == 0) u = 0;
        return (u & 0x80000000u) ? (uint32_t)~u : (u | 0x80000000u);
    }
    default: {
        uint64_t u;
        memcpy(&u, p, 8);
        if ((u & 0x7fffffffffffffffull) > 0x7ff0000000000000ull) return UINT64_MAX;
        if ((u & 0x7fffffffffffffffull) == 0) u = 0;
        return (u & 0x8000000000000000ull) ? ~u : (u | 0x8000000000000000ull);
    }
    }
}

/* All ones within the key's width: XORed into keys for descending order;
 * also the (ascending) key of every NaN of a float dtype. */
EMC_HD uint64_t emc_key_mask(int dt) {
    int bytes = emc_itemsize(dt);
    return bytes == 8 ? UINT64_MAX : (((uint64_t)1 << (8 * bytes)) - 1);
}

/* Key k of an array of keys `kb` bytes wide. */
EMC_HD uint64_t emc_key_at(const void *keys, int kb, int64_t k) {
    switch (kb) {
    case 1: return ((const uint8_t *)keys)[k];
    case 2: return ((const uint16_t *)keys)[k];
    case 4: return ((const uint32_t *)keys)[k];
    default: return ((const uint64_t *)keys)[k];
    }
}

/* ------------------------------------------------------------ selections */

/* Note [kthvalue ties] (cpu/sort.c): torch's median-of-three quickselect on
 * keys only, so the index returned among equal values is torch's. keys and
 * idx (n entries, in index order) are permuted in place; afterwards
 * position k holds the k-th (0-based). */
EMC_HD void emc_swap_pair(uint64_t *key, int64_t *idx, int64_t i, int64_t j) {
    uint64_t t = key[i];
    key[i] = key[j];
    key[j] = t;
    int64_t u = idx[i];
    idx[i] = idx[j];
    idx[j] = u;
}

EMC_HD void emc_kth_select(uint64_t *a, int64_t *ix, int64_t n, int64_t k) {
    int64_t lo = 0, hi = n - 1;
    for (;;) {
        if (hi <= lo) return;
        if (hi == lo + 1) {
            if (a[lo] > a[hi]) emc_swap_pair(a, ix, lo, hi);
            return;
        }
        emc_swap_pair(a, ix, lo + (hi - lo) / 2, lo + 1);
        if (a[lo + 1] > a[hi]) emc_swap_pair(a, ix, lo + 1, hi);
        if (a[lo] > a[hi]) emc_swap_pair(a, ix, lo, hi);
        if (a[lo + 1] > a[lo]) emc_swap_pair(a, ix, lo + 1, lo);
        uint64_t pivot = a[lo];
        int64_t i = lo + 1, j = hi;
        for (;;) { /* a[lo + 1] and a[hi] are sentinels */
            do i++;
            while (pivot > a[i]);
            do j--;
            while (a[j] > pivot);
            if (j < i) break;
            emc_swap_pair(a, ix, i, j);
        }
        emc_swap_pair(a, ix, lo, j);
        if (j <= k) lo = i;
        if (j >= k) hi = j - 1;
    }
}

/* median / nanmedian / mode of one row from its keys sorted stably in
 * ascending order (cpu/scan.c's pick: (value, index) pairs in lexicographic
 * order, NaN above all): the position in the sorted row whose element is the
 * result. median: the first NaN when there is one, else the ((n-1)/2)-th;
 * nanmedian: the ((m-1)/2)-th of the m non-NaNs (all NaN: the first);
 * mode: the last of the first longest run of equal keys (NaNs never equal). */
EMC_HD int64_t emc_sorted_pick(int kind, const void *keys, int kb, int64_t n, int dt) {
    uint64_t nan = emc_key_mask(dt);
    bool fl = emc_is_float(dt);
    if (kind != EMC_SEL_MODE) {
        int64_t lo = 0, hi = n; /* m: the first NaN key's position */
        while (fl && lo < hi) {
            int64_t mid = lo + (hi - lo) / 2;
            if (emc_key_at(keys, kb, mid) == nan)
                hi = mid;
            else
                lo = mid + 1;
        }
        int64_t m = fl ? lo : n;
        if (kind == EMC_SEL_MEDIAN) return m < n ? m : (n - 1) / 2;
        return m == 0 ? 0 : (m - 1) / 2;
    }
    int64_t best = 0, best_at = 0, run = 0;
    uint64_t cur = emc_key_at(keys, kb, 0);
    for (int64_t i = 0; i < n; i++) {
        uint64_t next = i + 1 < n ? emc_key_at(keys, kb, i + 1) : 0;
        run++;
        if (i == n - 1 || next != cur || (fl && cur == nan)) {
            if (run > best) {
                best = run;
                best_at = i;
            }
            run = 0;
        }
        cur = next;
    }
    return best_at;
}

/* unique: whether element i (> 0) of a contiguous array starts a new group,
 * ops/sort.c's Note [unique equality]: keys differ, or NaN (never equal). */
EMC_HD bool emc_group_start(const void *a, int64_t i, int dt) {
    if (i == 0) return true;
    uint64_t k = emc_sort_key(a, i, dt);
    return k != emc_sort_key(a, i - 1, dt) || (emc_is_float(dt) && k == emc_key_mask(dt));
}

/* ------------------------------------------------------------------ scans */

/* Element i of a typed array as double / int64 (scan accumulators). */
EMC_HD double emc_load_f(const char *p, int dt) {
    switch (dt) {
    case EMC_FLOAT16: { uint16_t h; memcpy(&h, p, 2); return emc_f16_to_f32(h); }
    case EMC_BFLOAT16: { uint16_t h; memcpy(&h, p, 2); return emc_bf16_to_f32(h); }
    case EMC_FLOAT32: { float f; memcpy(&f, p, 4); return f; }
    default: { double d; memcpy(&d, p, 8); return d; }
    }
}
EMC_HD int64_t emc_load_i(const char *p, int dt) {
    switch (dt) {
    case EMC_BOOL:
    case EMC_UINT8: return *(const uint8_t *)p;
    case EMC_INT8: return *(const int8_t *)p;
    case EMC_INT16: { int16_t v; memcpy(&v, p, 2); return v; }
    case EMC_INT32: { int32_t v; memcpy(&v, p, 4); return v; }
    default: { int64_t v; memcpy(&v, p, 8); return v; }
    }
}
/* Stores as the CPU's scans: float results through float32 for the halves,
 * integers wrap. */
EMC_HD void emc_store_f(char *p, int dt, double v) {
    switch (dt) {
    case EMC_FLOAT16: { uint16_t h = emc_f32_to_f16((float)v); memcpy(p, &h, 2); break; }
    case EMC_BFLOAT16: { uint16_t h = emc_f32_to_bf16((float)v); memcpy(p, &h, 2); break; }
    case EMC_FLOAT32: { float f = (float)v; memcpy(p, &f, 4); break; }
    default: memcpy(p, &v, 8); break;
    }
}
EMC_HD void emc_store_i(char *p, int dt, int64_t v) {
    switch (dt) {
    case EMC_BOOL:
    case EMC_UINT8: *(uint8_t *)p = (uint8_t)v; break;
    case EMC_INT8: *(int8_t *)p = (int8_t)v; break;
    case EMC_INT16: { int16_t x = (int16_t)v; memcpy(p, &x, 2); break; }
    case EMC_INT32: { int32_t x = (int32_t)v; memcpy(p, &x, 4); break; }
    default: memcpy(p, &v, 8); break;
    }
}

/* One line of a scan (cpu/scan.c, sequentially, so results are the CPU's
 * bit for bit): n elements `stride` elements apart in `in` and `out` (the
 * same dtype), cummax/cummin also write int64 indices at the same offsets.
 * cumsum/cumprod accumulate in int64 or double. Running extremes take a NaN
 * whenever one appears (the latest NaN's index) and ties move the index
 * forward. Reads element i before writing it. */
EMC_HD void emc_scan_line(int op, int dt, const char *in, char *out, int64_t *idx, int64_t n,
                          int64_t stride) {
    int isz = emc_itemsize(dt);
    int64_t step = stride * isz;
    bool fl = emc_is_float(dt);
    if (op == EMC_SCAN_CUMSUM || op == EMC_SCAN_CUMPROD) {
        bool sum = op == EMC_SCAN_CUMSUM;
        if (fl) {
            double acc = sum ? 0.0 : 1.0;
            for (int64_t i = 0; i < n; i++) {
                double x = emc_load_f(in + i * step, dt);
                acc = sum ? acc + x : acc * x;
                emc_store_f(out + i * step, dt, acc);
            }
        } else {
            uint64_t acc = sum ? 0 : 1; /* unsigned: wraps without undefined behaviour */
            for (int64_t i = 0; i < n; i++) {
                uint64_t x = (uint64_t)emc_load_i(in + i * step, dt);
                acc = sum ? acc + x : acc * x;
                emc_store_i(out + i * step, dt, (int64_t)acc);
            }
        }
        return;
    }
    bool mx = op == EMC_SCAN_CUMMAX;
    char raw[8] = {0};
    double bf = 0;
    int64_t bi_ = 0, bint = 0;
    for (int64_t i = 0; i < n; i++) {
        const char *p = in + i * step;
        bool take;
        if (fl) {
            double x = emc_load_f(p, dt);
            take = i == 0 || x != x || (bf == bf && (mx ? x >= bf : x <= bf));
            if (take) bf = x;
        } else {
            int64_t x = emc_load_i(p, dt);
            take = i == 0 || (mx ? x >= bint : x <= bint);
            if (take) bint = x;
        }
        if (take) {
            memcpy(raw, p, (size_t)isz);
            bi_ = i;
        }
        memcpy(out + i * step, raw, (size_t)isz);
        idx[i * stride] = bi_;
    }
}

/* ----------------------------------------------------------------- search */

/* The first boundary position i with b[i] >= v (left) or b[i] > v (right),
 * written as ops/sort.c's loop (torch's cus_lower_bound / cus_upper_bound),
 * so NaNs land where the CPU puts them. s: a sorter row or NULL. One
 * function per compare type (the core casts both sides to it). */
#define EMC_SEARCH_DEFINE(T, NAME)                                                           \
    EMC_HD int64_t NAME(const T *b, const int64_t *s, int64_t L, T v, bool right) {          \
        int64_t lo = 0, hi = L;                                                              \
        while (lo < hi) {                                                                    \
            int64_t mid = lo + ((hi - lo) >> 1);                                             \
            T m = s ? b[s[mid]] : b[mid];                                                    \
            bool go_right = right ? !(m > v) : !(m >= v);                                    \
            if (go_right)                                                                    \
                lo = mid + 1;                                                                \
            else                                                                             \
                hi = mid;                                                                    \
        }                                                                                    \
        return lo;                                                                           \
    }
EMC_SEARCH_DEFINE(uint8_t, emc_search_u8)
EMC_SEARCH_DEFINE(int8_t, emc_search_i8)
EMC_SEARCH_DEFINE(int16_t, emc_search_i16)
EMC_SEARCH_DEFINE(int32_t, emc_search_i32)
EMC_SEARCH_DEFINE(int64_t, emc_search_i64)
EMC_SEARCH_DEFINE(float, emc_search_f32)
EMC_SEARCH_DEFINE(double, emc_search_f64)

/* Value j of a search: its row of boundaries (per_row values share a row;
 * 0: one row for all), searched in dtype dt (uint8..int64, float32,
 * float64). */
EMC_HD int64_t emc_search_one(int dt, const void *bd, const int64_t *sorter, int64_t L, const void *val,
                              int64_t j, int64_t per_row, bool right) {
    int64_t row = per_row ? j / per_row : 0;
    const int64_t *s = sorter ? sorter + row * L : 0;
    switch (dt) {
    case EMC_UINT8: return emc_search_u8((const uint8_t *)bd + row * L, s, L, ((const uint8_t *)val)[j], right);
    case EMC_INT8: return emc_search_i8((const int8_t *)bd + row * L, s, L, ((const int8_t *)val)[j], right);
    case EMC_INT16: return emc_search_i16((const int16_t *)bd + row * L, s, L, ((const int16_t *)val)[j], right);
    case EMC_INT32: return emc_search_i32((const int32_t *)bd + row * L, s, L, ((const int32_t *)val)[j], right);
    case EMC_INT64: return emc_search_i64((const int64_t *)bd + row * L, s, L, ((const int64_t *)val)[j], right);
    case EMC_FLOAT32: return emc_search_f32((const float *)bd + row * L, s, L, ((const float *)val)[j], right);
    default: return emc_search_f64((const double *)bd + row * L, s, L, ((const double *)val)[j], right);
    }
}

#endif
