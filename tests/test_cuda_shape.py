"""Shape, join and factory ops on 'cuda' through their native paths (Note
[CUDA shape kernels] in csrc/cuda/shape.h): cat and its stacks, repeat /
tile / repeat_interleave, flip / roll / rot90, tril / triu, diff,
broadcast_tensors / meshgrid, arange / linspace / logspace / eye, the _like
and new_ factories. On a real GPU when present, else on Note [fake CUDA],
whose shape entries run the same per-element rules as the kernels
(csrc/cuda/shape_rules.h). Each test checks values against NumPy (or the
CPU op where NumPy has no twin) and that the op did not
take Note [CUDA fallback] (`_C._cuda_fallback_counts`)."""

import numpy as np
import pytest

import ember
from ember import _C, _cuda_fake

DTYPES = [ember.float32, ember.float16, ember.bfloat16, ember.int64, ember.bool]


class native:
    """Asserts that none of the ops called inside the block (or of `names`
    when given) took the fallback."""

    def __init__(self, *names):
        self.names = names

    def __enter__(self):
        _C._cuda_fallback_counts(True)
        return self

    def __exit__(self, *exc):
        counts = _C._cuda_fallback_counts(True)
        if self.names:
            counts = {k: v for k, v in counts.items() if k in self.names}
        if exc[0] is None:
            assert counts == {}, f"took the CPU fallback: {counts}"


class shape_kernels:
    """On the fake: asserts that the block launched the shape entries
    (arange_fill, linspace_fill, tri_mask, repeat_interleave) `n` times at
    least, so the values checked came from the kernels' rules."""

    def __init__(self, mode, n=1):
        self.mode, self.n = mode, n

    def __enter__(self):
        if self.mode == "fake":
            self.before = _cuda_fake.counters()["shape"]

    def __exit__(self, *exc):
        if self.mode == "fake" and exc[0] is None:
            assert _cuda_fake.counters()["shape"] - self.before >= self.n


def arr(seed, shape, dtype):
    """NumPy values exactly representable in dtype (small integers / halves)."""
    rng = np.random.default_rng(seed)
    if dtype == ember.bool:
        return rng.random(shape) < 0.5
    if dtype == ember.int64:
        return rng.integers(-50, 50, shape).astype(np.int64)
    return (rng.integers(-64, 64, shape) / 4).astype(np.float32)


def gpu(a, dtype, layout="contig"):
    """a (NumPy) as a 'cuda' tensor of dtype, contiguous or a transposed /
    sliced / expanded view (non-contiguous)."""
    a = np.asarray(a)
    if layout == "T" and a.ndim >= 2:
        return ember.tensor(np.ascontiguousarray(np.swapaxes(a, -1, -2))).to(dtype).cuda().transpose(-1, -2)
    if layout == "slice" and a.ndim >= 1:
        big = np.repeat(a, 2, axis=-1)
        return ember.tensor(big).to(dtype).cuda()[..., ::2]
    return ember.tensor(a).to(dtype).cuda()


def host(t):
    assert t.device.type == "cuda", f"result on {t.device}"
    t = t.cpu()
    if t.dtype in (ember.float16, ember.bfloat16):
        t = t.float()
    return t.numpy()


def same(t, expect, dtype=None):
    if dtype is not None:
        assert t.dtype == dtype
    got = host(t)
    np.testing.assert_array_equal(got, np.asarray(expect).astype(got.dtype))


