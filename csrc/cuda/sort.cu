// sort.cu — Note [CUDA sort] (sort.h): sort / argsort / topk along the
// innermost dim of a contiguous [rows, n] block, kthvalue / median /
// nanmedian / mode per row, cumsum / cumprod / cummax / cummin over
// [outer, n, inner], searchsorted / bucketize. Keys, picks, scans and
// searches are sort_logic.h's functions, which the fake backend runs too.
#include <cuda_runtime.h>

#include <cub/cub.cuh>

#include <stdint.h>

#include <type_traits>

#include "runtime.h"
#include "sort.h"
#include "sort_logic.h"

namespace {

constexpr int kThreads = 256;

cudaStream_t stream_of(int dev) { return static_cast<cudaStream_t>(emc_current_stream(dev)); }

// A grid of at most 65535 * 16 blocks for `work` items: kernels stride over the rest.
unsigned grid_for(int64_t work, int threads = kThreads) {
    int64_t b = (work + threads - 1) / threads;
    return (unsigned)(b < 1 ? 1 : b > 65535 * 16 ? 65535 * 16 : b);
}

// scratch memory for the entry (runtime.h)
struct Scratch : EmcScratch {
    Scratch(int d, cudaStream_t st) : EmcScratch(d, st, "sort") {}
};

int launched(const char *what) { return emc_check(cudaGetLastError(), what); }

// ------------------------------------------------------------- kernels

// keys[i] = key of in[i] ^ flip, idx[i] = i's position in its row.
template <class K>
__global__ void make_keys_kernel(const void *in, int dt, int64_t total, int64_t n, uint64_t flip, K *keys,
                                 int64_t *idx) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        keys[i] = (K)(emc_sort_key(in, i, dt) ^ flip);
        idx[i] = i % n;
    }
}

__global__ void offsets_kernel(int64_t *off, int64_t rows, int64_t n) {
    for (int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; r <= rows; r += (int64_t)gridDim.x * blockDim.x)
        off[r] = r * n;
}

// The first m of each sorted row: values copied from the input by index (their exact bits).
__global__ void gather_kernel(const char *in, int isz, const int64_t *sorted_idx, int64_t rows, int64_t n,
                              int64_t m, char *values, int64_t *indices) {
    int64_t total = rows * m;
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total; t += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = t / m, j = t - r * m;
        int64_t ix = sorted_idx[r * n + j];
        if (values) {
            const char *src = in + (r * n + ix) * isz;
            char *dst = values + t * isz;
            for (int b = 0; b < isz; b++) dst[b] = src[b];
        }
        if (indices) indices[t] = ix;
    }
}

__device__ void write_pick(const char *in, int isz, int64_t r, int64_t n, int64_t ix, char *values, int64_t *indices) {
    if (values) {
        const char *src = in + (r * n + ix) * isz;
        for (int b = 0; b < isz; b++) values[r * isz + b] = src[b];
    }
    if (indices) indices[r] = ix;
}

// One thread per row: torch's quickselect (Note [kthvalue ties]) on the row's keys.
__global__ void kth_kernel(const char *in, int isz, uint64_t *keys, int64_t *idx, int64_t rows, int64_t n,
                           int64_t k, char *values, int64_t *indices) {
    for (int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; r < rows; r += (int64_t)gridDim.x * blockDim.x) {
        emc_kth_select(keys + r * n, idx + r * n, n, k);
        write_pick(in, isz, r, n, idx[r * n + k], values, indices);
    }
}

// One thread per row: median / nanmedian / mode from the stably sorted keys.
template <class K>
__global__ void pick_kernel(int kind, int dt, const char *in, int isz, const K *keys, const int64_t *idx,
                            int64_t rows, int64_t n, char *values, int64_t *indices) {
    for (int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; r < rows; r += (int64_t)gridDim.x * blockDim.x) {
        int64_t p = emc_sorted_pick(kind, keys + r * n, (int)sizeof(K), n, dt);
        write_pick(in, isz, r, n, idx[r * n + p], values, indices);
    }
}

