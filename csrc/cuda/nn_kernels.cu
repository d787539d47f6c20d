// nn_kernels.cu — Note [CUDA nn kernels] (nn_kernels.h): dropout's fused mask and
// scale, the negative log-likelihood and its backward, and the per-run sums
// and affine maps of batch / group norm (Note [norm runs]). The formulas are
// the CPU's (ops/nn.c, cpu/softmax.c's NLL, cpu/poolnorm.c), in the same
// dtypes; only the order of float64 sums differs.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "cvt.h"
#include "nn_kernels.h"
#include "philox.h"
#include "runtime.h"

namespace {

enum { F16 = DT_FLOAT16, BF16 = DT_BFLOAT16, F32 = DT_FLOAT32, F64 = DT_FLOAT64 };

// Cvt<T>: cvt.h

constexpr int THREADS = 256;

// A grid of `blocks` blocks, capped (the kernels stride over the rest).
unsigned grid_for(int64_t blocks) {
    const int64_t cap = 65535LL * 32;
    return (unsigned)(blocks < 1 ? 1 : blocks > cap ? cap : blocks);
}

__device__ __forceinline__ double warp_sum(double v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// The sum over the block, returned to every thread (blockDim.x a multiple of
// 32; sh: 32 doubles of shared memory, free for reuse on return).
__device__ __forceinline__ double block_sum(double v, double *sh) {
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads(); // sh may still be read by a previous reduction
    if (lane == 0) sh[wid] = v;
    __syncthreads();
    v = lane < nw ? sh[lane] : 0.0;
    return warp_sum(v);
}

// Records a bad class index: the first writer wins.
__device__ __forceinline__ void flag_bad(unsigned long long *flag, int64_t value) {
    if (atomicCAS(flag, 0ull, 1ull) == 0ull) flag[1] = (unsigned long long)value;
}

// ---------------------------------------------------------------- dropout

// One thread per Philox block: its 2 or 4 elements, each kept with
// probability `keep` by the very draw random_fill's Bernoulli makes for that
// element; out = (in * mask) * scale, as the CPU's two multiplications.
template <typename T>
__global__ void dropout_kernel(T *__restrict__ out, bool *__restrict__ mask, const T *__restrict__ in, int64_t numel,
                               double keep, double scale, uint64_t seed, uint64_t offset, int dtype, int per) {
    using A = typename Cvt<T>::A;
    const int64_t blocks = (numel + per - 1) / per;
    const A sc = (A)scale;
    for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < blocks;
         j += (int64_t)gridDim.x * blockDim.x) {
        const EmPhilox4 w = em_philox_block(seed, offset, (uint64_t)j);
        for (int i = 0; i < per; i++) {
            const int64_t e = j * per + i;
            if (e >= numel) break;
            int64_t unused = 0;
            const bool m = em_philox_value(w, i, EM_RANDOM_BERNOULLI, dtype, keep, 0.0, 0, 0, &unused) != 0.0;
            mask[e] = m;
            out[e] = Cvt<T>::st((Cvt<T>::ld(in[e]) * (m ? A(1) : A(0))) * sc);
        }
    }
}

// -------------------------------------------------------------------- NLL

// Note [nll layout]: x [N, C, inner], position k = n * inner + j of target.
__device__ __forceinline__ int64_t nll_at(int64_t k, int64_t t, int64_t C, int64_t inner) {
    return ((k / inner) * C + t) * inner + k % inner;
}

// reduction 'none': loss[k] = -w[t] x[n, t, j] (0 where ignored)
template <typename A>
__global__ void nll_none(A *__restrict__ loss, const A *__restrict__ x, const int64_t *__restrict__ target,
                         const A *__restrict__ w, int64_t m, int64_t C, int64_t inner, int64_t ignore,
                         unsigned long long *flag) {
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < m; k += (int64_t)gridDim.x * blockDim.x) {
        const int64_t t = target[k];
        double v = 0;
        if (t != ignore) {
            if (t < 0 || t >= C) flag_bad(flag, t);
            else v = -(w ? (double)w[t] : 1.0) * (double)x[nll_at(k, t, C, inner)];
        }
        loss[k] = (A)v;
    }
}

