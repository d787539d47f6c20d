"""The GPU flash attention (torch's _scaled_dot_product_flash_attention and
its backward; csrc/ops/attention.c, csrc/cuda/attention.cu): on a real GPU
when present, else on Note [fake CUDA], whose attention entries are counted so
each test also checks that the native path ran and not Note [CUDA fallback].
Outputs, logsumexp and gradients are compared with a float64 NumPy reference
of softmax(q k^T * scale + causal mask) v computed from the same (rounded)
inputs; F.scaled_dot_product_attention's choice of path follows torch's flash
conditions."""

import math

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember import _C, _cuda_fake

FLASH = "_scaled_dot_product_flash_attention"
FLASH_BW = "_scaled_dot_product_flash_attention_backward"


class native:
    """Asserts that the named attention entries ran inside the block (counted
    on the fake) and that neither attention op took the CPU fallback."""

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
        assert FLASH not in fell and FLASH_BW not in fell, fell
        if self.mode == "fake":  # the extended entries (EmCudaAttentionEx) count for the plain ones
            after, before = _cuda_fake.kernel_calls(), self.before
            for n in self.names:
                assert after[n] + after.get(n + "_ex", 0) > before[n] + before.get(n + "_ex", 0), f"{n} did not run"


def _calls(mode):
    c = _cuda_fake.kernel_calls() if mode == "fake" else {}
    return c.get("attention_forward", 0), c.get("attention_backward", 0)


def _np(t):
    t = t.detach().cpu()
    if t.dtype in (ember.float16, ember.bfloat16):
        t = t.float()
    return t.numpy().astype(np.float64)


def _rand(seed, *shape):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def reference(q, k, v, causal, scale=None, dout=None):
    """float64 (out, lse, dq, dk, dv) of q (B, H, L, D), k, v (B, Hk, S, D);
    causal: top-left (query i sees keys j <= i)."""
    B, H, L, D = q.shape
    Hk, S = k.shape[1], k.shape[2]
    g = H // Hk
    kk, vv = np.repeat(k, g, axis=1), np.repeat(v, g, axis=1)
    scale = 1 / math.sqrt(D) if scale is None else scale
    s = np.einsum("bhld,bhsd->bhls", q, kk) * scale
    if causal:
        s = np.where(np.arange(S)[None, :] <= np.arange(L)[:, None], s, -np.inf)
    m = s.max(-1, keepdims=True)
    e = np.exp(s - m)
    lse = (np.log(e.sum(-1, keepdims=True)) + m)[..., 0]
    p = e / e.sum(-1, keepdims=True)
    out = p @ vv
    if dout is None:
        return out, lse
    dv = np.einsum("bhls,bhld->bhsd", p, dout)
    dp = dout @ vv.transpose(0, 1, 3, 2)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True))
    dq = scale * ds @ kk
    dk = scale * np.einsum("bhls,bhld->bhsd", ds, q)
    dk = dk.reshape(B, Hk, g, S, D).sum(2)
    dv = dv.reshape(B, Hk, g, S, D).sum(2)
    return out, lse, dq, dk, dv


# forward tolerance per dtype: the tensor-core kernel rounds p to the input dtype before p v
TOL = {ember.float32: 2e-4, ember.float16: 4e-3, ember.bfloat16: 3e-2}
DTYPES = [ember.float32, ember.bfloat16, ember.float16]

# (B, H, Hk, L, S, D): square, L = 1, L != S both ways (torch's top-left causal),
# lengths not a multiple of the 64-row tiles, head dims 64 / 80 / 128, GQA
SHAPES = [(2, 3, 3, 17, 17, 64), (1, 2, 2, 1, 5, 80), (1, 2, 2, 70, 33, 128), (1, 2, 2, 9, 70, 64),
          (1, 4, 2, 65, 65, 32), (1, 1, 1, 130, 130, 16)]


