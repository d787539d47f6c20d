// nn_fused.cu — Note [CUDA fused nn] (nn_fused.h): the fused kernels where
// training spends its time. Row kernels give one block to a row (softmax,
// norms, one cross-entropy position) and reduce its statistics in float32
// (float64 for float64 data) with warp shuffles; rows reduced along a
// non-last dim ([outer, n, inner] with inner > 1) give one thread to a column
// instead, so neighbouring threads read neighbouring addresses. The formulas
// are the CPU kernels' (cpu/softmax.c, cpu/cross_entropy.h, ops/norm.c,
// ops/optim.c), in the same order.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include "cvt.h"
#include "nn_fused.h"

#include "runtime.h"

// The runtime's error buffer and current stream (csrc/cuda/runtime.h).
#define em_cuda_set_error emc_fail
static inline cudaStream_t em_cuda_current_stream_handle(int dev) {
    return static_cast<cudaStream_t>(emc_current_stream(dev));
}

namespace {

enum { I32 = 4, I64 = 5, F16 = 6, BF16 = 7, F32 = 8, F64 = 9 };

// ------------------------------------------------------------ conversions

// Cvt<T>: cvt.h

__device__ __forceinline__ float dexp(float v) { return expf(v); }
__device__ __forceinline__ double dexp(double v) { return exp(v); }
__device__ __forceinline__ float dlog(float v) { return logf(v); }
__device__ __forceinline__ double dlog(double v) { return log(v); }
__device__ __forceinline__ float dsqrt(float v) { return sqrtf(v); }
__device__ __forceinline__ double dsqrt(double v) { return sqrt(v); }

template <typename A>
__device__ __forceinline__ A neg_inf() {
    return -INFINITY;
}

// ------------------------------------------------------------ reductions

template <typename A>
__device__ __forceinline__ A warp_sum(A v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// The sum over the block, returned to every thread. blockDim.x is a multiple
// of 32; sh holds 32 values of shared memory, free for reuse on return.
template <typename A>
__device__ __forceinline__ A block_sum(A v, A *sh) {
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads(); // sh may still be read by a previous reduction
    if (lane == 0) sh[wid] = v;
    __syncthreads();
    v = lane < nw ? sh[lane] : A(0);
    return warp_sum(v);
}

// Online softmax statistics: running max m and sum s of exp(x - m).
template <typename A>
__device__ __forceinline__ void ms_add(A &m, A &s, A x) {
    if (x > m) {
        s = (m == neg_inf<A>() ? A(0) : s * dexp(m - x)) + A(1);
        m = x;
    } else if (x == x && x != neg_inf<A>()) {
        s += dexp(x - m);
    } else if (x != x) { // NaN poisons the row, as on the CPU
        s = x;
    }
}
template <typename A>
__device__ __forceinline__ void ms_merge(A &m, A &s, A m2, A s2) {
    A mx = m2 > m ? m2 : m;
    if (mx == neg_inf<A>()) {
        s = s + s2; // both empty (or all -inf): stays 0
        return;
    }
    A a = m == neg_inf<A>() ? A(0) : s * dexp(m - mx);
    A b = m2 == neg_inf<A>() ? A(0) : s2 * dexp(m2 - mx);
    m = mx;
    s = a + b;
}
// (m, s) over the block, returned to every thread.
template <typename A>
__device__ __forceinline__ void block_ms(A &m, A &s, A *shm, A *shs) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        A m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
        ms_merge(m, s, m2, s2);
    }
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    __syncthreads();
    if (lane == 0) shm[wid] = m, shs[wid] = s;
    __syncthreads();
    m = lane < nw ? shm[lane] : neg_inf<A>();
    s = lane < nw ? shs[lane] : A(0);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        A m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
        ms_merge(m, s, m2, s2);
    }
}

// Threads for a block that owns a row of n: about 4 elements per thread.
int row_threads(int64_t n) {
    int t = 32;
    while (t < 1024 && (int64_t)t * 4 < n) t *= 2;
    return t;
}
unsigned grid_for(int64_t blocks) {
    return (unsigned)(blocks < 1 ? 1 : blocks > 0x7fffffff ? 0x7fffffff : blocks);
}

// -------------------------------------------------------------- softmax

template <typename T>
__global__ void softmax_rows(T *__restrict__ out, const T *__restrict__ in, int64_t rows, int64_t n, bool lg) {
    using A = typename Cvt<T>::A;
    __shared__ A shm[32], shs[32];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const T *x = in + r * n;
        T *y = out + r * n;
        A m = neg_inf<A>(), s = 0;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) ms_add(m, s, Cvt<T>::ld(x[i]));
        block_ms(m, s, shm, shs);
        const A inv = A(1) / s, shift = m + dlog(s);
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
            A v = Cvt<T>::ld(x[i]);
            y[i] = Cvt<T>::st(lg ? v - shift : dexp(v - m) * inv);
        }
    }
}

