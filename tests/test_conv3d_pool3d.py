"""F.conv3d / nn.Conv3d and the 3-d pools (max with indices, average,
adaptive average and max; their modules; the 1-d / 2-d adaptive max pools
share the 3-d code): values against direct-loop NumPy
references on small shapes, gradients by finite differences (gradcheck,
float64) and against torch with the same inputs and weights; torch's
errors; 'cuda' tensors (Note [CUDA fallback]) give the CPU's results."""
import itertools

import numpy as np
import pytest

import ember
from ember.autograd import gradcheck
from ember.nn import functional as F

try:
    import torch as _torch
except ImportError:
    _torch = None
needs_torch = pytest.mark.skipif(_torch is None, reason="torch not installed")
RNG = np.random.default_rng(0)


def T(a, grad=False):
    t = ember.from_numpy(np.ascontiguousarray(a))
    return t.requires_grad_() if grad else t


def _t3(v):
    return [v] * 3 if isinstance(v, int) else list(v)


# ------------------------------------------------------------------ references

def np_conv3d(x, w, b, stride, padding, dilation, groups):
    s, p, d = _t3(stride), _t3(padding), _t3(dilation)
    x = np.pad(x, ((0, 0), (0, 0)) + tuple((q, q) for q in p))
    N, C = x.shape[:2]
    O, Cg, *ks = w.shape
    out = [(x.shape[2 + a] - d[a] * (ks[a] - 1) - 1) // s[a] + 1 for a in range(3)]
    y = np.zeros((N, O) + tuple(out))
    per = O // groups
    for o in range(O):
        g = o // per
        for pos in itertools.product(*map(range, out)):
            sl = tuple(slice(pos[a] * s[a], pos[a] * s[a] + d[a] * (ks[a] - 1) + 1, d[a]) for a in range(3))
            y[(slice(None), o) + pos] = (x[(slice(None), slice(g * Cg, (g + 1) * Cg)) + sl] * w[o]).sum((1, 2, 3, 4))
    return y + (0 if b is None else b.reshape(1, -1, 1, 1, 1))


def _pool_len(n, k, s, p, d, ceil_mode):
    span = n + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)
    o = span // s + 1
    return o - 1 if ceil_mode and (o - 1) * s >= n + p else o


def np_max_pool3d(x, k, s, p, d, ceil_mode):
    """values and flat indices: the first maximum in (d, h, w) order"""
    k, s, p, d = _t3(k), _t3(s), _t3(p), _t3(d)
    N, C, *sz = x.shape
    out = [_pool_len(sz[a], k[a], s[a], p[a], d[a], ceil_mode) for a in range(3)]
    vals, idx = np.zeros((N, C, *out)), np.zeros((N, C, *out), np.int64)
    for n, c in itertools.product(range(N), range(C)):
        for pos in itertools.product(*map(range, out)):
            best, where = -np.inf, -1
            for tap in itertools.product(*map(range, k)):
                q = [pos[a] * s[a] - p[a] + tap[a] * d[a] for a in range(3)]
                if all(0 <= q[a] < sz[a] for a in range(3)) and x[(n, c) + tuple(q)] > best:
                    best, where = x[(n, c) + tuple(q)], (q[0] * sz[1] + q[1]) * sz[2] + q[2]
            vals[(n, c) + pos], idx[(n, c) + pos] = best, where
    return vals, idx


def np_avg_pool3d(x, k, s, p, ceil_mode, count_include_pad, divisor_override):
    k, s, p = _t3(k), _t3(s), _t3(p)
    N, C, *sz = x.shape
    out = [_pool_len(sz[a], k[a], s[a], p[a], 1, ceil_mode) for a in range(3)]
    y = np.zeros((N, C, *out))
    for pos in itertools.product(*map(range, out)):
        start = [pos[a] * s[a] - p[a] for a in range(3)]
        end = [min(start[a] + k[a], sz[a] + p[a]) for a in range(3)]
        lo, hi = [max(v, 0) for v in start], [min(end[a], sz[a]) for a in range(3)]
        total = x[(slice(None), slice(None)) + tuple(slice(lo[a], hi[a]) for a in range(3))].sum((2, 3, 4))
        if divisor_override:
            div = divisor_override
        elif count_include_pad:
            div = np.prod([end[a] - start[a] for a in range(3)])
        else:
            div = np.prod([hi[a] - lo[a] for a in range(3)])
        y[(slice(None), slice(None)) + pos] = total / div
    return y