// One thread per line of an [outer, n, inner] block: neighbouring threads
// take neighbouring inner positions, so their reads coalesce when inner > 1.
__global__ void scan_lines_kernel(int op, int dt, const char *in, char *out, int64_t *idx, int64_t outer,
                                  int64_t n, int64_t inner) {
    int isz = emc_itemsize(dt);
    int64_t lines = outer * inner;
    for (int64_t l = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; l < lines; l += (int64_t)gridDim.x * blockDim.x) {
        int64_t o = l / inner, j = l - o * inner, off = o * n * inner + j;
        emc_scan_line(op, dt, in + off * isz, out + off * isz, idx ? idx + off : nullptr, n, inner);
    }
}

// Rows of a scan along the innermost dim (inner == 1) that are long: one
// block per row scans chunks of kThreads elements with cub::BlockScan and
// carries the running total. Sums and products of floats accumulate in
// double as on the CPU, though in another order (results agree to rounding).
struct SumOp {
    template <class T> __device__ T operator()(T a, T b) const { return a + b; }
};
struct ProdOp {
    template <class T> __device__ T operator()(T a, T b) const { return a * b; }
};

template <class A, class Op>
__global__ void scan_rows_kernel(int dt, const char *in, char *out, int64_t rows, int64_t n, A ident, Op op) {
    using BlockScan = cub::BlockScan<A, kThreads>;
    __shared__ typename BlockScan::TempStorage tmp;
    __shared__ A carry_s;
    int isz = emc_itemsize(dt);
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        A carry = ident;
        for (int64_t base = 0; base < n; base += kThreads) {
            int64_t i = base + threadIdx.x;
            const char *p = in + (r * n + i) * isz;
            A x = ident;
            if (i < n) {
                if constexpr (std::is_floating_point<A>::value) x = (A)emc_load_f(p, dt);
                else x = (A)emc_load_i(p, dt);
            }
            A incl, total;
            BlockScan(tmp).InclusiveScan(x, incl, op, total);
            incl = op(carry, incl);
            if (i < n) {
                char *q = out + (r * n + i) * isz;
                if constexpr (std::is_floating_point<A>::value) emc_store_f(q, dt, (double)incl);
                else emc_store_i(q, dt, (int64_t)incl);
            }
            if (threadIdx.x == 0) carry_s = op(carry, total);
            __syncthreads();
            carry = carry_s;
            __syncthreads(); // tmp and carry_s are reused by the next chunk
        }
    }
}

__global__ void search_kernel(int dt, const void *bd, const int64_t *sorter, int64_t L, const void *val,
                              int64_t nval, int64_t per_row, bool right, bool i32, void *out) {
    for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < nval; j += (int64_t)gridDim.x * blockDim.x) {
        int64_t pos = emc_search_one(dt, bd, sorter, L, val, j, per_row, right);
        if (i32)
            ((int32_t *)out)[j] = (int32_t)pos;
        else
            ((int64_t *)out)[j] = pos;
    }
}

// unique: flags[i] = 1 where a group starts (then scanned into group numbers).
__global__ void group_flags_kernel(const void *sorted, int dt, int64_t n, unsigned long long *flags) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        flags[i] = emc_group_start(sorted, i, dt) ? 1 : 0;
}

// unique: gid holds each position's group + 1. The first of a group writes its
// value; counts[g] = (last + 1) - first, summed atomically from both ends
// (counts zeroed first; unsigned arithmetic wraps back to the difference).
__global__ void group_scatter_kernel(const char *sorted, int isz, const int64_t *perm, int64_t n,
                                     const unsigned long long *gid, char *vals, int64_t *inverse,
                                     unsigned long long *counts) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t g = (int64_t)gid[i] - 1;
        bool first = i == 0 || gid[i - 1] != gid[i], last = i == n - 1 || gid[i + 1] != gid[i];
        if (first)
            for (int b = 0; b < isz; b++) vals[g * isz + b] = sorted[i * isz + b];
        if (inverse) inverse[perm ? perm[i] : i] = g;
        if (counts && first) atomicAdd(counts + g, 0ull - (unsigned long long)i);
        if (counts && last) atomicAdd(counts + g, (unsigned long long)(i + 1));
    }
}

__global__ void check_sorter_kernel(const int64_t *s, int64_t count, int64_t L, int *bad) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count; i += (int64_t)gridDim.x * blockDim.x)
        if (s[i] < 0 || s[i] >= L) *bad = 1;
}

// ------------------------------------------------------------- drivers

