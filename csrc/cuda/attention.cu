// attention.cu — Note [CUDA attention] (attention.h): flash attention forward
// and backward. Tensor-core kernels (mma.sync m16n8k16, bf16/fp16 in, float32
// accumulate) for head dims up to 128; a plain one-warp-per-row kernel for
// everything else (float32, head dims up to 256, unaligned strides). Both
// compute the CPU kernel's formulas (cpu/attention.c): the online softmax
// forward, and the backward dv = p^T do, dp = do v^T, ds = p (dp - D),
// dq = scale ds k, dk = scale ds^T q with D = rowsum(do * o).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include <type_traits>

#include "attention.h"
#include "runtime.h"

using namespace emc_attn;

namespace {

constexpr float LOG2E = 1.4426950408889634f;
constexpr float LN2 = 0.6931471805599453f;

// ------------------------------------------------------------ conversions

template <typename T>
struct Cv;
template <>
struct Cv<float> {
    static __device__ __forceinline__ float ld(float v) { return v; }
    static __device__ __forceinline__ float st(float v) { return v; }
};
template <>
struct Cv<__half> {
    static __device__ __forceinline__ float ld(__half v) { return __half2float(v); }
    static __device__ __forceinline__ __half st(float v) { return __float2half_rn(v); }
    // two floats as one register of the mma's A operand (low half first)
    static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
        __half2 h = __floats2half2_rn(lo, hi);
        return *reinterpret_cast<uint32_t *>(&h);
    }
};
template <>
struct Cv<__nv_bfloat16> {
    static __device__ __forceinline__ float ld(__nv_bfloat16 v) { return __bfloat162float(v); }
    static __device__ __forceinline__ __nv_bfloat16 st(float v) { return __float2bfloat16_rn(v); }
    static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
        __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
        return *reinterpret_cast<uint32_t *>(&h);
    }
};

// The problem as the kernels read it: element strides {batch, head, row}.
struct Prob {
    int64_t B, H, Hkv, L, S, D, group; // group = H / Hkv
    float scale, scale_log2;           // scale, scale * log2(e)
    bool causal;
    const void *q, *k, *v, *o, *dout;
    void *out;
    int64_t sq[3], sk[3], sv[3], so[3], sdo[3];
    float *lse;   // [B, H, L]
    float *dvec;  // backward: [B, H, L] rowsum(dout * out)
    float *dqacc; // backward: [B, H, L, D] float32, zeroed
    void *dq, *dk, *dv;
    // the extras of EmCudaAttentionEx (none for the plain entries)
    int mask_kind; // 0 none, 1 bool, 2 additive of the data's dtype
    const void *mask;
    int64_t sm[4];
    bool drop;
    uint32_t keep_thresh; // keep where (philox word >> 8) < keep_thresh: u01f < keep exactly
    float keep_scale;     // 1 / keep
    uint64_t seed, offset;
    int64_t lse_ld;
    int64_t sdq[3], sdk[3], sdv[3];
};