// One block: the sum of the terms and of the kept weights into total[0..1];
// loss (when not NULL) gets the sum, or the sum over the weights for 'mean'.
template <typename A>
__global__ void nll_sum(A *loss, double *total, const A *__restrict__ x, const int64_t *__restrict__ target,
                        const A *__restrict__ w, int64_t m, int64_t C, int64_t inner, int64_t ignore, bool mean,
                        unsigned long long *flag) {
    __shared__ double sh[32];
    double a = 0, b = 0;
    for (int64_t k = threadIdx.x; k < m; k += blockDim.x) {
        const int64_t t = target[k];
        if (t == ignore) continue;
        if (t < 0 || t >= C) {
            flag_bad(flag, t);
            continue;
        }
        const double wt = w ? (double)w[t] : 1.0;
        if (x) a += -wt * (double)x[nll_at(k, t, C, inner)];
        b += wt;
    }
    a = block_sum(a, sh);
    b = block_sum(b, sh);
    if (threadIdx.x == 0) {
        total[0] = a;
        total[1] = b;
        if (loss) *loss = (A)(mean ? a / b : a); // every target ignored: 0/0 = nan, as torch
    }
}

// gi[n, t, j] = -w[t] g * scale at each kept position (gi zeroed before)
template <typename A>
__global__ void nll_bwd(A *__restrict__ gi, const A *__restrict__ grad, const int64_t *__restrict__ target,
                        const A *__restrict__ w, int64_t m, int64_t C, int64_t inner, int64_t ignore, bool scalar,
                        const double *total, unsigned long long *flag) {
    const double scale = total ? 1.0 / total[1] : 1.0;
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < m; k += (int64_t)gridDim.x * blockDim.x) {
        const int64_t t = target[k];
        if (t == ignore) continue;
        if (t < 0 || t >= C) {
            flag_bad(flag, t);
            continue;
        }
        const double wt = w ? (double)w[t] : 1.0, gv = (double)grad[scalar ? 0 : k];
        gi[nll_at(k, t, C, inner)] = (A)(-wt * gv * scale);
    }
}

// -------------------------------------------------------------- norm runs

// Run r's sums (Note [norm runs]): g NULL: s1 = sum x (center NULL) or
// sum (x - center)^2; else s1 = sum g, s2 = sum g (x - center). float64.
template <typename A>
__device__ __forceinline__ void run_terms(const A *g, const A *x, int64_t i, double c, bool centered, double &s1,
                                          double &s2) {
    const double xv = (double)x[i];
    if (g) {
        const double gv = (double)g[i];
        s1 += gv;
        s2 += gv * (xv - c);
    } else if (centered) {
        s1 += (xv - c) * (xv - c);
    } else {
        s1 += xv;
    }
}

// Long runs: one block per run.
template <typename A>
__global__ void runs_stats_block(const A *__restrict__ g, const A *__restrict__ x, int64_t R, int64_t S,
                                 const double *__restrict__ center, double *__restrict__ out1,
                                 double *__restrict__ out2) {
    __shared__ double sh[32];
    for (int64_t r = blockIdx.x; r < R; r += gridDim.x) {
        const double c = center ? center[r] : 0.0;
        double s1 = 0, s2 = 0;
        for (int64_t i = threadIdx.x; i < S; i += blockDim.x)
            run_terms(g ? g + r * S : nullptr, x + r * S, i, c, center != nullptr, s1, s2);
        s1 = block_sum(s1, sh);
        if (g) s2 = block_sum(s2, sh);
        if (threadIdx.x == 0) {
            out1[r] = s1;
            if (g) out2[r] = s2;
        }
    }
}

// Short runs (batch norm over [N, C] has S = 1): one thread per run.
template <typename A>
__global__ void runs_stats_thread(const A *__restrict__ g, const A *__restrict__ x, int64_t R, int64_t S,
                                  const double *__restrict__ center, double *__restrict__ out1,
                                  double *__restrict__ out2) {
    for (int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; r < R; r += (int64_t)gridDim.x * blockDim.x) {
        const double c = center ? center[r] : 0.0;
        double s1 = 0, s2 = 0;
        for (int64_t i = 0; i < S; i++) run_terms(g ? g + r * S : nullptr, x + r * S, i, c, center != nullptr, s1, s2);
        out1[r] = s1;
        if (g) out2[r] = s2;
    }
}