# ------------------------------------------------------------------ cat family

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["contig", "T", "slice"])
def test_cat_and_stacks(cuda, dtype, layout):
    a, b = arr(0, (3, 4), dtype), arr(1, (3, 4), dtype)
    x, y = gpu(a, dtype, layout), gpu(b, dtype, layout)
    with native():
        same(ember.cat([x, y]), np.concatenate([a, b]), dtype)
        same(ember.cat((x, y), dim=1), np.concatenate([a, b], 1), dtype)
        same(ember.concat([x, y], -1), np.concatenate([a, b], -1), dtype)
        same(ember.concatenate([x, y], 0), np.concatenate([a, b], 0), dtype)
        same(ember.stack([x, y]), np.stack([a, b]), dtype)
        same(ember.stack([x, y], dim=2), np.stack([a, b], 2), dtype)
        same(ember.hstack([x, y]), np.hstack([a, b]), dtype)
        same(ember.vstack([x, y]), np.vstack([a, b]), dtype)
        same(ember.row_stack([x, y]), np.vstack([a, b]), dtype)
        same(ember.dstack([x, y]), np.dstack([a, b]), dtype)
        same(ember.column_stack([x[0], y[0]]), np.column_stack([a[0], b[0]]), dtype)
        same(ember.hstack([x[0], y[1]]), np.hstack([a[0], b[1]]), dtype)


def test_cat_empty_and_legacy_empty(cuda):
    a = arr(2, (2, 3), ember.float32)
    x = gpu(a, ember.float32)
    e = ember.empty(0, device="cuda")
    z = ember.zeros(2, 0, device="cuda")
    with native():
        same(ember.cat([x, e, x]), np.concatenate([a, a]))
        same(ember.cat([z, x], 1), a)
        r = ember.cat([ember.zeros(0, 3, device="cuda"), ember.zeros(0, 3, device="cuda")])
        assert r.shape == (0, 3) and r.device.type == "cuda"


def test_cat_promotes_mixed_dtypes_as_the_cpu(cuda):
    a = arr(3, (2, 2), ember.int64)
    b = arr(4, (2, 2), ember.float16)
    c = arr(5, (2, 2), ember.bool)
    x, y, z = gpu(a, ember.int64), gpu(b, ember.float16), gpu(c, ember.bool)
    with native():
        r = ember.cat([x, y, z])
        s = ember.cat([z, x])
    cpu = ember.cat([x.cpu(), y.cpu(), z.cpu()])
    assert r.dtype == cpu.dtype == ember.float16 and s.dtype == ember.int64
    same(r, cpu.float().numpy())
    same(s, np.concatenate([c, a]).astype(np.int64))


def test_cat_out(cuda):
    a = arr(6, (2, 3), ember.float32)
    x = gpu(a, ember.float32)
    out = ember.empty(0, device="cuda", dtype=ember.float64)
    with native():
        r = ember.cat([x, x], out=out)
    assert r is out and out.shape == (4, 3) and out.dtype == ember.float64
    same(out, np.concatenate([a, a]))


def test_cat_errors_as_the_cpu(cuda):
    x = ember.ones(2, 3, device="cuda")
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        ember.cat([x, ember.ones(2, 3)])
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        ember.stack([x, ember.ones(2, 3)])
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        ember.cat([x, x], out=ember.empty(4, 3))
    with pytest.raises(RuntimeError, match="Sizes of tensors must match except in dimension 0"):
        ember.cat([x, ember.ones(2, 4, device="cuda")])
    with pytest.raises(RuntimeError, match="stack expects each tensor to be equal size"):
        ember.stack([x, ember.ones(3, 2, device="cuda")])
    with pytest.raises(RuntimeError, match="zero-dimensional tensor"):
        ember.cat([ember.ones((), device="cuda")])
    with pytest.raises(IndexError):
        ember.cat([x, x], dim=2)
    with pytest.raises(ValueError):
        ember.cat([])
    if ember.cuda.device_count() > 1:
        with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
            ember.cat([x, x.to("cuda:1")])


def test_cat_tensors_on_two_gpus_raise(cuda):
    if ember.cuda.device_count() < 2:
        pytest.skip("needs two devices")
    x = ember.ones(2, device="cuda:0")
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device, but found at least "
                                           "two devices, cuda:0 and cuda:1!"):
        ember.cat([x, ember.ones(2, device="cuda:1")])