def _adaptive(n, o):
    return [(i * n // o, -(-(i + 1) * n // o)) for i in range(o)]


def np_adaptive3d(x, out, kind):
    N, C, *sz = x.shape
    wins = [_adaptive(sz[a], out[a]) for a in range(3)]
    y, idx = np.zeros((N, C, *out)), np.zeros((N, C, *out), np.int64)
    for pos in itertools.product(*map(range, out)):
        box = x[(slice(None), slice(None)) + tuple(slice(*wins[a][pos[a]]) for a in range(3))]
        key = (slice(None), slice(None)) + pos
        if kind == "avg":
            y[key] = box.mean((2, 3, 4))
        else:
            flat = box.reshape(N, C, -1)
            y[key] = flat.max(2)
            local = np.unravel_index(flat.argmax(2), box.shape[2:])
            q = [local[a] + wins[a][pos[a]][0] for a in range(3)]
            idx[key] = (q[0] * sz[1] + q[1]) * sz[2] + q[2]
    return y, idx


# ------------------------------------------------------------------ conv3d

CONV = [(1, 0, 1, 1), (2, 1, 1, 1), ((1, 2, 1), (0, 1, 2), (2, 1, 1), 2), (1, 2, 2, 2), (3, 1, 1, 1)]


@pytest.mark.parametrize("stride,padding,dilation,groups", CONV)
def test_conv3d_against_numpy(stride, padding, dilation, groups):
    x = RNG.standard_normal((2, 4, 5, 6, 5))
    w = RNG.standard_normal((6, 4 // groups, 2, 3, 2))
    b = RNG.standard_normal(6)
    ref = np_conv3d(x, w, b, stride, padding, dilation, groups)
    np.testing.assert_allclose(F.conv3d(T(x), T(w), T(b), stride, padding, dilation, groups).numpy(), ref,
                               rtol=1e-10, atol=1e-10)
    y32 = F.conv3d(T(x[1]).float(), T(w).float(), None, stride, padding, dilation, groups)  # unbatched
    np.testing.assert_allclose(y32.numpy(), ref[1] - b.reshape(-1, 1, 1, 1), rtol=1e-4, atol=1e-4)


def test_conv3d_same_valid_and_1x1():
    x, w = RNG.standard_normal((1, 2, 4, 5, 6)), RNG.standard_normal((3, 2, 3, 2, 3))
    with pytest.warns(UserWarning, match="even kernel lengths"):
        y = F.conv3d(T(x), T(w), padding="same")
    assert tuple(y.shape) == (1, 3, 4, 5, 6)
    # even kernel along H: torch pads the extra one at the end
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (0, 1), (1, 1)))
    np.testing.assert_allclose(y.numpy(), np_conv3d(xp, w, None, 1, 0, 1, 1), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(F.conv3d(T(x), T(w), padding="valid").numpy(), np_conv3d(x, w, None, 1, 0, 1, 1),
                               rtol=1e-10, atol=1e-10)
    w1 = RNG.standard_normal((3, 2, 1, 1, 1))  # the direct path: no im2col
    np.testing.assert_allclose(F.conv3d(T(x), T(w1)).numpy(), np_conv3d(x, w1, None, 1, 0, 1, 1), rtol=1e-10,
                               atol=1e-10)


def test_conv3d_gradcheck():
    x = T(RNG.standard_normal((2, 2, 3, 4, 3)), True)
    w = T(RNG.standard_normal((4, 1, 2, 2, 2)), True)
    b = T(RNG.standard_normal(4), True)
    assert gradcheck(lambda a, c, e: F.conv3d(a, c, e, (1, 2, 1), 1, (1, 1, 2), 2), (x, w, b))


def test_conv3d_module():
    ember.manual_seed(0)
    m = ember.nn.Conv3d(2, 4, 3, padding=1, padding_mode="replicate", bias=False)
    assert repr(m) == ("Conv3d(2, 4, kernel_size=(3, 3, 3), stride=(1, 1, 1), padding=(1, 1, 1), bias=False, "
                       "padding_mode=replicate)")
    assert tuple(m.weight.shape) == (4, 2, 3, 3, 3)
    assert np.abs(m.weight.detach().numpy()).max() <= 1 / np.sqrt(2 * 27)
    x = RNG.standard_normal((1, 2, 3, 4, 5))
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1), (1, 1)), mode="edge")
    np.testing.assert_allclose(m(T(x).float()).detach().numpy(),
                               np_conv3d(xp, m.weight.detach().double().numpy(), None, 1, 0, 1, 1), rtol=1e-5,
                               atol=1e-5)