// Stably sorted (key, index) pairs of each row into *keys_out / *idx_out (scratch).
template <class K>
int sort_pairs(Scratch &sc, int dt, const void *in, int64_t rows, int64_t n, bool desc, K **keys_out,
               int64_t **idx_out) {
    cudaStream_t s = sc.s;
    int64_t total = rows * n;
    K *k0 = (K *)sc.get(total * sizeof(K)), *k1 = k0 ? (K *)sc.get(total * sizeof(K)) : nullptr;
    int64_t *i0 = k1 ? (int64_t *)sc.get(total * 8) : nullptr, *i1 = i0 ? (int64_t *)sc.get(total * 8) : nullptr;
    if (!i1) return -1;
    make_keys_kernel<K><<<grid_for(total), kThreads, 0, s>>>(in, dt, total, n, desc ? emc_key_mask(dt) : 0, k0, i0);
    if (launched("sort keys") < 0) return -1;
    size_t temp = 0;
    cudaError_t err;
    if (rows == 1) {
        err = cub::DeviceRadixSort::SortPairs(nullptr, temp, k0, k1, i0, i1, n, 0, (int)(8 * sizeof(K)), s);
        void *t = err == cudaSuccess ? sc.get(temp) : nullptr;
        if (err == cudaSuccess && !t) return -1;
        if (err == cudaSuccess)
            err = cub::DeviceRadixSort::SortPairs(t, temp, k0, k1, i0, i1, n, 0, (int)(8 * sizeof(K)), s);
    } else {
        int64_t *off = (int64_t *)sc.get((rows + 1) * 8);
        if (!off) return -1;
        offsets_kernel<<<grid_for(rows + 1), kThreads, 0, s>>>(off, rows, n);
        if (launched("sort offsets") < 0) return -1;
        err = cub::DeviceSegmentedSort::StableSortPairs(nullptr, temp, k0, k1, i0, i1, total, rows, off, off + 1, s);
        void *t = err == cudaSuccess ? sc.get(temp) : nullptr;
        if (err == cudaSuccess && !t) return -1;
        if (err == cudaSuccess)
            err = cub::DeviceSegmentedSort::StableSortPairs(t, temp, k0, k1, i0, i1, total, rows, off, off + 1, s);
    }
    if (emc_check(err, "cub sort") < 0) return -1;
    *keys_out = k1;
    *idx_out = i1;
    return 0;
}

template <class K>
int sort_rows_k(int dev, int dt, const void *in, int64_t rows, int64_t n, bool desc, int64_t m, void *values,
                int64_t *indices) {
    Scratch sc(dev, stream_of(dev));
    K *keys;
    int64_t *idx;
    if (sort_pairs<K>(sc, dt, in, rows, n, desc, &keys, &idx) < 0) return -1;
    gather_kernel<<<grid_for(rows * m), kThreads, 0, sc.s>>>((const char *)in, emc_itemsize(dt), idx, rows, n, m,
                                                             (char *)values, indices);
    return launched("sort gather");
}

template <class K>
int pick_rows_k(int dev, int kind, int dt, const void *in, int64_t rows, int64_t n, void *values, int64_t *indices) {
    Scratch sc(dev, stream_of(dev));
    K *keys;
    int64_t *idx;
    if (sort_pairs<K>(sc, dt, in, rows, n, false, &keys, &idx) < 0) return -1;
    pick_kernel<K><<<grid_for(rows), kThreads, 0, sc.s>>>(kind, dt, (const char *)in, emc_itemsize(dt), keys, idx,
                                                          rows, n, (char *)values, indices);
    return launched("select pick");
}

#define EMC_KEY_DISPATCH(dt, F, ...)                                                                          \
    switch (emc_itemsize(dt)) {                                                                               \
    case 1: return F<uint8_t>(__VA_ARGS__);                                                                   \
    case 2: return F<uint16_t>(__VA_ARGS__);                                                                  \
    case 4: return F<uint32_t>(__VA_ARGS__);                                                                  \
    default: return F<uint64_t>(__VA_ARGS__);                                                                 \
    }

int check_args(int dev, int dtype, int64_t rows, int64_t n) {
    if (dtype < 0 || dtype > EMC_FLOAT64) return emc_fail("sort: unknown dtype code %d", dtype);
    if (rows < 0 || n < 0) return emc_fail("sort: bad shape [%lld, %lld]", (long long)rows, (long long)n);
    return emc_valid_device(dev);
}

} // namespace

