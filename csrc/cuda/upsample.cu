// upsample.cu — Note [CUDA upsample] (upsample.h): nearest copies, the
// separable weighted forward and its gathering adjoint, over tables the
// CPU's code built (cpu/interp.c).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "cvt.h"
#include "runtime.h"
#include "upsample.h"

namespace {

constexpr int THREADS = 256;

unsigned grid_for(int64_t blocks) {
    const int64_t cap = 65535LL * 32;
    return (unsigned)(blocks < 1 ? 1 : blocks > cap ? cap : blocks);
}

// The axes by value: their device pointers travel as kernel arguments.
template <typename U>
__global__ void nearest_kernel(int64_t planes, EmCudaInterpAxis h, EmCudaInterpAxis w, const U *__restrict__ x,
                               U *__restrict__ y) {
    const int64_t total = planes * h.out * w.out;
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total; t += (int64_t)gridDim.x * blockDim.x) {
        const int64_t q = t % w.out, o = (t / w.out) % h.out, p = t / (w.out * h.out);
        y[t] = x[(p * h.in + h.idx[o]) * w.in + w.idx[q]];
    }
}

// y[p, o, q] = sum_k wh[o,k] * (sum_j ww[q,j] * x[p, hidx[o,k], widx[q,j]]):
// the width taps first, then the rows, left to right as cpu/interp.c.
template <typename T, typename W>
__global__ void forward_kernel(int64_t planes, EmCudaInterpAxis h, EmCudaInterpAxis w, const T *__restrict__ x,
                               T *__restrict__ y) {
    using A = typename Cvt<T>::A;
    const int64_t total = planes * h.out * w.out;
    const W *wh = static_cast<const W *>(h.w), *ww = static_cast<const W *>(w.w);
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total; t += (int64_t)gridDim.x * blockDim.x) {
        const int64_t q = t % w.out, o = (t / w.out) % h.out, p = t / (w.out * h.out);
        const T *xp = x + p * h.in * w.in;
        A acc = A(0);
        for (int k = 0; k < h.taps; k++) {
            const T *row = xp + h.idx[o * h.taps + k] * w.in;
            A a = A(0);
            for (int j = 0; j < w.taps; j++)
                a = j ? a + (A)ww[q * w.taps + j] * Cvt<T>::ld(row[w.idx[q * w.taps + j]])
                      : (A)ww[q * w.taps] * Cvt<T>::ld(row[w.idx[q * w.taps]]);
            if (h.taps == 1) acc = a; // a copied row (weight 1), as the CPU
            else acc = k ? acc + (A)wh[o * h.taps + k] * a : (A)wh[o * h.taps] * a;
        }
        y[t] = Cvt<T>::st(acc);
    }
}

// gi[p, i, r] = sum over the taps (o, k) reading row i, ascending, of
// wh[o,k] * (sum over the taps (q, j) reading column r of ww[q,j] * g[p, o, q]).
template <typename T, typename W>
__global__ void backward_kernel(int64_t planes, EmCudaInterpAxis h, EmCudaInterpAxis w, const T *__restrict__ g,
                                T *__restrict__ gi) {
    using A = typename Cvt<T>::A;
    const int64_t total = planes * h.in * w.in;
    const W *wh = static_cast<const W *>(h.w), *ww = static_cast<const W *>(w.w);
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total; t += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = t % w.in, i = (t / w.in) % h.in, p = t / (w.in * h.in);
        const T *gp = g + p * h.out * w.out;
        const int64_t c0 = w.inv_off[r], c1 = w.inv_off[r + 1];
        A acc = A(0);
        for (int64_t e = h.inv_off[i]; e < h.inv_off[i + 1]; e++) {
            const int64_t te = h.inv[e];
            const T *grow = gp + (te / h.taps) * w.out;
            A b = A(0);
            for (int64_t f = c0; f < c1; f++) {
                const int64_t tf = w.inv[f];
                b += (A)ww[tf] * Cvt<T>::ld(grow[tf / w.taps]);
            }
            acc += (A)wh[te] * b;
        }
        gi[t] = Cvt<T>::st(acc);
    }
}

