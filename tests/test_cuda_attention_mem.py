"""Flash attention's missing pieces on the GPU (Note [CUDA
attention], EmCudaAttentionEx in csrc/cuda_backend.h): dropout inside the
fused kernel, torch's memory-efficient op _scaled_dot_product_efficient_attention
(float32, an attn_bias) and gradients in the inputs' layouts. On a real GPU
when present, else on Note [fake CUDA], whose extended entries are counted so
each test also checks that the native path ran and not Note [CUDA fallback].

References are float64 NumPy computations from the same (rounded) inputs;
dropout's keep mask is regenerated from the (philox_seed, philox_offset) an op
returns: it is the Bernoulli(1 - p) fill the device generator gives for a
(B, H, L, S) float32 tensor at that seed and offset (Note [GPU random
numbers]), which the test draws through bernoulli_."""

import math

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember import _C, _cuda_fake

FLASH = "_scaled_dot_product_flash_attention"
FLASH_BW = "_scaled_dot_product_flash_attention_backward"
EFF = "_scaled_dot_product_efficient_attention"
EFF_BW = "_scaled_dot_product_efficient_attention_backward"
OPS = (FLASH, FLASH_BW, EFF, EFF_BW)


class native:
    """Asserts that no attention op took the CPU fallback inside the block
    and (on the fake) that the named entries ran."""

    def __init__(self, mode, *names):
        self.mode, self.names = mode, names

    def __enter__(self):
        _C._cuda_fallback_counts(True)
        if self.mode == "fake":
            self.before = _cuda_fake.kernel_calls()

    def __exit__(self, *exc):
        if exc[0] is not None:
            return
        fell = _C._cuda_fallback_counts(True)
        assert not any(op in fell for op in OPS), fell
        if self.mode == "fake":
            after = _cuda_fake.kernel_calls()
            for n in self.names:
                assert after[n] > self.before[n], f"{n} did not run"


def _np(t):
    t = t.detach().cpu()
    if t.dtype in (ember.float16, ember.bfloat16, ember.bool):
        t = t.float()
    return t.numpy().astype(np.float64)


def _rand(seed, *shape):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _inputs(shape, dtype, seed=0):
    B, H, Hk, L, S, D = shape
    q = ember.tensor(_rand(seed, B, H, L, D)).to(dtype)
    k = ember.tensor(_rand(seed + 1, B, Hk, S, D)).to(dtype)
    v = ember.tensor(_rand(seed + 2, B, Hk, S, D)).to(dtype)
    return q, k, v


def keep_factors(seed, offset, shape, p):
    """The kernels' dropout factors: keep / (1 - p), keep the Bernoulli(1 - p)
    fill of a (B, H, L, S) float32 tensor at (seed, offset)."""
    state = _C._cuda_generator(0)
    _C._cuda_generator(0, int(seed), int(offset))
    keep = ember.empty(*shape, device="cuda").bernoulli_(1.0 - p)
    _C._cuda_generator(0, *state)
    return _np(keep) / (1.0 - p)


def reference(q, k, v, causal=False, scale=None, mask=None, z=None, dout=None):
    """float64 (out, lse[, dq, dk, dv]) of q (B, H, L, D), k, v (B, Hk, S, D).
    mask: bool (True takes part) or additive, broadcast to (B, H, L, S); z:
    dropout factors (B, H, L, S). A row nothing takes part in gives out 0,
    lse -inf and no gradient, as the kernels."""
    B, H, L, D = q.shape
    Hk, S = k.shape[1], k.shape[2]
    g = H // Hk
    kk, vv = np.repeat(k, g, axis=1), np.repeat(v, g, axis=1)
    scale = 1 / math.sqrt(D) if scale is None else scale
    s = np.einsum("bhld,bhsd->bhls", q, kk) * scale
    if causal:
        s = np.where(np.arange(S)[None, :] <= np.arange(L)[:, None], s, -np.inf)
    if mask is not None:
        mask = np.broadcast_to(mask, s.shape)
        s = np.where(mask, s, -np.inf) if mask.dtype == bool else s + mask
    m = s.max(-1, keepdims=True)
    dead = m == -np.inf
    e = np.where(dead, 0.0, np.exp(s - np.where(dead, 0.0, m)))
    tot = e.sum(-1, keepdims=True)
    lse = np.where(dead, -np.inf, np.log(np.where(dead, 1.0, tot)) + np.where(dead, 0.0, m))[..., 0]
    p = e / np.where(dead, 1.0, tot)
    z = np.ones_like(p) if z is None else z
    out = (p * z) @ vv
    if dout is None:
        return out, lse
    dv = np.einsum("bhls,bhld->bhsd", p * z, dout)
    dp = (dout @ vv.transpose(0, 1, 3, 2)) * z
    ds = p * (dp - (dout * out).sum(-1)[..., None])
    dq = scale * ds @ kk
    dk = scale * np.einsum("bhls,bhld->bhsd", ds, q)
    return out, lse, dq, dk.reshape(B, Hk, g, S, D).sum(2), dv.reshape(B, Hk, g, S, D).sum(2)