// inner > 1: thread per (outer, inner) column, elements inner apart.
template <typename T>
__global__ void softmax_cols(T *__restrict__ out, const T *__restrict__ in, int64_t outer, int64_t n, int64_t inner,
                             bool lg) {
    using A = typename Cvt<T>::A;
    const int64_t cols = outer * inner;
    for (int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; c < cols; c += (int64_t)gridDim.x * blockDim.x) {
        const int64_t base = (c / inner) * n * inner + c % inner;
        A m = neg_inf<A>(), s = 0;
        for (int64_t k = 0; k < n; k++) ms_add(m, s, Cvt<T>::ld(in[base + k * inner]));
        const A inv = A(1) / s, shift = m + dlog(s);
        for (int64_t k = 0; k < n; k++) {
            A v = Cvt<T>::ld(in[base + k * inner]);
            out[base + k * inner] = Cvt<T>::st(lg ? v - shift : dexp(v - m) * inv);
        }
    }
}

// gi = y * (g - sum(g * y))  or  g - exp(y) * sum(g)
template <typename T>
__global__ void softmax_bwd_rows(T *__restrict__ gi, const T *__restrict__ g, const T *__restrict__ y, int64_t rows,
                                 int64_t n, bool lg) {
    using A = typename Cvt<T>::A;
    __shared__ A sh[32];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const int64_t o = r * n;
        A s = 0;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
            s += lg ? Cvt<T>::ld(g[o + i]) : Cvt<T>::ld(g[o + i]) * Cvt<T>::ld(y[o + i]);
        s = block_sum(s, sh);
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
            A gv = Cvt<T>::ld(g[o + i]), yv = Cvt<T>::ld(y[o + i]);
            gi[o + i] = Cvt<T>::st(lg ? gv - dexp(yv) * s : yv * (gv - s));
        }
    }
}

template <typename T>
__global__ void softmax_bwd_cols(T *__restrict__ gi, const T *__restrict__ g, const T *__restrict__ y, int64_t outer,
                                 int64_t n, int64_t inner, bool lg) {
    using A = typename Cvt<T>::A;
    const int64_t cols = outer * inner;
    for (int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; c < cols; c += (int64_t)gridDim.x * blockDim.x) {
        const int64_t base = (c / inner) * n * inner + c % inner;
        A s = 0;
        for (int64_t k = 0; k < n; k++) {
            const int64_t i = base + k * inner;
            s += lg ? Cvt<T>::ld(g[i]) : Cvt<T>::ld(g[i]) * Cvt<T>::ld(y[i]);
        }
        for (int64_t k = 0; k < n; k++) {
            const int64_t i = base + k * inner;
            A gv = Cvt<T>::ld(g[i]), yv = Cvt<T>::ld(y[i]);
            gi[i] = Cvt<T>::st(lg ? gv - dexp(yv) * s : yv * (gv - s));
        }
    }
}

// ----------------------------------------------------------- layer norm

// Two passes over the row for the statistics (mean, then centred squares:
// the CPU kernel's accurate variance), a third for the affine write; the
// row is small enough to stay in L1/L2 between them. mean NULL: rms norm.
template <typename T>
__global__ void layer_norm_rows(T *__restrict__ y, typename Cvt<T>::A *__restrict__ mean_out,
                                typename Cvt<T>::A *__restrict__ rstd_out, const T *__restrict__ x,
                                const typename Cvt<T>::A *__restrict__ w, const typename Cvt<T>::A *__restrict__ b,
                                int64_t rows, int64_t n, double eps) {
    using A = typename Cvt<T>::A;
    __shared__ A sh[32];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const T *xr = x + r * n;
        A mean = 0;
        if (mean_out) {
            A s = 0;
            for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += Cvt<T>::ld(xr[i]);
            mean = block_sum(s, sh) / A(n);
        }
        A ss = 0;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
            A d = Cvt<T>::ld(xr[i]) - mean;
            ss += d * d;
        }
        ss = block_sum(ss, sh);
        const A rstd = A(1) / dsqrt(ss / A(n) + A(eps));
        if (threadIdx.x == 0) {
            if (mean_out) mean_out[r] = mean;
            rstd_out[r] = rstd;
        }
        T *yr = y + r * n;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
            A v = (Cvt<T>::ld(xr[i]) - mean) * rstd;
            if (w) v *= w[i];
            if (b) v += b[i];
            yr[i] = Cvt<T>::st(v);
        }
    }
}

// dx = rstd * (gw - mean(gw) - xh * mean(gw * xh)), gw = g * w, xh = (x - mean) * rstd
template <typename T>
__global__ void layer_norm_bwd_rows(T *__restrict__ dx, const T *__restrict__ g, const T *__restrict__ x,
                                    const typename Cvt<T>::A *__restrict__ mean,
                                    const typename Cvt<T>::A *__restrict__ rstd,
                                    const typename Cvt<T>::A *__restrict__ w, int64_t rows, int64_t n) {
    using A = typename Cvt<T>::A;
    __shared__ A sh[32];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const int64_t o = r * n;
        const A mu = mean[r], rs = rstd[r];
        A s1 = 0, s2 = 0;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
            A gw = Cvt<T>::ld(g[o + i]) * (w ? w[i] : A(1));
            s1 += gw;
            s2 += gw * (Cvt<T>::ld(x[o + i]) - mu) * rs;
        }
        s1 = block_sum(s1, sh) / A(n);
        s2 = block_sum(s2, sh) / A(n);
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
            A gw = Cvt<T>::ld(g[o + i]) * (w ? w[i] : A(1)), xh = (Cvt<T>::ld(x[o + i]) - mu) * rs;
            dx[o + i] = Cvt<T>::st(rs * (gw - s1 - xh * s2));
        }
    }
}