// y = a[r] g + b[r] x + c[r] in A, coefficients rounded to A as the CPU's
// (g NULL: y = b[r] x + c[r]). Runs are split into chunks over blockIdx.x so
// no element index is divided.
template <typename A>
__global__ void runs_affine(A *__restrict__ y, const A *__restrict__ g, const A *__restrict__ x, int64_t R, int64_t S,
                            int64_t chunks, const double *__restrict__ a, const double *__restrict__ b,
                            const double *__restrict__ c) {
    const int64_t chunk = (int64_t)THREADS * 4;
    for (int64_t q = blockIdx.x; q < R * chunks; q += gridDim.x) {
        const int64_t r = q / chunks, lo = (q % chunks) * chunk;
        const int64_t hi = lo + chunk < S ? lo + chunk : S;
        const A av = g ? (A)a[r] : A(0), bv = (A)b[r], cv = (A)c[r];
        const int64_t base = r * S;
        for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
            const A v = bv * x[base + i] + cv;
            y[base + i] = g ? av * g[base + i] + v : v;
        }
    }
}


// ------------------------------------------------------------------ pools

// Note [pool planes] (cpu/poolnorm.h): geometry as EmCudaPool2d.
struct Pool {
    int64_t planes, H, W, OH, OW, kh, kw, sh, sw, ph, pw, dh, dw;
};

// One thread per output: the CPU's loop over the window (NaN wins, the first
// maximum among ties; an empty window gives -inf at its first tap).
template <typename A>
__global__ void max_pool_fwd(Pool p, const A *__restrict__ in, A *__restrict__ out, int64_t *__restrict__ idx) {
    const int64_t total = p.planes * p.OH * p.OW;
    for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < total; o += (int64_t)gridDim.x * blockDim.x) {
        const int64_t ow = o % p.OW, oh = (o / p.OW) % p.OH, q = o / (p.OW * p.OH);
        const A *x = in + q * p.H * p.W;
        const int64_t h_start = oh * p.sh - p.ph, w_start = ow * p.sw - p.pw;
        int64_t hs = h_start, ws = w_start;
        while (hs < 0) hs += p.dh;
        while (ws < 0) ws += p.dw;
        int64_t he = h_start + (p.kh - 1) * p.dh + 1, we = w_start + (p.kw - 1) * p.dw + 1;
        if (he > p.H) he = p.H;
        if (we > p.W) we = p.W;
        A m = -INFINITY;
        int64_t best = hs * p.W + ws;
        for (int64_t h = hs; h < he; h += p.dh)
            for (int64_t w = ws; w < we; w += p.dw) {
                const A v = x[h * p.W + w];
                if (v > m || v != v) {
                    m = v;
                    best = h * p.W + w;
                }
            }
        out[o] = m;
        idx[o] = best;
    }
}

// gi (zeroed) += g at each index: atomics, as windows may overlap (the order
// of additions to one input, and so its last bits, may vary between runs).
template <typename A>
__global__ void max_pool_bwd(Pool p, const A *__restrict__ g, const int64_t *__restrict__ idx, A *__restrict__ gi,
                             unsigned long long *flag) {
    const int64_t plane_out = p.OH * p.OW, plane_in = p.H * p.W, total = p.planes * plane_out;
    for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < total; o += (int64_t)gridDim.x * blockDim.x) {
        const int64_t i = idx[o];
        if (i < 0 || i >= plane_in) {
            flag_bad(flag, i);
            continue;
        }
        atomicAdd(&gi[(o / plane_out) * plane_in + i], g[o]);
    }
}

// The first output whose window [lo, hi) can hold position v: hi is
// nondecreasing along the outputs (avg_pool2d's and the adaptive windows).
__device__ __forceinline__ int64_t first_window(const int64_t *hi, int64_t n, int64_t v) {
    int64_t a = 0, b = n;
    while (a < b) {
        const int64_t m = (a + b) / 2;
        if (hi[m] > v) b = m;
        else a = m + 1;
    }
    return a;
}