int enter(int dev, cudaStream_t *s) {
    int cur = -1;
    if (emc_valid_device(dev) < 0) return -1;
    if (EMC_CHECK(cudaGetDevice(&cur)) < 0) return -1;
    if (cur != dev && EMC_CHECK(cudaSetDevice(dev)) < 0) return -1;
    *s = static_cast<cudaStream_t>(emc_current_stream(dev));
    return 0;
}

template <typename T, typename W>
void launch(bool backward, unsigned grid, cudaStream_t s, int64_t planes, const EmCudaInterpAxis &h,
            const EmCudaInterpAxis &w, const void *in, void *out) {
    if (backward)
        backward_kernel<T, W><<<grid, THREADS, 0, s>>>(planes, h, w, static_cast<const T *>(in), static_cast<T *>(out));
    else
        forward_kernel<T, W><<<grid, THREADS, 0, s>>>(planes, h, w, static_cast<const T *>(in), static_cast<T *>(out));
}

} // namespace

extern "C" int em_cuda_interp_nearest(int dev, int itemsize, int64_t planes, const EmCudaInterpAxis *h,
                                      const EmCudaInterpAxis *w, const void *x, void *y) {
    cudaStream_t s;
    if (enter(dev, &s) < 0) return -1;
    const int64_t total = planes * h->out * w->out;
    if (total <= 0) return 0;
    const unsigned grid = grid_for((total + THREADS - 1) / THREADS);
    switch (itemsize) {
    case 1:
        nearest_kernel<uint8_t><<<grid, THREADS, 0, s>>>(planes, *h, *w, static_cast<const uint8_t *>(x),
                                                         static_cast<uint8_t *>(y));
        break;
    case 2:
        nearest_kernel<uint16_t><<<grid, THREADS, 0, s>>>(planes, *h, *w, static_cast<const uint16_t *>(x),
                                                          static_cast<uint16_t *>(y));
        break;
    case 4:
        nearest_kernel<uint32_t><<<grid, THREADS, 0, s>>>(planes, *h, *w, static_cast<const uint32_t *>(x),
                                                          static_cast<uint32_t *>(y));
        break;
    case 8:
        nearest_kernel<uint64_t><<<grid, THREADS, 0, s>>>(planes, *h, *w, static_cast<const uint64_t *>(x),
                                                          static_cast<uint64_t *>(y));
        break;
    default: return emc_fail("interp_nearest: unsupported item size %d", itemsize);
    }
    return emc_check(cudaGetLastError(), "interp_nearest launch");
}

extern "C" int em_cuda_interp(int dev, int dtype, int64_t planes, const EmCudaInterpAxis *h, const EmCudaInterpAxis *w,
                              const void *in, void *out, bool backward) {
    cudaStream_t s;
    if (enter(dev, &s) < 0) return -1;
    const int64_t total = planes * (backward ? h->in * w->in : h->out * w->out);
    if (total <= 0) return 0;
    const unsigned grid = grid_for((total + THREADS - 1) / THREADS);
    switch (dtype) {
    case DT_FLOAT16: launch<__half, float>(backward, grid, s, planes, *h, *w, in, out); break;
    case DT_BFLOAT16: launch<__nv_bfloat16, float>(backward, grid, s, planes, *h, *w, in, out); break;
    case DT_FLOAT32: launch<float, float>(backward, grid, s, planes, *h, *w, in, out); break;
    case DT_FLOAT64: launch<double, double>(backward, grid, s, planes, *h, *w, in, out); break;
    default: return emc_fail("interp: unsupported dtype code %d", dtype);
    }
    return emc_check(cudaGetLastError(), backward ? "interp backward launch" : "interp launch");
}