// dw = sum over rows of g * xh, db = sum of g: a block owns 32 columns, its
// 32 rows of threads stride down the rows, then the 32 partial sums of each
// column are added in shared memory (a fixed order: deterministic).
template <typename T>
__global__ void layer_norm_bwd_params(typename Cvt<T>::A *__restrict__ dw, typename Cvt<T>::A *__restrict__ db,
                                      const T *__restrict__ g, const T *__restrict__ x,
                                      const typename Cvt<T>::A *__restrict__ mean,
                                      const typename Cvt<T>::A *__restrict__ rstd, int64_t rows, int64_t n) {
    using A = typename Cvt<T>::A;
    __shared__ A tw[32][33], tb[32][33];
    const int64_t j = blockIdx.x * 32 + threadIdx.x;
    A sw = 0, sb = 0;
    if (j < n) {
        for (int64_t r = threadIdx.y; r < rows; r += 32) {
            A gv = Cvt<T>::ld(g[r * n + j]);
            sw += gv * (Cvt<T>::ld(x[r * n + j]) - mean[r]) * rstd[r];
            sb += gv;
        }
    }
    tw[threadIdx.y][threadIdx.x] = sw;
    tb[threadIdx.y][threadIdx.x] = sb;
    __syncthreads();
    if (threadIdx.y == 0 && j < n) {
        A a = 0, c = 0;
        for (int k = 0; k < 32; k++) a += tw[k][threadIdx.x], c += tb[k][threadIdx.x];
        dw[j] = a;
        db[j] = c;
    }
}

// --------------------------------------------------------- cross-entropy

// Records a bad class index or embedding row: the first writer wins.
__device__ __forceinline__ void flag_bad(unsigned long long *flag, int64_t value) {
    if (atomicCAS(flag, 0ull, 1ull) == 0ull) flag[1] = (unsigned long long)value;
}

// One block per position (N * inner of them); Note [fused cross-entropy].
template <typename T>
__global__ void xent_fwd(typename Cvt<T>::A *__restrict__ loss, typename Cvt<T>::A *__restrict__ lse,
                         const T *__restrict__ x, const int64_t *__restrict__ target,
                         const typename Cvt<T>::A *__restrict__ w, int64_t m, int64_t C, int64_t inner,
                         int64_t ignore, double e, bool none, double *__restrict__ work,
                         unsigned long long *flag) {
    using A = typename Cvt<T>::A;
    __shared__ A shm[32], shs[32];
    for (int64_t pos = blockIdx.x; pos < m; pos += gridDim.x) {
        const int64_t base = (pos / inner) * C * inner + pos % inner;
        A mx = neg_inf<A>(), s = 0, swx = 0, sw = 0;
        for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
            A v = Cvt<T>::ld(x[base + c * inner]);
            ms_add(mx, s, v);
            if (e > 0) {
                A wc = w ? w[c] : A(1);
                swx += wc * v;
                sw += wc;
            }
        }
        block_ms(mx, s, shm, shs);
        if (e > 0) {
            swx = block_sum(swx, shm);
            sw = block_sum(sw, shm);
        }
        if (threadIdx.x == 0) {
            const A l = mx + dlog(s);
            lse[pos] = l;
            const int64_t t = target[pos];
            double term = 0, wt = 0;
            if (t != ignore) {
                if (t < 0 || t >= C) {
                    flag_bad(flag, t);
                } else {
                    const A wtv = w ? w[t] : A(1);
                    A v = A(1.0 - e) * wtv * (l - Cvt<T>::ld(x[base + t * inner]));
                    if (e > 0) v += A(e / (double)C) * (l * sw - swx);
                    term = (double)v;
                    wt = (double)wtv;
                }
            }
            if (none) {
                loss[pos] = (A)term;
            } else {
                work[pos] = term;
                work[m + pos] = wt;
            }
        }
    }
}

// loss = sum(terms) (/ sum(weights) for 'mean'), summed in double by one block.
template <typename A>
__global__ void xent_reduce(A *loss, const double *__restrict__ work, int64_t m, bool mean) {
    __shared__ double sh[32];
    double a = 0, b = 0;
    for (int64_t k = threadIdx.x; k < m; k += blockDim.x) a += work[k], b += work[m + k];
    a = block_sum(a, sh);
    b = block_sum(b, sh);
    if (threadIdx.x == 0) *loss = (A)(mean ? a / b : a);
}

