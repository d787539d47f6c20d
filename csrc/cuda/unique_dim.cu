// unique_dim.cu — Note [CUDA unique dim] (unique_dim.h): unique /
// unique_consecutive of the m rows of a contiguous [m, rl] block. Row order
// by cub::DeviceMergeSort::StableSortKeys over row indices with
// emc_row_less (skipped for unique_consecutive), group starts by
// emc_row_group_start, numbered by cub::DeviceScan::InclusiveSum; first rows
// copied as bits, inverse and counts scattered. Scratch from the caching
// allocator on the current stream; the entry waits for the stream to read
// the number of groups back.
#include <cuda_runtime.h>

#include <cub/cub.cuh>

#include <stdint.h>

#include "runtime.h"
#include "unique_dim.h"

namespace {

constexpr int kThreads = 256;

cudaStream_t stream_of(int dev) { return static_cast<cudaStream_t>(emc_current_stream(dev)); }

// At most 65535 * 16 blocks: kernels stride over the rest.
unsigned grid_for(int64_t work) {
    int64_t b = (work + kThreads - 1) / kThreads;
    return (unsigned)(b < 1 ? 1 : b > 65535 * 16 ? 65535 * 16 : b);
}

// scratch memory for the entry (runtime.h)
struct Scratch : EmcScratch {
    Scratch(int d, cudaStream_t st) : EmcScratch(d, st, "unique") {}
};

int launched(const char *what) { return emc_check(cudaGetLastError(), what); }

// The merge sort's comparison: rows by their keys, ties by index.
struct RowLess {
    const void *x;
    int dt;
    int64_t rl;
    __device__ bool operator()(int64_t a, int64_t b) const { return emc_row_less(x, dt, rl, a, b); }
};

__global__ void iota_kernel(int64_t *order, int64_t m) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < m; i += (int64_t)gridDim.x * blockDim.x)
        order[i] = i;
}

__global__ void flags_kernel(const void *x, int dt, int64_t rl, const int64_t *order, int64_t m,
                             unsigned long long *flags) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < m; i += (int64_t)gridDim.x * blockDim.x)
        flags[i] = emc_row_group_start(x, dt, rl, order, i) ? 1 : 0;
}

// gid[i]: position i's group + 1. inverse[order[i]] = its group; counts[g] =
// (last + 1) - first, summed atomically from both ends of the group (counts
// zeroed first; unsigned arithmetic wraps back to the difference).
__global__ void scatter_kernel(const int64_t *order, int64_t m, const unsigned long long *gid, int64_t *inverse,
                               unsigned long long *counts) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < m; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t g = (int64_t)gid[i] - 1;
        bool first = i == 0 || gid[i - 1] != gid[i], last = i == m - 1 || gid[i + 1] != gid[i];
        if (inverse) inverse[order[i]] = g;
        if (counts && first) atomicAdd(counts + g, 0ull - (unsigned long long)i);
        if (counts && last) atomicAdd(counts + g, (unsigned long long)(i + 1));
    }
}

// vals[g, j] = x[order[i], j] for each position i that starts group g; one
// thread per element of the m x rl block, elements moved as T-sized bits.
template <typename T>
__global__ void rows_kernel(const T *x, int64_t m, int64_t rl, const int64_t *order, const unsigned long long *flags,
                            const unsigned long long *gid, T *vals) {
    const int64_t total = m * rl;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total; e += (int64_t)gridDim.x * blockDim.x) {
        int64_t i = e / rl, j = e - i * rl;
        if (flags[i]) vals[((int64_t)gid[i] - 1) * rl + j] = x[order[i] * rl + j];
    }
}

template <typename T>
int copy_rows(const void *x, int64_t m, int64_t rl, const int64_t *order, const unsigned long long *flags,
              const unsigned long long *gid, void *vals, cudaStream_t s) {
    rows_kernel<T><<<grid_for(m * rl), kThreads, 0, s>>>(static_cast<const T *>(x), m, rl, order, flags, gid,
                                                         static_cast<T *>(vals));
    return launched("unique rows");
}

}  // namespace

extern "C" int em_cuda_unique_dim(int dev, int dtype, const void *x, int64_t m, int64_t rl, bool sorted, void *vals,
                                  int64_t *inverse, int64_t *counts, int64_t *groups) {
    *groups = 0;
    if (dtype < DT_BOOL || dtype >= DT_COUNT) return emc_fail("unique: unknown dtype code %d", dtype);
    if (m < 1 || rl < 1) return emc_fail("unique: %lld rows of %lld elements", (long long)m, (long long)rl);
    int64_t total;
    if (__builtin_mul_overflow(m, rl, &total)) return emc_fail("unique: m * rl overflows");
    EmcDeviceGuard guard(dev);
    if (!guard.ok) return -1;
    cudaStream_t s = stream_of(dev);
    Scratch sc(dev, s);
    int64_t *order = (int64_t *)sc.get((size_t)m * 8);
    unsigned long long *flags = order ? (unsigned long long *)sc.get((size_t)m * 8) : nullptr;
    unsigned long long *gid = flags ? (unsigned long long *)sc.get((size_t)m * 8) : nullptr;
    if (!gid) return -1;
    iota_kernel<<<grid_for(m), kThreads, 0, s>>>(order, m);
    if (launched("unique iota") < 0) return -1;
    size_t temp = 0;
    if (sorted && m > 1) {
        RowLess less{x, dtype, rl};
        if (EMC_CHECK(cub::DeviceMergeSort::StableSortKeys(nullptr, temp, order, m, less, s)) < 0) return -1;
        void *t = sc.get(temp);
        if (!t || EMC_CHECK(cub::DeviceMergeSort::StableSortKeys(t, temp, order, m, less, s)) < 0) return -1;
    }
    flags_kernel<<<grid_for(m), kThreads, 0, s>>>(x, dtype, rl, order, m, flags);
    if (launched("unique flags") < 0) return -1;
    temp = 0;
    if (EMC_CHECK(cub::DeviceScan::InclusiveSum(nullptr, temp, flags, gid, m, s)) < 0) return -1;
    void *t = sc.get(temp);
    if (!t || EMC_CHECK(cub::DeviceScan::InclusiveSum(t, temp, flags, gid, m, s)) < 0) return -1;
    if (counts && EMC_CHECK(cudaMemsetAsync(counts, 0, (size_t)m * 8, s)) < 0) return -1;
    if (inverse || counts) {
        scatter_kernel<<<grid_for(m), kThreads, 0, s>>>(order, m, gid, inverse, (unsigned long long *)counts);
        if (launched("unique scatter") < 0) return -1;
    }
    int r;
    switch (emc_itemsize(dtype)) {
    case 1: r = copy_rows<uint8_t>(x, m, rl, order, flags, gid, vals, s); break;
    case 2: r = copy_rows<uint16_t>(x, m, rl, order, flags, gid, vals, s); break;
    case 4: r = copy_rows<uint32_t>(x, m, rl, order, flags, gid, vals, s); break;
    default: r = copy_rows<uint64_t>(x, m, rl, order, flags, gid, vals, s); break;
    }
    if (r < 0) return -1;
    unsigned long long h = 0;
    if (EMC_CHECK(cudaMemcpyAsync(&h, gid + m - 1, 8, cudaMemcpyDeviceToHost, s)) < 0 ||
        EMC_CHECK(cudaStreamSynchronize(s)) < 0)
        return -1;
    *groups = (int64_t)h;
    return 0;
}