__device__ __forceinline__ int64_t off(const int64_t *s, int64_t b, int64_t h, int64_t r) {
    return b * s[0] + h * s[1] + r * s[2];
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// The mask's term for element (b, h, i, j) in log2 units (-inf: takes no
// part); only called with i < L, j < S.
template <typename T>
__device__ __forceinline__ float mask_log2(const Prob &p, int64_t b, int64_t h, int64_t i, int64_t j) {
    const int64_t o = b * p.sm[0] + h * p.sm[1] + i * p.sm[2] + j * p.sm[3];
    if (p.mask_kind == 1) return static_cast<const unsigned char *>(p.mask)[o] ? 0.f : -INFINITY;
    return Cv<T>::ld(static_cast<const T *>(p.mask)[o]) * LOG2E;
}

// Dropout's factor for P element (bh, i, j): 1 / keep where the Bernoulli
// draw of element drop_index(bh, i, j) keeps it, else 0 (EmCudaAttentionEx).
__device__ __forceinline__ float drop_factor(const Prob &p, int64_t bh, int64_t i, int64_t j) {
    const unsigned long long idx = drop_index(bh, p.L, p.S, i, j);
    const EmPhilox4 w = em_philox_block(p.seed, p.offset, idx >> 2);
    return drop_keeps(philox_word(w, idx & 3), p.keep_thresh) ? p.keep_scale : 0.f;
}

// The factors of elements (bh, i, j) and (bh, i, j + 1).
__device__ __forceinline__ void drop_pair(const Prob &p, int64_t bh, int64_t i, int64_t j, float &f0, float &f1) {
    uint32_t x0, x1;
    drop_words(p.seed, p.offset, drop_index(bh, p.L, p.S, i, j), x0, x1);
    f0 = drop_keeps(x0, p.keep_thresh) ? p.keep_scale : 0.f;
    f1 = drop_keeps(x1, p.keep_thresh) ? p.keep_scale : 0.f;
}

// A saved lse in log2 units for the backward's exp2(x - lse2): +inf for a
// row no key takes part in (lse -inf), so its p is 0 and not NaN.
__device__ __forceinline__ float lse_log2(float lse) { return lse == -INFINITY ? INFINITY : lse * LOG2E; }

// ============================================================ plain kernels
// One warp per row; lane l holds elements d = l + 32 * e (e < 8, D <= 256).

constexpr int PLAIN_E = 8;
constexpr int PLAIN_WARPS = 4;

template <typename T>
__device__ __forceinline__ void load_row(float (&x)[PLAIN_E], const T *p, int64_t D, int lane) {
#pragma unroll
    for (int e = 0; e < PLAIN_E; e++) {
        int64_t d = lane + 32 * e;
        x[e] = d < D ? Cv<T>::ld(p[d]) : 0.f;
    }
}

template <typename T>
__device__ __forceinline__ float dot_row(const float (&x)[PLAIN_E], const T *p, int64_t D, int lane) {
    float s = 0.f;
#pragma unroll
    for (int e = 0; e < PLAIN_E; e++) {
        int64_t d = lane + 32 * e;
        if (d < D) s += x[e] * Cv<T>::ld(p[d]);
    }
    return warp_sum(s);
}

// Forward: row (b, h, i) streams over its visible keys with the online softmax.
template <typename T, bool EX>
__global__ void __launch_bounds__(32 * PLAIN_WARPS) attn_fwd_plain(Prob p) {
    const int lane = threadIdx.x & 31;
    const int64_t row = blockIdx.x * (int64_t)PLAIN_WARPS + (threadIdx.x >> 5);
    if (row >= p.B * p.H * p.L) return;
    const int64_t i = row % p.L, bh = row / p.L, h = bh % p.H, b = bh / p.H, hk = h / p.group;
    const T *q = static_cast<const T *>(p.q) + off(p.sq, b, h, i);
    const T *kb = static_cast<const T *>(p.k) + off(p.sk, b, hk, 0);
    const T *vb = static_cast<const T *>(p.v) + off(p.sv, b, hk, 0);
    float x[PLAIN_E], acc[PLAIN_E];
    load_row(x, q, p.D, lane);
#pragma unroll
    for (int e = 0; e < PLAIN_E; e++) acc[e] = 0.f;
    float m = -INFINITY, l = 0.f;
    const int64_t n = p.causal ? (i + 1 < p.S ? i + 1 : p.S) : p.S;
    for (int64_t j = 0; j < n; j++) {
        float s = dot_row(x, kb + j * p.sk[2], p.D, lane) * p.scale_log2;
        if (EX && p.mask_kind) s += mask_log2<T>(p, b, h, i, j);
        float nm = fmaxf(m, s); // fmaxf skips NaN, as the CPU's max does
        float alpha = m == -INFINITY ? 0.f : exp2f(m - nm);
        float e = nm == -INFINITY ? 0.f : exp2f(s - nm);
        l = l * alpha + e; // the undropped sum: dropout scales p after the softmax
        m = nm;
        if (EX && p.drop) e *= drop_factor(p, bh, i, j);
        const T *vr = vb + j * p.sv[2];
#pragma unroll
        for (int k = 0; k < PLAIN_E; k++) {
            int64_t d = lane + 32 * k;
            acc[k] = acc[k] * alpha + (d < p.D ? e * Cv<T>::ld(vr[d]) : 0.f);
        }
    }
    const float inv = l > 0.f ? 1.f / l : 0.f;
    T *o = static_cast<T *>(p.out) + off(p.so, b, h, i);
#pragma unroll
    for (int k = 0; k < PLAIN_E; k++) {
        int64_t d = lane + 32 * k;
        if (d < p.D) o[d] = Cv<T>::st(acc[k] * inv);
    }
    if (lane == 0) p.lse[bh * p.lse_ld + i] = l > 0.f ? (m + log2f(l)) * LN2 : -INFINITY;
}

// D[row] = rowsum(dout * out) in float32: one warp per row.
template <typename T>
__global__ void __launch_bounds__(256) attn_bwd_dvec(Prob p) {
    const int lane = threadIdx.x & 31;
    const int64_t row = blockIdx.x * (int64_t)8 + (threadIdx.x >> 5);
    if (row >= p.B * p.H * p.L) return;
    const int64_t i = row % p.L, bh = row / p.L, h = bh % p.H, b = bh / p.H;
    const T *g = static_cast<const T *>(p.dout) + off(p.sdo, b, h, i);
    const T *o = static_cast<const T *>(p.o) + off(p.so, b, h, i);
    float s = 0.f;
    for (int64_t d = lane; d < p.D; d += 32) s += Cv<T>::ld(g[d]) * Cv<T>::ld(o[d]);
    s = warp_sum(s);
    if (lane == 0) p.dvec[row] = s;
}

// Backward, dq: row (b, h, i) over its visible keys.
template <typename T, bool EX>
__global__ void __launch_bounds__(32 * PLAIN_WARPS) attn_bwd_dq_plain(Prob p) {
    const int lane = threadIdx.x & 31;
    const int64_t row = blockIdx.x * (int64_t)PLAIN_WARPS + (threadIdx.x >> 5);
    if (row >= p.B * p.H * p.L) return;
    const int64_t i = row % p.L, bh = row / p.L, h = bh % p.H, b = bh / p.H, hk = h / p.group;
    const T *kb = static_cast<const T *>(p.k) + off(p.sk, b, hk, 0);
    const T *vb = static_cast<const T *>(p.v) + off(p.sv, b, hk, 0);
    float x[PLAIN_E], g[PLAIN_E], acc[PLAIN_E];
    load_row(x, static_cast<const T *>(p.q) + off(p.sq, b, h, i), p.D, lane);
    load_row(g, static_cast<const T *>(p.dout) + off(p.sdo, b, h, i), p.D, lane);
#pragma unroll
    for (int e = 0; e < PLAIN_E; e++) acc[e] = 0.f;
    const float lse2 = lse_log2(p.lse[bh * p.lse_ld + i]), Di = p.dvec[row];
    const int64_t n = p.causal ? (i + 1 < p.S ? i + 1 : p.S) : p.S;
    for (int64_t j = 0; j < n; j++) {
        const T *kr = kb + j * p.sk[2];
        float sc = dot_row(x, kr, p.D, lane) * p.scale_log2;
        if (EX && p.mask_kind) sc += mask_log2<T>(p, b, h, i, j);
        float pr = exp2f(sc - lse2);
        float dp = dot_row(g, vb + j * p.sv[2], p.D, lane);
        if (EX && p.drop) dp *= drop_factor(p, bh, i, j);
        float ds = pr * (dp - Di);
#pragma unroll
        for (int e = 0; e < PLAIN_E; e++) {
            int64_t d = lane + 32 * e;
            if (d < p.D) acc[e] += ds * Cv<T>::ld(kr[d]);
        }
    }
    T *dq = static_cast<T *>(p.dq) + off(p.sdq, b, h, i);
#pragma unroll
    for (int e = 0; e < PLAIN_E; e++) {
        int64_t d = lane + 32 * e;
        if (d < p.D) dq[d] = Cv<T>::st(acc[e] * p.scale);
    }
}

// Backward, dk and dv: key row (b, hk, j) over the query heads reading it and
// the query rows that see it.
template <typename T, bool EX>
__global__ void __launch_bounds__(32 * PLAIN_WARPS) attn_bwd_dkv_plain(Prob p) {
    const int lane = threadIdx.x & 31;
    const int64_t row = blockIdx.x * (int64_t)PLAIN_WARPS + (threadIdx.x >> 5);
    if (row >= p.B * p.Hkv * p.S) return;
    const int64_t j = row % p.S, bh = row / p.S, hk = bh % p.Hkv, b = bh / p.Hkv;
    float kx[PLAIN_E], vx[PLAIN_E], dk[PLAIN_E], dv[PLAIN_E];
    load_row(kx, static_cast<const T *>(p.k) + off(p.sk, b, hk, j), p.D, lane);
    load_row(vx, static_cast<const T *>(p.v) + off(p.sv, b, hk, j), p.D, lane);
#pragma unroll
    for (int e = 0; e < PLAIN_E; e++) dk[e] = dv[e] = 0.f;
    for (int64_t h = hk * p.group; h < (hk + 1) * p.group; h++) {
        const int64_t qbh = b * p.H + h, base = qbh * p.L;
        for (int64_t i = p.causal ? j : 0; i < p.L; i++) {
            const T *qr = static_cast<const T *>(p.q) + off(p.sq, b, h, i);
            const T *gr = static_cast<const T *>(p.dout) + off(p.sdo, b, h, i);
            float sc = dot_row(kx, qr, p.D, lane) * p.scale_log2;
            if (EX && p.mask_kind) sc += mask_log2<T>(p, b, h, i, j);
            const float pr = exp2f(sc - lse_log2(p.lse[qbh * p.lse_ld + i]));
            const float z = EX && p.drop ? drop_factor(p, qbh, i, j) : 1.f;
            const float ds = pr * (z * dot_row(vx, gr, p.D, lane) - p.dvec[base + i]), pz = pr * z;
#pragma unroll
            for (int e = 0; e < PLAIN_E; e++) {
                int64_t d = lane + 32 * e;
                if (d < p.D) {
                    dv[e] += pz * Cv<T>::ld(gr[d]);
                    dk[e] += ds * Cv<T>::ld(qr[d]);
                }
            }
        }
    }
    T *dkr = static_cast<T *>(p.dk) + off(p.sdk, b, hk, j), *dvr = static_cast<T *>(p.dv) + off(p.sdv, b, hk, j);
#pragma unroll
    for (int e = 0; e < PLAIN_E; e++) {
        int64_t d = lane + 32 * e;
        if (d < p.D) {
            dkr[d] = Cv<T>::st(dk[e] * p.scale);
            dvr[d] = Cv<T>::st(dv[e]);
        }
    }
}

// ============================================================ tensor cores

constexpr int TC_THREADS = 128; // 4 warps
constexpr int BQ = 64;          // forward: query rows per block (16 per warp)
constexpr int BK = 64;          // key rows per tile (forward), per block (backward)
constexpr int PAD = 8;          // 16 bytes of padding per shared row: no bank conflicts on fragment loads

template <typename T>
__device__ __forceinline__ void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);
template <>
__device__ __forceinline__ void mma16816<__half>(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                                 uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void mma16816<__nv_bfloat16>(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                                        uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t smem_addr(const void *p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Two B fragments (n-tiles n0 and n0 + 8, k rows k0..k0+15) of a [k][n]
// row-major shared tile (ld elements per row): ldmatrix .trans hands lane l
// the elements (k = 2 (l % 4) + {0, 1}, n = l / 4) of each 8x8 matrix, which
// is b_k / b_n's layout. Matrices 0..3: (k0, n0), (k0 + 8, n0), (k0, n0 + 8),
// (k0 + 8, n0 + 8); lane t gives the row address of matrix t / 8.
template <typename T>
__device__ __forceinline__ void ldsm_b_trans(uint32_t (&b)[4], const T *tile, int ld, int k0, int n0, int lane) {
    const int mi = lane >> 3;
    const T *rowp = tile + (k0 + (mi & 1) * 8 + (lane & 7)) * ld + n0 + (mi >> 1) * 8;
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                 : "r"(smem_addr(rowp)));
}

// A fragment (rows r0..r0+15, k k0..k0+15) of a [row][k] row-major shared tile.
template <typename T>
__device__ __forceinline__ void lds_a(uint32_t (&a)[4], const T *tile, int ld, int r0, int k0, int lane) {
#pragma unroll
    for (int r = 0; r < 4; r++)
        a[r] = *reinterpret_cast<const uint32_t *>(tile + (r0 + a_row(lane, r)) * ld + k0 + a_col(lane, r, 0));
}

// B fragment (n n0..n0+7, k k0..k0+15) of an [n][k] row-major shared tile
// (B = tile^T: k^T for q k^T).
template <typename T>
__device__ __forceinline__ void lds_b_nk(uint32_t &b0, uint32_t &b1, const T *tile, int ld, int n0, int k0,
                                         int lane) {
    const T *p = tile + (n0 + b_n(lane)) * ld + k0;
    b0 = *reinterpret_cast<const uint32_t *>(p + b_k(lane, 0, 0));
    b1 = *reinterpret_cast<const uint32_t *>(p + b_k(lane, 1, 0));
}

// rows [r0, r0 + ROWS) of a global operand into a shared [ROWS][HD + PAD]
// tile, 16 bytes per access; rows >= nrows and columns >= D are zero.
template <typename T, int ROWS, int HD>
__device__ __forceinline__ void load_tile(T *tile, const T *g, int64_t rs, int64_t r0, int64_t nrows, int64_t D) {
    constexpr int CH = HD / 8; // 16-byte chunks per row
    for (int c = threadIdx.x; c < ROWS * CH; c += TC_THREADS) {
        const int r = c / CH, d = (c % CH) * 8;
        uint4 val = make_uint4(0, 0, 0, 0);
        if (r0 + r < nrows && d < D) val = *reinterpret_cast<const uint4 *>(g + (r0 + r) * rs + d);
        *reinterpret_cast<uint4 *>(tile + r * (HD + PAD) + d) = val;
    }
}

// Forward. Block: (batch·head, query tile), heavy causal tiles first.
template <typename T, int HD, bool EX>
__global__ void __launch_bounds__(TC_THREADS) attn_fwd_tc(Prob p) {
    extern __shared__ __align__(16) unsigned char smem_raw[];
    T *Qs = reinterpret_cast<T *>(smem_raw);
    T *Ks = Qs + BQ * (HD + PAD);
    T *Vs = Ks + BK * (HD + PAD);
    constexpr int LD = HD + PAD, KS = HD / 16, NO = HD / 8;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int64_t nqt = (p.L + BQ - 1) / BQ;
    const int64_t qt = nqt - 1 - (int64_t)(blockIdx.x % nqt), bh = blockIdx.x / nqt;
    const int64_t h = bh % p.H, b = bh / p.H, hk = h / p.group, q0 = qt * BQ;
    const T *kg = static_cast<const T *>(p.k) + off(p.sk, b, hk, 0);
    const T *vg = static_cast<const T *>(p.v) + off(p.sv, b, hk, 0);

    load_tile<T, BQ, HD>(Qs, static_cast<const T *>(p.q) + off(p.sq, b, h, 0), p.sq[2], q0, p.L, p.D);
    __syncthreads();
    uint32_t qf[KS][4];
#pragma unroll
    for (int kk = 0; kk < KS; kk++) lds_a(qf[kk], Qs, LD, w * 16, kk * 16, lane);

    float oacc[NO][4];
#pragma unroll
    for (int n = 0; n < NO; n++) oacc[n][0] = oacc[n][1] = oacc[n][2] = oacc[n][3] = 0.f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f}; // rows group and group + 8
    const int64_t r0 = q0 + w * 16;                         // the warp's first row
    const int64_t nkt = key_tiles(q0, BQ, p.L, p.S, BK, p.causal);

    for (int64_t kt = 0; kt < nkt; kt++) {
        const int64_t k0 = kt * BK;
        __syncthreads(); // the previous tile is consumed
        load_tile<T, BK, HD>(Ks, kg, p.sk[2], k0, p.S, p.D);
        load_tile<T, BK, HD>(Vs, vg, p.sv[2], k0, p.S, p.D);
        __syncthreads();
        float s[BK / 8][4];
#pragma unroll
        for (int n = 0; n < BK / 8; n++) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
        for (int kk = 0; kk < KS; kk++) {
#pragma unroll
            for (int n = 0; n < BK / 8; n++) {
                uint32_t b0, b1;
                lds_b_nk(b0, b1, Ks, LD, n * 8, kk * 16, lane);
                mma16816<T>(s[n], qf[kk], b0, b1);
            }
        }
        const bool masked = (EX && p.mask_kind) || tile_needs_mask(k0, BK, r0, p.S, p.causal);
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int n = 0; n < BK / 8; n++) {
#pragma unroll
            for (int e = 0; e < 4; e++) {
                float x = s[n][e] * p.scale_log2;
                if (masked) {
                    const int64_t i = r0 + c_row(lane, e), j = k0 + n * 8 + c_col(lane, e);
                    if (!visible(i, j, p.S, p.causal)) x = -INFINITY;
                    else if (EX && p.mask_kind && i < p.L) x += mask_log2<T>(p, b, h, i, j);
                }
                s[n][e] = x;
                mx[e >> 1] = fmaxf(mx[e >> 1], x);
            }
        }
        float alpha[2], base[2];
#pragma unroll
        for (int r = 0; r < 2; r++) {
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
            const float nm = fmaxf(m[r], mx[r]);
            base[r] = nm == -INFINITY ? 0.f : nm; // a row with nothing visible yet stays all zero
            alpha[r] = exp2f(m[r] - base[r]);     // 0 from m = -inf
            m[r] = nm;
            l[r] *= alpha[r];
        }
#pragma unroll
        for (int n = 0; n < BK / 8; n++) {
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const float pe = exp2f(s[n][e] - base[e >> 1]);
                s[n][e] = pe;
                l[e >> 1] += pe; // this thread's share; the quad's shares are summed at the end
            }
        }
        if (EX && p.drop) { // after the sums: lse is that of the undropped p
#pragma unroll
            for (int n = 0; n < BK / 8; n++) {
#pragma unroll
                for (int r = 0; r < 2; r++) {
                    float f0, f1;
                    drop_pair(p, bh, r0 + c_row(lane, 2 * r), k0 + n * 8 + c_col(lane, 2 * r), f0, f1);
                    s[n][2 * r] *= f0;
                    s[n][2 * r + 1] *= f1;
                }
            }
        }
#pragma unroll
        for (int n = 0; n < NO; n++) {
            oacc[n][0] *= alpha[0], oacc[n][1] *= alpha[0];
            oacc[n][2] *= alpha[1], oacc[n][3] *= alpha[1];
        }
        // O += P V: P's accumulator tiles 2kk, 2kk + 1 are the A fragment of keys 16kk..16kk+15
#pragma unroll
        for (int kk = 0; kk < BK / 16; kk++) {
            uint32_t a[4] = {Cv<T>::pack(s[2 * kk][0], s[2 * kk][1]), Cv<T>::pack(s[2 * kk][2], s[2 * kk][3]),
                             Cv<T>::pack(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                             Cv<T>::pack(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
            for (int n = 0; n < NO; n += 2) {
                uint32_t bb[4];
                ldsm_b_trans(bb, Vs, LD, kk * 16, n * 8, lane);
                mma16816<T>(oacc[n], a, bb[0], bb[1]);
                mma16816<T>(oacc[n + 1], a, bb[2], bb[3]);
            }
        }
    }
    T *og = static_cast<T *>(p.out) + off(p.so, b, h, 0);
#pragma unroll
    for (int r = 0; r < 2; r++) {
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
        const int64_t i = r0 + c_row(lane, 2 * r);
        const float inv = l[r] > 0.f ? 1.f / l[r] : 0.f;
        if (i < p.L) {
#pragma unroll
            for (int n = 0; n < NO; n++) {
                const int d = n * 8 + c_col(lane, 2 * r);
                if (d < p.D) // D % 8 == 0: d + 1 < D too
                    *reinterpret_cast<uint32_t *>(og + i * p.so[2] + d) =
                        Cv<T>::pack(oacc[n][2 * r] * inv, oacc[n][2 * r + 1] * inv);
            }
            if ((lane & 3) == 0) p.lse[bh * p.lse_ld + i] = l[r] > 0.f ? (m[r] + log2f(l[r])) * LN2 : -INFINITY;
        }
    }
}

// Backward. Block: (batch, key/value head, key tile of BK rows); warp w owns
// keys k0 + 16w .. k0 + 16w + 15 and accumulates their dk, dv rows in
// registers over every query head of the group and every query tile that
// sees them. BQB query rows per step (32 for HD 128: registers).
template <typename T, int HD, int BQB, bool EX>
__global__ void __launch_bounds__(TC_THREADS) attn_bwd_tc(Prob p) {
    extern __shared__ __align__(16) unsigned char smem_raw[];
    constexpr int LD = HD + PAD, KS = HD / 16, NO = HD / 8, NQ = BQB / 8, LDS = BK + PAD;
    T *Ks = reinterpret_cast<T *>(smem_raw);
    T *Vs = Ks + BK * LD;
    T *Qs = Vs + BK * LD;
    T *Gs = Qs + BQB * LD; // dout
    T *Ss = Gs + BQB * LD; // ds [query][key]
    float *lse_s = reinterpret_cast<float *>(Ss + BQB * LDS);
    float *dv_s = lse_s + BQB;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int64_t nkt = (p.S + BK - 1) / BK;
    const int64_t kt = blockIdx.x % nkt, bhk = blockIdx.x / nkt;
    const int64_t hk = bhk % p.Hkv, b = bhk / p.Hkv, k0 = kt * BK, j0 = k0 + w * 16;

    load_tile<T, BK, HD>(Ks, static_cast<const T *>(p.k) + off(p.sk, b, hk, 0), p.sk[2], k0, p.S, p.D);
    load_tile<T, BK, HD>(Vs, static_cast<const T *>(p.v) + off(p.sv, b, hk, 0), p.sv[2], k0, p.S, p.D);

    float dk[NO][4], dv[NO][4];
#pragma unroll
    for (int n = 0; n < NO; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) dk[n][e] = dv[n][e] = 0.f;

    // dq tile split: MT m-tiles of 16 query rows, each shared by 4 / MT warps over the n-tiles
    constexpr int MT = BQB / 16, WPM = 4 / MT, NW = NO / WPM;
    const int dq_m = w % MT, dq_n0 = (w / MT) * NW;

    for (int64_t h = hk * p.group; h < (hk + 1) * p.group; h++) {
        const int64_t bh = b * p.H + h;
        const T *qg = static_cast<const T *>(p.q) + off(p.sq, b, h, 0);
        const T *gg = static_cast<const T *>(p.dout) + off(p.sdo, b, h, 0);
        for (int64_t q0 = first_query_tile(k0, BQB, p.causal) * BQB; q0 < p.L; q0 += BQB) {
            __syncthreads(); // the previous step's tiles are consumed
            load_tile<T, BQB, HD>(Qs, qg, p.sq[2], q0, p.L, p.D);
            load_tile<T, BQB, HD>(Gs, gg, p.sdo[2], q0, p.L, p.D);
            for (int r = threadIdx.x; r < BQB; r += TC_THREADS) {
                const bool in = q0 + r < p.L;
                lse_s[r] = in ? lse_log2(p.lse[bh * p.lse_ld + q0 + r]) : INFINITY; // p = 0 on padding rows
                dv_s[r] = in ? p.dvec[bh * p.L + q0 + r] : 0.f;
            }
            __syncthreads();
            // s^T = k q^T and dp^T = v do^T for the warp's 16 keys x BQB queries
            float st[NQ][4], dpt[NQ][4];
#pragma unroll
            for (int n = 0; n < NQ; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) st[n][e] = dpt[n][e] = 0.f;
#pragma unroll
            for (int kk = 0; kk < KS; kk++) {
                uint32_t ak[4];
                lds_a(ak, Ks, LD, w * 16, kk * 16, lane);
#pragma unroll
                for (int n = 0; n < NQ; n++) {
                    uint32_t b0, b1;
                    lds_b_nk(b0, b1, Qs, LD, n * 8, kk * 16, lane);
                    mma16816<T>(st[n], ak, b0, b1);
                }
            }
#pragma unroll
            for (int kk = 0; kk < KS; kk++) {
                uint32_t av[4];
                lds_a(av, Vs, LD, w * 16, kk * 16, lane);
#pragma unroll
                for (int n = 0; n < NQ; n++) {
                    uint32_t b0, b1;
                    lds_b_nk(b0, b1, Gs, LD, n * 8, kk * 16, lane);
                    mma16816<T>(dpt[n], av, b0, b1);
                }
            }
            // p^T and ds^T = p^T (dp^T - D); ds (unscaled) also to shared memory for dq
#pragma unroll
            for (int n = 0; n < NQ; n++) {
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int qi = n * 8 + c_col(lane, e), kj = w * 16 + c_row(lane, e);
                    const int64_t i = q0 + qi, j = k0 + kj;
                    float pe = 0.f;
                    if (i < p.L && visible(i, j, p.S, p.causal)) {
                        float x = st[n][e] * p.scale_log2;
                        if (EX && p.mask_kind) x += mask_log2<T>(p, b, h, i, j);
                        pe = exp2f(x - lse_s[qi]);
                    }
                    // dropout: dv takes p z, ds = p (z dp - D) (z = keep / (1 - dropout_p))
                    const float z = EX && p.drop && pe != 0.f ? drop_factor(p, bh, i, j) : 1.f;
                    st[n][e] = pe * z;
                    dpt[n][e] = pe * (z * dpt[n][e] - dv_s[qi]);
                    Ss[qi * LDS + kj] = Cv<T>::st(dpt[n][e]);
                }
            }
            // dv += p^T do, dk += ds^T q: A from the accumulators (k = queries), B = do / q tiles
#pragma unroll
            for (int kk = 0; kk < BQB / 16; kk++) {
                uint32_t ap[4] = {Cv<T>::pack(st[2 * kk][0], st[2 * kk][1]), Cv<T>::pack(st[2 * kk][2], st[2 * kk][3]),
                                  Cv<T>::pack(st[2 * kk + 1][0], st[2 * kk + 1][1]),
                                  Cv<T>::pack(st[2 * kk + 1][2], st[2 * kk + 1][3])};
                uint32_t as[4] = {Cv<T>::pack(dpt[2 * kk][0], dpt[2 * kk][1]),
                                  Cv<T>::pack(dpt[2 * kk][2], dpt[2 * kk][3]),
                                  Cv<T>::pack(dpt[2 * kk + 1][0], dpt[2 * kk + 1][1]),
                                  Cv<T>::pack(dpt[2 * kk + 1][2], dpt[2 * kk + 1][3])};
#pragma unroll
                for (int n = 0; n < NO; n += 2) {
                    uint32_t bb[4];
                    ldsm_b_trans(bb, Gs, LD, kk * 16, n * 8, lane);
                    mma16816<T>(dv[n], ap, bb[0], bb[1]);
                    mma16816<T>(dv[n + 1], ap, bb[2], bb[3]);
                    ldsm_b_trans(bb, Qs, LD, kk * 16, n * 8, lane);
                    mma16816<T>(dk[n], as, bb[0], bb[1]);
                    mma16816<T>(dk[n + 1], as, bb[2], bb[3]);
                }
            }
            __syncthreads(); // ds complete
            // dq[q0 + 16 dq_m .., n-tiles dq_n0 ..] += scale * ds k over the block's BK keys
            float dq[NW][4];
#pragma unroll
            for (int n = 0; n < NW; n++) dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.f;
#pragma unroll
            for (int kk = 0; kk < BK / 16; kk++) {
                uint32_t a[4];
                lds_a(a, Ss, LDS, dq_m * 16, kk * 16, lane);
#pragma unroll
                for (int n = 0; n < NW; n += 2) {
                    uint32_t bb[4];
                    ldsm_b_trans(bb, Ks, LD, kk * 16, (dq_n0 + n) * 8, lane);
                    mma16816<T>(dq[n], a, bb[0], bb[1]);
                    mma16816<T>(dq[n + 1], a, bb[2], bb[3]);
                }
            }
            float *dqg = p.dqacc + bh * p.L * p.D;
#pragma unroll
            for (int n = 0; n < NW; n++) {
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int64_t i = q0 + dq_m * 16 + c_row(lane, e);
                    const int d = (dq_n0 + n) * 8 + c_col(lane, e);
                    if (i < p.L && d < p.D) atomicAdd(dqg + i * p.D + d, dq[n][e] * p.scale);
                }
            }
        }
    }
    T *dkg = static_cast<T *>(p.dk) + off(p.sdk, b, hk, 0);
    T *dvg = static_cast<T *>(p.dv) + off(p.sdv, b, hk, 0);
#pragma unroll
    for (int n = 0; n < NO; n++) {
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const int64_t j = j0 + c_row(lane, 2 * r);
            const int d = n * 8 + c_col(lane, 2 * r);
            if (j < p.S && d < p.D) {
                *reinterpret_cast<uint32_t *>(dkg + j * p.sdk[2] + d) =
                    Cv<T>::pack(dk[n][2 * r] * p.scale, dk[n][2 * r + 1] * p.scale);
                *reinterpret_cast<uint32_t *>(dvg + j * p.sdv[2] + d) = Cv<T>::pack(dv[n][2 * r], dv[n][2 * r + 1]);
            }
        }
    }
}

