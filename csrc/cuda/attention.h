/* attention.h — the GPU flash attention behind the "attention"
 * entries of EmCudaBackend (cuda_backend.h), and the fragment index math its
 * tensor-core kernels share with a host test.
 *
 * Note [CUDA attention]: softmax(scale q k^T + causal mask) v without the
 * L x S scores ever reaching memory (FlashAttention-2's schedule).
 *   - forward: one block of 4 warps per (batch·head, 64 query rows); key and
 *     value tiles of 64 rows stream through shared memory; each warp keeps
 *     its 16 rows' running max and sum (online softmax, float32, exp2 with
 *     scale·log2(e) folded in) and output accumulator in registers. Causal
 *     tiles right of the diagonal are never loaded; the mask is applied on
 *     the diagonal tile (and the last, partial tile) only.
 *   - backward: D = rowsum(dout ∘ out) first (a small kernel), then one block
 *     per (batch, key/value head, 64 key rows) that loops over the query
 *     heads reading that key/value head and over the query tiles, recomputes
 *     P = exp(s - lse) and accumulates dK, dV in registers (no atomics); dQ
 *     goes to a float32 buffer by atomicAdd and is cast at the end.
 *   - bf16/fp16 with D <= 128, D % 8 == 0 and 16-byte aligned rows run on
 *     tensor cores (mma.sync m16n8k16, float32 accumulate; D padded to 64 or
 *     128 with zeros in shared memory); everything else (float32, D up to
 *     256, odd strides) runs a plain kernel with one warp per row, the same
 *     formulas in float32.
 *   - extras (EmCudaAttentionEx, the *_ex entries), in both
 *     kernel families: a mask (bool, or additive in the data's dtype,
 *     broadcast through strides) added to the scaled scores in log2 units;
 *     dropout, where P's element (b·H + h, i, j) is multiplied by
 *     1 / (1 - p) or 0 from bit-exact Bernoulli draws of a Philox stream
 *     (philox.h: element ((b·H + h) L + i) S + j of a random_fill at
 *     (seed, offset), so the backward regenerates the mask, never stored);
 *     the row sum and lse are those of the undropped P, and the backward
 *     uses dv = (P∘Z)^T do, ds = P∘(Z∘(do v^T) - D); gradients written
 *     through strides (the inputs' layouts). A row that no key takes part
 *     in (all masked) gives out 0, lse -inf and zero gradients (the backward
 *     reads lse -inf as p = 0). torch's memory-efficient op (float32, masks)
 *     runs on these same kernels: float32 on the plain one.
 * Results match the CPU kernel (cpu/attention.c) up to float32 rounding
 * order; the one difference is a row that sees no key (S == 0): lse -inf
 * here, 0 on the CPU. */
#ifndef EMBER_CUDA_ATTENTION_H
#define EMBER_CUDA_ATTENTION_H

#include "../cuda_backend.h"
#include "philox.h"

#ifdef __cplusplus
extern "C" {
#endif

int em_cuda_attention_forward(int dev, const EmCudaAttention *a);
int em_cuda_attention_backward(int dev, const EmCudaAttention *a);
int em_cuda_attention_forward_ex(int dev, const EmCudaAttentionEx *a);
int em_cuda_attention_backward_ex(int dev, const EmCudaAttentionEx *a);

#ifdef __cplusplus
}

#ifdef __CUDACC__
#define EMC_ATTN_HD __host__ __device__ __forceinline__
#else
#define EMC_ATTN_HD inline
#endif

/* Fragment layout of mma.sync.m16n8k16 (PTX ISA, "Matrix fragments for
 * mma.m16n8k16"): lane = 4 * group + tig. reg is the 32-bit register index
 * (two 16-bit elements, half = 0 / 1 within it). */