// Forward: one thread per output, the window summed in A in the CPU's
// order. Backward: one thread per input, the windows holding it visited in
// the CPU's order (oh, then ow, ascending), so both equal the CPU's sums.
template <typename A>
__global__ void avg_pool(int64_t planes, int64_t H, int64_t W, int64_t OH, int64_t OW, const int64_t *__restrict__ win,
                         const double *__restrict__ div, const A *__restrict__ in, A *__restrict__ out, bool backward) {
    const int64_t *h0 = win, *h1 = win + OH, *w0 = win + 2 * OH, *w1 = win + 2 * OH + OW;
    if (!backward) {
        const int64_t total = planes * OH * OW;
        for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < total;
             o += (int64_t)gridDim.x * blockDim.x) {
            const int64_t ow = o % OW, oh = (o / OW) % OH, q = o / (OW * OH);
            const A *x = in + q * H * W;
            A s = 0;
            for (int64_t h = h0[oh]; h < h1[oh]; h++)
                for (int64_t w = w0[ow]; w < w1[ow]; w++) s += x[h * W + w];
            out[o] = (A)(s / (A)div[oh * OW + ow]);
        }
        return;
    }
    const int64_t total = planes * H * W;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t w = i % W, h = (i / W) % H, q = i / (W * H);
        const A *gq = in + q * OH * OW;
        A s = 0;
        const int64_t ow_first = first_window(w1, OW, w);
        for (int64_t oh = first_window(h1, OH, h); oh < OH && h0[oh] <= h; oh++)
            for (int64_t ow = ow_first; ow < OW && w0[ow] <= w; ow++)
                s += (A)(gq[oh * OW + ow] / (A)div[oh * OW + ow]);
        out[i] = s;
    }
}

// ------------------------------------------------------------------- host

// Make dev current and give its current stream. 0 / -1.
int enter(int dev, cudaStream_t *s) {
    int cur = -1;
    if (emc_valid_device(dev) < 0) return -1;
    if (EMC_CHECK(cudaGetDevice(&cur)) < 0) return -1;
    if (cur != dev && EMC_CHECK(cudaSetDevice(dev)) < 0) return -1;
    *s = static_cast<cudaStream_t>(emc_current_stream(dev));
    return 0;
}

int launched(const char *what) { return emc_check(cudaGetLastError(), what); }

// Read the (flag, value) pair back: 1 with *bad set when a kernel flagged. Waits for the stream.
int read_flag(const unsigned long long *flag, cudaStream_t s, int64_t *bad, const char *what) {
    unsigned long long h[2] = {0, 0};
    if (emc_check(cudaMemcpyAsync(h, flag, sizeof h, cudaMemcpyDeviceToHost, s), what) < 0) return -1;
    if (emc_check(cudaStreamSynchronize(s), what) < 0) return -1;
    if (!h[0]) return 0;
    *bad = (int64_t)h[1];
    return 1;
}

#define NN_MORE_FLOAT_DISPATCH(dtype, what, ...)                                                            \
    switch (dtype) {                                                                                        \
    case F16: { using T = __half; __VA_ARGS__; } break;                                                     \
    case BF16: { using T = __nv_bfloat16; __VA_ARGS__; } break;                                             \
    case F32: { using T = float; __VA_ARGS__; } break;                                                      \
    case F64: { using T = double; __VA_ARGS__; } break;                                                     \
    default: return emc_fail("%s: unsupported dtype code %d", what, dtype);                                 \
    }

// float32 / float64 only: the compute dtypes NLL and the norm runs see.
#define NN_MORE_COMPUTE_DISPATCH(dtype, what, ...)                                                          \
    switch (dtype) {                                                                                        \
    case F32: { using A = float; __VA_ARGS__; } break;                                                      \
    case F64: { using A = double; __VA_ARGS__; } break;                                                     \
    default: return emc_fail("%s: unsupported dtype code %d (float32 or float64 expected)", what, dtype);  \
    }

} // namespace

extern "C" int em_cuda_dropout(int dev, int dtype, void *out, bool *mask, const void *in, int64_t numel, double keep,
                               double scale, uint64_t seed, uint64_t offset) {
    cudaStream_t s;
    if (enter(dev, &s) < 0) return -1;
    if (numel <= 0) return 0;
    const int per = em_philox_per_block(EM_RANDOM_BERNOULLI, dtype, 0);
    const unsigned grid = grid_for(((numel + per - 1) / per + THREADS - 1) / THREADS);
    NN_MORE_FLOAT_DISPATCH(dtype, "dropout",
                           (dropout_kernel<T><<<grid, THREADS, 0, s>>>(static_cast<T *>(out), mask,
                                                                       static_cast<const T *>(in), numel, keep, scale,
                                                                       seed, offset, dtype, per)));
    return launched("dropout launch");
}