// The kept weight (reduction='mean''s divisor) into *total, and the bounds check.
template <typename A>
__global__ void xent_total_weight(double *total, const int64_t *__restrict__ target, const A *__restrict__ w,
                                  int64_t m, int64_t C, int64_t ignore, unsigned long long *flag) {
    __shared__ double sh[32];
    double a = 0;
    for (int64_t k = threadIdx.x; k < m; k += blockDim.x) {
        const int64_t t = target[k];
        if (t == ignore) continue;
        if (t < 0 || t >= C) flag_bad(flag, t);
        else a += w ? (double)w[t] : 1.0;
    }
    a = block_sum(a, sh);
    if (threadIdx.x == 0) *total = a;
}

// gi[c] = s * (p[c] * ((1 - e) w[t] + e / C * sum(w)) - (1 - e) w[t] [c == t] - e / C * w[c])
template <typename T>
__global__ void xent_bwd(T *__restrict__ gi, const typename Cvt<T>::A *__restrict__ grad, const T *__restrict__ x,
                         const int64_t *__restrict__ target, const typename Cvt<T>::A *__restrict__ w,
                         const typename Cvt<T>::A *__restrict__ lse, int64_t m, int64_t C, int64_t inner,
                         int64_t ignore, double e, int reduction, const double *__restrict__ total) {
    using A = typename Cvt<T>::A;
    __shared__ A sh[32];
    for (int64_t pos = blockIdx.x; pos < m; pos += gridDim.x) {
        const int64_t base = (pos / inner) * C * inner + pos % inner;
        const int64_t t = target[pos];
        if (t == ignore || t < 0 || t >= C) { // no gradient (bad targets are reported)
            for (int64_t c = threadIdx.x; c < C; c += blockDim.x) gi[base + c * inner] = Cvt<T>::st(A(0));
            continue;
        }
        A sw = A(C);
        if (e > 0 && w) {
            A a = 0;
            for (int64_t c = threadIdx.x; c < C; c += blockDim.x) a += w[c];
            sw = block_sum(a, sh);
        }
        const double sd = (double)grad[reduction == 0 ? pos : 0] * (reduction == 1 ? 1.0 / *total : 1.0);
        const A s = (A)sd, l = lse[pos];
        const A wt = w ? w[t] : A(1), hit = A(1.0 - e) * wt, eC = A(e / (double)C);
        const A coef = hit + eC * sw;
        for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
            A p = dexp(Cvt<T>::ld(x[base + c * inner]) - l);
            A v = p * coef - (c == t ? hit : A(0)) - (e > 0 ? eC * (w ? w[c] : A(1)) : A(0));
            gi[base + c * inner] = Cvt<T>::st(s * v);
        }
    }
}

// ------------------------------------------------------------- Adam(W)

constexpr int ADAM_TENSORS = 16, ADAM_BLOCKS = 320, ADAM_THREADS = 512;
constexpr int64_t ADAM_CHUNK = 65536;

// One launch's share of the parameter list (passed by value: < 4 KB).
struct AdamList {
    void *p[ADAM_TENSORS], *g[ADAM_TENSORS], *m[ADAM_TENSORS], *v[ADAM_TENSORS], *vmax[ADAM_TENSORS];
    int64_t numel[ADAM_TENSORS];
    double step_size[ADAM_TENSORS], bc2[ADAM_TENSORS];
    short tensor_of[ADAM_BLOCKS];
    int chunk_of[ADAM_BLOCKS];
};

// The step's constants rounded to the compute type once, as ops/optim.c does.
template <typename A>
struct AdamConst {
    A wd, decay, w1, b2, w2, eps, sign;
    bool l2, ams, low;
};

template <typename T>
__global__ void __launch_bounds__(ADAM_THREADS) adam_kernel(const AdamList L, const AdamConst<typename Cvt<T>::A> c) {
    using A = typename Cvt<T>::A;
    const int k = L.tensor_of[blockIdx.x];
    const int64_t lo = (int64_t)L.chunk_of[blockIdx.x] * ADAM_CHUNK;
    const int64_t hi = lo + ADAM_CHUNK < L.numel[k] ? lo + ADAM_CHUNK : L.numel[k];
    T *p = static_cast<T *>(L.p[k]), *m = static_cast<T *>(L.m[k]), *v = static_cast<T *>(L.v[k]);
    T *vmax = static_cast<T *>(L.vmax[k]);
    const T *gp = static_cast<const T *>(L.g[k]);
    const A neg_step = (A)(-L.step_size[k]), bc2 = (A)L.bc2[k];
    for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
        A g = c.sign * Cvt<T>::ld(gp[i]), x = Cvt<T>::ld(p[i]), m0 = Cvt<T>::ld(m[i]);
        if (c.l2) g = g + c.wd * x;
        x = x * c.decay;
        // torch's lerp: start + w * (end - start) for w < 0.5, else the mirror form
        A mi = c.low ? m0 + c.w1 * (g - m0) : g - (g - m0) * (A(1) - c.w1);
        A vi = Cvt<T>::ld(v[i]) * c.b2 + c.w2 * g * g;
        m[i] = Cvt<T>::st(mi);
        v[i] = Cvt<T>::st(vi);
        if (c.ams) {
            A old = Cvt<T>::ld(vmax[i]);
            vi = old > vi || old != old ? old : vi; // maximum: NaN wins
            vmax[i] = Cvt<T>::st(vi);
        }
        A denom = dsqrt(vi) / bc2 + c.eps;
        p[i] = Cvt<T>::st(x + neg_step * (mi / denom));
    }
}