namespace emc_attn {
EMC_ATTN_HD int a_row(int lane, int reg) { return (lane >> 2) + ((reg & 1) ? 8 : 0); }
EMC_ATTN_HD int a_col(int lane, int reg, int half) { return (lane & 3) * 2 + half + ((reg & 2) ? 8 : 0); }
EMC_ATTN_HD int b_k(int lane, int reg, int half) { return (lane & 3) * 2 + half + (reg ? 8 : 0); }
EMC_ATTN_HD int b_n(int lane) { return lane >> 2; }
/* accumulator element i (0..3) of a 16x8 float tile */
EMC_ATTN_HD int c_row(int lane, int i) { return (lane >> 2) + (i >= 2 ? 8 : 0); }
EMC_ATTN_HD int c_col(int lane, int i) { return (lane & 3) * 2 + (i & 1); }

/* Key tiles (of bk rows) a query tile [q0, q0 + bq) needs: all that hold a
 * key < S, and with top-left causal masking only those with a key <= the
 * tile's last row. */
EMC_ATTN_HD long long key_tiles(long long q0, long long bq, long long L, long long S, long long bk, bool causal) {
    long long n = (S + bk - 1) / bk;
    if (causal) {
        long long last = q0 + bq - 1 < L - 1 ? q0 + bq - 1 : L - 1;
        long long c = last / bk + 1;
        if (c < n) n = c;
    }
    return n;
}
/* The first query tile (of bq rows) a key tile starting at k0 sees under
 * causal masking (query i sees key j when j <= i). */
EMC_ATTN_HD long long first_query_tile(long long k0, long long bq, bool causal) {
    return causal ? k0 / bq : 0;
}
/* Whether a key tile [k0, k0 + bk) needs the element mask for query rows
 * [r0, r0 + rows): it runs past S, or (causal) some key lies right of the
 * rows' first row. */
EMC_ATTN_HD bool tile_needs_mask(long long k0, long long bk, long long r0, long long S, bool causal) {
    return k0 + bk > S || (causal && k0 + bk - 1 > r0);
}
EMC_ATTN_HD bool visible(long long i, long long j, long long S, bool causal) { return j < S && !(causal && j > i); }

/* Dropout (EmCudaAttentionEx): P element (bh, i, j) draws element
 * (bh L + i) S + j of the Philox stream, as a random_fill of a (B, H, L, S)
 * tensor does (4 words per block). */
EMC_ATTN_HD unsigned long long drop_index(long long bh, long long L, long long S, long long i, long long j) {
    return ((unsigned long long)bh * (unsigned long long)L + (unsigned long long)i) * (unsigned long long)S +
           (unsigned long long)j;
}
EMC_ATTN_HD uint32_t philox_word(const EmPhilox4 &w, unsigned k) {
    return (k & 2) ? ((k & 1) ? w.v[3] : w.v[2]) : ((k & 1) ? w.v[1] : w.v[0]); // no local-memory indexing
}
/* The words of elements idx and idx + 1: one block unless they straddle two. */
EMC_ATTN_HD void drop_words(uint64_t seed, uint64_t offset, unsigned long long idx, uint32_t &x0, uint32_t &x1) {
    const EmPhilox4 w = em_philox_block(seed, offset, idx >> 2);
    const unsigned k = (unsigned)(idx & 3);
    x0 = philox_word(w, k);
    x1 = k != 3 ? philox_word(w, k + 1) : em_philox_block(seed, offset, (idx >> 2) + 1).v[0];
}
/* keep where (word >> 8) < keep_threshold(keep): the same test as
 * em_philox_u01f(word) < keep (Bernoulli fills), in integers. */
inline uint32_t keep_threshold(double keep) {
    if (!(keep > 0)) return 0;
    if (keep >= 1) return 1u << 24;
    return (uint32_t)ceil(keep * 16777216.0);
}
EMC_ATTN_HD bool drop_keeps(uint32_t word, uint32_t threshold) { return (word >> 8) < threshold; }
} // namespace emc_attn
#endif

#endif
