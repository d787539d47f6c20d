/* shape.cu — the shape kernels (Note [CUDA shape kernels] in shape.h):
 * arange / linspace / logspace fills, the tril / triu mask and
 * repeat_interleave with per-index counts. The per-element rules live in
 * shape_rules.h (shared with the fake backend's host loops, which the tests
 * run), the casts to the output dtype in copy_rules.h (Note [CUDA casts], the
 * CPU's). Every kernel is a grid-stride loop over 64-bit indices, 256
 * threads a block, at most 16 blocks per SM; launches go on the device's
 * current stream and are checked.
 *
 * Built with -DEM_CUDA_SHAPE_HOST_TEST (tests/test_cuda_shape.py) the
 * entries run each kernel's per-element function as a host loop over host
 * pointers, without the runtime, so the casts, offsets and searches here
 * are checked against NumPy and the CPU ops on a machine without a GPU. */
#include "copy_rules.h"
#include "shape.h"
#include "shape_rules.h"

#ifdef EM_CUDA_SHAPE_HOST_TEST
#include <cstdarg>
#include <cstdio>
/* the host build has no runtime: its own error buffer, no devices */
static char host_error[512];
int emc_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(host_error, sizeof host_error, fmt, ap);
    va_end(ap);
    return -1;
}
extern "C" const char *em_cuda_shape_host_last_error(void) { return host_error; }
/* i from 0 to n - 1 through f, where the GPU build launches `kernel` */
#define SHAPE_LAUNCH(n, f, kernel, ...)                                                            \
    for (int64_t i_ = 0; i_ < (n); i_++) f(i_, __VA_ARGS__)
#define SHAPE_GUARD(dev) (void)(dev)
#define SHAPE_LAUNCHED(what) 0
#else
#define SHAPE_LAUNCH(n, f, kernel, ...)                                                            \
    kernel<<<shape_grid(dev, (n)), kThreads, 0, (cudaStream_t)emc_current_stream(dev)>>>((n), __VA_ARGS__)
#define SHAPE_GUARD(dev)                                                                           \
    EmcDeviceGuard guard(dev);                                                                     \
    if (!guard.ok) return -1
#define SHAPE_LAUNCHED(what) emc_check(cudaGetLastError(), what)
#endif

namespace {

#ifndef EM_CUDA_SHAPE_HOST_TEST
constexpr int kThreads = 256;

unsigned shape_grid(int dev, int64_t work) {
    int64_t blocks = (work + kThreads - 1) / kThreads;
    int64_t cap = (int64_t)emc_multiprocessors(dev) * 16; /* fills the GPU; then the loop strides */
    return (unsigned)std::max<int64_t>(1, std::min(blocks, cap));
}
#endif

/* ---- arange / linspace: out[i * stride] = the CPU's value at i, cast as the CPU casts */
template <class D>
EMC_HD void arange_element(int64_t i, D *__restrict__ out, int64_t stride, bool int_math, int64_t start,
                           int64_t step, double xs, double xt) {
    out[i * stride] = int_math ? convert<D>(em_shape_arange_int(i, start, step))
                               : convert<D>(em_shape_arange_float(i, xs, xt));
}

template <class D>
EMC_HD void linspace_element(int64_t i, D *__restrict__ out, int64_t stride, int64_t steps, double xs,
                             double xe, bool single, bool log, double base) {
    double v = em_shape_linspace(i, steps, xs, xe, single);
    if (log) v = pow(base, v);
    out[i * stride] = convert<D>(v);
}

/* ---- tril / triu: zero the elements outside the kept triangle (as bits) */
struct TriGeom {
    int ndim;
    int64_t sizes[EM_CUDA_MAX_DIMS];
    int64_t strides[EM_CUDA_MAX_DIMS];
};

template <class T>
EMC_HD void tri_mask_element(int64_t lin, T *__restrict__ data, const TriGeom &g, int64_t k, bool lower) {
    int64_t row = 0, col = 0;
    int64_t off = em_shape_offset_rc(lin, g.ndim, g.sizes, g.strides, &row, &col);
    if (!em_shape_tri_keep(row, col, k, lower)) data[off] = T(0);
}

/* ---- repeat_interleave: out (outer, total, inner) from in (outer, n, inner) */
template <class T>
EMC_HD void interleave_element(int64_t lin, T *__restrict__ out, const T *__restrict__ in, int64_t n,
                               int64_t inner, const int64_t *__restrict__ cum, int64_t total) {
    int64_t rest = lin / inner, c = lin - rest * inner;
    int64_t o = rest / total, j = rest - o * total;
    int64_t i = em_shape_interleave_src(cum, n, j);
    out[lin] = in[(o * n + i) * inner + c];
}

#ifndef EM_CUDA_SHAPE_HOST_TEST
#define GRID_STRIDE(i, n)                                                                          \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);                      \
         i += (int64_t)gridDim.x * blockDim.x)

template <class D>
__global__ void __launch_bounds__(kThreads)
    arange_kernel(int64_t n, D *__restrict__ out, int64_t stride, bool int_math, int64_t start,
                  int64_t step, double xs, double xt) {
    GRID_STRIDE(i, n) arange_element(i, out, stride, int_math, start, step, xs, xt);
}

template <class D>
__global__ void __launch_bounds__(kThreads)
    linspace_kernel(int64_t n, D *__restrict__ out, int64_t stride, int64_t steps, double xs, double xe,
                    bool single, bool log, double base) {
    GRID_STRIDE(i, n) linspace_element(i, out, stride, steps, xs, xe, single, log, base);
}