template <typename T>
int adam_dtype(const EmCudaAdam *a, int code, cudaStream_t stream) {
    using A = typename Cvt<T>::A;
    AdamConst<A> c;
    const bool l2 = !a->decoupled && a->weight_decay != 0;
    c.wd = (A)a->weight_decay;
    c.decay = a->decoupled ? (A)(1.0 - a->lr * a->weight_decay) : A(1);
    c.w1 = (A)(1.0 - a->beta1);
    c.b2 = (A)a->beta2;
    c.w2 = (A)(1.0 - a->beta2);
    c.eps = (A)a->eps;
    c.sign = a->maximize ? A(-1) : A(1);
    c.l2 = l2;
    c.ams = a->max_exp_avg_sqs != NULL;
    c.low = (A)(1.0 - a->beta1) < (A)0.5;
    AdamList L;
    int nt = 0, nb = 0;
    auto flush = [&]() -> int {
        if (nb == 0) return 0;
        adam_kernel<T><<<nb, ADAM_THREADS, 0, stream>>>(L, c);
        nt = nb = 0;
        cudaError_t err = cudaGetLastError();
        if (err == cudaSuccess) return 0;
        em_cuda_set_error("adam launch: %s", cudaGetErrorString(err));
        return -1;
    };
    for (int k = 0; k < a->n; k++) {
        if (a->dtypes[k] != code || a->numels[k] <= 0) continue;
        const int64_t chunks = (a->numels[k] + ADAM_CHUNK - 1) / ADAM_CHUNK;
        int slot = -1; // the tensor's place in the current launch
        for (int64_t ch = 0; ch < chunks; ch++) {
            if (nb == ADAM_BLOCKS || (slot < 0 && nt == ADAM_TENSORS)) {
                if (flush() < 0) return -1;
                slot = -1; // a tensor split across launches takes a place in each
            }
            if (slot < 0) {
                L.p[nt] = a->params[k];
                L.g[nt] = const_cast<void *>(a->grads[k]);
                L.m[nt] = a->exp_avgs[k];
                L.v[nt] = a->exp_avg_sqs[k];
                L.vmax[nt] = a->max_exp_avg_sqs ? a->max_exp_avg_sqs[k] : NULL;
                L.numel[nt] = a->numels[k];
                L.step_size[nt] = a->lr / (1.0 - pow(a->beta1, a->steps[k]));
                L.bc2[nt] = sqrt(1.0 - pow(a->beta2, a->steps[k]));
                slot = nt++;
            }
            L.tensor_of[nb] = (short)slot;
            L.chunk_of[nb] = (int)ch;
            nb++;
        }
    }
    return flush();
}

// ------------------------------------------------------------ embedding

__device__ unsigned long long embedding_flag[2]; // flag_bad's target for the gather

template <typename I>
__device__ __forceinline__ int64_t index_at(const void *idx, int64_t k) {
    return (int64_t) static_cast<const I *>(idx)[k];
}

template <typename T, typename I>
__global__ void embedding_gather(T *__restrict__ out, const T *__restrict__ weight, const void *__restrict__ idx,
                                 int64_t n_idx, int64_t num_weights, int64_t dim) {
    for (int64_t k = blockIdx.x; k < n_idx; k += gridDim.x) {
        const int64_t i = index_at<I>(idx, k);
        if (i < 0 || i >= num_weights) {
            if (threadIdx.x == 0) flag_bad(embedding_flag, i);
            continue;
        }
        for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) out[k * dim + j] = weight[i * dim + j];
    }
}

template <typename I>
__global__ void embedding_count(int *__restrict__ counts, const void *__restrict__ idx, int64_t n_idx) {
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n_idx; k += (int64_t)gridDim.x * blockDim.x)
        atomicAdd(&counts[index_at<I>(idx, k)], 1);
}

// acc[i] += g[k] (/ count[i]) for each position k with index i (atomics: the
// order of the additions, and so the last bits, vary between runs)
template <typename T, typename Acc, typename I>
__global__ void embedding_scatter(Acc *__restrict__ acc, const T *__restrict__ g, const void *__restrict__ idx,
                                  const int *__restrict__ counts, int64_t n_idx, int64_t dim, int64_t padding_idx) {
    for (int64_t k = blockIdx.x; k < n_idx; k += gridDim.x) {
        const int64_t i = index_at<I>(idx, k);
        if (i == padding_idx) continue;
        const Acc scale = counts ? Acc(1) / (Acc)counts[i] : Acc(1);
        for (int64_t j = threadIdx.x; j < dim; j += blockDim.x)
            atomicAdd(&acc[i * dim + j], (Acc)Cvt<T>::ld(g[k * dim + j]) * scale);
    }
}