TOL = {ember.float32: 3e-4, ember.float16: 5e-3, ember.bfloat16: 3e-2}
GTOL = {ember.float32: 5e-4, ember.float16: 1.5e-2, ember.bfloat16: 8e-2}

# (B, H, Hk, L, S, D): tensor-core sizes (64 / 128) with ragged tiles, a plain-kernel head dim, GQA, L = 1
SHAPES = [(2, 2, 2, 17, 23, 64), (1, 2, 2, 70, 33, 128), (1, 4, 2, 9, 70, 80), (1, 2, 1, 1, 5, 32)]


# ------------------------------------------------------------------ dropout


@pytest.mark.parametrize("dtype", [ember.bfloat16, ember.float16, ember.float32])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", SHAPES)
def test_flash_dropout_forward_applies_the_regenerated_mask(cuda, dtype, causal, shape):
    q, k, v = _inputs(shape, dtype)
    B, H, Hk, L, S, D = shape
    p = 0.3
    with native(cuda, "attention_forward_ex"):
        res = _C._scaled_dot_product_flash_attention(q.cuda(), k.cuda(), v.cuda(), p, causal)
    z = keep_factors(res[6], res[7], (B, H, L, S), p)
    if z.size >= 100:  # 10 draws all kept has probability 0.7^10: only big masks must mix
        assert 0 < (z > 0).mean() < 1
    ref, lse = reference(_np(q), _np(k), _np(v), causal, z=z)
    tol = TOL[dtype] * 2
    np.testing.assert_allclose(_np(res[0]), ref, rtol=tol, atol=tol)
    # logsumexp is that of the undropped probabilities
    np.testing.assert_allclose(_np(res[1]), lse, rtol=1e-4, atol=1e-4)
    # the output rows are laid out (B, L, H, D), as without dropout
    assert res[0].transpose(1, 2).is_contiguous()


@pytest.mark.parametrize("dtype", [ember.bfloat16, ember.float16, ember.float32])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", [(2, 2, 2, 17, 23, 64), (1, 2, 2, 33, 70, 128), (1, 4, 2, 9, 12, 80)])
def test_flash_dropout_gradients_match_reference(cuda, dtype, causal, shape):
    q, k, v = _inputs(shape, dtype, seed=7)
    B, H, Hk, L, S, D = shape
    dout = ember.tensor(_rand(9, B, H, L, D)).to(dtype)
    qg, kg, vg = (t.cuda().requires_grad_() for t in (q, k, v))
    p = 0.25
    with native(cuda, "attention_forward_ex", "attention_backward_ex"):
        res = _C._scaled_dot_product_flash_attention(qg, kg, vg, p, causal)
        assert type(res[0].grad_fn).__name__ == "ScaledDotProductFlashAttentionBackward0"
        res[0].backward(dout.cuda())
    z = keep_factors(res[6], res[7], (B, H, L, S), p)
    ref = reference(_np(q), _np(k), _np(v), causal, z=z, dout=_np(dout))
    tol = GTOL[dtype]
    for got, want in zip((qg.grad, kg.grad, vg.grad), ref[2:]):
        assert got.device.type == "cuda" and got.dtype == dtype
        np.testing.assert_allclose(_np(got), want, rtol=tol, atol=tol)