extern "C" int em_cuda_nll_loss(int dev, int dtype, void *loss, const void *x, const int64_t *target,
                                const void *weight, int64_t N, int64_t C, int64_t inner, int64_t ignore,
                                int reduction, double *work, int64_t *bad) {
    cudaStream_t s;
    if (enter(dev, &s) < 0) return -1;
    const int64_t m = N * inner;
    unsigned long long *flag = reinterpret_cast<unsigned long long *>(work + 2);
    if (emc_check(cudaMemsetAsync(flag, 0, 2 * sizeof(unsigned long long), s), "nll_loss") < 0) return -1;
    NN_MORE_COMPUTE_DISPATCH(dtype, "nll_loss", {
        if (reduction == 0) {
            if (m > 0)
                nll_none<A><<<grid_for((m + THREADS - 1) / THREADS), THREADS, 0, s>>>(
                    static_cast<A *>(loss), static_cast<const A *>(x), target, static_cast<const A *>(weight), m, C,
                    inner, ignore, flag);
        } else {
            nll_sum<A><<<1, 1024, 0, s>>>(static_cast<A *>(loss), work, static_cast<const A *>(x), target,
                                          static_cast<const A *>(weight), m, C, inner, ignore, reduction == 1, flag);
        }
    });
    if (launched("nll_loss launch") < 0) return -1;
    return read_flag(flag, s, bad, "nll_loss");
}

extern "C" int em_cuda_nll_loss_backward(int dev, int dtype, void *gi, const void *grad, const int64_t *target,
                                         const void *weight, int64_t N, int64_t C, int64_t inner, int64_t ignore,
                                         int reduction, double *work, int64_t *bad) {
    cudaStream_t s;
    if (enter(dev, &s) < 0) return -1;
    const int64_t m = N * inner, total = N * C * inner;
    unsigned long long *flag = reinterpret_cast<unsigned long long *>(work + 2);
    if (emc_check(cudaMemsetAsync(flag, 0, 2 * sizeof(unsigned long long), s), "nll_loss backward") < 0) return -1;
    const size_t isz = dtype == F64 ? 8 : 4;
    if (total > 0 && emc_check(cudaMemsetAsync(gi, 0, (size_t)total * isz, s), "nll_loss backward") < 0) return -1;
    NN_MORE_COMPUTE_DISPATCH(dtype, "nll_loss backward", {
        const A *w = static_cast<const A *>(weight);
        if (reduction == 1) // 'mean' divides by the kept weight
            nll_sum<A><<<1, 1024, 0, s>>>(nullptr, work, nullptr, target, w, m, C, inner, ignore, true, flag);
        if (m > 0)
            nll_bwd<A><<<grid_for((m + THREADS - 1) / THREADS), THREADS, 0, s>>>(
                static_cast<A *>(gi), static_cast<const A *>(grad), target, w, m, C, inner, ignore, reduction != 0,
                reduction == 1 ? work : nullptr, flag);
    });
    if (launched("nll_loss backward launch") < 0) return -1;
    return read_flag(flag, s, bad, "nll_loss backward");
}

extern "C" int em_cuda_norm_runs_stats(int dev, int dtype, const void *g, const void *x, int64_t R, int64_t S,
                                       const double *center, double *out1, double *out2) {
    cudaStream_t s;
    if (enter(dev, &s) < 0) return -1;
    if (R <= 0) return 0;
    NN_MORE_COMPUTE_DISPATCH(dtype, "norm runs", {
        const A *gp = static_cast<const A *>(g), *xp = static_cast<const A *>(x);
        if (S < 64)
            runs_stats_thread<A><<<grid_for((R + THREADS - 1) / THREADS), THREADS, 0, s>>>(gp, xp, R, S, center,
                                                                                           out1, out2);
        else
            runs_stats_block<A><<<grid_for(R), THREADS, 0, s>>>(gp, xp, R, S, center, out1, out2);
    });
    return launched("norm runs launch");
}