def test_conv3d_errors():
    x = ember.ones(1, 3, 5, 5, 5)
    with pytest.raises(RuntimeError, match="expected input\\[1, 3, 5, 5, 5\\] to have 2 channels"):
        F.conv3d(x, ember.ones(3, 2, 3, 3, 3))
    with pytest.raises(RuntimeError, match="\\(5 x 5 x 5\\). Kernel size: \\(6 x 3 x 3\\)"):
        F.conv3d(x, ember.ones(3, 3, 6, 3, 3))
    with pytest.raises(RuntimeError, match="list of 3 values"):
        F.conv3d(x, ember.ones(3, 3, 3, 3, 3), padding=[1, 2])
    with pytest.raises(RuntimeError, match="Expected 4D \\(unbatched\\) or 5D \\(batched\\) input to conv3d"):
        F.conv3d(ember.ones(5, 5, 5), ember.ones(3, 3, 3, 3, 3))
    with pytest.raises(RuntimeError, match="non-positive stride"):
        F.conv3d(x, ember.ones(3, 3, 3, 3, 3), stride=0)


@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("stride,padding,dilation,groups", CONV)
def test_conv3d_matches_torch(dtype, stride, padding, dilation, groups):
    x = RNG.standard_normal((2, 4, 5, 6, 5))
    w = RNG.standard_normal((6, 4 // groups, 2, 3, 2))
    b = RNG.standard_normal(6)
    res, go = {}, None
    for lib in (ember, _torch):
        dt = getattr(lib, dtype)
        ts = [lib.tensor(a, dtype=dt, requires_grad=True) for a in (x, w, b)]
        y = lib.nn.functional.conv3d(*ts, stride, padding, dilation, groups)
        go = RNG.standard_normal(tuple(y.shape)) if go is None else go
        y.backward(lib.tensor(go, dtype=dt))
        res[lib.__name__] = [y.detach().numpy()] + [t.grad.numpy() for t in ts]
    tol = 1e-4 if dtype == "float32" else 1e-10
    for a, c in zip(res["ember"], res["torch"]):
        np.testing.assert_allclose(a, c, rtol=tol, atol=tol)


# ------------------------------------------------------------------ pools

MAX = [(2, None, 0, 1, False), (3, 2, 1, 1, True), ((2, 3, 2), (1, 2, 3), (1, 1, 0), (2, 1, 3), False),
       ((2, 3, 2), (2, 2, 3), 1, (2, 1, 1), True)]


@pytest.mark.parametrize("k,s,p,d,ceil_mode", MAX)
def test_max_pool3d_against_numpy(k, s, p, d, ceil_mode):
    x = RNG.standard_normal((2, 2, 5, 6, 7))
    x[0, 0, :2, :2, :2] = 3.0  # ties: the first in (d, h, w) order wins
    vals, idx = F.max_pool3d(T(x), k, s, p, d, ceil_mode, return_indices=True)
    rv, ri = np_max_pool3d(x, k, k if s is None else s, p, d, ceil_mode)
    np.testing.assert_array_equal(vals.numpy(), rv)
    np.testing.assert_array_equal(idx.numpy(), ri)
    assert idx.dtype == ember.int64
    np.testing.assert_array_equal(F.max_pool3d(T(x[0]), k, s, p, d, ceil_mode).numpy(), rv[0])  # unbatched
    # integer input: the same windows
    xi = RNG.integers(-5, 5, (1, 2, 5, 6, 7))
    np.testing.assert_array_equal(F.max_pool3d(T(xi), k, s, p, d, ceil_mode).numpy(),
                                  np_max_pool3d(xi, k, k if s is None else s, p, d, ceil_mode)[0])


AVG = [(2, None, 0, False, True, None), (3, 2, 1, True, True, None), (3, 2, 1, True, False, None),
       ((2, 3, 2), (1, 2, 3), (1, 1, 0), False, True, 5), ((3, 3, 2), (2, 2, 3), 1, True, False, None)]


@pytest.mark.parametrize("k,s,p,ceil_mode,count_include_pad,divisor", AVG)
def test_avg_pool3d_against_numpy(k, s, p, ceil_mode, count_include_pad, divisor):
    x = RNG.standard_normal((2, 2, 5, 6, 7))
    y = F.avg_pool3d(T(x), k, s, p, ceil_mode, count_include_pad, divisor)
    ref = np_avg_pool3d(x, k, k if s is None else s, p, ceil_mode, count_include_pad, divisor)
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-12, atol=1e-12)
    xi = RNG.integers(-20, 20, (1, 2, 5, 6, 7))  # integers: exact sums divided with truncation
    yi = F.avg_pool3d(T(xi), k, s, p, ceil_mode, count_include_pad, divisor)
    assert yi.dtype == ember.int64
    ref_i = np_avg_pool3d(xi.astype(float), k, k if s is None else s, p, ceil_mode, count_include_pad, divisor)
    np.testing.assert_array_equal(yi.numpy(), np.trunc(ref_i + np.sign(ref_i) * 1e-9).astype(np.int64))


@pytest.mark.parametrize("out", [(2, 3, 4), (5, 6, 7), (3, 4, 5), (1, 1, 1)])
def test_adaptive_pools_against_numpy(out):
    x = RNG.standard_normal((2, 2, 5, 6, 7))
    ra, _ = np_adaptive3d(x, out, "avg")
    rm, ri = np_adaptive3d(x, out, "max")
    np.testing.assert_allclose(F.adaptive_avg_pool3d(T(x), out).numpy(), ra, rtol=1e-12, atol=1e-12)
    vals, idx = F.adaptive_max_pool3d(T(x), out, return_indices=True)
    np.testing.assert_array_equal(vals.numpy(), rm)
    np.testing.assert_array_equal(idx.numpy(), ri)
    assert tuple(F.adaptive_avg_pool3d(T(x[0]), (out[0], None, out[2])).shape) == (2, out[0], 6, out[2])


def test_pool_gradcheck():
    x = T(RNG.standard_normal((1, 2, 4, 5, 4)), True)
    assert gradcheck(lambda a: F.max_pool3d(a, 2, (1, 2, 1), 1, ceil_mode=True), (x,))
    assert gradcheck(lambda a: F.avg_pool3d(a, 3, 2, 1, True, False), (x,))
    assert gradcheck(lambda a: F.avg_pool3d(a, (2, 3, 2), 1, 0, divisor_override=3), (x,))
    assert gradcheck(lambda a: F.adaptive_avg_pool3d(a, (3, 2, 3)), (x,))
    assert gradcheck(lambda a: F.adaptive_max_pool3d(a, (3, 2, 3)), (x,))


def test_pool_modules():
    assert repr(ember.nn.MaxPool3d(3, 2, 1, ceil_mode=True)) == \
        "MaxPool3d(kernel_size=3, stride=2, padding=1, dilation=1, ceil_mode=True)"
    assert repr(ember.nn.AvgPool3d(3, 2, divisor_override=3)) == "AvgPool3d(kernel_size=3, stride=2, padding=0)"
    assert repr(ember.nn.AdaptiveMaxPool3d((1, 2, 3), True)) == "AdaptiveMaxPool3d(output_size=(1, 2, 3))"
    assert repr(ember.nn.AdaptiveAvgPool3d(3)) == "AdaptiveAvgPool3d(output_size=3)"
    x = RNG.standard_normal((1, 2, 4, 5, 6))
    v, i = ember.nn.MaxPool3d(2, return_indices=True)(T(x))
    np.testing.assert_array_equal(i.numpy(), np_max_pool3d(x, 2, 2, 0, 1, False)[1])
    np.testing.assert_allclose(ember.nn.AvgPool3d(2, 1, 1, count_include_pad=False)(T(x)).numpy(),
                               np_avg_pool3d(x, 2, 1, 1, False, False, None), rtol=1e-12)
    np.testing.assert_allclose(ember.nn.AdaptiveAvgPool3d(2)(T(x)).numpy(), np_adaptive3d(x, (2, 2, 2), "avg")[0],
                               rtol=1e-12)
    v, i = ember.nn.AdaptiveMaxPool3d((2, 3, 2), return_indices=True)(T(x))
    np.testing.assert_array_equal(i.numpy(), np_adaptive3d(x, (2, 3, 2), "max")[1])


POOL_ERRORS = [
    (lambda L, x: L.nn.functional.max_pool3d(x, 3, 2, 2), RuntimeError, "pad should be at most half"),
    (lambda L, x: L.nn.functional.max_pool3d(x, 8), RuntimeError, "Output size is too small"),
    (lambda L, x: L.nn.functional.max_pool3d(x, [2, 2]), RuntimeError, "tuple of three ints"),
    (lambda L, x: L.nn.functional.max_pool3d(x[0, 0], 2), RuntimeError, "non-empty 4D or 5D"),
    (lambda L, x: L.nn.functional.max_pool3d(x, 0), RuntimeError, "stride should not be zero"),
    (lambda L, x: L.nn.functional.max_pool3d(x, 2, dilation=0), RuntimeError, "dilation should be greater"),
    (lambda L, x: L.nn.functional.max_pool3d(x.bool(), 2), NotImplementedError, "not implemented for 'Bool'"),
    (lambda L, x: L.nn.functional.avg_pool3d(x, 8), RuntimeError, "smaller than kernel size"),
    (lambda L, x: L.nn.functional.avg_pool3d(x, 2, divisor_override=0), RuntimeError, "divisor must be not zero"),
    (lambda L, x: L.nn.functional.adaptive_max_pool3d(x, (2, 3)), RuntimeError, "output_size.size\\(\\) must be 3"),
    (lambda L, x: L.nn.functional.adaptive_avg_pool3d(x[0, 0], (2, 3, 3)), ValueError, "at least 4"),
    (lambda L, x: L.nn.functional.adaptive_avg_pool3d(x.long(), 2), NotImplementedError, "not implemented for 'Long'"),
]


@pytest.mark.parametrize("case", range(len(POOL_ERRORS)))
def test_pool_errors(case, L):
    fn, exc, msg = POOL_ERRORS[case]
    with pytest.raises(exc, match=msg):
        fn(L, L.ones(1, 3, 5, 5, 5))


@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,args", [
    ("max_pool3d", (3, 2, 1, 1, True, True)), ("max_pool3d", ((2, 3, 2), (1, 2, 3), (1, 1, 0), (2, 1, 3))),
    ("avg_pool3d", (3, 2, 1, True, False)), ("avg_pool3d", ((2, 3, 2), (1, 2, 3), (1, 1, 0), False, True, 5)),
    ("adaptive_avg_pool3d", ((2, None, 4),)), ("adaptive_max_pool3d", ((4, 5, 3), True))])