def _inputs(shape, dtype, seed=0):
    B, H, Hk, L, S, D = shape
    q = ember.tensor(_rand(seed, B, H, L, D)).to(dtype)
    k = ember.tensor(_rand(seed + 1, B, Hk, S, D)).to(dtype)
    v = ember.tensor(_rand(seed + 2, B, Hk, S, D)).to(dtype)
    return q, k, v


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", SHAPES)
def test_forward_matches_reference(cuda, dtype, causal, shape):
    q, k, v = _inputs(shape, dtype)
    gqa = shape[1] != shape[2]
    qg, kg, vg = q.cuda(), k.cuda(), v.cuda()
    with native(cuda, "attention_forward"):  # float32 sdpa stays composed; the op runs the plain kernel
        out = F.scaled_dot_product_attention(qg, kg, vg, is_causal=causal, enable_gqa=gqa)
        res = _C._scaled_dot_product_flash_attention(qg, kg, vg, 0.0, causal)
    ref, lse = reference(_np(q), _np(k), _np(v), causal)
    assert out.device.type == "cuda" and out.dtype == dtype and tuple(out.shape) == tuple(q.shape)
    tol = TOL[dtype]
    np.testing.assert_allclose(_np(out), ref, rtol=tol, atol=tol)
    np.testing.assert_allclose(_np(res[0]), ref, rtol=tol, atol=tol)
    assert res[1].dtype == ember.float32 and tuple(res[1].shape) == tuple(shape[:2]) + (shape[3],)
    np.testing.assert_allclose(_np(res[1]), lse, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", [(2, 2, 2, 17, 17, 64), (1, 2, 2, 70, 33, 128), (1, 2, 2, 9, 70, 80),
                                   (1, 4, 2, 65, 65, 32), (1, 1, 1, 1, 3, 16)])
def test_gradients_match_reference(cuda, dtype, causal, shape):
    q, k, v = _inputs(shape, dtype, seed=5)
    B, H, Hk, L, S, D = shape
    dout = ember.tensor(_rand(9, B, H, L, D)).to(dtype)
    qg, kg, vg = (t.cuda().requires_grad_() for t in (q, k, v))
    with native(cuda, "attention_forward", "attention_backward"):
        if dtype == ember.float32:  # F.sdpa keeps float32 composed: the op itself
            out = _C._scaled_dot_product_flash_attention(qg, kg, vg, 0.0, causal)[0]
        else:
            out = F.scaled_dot_product_attention(qg, kg, vg, is_causal=causal, enable_gqa=H != Hk)
        assert type(out.grad_fn).__name__ == "ScaledDotProductFlashAttentionBackward0"
        out.backward(dout.cuda())
    ref = reference(_np(q), _np(k), _np(v), causal, dout=_np(dout))
    tol = {ember.float32: 5e-4, ember.float16: 1e-2, ember.bfloat16: 6e-2}[dtype]
    for got, want in zip((qg.grad, kg.grad, vg.grad), ref[2:]):
        assert got.device.type == "cuda" and got.dtype == dtype
        np.testing.assert_allclose(_np(got), want, rtol=tol, atol=tol)


def test_grad_fn_name_and_no_double_backward(cuda):
    q, k, v = (t.cuda().requires_grad_() for t in _inputs((1, 2, 2, 8, 8, 16), ember.bfloat16))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert type(out.grad_fn).__name__ == "ScaledDotProductFlashAttentionBackward0"
    gq, = ember.autograd.grad(out.sum(), q, create_graph=True)
    with pytest.raises(RuntimeError, match="_scaled_dot_product_flash_attention_backward is not implemented"):
        gq.sum().backward()


def test_explicit_scale_and_nanogpt_strided_views(cuda):
    # nanoGPT: qkv = c_attn(x); q = qkv[..., :C].view(B, T, H, D).transpose(1, 2): strided, read in place
    B, T, H, D = 2, 37, 3, 64
    x = ember.tensor(_rand(3, B, T, 3 * H * D)).to(ember.bfloat16)
    xg = x.cuda()
    q, k, v = (xg[..., i * H * D:(i + 1) * H * D].view(B, T, H, D).transpose(1, 2) for i in range(3))
    assert not q.is_contiguous() and q.stride(-1) == 1
    with native(cuda, "attention_forward"):
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3)
    xs = _np(x)
    qn, kn, vn = (xs[..., i * H * D:(i + 1) * H * D].reshape(B, T, H, D).transpose(0, 2, 1, 3) for i in range(3))
    ref, _ = reference(qn, kn, vn, True, scale=0.3)
    np.testing.assert_allclose(_np(out), ref, rtol=3e-2, atol=3e-2)
    # the output's rows are laid out (B, T, H, D), as torch's: the usual merge of heads is a view
    y = out.transpose(1, 2)
    assert y.is_contiguous()
    np.testing.assert_allclose(_np(y.reshape(B, T, H * D)), ref.transpose(0, 2, 1, 3).reshape(B, T, H * D),
                               rtol=3e-2, atol=3e-2)


