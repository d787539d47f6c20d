/* sort.c — CPU kernels for sorting and selection along one dim: sort,
 * argsort, topk and kthvalue (front-ends in ops/sort.c).
 *
 * Note [sort keys]: each element becomes an unsigned key whose integer order
 * is torch's order for the dtype: signed integers flip their sign bit; floats
 * map sign-magnitude bits onto an unsigned line, with -0.0 made +0.0 (they
 * are equal) and every NaN made the largest key (NaNs sort last, all equal).
 * Descending order flips the key's bits within its width. Each slice is then
 * sorted as (key, index) pairs in lexicographic order — a stable ascending
 * sort of keys — so equal elements keep their original order in both
 * directions, as torch's stable sort does.
 *
 * Algorithms: insertion + merge sort for short slices, LSD radix sort on the
 * key bytes for long ones (passes whose byte is constant are skipped), and
 * introselect (quickselect that falls back to sorting) for topk, and
 * torch's own quickselect for kthvalue (Note [kthvalue ties]).
 * Slices run in parallel with OpenMP, with the GIL released. Values are
 * copied from the input by index, so they keep their exact bits. */
#include "../ember.h"
#ifdef _OPENMP
#include <omp.h>
#endif

typedef struct {
    uint64_t key;
    int64_t idx;
} Pair;

/* ------------------------------------------------------------------ keys */

int em_sort_key_bits(EmDType d) { return 8 * em_itemsize(d); }

static inline uint64_t key_f32(float f) {
    if (f != f) return 0xFFFFFFFFu;
    if (f == 0) f = 0; /* -0.0 == +0.0 */
    uint32_t u;
    memcpy(&u, &f, 4);
    return (u & 0x80000000u) ? (uint32_t)~u : (u | 0x80000000u);
}

static inline uint64_t key_f64(double f) {
    if (f != f) return UINT64_MAX;
    if (f == 0) f = 0;
    uint64_t u;
    memcpy(&u, &f, 8);
    return (u & 0x8000000000000000ull) ? ~u : (u | 0x8000000000000000ull);
}

/* float16 (exp_all = 0x7c00) and bfloat16 (0x7f80): sign-magnitude bits */
static inline uint64_t key_half(uint16_t h, uint16_t exp_all) {
    if ((h & 0x7fff) > exp_all) return 0xFFFFu;
    if ((h & 0x7fff) == 0) h = 0;
    return (h & 0x8000) ? (uint16_t)~h : (uint16_t)(h | 0x8000);
}

/* Fill keys (stride: how far apart consecutive keys are written, in
 * uint64_t units, so the same loop fills a key array or Pair.key). */
static void make_keys(const char *src, int64_t sstride, int64_t n, EmDType d, bool desc,
                      uint64_t *dst, int64_t dstride) {
    int bits = em_sort_key_bits(d);
    uint64_t flip = !desc ? 0 : bits == 64 ? UINT64_MAX : ((uint64_t)1 << bits) - 1;
#define KEYS(T, EXPR)                                                          \
    for (int64_t i = 0; i < n; i++) {                                          \
        T x;                                                                   \
        memcpy(&x, src + i * sstride, sizeof(T));                              \
        dst[i * dstride] = (uint64_t)(EXPR) ^ flip;                            \
    }                                                                          \
    break;
    switch (d) {
    case EM_BOOL: KEYS(uint8_t, x != 0)
    case EM_UINT8: KEYS(uint8_t, x)
    case EM_INT8: KEYS(uint8_t, x ^ 0x80u)
    case EM_INT16: KEYS(uint16_t, (uint16_t)(x ^ 0x8000u))
    case EM_INT32: KEYS(uint32_t, x ^ 0x80000000u)
    case EM_INT64: KEYS(uint64_t, x ^ 0x8000000000000000ull)
    case EM_FLOAT16: KEYS(uint16_t, key_half(x, 0x7c00))
    case EM_BFLOAT16: KEYS(uint16_t, key_half(x, 0x7f80))
    case EM_FLOAT32: KEYS(float, key_f32(x))
    case EM_FLOAT64: KEYS(double, key_f64(x))
    case EM_UINT16: KEYS(uint16_t, x)
    case EM_UINT32: KEYS(uint32_t, x)
    case EM_UINT64: KEYS(uint64_t, x)
    default: break;
    }
#undef KEYS
}