extern "C" int em_cuda_norm_runs_affine(int dev, int dtype, void *y, const void *g, const void *x, int64_t R,
                                        int64_t S, const double *a, const double *b, const double *c) {
    cudaStream_t s;
    if (enter(dev, &s) < 0) return -1;
    if (R <= 0 || S <= 0) return 0;
    const int64_t chunks = (S + THREADS * 4 - 1) / (THREADS * 4);
    NN_MORE_COMPUTE_DISPATCH(dtype, "norm runs affine",
                             (runs_affine<A><<<grid_for(R * chunks), THREADS, 0, s>>>(
                                 static_cast<A *>(y), static_cast<const A *>(g), static_cast<const A *>(x), R, S,
                                 chunks, a, b, c)));
    return launched("norm runs affine launch");
}

extern "C" int em_cuda_max_pool2d(int dev, int dtype, const EmCudaPool2d *g, const void *in, void *out,
                                  int64_t *idx) {
    cudaStream_t s;
    if (enter(dev, &s) < 0) return -1;
    const Pool p = {g->planes, g->H, g->W, g->OH, g->OW, g->kh, g->kw, g->sh, g->sw, g->ph, g->pw, g->dh, g->dw};
    const int64_t total = p.planes * p.OH * p.OW;
    if (total <= 0) return 0;
    NN_MORE_COMPUTE_DISPATCH(dtype, "max_pool2d",
                             (max_pool_fwd<A><<<grid_for((total + THREADS - 1) / THREADS), THREADS, 0, s>>>(
                                 p, static_cast<const A *>(in), static_cast<A *>(out), idx)));
    return launched("max_pool2d launch");
}

extern "C" int em_cuda_max_pool2d_backward(int dev, int dtype, const EmCudaPool2d *g, const void *grad,
                                           const int64_t *idx, void *gi, int64_t *work, int64_t *bad) {
    cudaStream_t s;
    if (enter(dev, &s) < 0) return -1;
    const Pool p = {g->planes, g->H, g->W, g->OH, g->OW, 1, 1, 1, 1, 0, 0, 1, 1};
    const int64_t total = p.planes * p.OH * p.OW, in_total = p.planes * p.H * p.W;
    unsigned long long *flag = reinterpret_cast<unsigned long long *>(work);
    if (emc_check(cudaMemsetAsync(flag, 0, 2 * sizeof(unsigned long long), s), "max_pool2d backward") < 0) return -1;
    const size_t isz = dtype == F64 ? 8 : 4;
    if (in_total > 0 && emc_check(cudaMemsetAsync(gi, 0, (size_t)in_total * isz, s), "max_pool2d backward") < 0)
        return -1;
    if (total > 0) {
        NN_MORE_COMPUTE_DISPATCH(dtype, "max_pool2d backward",
                                 (max_pool_bwd<A><<<grid_for((total + THREADS - 1) / THREADS), THREADS, 0, s>>>(
                                     p, static_cast<const A *>(grad), idx, static_cast<A *>(gi), flag)));
        if (launched("max_pool2d backward launch") < 0) return -1;
    }
    return read_flag(flag, s, bad, "max_pool2d backward");
}

extern "C" int em_cuda_avg_pool2d(int dev, int dtype, int64_t planes, int64_t H, int64_t W, int64_t OH, int64_t OW,
                                  const int64_t *win, const double *div, const void *in, void *out, bool backward) {
    cudaStream_t s;
    if (enter(dev, &s) < 0) return -1;
    const int64_t total = planes * (backward ? H * W : OH * OW);
    if (total <= 0) return 0;
    const size_t isz = dtype == F64 ? 8 : 4;
    if (OH * OW == 0) // no windows: a zero gradient
        return emc_check(cudaMemsetAsync(out, 0, (size_t)total * isz, s), "avg_pool2d backward");
    NN_MORE_COMPUTE_DISPATCH(dtype, "avg_pool2d",
                             (avg_pool<A><<<grid_for((total + THREADS - 1) / THREADS), THREADS, 0, s>>>(
                                 planes, H, W, OH, OW, win, div, static_cast<const A *>(in), static_cast<A *>(out),
                                 backward)));
    return launched("avg_pool2d launch");
}
