"""F.affine_grid and F.grid_sample (bilinear / trilinear, nearest, bicubic;
padding zeros / border / reflection; align_corners): values against a
point-by-point NumPy reference written from the sampling formulas,
gradients wrt input and grid by finite differences (gradcheck, float64)
and against torch; torch's errors and warnings; a 'cuda' tensor gives the
CPU's result."""
import itertools
import math
import warnings

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
MODES = list(itertools.product(["zeros", "border", "reflection"], [False, True]))


def T(a, grad=False):
    t = ember.from_numpy(np.ascontiguousarray(a))
    return t.requires_grad_() if grad else t


# ------------------------------------------------------------------ NumPy reference, one point at a time

def _unnorm(c, n, align):
    return (c + 1) / 2 * (n - 1) if align else ((c + 1) * n - 1) / 2


def _reflect(c, lo2, hi2):
    if lo2 == hi2:
        return 0.0
    lo, span = lo2 / 2, (hi2 - lo2) / 2
    c = abs(c - lo)
    flips, extra = math.floor(c / span), math.fmod(c, span)
    return extra + lo if flips % 2 == 0 else span - extra + lo


def _pad(c, n, mode, align):
    if mode == "border":
        return min(max(c, 0), n - 1)
    if mode == "reflection":
        c = _reflect(c, 0, 2 * (n - 1)) if align else _reflect(c, -1, 2 * n - 1)
        return min(max(c, 0), n - 1)
    return c


def _at(img, pos):
    """img (C, *sizes) at integer pos, zeros outside"""
    if all(0 <= p < n for p, n in zip(pos, img.shape[1:])):
        return img[(slice(None),) + tuple(pos)]
    return np.zeros(img.shape[0])


def _cubic(t):
    A = -0.75
    near = lambda x: ((A + 2) * x - (A + 3)) * x * x + 1  # noqa: E731
    far = lambda x: ((A * x - 5 * A) * x + 8 * A) * x - 4 * A  # noqa: E731
    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def np_grid_sample(x, grid, mode, padding, align):
    N, C, *sizes = x.shape
    k = len(sizes)
    out = np.zeros((N, C) + grid.shape[1:-1])
    for n in range(N):
        for pos in itertools.product(*map(range, grid.shape[1:-1])):
            g = grid[(n,) + pos]
            raw = [_unnorm(g[k - 1 - a], sizes[a], align) for a in range(k)]  # axis a: depth/height/width
            if mode == "bicubic":
                base = [math.floor(r) for r in raw]
                w = [_cubic(r - b) for r, b in zip(raw, base)]
                v = 0
                for i, j in itertools.product(range(4), range(4)):
                    q = [int(_pad(base[0] - 1 + i, sizes[0], padding, align)),
                         int(_pad(base[1] - 1 + j, sizes[1], padding, align))]
                    v = v + w[0][i] * w[1][j] * _at(x[n], q)
                out[(n, slice(None)) + pos] = v
                continue
            src = [_pad(r, s, padding, align) for r, s in zip(raw, sizes)]
            if mode == "nearest":
                out[(n, slice(None)) + pos] = _at(x[n], [int(np.round(s)) for s in src])
                continue
            lo = [math.floor(s) for s in src]
            v = 0
            for bits in itertools.product((0, 1), repeat=k):
                w = np.prod([(s - f) if b else (1 - (s - f)) for s, f, b in zip(src, lo, bits)])
                v = v + w * _at(x[n], [f + b for f, b in zip(lo, bits)])
            out[(n, slice(None)) + pos] = v
    return out


def _grid(*shape):
    g = RNG.uniform(-1.4, 1.4, shape)
    g.reshape(-1)[:3] = [1.0, -1.0, 0.5]  # on the edges and at a pixel boundary
    return g