def test_pools_match_torch(dtype, name, args):
    x = RNG.standard_normal((2, 3, 5, 6, 7))
    res, go = {}, None
    for lib in (ember, _torch):
        xs = lib.tensor(x, dtype=getattr(lib, dtype), requires_grad=True)
        r = getattr(lib.nn.functional, name)(xs, *args)
        y, idx = r if isinstance(r, tuple) else (r, None)
        go = RNG.standard_normal(tuple(y.shape)) if go is None else go
        y.backward(lib.tensor(go, dtype=getattr(lib, dtype)))
        res[lib.__name__] = [y.detach().numpy(), xs.grad.numpy()] + ([] if idx is None else [idx.numpy()])
    tol = 1e-5 if dtype == "float32" else 1e-12
    for a, c in zip(res["ember"], res["torch"]):
        np.testing.assert_allclose(a, c, rtol=tol, atol=tol)


# ------------------------------------------------------------------ 'cuda'

def test_cuda_matches_cpu(cuda):
    x = RNG.standard_normal((2, 2, 4, 5, 6))
    w = RNG.standard_normal((3, 2, 2, 2, 3))
    cases = [lambda a, c: F.conv3d(a, c, None, 1, 1),
             lambda a, c: F.max_pool3d(a, 2, 1, 1),
             lambda a, c: F.avg_pool3d(a, 3, 2, 1, True, False),
             lambda a, c: F.adaptive_avg_pool3d(a, (2, 3, 2)),
             lambda a, c: F.adaptive_max_pool3d(a, (3, 2, 4))]
    for fn in cases:
        xc, wc = T(x, True), T(w, True)
        xg, wg = T(x).cuda().requires_grad_(), T(w).cuda().requires_grad_()
        yc, yg = fn(xc, wc), fn(xg, wg)
        assert yg.device.type == "cuda"
        np.testing.assert_allclose(yg.detach().cpu().numpy(), yc.detach().numpy(), rtol=1e-12, atol=1e-12)
        yc.sum().backward()
        yg.sum().backward()
        np.testing.assert_allclose(xg.grad.cpu().numpy(), xc.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_max_pools_with_nans():
    """torch's scan takes every NaN it meets: the window's last NaN (in (d, h, w) order) is the index."""
    x = np.zeros((1, 1, 2, 2, 2))
    x[0, 0, 0, 1, 0] = x[0, 0, 1, 0, 1] = np.nan
    x[0, 0, 1, 1, 1] = 5.0
    v, i = F.max_pool3d(T(x), 2, return_indices=True)
    assert np.isnan(v.item()) and i.item() == 5  # (1, 0, 1)
    v, i = F.adaptive_max_pool3d(T(x), 1, return_indices=True)
    assert np.isnan(v.item()) and i.item() == 5
    if _torch is not None:
        y = RNG.standard_normal((2, 3, 5, 6, 7))
        y[y > 1.2] = np.nan
        for args in [(2,), (3, 2, 1, 1, True), ((2, 3, 2), (1, 2, 3), (1, 1, 0), (2, 1, 3))]:
            a = _torch.nn.functional.max_pool3d(_torch.tensor(y), *args, return_indices=True)[1].numpy()
            np.testing.assert_array_equal(F.max_pool3d(T(y), *args, return_indices=True)[1].numpy(), a)


def test_conv_forward_with_another_weight():
    """Conv*d._conv_forward(input, weight, bias): torch's hook for weight-transforming subclasses."""
    m = ember.nn.Conv3d(2, 3, 2, padding=1, padding_mode="circular").double()
    x, w = RNG.standard_normal((1, 2, 3, 3, 3)), RNG.standard_normal((3, 2, 2, 2, 2))
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1), (1, 1)), mode="wrap")
    np.testing.assert_allclose(m._conv_forward(T(x), T(w), None).detach().numpy(), np_conv3d(xp, w, None, 1, 0, 1, 1),
                               rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("out", [(2, 3), (5, 7), (3, None), 1])
def test_adaptive_max_pool1d_2d(out):
    x = RNG.standard_normal((2, 3, 5, 7))
    o2 = [out, out] if isinstance(out, int) else [out[0], 7 if out[1] is None else out[1]]
    rv, ri = np_adaptive3d(x[:, :, None], [1] + o2, "max")  # depth one: indices h * W + w
    v, i = F.adaptive_max_pool2d(T(x), out, return_indices=True)
    np.testing.assert_array_equal(v.numpy(), rv[:, :, 0])
    np.testing.assert_array_equal(i.numpy(), ri[:, :, 0])
    np.testing.assert_array_equal(ember.nn.AdaptiveMaxPool2d(out)(T(x[0])).numpy(), rv[0, :, 0])
    L = o2[1]
    rv1, ri1 = np_adaptive3d(x[:, :, None, :1, :], [1, 1, L], "max")
    v1, i1 = ember.nn.AdaptiveMaxPool1d(L, return_indices=True)(T(x[:, :, 0]))
    np.testing.assert_array_equal(v1.numpy(), rv1[:, :, 0, 0])
    np.testing.assert_array_equal(i1.numpy(), ri1[:, :, 0, 0])
    xg = T(x[:1, :2], True)
    assert gradcheck(lambda a: F.adaptive_max_pool2d(a, out), (xg,))
    if _torch is not None:
        tv, ti = _torch.nn.functional.adaptive_max_pool2d(_torch.tensor(x), out, True)
        np.testing.assert_array_equal(i.numpy(), ti.numpy())
    with pytest.raises(RuntimeError, match="output_size.size\\(\\) must be 2"):
        F.adaptive_max_pool2d(T(x), (2, 3, 4))
    with pytest.raises(RuntimeError, match="should contain one int"):
        F.adaptive_max_pool1d(T(x[0]), (2, 3))
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        F.adaptive_max_pool2d(T(x).long(), 2)
