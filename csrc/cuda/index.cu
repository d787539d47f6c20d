// index.cu — Note [CUDA indexing] (index.h): the GPU twins of cpu/index.c's
// loops. Every kernel is a grid-stride loop with 64-bit positions; each
// thread locates its element from its position alone (the emc_index_*
// functions, also compiled for the host), so no launch shape changes a
// result except the order of atomic combines. Writes with duplicate targets
// combine atomically: sums with the hardware's atomicAdd where it has one
// for the type (float32/64, int32/64, float16, bfloat16), everything else
// (products, amax/amin with the CPU's NaN rule, 1- and 2-byte integers,
// bool) with compare-and-swap loops on the element's bits. Plain assignment
// among duplicates keeps one of them (torch's CUDA kernels are
// nondeterministic there too).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cub/device/device_scan.cuh>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "cvt.h"
#include "index.h"
#include "index_math.h"
#include "runtime.h"

namespace {

constexpr int kThreads = 256;

unsigned grid_for(int dev, int64_t work) {
    int64_t blocks = (work + kThreads - 1) / kThreads;
    int64_t cap = (int64_t)emc_multiprocessors(dev) * 16; // enough to fill it; the loops stride on
    if (blocks > cap) blocks = cap;
    return (unsigned)(blocks < 1 ? 1 : blocks);
}

#define GRID_LOOP(i, n) \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

int launched(const char *what) { return emc_check(cudaGetLastError(), what); }

// ------------------------------------------------------- element combines

enum { OP_ASSIGN, OP_SUM, OP_PROD, OP_MAX, OP_MIN };

// Storage type T <-> compute type C, as cpu/index.c: halves in float
// (cvt.h's Cvt), bool in int (a sum is `or`, a product `and` once stored).
template <typename T>
struct Elem : Cvt<T> {
    using C = typename Cvt<T>::A;
};
template <>
struct Elem<bool> {
    using C = int;
    static __device__ __forceinline__ C ld(bool v) { return v; }
    static __device__ __forceinline__ bool st(C v) { return v != 0; }
};

// a OP b in the compute type; integers wrap; amax/amin keep a NaN (a is
// what is there, b the incoming value, as the CPU's OP_MAX/OP_MIN)
template <int OP, typename C>
__device__ __forceinline__ C combine(C a, C b) {
    if constexpr (OP == OP_SUM || OP == OP_PROD) {
        if constexpr (std::is_integral<C>::value) {
            using U = typename std::make_unsigned<C>::type;
            return OP == OP_SUM ? (C)(U)((U)a + (U)b) : (C)(U)((U)a * (U)b);
        } else {
            return OP == OP_SUM ? a + b : a * b;
        }
    } else if constexpr (OP == OP_MAX) {
        return (a != a || a > b) ? a : b;
    } else {
        return (a != a || a < b) ? a : b;
    }
}

template <typename To, typename From>
__device__ __forceinline__ To bits_of(From v) {
    static_assert(sizeof(To) == sizeof(From), "same width");
    To t;
    memcpy(&t, &v, sizeof t);
    return t;
}

// *p = combine(*p, v) as one atomic step: a CAS loop on the element's bits
// (1-byte elements through their aligned 32-bit word).
template <int OP, typename T>
__device__ void atomic_cas_combine(T *p, T v) {
    using E = Elem<T>;
    const typename E::C b = E::ld(v);
    if constexpr (sizeof(T) == 8) {
        auto *w = reinterpret_cast<unsigned long long *>(p);
        unsigned long long old = *w, assumed;
        do {
            assumed = old;
            const T nv = E::st(combine<OP>(E::ld(bits_of<T>(assumed)), b));
            old = atomicCAS(w, assumed, bits_of<unsigned long long>(nv));
        } while (old != assumed);
    } else if constexpr (sizeof(T) == 4) {
        auto *w = reinterpret_cast<unsigned int *>(p);
        unsigned int old = *w, assumed;
        do {
            assumed = old;
            const T nv = E::st(combine<OP>(E::ld(bits_of<T>(assumed)), b));
            old = atomicCAS(w, assumed, bits_of<unsigned int>(nv));
        } while (old != assumed);
    } else if constexpr (sizeof(T) == 2) {
        auto *w = reinterpret_cast<unsigned short *>(p);
        unsigned short old = *w, assumed;
        do {
            assumed = old;
            const T nv = E::st(combine<OP>(E::ld(bits_of<T>(assumed)), b));
            old = atomicCAS(w, assumed, bits_of<unsigned short>(nv));
        } while (old != assumed);
    } else {
        const uintptr_t at = reinterpret_cast<uintptr_t>(p);
        auto *w = reinterpret_cast<unsigned int *>(at & ~(uintptr_t)3);
        const unsigned shift = (unsigned)(at & 3) * 8;
        unsigned int old = *w, assumed;
        do {
            assumed = old;
            const T cur = bits_of<T>((unsigned char)((assumed >> shift) & 0xffu));
            const unsigned char nb = bits_of<unsigned char>(E::st(combine<OP>(E::ld(cur), b)));
            old = atomicCAS(w, assumed, (assumed & ~(0xffu << shift)) | ((unsigned)nb << shift));
        } while (old != assumed);
    }
}

template <int OP, typename T>
__device__ __forceinline__ void store_combine(T *p, T v) {
    if constexpr (OP == OP_ASSIGN) {
        *p = v;
    } else if constexpr (OP == OP_SUM && (std::is_same<T, float>::value || std::is_same<T, double>::value ||
                                          std::is_same<T, __half>::value || std::is_same<T, __nv_bfloat16>::value)) {
        atomicAdd(p, v);
    } else if constexpr (OP == OP_SUM && std::is_same<T, int32_t>::value) {
        atomicAdd(reinterpret_cast<int *>(p), (int)v);
    } else if constexpr (OP == OP_SUM && std::is_same<T, int64_t>::value) {
        atomicAdd(reinterpret_cast<unsigned long long *>(p), (unsigned long long)v);
    } else if constexpr ((OP == OP_MAX || OP == OP_MIN) && std::is_same<T, int32_t>::value) {
        if (OP == OP_MAX)
            atomicMax(reinterpret_cast<int *>(p), (int)v);
        else
            atomicMin(reinterpret_cast<int *>(p), (int)v);
    } else if constexpr ((OP == OP_MAX || OP == OP_MIN) && std::is_same<T, int64_t>::value) {
        if (OP == OP_MAX)
            atomicMax(reinterpret_cast<long long *>(p), (long long)v);
        else
            atomicMin(reinterpret_cast<long long *>(p), (long long)v);
    } else {
        atomic_cas_combine<OP>(p, v);
    }
}

// ------------------------------------------------------------- kernels

template <typename I>
__global__ void offsets_kernel(int64_t *__restrict__ off, bool acc, const char *__restrict__ idx, const EmcShape sh,
                               int64_t nj, int64_t size, int64_t stride, bool wrap, unsigned long long *bad) {
    GRID_LOOP(i, nj) {
        const int64_t v = (int64_t)*reinterpret_cast<const I *>(idx + emc_index_strided(sh, i));
        const int64_t u = emc_index_wrap(v, size, wrap);
        if (u < 0)
            atomicMin(bad, (unsigned long long)i); // the first bad position, as the CPU reports
        else if (off)
            off[i] = (acc ? off[i] : 0) + u * stride;
    }
}

template <typename W> // a word of the element's width: copies are byte moves
__global__ void indirect_gather(const EmCudaIndirect g, int64_t A, int64_t total) {
    GRID_LOOP(i, total) {
        int64_t xo, dofs;
        emc_index_locate(g, A, i, &xo, &dofs);
        *reinterpret_cast<W *>(g.d + dofs) = *reinterpret_cast<const W *>(g.x + xo);
    }
}

template <typename T, int OP>
__global__ void indirect_put(const EmCudaIndirect g, int64_t A, int64_t total) {
    GRID_LOOP(i, total) {
        int64_t xo, dofs;
        emc_index_locate(g, A, i, &xo, &dofs);
        store_combine<OP>(reinterpret_cast<T *>(g.x + xo), *reinterpret_cast<const T *>(g.d + dofs));
    }
}

template <typename W>
__global__ void scatter_gather_kernel(const EmCudaScatter g, int64_t total, unsigned long long *bad) {
    GRID_LOOP(i, total) {
        int64_t xo, yo, io;
        emc_index_scatter_locate(g, i, &xo, &yo, &io);
        const int64_t v = *reinterpret_cast<const int64_t *>(g.idx + io);
        if ((uint64_t)v >= (uint64_t)g.size) {
            *bad = 1ull; // the front-end names the first bad one (index_offsets)
            continue;
        }
        *reinterpret_cast<W *>(g.y + yo) = *reinterpret_cast<const W *>(g.x + xo + v * g.x_dim_stride);
    }
}

template <typename T, int OP>
__global__ void scatter_kernel(const EmCudaScatter g, int64_t total) {
    GRID_LOOP(i, total) {
        int64_t xo, yo, io;
        emc_index_scatter_locate(g, i, &xo, &yo, &io);
        const int64_t v = *reinterpret_cast<const int64_t *>(g.idx + io); // checked by the front-end
        store_combine<OP>(reinterpret_cast<T *>(g.x + xo + v * g.x_dim_stride), *reinterpret_cast<const T *>(g.y + yo));
    }
}

// nonzero tests bits as the CPU: -0.0 is zero, NaN is not
template <typename U>
__device__ __forceinline__ bool nz_at(const char *p, U mask) {
    return (*reinterpret_cast<const U *>(p) & mask) != 0;
}

template <typename U>
__global__ void nz_flags(int64_t *__restrict__ flags, const char *__restrict__ in, const EmcShape sh, int64_t n,
                         U mask) {
    GRID_LOOP(i, n) flags[i] = nz_at<U>(in + emc_index_strided(sh, i), mask);
}

template <typename U>
__global__ void nz_fill(const char *__restrict__ in, const EmcShape sh, int64_t n, U mask,
                        const int64_t *__restrict__ scan, int64_t *__restrict__ coords, int64_t *__restrict__ offs) {
    GRID_LOOP(i, n) {
        if (!nz_at<U>(in + emc_index_strided(sh, i), mask)) continue;
        const int64_t k = scan[i] - 1;
        int64_t r = i, o = 0;
        for (int d = sh.nd - 1; d >= 0; d--) {
            const int64_t c = r % sh.size[d];
            r /= sh.size[d];
            if (coords) coords[k * sh.nd + d] = c;
            o += c * sh.ostride[d];
        }
        if (offs) offs[k] = o;
    }
}

// ----------------------------------------------------------------- host

int64_t prod(int n, const int64_t *s) {
    int64_t p = 1;
    for (int i = 0; i < n; i++) p *= s[i];
    return p;
}

// A device scratch word of the caching allocator, set to `init` bytes.
struct Scratch {
    int dev;
    cudaStream_t s;
    unsigned long long *p = nullptr;
    Scratch(int d, cudaStream_t st) : dev(d), s(st) {}
    int init(int byte) {
        p = static_cast<unsigned long long *>(emc_alloc(dev, sizeof *p, (EmCudaStream)s));
        if (!p) return -1;
        return EMC_CHECK(cudaMemsetAsync(p, byte, sizeof *p, s));
    }
    int read(unsigned long long *h) {
        if (EMC_CHECK(cudaMemcpyAsync(h, p, sizeof *h, cudaMemcpyDeviceToHost, s)) < 0) return -1;
        return EMC_CHECK(cudaStreamSynchronize(s));
    }
    ~Scratch() {
        if (p) emc_free(dev, p, sizeof *p, (EmCudaStream)s);
    }
};

#define ELEM_TYPES(X) \
    X(0, bool) X(1, uint8_t) X(2, int8_t) X(3, int16_t) X(4, int32_t) X(5, int64_t) X(6, __half) \
    X(7, __nv_bfloat16) X(8, float) X(9, double)

template <typename T>
int put_typed(const EmCudaIndirect &g, int op, int64_t A, int64_t total, int dev, cudaStream_t s) {
    const unsigned grid = grid_for(dev, total);
    switch (op) {
    case OP_ASSIGN: indirect_put<T, OP_ASSIGN><<<grid, kThreads, 0, s>>>(g, A, total); break;
    case OP_SUM: indirect_put<T, OP_SUM><<<grid, kThreads, 0, s>>>(g, A, total); break;
    case OP_PROD: indirect_put<T, OP_PROD><<<grid, kThreads, 0, s>>>(g, A, total); break;
    case OP_MAX: indirect_put<T, OP_MAX><<<grid, kThreads, 0, s>>>(g, A, total); break;
    case OP_MIN: indirect_put<T, OP_MIN><<<grid, kThreads, 0, s>>>(g, A, total); break;
    default: return emc_fail("index put: unknown op %d", op);
    }
    return launched("index put");
}

template <typename T>
int scatter_typed(const EmCudaScatter &g, int op, int64_t total, int dev, cudaStream_t s) {
    const unsigned grid = grid_for(dev, total);
    switch (op) {
    case OP_ASSIGN: scatter_kernel<T, OP_ASSIGN><<<grid, kThreads, 0, s>>>(g, total); break;
    case OP_SUM: scatter_kernel<T, OP_SUM><<<grid, kThreads, 0, s>>>(g, total); break;
    case OP_PROD: scatter_kernel<T, OP_PROD><<<grid, kThreads, 0, s>>>(g, total); break;
    case OP_MAX: scatter_kernel<T, OP_MAX><<<grid, kThreads, 0, s>>>(g, total); break;
    case OP_MIN: scatter_kernel<T, OP_MIN><<<grid, kThreads, 0, s>>>(g, total); break;
    default: return emc_fail("scatter: unknown op %d", op);
    }
    return launched("scatter");
}

int itemsize_of(int dtype) {
    static const int sizes[DT_COUNT] = {1, 1, 1, 2, 4, 8, 2, 2, 4, 8};
    return dtype >= 0 && dtype < DT_COUNT ? sizes[dtype] : 0;
}

// The shape of a strided nonzero input; false when it has too many dims.
bool nz_shape(EmcShape *sh, int ndim, const int64_t *sizes, const int64_t *strides, int isz,
              const int64_t *ostrides) {
    if (ndim < 0 || ndim > EM_CUDA_MAX_DIMS) return false;
    sh->nd = ndim;
    for (int d = 0; d < ndim; d++) {
        sh->size[d] = sizes[d];
        sh->stride[d] = strides[d] * isz; // bytes
        sh->ostride[d] = ostrides ? ostrides[d] : 0;
    }
    return true;
}

// The nonzero mask of a dtype's bits (float signs do not count).
template <typename U>
U nz_mask(int dtype) {
    switch (dtype) {
    case DT_FLOAT16:
    case DT_BFLOAT16: return (U)0x7fffu;
    case DT_FLOAT32: return (U)0x7fffffffu;
    case DT_FLOAT64: return (U)0x7fffffffffffffffull;
    default: return (U)~0ull;
    }
}

#define NZ_DISPATCH(isz, ...)                                                                                 \
    switch (isz) {                                                                                            \
    case 1: { using U = uint8_t; __VA_ARGS__; } break;                                                        \
    case 2: { using U = uint16_t; __VA_ARGS__; } break;                                                       \
    case 4: { using U = uint32_t; __VA_ARGS__; } break;                                                       \
    case 8: { using U = uint64_t; __VA_ARGS__; } break;                                                       \
    default: return emc_fail("nonzero: unsupported element size %d", isz);                                    \
    }

} // namespace