// dq (strides sdq) = the float32 accumulator [B, H, L, D] in T
template <typename T>
__global__ void store_dq(Prob p, int64_t n) {
    for (int64_t x = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; x < n; x += (int64_t)gridDim.x * blockDim.x) {
        const int64_t d = x % p.D, r = x / p.D, i = r % p.L, bh = r / p.L;
        static_cast<T *>(p.dq)[off(p.sdq, bh / p.H, bh % p.H, i) + d] = Cv<T>::st(p.dqacc[x]);
    }
}

// ------------------------------------------------------------ host

constexpr size_t fwd_smem(int hd, size_t esz) { return (size_t)(BQ + 2 * BK) * (hd + PAD) * esz; }
constexpr size_t bwd_smem(int hd, int bqb, size_t esz) {
    return ((size_t)(2 * BK + 2 * bqb) * (hd + PAD) + (size_t)bqb * (BK + PAD)) * esz + 2 * bqb * sizeof(float);
}

bool aligned16(const void *ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15) == 0; }
bool strides8(const int64_t *s) { return s[0] % 8 == 0 && s[1] % 8 == 0 && s[2] % 8 == 0; }

Prob make_prob(const EmCudaAttention *a) {
    Prob p;
    p.B = a->B, p.H = a->H, p.Hkv = a->Hkv, p.L = a->L, p.S = a->S, p.D = a->D;
    p.group = a->H / a->Hkv;
    p.scale = static_cast<float>(a->scale);
    p.scale_log2 = static_cast<float>(a->scale * 1.4426950408889634);
    p.causal = a->causal;
    p.q = a->q, p.k = a->k, p.v = a->v, p.o = a->out, p.dout = a->dout, p.out = a->out;
    for (int i = 0; i < 3; i++) {
        p.sq[i] = a->sq[i], p.sk[i] = a->sk[i], p.sv[i] = a->sv[i], p.so[i] = a->so[i], p.sdo[i] = a->sdo[i];
    }
    p.lse = a->lse;
    p.dvec = p.dqacc = nullptr;
    p.dq = a->dq, p.dk = a->dk, p.dv = a->dv;
    p.mask_kind = 0, p.mask = nullptr;
    p.sm[0] = p.sm[1] = p.sm[2] = p.sm[3] = 0;
    p.drop = false, p.keep_thresh = 0, p.keep_scale = 1.f, p.seed = p.offset = 0;
    p.lse_ld = a->L;
    p.sdq[0] = a->H * a->L * a->D, p.sdq[1] = a->L * a->D, p.sdq[2] = a->D;
    p.sdk[0] = p.sdv[0] = a->Hkv * a->S * a->D, p.sdk[1] = p.sdv[1] = a->S * a->D, p.sdk[2] = p.sdv[2] = a->D;
    return p;
}