# ------------------------------------------------------------ repeat family

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["contig", "T", "slice"])
def test_repeat_tile(cuda, dtype, layout):
    a = arr(7, (2, 3), dtype)
    x = gpu(a, dtype, layout)
    with native():
        same(x.repeat(2, 3), np.tile(a, (2, 3)), dtype)
        same(x.repeat(2, 1, 2), np.tile(a, (2, 1, 2)), dtype)
        same(ember.tile(x, (2,)), np.tile(a, (1, 2)), dtype)
        same(x.tile(3, 1, 1), np.tile(a, (3, 1, 1)), dtype)
        same(x.repeat(0, 2), np.tile(a, (0, 2)), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["contig", "T", "slice"])
def test_repeat_interleave(cuda, dtype, layout):
    a = arr(8, (3, 4), dtype)
    x = gpu(a, dtype, layout)
    reps = np.array([2, 0, 3, 1])
    r4, r3, r0, z4 = (ember.tensor(v, device="cuda") for v in (reps, [1, 0, 2], 2, [0, 0, 0, 0]))
    with native():
        same(x.repeat_interleave(2), np.repeat(a, 2), dtype)
        same(ember.repeat_interleave(x, 3, dim=0), np.repeat(a, 3, axis=0), dtype)
        with shape_kernels(cuda):
            same(ember.repeat_interleave(x, r4, dim=1), np.repeat(a, reps, 1), dtype)
        same(ember.repeat_interleave(x, r3, dim=0), np.repeat(a, [1, 0, 2], 0), dtype)
        same(ember.repeat_interleave(x, r0, dim=1), np.repeat(a, 2, 1), dtype)
        same(ember.repeat_interleave(x, z4, dim=1), np.repeat(a, 0, 1), dtype)
        same(ember.repeat_interleave(x, r4.int(), dim=1), np.repeat(a, reps, 1), dtype)
        big = x.repeat(1, 70)  # long rows: the strided copy path on the CPU too
        same(ember.repeat_interleave(big, 2, dim=0), np.repeat(np.tile(a, (1, 70)), 2, 0), dtype)


def test_repeat_interleave_indices_and_errors(cuda):
    r = ember.tensor([3, 0, 1, 2], device="cuda")
    with native("repeat_interleave", "arange"):
        with shape_kernels(cuda, 2):  # arange, then the gather
            same(ember.repeat_interleave(r), np.repeat(np.arange(4), [3, 0, 1, 2]), ember.int64)
        same(ember.repeat_interleave(r.int()), np.repeat(np.arange(4), [3, 0, 1, 2]), ember.int32)
        same(ember.repeat_interleave(ember.zeros(0, dtype=ember.int64, device="cuda")), np.zeros(0))
    x = ember.ones(2, 3, device="cuda")
    with pytest.raises(RuntimeError, match="repeats must have the same size as input along dim"):
        ember.repeat_interleave(x, ember.tensor([1, 2], device="cuda"), dim=1)
    with pytest.raises(RuntimeError, match="repeats can not be negative"):
        ember.repeat_interleave(x, ember.tensor([1, -1], device="cuda"), dim=0)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        ember.repeat_interleave(x, ember.tensor([1, 2]), dim=0)
    with pytest.raises(RuntimeError, match="allocated size does not match"):
        ember.repeat_interleave(x, ember.tensor([1, 2], device="cuda"), dim=0, output_size=4)


# ------------------------------------------------------- flip / roll / rot90

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["contig", "T", "slice"])
def test_flip_roll_rot90(cuda, dtype, layout):
    a = arr(9, (3, 4, 5), dtype)
    x = gpu(a, dtype, layout)
    with native():
        same(x.flip(0), np.flip(a, 0), dtype)
        same(ember.flip(x, (0, 2)), np.flip(a, (0, 2)), dtype)
        same(ember.fliplr(x), np.fliplr(a), dtype)
        same(ember.flipud(x), np.flipud(a), dtype)
        same(x.roll(2), np.roll(a, 2), dtype)
        same(ember.roll(x, (1, -3), (0, 2)), np.roll(a, (1, -3), (0, 2)), dtype)
        same(ember.roll(x, 7, 1), np.roll(a, 7, 1), dtype)
        for k in (-1, 0, 1, 2, 3, 5):
            same(ember.rot90(x, k), np.rot90(a, k), dtype)
        same(ember.rot90(x, 1, (1, 2)), np.rot90(a, 1, (1, 2)), dtype)
    with pytest.raises(RuntimeError, match="appears multiple times"):
        x.flip(0, 0)
    with pytest.raises(IndexError):
        x.flip(3)