template <class T>
__global__ void __launch_bounds__(kThreads)
    tri_mask_kernel(int64_t numel, T *__restrict__ data, const __grid_constant__ TriGeom g, int64_t k,
                    bool lower) {
    GRID_STRIDE(lin, numel) tri_mask_element(lin, data, g, k, lower);
}

template <class T>
__global__ void __launch_bounds__(kThreads)
    interleave_kernel(int64_t numel, T *__restrict__ out, const T *__restrict__ in, int64_t n,
                      int64_t inner, const int64_t *__restrict__ cum, int64_t total) {
    GRID_STRIDE(lin, numel) interleave_element(lin, out, in, n, inner, cum, total);
}
#endif

int check_dtype(int dtype, const char *what) {
    if (dtype < 0 || dtype >= DT_COUNT) return emc_fail("%s: unknown dtype code %d", what, dtype);
    return 0;
}

const int kItemsize[DT_COUNT] = {1, 1, 1, 2, 4, 8, 2, 2, 4, 8};

} // namespace

extern "C" int em_cuda_arange_fill(int dev, int dtype, void *out, int64_t n, int64_t stride,
                                   bool int_math, int64_t start, int64_t step, double xs, double xt) {
    if (check_dtype(dtype, "arange") < 0) return -1;
    if (n < 0) return emc_fail("arange: negative length %lld", (long long)n);
    if (n == 0) return 0;
    if (!out) return emc_fail("arange: a NULL output for %lld elements", (long long)n);
    SHAPE_GUARD(dev);
    with_type(dtype, [&](auto t) {
        using D = typename decltype(t)::type;
        SHAPE_LAUNCH(n, arange_element<D>, arange_kernel<D>, (D *)out, stride, int_math, start, step, xs, xt);
    });
    return SHAPE_LAUNCHED("arange kernel launch");
}

extern "C" int em_cuda_linspace_fill(int dev, int dtype, void *out, int64_t steps, int64_t stride,
                                     double xs, double xe, bool log, double base) {
    if (check_dtype(dtype, "linspace") < 0) return -1;
    if (steps < 0) return emc_fail("linspace: negative number of steps %lld", (long long)steps);
    if (steps == 0) return 0;
    if (!out) return emc_fail("linspace: a NULL output for %lld elements", (long long)steps);
    SHAPE_GUARD(dev);
    bool single = dtype == DT_FLOAT32 || dtype == DT_FLOAT16 || dtype == DT_BFLOAT16;
    with_type(dtype, [&](auto t) {
        using D = typename decltype(t)::type;
        SHAPE_LAUNCH(steps, linspace_element<D>, linspace_kernel<D>, (D *)out, stride, steps, xs, xe, single,
                     log, base);
    });
    return SHAPE_LAUNCHED("linspace kernel launch");
}

extern "C" int em_cuda_tri_mask(int dev, int dtype, void *data, int ndim, const int64_t *sizes,
                                const int64_t *strides, int64_t k, bool lower) {
    if (check_dtype(dtype, "tril/triu") < 0) return -1;
    if (ndim < 2 || ndim > EM_CUDA_MAX_DIMS)
        return emc_fail("tril/triu: %d dims (2 to %d)", ndim, EM_CUDA_MAX_DIMS);
    TriGeom g;
    g.ndim = ndim;
    int64_t numel = 1;
    for (int d = 0; d < ndim; d++) {
        if (sizes[d] < 0) return emc_fail("tril/triu: negative size %lld", (long long)sizes[d]);
        if (sizes[d] == 0) return 0;
        if (numel > INT64_MAX / sizes[d]) return emc_fail("tril/triu: too many elements");
        numel *= sizes[d];
        g.sizes[d] = sizes[d];
        g.strides[d] = strides[d];
    }
    if (!data) return emc_fail("tril/triu: a NULL tensor of %lld elements", (long long)numel);
    SHAPE_GUARD(dev);
    with_bits(kItemsize[dtype], [&](auto t) {
        using T = typename decltype(t)::type;
        SHAPE_LAUNCH(numel, tri_mask_element<T>, tri_mask_kernel<T>, (T *)data, g, k, lower);
    });
    return SHAPE_LAUNCHED("tril/triu kernel launch");
}

extern "C" int em_cuda_repeat_interleave(int dev, int dtype, void *out, const void *in, int64_t outer,
                                         int64_t n, int64_t inner, const int64_t *cum, int64_t total) {
    if (check_dtype(dtype, "repeat_interleave") < 0) return -1;
    if (outer < 0 || n < 0 || inner < 0 || total < 0)
        return emc_fail("repeat_interleave: negative extent (outer %lld, n %lld, inner %lld, total %lld)",
                        (long long)outer, (long long)n, (long long)inner, (long long)total);
    if (outer == 0 || inner == 0 || total == 0) return 0;
    if (n == 0) return emc_fail("repeat_interleave: %lld outputs from an empty input", (long long)total);
    int64_t numel = outer;
    if (numel > INT64_MAX / total || numel * total > INT64_MAX / inner)
        return emc_fail("repeat_interleave: too many elements");
    numel = numel * total * inner;
    if (!out || !in || !cum) return emc_fail("repeat_interleave: a NULL pointer");
    SHAPE_GUARD(dev);
    with_bits(kItemsize[dtype], [&](auto t) {
        using T = typename decltype(t)::type;
        SHAPE_LAUNCH(numel, interleave_element<T>, interleave_kernel<T>, (T *)out, (const T *)in, n, inner, cum,
                     total);
    });
    return SHAPE_LAUNCHED("repeat_interleave kernel launch");
}