// The problem with EmCudaAttentionEx's extras.
Prob make_prob_ex(const EmCudaAttentionEx *x) {
    Prob p = make_prob(&x->a);
    p.mask_kind = x->mask_kind, p.mask = x->mask;
    for (int i = 0; i < 4; i++) p.sm[i] = x->sm[i];
    if (x->dropout_p > 0) {
        const double keep = 1.0 - x->dropout_p;
        p.drop = true;
        p.keep_thresh = keep_threshold(keep);
        p.keep_scale = keep > 0 ? static_cast<float>(1.0 / keep) : 0.f;
        p.seed = x->seed, p.offset = x->offset;
    }
    p.lse_ld = x->lse_ld;
    for (int i = 0; i < 3; i++) p.sdq[i] = x->sdq[i], p.sdk[i] = x->sdk[i], p.sdv[i] = x->sdv[i];
    return p;
}

// Whether the tensor-core kernels take the problem: halves, D <= 128 and a
// multiple of 8, 16-byte aligned rows (the 16-byte tile loads and 4-byte stores).
bool tc_fits(const EmCudaAttention *a, bool backward) {
    if (a->dtype != DT_FLOAT16 && a->dtype != DT_BFLOAT16) return false;
    if (a->D > 128 || a->D % 8 != 0) return false;
    bool ok = aligned16(a->q) && aligned16(a->k) && aligned16(a->v) && aligned16(a->out) && strides8(a->sq) &&
              strides8(a->sk) && strides8(a->sv) && a->so[0] % 2 == 0 && a->so[1] % 2 == 0 &&
              a->so[2] % 2 == 0;
    if (backward) ok = ok && aligned16(a->dout) && strides8(a->sdo);
    return ok;
}