@pytest.mark.parametrize("padding,align", MODES)
@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
def test_grid_sample_2d_against_numpy(mode, padding, align):
    x, g = RNG.standard_normal((2, 3, 4, 5)), _grid(2, 3, 4, 2)
    ref = np_grid_sample(x, g, mode, padding, align)
    np.testing.assert_allclose(F.grid_sample(T(x), T(g), mode, padding, align).numpy(), ref, rtol=1e-10,
                               atol=1e-10)
    y32 = F.grid_sample(T(x).float(), T(g).float(), mode, padding, align)
    assert y32.dtype == ember.float32
    if mode != "nearest":  # float32 rounding may move a nearest-pixel choice
        np.testing.assert_allclose(y32.numpy(), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("padding,align", MODES)
@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
def test_grid_sample_3d_against_numpy(mode, padding, align):
    x, g = RNG.standard_normal((2, 2, 3, 4, 5)), _grid(2, 2, 3, 2, 3)
    np.testing.assert_allclose(F.grid_sample(T(x), T(g), mode, padding, align).numpy(),
                               np_grid_sample(x, g, mode, padding, align), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("mode,padding,align", [("bilinear", "zeros", False), ("bilinear", "border", True),
                                                ("bilinear", "reflection", False), ("bicubic", "zeros", True),
                                                ("bicubic", "reflection", False)])
def test_grid_sample_gradcheck(mode, padding, align):
    x = T(RNG.standard_normal((1, 2, 3, 4)), True)
    g = T(RNG.uniform(-0.9, 0.9, (1, 2, 3, 2)), True)  # away from pixel boundaries and edges (kinks)
    assert gradcheck(lambda a, b: F.grid_sample(a, b, mode, padding, align), (x, g))
    x3 = T(RNG.standard_normal((1, 1, 2, 3, 3)), True)
    g3 = T(RNG.uniform(-0.9, 0.9, (1, 2, 1, 2, 3)), True)
    if mode == "bilinear":
        assert gradcheck(lambda a, b: F.grid_sample(a, b, mode, padding, align), (x3, g3))


def test_nearest_grid_gradient_is_zero():
    x, g = T(RNG.standard_normal((1, 2, 3, 4)), True), T(RNG.uniform(-1, 1, (1, 2, 2, 2)), True)
    F.grid_sample(x, g, "nearest", align_corners=False).sum().backward()
    np.testing.assert_array_equal(g.grad.numpy(), np.zeros((1, 2, 2, 2)))
    assert x.grad.numpy().sum() == 2 * 4  # each of the 4 points picks one pixel per channel


def np_affine_grid(theta, size, align):
    N, C, *sp = size
    axes = [np.zeros(1) if n <= 1 else np.linspace(-1, 1, n) * (1 if align else (n - 1) / n) for n in sp]
    mesh = np.meshgrid(*axes, indexing="ij")
    base = np.stack(list(mesh)[::-1] + [np.ones(sp)], -1)  # (.., k + 1): x, y(, z), 1
    return np.einsum("...j,nij->n...i", base, theta)


@pytest.mark.parametrize("size", [[2, 3, 4, 5], [2, 1, 3, 4, 2], [2, 3, 1, 1]])
@pytest.mark.parametrize("align", [False, True])
def test_affine_grid(size, align):
    k = len(size) - 2
    theta = RNG.standard_normal((2, k, k + 1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # unit-size grids with align_corners=True warn, as torch's do
        out = F.affine_grid(T(theta), size, align)
    np.testing.assert_allclose(out.numpy(), np_affine_grid(theta, size, align), rtol=1e-12, atol=1e-12)
    th = T(theta, True)
    assert gradcheck(lambda t: F.affine_grid(t, [2, 1, 2, 3] if k == 2 else [2, 1, 2, 2, 3], align), (th,))


def test_identity_theta_reproduces_input():
    x = T(RNG.standard_normal((1, 2, 4, 5)))
    theta = T(np.array([[[1.0, 0, 0], [0, 1.0, 0]]]))
    for align in (False, True):
        grid = F.affine_grid(theta, [1, 2, 4, 5], align)
        np.testing.assert_allclose(F.grid_sample(x, grid, align_corners=align).numpy(), x.numpy(), atol=1e-12)


ERRORS = [
    (lambda L, x, g: L.nn.functional.grid_sample(x, g, mode="foo", align_corners=False), ValueError,
     "expected mode to be 'bilinear', 'nearest' or 'bicubic'"),
    (lambda L, x, g: L.nn.functional.grid_sample(x, g, padding_mode="foo", align_corners=False), ValueError,
     "expected padding_mode to be 'zeros', 'border', or 'reflection'"),
    (lambda L, x, g: L.nn.functional.grid_sample(x, g.double(), align_corners=False), RuntimeError,
     "expected scalar type Float but found Double"),
    (lambda L, x, g: L.nn.functional.grid_sample(x, g[:1], align_corners=False), RuntimeError,
     "same batch size"),
    (lambda L, x, g: L.nn.functional.grid_sample(x, g[..., :1], align_corners=False), RuntimeError,
     "expected grid to have size 2 in last dimension"),
    (lambda L, x, g: L.nn.functional.grid_sample(x[:, :, :0], g, align_corners=False), RuntimeError,
     "non-empty spatial dimensions"),
    (lambda L, x, g: L.nn.functional.grid_sample(x.int(), g.int(), align_corners=False), NotImplementedError,
     "not implemented for 'Int'"),
    (lambda L, x, g: L.nn.functional.affine_grid(L.ones(2, 2, 3), [2, 3, 5, 6, 7], align_corners=False), ValueError,
     "Nx3x4"),
    (lambda L, x, g: L.nn.functional.affine_grid(L.ones(2, 2, 3).int(), [2, 3, 5, 6], align_corners=False),
     ValueError, "floating point type"),
    (lambda L, x, g: L.nn.functional.affine_grid(L.ones(2, 2, 3), [2, 3, 5], align_corners=False),
     NotImplementedError, "only supports 4D and 5D sizes"),
    (lambda L, x, g: L.nn.functional.affine_grid(L.ones(2, 2, 3), [2, 3, 0, 6], align_corners=False), ValueError,
     "non-zero, positive output size"),
]


@pytest.mark.parametrize("case", range(len(ERRORS)))
def test_errors(case, L):
    fn, exc, msg = ERRORS[case]
    with pytest.raises(exc, match=msg):
        fn(L, L.ones(2, 3, 5, 6), L.zeros(2, 4, 7, 2))


def test_align_corners_default_warns(L):
    with pytest.warns(UserWarning, match="align_corners=False since 1.3.0"):
        L.nn.functional.grid_sample(L.ones(1, 1, 2, 2), L.zeros(1, 1, 1, 2))
    with pytest.warns(UserWarning, match="align_corners=False since 1.3.0"):
        L.nn.functional.affine_grid(L.ones(1, 2, 3), [1, 1, 2, 2])


@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("padding,align", MODES)
@pytest.mark.parametrize("mode,k", [("bilinear", 2), ("nearest", 2), ("bicubic", 2), ("bilinear", 3),
                                    ("nearest", 3)])
def test_matches_torch(mode, k, padding, align, dtype):
    x = RNG.standard_normal((2, 3) + (4, 5, 6)[3 - k:])
    g = RNG.uniform(-1.3, 1.3, (2,) + (3, 4, 2)[3 - k:] + (k,))
    res, go = {}, None
    for lib in (ember, _torch):
        dt = getattr(lib, dtype)
        xs, gs = lib.tensor(x, dtype=dt, requires_grad=True), lib.tensor(g, dtype=dt, requires_grad=True)
        y = lib.nn.functional.grid_sample(xs, gs, mode, padding, align)
        go = RNG.standard_normal(tuple(y.shape)) if go is None else go
        y.backward(lib.tensor(go, dtype=dt))
        res[lib.__name__] = [y.detach().numpy(), xs.grad.numpy(), gs.grad.numpy()]
    tol = 1e-4 if dtype == "float32" else 1e-10
    for a, c in zip(res["ember"], res["torch"]):
        np.testing.assert_allclose(a, c, rtol=tol, atol=tol)


def test_cuda_matches_cpu(cuda):
    x = RNG.standard_normal((2, 2, 4, 5))
    theta = RNG.standard_normal((2, 2, 3)) * 0.5
    outs = []
    for dev in ("cpu", "cuda"):
        xs, th = T(x).to(dev).requires_grad_(), T(theta).to(dev).requires_grad_()
        y = F.grid_sample(xs, F.affine_grid(th, [2, 2, 3, 4], False), "bilinear", "reflection", False)
        assert y.device.type == dev
        y.sum().backward()
        outs.append([t.detach().cpu().numpy() for t in (y, xs.grad, th.grad)])
    for a, c in zip(*outs):
        np.testing.assert_allclose(a, c, rtol=1e-12, atol=1e-12)


def test_nan_grid_and_empty_batch():
    x = T(RNG.standard_normal((1, 2, 3, 3)))
    nan, minus_one = T(np.array([[[[np.nan, 0.2]]]])), T(np.array([[[[-1.0, 0.2]]]]))
    for mode in ("bilinear", "nearest"):  # border / reflection clip a NaN coordinate as -1
        for padding in ("border", "reflection"):
            np.testing.assert_array_equal(F.grid_sample(x, nan, mode, padding, False).numpy(),
                                          F.grid_sample(x, minus_one, mode, padding, False).numpy())
    assert np.isnan(F.grid_sample(x, nan, "bilinear", "zeros", False).numpy()).all()  # zeros: NaN weights
    np.testing.assert_array_equal(F.grid_sample(x, nan, "nearest", "zeros", False).numpy(), 0)
    assert tuple(F.grid_sample(ember.ones(0, 2, 3, 3), ember.ones(0, 4, 5, 2), align_corners=True).shape) == \
        (0, 2, 4, 5)


@needs_torch
@pytest.mark.parametrize("padding,align", MODES)
@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
def test_nan_grid_matches_torch(mode, padding, align):
    x = RNG.standard_normal((1, 1, 3, 3))
    g = np.array([np.nan, 0.2, np.nan, 0.1, 0.6, np.nan, 0.3, -0.4]).reshape(1, 1, 4, 2)
    a = _torch.nn.functional.grid_sample(_torch.tensor(x), _torch.tensor(g), mode, padding, align).numpy()
    np.testing.assert_allclose(F.grid_sample(T(x), T(g), mode, padding, align).numpy(), a, rtol=1e-12,
                               atol=1e-12, equal_nan=True)
