"""The fused CPU attention (csrc/cpu/attention.c; torch's
_scaled_dot_product_flash_attention_for_cpu): values, logsumexp and
gradients against float64 NumPy (sizes that span several query and key
blocks, causal with L != S, bool / additive masks in every broadcast shape,
fully masked rows, grouped-query heads, strided inputs, half types),
gradcheck, which calls of F.scaled_dot_product_attention take it (torch's
node names), double backward raising as torch's does, error inputs, and
that a long sequence never allocates the L x S scores."""
import os
import subprocess
import sys

import numpy as np
import pytest

import ember
from ember.autograd import gradcheck
from ember.nn import functional as F
from op_db import np_attention

try:
    import torch as _torch
except ImportError:
    _torch = None
needs_torch = pytest.mark.skipif(_torch is None, reason="torch not installed")

OP = ember._C._scaled_dot_product_flash_attention_for_cpu
OP_BW = ember._C._scaled_dot_product_flash_attention_for_cpu_backward
FLASH = "ScaledDotProductFlashAttentionForCpuBackward0"
RNG = np.random.default_rng(5)


def T(a, grad=False):
    t = ember.from_numpy(np.ascontiguousarray(a))
    return t.requires_grad_() if grad else t


def qkv(B, H, Hk, L, S, D, dtype=np.float64):
    return (RNG.standard_normal((B, H, L, D)).astype(dtype), RNG.standard_normal((B, Hk, S, D)).astype(dtype),
            RNG.standard_normal((B, Hk, S, D)).astype(dtype))


def node(t):
    return type(t.grad_fn).__name__