extern "C" int em_cuda_sort_rows(int dev, int dtype, const void *in, int64_t rows, int64_t n, bool descending,
                                 int64_t m, void *values, int64_t *indices) {
    if (check_args(dev, dtype, rows, n) < 0) return -1;
    if (m < 0 || m > n) return emc_fail("sort: %lld of %lld elements asked", (long long)m, (long long)n);
    if (rows == 0 || m == 0) return 0;
    EmcDeviceGuard g(dev);
    if (!g.ok) return -1;
    EMC_KEY_DISPATCH(dtype, sort_rows_k, dev, dtype, in, rows, n, descending, m, values, indices)
}

extern "C" int em_cuda_select_rows(int dev, int kind, int dtype, const void *in, int64_t rows, int64_t n,
                                   int64_t k, void *values, int64_t *indices) {
    if (check_args(dev, dtype, rows, n) < 0) return -1;
    if (n == 0) return rows ? emc_fail("select: empty rows") : 0;
    if (rows == 0) return 0;
    EmcDeviceGuard g(dev);
    if (!g.ok) return -1;
    if (kind == EMC_SEL_KTH) {
        if (k < 1 || k > n) return emc_fail("kthvalue: k = %lld out of range for %lld", (long long)k, (long long)n);
        Scratch sc(dev, stream_of(dev));
        int64_t total = rows * n;
        uint64_t *keys = (uint64_t *)sc.get(total * 8);
        int64_t *idx = keys ? (int64_t *)sc.get(total * 8) : nullptr;
        if (!idx) return -1;
        make_keys_kernel<uint64_t><<<grid_for(total), kThreads, 0, sc.s>>>(in, dtype, total, n, 0, keys, idx);
        if (launched("kthvalue keys") < 0) return -1;
        kth_kernel<<<grid_for(rows, 64), 64, 0, sc.s>>>((const char *)in, emc_itemsize(dtype), keys, idx, rows, n,
                                                        k - 1, (char *)values, indices);
        return launched("kthvalue");
    }
    if (kind != EMC_SEL_MEDIAN && kind != EMC_SEL_NANMEDIAN && kind != EMC_SEL_MODE)
        return emc_fail("select: unknown kind %d", kind);
    EMC_KEY_DISPATCH(dtype, pick_rows_k, dev, kind, dtype, in, rows, n, values, indices)
}

extern "C" int em_cuda_scan(int dev, int op, int dtype, const void *in, void *out, int64_t *indices, int64_t outer,
                            int64_t n, int64_t inner) {
    if (check_args(dev, dtype, outer, n) < 0) return -1;
    if (op < EMC_SCAN_CUMSUM || op > EMC_SCAN_CUMMIN) return emc_fail("scan: unknown op %d", op);
    if (op >= EMC_SCAN_CUMMAX && !indices) return emc_fail("scan: cummax/cummin need indices");
    if (op <= EMC_SCAN_CUMPROD && dtype == EMC_BOOL) return emc_fail("scan: no cumsum/cumprod of bool");
    if (outer == 0 || n == 0 || inner <= 0) return 0;
    EmcDeviceGuard g(dev);
    if (!g.ok) return -1;
    cudaStream_t s = stream_of(dev);
    // long rows along the innermost dim: a block per row (coalesced); else a thread per line
    if (inner == 1 && n >= 64 && op <= EMC_SCAN_CUMPROD) {
        unsigned grid = (unsigned)(outer < 65535 * 16 ? outer : 65535 * 16);
        bool sum = op == EMC_SCAN_CUMSUM;
        if (emc_is_float(dtype)) {
            if (sum)
                scan_rows_kernel<double><<<grid, kThreads, 0, s>>>(dtype, (const char *)in, (char *)out, outer, n,
                                                                   0.0, SumOp());
            else
                scan_rows_kernel<double><<<grid, kThreads, 0, s>>>(dtype, (const char *)in, (char *)out, outer, n,
                                                                   1.0, ProdOp());
        } else {
            // unsigned: integer scans wrap like the CPU's int64 accumulator, without overflow UB
            if (sum)
                scan_rows_kernel<unsigned long long><<<grid, kThreads, 0, s>>>(
                    dtype, (const char *)in, (char *)out, outer, n, 0ull, SumOp());
            else
                scan_rows_kernel<unsigned long long><<<grid, kThreads, 0, s>>>(
                    dtype, (const char *)in, (char *)out, outer, n, 1ull, ProdOp());
        }
        return launched("scan rows");
    }
    scan_lines_kernel<<<grid_for(outer * inner), kThreads, 0, s>>>(op, dtype, (const char *)in, (char *)out, indices,
                                                                   outer, n, inner);
    return launched("scan lines");
}