extern "C" int em_cuda_index_offsets(int dev, int64_t *off, bool accumulate, const void *idx, int idx_dtype, int nb,
                                     const int64_t *bshape, const int64_t *idx_strides, int64_t size, int64_t stride,
                                     int wrap, int64_t *bad_pos, int64_t *bad_val) {
    EmcDeviceGuard guard(dev);
    if (!guard.ok) return -1;
    if (idx_dtype != DT_INT32 && idx_dtype != DT_INT64) return emc_fail("index offsets: index dtype %d", idx_dtype);
    if (nb < 0 || nb > EM_CUDA_MAX_DIMS) return emc_fail("index offsets: %d dims", nb);
    const int64_t nj = prod(nb, bshape);
    if (nj == 0) return 0;
    cudaStream_t s = static_cast<cudaStream_t>(emc_current_stream(dev));
    EmcShape sh;
    sh.nd = nb;
    for (int d = 0; d < nb; d++) {
        sh.size[d] = bshape[d];
        sh.stride[d] = idx_strides[d];
        sh.ostride[d] = 0;
    }
    Scratch bad(dev, s);
    if (bad.init(0xff) < 0) return -1; // no bad position: the largest value
    const char *ix = static_cast<const char *>(idx);
    if (idx_dtype == DT_INT32)
        offsets_kernel<int32_t><<<grid_for(dev, nj), kThreads, 0, s>>>(off, accumulate, ix, sh, nj, size, stride,
                                                                      wrap != 0, bad.p);
    else
        offsets_kernel<int64_t><<<grid_for(dev, nj), kThreads, 0, s>>>(off, accumulate, ix, sh, nj, size, stride,
                                                                      wrap != 0, bad.p);
    if (launched("index offsets") < 0) return -1;
    unsigned long long pos;
    if (bad.read(&pos) < 0) return -1;
    if (pos == ~0ull) return 0;
    // the value at that position, for the message
    const int isz = idx_dtype == DT_INT32 ? 4 : 8;
    int64_t v64 = 0;
    int32_t v32 = 0;
    const char *at = ix + emc_index_strided(sh, (int64_t)pos);
    if (EMC_CHECK(cudaMemcpyAsync(isz == 4 ? (void *)&v32 : (void *)&v64, at, (size_t)isz, cudaMemcpyDeviceToHost,
                                  s)) < 0 ||
        EMC_CHECK(cudaStreamSynchronize(s)) < 0)
        return -1;
    *bad_pos = (int64_t)pos;
    *bad_val = isz == 4 ? (int64_t)v32 : v64;
    return 1;
}

