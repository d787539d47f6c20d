"""The last CPU fallbacks given native GPU paths, and cuBLASLt's
bias epilogue: construction from data with device='cuda' (host build, one
copy), factories writing into a GPU out=, tril_indices / triu_indices on the
device, randperm on the device (Note [GPU randperm], csrc/cuda/randperm.h),
unique / unique_consecutive with dim= (Note [CUDA unique dim],
csrc/cuda/unique_dim.h) and addmm / F.linear with a bias through gemm_bias
(csrc/cuda/gemm_lt.cpp). On a real GPU when present, else on Note [fake
CUDA]. `_C._cuda_fallback_counts` proves no call took Note [CUDA fallback];
on the fake, `ember._cuda_fake.counters()` shows the backend entry ran. Results
are compared with NumPy (np.unique(axis=), np.tril_indices, a NumPy Philox)
or, as the issue allows, with the same op on the CPU."""

import warnings

import numpy as np
import pytest

import ember
from cuda_common import native
import ember.nn.functional as F
from ember import _C, _cuda_fake




def on_gpu(t):
    assert t.device.type == "cuda", f"result on {t.device}"
    return t


def host(t):
    c = on_gpu(t).detach().cpu()
    return c.float().numpy() if c.dtype in (ember.bfloat16, ember.float16) else c.numpy()


def raises_like_cpu(fn, exc):
    """fn('cuda') raises exc with the message fn('cpu') raises."""
    with pytest.raises(exc) as cpu:
        fn("cpu")
    with pytest.raises(exc) as gpu:
        fn("cuda")
    assert str(gpu.value) == str(cpu.value)


# ------------------------------------------------------- from data

def test_tensor_and_as_tensor_build_on_the_host_and_copy_once(cuda):
    a = np.arange(12, dtype=np.float32).reshape(3, 4) / 3
    with native("tensor", "as_tensor", "scalar_tensor"):
        t = on_gpu(ember.tensor([[1, 2], [3, 4]], device="cuda"))
        assert t.dtype == ember.int64 and host(t).tolist() == [[1, 2], [3, 4]]
        t = ember.tensor([1.5, 2.5], dtype=ember.float16, device="cuda", requires_grad=True)
        assert t.requires_grad and t.is_leaf and t.dtype == ember.float16 and host(t).tolist() == [1.5, 2.5]
        np.testing.assert_array_equal(host(ember.tensor(a, device="cuda")), a)
        np.testing.assert_array_equal(host(ember.as_tensor(a, device="cuda")), a)
        np.testing.assert_array_equal(host(ember.as_tensor(a, dtype=ember.float64, device="cuda")), a)
        np.testing.assert_array_equal(host(ember.as_tensor([[True, False]], device="cuda")), [[True, False]])
        c = ember.tensor(a)
        g = on_gpu(ember.as_tensor(c, device="cuda"))
        np.testing.assert_array_equal(host(g), a)
        assert ember.as_tensor(g) is g and ember.as_tensor(g, device="cuda") is g
        d = on_gpu(ember.as_tensor(g, dtype=ember.float64))
        assert d.dtype == ember.float64
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            copy = on_gpu(ember.tensor(g))  # copy-constructs on the data's device
        assert copy.data_ptr() != g.data_ptr()
        np.testing.assert_array_equal(host(copy), a)
        s = on_gpu(ember.scalar_tensor(2.5, device="cuda"))
        assert s.dim() == 0 and s.item() == 2.5 and s.dtype == ember.float32
        z = on_gpu(ember.tensor([], device="cuda"))
        assert tuple(z.shape) == (0,)
    # the numpy bridge then .to('cuda'): one copy, the source array untouched
    b = ember.from_numpy(a).to("cuda")
    np.testing.assert_array_equal(host(b), a)
    assert ember.tensor(3, device="cuda").device == ember.device("cuda", 0)
    if ember.cuda.device_count() > 1:  # the fake has two devices; a real machine may have one
        assert ember.tensor([1], device="cuda:1").device == ember.device("cuda", 1)