# (B, H, Hk, L, S, D), causal, mask maker (L, S) -> mask or None, scale. Block sizes are 64 query rows
# and at most 512 keys (fewer for big head dims: 64 keys at D = 64), so several cases span blocks.
CASES = [
    ((2, 3, 3, 5, 7, 4), False, None, None),
    ((1, 2, 2, 9, 4, 3), True, None, None),                          # causal, L > S: late rows see every key
    ((1, 2, 2, 4, 9, 3), True, None, 0.3),                           # causal, L < S: top-left alignment
    ((1, 6, 2, 11, 13, 5), True, None, None),                        # grouped-query heads
    ((1, 2, 2, 130, 600, 8), False, None, None),                     # 3 query blocks x 2 key blocks
    ((1, 2, 1, 200, 200, 64), True, None, None),                     # 4 x 4 blocks, causal skipping
    ((1, 1, 1, 70, 150, 64), True, None, -0.5),                      # odd block remainders, negative scale
    ((2, 2, 2, 6, 20, 4), False, lambda L, S: RNG.random((L, S)) > 0.4, None),
    ((2, 2, 2, 6, 20, 4), False, lambda L, S: RNG.random((1, S)) > 0.4, None),
    ((2, 2, 2, 6, 20, 4), False, lambda L, S: RNG.random((L, 1)) > 0.4, None),       # whole rows masked
    ((2, 3, 3, 6, 20, 4), False, lambda L, S: RNG.random((2, 1, L, S)) > 0.5, None),
    ((2, 3, 3, 6, 20, 4), False, lambda L, S: RNG.random((1, 3, 1, S)) > 0.5, None),
    ((2, 3, 3, 6, 600, 4), False, lambda L, S: RNG.standard_normal((2, 3, L, S)), None),
    ((1, 2, 2, 70, 530, 8), False, lambda L, S: np.where(RNG.random((L, S)) > 0.9, -np.inf, RNG.standard_normal((L, S))),
     None),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_values_lse_and_grads_against_numpy(case):
    (B, H, Hk, L, S, D), causal, make_mask, scale = CASES[case]
    q, k, v = qkv(B, H, Hk, L, S, D)
    mask = make_mask(L, S) if make_mask else None
    if mask is not None and mask.dtype == bool and mask.ndim == 2 and mask.shape[0] == L:
        mask[L // 2] = False  # a row with nothing to attend to
    eq, ek, ev = T(q, True), T(k, True), T(v, True)
    out, lse = OP(eq, ek, ev, 0.0, causal, attn_mask=None if mask is None else T(mask), scale=scale)
    o_ref, lse_ref = np_attention(q, k, v, mask, causal, scale)
    np.testing.assert_allclose(out.detach().numpy(), o_ref, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(lse.detach().numpy(), lse_ref, rtol=1e-10, atol=1e-12)
    assert node(out) == FLASH and lse.dtype == ember.float64
    g = RNG.standard_normal(out.shape)
    out.backward(T(g))
    for got, ref in zip((eq.grad, ek.grad, ev.grad), np_attention(q, k, v, mask, causal, scale, grad_out=g)):
        np.testing.assert_allclose(got.numpy(), ref, rtol=1e-9, atol=1e-11)


def test_both_backward_schedules():
    """One thread: one pass per (batch, key/value head). More threads than such pairs: a dq pass
    by query blocks, then a dk / dv pass by key blocks. Both against NumPy."""
    q, k, v = qkv(1, 3, 1, 150, 130, 16)
    g = RNG.standard_normal((1, 3, 150, 16))
    refs = np_attention(q, k, v, None, True, None, grad_out=g)
    threads = ember.get_num_threads()
    try:
        for n in (1, 4):
            ember.set_num_threads(n)
            eq, ek, ev = T(q, True), T(k, True), T(v, True)
            OP(eq, ek, ev, 0.0, True)[0].backward(T(g))
            for got, ref in zip((eq.grad, ek.grad, ev.grad), refs):
                np.testing.assert_allclose(got.numpy(), ref, rtol=1e-9, atol=1e-11)
    finally:
        ember.set_num_threads(threads)


def test_fully_masked_rows_are_zero_with_zero_gradient():
    q, k, v = qkv(1, 1, 1, 4, 5, 3)
    keep = np.ones((4, 5), bool)
    keep[2] = False
    for mask in (T(keep), T(np.where(keep, 0.0, -np.inf))):
        eq = T(q, True)
        out, lse = OP(eq, T(k), T(v), attn_mask=mask)
        assert not out[0, 0, 2].detach().numpy().any() and lse[0, 0, 2].item() == 0.0
        out.sum().backward()
        assert not eq.grad[0, 0, 2].numpy().any()


def test_float32_and_strided_inputs():
    """nanoGPT's layout: q, k, v are (B, T, H, D) views transposed to (B, H, T, D), read in place;
    batch-expanded keys (stride 0); a transposed head dim (copied)."""
    B, T_, H, D = 2, 70, 3, 16
    x = RNG.standard_normal((B, T_, 3, H, D)).astype(np.float32)
    big = T(x)
    q, k, v = (big[:, :, i].transpose(1, 2) for i in range(3))
    assert not q.is_contiguous()
    ref = np_attention(*(np.swapaxes(x[:, :, i], 1, 2) for i in range(3)), is_causal=True)[0]
    np.testing.assert_allclose(F.scaled_dot_product_attention(q, k, v, is_causal=True).numpy(), ref, rtol=2e-5,
                               atol=2e-5)
    k1 = RNG.standard_normal((1, H, 9, D))
    q2 = RNG.standard_normal((B, H, 5, D))
    got = OP(T(q2), T(k1).expand(B, H, 9, D), T(k1).expand(B, H, 9, D))[0]
    np.testing.assert_allclose(got.numpy(), np_attention(q2, *[np.broadcast_to(k1, (B, H, 9, D))] * 2)[0], rtol=1e-10)
    qt = T(np.swapaxes(q2, -1, -2)).transpose(-1, -2)  # unit stride along L, not along D
    np.testing.assert_allclose(OP(qt, T(q2), T(q2))[0].numpy(), np_attention(q2, q2, q2)[0], rtol=1e-10)


@pytest.mark.parametrize("dtype,tol", [("float16", 2e-3), ("bfloat16", 1.6e-2)])
def test_half_types_compute_in_float32(dtype, tol):
    q, k, v = qkv(1, 2, 2, 70, 90, 8, np.float32)
    dt = getattr(ember, dtype)
    eq, ek, ev = (T(a).to(dt).requires_grad_() for a in (q, k, v))
    out, lse = OP(eq, ek, ev, 0.0, True)
    assert out.dtype == dt and lse.dtype == ember.float32
    rounded = [a.detach().float().numpy() for a in (eq, ek, ev)]  # the values the kernel saw
    np.testing.assert_allclose(out.float().detach().numpy(), np_attention(*rounded, is_causal=True)[0], atol=tol)
    out.float().sum().backward()
    assert eq.grad.dtype == dt and eq.grad.shape == eq.shape


def test_gradcheck_fused_op():
    cases = [((1, 2, 2, 3, 5, 4), False, None), ((1, 2, 2, 5, 3, 4), True, None), ((1, 2, 2, 3, 5, 4), True, None),
             ((2, 4, 2, 3, 4, 3), True, None), ((1, 2, 2, 3, 5, 2), False, RNG.random((3, 5)) > 0.4),
             ((1, 2, 2, 3, 5, 2), False, RNG.standard_normal((1, 2, 1, 5)))]
    for shape, causal, mask in cases:
        q, k, v = (T(a, True) for a in qkv(*shape))
        m = None if mask is None else T(mask)
        assert gradcheck(lambda q, k, v: OP(q, k, v, 0.0, causal, attn_mask=m, scale=0.8)[0], (q, k, v))


def test_which_calls_take_the_fused_kernel():
    """torch's CPU dispatch: the fused kernel for 3-d and 4-d inputs without dropout, 2-d / 4-d
    masks that need no gradient, grouped heads with enable_gqa; the composition otherwise."""
    q, k, v = (T(a, True) for a in qkv(2, 4, 4, 8, 8, 16))
    sdpa = F.scaled_dot_product_attention
    assert node(sdpa(q, k, v, is_causal=True)) == FLASH
    assert node(sdpa(q, k, v, attn_mask=T(RNG.random((8, 8)) > 0.5))) == FLASH
    assert node(sdpa(q, k, v, attn_mask=T(RNG.standard_normal((2, 1, 8, 8))))) == FLASH
    assert node(sdpa(q, T(RNG.standard_normal((2, 2, 8, 16))), T(RNG.standard_normal((2, 2, 8, 16))),
                     enable_gqa=True)) == FLASH
    assert node(sdpa(q[0], k[0], v[0])) == "SqueezeBackward1"  # 3-d: one batch, squeezed away
    assert node(sdpa(q, k, v, dropout_p=0.2)) != FLASH
    assert node(sdpa(q, k, v, attn_mask=T(RNG.standard_normal((4, 8, 8))))) != FLASH
    assert node(sdpa(q, k, v, attn_mask=T(RNG.standard_normal((8, 8)), True))) != FLASH
    assert node(sdpa(q, k, v[..., :5])) != FLASH
    assert node(sdpa(q[0, 0], k[0, 0], v[0, 0])) != FLASH
    with ember.no_grad():
        y = sdpa(q, k, v, is_causal=True)
    assert y.grad_fn is None
    np.testing.assert_allclose(y.numpy(), np_attention(q.detach().numpy(), k.detach().numpy(), v.detach().numpy(),
                                                       is_causal=True)[0], rtol=1e-5, atol=1e-6)


def test_double_backward_raises_like_torch():
    q, k, v = (T(a, True) for a in qkv(1, 2, 2, 4, 4, 3))
    y = F.scaled_dot_product_attention(q, k, v)
    grads = ember.autograd.grad(y.sum(), (q, k, v), create_graph=True)
    assert [node(g) for g in grads] == ["NotImplemented"] * 3 and all(g.requires_grad for g in grads)
    with pytest.raises(RuntimeError, match="_scaled_dot_product_flash_attention_for_cpu_backward is not implemented"):
        ember.autograd.grad(grads[0].sum(), q)
    y = F.scaled_dot_product_attention(q, k, v)
    assert all(g.grad_fn is None for g in ember.autograd.grad(y.sum(), (q, k, v)))


def test_errors():
    q, k, v = (T(a) for a in qkv(2, 4, 2, 3, 5, 4))
    with pytest.raises(RuntimeError, match="dropout"):
        OP(q, k, v, 0.1)
    with pytest.raises(RuntimeError, match="4 dims"):
        OP(q[0], k[0], v[0])
    with pytest.raises(RuntimeError, match="same dtype"):
        OP(q, k.float(), v)
    with pytest.raises(RuntimeError, match="must divide"):
        OP(q, T(RNG.standard_normal((2, 3, 5, 4))), T(RNG.standard_normal((2, 3, 5, 4))))
    with pytest.raises(RuntimeError, match=r"\[2, 2, 5, 3\]"):
        OP(q, k, v[..., :3])
    with pytest.raises(RuntimeError, match=r"attn_mask of shape \[4, 5\]"):
        OP(q, k, v, attn_mask=T(np.zeros((4, 5))))
    with pytest.raises(RuntimeError, match="attn_mask dtype"):
        OP(q, k, v, attn_mask=T(np.zeros((3, 5), np.int64)))
    with pytest.raises(RuntimeError, match="floating point"):
        OP(q.long(), k.long(), v.long())
    with pytest.raises(RuntimeError, match="grad_out"):
        out, lse = OP(q, k, v)
        OP_BW(out[..., :2], q, k, v, out, lse, 0.0, False)
    sdpa = F.scaled_dot_product_attention
    with pytest.raises(RuntimeError, match="query.dtype: double key.dtype: float and value.dtype: double"):
        sdpa(q, k.float(), v, enable_gqa=True)
    with pytest.raises(RuntimeError, match="attn_mask.dtype: long int and  query.dtype: double"):
        sdpa(q, k, v, attn_mask=T(np.zeros((3, 5), np.int64)), enable_gqa=True)
    with pytest.raises(RuntimeError, match="must divide"):
        sdpa(q, T(RNG.standard_normal((2, 3, 5, 4))), T(RNG.standard_normal((2, 3, 5, 4))), enable_gqa=True)
    with pytest.raises(IndexError, match="out of range"):
        sdpa(q, k, v, attn_mask=T(np.zeros(5)), enable_gqa=True)
    with pytest.raises(IndexError, match="no dimensions"):
        sdpa(q, k, v, attn_mask=ember.tensor(0.0, dtype=ember.float64), enable_gqa=True)


def test_long_sequence_never_builds_the_scores():
    """L = S = 4096 (the float32 scores of one head: 64 MiB) in a fresh process: forward and
    backward raise the peak RSS by far less than that."""
    code = r"""
import resource, numpy as np, ember
rng = np.random.default_rng(0)
q, k, v = (ember.from_numpy(rng.standard_normal((1, 1, 4096, 16), dtype=np.float32)).requires_grad_()
           for _ in range(3))
g = ember.ones(1, 1, 4096, 16)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
out = ember.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
out.backward(g)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
assert bool(ember.isfinite(q.grad).all()) and bool(ember.isfinite(out).all())
print((after - before) / 1024)
"""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [os.path.dirname(os.path.dirname(ember.__file__)),
                                                                   os.environ.get("PYTHONPATH")])))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert float(r.stdout.split()[-1]) < 16, f"peak RSS grew by {r.stdout.strip()} MiB"