extern "C" int em_cuda_index_gather(int dev, const EmCudaIndirect *g, int itemsize) {
    EmcDeviceGuard guard(dev);
    if (!guard.ok) return -1;
    const int64_t A = prod(g->na, g->asize), total = prod(g->np, g->psize) * g->nj * A;
    if (total == 0) return 0;
    cudaStream_t s = static_cast<cudaStream_t>(emc_current_stream(dev));
    const unsigned grid = grid_for(dev, total);
    switch (itemsize) {
    case 1: indirect_gather<uint8_t><<<grid, kThreads, 0, s>>>(*g, A, total); break;
    case 2: indirect_gather<uint16_t><<<grid, kThreads, 0, s>>>(*g, A, total); break;
    case 4: indirect_gather<uint32_t><<<grid, kThreads, 0, s>>>(*g, A, total); break;
    case 8: indirect_gather<uint64_t><<<grid, kThreads, 0, s>>>(*g, A, total); break;
    default: return emc_fail("index gather: element size %d", itemsize);
    }
    return launched("index gather");
}

extern "C" int em_cuda_index_put(int dev, const EmCudaIndirect *g, int op, int dtype) {
    EmcDeviceGuard guard(dev);
    if (!guard.ok) return -1;
    const int64_t A = prod(g->na, g->asize), total = prod(g->np, g->psize) * g->nj * A;
    if (total == 0) return 0;
    cudaStream_t s = static_cast<cudaStream_t>(emc_current_stream(dev));
    switch (dtype) {
#define PUT_CASE(code, T) \
    case code: return put_typed<T>(*g, op, A, total, dev, s);
        ELEM_TYPES(PUT_CASE)
#undef PUT_CASE
    default: return emc_fail("index put: dtype code %d", dtype);
    }
}

