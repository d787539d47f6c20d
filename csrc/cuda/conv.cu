// conv.cu — Note [CUDA im2col] (conv.h): im2col and col2im on the GPU, one
// thread per column element and one per image element. The index math is
// conv_math.h's (shared with the fake backend); the GEMMs of the
// convolution are cuBLAS's (gemm.cpp), called by the front-end.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "conv.h"
#include "conv_math.h"
#include "cvt.h"
#include "runtime.h"

namespace {

constexpr int THREADS = 256;

// A grid of `blocks` blocks, capped (the kernels stride over the rest).
unsigned grid_for(int64_t blocks) {
    const int64_t cap = 65535LL * 32;
    return (unsigned)(blocks < 1 ? 1 : blocks > cap ? cap : blocks);
}

// im2col moves values unchanged: a storage type of the element's width
// (zero bits are 0.0 in every float format).
template <typename U>
__global__ void im2col_kernel(EmCudaConvGeom g, int64_t N, const U *__restrict__ x, U *__restrict__ cols,
                              int64_t col_n, int64_t col_row) {
    const int64_t L = g.oh * g.ow, rows = g.C * g.kh * g.kw, plane = g.C * g.H * g.W;
    const int64_t total = N * rows * L;
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total; t += (int64_t)gridDim.x * blockDim.x) {
        const int64_t l = t % L, row = (t / L) % rows, n = t / (L * rows);
        const int64_t src = emc_im2col_source(&g, row, l);
        cols[n * col_n + row * col_row + l] = src >= 0 ? x[n * plane + src] : U(0);
    }
}

// One thread per image element (n, c, iy, ix): the sum, in the CPU's order,
// of the column elements whose windows read it.
template <typename T>
__global__ void col2im_kernel(EmCudaConvGeom g, int64_t N, const T *__restrict__ cols, int64_t col_n, int64_t col_row,
                              T *__restrict__ x) {
    using A = typename Cvt<T>::A;
    const int64_t total = N * g.C * g.H * g.W;
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total; t += (int64_t)gridDim.x * blockDim.x) {
        const int64_t ix = t % g.W, iy = (t / g.W) % g.H, c = (t / (g.W * g.H)) % g.C, n = t / (g.W * g.H * g.C);
        const T *base = cols + n * col_n;
        A s = A(0);
        for (int64_t ki = 0; ki < g.kh; ki++) {
            const int64_t oy = emc_conv_window_of(iy, ki, g.sh, g.ph, g.dh, g.oh);
            if (oy < 0) continue;
            for (int64_t kj = 0; kj < g.kw; kj++) {
                const int64_t ox = emc_conv_window_of(ix, kj, g.sw, g.pw, g.dw, g.ow);
                if (ox < 0) continue;
                s += Cvt<T>::ld(base[((c * g.kh + ki) * g.kw + kj) * col_row + oy * g.ow + ox]);
            }
        }
        x[t] = Cvt<T>::st(s);
    }
}

// Make dev current and give its current stream. 0 / -1.
int enter(int dev, cudaStream_t *s) {
    int cur = -1;
    if (emc_valid_device(dev) < 0) return -1;
    if (EMC_CHECK(cudaGetDevice(&cur)) < 0) return -1;
    if (cur != dev && EMC_CHECK(cudaSetDevice(dev)) < 0) return -1;
    *s = static_cast<cudaStream_t>(emc_current_stream(dev));
    return 0;
}

int item_size(int dtype) {
    switch (dtype) {
    case DT_FLOAT16: case DT_BFLOAT16: return 2;
    case DT_FLOAT32: return 4;
    case DT_FLOAT64: return 8;
    default: return 0;
    }
}

} // namespace

extern "C" int em_cuda_im2col(int dev, int dtype, const EmCudaConvGeom *g, int64_t N, const void *x, void *cols,
                              int64_t col_n, int64_t col_row) {
    cudaStream_t s;
    if (enter(dev, &s) < 0) return -1;
    const int64_t total = N * g->C * g->kh * g->kw * g->oh * g->ow;
    if (total <= 0) return 0;
    const unsigned grid = grid_for((total + THREADS - 1) / THREADS);
    switch (item_size(dtype)) {
    case 2:
        im2col_kernel<uint16_t><<<grid, THREADS, 0, s>>>(*g, N, static_cast<const uint16_t *>(x),
                                                         static_cast<uint16_t *>(cols), col_n, col_row);
        break;
    case 4:
        im2col_kernel<uint32_t><<<grid, THREADS, 0, s>>>(*g, N, static_cast<const uint32_t *>(x),
                                                         static_cast<uint32_t *>(cols), col_n, col_row);
        break;
    case 8:
        im2col_kernel<uint64_t><<<grid, THREADS, 0, s>>>(*g, N, static_cast<const uint64_t *>(x),
                                                         static_cast<uint64_t *>(cols), col_n, col_row);
        break;
    default: return emc_fail("im2col: unsupported dtype code %d", dtype);
    }
    return emc_check(cudaGetLastError(), "im2col launch");
}

extern "C" int em_cuda_col2im(int dev, int dtype, const EmCudaConvGeom *g, int64_t N, const void *cols, int64_t col_n,
                              int64_t col_row, void *x) {
    cudaStream_t s;
    if (enter(dev, &s) < 0) return -1;
    const int64_t total = N * g->C * g->H * g->W;
    if (total <= 0) return 0;
    const unsigned grid = grid_for((total + THREADS - 1) / THREADS);
    switch (dtype) {
    case DT_FLOAT16:
        col2im_kernel<__half><<<grid, THREADS, 0, s>>>(*g, N, static_cast<const __half *>(cols), col_n, col_row,
                                                       static_cast<__half *>(x));
        break;
    case DT_BFLOAT16:
        col2im_kernel<__nv_bfloat16><<<grid, THREADS, 0, s>>>(*g, N, static_cast<const __nv_bfloat16 *>(cols), col_n,
                                                              col_row, static_cast<__nv_bfloat16 *>(x));
        break;
    case DT_FLOAT32:
        col2im_kernel<float><<<grid, THREADS, 0, s>>>(*g, N, static_cast<const float *>(cols), col_n, col_row,
                                                      static_cast<float *>(x));
        break;
    case DT_FLOAT64:
        col2im_kernel<double><<<grid, THREADS, 0, s>>>(*g, N, static_cast<const double *>(cols), col_n, col_row,
                                                       static_cast<double *>(x));
        break;
    default: return emc_fail("col2im: unsupported dtype code %d", dtype);
    }
    return emc_check(cudaGetLastError(), "col2im launch");
}