# ---------------------------------------------------------------------------
# against torch: values, gradients and node names of the same calls
def _pair(*shapes, dtype=np.float32):
    arrays = [RNG.standard_normal(s).astype(dtype) for s in shapes]
    return ([T(a, True) for a in arrays], [_torch.from_numpy(a.copy()).requires_grad_() for a in arrays])


@needs_torch
@pytest.mark.parametrize("desc,shapes,kw,mask", [
    ("nanoGPT causal", [(2, 4, 64, 16)] * 3, {"is_causal": True}, None),
    ("causal L < S", [(1, 2, 5, 8), (1, 2, 9, 8), (1, 2, 9, 8)], {"is_causal": True}, None),
    ("causal L > S", [(1, 2, 9, 8), (1, 2, 5, 8), (1, 2, 5, 8)], {"is_causal": True}, None),
    ("bool mask, a dead row", [(2, 2, 6, 8), (2, 2, 70, 8), (2, 2, 70, 8)], {}, "bool"),
    ("additive 4-d mask", [(2, 2, 6, 8), (2, 2, 70, 8), (2, 2, 70, 8)], {"scale": 0.2}, "add4"),
    ("gqa", [(2, 6, 7, 8), (2, 2, 7, 8), (2, 2, 7, 8)], {"enable_gqa": True, "is_causal": True}, None),
    ("3-d", [(4, 7, 8)] * 3, {}, None),
    ("decode: one query row, causal", [(1, 2, 1, 8), (1, 2, 5, 8), (1, 2, 5, 8)], {"is_causal": True}, None),
    ("2-d falls back", [(7, 8)] * 3, {"is_causal": True}, None),
    ("dropout falls back", [(2, 2, 6, 8)] * 3, {"dropout_p": 0.0001}, None),
])
def test_against_torch(desc, shapes, kw, mask):
    (eq, ek, ev), (tq, tk, tv) = _pair(*shapes)
    L, S = shapes[0][-2], shapes[1][-2]
    em = tm = None
    if mask == "bool":
        m = RNG.random((L, S)) > 0.3
        m[1] = False
        em, tm = T(m), _torch.from_numpy(m)
    elif mask == "add4":
        m = RNG.standard_normal((2, 1, L, S)).astype(np.float32)
        em, tm = T(m), _torch.from_numpy(m)
    ye = F.scaled_dot_product_attention(eq, ek, ev, attn_mask=em, **kw)
    yt = _torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, attn_mask=tm, **kw)
    assert node(ye) == type(yt.grad_fn).__name__
    if "dropout_p" in kw:
        return  # different random streams
    np.testing.assert_allclose(ye.detach().numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-5)
    g = RNG.standard_normal(ye.shape).astype(np.float32)
    ye.backward(T(g))
    yt.backward(_torch.from_numpy(g))
    for a, b in ((eq, tq), (ek, tk), (ev, tv)):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-4, atol=1e-5)