extern "C" int em_cuda_scatter_gather(int dev, const EmCudaScatter *g, int op, int dtype, bool gather) {
    EmcDeviceGuard guard(dev);
    if (!guard.ok) return -1;
    const int64_t total = prod(g->nrow, g->rsize) * g->n;
    if (total == 0) return 0;
    cudaStream_t s = static_cast<cudaStream_t>(emc_current_stream(dev));
    if (!gather) {
        switch (dtype) {
#define SCATTER_CASE(code, T) \
    case code: return scatter_typed<T>(*g, op, total, dev, s);
            ELEM_TYPES(SCATTER_CASE)
#undef SCATTER_CASE
        default: return emc_fail("scatter: dtype code %d", dtype);
        }
    }
    Scratch bad(dev, s);
    if (bad.init(0) < 0) return -1;
    const unsigned grid = grid_for(dev, total);
    switch (itemsize_of(dtype)) {
    case 1: scatter_gather_kernel<uint8_t><<<grid, kThreads, 0, s>>>(*g, total, bad.p); break;
    case 2: scatter_gather_kernel<uint16_t><<<grid, kThreads, 0, s>>>(*g, total, bad.p); break;
    case 4: scatter_gather_kernel<uint32_t><<<grid, kThreads, 0, s>>>(*g, total, bad.p); break;
    case 8: scatter_gather_kernel<uint64_t><<<grid, kThreads, 0, s>>>(*g, total, bad.p); break;
    default: return emc_fail("gather: dtype code %d", dtype);
    }
    if (launched("gather") < 0) return -1;
    unsigned long long flagged;
    if (bad.read(&flagged) < 0) return -1;
    return flagged ? 1 : 0;
}

