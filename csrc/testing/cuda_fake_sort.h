/* cuda_fake_sort.h — the fake backend's (Note [fake CUDA]) sorts,
 * selections, scans and searches. Included once, by cuda_fake.c, where its
 * helpers (untag, fake_fail, host, ...) are in scope; cuda_fake_more.h uses
 * its FakePair. Kept apart by concern, and so cuda_fake.c stays under 1,500
 * lines. */
#ifndef EMBER_TESTING_CUDA_FAKE_SORT_H
#define EMBER_TESTING_CUDA_FAKE_SORT_H

/* ---- sort and scan (cudasort) on the fake: the per-row logic of
 * csrc/cuda/sort_logic.h that the GPU kernels run (keys, torch's kthvalue
 * quickselect, the median / mode picks, the sequential scans, the binary
 * searches), here on host memory; a stable sort of (key, index) pairs
 * stands in for CUB's. */
typedef struct {
    uint64_t key;
    int64_t idx;
} FakePair;

static int fake_pair_cmp(const void *a, const void *b) {
    const FakePair *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Row r's (key, index) pairs sorted in (key, index) order: stable in keys. */
static void fake_sorted_row(const void *in, int dtype, int64_t r, int64_t n, uint64_t flip, FakePair *p) {
    for (int64_t i = 0; i < n; i++) p[i] = (FakePair){emc_sort_key(in, r * n + i, dtype) ^ flip, i};
    qsort(p, (size_t)n, sizeof(FakePair), fake_pair_cmp);
}

static void fake_put(const void *in, int dtype, int64_t src, void *values, int64_t *indices, int64_t dst, int64_t ix) {
    int isz = emc_itemsize(dtype);
    if (values) memcpy((char *)values + dst * isz, (const char *)in + src * isz, (size_t)isz);
    if (indices) indices[dst] = ix;
}

static int fake_sort_rows(int dev, int dtype, const void *tin, int64_t rows, int64_t n, bool desc, int64_t m,
                          void *tvalues, int64_t *tindices) {
    if (dtype < 0 || dtype > EM_FLOAT64) return fake_fail("sort: unknown dtype code"); /* as sort.cu */
    if (m < 0 || m > n) return fake_fail("sort: m out of range");
    if (rows == 0 || m == 0) return 0;
    const void *in = untag(tin);
    void *values = tvalues ? untag(tvalues) : NULL;
    int64_t *indices = tindices ? untag(tindices) : NULL;
    FakePair *p = malloc((size_t)n * sizeof(FakePair));
    if (!p) return fake_fail("out of host memory");
    for (int64_t r = 0; r < rows; r++) {
        fake_sorted_row(in, dtype, r, n, desc ? emc_key_mask(dtype) : 0, p);
        for (int64_t j = 0; j < m; j++) fake_put(in, dtype, r * n + p[j].idx, values, indices, r * m + j, p[j].idx);
    }
    free(p);
    return 0;
}

static int fake_select_rows(int dev, int kind, int dtype, const void *tin, int64_t rows, int64_t n, int64_t k,
                            void *tvalues, int64_t *tindices) {
    if (rows == 0) return 0;
    if (n == 0) return fake_fail("select: empty rows");
    if (kind == EMC_SEL_KTH && (k < 1 || k > n)) return fake_fail("kthvalue: k out of range");
    const void *in = untag(tin);
    void *values = tvalues ? untag(tvalues) : NULL;
    int64_t *indices = tindices ? untag(tindices) : NULL;
    FakePair *p = malloc((size_t)n * sizeof(FakePair));
    uint64_t *keys = malloc((size_t)n * sizeof(uint64_t));
    int64_t *ix = malloc((size_t)n * sizeof(int64_t));
    if (!p || !keys || !ix) {
        free(p), free(keys), free(ix);
        return fake_fail("out of host memory");
    }
    for (int64_t r = 0; r < rows; r++) {
        int64_t at;
        if (kind == EMC_SEL_KTH) {
            for (int64_t i = 0; i < n; i++) keys[i] = emc_sort_key(in, r * n + i, dtype), ix[i] = i;
            emc_kth_select(keys, ix, n, k - 1);
            at = ix[k - 1];
        } else {
            fake_sorted_row(in, dtype, r, n, 0, p);
            for (int64_t i = 0; i < n; i++) keys[i] = p[i].key;
            at = p[emc_sorted_pick(kind, keys, 8, n, dtype)].idx;
        }
        fake_put(in, dtype, r * n + at, values, indices, r, at);
    }
    free(p), free(keys), free(ix);
    return 0;
}

static int fake_scan(int dev, int op, int dtype, const void *tin, void *tout, int64_t *tindices, int64_t outer,
                     int64_t n, int64_t inner) {
    if (op >= EMC_SCAN_CUMMAX && !tindices) return fake_fail("scan: cummax/cummin need indices");
    if (outer == 0 || n == 0 || inner <= 0) return 0;
    const char *in = untag(tin);
    char *out = untag(tout);
    int64_t *idx = tindices ? untag(tindices) : NULL;
    int isz = emc_itemsize(dtype);
    for (int64_t l = 0; l < outer * inner; l++) {
        int64_t o = l / inner, j = l % inner, off = o * n * inner + j;
        emc_scan_line(op, dtype, in + off * isz, out + off * isz, idx ? idx + off : NULL, n, inner);
    }
    return 0;
}

static int fake_search(int dev, int dtype, const void *bd, const int64_t *tsorter, int64_t rows, int64_t L,
                       const void *val, int64_t nval, int64_t per_row, bool right, bool i32, void *tout) {
    if (dtype < EM_UINT8 || dtype > EM_FLOAT64 || dtype == EM_FLOAT16 || dtype == EM_BFLOAT16)
        return fake_fail("searchsorted: no kernel for this dtype");
    const int64_t *sorter = tsorter ? untag(tsorter) : NULL;
    for (int64_t i = 0; sorter && i < rows * L; i++)
        if (sorter[i] < 0 || sorter[i] >= L) return 1;
    void *out = untag(tout);
    for (int64_t j = 0; j < nval; j++) {
        int64_t pos = emc_search_one(dtype, untag(bd), sorter, L, untag(val), j, per_row, right);
        if (i32)
            ((int32_t *)out)[j] = (int32_t)pos;
        else
            ((int64_t *)out)[j] = pos;
    }
    return 0;
}

static int fake_unique(int dev, int dtype, const void *tsorted, const int64_t *tperm, int64_t n, void *tvals,
                       int64_t *tinverse, int64_t *tcounts, int64_t *groups) {
    const char *sorted = untag(tsorted);
    const int64_t *perm = tperm ? untag(tperm) : NULL;
    int64_t *inverse = tinverse ? untag(tinverse) : NULL, *counts = tcounts ? untag(tcounts) : NULL, g = -1;
    int isz = emc_itemsize(dtype);
    for (int64_t i = 0; i < n; i++) {
        if (emc_group_start(sorted, i, dtype)) {
            g++;
            memcpy((char *)untag(tvals) + g * isz, sorted + i * isz, (size_t)isz);
            if (counts) counts[g] = 0;
        }
        if (counts) counts[g]++;
        if (inverse) inverse[perm ? perm[i] : i] = g;
    }
    *groups = g + 1;
    return 0;
}

#endif