template <typename T>
__global__ void store_from_float(T *__restrict__ out, const float *__restrict__ in, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        out[i] = Cvt<T>::st(in[i]);
}

// ---------------------------------------------------------------- host

// Make dev current and give its current stream. 0 / -1.
int enter(int dev, cudaStream_t *s) {
    int cur = -1;
    if (cudaGetDevice(&cur) != cudaSuccess || (cur != dev && cudaSetDevice(dev) != cudaSuccess)) {
        em_cuda_set_error("cudaSetDevice(%d) failed", dev);
        return -1;
    }
    *s = em_cuda_current_stream_handle(dev);
    return 0;
}

int launched(const char *what) {
    cudaError_t err = cudaGetLastError();
    if (err == cudaSuccess) return 0;
    em_cuda_set_error("%s: %s", what, cudaGetErrorString(err));
    return -1;
}

int failed(cudaError_t err, const char *what) {
    em_cuda_set_error("%s: %s", what, cudaGetErrorString(err));
    return -1;
}

// Read the (flag, value) pair back: 1 with *bad set when a kernel flagged. Waits for the stream.
int read_flag(const unsigned long long *flag, cudaStream_t s, int64_t *bad, const char *what) {
    unsigned long long h[2] = {0, 0};
    cudaError_t err = cudaMemcpyAsync(h, flag, sizeof h, cudaMemcpyDeviceToHost, s);
    if (err == cudaSuccess) err = cudaStreamSynchronize(s);
    if (err != cudaSuccess) {
        em_cuda_set_error("%s: %s", what, cudaGetErrorString(err));
        return -1;
    }
    if (!h[0]) return 0;
    *bad = (int64_t)h[1];
    return 1;
}

#define EM_FLOAT_DISPATCH(dtype, ...)                                                                     \
    switch (dtype) {                                                                                      \
    case F16: { using T = __half; __VA_ARGS__; } break;                                                   \
    case BF16: { using T = __nv_bfloat16; __VA_ARGS__; } break;                                           \
    case F32: { using T = float; __VA_ARGS__; } break;                                                    \
    case F64: { using T = double; __VA_ARGS__; } break;                                                   \
    default: em_cuda_set_error("fused nn kernel: unsupported dtype code %d", dtype); return -1;           \
    }

} // namespace

extern "C" int em_cuda_softmax(int dev, int dtype, void *out, const void *in, int64_t outer, int64_t n, int64_t inner,
                               bool log) {
    cudaStream_t s;
    if (enter(dev, &s) < 0) return -1;
    if (outer * n * inner == 0) return 0;
    if (inner == 1) {
        EM_FLOAT_DISPATCH(dtype, (softmax_rows<T><<<grid_for(outer), row_threads(n), 0, s>>>(
                                     static_cast<T *>(out), static_cast<const T *>(in), outer, n, log)));
    } else {
        EM_FLOAT_DISPATCH(dtype, (softmax_cols<T><<<grid_for((outer * inner + 255) / 256), 256, 0, s>>>(
                                     static_cast<T *>(out), static_cast<const T *>(in), outer, n, inner, log)));
    }
    return launched("softmax");
}

extern "C" int em_cuda_softmax_backward(int dev, int dtype, void *gi, const void *g, const void *y, int64_t outer,
                                        int64_t n, int64_t inner, bool log) {
    cudaStream_t s;
    if (enter(dev, &s) < 0) return -1;
    if (outer * n * inner == 0) return 0;
    if (inner == 1) {
        EM_FLOAT_DISPATCH(dtype, (softmax_bwd_rows<T><<<grid_for(outer), row_threads(n), 0, s>>>(
                                     static_cast<T *>(gi), static_cast<const T *>(g), static_cast<const T *>(y),
                                     outer, n, log)));
    } else {
        EM_FLOAT_DISPATCH(dtype, (softmax_bwd_cols<T><<<grid_for((outer * inner + 255) / 256), 256, 0, s>>>(
                                     static_cast<T *>(gi), static_cast<const T *>(g), static_cast<const T *>(y),
                                     outer, n, inner, log)));
    }
    return launched("softmax backward");
}

extern "C" int em_cuda_layer_norm(int dev, int dtype, void *y, void *mean, void *rstd, const void *x, const void *w,
                                  const void *b, int64_t rows, int64_t n, double eps) {
    cudaStream_t s;
    if (enter(dev, &s) < 0) return -1;
    if (rows == 0 || n == 0) return 0;
    EM_FLOAT_DISPATCH(dtype, {
                          using A = typename Cvt<T>::A;
                          layer_norm_rows<T><<<grid_for(rows), row_threads(n), 0, s>>>(
                              static_cast<T *>(y), static_cast<A *>(mean), static_cast<A *>(rstd),
                              static_cast<const T *>(x), static_cast<const A *>(w), static_cast<const A *>(b), rows,
                              n, eps);
                      });
    return launched("layer_norm");
}