@needs_torch
def test_double_backward_matches_torch():
    for lib in (ember, _torch):
        q = lib.from_numpy(RNG.standard_normal((1, 2, 4, 3))).requires_grad_()
        y = lib.nn.functional.scaled_dot_product_attention(q, q * 2, q * 3)
        (g,) = lib.autograd.grad(y.sum(), q, create_graph=True)
        with pytest.raises(RuntimeError, match="not implemented"):
            g.sum().backward()


@needs_torch
def test_nan_rows_like_torch():
    """A query row of NaN has no maximum (maxima skip NaN): treated as fully masked, as torch's
    kernel does; a NaN among finite scores makes its row NaN."""
    q = RNG.standard_normal((1, 1, 3, 4)).astype(np.float32)
    k = RNG.standard_normal((1, 1, 5, 4)).astype(np.float32)
    q[0, 0, 1] = np.nan
    k[0, 0, 3, 0] = np.nan
    ke = T(k)
    ours = OP(T(q), ke, ke)
    theirs = _torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(*[_torch.from_numpy(a) for a in (q, k, k)])
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6, equal_nan=True)
    # row 1 sees nothing (0 * v: NaN only in v's NaN column); row 0 meets the NaN key
    assert not ours[0][0, 0, 1, 1:].numpy().any() and ours[1][0, 0, 1].item() == 0
    assert np.isnan(ours[0][0, 0, 0].numpy()).all()