int check(const EmCudaAttention *a, const char *who) {
    if (a->dtype != DT_FLOAT16 && a->dtype != DT_BFLOAT16 && a->dtype != DT_FLOAT32)
        return emc_fail("%s: dtype %d is not float16, bfloat16 or float32", who, a->dtype);
    if (a->D < 1 || a->D > 32 * PLAIN_E) return emc_fail("%s: head dim %lld outside [1, 256]", who, (long long)a->D);
    if (a->Hkv < 1 || a->H % a->Hkv != 0)
        return emc_fail("%s: %lld query heads for %lld key/value heads", who, (long long)a->H, (long long)a->Hkv);
    return 0;
}

int blocks_for(int64_t rows, int per, const char *who, unsigned *out) {
    int64_t n = (rows + per - 1) / per;
    if (n > 0x7fffffffLL) return emc_fail("%s: %lld rows exceed the grid", who, (long long)rows);
    *out = static_cast<unsigned>(n);
    return 0;
}

template <typename T, int HD, bool EX>
int launch_fwd_tc(const Prob &p, cudaStream_t s) {
    const size_t sm = fwd_smem(HD, sizeof(T));
    if (EMC_CHECK(cudaFuncSetAttribute(attn_fwd_tc<T, HD, EX>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(sm))) < 0)
        return -1;
    unsigned nb = 0;
    if (blocks_for(p.B * p.H * ((p.L + BQ - 1) / BQ), 1, "attention forward", &nb) < 0) return -1;
    attn_fwd_tc<T, HD, EX><<<nb, TC_THREADS, sm, s>>>(p);
    return EMC_CHECK(cudaGetLastError());
}