def test_strided_gradients(cuda):
    B, T, H, D = 1, 20, 2, 32
    x = ember.tensor(_rand(4, B, T, 3 * H * D)).half()
    xg = x.cuda().requires_grad_()
    q, k, v = (xg[..., i * H * D:(i + 1) * H * D].view(B, T, H, D).transpose(1, 2) for i in range(3))
    with native(cuda, "attention_forward", "attention_backward"):
        F.scaled_dot_product_attention(q, k, v, is_causal=True).pow(2).sum().backward()
    xh = x.clone().requires_grad_()
    qh, kh, vh = (xh[..., i * H * D:(i + 1) * H * D].view(B, T, H, D).transpose(1, 2) for i in range(3))
    F.scaled_dot_product_attention(qh, kh, vh, is_causal=True).pow(2).sum().backward()  # the CPU kernel
    np.testing.assert_allclose(_np(xg.grad), _np(xh.grad), rtol=1e-2, atol=1e-2)


# a mask, float32 and dropout: tests/test_cuda_attention_mem.py (the efficient op, dropout in the kernel)
@pytest.mark.parametrize("case", ["odd_head_dim", "float64", "three_d", "gqa_off"])
def test_dispatch_takes_composed_path_outside_flash_conditions(cuda, case):
    q, k, v = _inputs((1, 2, 2, 6, 6, 16), ember.float16)
    kw = {}
    if case == "mask":
        kw["attn_mask"] = ember.tensor(np.tril(np.ones((6, 6), bool)))
    elif case == "dropout":
        kw["dropout_p"] = 0.5
    elif case == "odd_head_dim":
        q, k, v = (t[..., :12] for t in (q, k, v))
    elif case in ("float32", "float64"):
        q, k, v = (t.float() if case == "float32" else t.double() for t in (q, k, v))
    elif case == "three_d":
        q, k, v = (t[0] for t in (q, k, v))
    elif case == "gqa_off":  # fewer key/value heads without enable_gqa: the composed path broadcasts them
        k, v = k[:, :1], v[:, :1]
    before = _calls(cuda)
    gkw = {n: (a.cuda() if isinstance(a, ember.Tensor) else a) for n, a in kw.items()}
    out = F.scaled_dot_product_attention(q.cuda(), k.cuda(), v.cuda(), **gkw)
    assert _calls(cuda) == before
    if case != "dropout":
        want = F.scaled_dot_product_attention(q, k, v, **kw)  # the CPU
        tol = 5e-3 if q.dtype == ember.float16 else 1e-5
        np.testing.assert_allclose(_np(out), _np(want), rtol=tol, atol=tol)
    # inside the conditions (half types), the same call takes the flash op
    if case == "odd_head_dim":
        q, k, v = _inputs((1, 2, 2, 6, 6, 16), ember.float16)
        F.scaled_dot_product_attention(q.cuda(), k.cuda(), v.cuda())
        assert cuda == "real" or _calls(cuda)[0] == before[0] + 1


def test_float64_takes_the_cpu_fallback(cuda):
    # beyond torch's kernel: no GPU kernel for float64, so Note [CUDA fallback] runs the CPU one
    q, k, v = (t.double().cuda().requires_grad_() for t in _inputs((1, 2, 2, 5, 6, 16), ember.float32))
    _C._cuda_fallback_counts(True)
    out = _C._scaled_dot_product_flash_attention(q, k, v, 0.0, True)[0]
    out.sum().backward()
    fell = _C._cuda_fallback_counts(True)
    assert fell.get(FLASH) == 1 and fell.get(FLASH_BW) == 1
    assert out.device.type == "cuda" and out.dtype == ember.float64 and q.grad.device.type == "cuda"
    ref = reference(_np(q), _np(k), _np(v), True, dout=np.ones(tuple(q.shape)))
    np.testing.assert_allclose(_np(out), ref[0], rtol=1e-10, atol=1e-10)
    for got, want in zip((q.grad, k.grad, v.grad), ref[2:]):
        np.testing.assert_allclose(_np(got), want, rtol=1e-9, atol=1e-9)