extern "C" int em_cuda_nonzero_scan(int dev, const void *in, int dtype, int ndim, const int64_t *sizes,
                                    const int64_t *strides, int64_t *scan, int64_t *count) {
    EmcDeviceGuard guard(dev);
    if (!guard.ok) return -1;
    const int isz = itemsize_of(dtype);
    EmcShape sh;
    if (!isz || !nz_shape(&sh, ndim, sizes, strides, isz, nullptr)) return emc_fail("nonzero: bad input");
    const int64_t n = prod(ndim, sizes);
    *count = 0;
    if (n == 0) return 0;
    cudaStream_t s = static_cast<cudaStream_t>(emc_current_stream(dev));
    const char *p = static_cast<const char *>(in);
    NZ_DISPATCH(isz, (nz_flags<U><<<grid_for(dev, n), kThreads, 0, s>>>(scan, p, sh, n, nz_mask<U>(dtype))));
    if (launched("nonzero flags") < 0) return -1;
    size_t temp_bytes = 0;
    if (EMC_CHECK(cub::DeviceScan::InclusiveSum(nullptr, temp_bytes, scan, n, s)) < 0) return -1;
    void *temp = emc_alloc(dev, temp_bytes ? temp_bytes : 1, (EmCudaStream)s);
    if (!temp) return -1;
    int rc = EMC_CHECK(cub::DeviceScan::InclusiveSum(temp, temp_bytes, scan, n, s)); // in place
    emc_free(dev, temp, temp_bytes ? temp_bytes : 1, (EmCudaStream)s);
    if (rc < 0) return -1;
    if (EMC_CHECK(cudaMemcpyAsync(count, scan + (n - 1), sizeof *count, cudaMemcpyDeviceToHost, s)) < 0) return -1;
    return EMC_CHECK(cudaStreamSynchronize(s));
}

extern "C" int em_cuda_nonzero_fill(int dev, const void *in, int dtype, int ndim, const int64_t *sizes,
                                    const int64_t *strides, const int64_t *scan, int64_t *coords, int64_t *offs,
                                    const int64_t *ostrides) {
    EmcDeviceGuard guard(dev);
    if (!guard.ok) return -1;
    const int isz = itemsize_of(dtype);
    EmcShape sh;
    if (!isz || !nz_shape(&sh, ndim, sizes, strides, isz, ostrides)) return emc_fail("nonzero: bad input");
    const int64_t n = prod(ndim, sizes);
    if (n == 0) return 0;
    cudaStream_t s = static_cast<cudaStream_t>(emc_current_stream(dev));
    const char *p = static_cast<const char *>(in);
    NZ_DISPATCH(isz, (nz_fill<U><<<grid_for(dev, n), kThreads, 0, s>>>(p, sh, n, nz_mask<U>(dtype), scan, coords,
                                                                       offs)));
    return launched("nonzero fill");
}