def test_flip_roll_empty(cuda):
    x = ember.zeros(0, 3, device="cuda")
    with native():
        assert x.flip(0).shape == (0, 3) and x.roll(1, 0).shape == (0, 3)
        assert x.roll(2).device.type == "cuda"


# ------------------------------------------------------------------ tril / triu

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["contig", "T", "slice"])
def test_tril_triu(cuda, dtype, layout):
    a = arr(10, (2, 4, 5), dtype)
    x = gpu(a, dtype, layout)
    with native():
        for k in (-5, -1, 0, 2, 7):
            with shape_kernels(cuda, 2):
                same(ember.tril(x, k), np.tril(a, k), dtype)
                same(x.triu(k), np.triu(a, k), dtype)
        y = x.clone()
        assert y.tril_(1) is y
        same(y, np.tril(a, 1), dtype)
        z = x.clone()
        z.triu_(-1)
        same(z, np.triu(a, -1), dtype)
        out = ember.empty(0, dtype=dtype, device="cuda")
        assert ember.triu(x, 1, out=out) is out
        same(out, np.triu(a, 1), dtype)
        t = x.transpose(0, 2)  # the batch in the middle, rows/cols strided
        same(t.tril(), np.tril(np.swapaxes(a, 0, 2)), dtype)
        same(ember.tril(ember.zeros(3, 0, 2, device="cuda")), np.zeros((3, 0, 2)))
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        ember.tril(ember.ones(3, device="cuda"))


def test_tril_causal_mask(cuda):
    with native():
        m = ember.ones(6, 6, device="cuda", dtype=ember.bool).tril()
    np.testing.assert_array_equal(host(m), np.tril(np.ones((6, 6), bool)))


# ------------------------------------------------------------------ diff

@pytest.mark.parametrize("dtype", [ember.float32, ember.float16, ember.int64, ember.bool])
def test_diff(cuda, dtype):
    a = arr(11, (3, 6), dtype)
    x = gpu(a, dtype, "T").transpose(0, 1).contiguous().transpose(0, 1)
    p = arr(12, (3, 2), dtype)
    with native():
        same(ember.diff(x), np.diff(a), dtype)
        same(x.diff(n=2, dim=0), np.diff(a, 2, 0), dtype)
        same(ember.diff(x, prepend=gpu(p, dtype), append=gpu(p, dtype)),
             np.diff(np.concatenate([p, a, p], 1)), dtype)
        same(ember.diff(x, n=0), a, dtype)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        ember.diff(x, prepend=ember.tensor(p))


# --------------------------------------------------- broadcast_tensors / meshgrid

def test_broadcast_tensors_and_meshgrid(cuda):
    a, b = arr(13, (3, 1), ember.float32), arr(14, (4,), ember.float32)
    x, y = gpu(a, ember.float32), gpu(b, ember.float32)
    with native():
        bx, by = ember.broadcast_tensors(x, y)
        gx, gy = ember.meshgrid(y, x[:, 0], indexing="xy")
        ix, iy = ember.meshgrid(y, x[:, 0], indexing="ij")
    ex, ey = np.broadcast_arrays(a, b)
    same(bx, ex)
    same(by, ey)
    for got, want in zip((gx, gy, ix, iy), np.meshgrid(b, a[:, 0], indexing="xy") +
                         np.meshgrid(b, a[:, 0], indexing="ij")):
        same(got, want)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        ember.broadcast_tensors(x, ember.tensor(b))


# ------------------------------------------------------------------ factories