extern "C" int em_cuda_layer_norm_backward(int dev, int dtype, void *dx, void *dw, void *db, const void *g,
                                           const void *x, const void *mean, const void *rstd, const void *w,
                                           int64_t rows, int64_t n) {
    cudaStream_t s;
    if (enter(dev, &s) < 0) return -1;
    if (n == 0) return 0;
    EM_FLOAT_DISPATCH(dtype, {
                          using A = typename Cvt<T>::A;
                          if (rows > 0)
                              layer_norm_bwd_rows<T><<<grid_for(rows), row_threads(n), 0, s>>>(
                                  static_cast<T *>(dx), static_cast<const T *>(g), static_cast<const T *>(x),
                                  static_cast<const A *>(mean), static_cast<const A *>(rstd),
                                  static_cast<const A *>(w), rows, n);
                          layer_norm_bwd_params<T><<<grid_for((n + 31) / 32), dim3(32, 32), 0, s>>>(
                              static_cast<A *>(dw), static_cast<A *>(db), static_cast<const T *>(g),
                              static_cast<const T *>(x), static_cast<const A *>(mean), static_cast<const A *>(rstd),
                              rows, n);
                      });
    return launched("layer_norm backward");
}

extern "C" int em_cuda_cross_entropy(int dev, int dtype, void *loss, void *lse, const void *x, const int64_t *target,
                                     const void *weight, int64_t N, int64_t C, int64_t inner, int64_t ignore,
                                     double smoothing, int reduction, double *work, int64_t *bad) {
    cudaStream_t s;
    if (enter(dev, &s) < 0) return -1;
    const int64_t m = N * inner;
    unsigned long long *flag = reinterpret_cast<unsigned long long *>(work + 2 * m);
    cudaError_t err = cudaMemsetAsync(flag, 0, 2 * sizeof(unsigned long long), s);
    if (err != cudaSuccess) return failed(err, "cross_entropy");
    EM_FLOAT_DISPATCH(dtype, {
                          using A = typename Cvt<T>::A;
                          if (m > 0)
                              xent_fwd<T><<<grid_for(m), row_threads(C), 0, s>>>(
                                  static_cast<A *>(loss), static_cast<A *>(lse), static_cast<const T *>(x), target,
                                  static_cast<const A *>(weight), m, C, inner, ignore, smoothing, reduction == 0,
                                  work, flag);
                          if (reduction != 0)
                              xent_reduce<A><<<1, 1024, 0, s>>>(static_cast<A *>(loss), work, m, reduction == 1);
                      });
    if (launched("cross_entropy") < 0) return -1;
    return read_flag(flag, s, bad, "cross_entropy");
}

extern "C" int em_cuda_cross_entropy_backward(int dev, int dtype, void *gi, const void *grad, const void *x,
                                              const int64_t *target, const void *weight, const void *lse, int64_t N,
                                              int64_t C, int64_t inner, int64_t ignore, double smoothing,
                                              int reduction, double *work, int64_t *bad) {
    cudaStream_t s;
    if (enter(dev, &s) < 0) return -1;
    const int64_t m = N * inner;
    unsigned long long *flag = reinterpret_cast<unsigned long long *>(work + 2);
    if (m == 0 || C == 0) return 0;
    cudaError_t err = cudaMemsetAsync(flag, 0, 2 * sizeof(unsigned long long), s);
    if (err != cudaSuccess) return failed(err, "cross_entropy backward");
    EM_FLOAT_DISPATCH(dtype, {
                          using A = typename Cvt<T>::A;
                          xent_total_weight<A><<<1, 1024, 0, s>>>(work, target, static_cast<const A *>(weight), m,
                                                                  C, ignore, flag);
                          xent_bwd<T><<<grid_for(m), row_threads(C), 0, s>>>(
                              static_cast<T *>(gi), static_cast<const A *>(grad), static_cast<const T *>(x), target,
                              static_cast<const A *>(weight), static_cast<const A *>(lse), m, C, inner, ignore,
                              smoothing, reduction, work);
                      });
    if (launched("cross_entropy backward") < 0) return -1;
    return read_flag(flag, s, bad, "cross_entropy backward");
}

extern "C" int em_cuda_adam(int dev, const EmCudaAdam *a) {
    cudaStream_t s;
    if (enter(dev, &s) < 0) return -1;
    for (int k = 0; k < a->n; k++) {
        if (a->dtypes[k] < F16 || a->dtypes[k] > F64) {
            em_cuda_set_error("adam: unsupported dtype code %d", a->dtypes[k]);
            return -1;
        }
    }
    if (adam_dtype<float>(a, F32, s) < 0 || adam_dtype<__nv_bfloat16>(a, BF16, s) < 0 ||
        adam_dtype<__half>(a, F16, s) < 0 || adam_dtype<double>(a, F64, s) < 0)
        return -1;
    return 0;
}