template <typename T, int HD, int BQB, bool EX>
int launch_bwd_tc(const Prob &p, cudaStream_t s) {
    const size_t sm = bwd_smem(HD, BQB, sizeof(T));
    if (EMC_CHECK(cudaFuncSetAttribute(attn_bwd_tc<T, HD, BQB, EX>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(sm))) < 0)
        return -1;
    unsigned nb = 0;
    if (blocks_for(p.B * p.Hkv * ((p.S + BK - 1) / BK), 1, "attention backward", &nb) < 0) return -1;
    attn_bwd_tc<T, HD, BQB, EX><<<nb, TC_THREADS, sm, s>>>(p);
    return EMC_CHECK(cudaGetLastError());
}

// EX: the kernels with the mask and dropout code (EmCudaAttentionEx), kept
// apart so the plain problem keeps its registers
template <typename T, bool EX>
int forward_t(const EmCudaAttention *a, const Prob &p, cudaStream_t s) {
    if constexpr (!std::is_same<T, float>::value) {
        if (tc_fits(a, false)) return p.D <= 64 ? launch_fwd_tc<T, 64, EX>(p, s) : launch_fwd_tc<T, 128, EX>(p, s);
    }
    unsigned nb = 0;
    if (blocks_for(p.B * p.H * p.L, PLAIN_WARPS, "attention forward", &nb) < 0) return -1;
    attn_fwd_plain<T, EX><<<nb, 32 * PLAIN_WARPS, 0, s>>>(p);
    return EMC_CHECK(cudaGetLastError());
}