@pytest.mark.parametrize("causal", [False, True])
def test_nanogpt_layout_out_and_grads(causal):
    """q, k, v as nanoGPT makes them (views of one [B, T, 3C] buffer, seen
    as [B, H, T, D]): the output comes out in [B, T, H, D] order, as torch's
    does, so transposing back is already contiguous. The gradients come out
    side by side in one storage (Note [attention gradients share a
    storage]); retain_grad keeps contiguous clones of them, as torch's
    does. Values and gradients match float64 NumPy."""
    B, Tn, H, D = 2, 70, 3, 8
    C = H * D
    x_np = RNG.standard_normal((B, Tn, 3 * C))
    g_np = RNG.standard_normal((B, H, Tn, D))
    x = T(x_np, grad=True)
    q, k, v = (t.view(B, Tn, H, D).transpose(1, 2) for t in x.split(C, 2))
    for t in (q, k, v):
        t.retain_grad()
    y = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    assert node(y) == FLASH
    assert y.stride() == (Tn * C, D, C, 1)
    back = y.transpose(1, 2)
    assert back.is_contiguous() and back.contiguous().data_ptr() == back.data_ptr()
    qn, kn, vn = (x_np[..., i * C:(i + 1) * C].reshape(B, Tn, H, D).transpose(0, 2, 1, 3) for i in range(3))
    out_ref, _ = np_attention(qn, kn, vn, is_causal=causal)
    np.testing.assert_allclose(y.detach().numpy(), out_ref, rtol=1e-10, atol=1e-10)
    y.backward(T(g_np))
    refs = np_attention(qn, kn, vn, is_causal=causal, grad_out=g_np)
    for t, ref in zip((q, k, v), refs):
        assert t.grad.stride() == (Tn * C, Tn * D, D, 1)
        np.testing.assert_allclose(t.grad.numpy(), ref, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(x.grad.numpy(), np.concatenate(
        [r.transpose(0, 2, 1, 3).reshape(B, Tn, C) for r in refs], 2), rtol=1e-10, atol=1e-10)


def test_contiguous_inputs_give_contiguous_out_and_grads():
    qn, kn, vn = qkv(1, 2, 2, 9, 9, 4)
    q, k, v = T(qn, True), T(kn, True), T(vn, True)
    y = F.scaled_dot_product_attention(q, k, v)
    assert y.is_contiguous()
    y.sum().backward()
    assert q.grad.is_contiguous() and k.grad.is_contiguous() and v.grad.is_contiguous()
    refs = np_attention(qn, kn, vn, grad_out=np.ones((1, 2, 9, 4)))
    for t, ref in zip((q, k, v), refs):
        np.testing.assert_allclose(t.grad.numpy(), ref, rtol=1e-10, atol=1e-10)