extern "C" int em_cuda_embedding(int dev, int dtype, void *out, const void *weight, const void *indices, int idx_dtype,
                                 int64_t n_idx, int64_t num_weights, int64_t dim, int64_t *bad) {
    cudaStream_t s;
    if (enter(dev, &s) < 0) return -1;
    if (n_idx == 0) return 0;
    unsigned long long *flag = NULL;
    cudaError_t err = cudaGetSymbolAddress(reinterpret_cast<void **>(&flag), embedding_flag);
    if (err == cudaSuccess) err = cudaMemsetAsync(flag, 0, 2 * sizeof(unsigned long long), s);
    if (err != cudaSuccess) return failed(err, "embedding");
    const int threads = dim >= 256 ? 256 : dim >= 64 ? 64 : 32;
    if (idx_dtype == I32) {
        EM_FLOAT_DISPATCH(dtype, (embedding_gather<T, int32_t><<<grid_for(n_idx), threads, 0, s>>>(
                                     static_cast<T *>(out), static_cast<const T *>(weight), indices, n_idx,
                                     num_weights, dim)));
    } else {
        EM_FLOAT_DISPATCH(dtype, (embedding_gather<T, int64_t><<<grid_for(n_idx), threads, 0, s>>>(
                                     static_cast<T *>(out), static_cast<const T *>(weight), indices, n_idx,
                                     num_weights, dim)));
    }
    if (launched("embedding") < 0) return -1;
    return read_flag(flag, s, bad, "embedding");
}

namespace {
template <typename I>
int embedding_backward_idx(int dtype, void *gw, const void *g, const void *indices, int64_t n_idx,
                           int64_t num_weights, int64_t dim, int64_t padding_idx, bool scale, cudaStream_t s) {
    int *counts = NULL;
    float *acc = NULL;
    int rc = -1;
    cudaError_t err = cudaSuccess;
    const int64_t total = num_weights * dim;
    const int threads = dim >= 256 ? 256 : dim >= 64 ? 64 : 32;
    if (scale) {
        err = cudaMallocAsync(reinterpret_cast<void **>(&counts), (size_t)num_weights * sizeof(int), s);
        if (err == cudaSuccess) err = cudaMemsetAsync(counts, 0, (size_t)num_weights * sizeof(int), s);
        if (err != cudaSuccess) goto done;
        embedding_count<I><<<grid_for((n_idx + 255) / 256), 256, 0, s>>>(counts, indices, n_idx);
    }
    if (dtype == F32 || dtype == F64) { // accumulate in place
        err = cudaMemsetAsync(gw, 0, (size_t)total * (dtype == F32 ? 4 : 8), s);
        if (err != cudaSuccess) goto done;
        if (dtype == F32)
            embedding_scatter<float, float, I><<<grid_for(n_idx), threads, 0, s>>>(
                static_cast<float *>(gw), static_cast<const float *>(g), indices, counts, n_idx, dim, padding_idx);
        else
            embedding_scatter<double, double, I><<<grid_for(n_idx), threads, 0, s>>>(
                static_cast<double *>(gw), static_cast<const double *>(g), indices, counts, n_idx, dim, padding_idx);
    } else if (dtype == F16 || dtype == BF16) { // halves through a float32 buffer
        err = cudaMallocAsync(reinterpret_cast<void **>(&acc), (size_t)total * sizeof(float), s);
        if (err == cudaSuccess) err = cudaMemsetAsync(acc, 0, (size_t)total * sizeof(float), s);
        if (err != cudaSuccess) goto done;
        if (dtype == F16) {
            embedding_scatter<__half, float, I><<<grid_for(n_idx), threads, 0, s>>>(
                acc, static_cast<const __half *>(g), indices, counts, n_idx, dim, padding_idx);
            store_from_float<__half><<<grid_for((total + 255) / 256), 256, 0, s>>>(static_cast<__half *>(gw), acc,
                                                                                 total);
        } else {
            embedding_scatter<__nv_bfloat16, float, I><<<grid_for(n_idx), threads, 0, s>>>(
                acc, static_cast<const __nv_bfloat16 *>(g), indices, counts, n_idx, dim, padding_idx);
            store_from_float<__nv_bfloat16><<<grid_for((total + 255) / 256), 256, 0, s>>>(
                static_cast<__nv_bfloat16 *>(gw), acc, total);
        }
    } else {
        em_cuda_set_error("embedding backward: unsupported dtype code %d", dtype);
        goto done;
    }
    rc = launched("embedding backward");
done:
    if (err != cudaSuccess) failed(err, "embedding backward");
    if (counts) cudaFreeAsync(counts, s);
    if (acc) cudaFreeAsync(acc, s);
    return rc;
}
} // namespace

extern "C" int em_cuda_embedding_backward(int dev, int dtype, void *gw, const void *g, const void *indices,
                                          int idx_dtype, int64_t n_idx, int64_t num_weights, int64_t dim,
                                          int64_t padding_idx, bool scale_grad_by_freq) {
    cudaStream_t s;
    if (enter(dev, &s) < 0) return -1;
    if (num_weights * dim == 0) return 0;
    return idx_dtype == I32 ? embedding_backward_idx<int32_t>(dtype, gw, g, indices, n_idx, num_weights, dim,
                                                              padding_idx, scale_grad_by_freq, s)
                            : embedding_backward_idx<int64_t>(dtype, gw, g, indices, n_idx, num_weights, dim,
                                                              padding_idx, scale_grad_by_freq, s);
}