@pytest.mark.parametrize("args,kw", [
    ((10,), {}), ((2, 11, 3), {}), ((-3, 4), {}), ((5, -7, -2), {}), ((0,), {}),
    ((0.5, 3.2, 0.3), {}), ((1, 2, 0.1), {}), ((10,), {"dtype": ember.float16}),
    ((0, 1000, 7), {"dtype": ember.bfloat16}), ((0, 1, 0.1), {"dtype": ember.int64}),
    ((-1.5, 2.5, 0.5), {"dtype": ember.int32}), ((1e6, 1e6 + 50), {"dtype": ember.float32}),
    ((3,), {"dtype": ember.float64}), ((0.1, 0.7, 0.1), {"dtype": ember.float64}),
])
def test_arange_matches_the_cpu(cuda, args, kw):
    with native(), shape_kernels(cuda):
        g = ember.arange(*args, device="cuda", **kw)
    c = ember.arange(*args, **kw)
    assert g.dtype == c.dtype and g.shape == c.shape
    assert g.device.type == "cuda"
    np.testing.assert_array_equal(host(g), c.float().numpy() if c.dtype in (ember.float16, ember.bfloat16)
                                  else c.numpy())
    if "dtype" not in kw and all(isinstance(v, int) for v in args):
        np.testing.assert_array_equal(host(g), np.arange(*args))


def test_arange_errors_as_the_cpu(cuda):
    with pytest.raises(RuntimeError, match="step must be nonzero"):
        ember.arange(0, 5, 0, device="cuda")
    with pytest.raises(RuntimeError, match="upper bound and larger bound inconsistent"):
        ember.arange(0, 5, -1, device="cuda")
    with pytest.raises(NotImplementedError):
        ember.arange(5, device="cuda", dtype=ember.bool)


@pytest.mark.parametrize("dtype", [None, ember.float64, ember.float16, ember.bfloat16, ember.int64])
@pytest.mark.parametrize("args", [(0, 1, 5), (-2.5, 7.25, 13), (3, 3, 4), (1, -1, 1), (0, 10, 0), (0.1, 1.7, 100)])
def test_linspace_logspace_match_the_cpu(cuda, dtype, args):
    kw = {} if dtype is None else {"dtype": dtype}
    with native(), shape_kernels(cuda, 2):
        g = ember.linspace(*args, device="cuda", **kw)
        lg = ember.logspace(*args, base=2.0, device="cuda", **kw)
    for got, want in ((g, ember.linspace(*args, **kw)), (lg, ember.logspace(*args, base=2.0, **kw))):
        assert got.dtype == want.dtype and got.shape == want.shape
        w = want.float().numpy() if want.dtype in (ember.float16, ember.bfloat16) else want.numpy()
        if cuda == "real" and want.dtype == ember.float64 and got is lg:
            np.testing.assert_allclose(host(got), w, rtol=4e-16)  # the device pow is within 2 ulp
        else:
            np.testing.assert_array_equal(host(got), w)
    if dtype in (None, ember.float64):
        np.testing.assert_allclose(host(g), np.linspace(*args), rtol=1e-6, atol=1e-6)
    with pytest.raises(RuntimeError, match="number of steps must be non-negative"):
        ember.linspace(0, 1, -1, device="cuda")