template <typename T, bool EX>
int backward_t(const EmCudaAttention *a, Prob &p, int dev, cudaStream_t s) {
    const int64_t rows = p.B * p.H * p.L;
    unsigned nb = 0;
    if (blocks_for(rows, 8, "attention backward", &nb) < 0) return -1;
    bool tc = false;
    // the tensor-core kernel stores dk, dv in pairs: even strides, 4-byte aligned
    if constexpr (!std::is_same<T, float>::value)
        tc = tc_fits(a, true) && p.sdk[0] % 2 == 0 && p.sdk[1] % 2 == 0 && p.sdk[2] % 2 == 0 &&
             p.sdv[0] % 2 == 0 && p.sdv[1] % 2 == 0 && p.sdv[2] % 2 == 0 &&
             (reinterpret_cast<uintptr_t>(p.dk) & 3) == 0 && (reinterpret_cast<uintptr_t>(p.dv) & 3) == 0;
    const size_t dvec_bytes = static_cast<size_t>(rows) * sizeof(float);
    const size_t acc_bytes = tc ? static_cast<size_t>(rows * p.D) * sizeof(float) : 0;
    char *work = static_cast<char *>(emc_alloc(dev, dvec_bytes + acc_bytes, (EmCudaStream)s));
    if (!work) return emc_fail("attention backward: out of memory for %zu bytes of scratch", dvec_bytes + acc_bytes);
    p.dvec = reinterpret_cast<float *>(work);
    p.dqacc = tc ? reinterpret_cast<float *>(work + dvec_bytes) : nullptr;
    int rc = 0;
    attn_bwd_dvec<T><<<nb, 256, 0, s>>>(p);
    if ((rc = EMC_CHECK(cudaGetLastError())) < 0) goto done;
    if (tc) {
        if ((rc = EMC_CHECK(cudaMemsetAsync(p.dqacc, 0, acc_bytes, s))) < 0) goto done;
        if constexpr (!std::is_same<T, float>::value)
            rc = p.D <= 64 ? launch_bwd_tc<T, 64, 64, EX>(p, s) : launch_bwd_tc<T, 128, 32, EX>(p, s);
        if (rc < 0) goto done;
        const int64_t n = rows * p.D;
        const int64_t g = (n + 255) / 256 < 65536 ? (n + 255) / 256 : 65536;
        store_dq<T><<<static_cast<unsigned>(g), 256, 0, s>>>(p, n);
        rc = EMC_CHECK(cudaGetLastError());
    } else {
        unsigned nq = 0, nk = 0;
        if ((rc = blocks_for(rows, PLAIN_WARPS, "attention backward", &nq)) < 0) goto done;
        attn_bwd_dq_plain<T, EX><<<nq, 32 * PLAIN_WARPS, 0, s>>>(p);
        if ((rc = EMC_CHECK(cudaGetLastError())) < 0) goto done;
        if ((rc = blocks_for(p.B * p.Hkv * p.S, PLAIN_WARPS, "attention backward", &nk)) < 0) goto done;
        attn_bwd_dkv_plain<T, EX><<<nk, 32 * PLAIN_WARPS, 0, s>>>(p);
        rc = EMC_CHECK(cudaGetLastError());
    }
done:
    // the allocator is stream-ordered: the block is reused only by later work on s
    emc_free(dev, work, dvec_bytes + acc_bytes, (EmCudaStream)s);
    return rc;
}

