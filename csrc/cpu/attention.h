/* attention.h — the fused CPU scaled-dot-product attention kernels
 * (cpu/attention.c) and what their front-end (ops/attention.c) fills in.
 *
 * Note [attention layout]: query is (B, H, L, D), key (B, Hk, S, D), value
 * (B, Hk, S, Dv) with H a multiple of Hk (grouped-query attention: query
 * head h reads key/value head h / (H / Hk)). Each operand is read through
 * element strides for its batch, head and row dims and must have unit stride
 * along its last dim and a row stride of at least its last size (BLAS's
 * leading dimension). The mask, when given, is read through broadcast
 * strides (0 along broadcast dims) over (B, H, L, S): either bool (true
 * takes part) or additive in the compute dtype. Causal masking is torch's
 * top-left alignment: query row i sees keys j <= i. All float data is in
 * the compute dtype (float32 or float64); results are contiguous. */
#ifndef EMBER_CPU_ATTENTION_H
#define EMBER_CPU_ATTENTION_H

#include "../ember.h"

typedef struct {
    const char *data;
    int64_t sb, sh, sr; /* element strides of batch, head and row */
} EmAttnOperand;

typedef struct {
    EmDType dt; /* float32 or float64 */
    int64_t B, H, Hk, L, S, D, Dv;
    EmAttnOperand q, k, v;
    const void *mask;  /* NULL: no mask */
    bool mask_bool;    /* uint8 data (0/1) instead of additive compute-dtype data */
    int64_t ms[4];     /* the mask's broadcast element strides over (B, H, L, S) */
    bool causal;
    double scale;
    /* (batch, head, row) element strides of out, dq, dk and dv, rows
     * contiguous; all zero: a contiguous (B, heads, rows, width) tensor */
    int64_t out_st[3], dq_st[3], dk_st[3], dv_st[3];
} EmAttn;

/* A result's (batch, head, row) element strides: st as set, or a
 * contiguous (B, heads, rows, width) tensor's when st is all zero. */
static inline void em_attn_strides(const int64_t st[3], int64_t heads, int64_t rows, int64_t width, int64_t r[3]) {
    bool set = st[0] || st[1] || st[2];
    r[0] = set ? st[0] : heads * rows * width;
    r[1] = set ? st[1] : rows * width;
    r[2] = set ? st[2] : width;
}

/* out (B, H, L, Dv) = softmax(scale q k^T + mask) v, lse (B, H, L) the
 * log-sum-exp of each row's scores; a row where nothing takes part gets
 * zeros and lse 0 (torch's CPU kernel). Memory: O(block) per thread.
 * Returns 0, or -1 when a work buffer could not be allocated (nothing set). */
int em_cpu_attention_forward(const EmAttn *p, char *out, char *lse);

/* dq (B, H, L, D), dk (B, Hk, S, D), dv (B, Hk, S, Dv), zero-filled by the
 * caller, get the gradients given grad_out and out (both (B, H, L, Dv),
 * read through strides like q) and the forward's lse (contiguous). The
 * probabilities are recomputed block by block from lse. Returns 0, or -1
 * when a work buffer could not be allocated (nothing is set). */
int em_cpu_attention_backward(const EmAttn *p, const EmAttnOperand *grad_out, const EmAttnOperand *out,
                              const char *lse, char *dq, char *dk, char *dv);

/* Whether the problem is big enough to release the GIL / use threads. */
double em_cpu_attention_work(const EmAttn *p);

#endif