extern "C" int em_cuda_search(int dev, int dtype, const void *boundaries, const int64_t *sorter, int64_t rows,
                              int64_t L, const void *values, int64_t nval, int64_t per_row, bool right,
                              bool out_int32, void *out) {
    if (dtype < EMC_UINT8 || dtype > EMC_FLOAT64 || dtype == EMC_FLOAT16 || dtype == EMC_BFLOAT16)
        return emc_fail("searchsorted: no kernel for dtype code %d", dtype);
    if (rows < 0 || L < 0 || nval < 0) return emc_fail("searchsorted: bad sizes");
    EmcDeviceGuard g(dev);
    if (!g.ok) return -1;
    cudaStream_t s = stream_of(dev);
    if (sorter && rows * L > 0) { // every sorter index in range, as the CPU checks, before searching
        Scratch sc(dev, s);
        int *bad = (int *)sc.get(sizeof(int));
        if (!bad) return -1;
        int h = 0;
        if (EMC_CHECK(cudaMemsetAsync(bad, 0, sizeof(int), s)) < 0) return -1;
        check_sorter_kernel<<<grid_for(rows * L), kThreads, 0, s>>>(sorter, rows * L, L, bad);
        if (launched("searchsorted sorter check") < 0) return -1;
        if (EMC_CHECK(cudaMemcpyAsync(&h, bad, sizeof(int), cudaMemcpyDeviceToHost, s)) < 0 ||
            EMC_CHECK(cudaStreamSynchronize(s)) < 0)
            return -1;
        if (h) return 1;
    }
    if (nval == 0) return 0;
    search_kernel<<<grid_for(nval), kThreads, 0, s>>>(dtype, boundaries, sorter, L, values, nval, per_row, right,
                                                      out_int32, out);
    return launched("searchsorted");
}

extern "C" int em_cuda_unique(int dev, int dtype, const void *sorted, const int64_t *perm, int64_t n, void *vals,
                              int64_t *inverse, int64_t *counts, int64_t *groups) {
    if (check_args(dev, dtype, 1, n) < 0) return -1;
    *groups = 0;
    if (n == 0) return 0;
    EmcDeviceGuard g(dev);
    if (!g.ok) return -1;
    cudaStream_t s = stream_of(dev);
    Scratch sc(dev, s);
    unsigned long long *flags = (unsigned long long *)sc.get(n * 8);
    unsigned long long *gid = flags ? (unsigned long long *)sc.get(n * 8) : nullptr;
    if (!gid) return -1;
    group_flags_kernel<<<grid_for(n), kThreads, 0, s>>>(sorted, dtype, n, flags);
    if (launched("unique flags") < 0) return -1;
    size_t temp = 0;
    if (EMC_CHECK(cub::DeviceScan::InclusiveSum(nullptr, temp, flags, gid, n, s)) < 0) return -1;
    void *t = sc.get(temp);
    if (!t || EMC_CHECK(cub::DeviceScan::InclusiveSum(t, temp, flags, gid, n, s)) < 0) return -1;
    if (counts && EMC_CHECK(cudaMemsetAsync(counts, 0, n * 8, s)) < 0) return -1;
    group_scatter_kernel<<<grid_for(n), kThreads, 0, s>>>((const char *)sorted, emc_itemsize(dtype), perm, n, gid,
                                                          (char *)vals, inverse, (unsigned long long *)counts);
    if (launched("unique scatter") < 0) return -1;
    unsigned long long h = 0;
    if (EMC_CHECK(cudaMemcpyAsync(&h, gid + n - 1, 8, cudaMemcpyDeviceToHost, s)) < 0 ||
        EMC_CHECK(cudaStreamSynchronize(s)) < 0)
        return -1;
    *groups = (int64_t)h;
    return 0;
}