def test_tensor_errors_as_cpu(cuda):
    raises_like_cpu(lambda d: ember.tensor([[1, 2], [3]], device=d), ValueError)
    raises_like_cpu(lambda d: ember.tensor([1, 2], dtype=ember.int64, device=d, requires_grad=True), RuntimeError)


# ------------------------------------------------------- out= on the GPU

def test_factories_write_a_gpu_out(cuda):
    ops = ("zeros", "ones", "full", "empty", "arange", "linspace", "logspace", "eye", "rand", "randn", "randint",
           "randperm")
    def fresh():
        return ember.empty(0, device="cuda")

    with native(*ops):
        out = fresh()
        r = ember.zeros(2, 3, out=out)
        assert r is out and host(out).tolist() == [[0] * 3] * 2
        assert host(ember.ones(4, out=fresh())).tolist() == [1] * 4
        assert host(ember.full((2, 2), 7.0, out=fresh())).tolist() == [[7, 7], [7, 7]]
        assert ember.empty(5, out=fresh()).shape == (5,)
        assert host(ember.arange(1.0, 8.0, 2.0, out=fresh())).tolist() == [1, 3, 5, 7]
        np.testing.assert_allclose(host(ember.linspace(0, 1, 5, out=fresh())), np.linspace(0, 1, 5), rtol=1e-6)
        np.testing.assert_allclose(host(ember.logspace(0, 2, 3, out=fresh())), [1, 10, 100], rtol=1e-6)
        np.testing.assert_array_equal(host(ember.eye(2, 3, out=fresh())), np.eye(2, 3))
        u = host(ember.rand(1000, out=fresh()))
        assert u.shape == (1000,) and u.min() >= 0 and u.max() < 1 and 0.4 < u.mean() < 0.6
        assert abs(host(ember.randn(1000, out=fresh())).mean()) < 0.2
        # out= of the right shape is written in place
        same = ember.empty(3, device="cuda")
        ptr = same.data_ptr()
        ember.full((3,), 2.0, out=same)
        assert same.data_ptr() == ptr and host(same).tolist() == [2, 2, 2]
        iout = ember.empty(0, dtype=ember.int64, device="cuda")
        ember.randint(3, 9, (500,), out=iout)
        v = host(iout)
        assert v.min() >= 3 and v.max() <= 8
        iout = ember.empty(0, dtype=ember.int64, device="cuda")
        ember.randperm(50, out=iout)
        assert sorted(host(iout).tolist()) == list(range(50))
        # a strided out keeps its strides: arange writes through them
        base = ember.zeros(8, device="cuda")
        ember.arange(4.0, out=base[::2])
        assert host(base).tolist() == [0, 0, 1, 0, 2, 0, 3, 0]


def test_gpu_out_errors_as_cpu(cuda):
    def dtype_mismatch(d):
        ember.zeros(3, dtype=ember.float64, out=ember.empty(3, device=d))
    raises_like_cpu(dtype_mismatch, RuntimeError)
    if ember.cuda.device_count() > 1:
        with pytest.raises(RuntimeError, match="Expected out tensor to have device cuda:1, but got cuda:0 instead"):
            ember.zeros(3, out=ember.empty(3, device="cuda:0"), device="cuda:1")


# ------------------------------------------------- tril / triu indices

@pytest.mark.parametrize("rows,cols,offset", [(4, 4, 0), (3, 5, 1), (5, 3, -2), (4, 6, -10), (4, 6, 10), (0, 3, 0),
                                              (1, 1, 0)])
def test_tril_triu_indices(cuda, rows, cols, offset):
    with native("tril_indices", "triu_indices"):
        lo = ember.tril_indices(rows, cols, offset, device="cuda")
        up = ember.triu_indices(rows, cols, offset, device="cuda", dtype=ember.int32)
    assert lo.dtype == ember.int64 and up.dtype == ember.int32
    np.testing.assert_array_equal(host(lo), np.stack(np.tril_indices(rows, offset, cols)).reshape(2, -1))
    np.testing.assert_array_equal(host(up), np.stack(np.triu_indices(rows, offset, cols)).reshape(2, -1))
    raises_like_cpu(lambda d: ember.tril_indices(-1, 3, device=d), RuntimeError)
    raises_like_cpu(lambda d: ember.triu_indices(3, 3, dtype=ember.float32, device=d), NotImplementedError)