@pytest.mark.parametrize("dtype", DTYPES)
def test_eye(cuda, dtype):
    with native():
        same(ember.eye(4, device="cuda", dtype=dtype), np.eye(4), dtype)
        same(ember.eye(3, 5, device="cuda", dtype=dtype), np.eye(3, 5), dtype)
        same(ember.eye(0, 2, device="cuda", dtype=dtype), np.eye(0, 2), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_like_and_new_factories(cuda, dtype):
    x = gpu(arr(15, (2, 3), dtype), dtype, "T")
    c = ember.ones(2, 3, dtype=dtype)
    with native():
        same(ember.zeros_like(x), np.zeros((2, 3)), dtype)
        same(ember.ones_like(x), np.ones((2, 3)), dtype)
        same(ember.full_like(x, 1), np.ones((2, 3)), dtype)
        assert ember.empty_like(x).shape == (2, 3) and ember.empty_like(x).device.type == "cuda"
        same(ember.zeros_like(c, device="cuda"), np.zeros((2, 3)), dtype)
        same(ember.ones_like(x, dtype=ember.float32), np.ones((2, 3)), ember.float32)
        same(x.new_zeros(4), np.zeros(4), dtype)
        same(x.new_ones((2, 2)), np.ones((2, 2)), dtype)
        same(x.new_full((3,), 1), np.ones(3), dtype)
        assert x.new_empty(5).shape == (5,) and x.new_empty(5).device.type == "cuda"
        e = ember.empty_strided((2, 3), (1, 2), dtype=dtype, device="cuda")
        assert e.device.type == "cuda" and e.stride() == (1, 2) and e.dtype == dtype
        same(x.new_tensor([1, 0, 1]), np.array([1, 0, 1]), dtype)
        same(c.new_zeros(3, device="cuda"), np.zeros(3), dtype)
        if dtype in (ember.float32, ember.float16, ember.bfloat16):
            r = ember.rand_like(x)
            assert r.device.type == "cuda" and r.dtype == dtype and r.shape == (2, 3)
            assert ember.randn_like(c, device="cuda").device.type == "cuda"
        assert ember.randint_like(x, 0, 2).device.type == "cuda"
    z = ember.zeros_like(x, device="cpu")
    assert z.device.type == "cpu"
    np.testing.assert_array_equal(z.float().numpy(), np.zeros((2, 3)))
    y = x.new_zeros(2, device="cpu")
    assert y.device.type == "cpu"


# ---------------------------------------------------------------- autograd

def test_autograd_through_shape_ops(cuda):
    rng = np.random.default_rng(16)
    a = rng.standard_normal((3, 4))
    b = rng.standard_normal((3, 4))
    x = ember.tensor(a, device="cuda", requires_grad=True)
    y = ember.tensor(b, device="cuda", requires_grad=True)
    w = ember.tensor(rng.standard_normal((6, 8)), device="cuda")
    reps = ember.tensor([1, 2, 0, 3], device="cuda")
    with native("cat", "stack", "repeat", "flip", "roll", "tril", "triu", "repeat_interleave", "diff", "rot90"):
        out = (ember.cat([x, y], 0).repeat(1, 2) * w).sum()
        out = out + (ember.stack([x, y]).flip(0).roll(1, 2).tril(1) ** 2).sum()
        out = out + x.repeat_interleave(reps, dim=1).sum()
        out = out + ember.diff(y, dim=1).sum() + ember.rot90(x).triu().sum()
        out.backward()
    # hand-derived gradients
    w = w.cpu().numpy()
    gx = w[:3, :4] + w[:3, 4:]
    gy = w[3:, :4] + w[3:, 4:]
    sq = np.stack([b, a])  # flip(0) puts y first
    sq = np.roll(sq, 1, 2)
    mask = np.tril(np.ones((3, 4)), 1)
    g_sq = np.roll(2 * sq * mask, -1, 2)
    gy = gy + g_sq[0]
    gx = gx + g_sq[1]
    gx = gx + np.array([1, 2, 0, 3])[None, :]
    gd = np.zeros((3, 4))
    gd[:, 0] -= 1
    gd[:, -1] += 1
    gy = gy + gd
    gx = gx + np.rot90(np.triu(np.ones((4, 3))), -1)
    np.testing.assert_allclose(host(x.grad), gx, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(host(y.grad), gy, rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------ the GPT step

def test_gpt_step_takes_no_fallback_for_these_ops(cuda):
    import os
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
    import gpt
    step = gpt.gpt_step(ember, batch=2, block=16, n_layer=1, n_embd=32, n_head=2, device="cuda")
    _C._cuda_fallback_counts(True)
    loss = step()
    counts = _C._cuda_fallback_counts(True)
    assert np.isfinite(float(loss))
    for name in ("arange", "new_zeros", "stack", "cat", "tril", "triu", "zeros_like", "ones_like", "full_like"):
        assert name not in counts, counts
    del step


# ------------------------------------------- shape.cu's own code, on the host
#
# csrc/cuda/shape.cu built with -DEM_CUDA_SHAPE_HOST_TEST runs each kernel's
# per-element function (the casts of copy_rules.h, the offsets and the
# search) as a host loop: called here on NumPy buffers, its bytes must equal
# the CPU ops' bytes. On a GPU the tests above check the kernels themselves.

import ctypes as C  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CU = ROOT / "csrc" / "cuda" / "shape.cu"
HOST_LIB = ROOT / "build" / "cuda_shape_host" / "libshape_host.so"
SOURCES = [CU] + [ROOT / "csrc" / "cuda" / n for n in ("shape.h", "shape_rules.h", "copy_rules.h", "runtime.h")]
CODES = {ember.bool: 0, ember.uint8: 1, ember.int8: 2, ember.int16: 3, ember.int32: 4, ember.int64: 5,
         ember.float16: 6, ember.bfloat16: 7, ember.float32: 8, ember.float64: 9}
BITS = {1: ember.uint8, 2: ember.int16, 4: ember.int32, 8: ember.int64}
NP_BITS = {1: np.uint8, 2: np.int16, 4: np.int32, 8: np.int64}
I64P = C.POINTER(C.c_int64)


@pytest.fixture(scope="module")
def host_lib():
    if not HOST_LIB.exists() or any(s.stat().st_mtime > HOST_LIB.stat().st_mtime for s in SOURCES):
        nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc")
                                        else None)
        if not nvcc:
            pytest.skip("nvcc not found: the host build of shape.cu needs it")
        HOST_LIB.parent.mkdir(parents=True, exist_ok=True)
        tmp = HOST_LIB.with_suffix(".tmp.so")
        cmd = [nvcc, "-std=c++17", "-O1", "-DEM_CUDA_SHAPE_HOST_TEST", "-Xcompiler", "-fPIC", "-shared",
               "-I", str(ROOT / "csrc"), str(CU), "-o", str(tmp)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        assert r.returncode == 0, "host build of shape.cu failed:\n" + r.stderr[-4000:]
        tmp.replace(HOST_LIB)
    lib = C.CDLL(str(HOST_LIB))
    lib.em_cuda_arange_fill.argtypes = [C.c_int, C.c_int, C.c_void_p, C.c_int64, C.c_int64, C.c_bool, C.c_int64,
                                        C.c_int64, C.c_double, C.c_double]
    lib.em_cuda_linspace_fill.argtypes = [C.c_int, C.c_int, C.c_void_p, C.c_int64, C.c_int64, C.c_double,
                                          C.c_double, C.c_bool, C.c_double]
    lib.em_cuda_tri_mask.argtypes = [C.c_int, C.c_int, C.c_void_p, C.c_int, I64P, I64P, C.c_int64, C.c_bool]
    lib.em_cuda_repeat_interleave.argtypes = [C.c_int, C.c_int, C.c_void_p, C.c_void_p, C.c_int64, C.c_int64,
                                              C.c_int64, I64P, C.c_int64]
    lib.em_cuda_shape_host_last_error.restype = C.c_char_p
    return lib


def bits(t):
    """The bytes of a CPU ember tensor, as NumPy integers of its itemsize."""
    return t.contiguous().view(BITS[t.element_size()]).numpy()


ALL_DTYPES = [d for d in CODES if d != ember.bool]


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("args", [(10,), (-3, 40, 7), (5, -7, -2), (0.5, 30.2, 0.3), (-1.5, 2.5, 0.5),
                                  (0, 1, 0.1), (1e6, 1e6 + 50, 1)])
def test_host_build_arange(host_lib, dtype, args):
    try:
        want = ember.arange(*args, dtype=dtype)
    except RuntimeError:
        pytest.skip("no such range for this dtype")
    start, end, step = (0, args[0], 1) if len(args) == 1 else (args + (1,))[:3]
    int_math = all(isinstance(v, int) for v in (start, end, step)) and not want.is_floating_point()
    n = want.numel()
    out = np.zeros(2 * n, NP_BITS[want.element_size()])  # a stride of 2
    iv = lambda v: int(v) if isinstance(v, int) else 0  # noqa: E731
    assert host_lib.em_cuda_arange_fill(0, CODES[dtype], out.ctypes.data, n, 2, int_math, iv(start), iv(step),
                                        float(start), float(step)) == 0
    np.testing.assert_array_equal(out[::2], bits(want))
    assert not out[1::2].any()


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("args", [(0, 1, 5), (-2.5, 7.25, 13), (3, 3, 4), (1, -1, 1), (0.1, 1.7, 100), (-4, 4, 9)])
def test_host_build_linspace_logspace(host_lib, dtype, args):
    try:
        wants = ((False, ember.linspace(*args, dtype=dtype)), (True, ember.logspace(*args, base=3.0, dtype=dtype)))
    except RuntimeError as e:  # endpoints an integer dtype cannot hold: refused before any device work, as torch
        assert "without overflow" in str(e)
        return
    for log, want in wants:
        n = want.numel()
        out = np.zeros(n, NP_BITS[want.element_size()])
        assert host_lib.em_cuda_linspace_fill(0, CODES[dtype], out.ctypes.data, n, 1, float(args[0]),
                                              float(args[1]), log, 3.0) == 0
        np.testing.assert_array_equal(out, bits(want))


@pytest.mark.parametrize("k", [-3, -1, 0, 1, 4])
@pytest.mark.parametrize("lower", [True, False])
def test_host_build_tri_mask(host_lib, k, lower):
    rng = np.random.default_rng(20)
    base = rng.standard_normal((5, 3, 8, 2))  # a (3, 5, 4) view: permuted and strided
    view = base.transpose(1, 0, 2, 3)[:, :, ::2, 0]
    want = np.tril(view, k) if lower else np.triu(view, k)
    sizes = (C.c_int64 * 3)(*view.shape)
    strides = (C.c_int64 * 3)(*(s // 8 for s in view.strides))
    assert host_lib.em_cuda_tri_mask(0, 9, view.ctypes.data, 3, sizes, strides, k, lower) == 0
    np.testing.assert_array_equal(view, want)
    untouched = base.copy()
    untouched.transpose(1, 0, 2, 3)[:, :, ::2, 0] = 0
    assert np.count_nonzero(untouched) == base.size - view.size  # nothing outside the view was written


@pytest.mark.parametrize("dtype", [ember.uint8, ember.float16, ember.float32, ember.float64])
@pytest.mark.parametrize("shape,dim,reps", [((4,), 0, [2, 0, 3, 1]), ((3, 4, 2), 1, [0, 5, 1, 0]),
                                            ((2, 3), 0, [3, 3]), ((2, 1, 3), 1, [4])])
def test_host_build_repeat_interleave(host_lib, dtype, shape, dim, reps):
    isz = {ember.uint8: 1, ember.float16: 2, ember.float32: 4, ember.float64: 8}[dtype]
    src = np.random.default_rng(21).integers(0, 100, shape).astype(NP_BITS[isz])
    want = np.repeat(src, reps, axis=dim)
    outer = int(np.prod(shape[:dim])) if dim else 1
    inner = int(np.prod(shape[dim + 1:]))
    cum = np.concatenate([[0], np.cumsum(reps)]).astype(np.int64)
    out = np.full(want.shape, 77, NP_BITS[isz])
    assert host_lib.em_cuda_repeat_interleave(0, CODES[dtype], out.ctypes.data, src.ctypes.data, outer,
                                              shape[dim], inner, cum.ctypes.data_as(I64P), int(cum[-1])) == 0
    np.testing.assert_array_equal(out, want)


def test_host_build_rejects_bad_arguments(host_lib):
    assert host_lib.em_cuda_arange_fill(0, 12, None, 3, 1, True, 0, 1, 0, 0) == -1
    assert b"unknown dtype code 12" in host_lib.em_cuda_shape_host_last_error()
    sizes = (C.c_int64 * 1)(3)
    assert host_lib.em_cuda_tri_mask(0, 8, None, 1, sizes, sizes, 0, True) == -1
    assert b"1 dims" in host_lib.em_cuda_shape_host_last_error()
    assert host_lib.em_cuda_repeat_interleave(0, 8, None, None, 1, 0, 1, None, 3) == -1
    assert b"empty input" in host_lib.em_cuda_shape_host_last_error()