def test_dropout_keeps_the_expected_fraction(cuda):
    # S = 1: each output row is v's row times its one factor, 0 or 1 / (1 - p)
    p = 0.4
    q = ember.zeros(2, 4, 1024, 8).half().cuda()
    kv = ember.ones(2, 4, 1, 8).half().cuda()
    with native(cuda, "attention_forward_ex"):
        out = _C._scaled_dot_product_flash_attention(q, kv, kv, p, False)[0]
    o = _np(out)[..., 0]
    kept = o > 0
    np.testing.assert_allclose(o[kept], 1 / (1 - p), rtol=1e-3)
    assert np.all(o[~kept] == 0)
    n = kept.size
    assert abs(kept.mean() - (1 - p)) < 4 * math.sqrt(p * (1 - p) / n)
    # uniform attention over many keys: the mean factor is 1
    q = ember.zeros(1, 2, 64, 16).cuda()
    kv = ember.ones(1, 2, 512, 16).cuda()
    out = _C._scaled_dot_product_flash_attention(q, kv, kv, p, False)[0]
    assert abs(_np(out).mean() - 1) < 0.02


def test_dropout_is_reproducible_under_manual_seed(cuda):
    q, k, v = (t.cuda() for t in _inputs((1, 2, 2, 16, 16, 64), ember.bfloat16))
    ember.manual_seed(1234)
    a = _C._scaled_dot_product_flash_attention(q, k, v, 0.5, True)
    b = _C._scaled_dot_product_flash_attention(q, k, v, 0.5, True)
    ember.manual_seed(1234)
    c = _C._scaled_dot_product_flash_attention(q, k, v, 0.5, True)
    assert np.array_equal(_np(a[0]), _np(c[0])) and int(a[6]) == int(c[6]) and int(a[7]) == int(c[7])
    assert not np.array_equal(_np(a[0]), _np(b[0]))
    # one draw per call: the generator's offset moves by one
    assert int(b[7]) == int(a[7]) + 1 and int(b[6]) == int(a[6])
    # no dropout draws nothing and reports zeros
    before = _C._cuda_generator(0)
    r = _C._scaled_dot_product_flash_attention(q, k, v, 0.0, True)
    assert _C._cuda_generator(0) == before and int(r[6]) == 0 and int(r[7]) == 0


def test_sdpa_with_dropout_takes_the_fused_kernel(cuda):
    q, k, v = (t.cuda().requires_grad_() for t in _inputs((1, 2, 2, 12, 12, 64), ember.float16))
    with native(cuda, "attention_forward_ex", "attention_backward_ex"):
        out = F.scaled_dot_product_attention(q, k, v, dropout_p=0.1, is_causal=True)
        assert type(out.grad_fn).__name__ == "ScaledDotProductFlashAttentionBackward0"
        out.sum().backward()
    assert q.grad is not None and bool(ember.isfinite(q.grad.float()).all())
    # dropout_p = 1 drops everything
    out = F.scaled_dot_product_attention(q.detach(), k.detach(), v.detach(), dropout_p=1.0)
    assert not bool(out.cpu().ne(0).any())


# ------------------------------------------------------------ efficient op


def _mask(kind, B, H, L, S, dtype):
    rng = np.random.default_rng(3)
    if kind == "none":
        return None, None
    if kind == "bool_b1ls":  # (B, 1, L, S): broadcast over heads; every row keeps a key
        m = rng.random((B, 1, L, S)) < 0.7
        m[..., 0] = True
        return ember.tensor(m), m
    if kind == "add_ls":  # additive (L, S) in the query's dtype, with -inf entries
        m = rng.standard_normal((L, S)).astype(np.float32)
        m[rng.random((L, S)) < 0.2] = -np.inf
        m[:, 0] = 0.5
        t = ember.tensor(m).to(dtype)
        return t, _np(t)
    if kind == "add_f32_bhls":  # float32 (B, H, L, S) with half queries: rounded to the query's dtype
        m = rng.standard_normal((B, H, L, S)).astype(np.float32)
        t = ember.tensor(m)
        return t, _np(t.to(dtype))
    raise AssertionError(kind)


MASKS = ["none", "bool_b1ls", "add_ls", "add_f32_bhls"]


