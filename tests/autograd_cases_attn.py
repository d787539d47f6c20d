"""Gradcheck cases for the fused CPU attention's formula (csrc/autograd/derivatives_attn.c),
merged into tests/test_autograd_ops.py's tables: reached through F.scaled_dot_product_attention
under the conditions where torch (and ember) use the fused kernel, so torch's node names and
gradients are the reference too. Layouts: contiguous, and batch-expanded (stride 0) inputs the
kernel reads in place; tests/test_nn_attention_fused.py covers the rest (masks, odd sizes, ...)."""
from autograd_common import _calls, _ts, _vals

DB_KINDS = set()
OP = "_scaled_dot_product_flash_attention_for_cpu"
FLASH = "_scaled_dot_product_flash_attention"
EFF = "_scaled_dot_product_efficient_attention"
Q = _ts(_vals(("attn_q",), (2, 4, 3, 5)))
K = _ts(_vals(("attn_k",), (2, 2, 6, 5)))
V = _ts(_vals(("attn_v",), (2, 2, 6, 5)))
K4 = _ts(_vals(("attn_k4",), (2, 4, 6, 5)))
V4 = _ts(_vals(("attn_v4",), (2, 4, 6, 5)))
ADD = _ts(_vals(("attn_mask",), (3, 6)), lay=False)


_BIAS = [[0.3 * ((i * 7 + j * 3) % 5) - 0.6 for j in range(6)] for i in range(3)]


def _sdpa(L, *a, **k):
    return L.nn.functional.scaled_dot_product_attention(*a, **k)


EXTRA = {
    OP: _calls(OP, lambda L, q, k, v: _sdpa(L, q, k, v), Q, K4, V4, layouts=("contig", "expand"))
    + _calls(OP, lambda L, q, k, v: _sdpa(L, q, k, v, is_causal=True), Q, K4, V4, desc="causal, L < S")
    + _calls(OP, lambda L, q, k, v: _sdpa(L, q, k, v, is_causal=True, enable_gqa=True), Q, K, V, desc="gqa")
    + _calls(OP, lambda L, q, k, v, m: _sdpa(L, q, k, v, attn_mask=m, scale=0.7), Q, K4, V4, ADD,
             desc="additive mask, scale"),
    # torch's CUDA flash op: on CPU float64 tensors ember runs the CPU kernel (Note [CUDA
    # fallback]'s host twins), which gradchecks its formula; torch has no CPU kernel for it
    FLASH: _calls(FLASH, lambda L, q, k, v: L._C._scaled_dot_product_flash_attention(q, k, v, 0.0, True)[0], Q,
                  K4, V4, layouts=("contig", "expand"), torch_ref=False, desc="causal")
    + _calls(FLASH, lambda L, q, k, v: L._C._scaled_dot_product_flash_attention(q, k, v, scale=0.7)[0], Q, K, V,
             torch_ref=False, desc="gqa, scale"),
    # torch's CUDA memory-efficient op: likewise the CPU kernel on CPU tensors, with the bias
    # (the bias a constant: the kernel gives it no gradient)
    EFF: _calls(EFF, lambda L, q, k, v: L._C._scaled_dot_product_efficient_attention(
        q, k, v, L.tensor(_BIAS, dtype=q.dtype), True)[0], Q, K4, V4, torch_ref=False, desc="additive bias")
    + _calls(EFF, lambda L, q, k, v: L._C._scaled_dot_product_efficient_attention(q, k, v, None, True, 0.0, True,
                                                                                  scale=0.7)[0], Q, K, V,
             torch_ref=False, desc="causal, gqa, scale"),
}
INPLACE_VIEW_EXTRA = []
GG = []  # the fused backward is not differentiable (torch's too): tests/test_nn_attention_fused.py