// The ex entries' own checks (EmCudaAttentionEx).
int check_ex(const EmCudaAttentionEx *x, const char *who) {
    if (x->mask_kind < 0 || x->mask_kind > 2 || (x->mask_kind && !x->mask))
        return emc_fail("%s: mask kind %d is not 0 (none), 1 (bool) or 2 (additive)", who, x->mask_kind);
    if (!(x->dropout_p >= 0 && x->dropout_p <= 1))
        return emc_fail("%s: dropout probability has to be between 0 and 1, but got %g", who, x->dropout_p);
    if (x->lse_ld < x->a.L) return emc_fail("%s: lse row stride %lld < L = %lld", who, (long long)x->lse_ld, (long long)x->a.L);
    return 0;
}

int run_forward(int dev, const EmCudaAttention *a, const Prob &p) {
    if (check(a, "attention forward") < 0) return -1;
    EmcDeviceGuard guard(dev);
    if (!guard.ok) return -1;
    if (a->B * a->H * a->L == 0) return 0;
    cudaStream_t s = static_cast<cudaStream_t>(emc_current_stream(dev));
    const bool ex = p.mask_kind || p.drop;
    switch (a->dtype) {
    case DT_FLOAT16: return ex ? forward_t<__half, true>(a, p, s) : forward_t<__half, false>(a, p, s);
    case DT_BFLOAT16:
        return ex ? forward_t<__nv_bfloat16, true>(a, p, s) : forward_t<__nv_bfloat16, false>(a, p, s);
    default: return ex ? forward_t<float, true>(a, p, s) : forward_t<float, false>(a, p, s);
    }
}

// Fills a dense, non-overlapping (B, heads, rows, D) gradient with zeros.
int zero_grad(void *ptr, int64_t n, size_t esz, cudaStream_t s) {
    return n > 0 ? EMC_CHECK(cudaMemsetAsync(ptr, 0, static_cast<size_t>(n) * esz, s)) : 0;
}

int run_backward(int dev, const EmCudaAttention *a, Prob &p) {
    if (check(a, "attention backward") < 0) return -1;
    EmcDeviceGuard guard(dev);
    if (!guard.ok) return -1;
    cudaStream_t s = static_cast<cudaStream_t>(emc_current_stream(dev));
    const size_t esz = a->dtype == DT_FLOAT32 ? 4 : 2;
    if (a->B * a->H * a->L == 0) { // no query rows: dk = dv = 0
        const int64_t n = a->B * a->Hkv * a->S * a->D;
        return zero_grad(a->dk, n, esz, s) < 0 || zero_grad(a->dv, n, esz, s) < 0 ? -1 : 0;
    }
    if (a->S == 0) return zero_grad(a->dq, a->B * a->H * a->L * a->D, esz, s); // no keys: dq = 0
    const bool ex = p.mask_kind || p.drop;
    switch (a->dtype) {
    case DT_FLOAT16: return ex ? backward_t<__half, true>(a, p, dev, s) : backward_t<__half, false>(a, p, dev, s);
    case DT_BFLOAT16:
        return ex ? backward_t<__nv_bfloat16, true>(a, p, dev, s) : backward_t<__nv_bfloat16, false>(a, p, dev, s);
    default: return ex ? backward_t<float, true>(a, p, dev, s) : backward_t<float, false>(a, p, dev, s);
    }
}

} // namespace

extern "C" int em_cuda_attention_forward(int dev, const EmCudaAttention *a) {
    return run_forward(dev, a, make_prob(a));
}

extern "C" int em_cuda_attention_backward(int dev, const EmCudaAttention *a) {
    Prob p = make_prob(a);
    return run_backward(dev, a, p);
}

extern "C" int em_cuda_attention_forward_ex(int dev, const EmCudaAttentionEx *x) {
    if (check_ex(x, "attention forward") < 0) return -1;
    return run_forward(dev, &x->a, make_prob_ex(x));
}

extern "C" int em_cuda_attention_backward_ex(int dev, const EmCudaAttentionEx *x) {
    if (check_ex(x, "attention backward") < 0) return -1;
    Prob p = make_prob_ex(x);
    return run_backward(dev, &x->a, p);
}