@pytest.mark.parametrize("dtype", [ember.float32, ember.bfloat16, ember.float16])
@pytest.mark.parametrize("mask", MASKS)
@pytest.mark.parametrize("shape", [(2, 2, 2, 17, 23, 64), (1, 2, 2, 70, 33, 128), (1, 3, 3, 9, 70, 40)])
def test_efficient_forward_matches_reference(cuda, dtype, mask, shape):
    q, k, v = _inputs(shape, dtype, seed=2)
    B, H, Hk, L, S, D = shape
    mt, mn = _mask(mask, B, H, L, S, dtype)
    with native(cuda, "attention_forward_ex"):
        res = _C._scaled_dot_product_efficient_attention(q.cuda(), k.cuda(), v.cuda(),
                                                         None if mt is None else mt.cuda(), True)
    assert len(res) == 4 and res[0].dtype == dtype and res[1].dtype == ember.float32
    assert tuple(res[1].shape) == (B, H, L) and int(res[2]) == 0 and int(res[3]) == 0
    ref, lse = reference(_np(q), _np(k), _np(v), mask=mn)
    tol = TOL[dtype]
    np.testing.assert_allclose(_np(res[0]), ref, rtol=tol, atol=tol)
    np.testing.assert_allclose(_np(res[1]), lse, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", [ember.float32, ember.bfloat16, ember.float16])
@pytest.mark.parametrize("mask", ["none", "bool_b1ls", "add_ls"])
@pytest.mark.parametrize("causal", [False, True])
def test_efficient_gradients_match_reference(cuda, dtype, mask, causal):
    shape = (2, 2, 2, 19, 21, 64)
    q, k, v = _inputs(shape, dtype, seed=4)
    B, H, Hk, L, S, D = shape
    mt, mn = _mask(mask, B, H, L, S, dtype)
    dout = ember.tensor(_rand(8, B, H, L, D)).to(dtype)
    qg, kg, vg = (t.cuda().requires_grad_() for t in (q, k, v))
    with native(cuda, "attention_forward_ex", "attention_backward_ex"):
        out = _C._scaled_dot_product_efficient_attention(qg, kg, vg, None if mt is None else mt.cuda(), True,
                                                         0.0, causal, scale=0.2)[0]
        assert type(out.grad_fn).__name__ == "ScaledDotProductEfficientAttentionBackward0"
        out.backward(dout.cuda())
    ref = reference(_np(q), _np(k), _np(v), causal, scale=0.2, mask=mn, dout=_np(dout))
    np.testing.assert_allclose(_np(out), ref[0], rtol=TOL[dtype], atol=TOL[dtype])
    for got, want in zip((qg.grad, kg.grad, vg.grad), ref[2:]):
        assert got.device.type == "cuda" and got.dtype == dtype
        np.testing.assert_allclose(_np(got), want, rtol=GTOL[dtype], atol=GTOL[dtype])


@pytest.mark.parametrize("dtype", [ember.float32, ember.bfloat16])
def test_efficient_dropout_with_mask_and_gradients(cuda, dtype):
    shape = (1, 2, 2, 21, 19, 64)
    q, k, v = _inputs(shape, dtype, seed=6)
    B, H, Hk, L, S, D = shape
    mt, mn = _mask("bool_b1ls", B, H, L, S, dtype)
    dout = ember.tensor(_rand(1, B, H, L, D)).to(dtype)
    qg, kg, vg = (t.cuda().requires_grad_() for t in (q, k, v))
    p = 0.35
    with native(cuda, "attention_forward_ex", "attention_backward_ex"):
        res = _C._scaled_dot_product_efficient_attention(qg, kg, vg, mt.cuda(), True, p)
        res[0].backward(dout.cuda())
    z = keep_factors(res[2], res[3], (B, H, L, S), p)
    ref = reference(_np(q), _np(k), _np(v), mask=mn, z=z, dout=_np(dout))
    np.testing.assert_allclose(_np(res[0]), ref[0], rtol=2 * TOL[dtype], atol=2 * TOL[dtype])
    for got, want in zip((qg.grad, kg.grad, vg.grad), ref[2:]):
        np.testing.assert_allclose(_np(got), want, rtol=GTOL[dtype], atol=GTOL[dtype])


def test_fully_masked_rows_give_zeros_not_nan(cuda):
    q, k, v = (t.cuda().requires_grad_() for t in _inputs((1, 2, 2, 6, 5, 32), ember.float32))
    m = np.ones((6, 5), bool)
    m[2] = False  # row 2 sees no key
    with native(cuda, "attention_forward_ex", "attention_backward_ex"):
        out, lse = _C._scaled_dot_product_efficient_attention(q, k, v, ember.tensor(m).cuda(), True)[:2]
        out.sum().backward()
    o, l = _np(out), _np(lse)
    assert np.all(o[:, :, 2] == 0) and np.all(l[:, :, 2] == -np.inf) and np.isfinite(o).all()
    for t in (q, k, v):
        assert np.isfinite(_np(t.grad)).all()
    assert np.all(_np(q.grad)[:, :, 2] == 0)
    ref = reference(_np(q), _np(k), _np(v), mask=m, dout=np.ones(tuple(q.shape)))
    for got, want in zip((q.grad, k.grad, v.grad), ref[2:]):
        np.testing.assert_allclose(_np(got), want, rtol=5e-4, atol=5e-4)


@pytest.mark.parametrize("case", ["float32", "float32_gqa", "half_mask", "bf16_bool_mask", "float32_dropout"])
def test_sdpa_takes_the_efficient_op(cuda, case):
    dtype = ember.float32 if case.startswith("float32") else (ember.float16 if case == "half_mask" else ember.bfloat16)
    shape = (1, 4, 2 if case == "float32_gqa" else 4, 10, 12, 32)
    q, k, v = _inputs(shape, dtype, seed=12)
    B, H, Hk, L, S, D = shape
    kw = {"enable_gqa": True} if case == "float32_gqa" else {}
    mn = None
    if case == "half_mask":
        mt, mn = _mask("add_ls", B, H, L, S, dtype)
        kw["attn_mask"] = mt.float().cuda()  # torch rounds a float32 mask to the queries' dtype
        mn = _np(mt)
    elif case == "bf16_bool_mask":
        mt, mn = _mask("bool_b1ls", B, H, L, S, dtype)
        kw["attn_mask"] = mt.cuda()
    qg, kg, vg = (t.cuda().requires_grad_() for t in (q, k, v))
    with native(cuda, "attention_forward_ex", "attention_backward_ex"):
        out = F.scaled_dot_product_attention(qg, kg, vg, dropout_p=0.2 if case == "float32_dropout" else 0.0, **kw)
        assert type(out.grad_fn).__name__ == "ScaledDotProductEfficientAttentionBackward0"
        out.sum().backward()
    if case != "float32_dropout":
        ref = reference(_np(q), _np(k), _np(v), mask=mn, dout=np.ones((B, H, L, D)))
        np.testing.assert_allclose(_np(out), ref[0], rtol=TOL[dtype], atol=TOL[dtype])
        for got, want in zip((qg.grad, kg.grad, vg.grad), ref[2:]):
            np.testing.assert_allclose(_np(got), want, rtol=GTOL[dtype], atol=GTOL[dtype])


@pytest.mark.parametrize("case", ["odd_half_head_dim", "float64", "mask_requires_grad", "three_d", "gqa_off"])
def test_sdpa_stays_composed_outside_the_conditions(cuda, case):
    q, k, v = _inputs((1, 2, 2, 6, 6, 16), ember.float32)
    kw = {}
    if case == "odd_half_head_dim":
        q, k, v = (t[..., :12].half() for t in (q, k, v))
    elif case == "float64":
        q, k, v = (t.double() for t in (q, k, v))
    elif case == "mask_requires_grad":
        kw["attn_mask"] = ember.zeros(6, 6).requires_grad_()
    elif case == "three_d":
        q, k, v = (t[0] for t in (q, k, v))
    elif case == "gqa_off":
        k, v = k[:, :1], v[:, :1]
    before = _cuda_fake.kernel_calls() if cuda == "fake" else None
    gkw = {n: a.detach().cuda().requires_grad_(a.requires_grad) for n, a in kw.items()}
    out = F.scaled_dot_product_attention(q.cuda(), k.cuda(), v.cuda(), **gkw)
    if cuda == "fake":
        after = _cuda_fake.kernel_calls()
        assert after["attention_forward_ex"] == before["attention_forward_ex"]
        assert after["attention_forward"] == before["attention_forward"]
    want = F.scaled_dot_product_attention(q, k, v, **kw)
    np.testing.assert_allclose(_np(out), _np(want), rtol=5e-3, atol=5e-3)


def test_efficient_op_on_cpu_tensors_runs_the_cpu_kernel():
    # what Note [CUDA fallback] runs on host twins when a backend lacks the entries
    q, k, v = _inputs((1, 2, 2, 7, 9, 16), ember.float32)
    mt, mn = _mask("add_ls", 1, 2, 7, 9, ember.float32)
    res = _C._scaled_dot_product_efficient_attention(q, k, v, mt, True, 0.0, False)
    ref, lse = reference(_np(q), _np(k), _np(v), mask=mn)
    np.testing.assert_allclose(_np(res[0]), ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_np(res[1]), lse, rtol=1e-5, atol=1e-5)
    g = ember.ones_like(q)
    dq, dk, dv, db = _C._scaled_dot_product_efficient_attention_backward(
        g, q, k, v, mt, res[0], res[1], res[2], res[3], 0.0, [True, True, True, False], False)
    assert db is None
    ref = reference(_np(q), _np(k), _np(v), mask=mn, dout=_np(g))
    for got, want in zip((dq, dk, dv), ref[2:]):
        np.testing.assert_allclose(_np(got), want, rtol=1e-4, atol=1e-4)


def test_matches_torch(torch, cuda):
    # torch's own attention (CPU, float64) with a boolean mask and an additive one
    q, k, v = _inputs((2, 3, 3, 13, 17, 32), ember.float32, seed=21)
    tq, tk, tv = (torch.from_numpy(_np(t)) for t in (q, k, v))
    mb, _ = _mask("bool_b1ls", 2, 3, 13, 17, ember.float32)
    ma, _ = _mask("add_ls", 2, 3, 13, 17, ember.float32)
    for m in (mb, ma):
        out = F.scaled_dot_product_attention(q.cuda(), k.cuda(), v.cuda(), attn_mask=m.cuda())
        tm = torch.from_numpy(m.numpy()) if m.dtype == ember.bool else torch.from_numpy(_np(m))
        want = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, attn_mask=tm)
        np.testing.assert_allclose(_np(out), want.numpy(), rtol=3e-4, atol=3e-4)