void em_cpu_sort_keys(const char *data, int64_t byte_stride, int64_t n, EmDType d,
                      bool descending, uint64_t *keys) {
    make_keys(data, byte_stride, n, d, descending, keys, 1);
}

/* ------------------------------------------------------------- sorting */

static inline bool pair_lt(Pair a, Pair b) {
    return a.key < b.key || (a.key == b.key && a.idx < b.idx);
}

static void insertion_sort(Pair *a, int64_t n) {
    for (int64_t i = 1; i < n; i++) {
        Pair p = a[i];
        int64_t j = i;
        while (j > 0 && pair_lt(p, a[j - 1])) {
            a[j] = a[j - 1];
            j--;
        }
        a[j] = p;
    }
}

#define RUN 32

/* Bottom-up merge sort in (key, index) order; tmp holds n pairs. */
static void merge_sort(Pair *a, Pair *tmp, int64_t n) {
    for (int64_t i = 0; i < n; i += RUN) insertion_sort(a + i, n - i < RUN ? n - i : RUN);
    Pair *src = a, *dst = tmp;
    for (int64_t w = RUN; w < n; w *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * w) {
            int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            int64_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) dst[k++] = pair_lt(src[j], src[i]) ? src[j++] : src[i++];
            while (i < mid) dst[k++] = src[i++];
            while (j < hi) dst[k++] = src[j++];
        }
        Pair *t = src;
        src = dst;
        dst = t;
    }
    if (src != a) memcpy(a, src, (size_t)n * sizeof(Pair));
}

/* LSD radix sort on the low `bytes` bytes of the keys. Stable: pairs that
 * start in index order end in (key, index) order. */
static void radix_sort(Pair *a, Pair *tmp, int64_t n, int bytes, const EmStop *stop) {
    int64_t hist[8][256];
    memset(hist, 0, (size_t)bytes * sizeof hist[0]);
    for (int64_t i = 0; i < n; i++) {
        uint64_t k = a[i].key;
        for (int b = 0; b < bytes; b++) hist[b][(k >> (8 * b)) & 255]++;
    }
    Pair *src = a, *dst = tmp;
    for (int b = 0; b < bytes; b++) {
        int64_t *h = hist[b];
        if (h[(src[0].key >> (8 * b)) & 255] == n) continue; /* one bucket: nothing moves */
        int64_t sum = 0;
        for (int v = 0; v < 256; v++) {
            int64_t c = h[v];
            h[v] = sum;
            sum += c;
        }
        for (int64_t lo = 0; lo < n; lo += (int64_t)1 << 20) {
            if (em_stop_now(stop)) return; /* the caller writes nothing from a stopped sort */
            int64_t hi = n - lo < ((int64_t)1 << 20) ? n : lo + ((int64_t)1 << 20);
            for (int64_t i = lo; i < hi; i++) dst[h[(src[i].key >> (8 * b)) & 255]++] = src[i];
        }
        Pair *t = src;
        src = dst;
        dst = t;
    }
    if (src != a) memcpy(a, src, (size_t)n * sizeof(Pair));
}


/* Sort pairs that are in index order. Radix sort wins once a slice is
 * longer than ~16 elements per key byte (measured: 1-byte keys from 32,
 * 8-byte keys from ~150). */
static void sort_pairs(Pair *a, Pair *tmp, int64_t n, int key_bytes, const EmStop *stop) {
    if (n <= 16 * key_bytes + 16)
        merge_sort(a, tmp, n);
    else
        radix_sort(a, tmp, n, key_bytes, stop);
}