# ------------------------------------------------------------- randperm

_PHILOX_M = (0xD2511F53, 0xCD9E8D57)
_PHILOX_W = (0x9E3779B9, 0xBB67AE85)


def philox_keys(seed, offset, n):
    """Note [GPU randperm]'s keys in NumPy: Philox4x32-10 (Salmon et al.) of
    counter {i // 2 (64 bits), offset (64 bits)} and key seed, words
    2(i % 2) (low) and 2(i % 2) + 1 (high)."""
    m = np.uint64(0xFFFFFFFF)
    j = np.arange((n + 1) // 2, dtype=np.uint64)
    c = [j & m, j >> np.uint64(32), np.full_like(j, offset & 0xFFFFFFFF), np.full_like(j, offset >> 32)]
    k0, k1 = seed & 0xFFFFFFFF, seed >> 32
    for r in range(10):
        if r:
            k0, k1 = (k0 + _PHILOX_W[0]) & 0xFFFFFFFF, (k1 + _PHILOX_W[1]) & 0xFFFFFFFF
        p0, p1 = np.uint64(_PHILOX_M[0]) * c[0], np.uint64(_PHILOX_M[1]) * c[2]
        c = [(p1 >> np.uint64(32)) ^ c[1] ^ np.uint64(k0), p1 & m, (p0 >> np.uint64(32)) ^ c[3] ^ np.uint64(k1),
             p0 & m]
    keys = np.empty(2 * len(j), np.uint64)
    keys[0::2] = (c[1] << np.uint64(32)) | c[0]
    keys[1::2] = (c[3] << np.uint64(32)) | c[2]
    return keys[:n]


def test_philox_keys_reference_is_philox():
    """Random123's known answer: counter 0, key 0 -> 6627e8d5 e169c58d bc57ac4c 9b00dbd8."""
    assert philox_keys(0, 0, 2).tolist() == [0xE169C58D6627E8D5, 0x9B00DBD8BC57AC4C]


@pytest.mark.parametrize("n", [0, 1, 2, 7, 1000, 70_001])
def test_randperm_is_the_philox_permutation(cuda, n):
    _C._cuda_generator(0, 1234, 5)  # cuda:0's generator at seed 1234, offset 5
    with native("randperm", entries=("randperm",) if n else ()):
        p = on_gpu(ember.randperm(n, device="cuda"))
    assert p.dtype == ember.int64 and tuple(p.shape) == (n,)
    expect = np.argsort(philox_keys(1234, 5, n), kind="stable")
    np.testing.assert_array_equal(host(p), expect)


@pytest.mark.parametrize("dtype", [ember.int64, ember.int32, ember.int16, ember.uint8, ember.float32,
                                   ember.float64, ember.float16, ember.bfloat16])
def test_randperm_dtypes(cuda, dtype):
    n = 200
    with native("randperm"):
        p = ember.randperm(n, dtype=dtype, device="cuda")
    assert p.dtype == dtype
    assert sorted(host(p).astype(np.int64).tolist()) == list(range(n))


def test_randperm_seeding_and_generators(cuda):
    ember.manual_seed(3)
    a = ember.randperm(500, device="cuda")
    ember.manual_seed(3)
    b = ember.randperm(500, device="cuda")
    c = ember.randperm(500, device="cuda")  # the next draw
    assert ember.equal(a, b) and not ember.equal(b, c)
    ember.manual_seed(4)
    assert not ember.equal(a, ember.randperm(500, device="cuda"))
    g = ember.Generator(device="cuda").manual_seed(11)
    with native("randperm"):
        x = ember.randperm(300, device="cuda", generator=g)
        y = ember.randperm(300, device="cuda", generator=ember.Generator(device="cuda").manual_seed(11))
        z = ember.randperm(300, device="cuda", generator=ember.Generator(device="cuda").manual_seed(12))
    assert ember.equal(x, y) and not ember.equal(x, z)
    ember.cuda.manual_seed(11)  # the device's own generator at the same seed draws the same stream
    assert ember.equal(x, ember.randperm(300, device="cuda"))
    assert sorted(host(x).tolist()) == list(range(300))
    # a permutation: not the identity, every value once
    assert host(x).tolist() != list(range(300))


def test_randperm_errors_as_cpu(cuda):
    raises_like_cpu(lambda d: ember.randperm(-1, device=d), RuntimeError)
    raises_like_cpu(lambda d: ember.randperm(3000, dtype=ember.float16, device=d), RuntimeError)
    raises_like_cpu(lambda d: ember.randperm(300, dtype=ember.int8, device=d), RuntimeError)
    raises_like_cpu(lambda d: ember.randperm(3, dtype=ember.bool, device=d), NotImplementedError)
    with pytest.raises(RuntimeError, match="Expected a 'cuda' device type for generator but found 'cpu'"):
        ember.randperm(5, device="cuda", generator=ember.Generator())
    with pytest.raises(RuntimeError, match="dtype"):
        ember.randperm(5, out=ember.empty(5, dtype=ember.int32, device="cuda"))


# ------------------------------------------------------- unique(dim=)

def _rows(seed, shape, dtype):
    """Small integers: many duplicate rows along every dim."""
    a = np.random.default_rng(seed).integers(0, 2, shape)
    return a.astype(np.bool_) if dtype == ember.bool else a, ember.tensor(a).to(dtype)


@pytest.mark.parametrize("dtype", [ember.int64, ember.float32, ember.float16, ember.bfloat16, ember.uint8,
                                   ember.bool, ember.float64, ember.int32])
@pytest.mark.parametrize("shape,dim", [((9, 3), 0), ((9, 3), 1), ((4, 7), -1), ((5, 2, 3), 1), ((6, 2, 2), 0),
                                       ((2, 3, 7), -1), ((12,), 0), ((1, 5), 0)])
def test_unique_dim_matches_numpy(cuda, dtype, shape, dim):
    a, x = _rows(shape[dim] * 7 + len(shape), shape, dtype)
    xg = x.cuda()
    ev, einv, ecnt = np.unique(a, axis=dim, return_inverse=True, return_counts=True)
    for inv in (False, True):
        for cnt in (False, True):
            with native("unique", entries=("unique_dim",)):
                r = ember.unique(xg, dim=dim, return_inverse=inv, return_counts=cnt)
            r = r if isinstance(r, tuple) else (r,)
            assert len(r) == 1 + inv + cnt
            assert r[0].dtype == dtype
            np.testing.assert_array_equal(host(r[0]), ev)
            if inv:
                assert r[1].dtype == ember.int64
                np.testing.assert_array_equal(host(r[1]), einv.reshape(-1))
            if cnt:
                np.testing.assert_array_equal(host(r[-1]), ecnt)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_unique_consecutive_and_unsorted_dim_as_cpu(cuda, dim):
    a = np.random.default_rng(5).integers(0, 2, (8, 6))
    a[3] = a[2]
    a[:, 4] = a[:, 3]
    xc = ember.tensor(a)
    xg = xc.cuda()
    for fn in (lambda t, **k: ember.unique_consecutive(t, dim=dim, **k),
               lambda t, **k: ember.unique(t, sorted=False, dim=dim, **k),
               lambda t, **k: t.unique(dim=dim, **k)):
        with native("unique", "unique_consecutive"):
            g = fn(xg, return_inverse=True, return_counts=True)
        c = fn(xc, return_inverse=True, return_counts=True)
        for u, v in zip(g, c):
            assert u.dtype == v.dtype and tuple(u.shape) == tuple(v.shape)
            np.testing.assert_array_equal(host(u), v.numpy())


def test_unique_dim_nans_and_zeros_as_cpu(cuda):
    """NaN rows are never equal (Note [unique equality]); -0.0 equals 0.0."""
    nan = float("nan")
    xc = ember.tensor([[1.0, nan], [1.0, nan], [-0.0, 2.0], [0.0, 2.0], [1.0, 3.0], [1.0, 3.0]])
    for dtype in (ember.float32, ember.float64, ember.float16):
        x = xc.to(dtype)
        with native("unique"):
            g = ember.unique(x.cuda(), dim=0, return_inverse=True, return_counts=True)
        c = ember.unique(x, dim=0, return_inverse=True, return_counts=True)
        for u, v in zip(g, c):
            np.testing.assert_array_equal(host(u), v.float().numpy() if v.dtype == ember.float16 else v.numpy())
    assert host(g[2]).tolist() == [2, 2, 1, 1]


def test_unique_dim_empty_and_large(cuda):
    x = ember.zeros(0, 3, device="cuda")
    with native("unique"):
        v, inv, cnt = ember.unique(x, dim=0, return_inverse=True, return_counts=True)
    assert tuple(v.shape) == (0, 3) and tuple(inv.shape) == (0,) and tuple(cnt.shape) == (0,)
    assert v.device.type == "cuda"
    a = np.random.default_rng(9).integers(0, 3, (20_000, 4))
    with native("unique"):
        v, inv, cnt = ember.unique(ember.tensor(a).cuda(), dim=0, return_inverse=True, return_counts=True)
    ev, einv, ecnt = np.unique(a, axis=0, return_inverse=True, return_counts=True)
    np.testing.assert_array_equal(host(v), ev)
    np.testing.assert_array_equal(host(inv), einv.reshape(-1))
    np.testing.assert_array_equal(host(cnt), ecnt)
    b = np.random.default_rng(10).integers(0, 2, (3, 5000))  # long rows: columns as the unique dim
    with native("unique"):
        v = ember.unique(ember.tensor(b).cuda(), dim=1)
    np.testing.assert_array_equal(host(v), np.unique(b, axis=1))


def test_unique_dim_errors_as_cpu(cuda):
    raises_like_cpu(lambda d: ember.unique(ember.ones(2, 3, device=d), dim=2), IndexError)
    raises_like_cpu(lambda d: ember.unique(ember.ones(2, 3, device=d), dim=-3), IndexError)
    raises_like_cpu(lambda d: ember.unique(ember.tensor(1.0, device=d), dim=0), IndexError)
    raises_like_cpu(lambda d: ember.unique(ember.ones(2, 0, device=d), dim=0), RuntimeError)
    raises_like_cpu(lambda d: ember.unique_consecutive(ember.ones(2, 3, device=d), dim=5), IndexError)


# ---------------------------------------------- addmm / linear with a bias

TOL = {ember.float32: 1e-4, ember.float16: 4e-3, ember.bfloat16: 3e-2}


def _close(g, c, dtype):
    np.testing.assert_allclose(host(g), c.detach().float().numpy(), rtol=TOL[dtype], atol=TOL[dtype])


def _leaf(a, dtype, device):
    return ember.tensor(a).to(dtype).to(device).requires_grad_(True)


@pytest.mark.parametrize("dtype", [ember.float32, ember.float16, ember.bfloat16])
@pytest.mark.parametrize("shape", [(5, 7, 3), (2, 4, 6, 8)])  # input (..., k), weight (out, k)
def test_linear_with_bias_runs_the_epilogue(cuda, dtype, shape):
    rng = np.random.default_rng(len(shape))
    *lead, k, o = shape
    a, w, b = rng.standard_normal((*lead, k)), rng.standard_normal((o, k)), rng.standard_normal(o)
    xc, wc, bc = (_leaf(v, dtype, "cpu") for v in (a, w, b))
    xg, wg, bg = (_leaf(v, dtype, "cuda") for v in (a, w, b))
    with native("addmm", "mm", "sum", entries=("gemm_bias",)):
        yg = F.linear(xg, wg, bg)
        yg.backward(ember.ones_like(yg))
    yc = F.linear(xc, wc, bc)
    yc.backward(ember.ones_like(yc))
    assert yg.dtype == dtype and tuple(yg.shape) == tuple(yc.shape)
    _close(yg, yc, dtype)
    for g, c in ((xg, xc), (wg, wc), (bg, bc)):
        _close(g.grad, c.grad, dtype)


def test_addmm_epilogue_cases(cuda):
    rng = np.random.default_rng(3)
    m1, m2, bias = rng.standard_normal((6, 4)), rng.standard_normal((4, 5)), rng.standard_normal(5)
    c = [ember.tensor(v).float() for v in (m1, m2, bias)]
    g = [t.cuda() for t in c]

    def epilogue_runs(fn, runs):
        if _C._cuda_backend_name() != "fake":
            return fn()
        before = _cuda_fake.counters()["gemm_bias"]
        r = fn()
        assert (_cuda_fake.counters()["gemm_bias"] > before) == runs
        return r

    with native("addmm"):
        # [n] and [1, n] biases; a transposed mat2 (F.linear's weight.t())
        _close(epilogue_runs(lambda: ember.addmm(g[2], g[0], g[1]), True), ember.addmm(c[2], c[0], c[1]),
               ember.float32)
        _close(epilogue_runs(lambda: ember.addmm(g[2].view(1, 5), g[0], g[1]), True),
               ember.addmm(c[2].view(1, 5), c[0], c[1]), ember.float32)
        gt = g[1].t().contiguous().t()
        _close(epilogue_runs(lambda: ember.addmm(g[2], g[0], gt), True), ember.addmm(c[2], c[0], c[1]),
               ember.float32)
        # the cases the epilogue does not cover take the plain product
        _close(epilogue_runs(lambda: ember.addmm(g[2], g[0], g[1], beta=2), False),
               ember.addmm(c[2], c[0], c[1], beta=2), ember.float32)
        _close(epilogue_runs(lambda: ember.addmm(g[2], g[0], g[1], alpha=0.5), False),
               ember.addmm(c[2], c[0], c[1], alpha=0.5), ember.float32)
        full = ember.tensor(rng.standard_normal((6, 5))).float()
        _close(epilogue_runs(lambda: ember.addmm(full.cuda(), g[0], g[1]), False), ember.addmm(full, c[0], c[1]),
               ember.float32)
        col = ember.tensor(rng.standard_normal((6, 1))).float()
        _close(epilogue_runs(lambda: ember.addmm(col.cuda(), g[0], g[1]), False), ember.addmm(col, c[0], c[1]),
               ember.float32)
        out = ember.empty(6, 5, device="cuda")
        ember.addmm(g[2], g[0], g[1], out=out)
        _close(out, ember.addmm(c[2], c[0], c[1]), ember.float32)
        # k == 0: no product, the plain path writes the bias
        e0, e1 = ember.zeros(6, 0), ember.zeros(0, 5)
        _close(ember.addmm(g[2], e0.cuda(), e1.cuda()), ember.addmm(c[2], e0, e1), ember.float32)
        # float64 has no epilogue here: cuBLAS as before
        _close(epilogue_runs(lambda: ember.addmm(g[2].double(), g[0].double(), g[1].double()), False).float(),
               ember.addmm(c[2], c[0], c[1]), ember.float32)


def test_addmm_errors_as_cpu(cuda):
    raises_like_cpu(lambda d: ember.addmm(ember.ones(3, device=d), ember.ones(2, 4, device=d),
                                          ember.ones(3, 3, device=d)), RuntimeError)
    raises_like_cpu(lambda d: ember.addmm(ember.ones(4, device=d), ember.ones(2, 3, device=d),
                                          ember.ones(3, 3, device=d)), RuntimeError)
    raises_like_cpu(lambda d: ember.addmm(ember.ones(3, dtype=ember.float64, device=d), ember.ones(2, 3, device=d),
                                          ember.ones(3, 3, device=d)), RuntimeError)