# ------------------------------------------------- gradients' layouts (part 3)


def test_gradients_come_in_the_inputs_layout(cuda):
    # nanoGPT: q, k, v are (B, T, H, D) views of one qkv projection, transposed to (B, H, T, D)
    B, T, H, D = 2, 19, 3, 64
    x = ember.tensor(_rand(3, B, T, 3 * H * D)).half()
    xg = x.cuda()
    q, k, v = (xg[..., i * H * D:(i + 1) * H * D].view(B, T, H, D).transpose(1, 2) for i in range(3))
    res = _C._scaled_dot_product_flash_attention(q, k, v, 0.0, True)
    g = ember.tensor(_rand(4, B, T, H, D)).half().cuda().transpose(1, 2)
    with native(cuda, "attention_backward_ex"):
        dq, dk, dv = _C._scaled_dot_product_flash_attention_backward(g, q, k, v, res[0], res[1], None, None, T, T,
                                                                     0.0, True, res[6], res[7])
    for t in (dq, dk, dv):  # laid out (B, T, H, D): merging the heads back is a view
        assert t.stride() == (T * H * D, D, H * D, 1)
        assert t.transpose(1, 2).is_contiguous()
    xs = _np(x)
    qn, kn, vn = (xs[..., i * H * D:(i + 1) * H * D].reshape(B, T, H, D).transpose(0, 2, 1, 3) for i in range(3))
    ref = reference(qn, kn, vn, True, dout=_np(g))
    for got, want in zip((dq, dk, dv), ref[2:]):
        np.testing.assert_allclose(_np(got), want, rtol=1.5e-2, atol=1.5e-2)
    # contiguous inputs get contiguous gradients
    qc, kc, vc = (t.contiguous() for t in (q, k, v))
    res = _C._scaled_dot_product_flash_attention(qc, kc, vc, 0.0, True)
    grads = _C._scaled_dot_product_flash_attention_backward(g, qc, kc, vc, res[0], res[1], None, None, T, T, 0.0,
                                                            True, None, None)
    assert all(t.is_contiguous() for t in grads)
    for got, want in zip(grads, ref[2:]):
        np.testing.assert_allclose(_np(got), want, rtol=1.5e-2, atol=1.5e-2)