def test_op_on_cpu_tensors_runs_the_cpu_kernel():
    # what Note [CUDA fallback] runs on host twins when a backend lacks the kernel
    q, k, v = _inputs((1, 2, 1, 7, 9, 16), ember.bfloat16)
    res = _C._scaled_dot_product_flash_attention(q, k, v, 0.0, True)
    assert len(res) == 9 and res[0].dtype == ember.bfloat16 and res[1].dtype == ember.float32
    ref, lse = reference(_np(q), _np(k), _np(v), True)
    np.testing.assert_allclose(_np(res[0]), ref, rtol=3e-2, atol=3e-2)
    np.testing.assert_allclose(_np(res[1]), lse, rtol=1e-4, atol=1e-4)
    assert int(res[4]) == 7 and int(res[5]) == 9
    g = ember.ones_like(q)
    dq, dk, dv = _C._scaled_dot_product_flash_attention_backward(g, q, k, v, res[0], res[1], None, None, 7, 9, 0.0,
                                                                 True, None, None)
    ref = reference(_np(q), _np(k), _np(v), True, dout=_np(g))
    for got, want in zip((dq, dk, dv), ref[2:]):
        np.testing.assert_allclose(_np(got), want, rtol=6e-2, atol=6e-2)


def test_empty_keys_and_queries(cuda):
    q = ember.zeros(1, 2, 3, 16).cuda()
    k = ember.zeros(1, 2, 0, 16).cuda()
    out, lse = _C._scaled_dot_product_flash_attention(q, k, k, 0.0, False)[:2]
    assert tuple(out.shape) == (1, 2, 3, 16) and not bool(out.cpu().ne(0).any())
    assert bool(lse.cpu().eq(float("-inf")).all())
    q0 = ember.zeros(1, 2, 0, 16).cuda()
    kv = ember.ones(1, 2, 4, 16).cuda()
    out = _C._scaled_dot_product_flash_attention(q0, kv, kv, 0.0, True)[0]
    assert tuple(out.shape) == (1, 2, 0, 16)


def test_errors(cuda):
    q, k, v = (t.cuda() for t in _inputs((1, 2, 2, 4, 4, 16), ember.float32))
    op = _C._scaled_dot_product_flash_attention
    with pytest.raises(RuntimeError, match="same dtype"):
        op(q, k.half(), v)
    with pytest.raises(RuntimeError, match="floating point"):
        op(q.int(), k.int(), v.int())
    with pytest.raises(RuntimeError, match="4 dims"):
        op(q[0], k[0], v[0])
    with pytest.raises(RuntimeError, match="dropout probability"):
        op(q, k, v, 1.5)
    with pytest.raises(RuntimeError, match="debug"):
        op(q, k, v, 0.0, False, True)
    with pytest.raises(RuntimeError, match=r"at most 256.*264"):
        z = ember.zeros(1, 1, 2, 264).cuda()
        op(z, z, z)
    with pytest.raises(RuntimeError, match="must divide"):
        op(ember.zeros(1, 3, 4, 16).cuda(), k, v)
    with pytest.raises(RuntimeError, match=r"expected query \(B, H, L, D\)"):
        op(q, k[..., :8], v)
    with pytest.raises(RuntimeError, match="same device"):
        op(q, k.cpu(), v)
    out, lse = op(q, k, v)[:2]
    with pytest.raises(RuntimeError, match="grad_out of shape"):
        _C._scaled_dot_product_flash_attention_backward(out[:, :1], q, k, v, out, lse, None, None, 4, 4, 0.0,
                                                        False, None, None)


def test_matches_torch_cpu_math(torch, cuda):
    # torch's own attention (CPU, float64) on the same inputs
    q, k, v = _inputs((2, 4, 2, 19, 23, 32), ember.float32, seed=11)
    out = F.scaled_dot_product_attention(q.cuda(), k.cuda(), v.cuda(), is_causal=True, enable_gqa=True)
    tq, tk, tv = (torch.from_numpy(_np(t)) for t in (q, k, v))
    tk, tv = tk.repeat_interleave(2, 1), tv.repeat_interleave(2, 1)
    want = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=True)
    np.testing.assert_allclose(_np(out), want.numpy(), rtol=2e-4, atol=2e-4)


def test_kernel_index_math_on_the_host(tmp_path):
    """The tensor-core kernels' fragment maps and tile-skipping rules
    (csrc/cuda/attention.h), built for the host and checked by brute force."""
    import os
    import shutil
    import subprocess
    cxx = shutil.which("g++") or shutil.which("c++")
    if not cxx:
        pytest.skip("no host C++ compiler")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    exe = str(tmp_path / "attn_index_check")
    subprocess.run([cxx, "-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror", "-I", os.path.join(root, "csrc"),
                    os.path.join(root, "tests", "cuda_attention_index_check.cpp"), "-o", exe], check=True)
    out = subprocess.run([exe], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stdout