/* Max-heap sift-down in (key, index) order. */
static void sift_down(Pair *h, int64_t k, int64_t i) {
    for (;;) {
        int64_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < k && pair_lt(h[m], h[l])) m = l;
        if (r < k && pair_lt(h[m], h[r])) m = r;
        if (m == i) return;
        Pair t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

/* In place, O(n log n) worst case: introselect's fallback. */
static void heap_sort(Pair *a, int64_t n) {
    for (int64_t i = n / 2; i-- > 0;) sift_down(a, n, i);
    for (int64_t e = n - 1; e > 0; e--) {
        Pair t = a[0];
        a[0] = a[e];
        a[e] = t;
        sift_down(a, e, 0);
    }
}

/* Introselect: afterwards a[k] is the k-th pair in (key, index) order, with
 * smaller pairs before it and larger after. Pairs are all distinct (the
 * index breaks ties), so the Hoare partition always makes progress. */
static void select_nth(Pair *a, int64_t n, int64_t k) {
    int64_t lo = 0, hi = n;
    int depth = 2 * (64 - __builtin_clzll((unsigned long long)n | 1));
    while (hi - lo > RUN) {
        if (depth-- == 0) {
            heap_sort(a + lo, hi - lo);
            return;
        }
        int64_t mid = lo + (hi - lo) / 2;
        Pair x = a[lo], y = a[mid], z = a[hi - 1], p;
        if (pair_lt(x, y))
            p = pair_lt(y, z) ? y : pair_lt(x, z) ? z : x;
        else
            p = pair_lt(x, z) ? x : pair_lt(y, z) ? z : y;
        int64_t i = lo, j = hi - 1;
        while (i <= j) {
            while (pair_lt(a[i], p)) i++;
            while (pair_lt(p, a[j])) j--;
            if (i <= j) {
                Pair t = a[i];
                a[i++] = a[j];
                a[j--] = t;
            }
        }
        if (k <= j)
            hi = j + 1;
        else if (k >= i)
            lo = i;
        else
            return; /* a[k] is the pivot */
    }
    insertion_sort(a + lo, hi - lo);
}

/* Note [kthvalue ties]: torch's kthvalue is a median-of-three quickselect
 * (Numerical Recipes' `select`) on a copy of the slice that compares values
 * only, so among equal values the index it returns is whichever the
 * partitioning leaves at position k — deterministic, but not the first. We
 * run the same steps on the keys (key order is torch's order with NaN
 * largest, Note [sort keys]) to return torch's index. Worst case O(n^2),
 * as torch's. */
static inline void swap_pairs(Pair *a, int64_t i, int64_t j) {
    Pair t = a[i];
    a[i] = a[j];
    a[j] = t;
}

static void select_kth_as_torch(Pair *a, int64_t n, int64_t k) {
    int64_t lo = 0, hi = n - 1;
    for (;;) {
        if (hi <= lo) return;
        if (hi == lo + 1) {
            if (a[lo].key > a[hi].key) swap_pairs(a, lo, hi);
            return;
        }
        /* the median of a[lo], a[mid], a[hi] ends in a[lo], the smallest in a[lo + 1], the largest in a[hi] */
        swap_pairs(a, lo + (hi - lo) / 2, lo + 1);
        if (a[lo + 1].key > a[hi].key) swap_pairs(a, lo + 1, hi);
        if (a[lo].key > a[hi].key) swap_pairs(a, lo, hi);
        if (a[lo + 1].key > a[lo].key) swap_pairs(a, lo + 1, lo);
        uint64_t pivot = a[lo].key;
        int64_t i = lo + 1, j = hi;
        for (;;) { /* a[lo + 1] and a[hi] are sentinels */
            do i++;
            while (pivot > a[i].key);
            do j--;
            while (a[j].key > pivot);
            if (j < i) break;
            swap_pairs(a, i, j);
        }
        swap_pairs(a, lo, j);
        if (j <= k) lo = i;
        if (j >= k) hi = j - 1;
    }
}

#define BLOCK 4096

/* The k smallest pairs of a slice, for small k, streaming: a max-heap of the
 * best k so far; each further element costs its key and one comparison with
 * the heap's top unless it belongs in the heap. Scratch: h holds 2k pairs
 * (the heap, then merge sort space), keys BLOCK keys. */
static void heap_topk(const char *in, int64_t st, int64_t n, int64_t k, EmDType d, bool desc, Pair *h,
                      uint64_t *keys) {
    make_keys(in, st, k, d, desc, &h[0].key, 2);
    for (int64_t i = 0; i < k; i++) h[i].idx = i;
    for (int64_t i = k / 2; i-- > 0;) sift_down(h, k, i);
    for (int64_t start = k; start < n; start += BLOCK) {
        int64_t m = n - start < BLOCK ? n - start : BLOCK;
        make_keys(in + start * st, st, m, d, desc, keys, 1);
        for (int64_t i = 0; i < m; i++) {
            /* later indices lose ties, so only a strictly smaller key enters */
            if (keys[i] < h[0].key) {
                h[0].key = keys[i];
                h[0].idx = start + i;
                sift_down(h, k, 0);
            }
        }
    }
    merge_sort(h, h + k, k);
}

/* ---------------------------------------------------------- the driver */

typedef struct {
    EmSelectMode mode;
    int64_t n, k, m; /* slice length, k, output length along dim */
    EmDType dtype;
    bool desc;
    int isz, key_bytes;
    const char *in;
    char *vals, *idxs;
    int64_t in_st, v_st, i_st; /* byte strides along dim */
    int nother;                /* the other dims, innermost last */
    int64_t osize[EM_MAX_DIMS], oin[EM_MAX_DIMS], ov[EM_MAX_DIMS], oi[EM_MAX_DIMS];
    const EmStop *stop; /* Note [interrupts]: NULL when not armed */
} SortJob;

/* How a slice is processed, and the scratch pairs that takes. */
typedef enum { ALG_SORT, ALG_HEAP, ALG_SELECT } Alg;

static Alg choose(const SortJob *j) {
    if (j->mode == EM_SELECT_KTH) return ALG_SELECT;
    if (j->mode == EM_SELECT_TOPK && j->k <= 4096 && j->k * 32 <= j->n) return ALG_HEAP;
    if (j->mode == EM_SELECT_TOPK && j->k * 8 < j->n) return ALG_SELECT;
    return ALG_SORT;
}

static int64_t scratch_pairs(const SortJob *j) {
    switch (choose(j)) {
    case ALG_HEAP: return 2 * j->k + BLOCK / 2; /* the heap and its sort space; BLOCK keys */
    case ALG_SELECT: return j->n + (j->mode == EM_SELECT_TOPK ? j->k : 0);
    default: return 2 * j->n;
    }
}

static void run_slice(const SortJob *j, int64_t s, Pair *a) {
    const char *in = j->in;
    char *v = j->vals, *ix = j->idxs;
    for (int d = j->nother - 1; d >= 0; d--) {
        int64_t c = s % j->osize[d];
        s /= j->osize[d];
        in += c * j->oin[d];
        if (v) v += c * j->ov[d];
        if (ix) ix += c * j->oi[d];
    }
    int64_t n = j->n;
    const Pair *res = a;
    Alg alg = choose(j);
    if (alg == ALG_HEAP) {
        heap_topk(in, j->in_st, n, j->k, j->dtype, j->desc, a, (uint64_t *)(a + 2 * j->k));
    } else {
        make_keys(in, j->in_st, n, j->dtype, j->desc, &a[0].key, 2);
        for (int64_t i = 0; i < n; i++) a[i].idx = i;
        if (alg == ALG_SORT) {
            sort_pairs(a, a + n, n, j->key_bytes, j->stop);
        } else if (j->mode == EM_SELECT_TOPK) { /* select, then sort the k (no longer in index order) */
            select_nth(a, n, j->k - 1);
            merge_sort(a, a + n, j->k);
        } else { /* the k-th, 1-based, with torch's index among ties */
            select_kth_as_torch(a, n, j->k - 1);
            res = a + j->k - 1;
        }
    }
    if (em_stop_now(j->stop)) return; /* the outputs are left as they are */
    for (int64_t i = 0; i < j->m; i++) {
        if (v) memcpy(v + i * j->v_st, in + res[i].idx * j->in_st, (size_t)j->isz);
        if (ix) memcpy(ix + i * j->i_st, &res[i].idx, sizeof(int64_t));
    }
}

int em_cpu_sort_select(EmTensor *in, int dim, EmSelectMode mode, int64_t k, bool descending,
                       EmTensor *values, EmTensor *indices) {
    SortJob j;
    memset(&j, 0, sizeof j);
    j.mode = mode;
    j.dtype = (EmDType)in->dtype;
    j.desc = descending;
    j.isz = em_itemsize(j.dtype);
    j.key_bytes = em_sort_key_bits(j.dtype) / 8;
    j.n = in->ndim ? in->sizes[dim] : 1;
    j.k = k;
    j.m = mode == EM_SELECT_SORT ? j.n : mode == EM_SELECT_TOPK ? k : 1;
    j.in = em_data(in);
    j.vals = values ? em_data(values) : NULL;
    j.idxs = indices ? em_data(indices) : NULL;
    j.in_st = in->ndim ? in->strides[dim] * j.isz : 0;
    j.v_st = values && values->ndim ? values->strides[dim] * j.isz : 0;
    j.i_st = indices && indices->ndim ? indices->strides[dim] * 8 : 0;
    int64_t nslices = 1;
    for (int d = 0; d < in->ndim; d++) {
        if (d == dim) continue;
        j.osize[j.nother] = in->sizes[d];
        j.oin[j.nother] = in->strides[d] * j.isz;
        j.ov[j.nother] = values ? values->strides[d] * j.isz : 0;
        j.oi[j.nother] = indices ? indices->strides[d] * 8 : 0;
        nslices *= in->sizes[d];
        j.nother++;
    }
    if (nslices == 0 || j.m == 0) return 0;
    size_t bytes;
    if (__builtin_mul_overflow((size_t)scratch_pairs(&j), sizeof(Pair), &bytes)) {
        PyErr_NoMemory();
        return -1;
    }
    int64_t total = nslices * j.n;
    int nt = 1;
#ifdef _OPENMP
    nt = em_num_threads;
    if (nslices < nt) nt = (int)nslices;
    if (total < EM_GRAIN) nt = 1;
#endif
    /* scratch for each thread, taken here where the allocator may use Python */
    Pair *bufs[256];
    if (nt > 256) nt = 256;
    for (int t = 0; t < nt; t++) {
        bufs[t] = em_alloc_cpu(bytes);
        if (!bufs[t]) {
            while (t-- > 0) em_free_cpu(bufs[t], bytes);
            PyErr_NoMemory();
            return -1;
        }
    }
    EmStop stop = {false, 0};
    if (total >= EM_STOP_WORK) {
        stop = em_stop_arm();
        j.stop = &stop;
    }
    PyThreadState *ts = total >= 65536 ? PyEval_SaveThread() : NULL;
#ifdef _OPENMP
#pragma omp parallel for num_threads(nt) schedule(dynamic, 8) if (nt > 1)
#endif
    for (int64_t s = 0; s < nslices; s++) {
#ifdef _OPENMP
        Pair *buf = bufs[omp_get_thread_num()];
#else
        Pair *buf = bufs[0];
#endif
        if (!em_stop_now(j.stop)) run_slice(&j, s, buf);
    }
    if (ts) PyEval_RestoreThread(ts);
    for (int t = 0; t < nt; t++) em_free_cpu(bufs[t], bytes);
    return em_stop_check(&stop);
}