def test_nanogpt_block_gradients_match_cpu(cuda):
    B, T, H, D = 1, 24, 2, 64
    x = ember.tensor(_rand(5, B, T, 3 * H * D)).float()
    outs = []
    for dev in ("cuda", "cpu"):
        xx = (x.cuda() if dev == "cuda" else x.clone()).requires_grad_()
        q, k, v = (xx[..., i * H * D:(i + 1) * H * D].view(B, T, H, D).transpose(1, 2) for i in range(3))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, H * D)
        y.pow(2).sum().backward()
        outs.append(_np(xx.grad))
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-3, atol=1e-3)


# ------------------------------------------------------------------ errors


def test_errors(cuda):
    q, k, v = (t.cuda() for t in _inputs((1, 2, 2, 4, 5, 16), ember.float32))
    with pytest.raises(RuntimeError, match="between 0 and 1.*1.5"):
        _C._scaled_dot_product_flash_attention(q, k, v, 1.5)
    with pytest.raises(RuntimeError, match="between 0 and 1"):
        _C._scaled_dot_product_efficient_attention(q, k, v, None, False, -0.1)
    with pytest.raises(RuntimeError, match="CPU kernel"):
        _C._scaled_dot_product_flash_attention(q.cpu(), k.cpu(), v.cpu(), 0.5)
    with pytest.raises(RuntimeError, match=r"attn_mask of shape \[3, 5\] does not broadcast"):
        _C._scaled_dot_product_efficient_attention(q, k, v, ember.zeros(3, 5).cuda(), False)
    with pytest.raises(RuntimeError, match="Expected attn_mask dtype to be bool or float"):
        _C._scaled_dot_product_efficient_attention(q, k, v, ember.zeros(4, 5, dtype=ember.int32).cuda(), False)
    with pytest.raises(RuntimeError, match="same dtype"):
        _C._scaled_dot_product_efficient_attention(q, k.half(), v, None, False)
    with pytest.raises(RuntimeError, match=r"at most 256.*264"):
        z = ember.zeros(1, 1, 2, 264).cuda()
        _C._scaled_dot_product_efficient_attention(z, z, z, None, False)
    res = _C._scaled_dot_product_flash_attention(q, k, v, 0.5)
    with pytest.raises(RuntimeError, match="needs the forward's philox_seed"):
        _C._scaled_dot_product_flash_attention_backward(res[0], q, k, v, res[0], res[1], None, None, 4, 5, 0.5,
                                                        False, None, None)
    with pytest.raises(RuntimeError, match="philox_offset as a one-element int64 CPU tensor"):
        _C._scaled_dot_product_flash_attention_backward(res[0], q, k, v, res[0], res[1], None, None, 4, 5, 0.5,
                                                        False, res[6], res[1])
    er = _C._scaled_dot_product_efficient_attention(q, k, v, None, True)
    with pytest.raises(RuntimeError, match="no gradient for attn_bias"):
        _C._scaled_dot_product_efficient_attention_backward(er[0], q, k, v, None, er[0], er[1], er[2], er[3], 0.0,
                                                            [True, True, True, True], False)
    with pytest.raises(RuntimeError, match="logsumexp of shape"):
        _C._scaled_dot_product_efficient_attention_backward(er[0], q, k, v, None, er[0], er[1][..., :2], er[2],
                                                            er[3], 0.0, [True, True, True, False], False)
    # a bias that needs a gradient: the op's backward says the kernel gives none
    bias = ember.zeros(4, 5).cuda().requires_grad_()
    out = _C._scaled_dot_product_efficient_attention(q.requires_grad_(), k, v, bias, True)[0]
    with pytest.raises(RuntimeError, match="no gradient for attn_bias"):
        out.sum().backward()


def test_autocast_lowers_the_efficient_op(cuda):
    # torch autocasts scaled_dot_product_attention to the lower dtype: float32 inputs under bf16 autocast
    # take the efficient op (float32 decides before the cast), which autocast runs in bfloat16
    q, k, v = (t.cuda() for t in _inputs((1, 2, 2, 8, 9, 32), ember.float32, seed=30))
    m = ember.tensor(_rand(31, 8, 9)).cuda()
    with native(cuda, "attention_forward_ex"):
        with ember.autocast("cuda", dtype=ember.bfloat16):
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=m)
    assert out.dtype == ember.bfloat16
    ref, _ = reference(*(_np(t.bfloat16()) for t in (q, k, v)), mask=_np(m.bfloat16()))
    np.testing.assert_allclose(_np(out), ref, rtol=3e-2, atol=3e-2)
