"""F.interpolate (nearest, nearest-exact, linear, bilinear, bicubic, area),
its deprecated aliases and the Upsample modules.

References: NumPy weight matrices built from the documented index rules
(tests/op_db.py's interp_matrix: y = Ah @ x @ Aw^T per plane, the gradient
Ah^T @ g @ Aw), hand-computed values, and torch when installed (values,
gradients, grad_fn names, warnings, exception types). The op-level tests
(every dtype and layout of each `_upsample_*` op and its `_backward`, torch's
aten ops as the reference) are op_db entries; gradcheck / gradgradcheck cases
are in tests/autograd_cases_interp.py.
"""
import pickle
import warnings

import numpy as np
import pytest

import ember
from ember.autograd import gradcheck, gradgradcheck
from op_db import interp_matrix, rng_for

try:
    import torch as _torch
except ImportError:
    _torch = None
needs_torch = pytest.mark.skipif(_torch is None, reason="torch not installed")

F = ember.nn.functional
AXIS_MODE = {"nearest": "nearest", "nearest-exact": "nearest-exact", "linear": "linear", "bilinear": "linear",
             "bicubic": "cubic"}


# ---------------------------------------------------------------------------
# the reference: F.interpolate's size rules, then the per-axis matrices
def ref_sizes(in_sp, size, scale_factor, recompute):
    """(output sizes, scales handed to the kernel) as the documentation states."""
    n = len(in_sp)
    if size is not None:
        return (list(size) if isinstance(size, (list, tuple)) else [size] * n), [None] * n
    sf = list(scale_factor) if isinstance(scale_factor, (list, tuple)) else [scale_factor] * n
    out = [int(i * s) for i, s in zip(in_sp, sf)]  # floor for positive sizes
    return out, ([None] * n if recompute else sf)


def ref_matrices(x_shape, mode, size=None, scale_factor=None, align_corners=None, recompute=None):
    in_sp = list(x_shape[2:])
    out, scales = ref_sizes(in_sp, size, scale_factor, recompute)
    shortcut = mode == "nearest" and len(in_sp) == 2  # upsample_nearest2d's copy / o // 2 (see op_db)
    return [interp_matrix(AXIS_MODE[mode], i, o, bool(align_corners), s, shortcut)
            for i, o, s in zip(in_sp, out, scales)]


def ref_forward(x, mats):
    x = np.asarray(x, np.float64)
    if len(mats) == 1:
        return x @ mats[0].T
    return mats[0] @ x @ mats[1].T


def ref_backward(g, mats):
    g = np.asarray(g, np.float64)
    if len(mats) == 1:
        return g @ mats[0]
    return mats[0].T @ g @ mats[1]


def _x(shape, key=0):
    return rng_for("interp", shape, key).standard_normal(shape)


# (mode, input shape, kwargs): upsampling, downsampling, odd sizes, non-integer scales
CASES = []
for _shape, _mode in [((2, 3, 5), "nearest"), ((2, 3, 5), "nearest-exact"), ((2, 3, 5), "linear"),
                      ((2, 3, 5, 7), "nearest"), ((2, 3, 5, 7), "nearest-exact"), ((2, 3, 5, 7), "bilinear"),
                      ((2, 3, 5, 7), "bicubic")]:
    _nd = len(_shape) - 2
    _kws = [dict(size=9 if _nd == 1 else (9, 4)), dict(size=3 if _nd == 1 else (3, 11)), dict(size=1),
            dict(scale_factor=2), dict(scale_factor=0.5), dict(scale_factor=1.7), dict(scale_factor=0.37),
            dict(scale_factor=2.9), dict(scale_factor=3), dict(scale_factor=1.3, recompute_scale_factor=True),
            dict(scale_factor=(1.5,) if _nd == 1 else (1.5, 0.8))]
    for _kw in _kws:
        if _mode in ("linear", "bilinear", "bicubic"):
            CASES += [(_mode, _shape, dict(_kw, align_corners=ac)) for ac in (False, True)]
        else:
            CASES.append((_mode, _shape, _kw))


def _id(c):
    return f"{c[0]}-{len(c[1]) - 2}d-" + ",".join(f"{k}={v}" for k, v in c[2].items())


def _mats_for(mode, shape, kw):
    return ref_matrices(shape, mode, kw.get("size"), kw.get("scale_factor"), kw.get("align_corners"),
                        kw.get("recompute_scale_factor"))


@pytest.mark.parametrize("mode,shape,kw", [pytest.param(*c, id=_id(c)) for c in CASES])
def test_values_and_gradient_match_numpy(mode, shape, kw):
    """float64: forward against Ah @ x @ Aw^T and the gradient against Ah^T @ g @ Aw."""
    xv = _x(shape)
    mats = _mats_for(mode, shape, kw)
    want = ref_forward(xv, mats)
    x = ember.from_numpy(xv.copy()).requires_grad_()
    y = F.interpolate(x, mode=mode, **kw)
    assert tuple(y.shape) == want.shape
    np.testing.assert_allclose(y.detach().numpy(), want, rtol=1e-12, atol=1e-12)
    g = _x(want.shape, 1)
    y.backward(ember.from_numpy(g))
    np.testing.assert_allclose(x.grad.numpy(), ref_backward(g, mats), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("mode,shape,kw", [pytest.param(*c, id=_id(c)) for c in CASES[::3]])
def test_float32_and_strided_inputs(mode, shape, kw):
    """float32 (weights in float, as torch) and transposed / sliced inputs."""
    xv = _x(shape).astype(np.float32)
    want = ref_forward(xv, _mats_for(mode, shape, kw))
    base = ember.from_numpy(np.ascontiguousarray(np.swapaxes(xv, -1, -2))).transpose(-1, -2)
    big = np.zeros(shape[:-1] + (2 * shape[-1],), np.float32)
    big[..., ::2] = xv
    sliced = ember.from_numpy(big)[..., ::2]
    for x in (ember.from_numpy(xv.copy()), base, sliced):
        y = F.interpolate(x, mode=mode, **kw)
        assert y.dtype == ember.float32
        np.testing.assert_allclose(y.numpy(), want, rtol=2e-5, atol=2e-5)


def test_hand_values():
    x = ember.tensor([[[0.0, 1.0, 2.0]]])
    # nearest to 5: floor(o * 3/5) = 0 0 1 1 2; nearest-exact: floor((o + .5) * 3/5) = 0 0 1 2 2
    assert F.interpolate(x, size=5).tolist() == [[[0, 0, 1, 1, 2]]]
    assert F.interpolate(x, size=5, mode="nearest-exact").tolist() == [[[0, 0, 1, 2, 2]]]
    # linear, corners aligned: 0 .5 1 1.5 2; half-pixel: 0.6 (o + .5) - .5 clamped = 0 .4 1 1.6 2
    assert F.interpolate(x, size=5, mode="linear", align_corners=True).tolist() == [[[0, 0.5, 1, 1.5, 2]]]
    np.testing.assert_allclose(F.interpolate(x, size=5, mode="linear").numpy(), [[[0, 0.4, 1, 1.6, 2]]], atol=1e-6)
    # bilinear 2x2 -> 3x3 with corners: the centre is the mean
    y = F.interpolate(ember.tensor([[[[0.0, 2.0], [4.0, 6.0]]]]), size=3, mode="bilinear", align_corners=True)
    assert y.tolist() == [[[[0, 1, 2], [2, 3, 4], [4, 5, 6]]]]
    # the given scale factor (not in/out) sets the source: 5 * 1.1 -> 5 outputs, floor(o / 1.1)
    assert F.interpolate(ember.arange(5.0).view(1, 1, 5), scale_factor=1.1).tolist() == [[[0, 0, 1, 2, 3]]]
    # ... unless recomputed from the sizes
    assert F.interpolate(ember.arange(5.0).view(1, 1, 5), scale_factor=1.1,
                         recompute_scale_factor=True).tolist() == [[[0, 1, 2, 3, 4]]]
    # bicubic at the sample points of align_corners=True reproduces the input
    xv = _x((1, 1, 3, 4))
    y = F.interpolate(ember.from_numpy(xv), size=(3, 4), mode="bicubic", align_corners=True)
    np.testing.assert_allclose(y.numpy(), xv, atol=1e-12)


def test_big_threaded_planes_match_numpy():
    """Many planes (the OpenMP split) forward and backward, float32 and float64."""
    for dt in (np.float32, np.float64):
        xv = _x((4, 8, 33, 20)).astype(dt)
        for mode in ("bilinear", "nearest", "bicubic"):
            mats = ref_matrices(xv.shape, mode, scale_factor=2.0)
            x = ember.from_numpy(xv.copy()).requires_grad_()
            y = F.interpolate(x, scale_factor=2.0, mode=mode)
            tol = 1e-4 if dt == np.float32 else 1e-12
            np.testing.assert_allclose(y.detach().numpy(), ref_forward(xv, mats), rtol=tol, atol=tol)
            g = _x(tuple(y.shape), 2).astype(dt)
            y.backward(ember.from_numpy(g))
            np.testing.assert_allclose(x.grad.numpy(), ref_backward(g, mats), rtol=tol, atol=tol)


@pytest.mark.parametrize("shape", [(1, 1, 150, 120), (1, 2, 151, 33), (1, 3, 700)])
def test_few_big_planes_split_into_row_bands(shape):
    """Fewer planes than threads: the forward splits output rows among threads."""
    saved = ember.get_num_threads()
    ember.set_num_threads(3)
    try:
        xv = _x(shape)
        for mode in (["nearest", "bilinear", "bicubic", "nearest-exact"] if len(shape) == 4 else ["nearest", "linear"]):
            mats = ref_matrices(shape, mode, scale_factor=1.9)
            y = F.interpolate(ember.from_numpy(xv), scale_factor=1.9, mode=mode)
            np.testing.assert_allclose(y.numpy(), ref_forward(xv, mats), rtol=1e-12, atol=1e-12)
    finally:
        ember.set_num_threads(saved)


def test_empty_batch_and_area():
    y = F.interpolate(ember.zeros(0, 2, 5), size=3, mode="linear")
    assert tuple(y.shape) == (0, 2, 3)
    xv = _x((2, 3, 6, 4))
    x = ember.from_numpy(xv)
    np.testing.assert_allclose(F.interpolate(x, size=(3, 2), mode="area").numpy(),
                               xv.reshape(2, 3, 3, 2, 2, 2).mean((3, 5)), atol=1e-12)
    # area with a scale factor: the size is recomputed, floor(6 * .5) x floor(4 * .5)
    assert tuple(F.interpolate(x, scale_factor=0.5, mode="area").shape) == (2, 3, 3, 2)
    assert tuple(F.interpolate(ember.from_numpy(xv[0]), size=2, mode="area").shape) == (3, 6, 2)


def test_dtypes():
    u = ember.from_numpy(np.arange(12, dtype=np.uint8).reshape(1, 1, 3, 4))
    y = F.interpolate(u, size=(5, 7))
    assert y.dtype == ember.uint8
    mats = ref_matrices((1, 1, 3, 4), "nearest", size=(5, 7))
    np.testing.assert_array_equal(y.numpy(), ref_forward(u.numpy(), mats).astype(np.uint8))
    for k in (2, 3):  # integer factors: each element repeated k x k times
        np.testing.assert_array_equal(F.interpolate(u, scale_factor=k).numpy(),
                                      u.numpy().repeat(k, axis=2).repeat(k, axis=3))
        np.testing.assert_array_equal(F.interpolate(u[0], scale_factor=k).numpy(), u[0].numpy().repeat(k, axis=2))
    for dt in (ember.float16, ember.bfloat16):
        xv = _x((1, 2, 4, 5)).astype(np.float32)
        x = ember.from_numpy(xv).to(dt)
        xw = x.float().numpy()  # the rounded inputs
        for mode in ("nearest", "bilinear"):
            y = F.interpolate(x, scale_factor=1.5, mode=mode)
            assert y.dtype == dt
            want = ref_forward(xw, ref_matrices(xv.shape, mode, scale_factor=1.5))
            np.testing.assert_allclose(y.float().numpy(), want, rtol=2e-2, atol=2e-2)
    for mode in ("nearest", "bilinear"):
        with pytest.raises(NotImplementedError, match="Int"):
            F.interpolate(ember.ones(1, 1, 2, 2, dtype=ember.int32), size=3, mode=mode)
    with pytest.raises(NotImplementedError):  # torch has a uint8 linear kernel neither
        F.interpolate(ember.ones(1, 1, 2, dtype=ember.uint8), size=3, mode="linear")


def test_uint8_bilinear_is_not_implemented():
    """torch has a fixed-point uint8 bilinear/bicubic kernel; ember says clearly it has not."""
    with pytest.raises(NotImplementedError, match="upsample_bilinear2d.*Byte"):
        F.interpolate(ember.ones(1, 1, 2, 2, dtype=ember.uint8), size=3, mode="bilinear")


# ---------------------------------------------------------------------------
# errors: (id, call(L), exception torch raises)
def _t(L, *shape):
    return L.ones(*shape)


ERRORS = [
    ("size and scale", lambda L: L.nn.functional.interpolate(_t(L, 1, 1, 4), size=3, scale_factor=2), ValueError),
    ("neither", lambda L: L.nn.functional.interpolate(_t(L, 1, 1, 4)), ValueError),
    ("align with nearest", lambda L: L.nn.functional.interpolate(_t(L, 1, 1, 4), size=3, align_corners=True),
     ValueError),
    ("align with area", lambda L: L.nn.functional.interpolate(_t(L, 1, 1, 4), size=3, mode="area",
                                                              align_corners=False), ValueError),
    ("size rank", lambda L: L.nn.functional.interpolate(_t(L, 1, 1, 4), size=(3, 4)), ValueError),
    ("scale rank", lambda L: L.nn.functional.interpolate(_t(L, 1, 1, 4, 4), scale_factor=(2.0,)), ValueError),
    ("float size", lambda L: L.nn.functional.interpolate(_t(L, 1, 1, 4, 4), size=(3.0, 2)), TypeError),
    ("recompute with size", lambda L: L.nn.functional.interpolate(_t(L, 1, 1, 4), size=3,
                                                                  recompute_scale_factor=True), ValueError),
    ("antialias nearest", lambda L: L.nn.functional.interpolate(_t(L, 1, 1, 4), size=3, antialias=True),
     ValueError),
    ("antialias 3d linear", lambda L: L.nn.functional.interpolate(_t(L, 1, 1, 4), size=3, mode="linear",
                                                                  antialias=True), ValueError),
    ("lanczos without antialias", lambda L: L.nn.functional.interpolate(_t(L, 1, 1, 4, 4), size=3, mode="lanczos"),
     ValueError),
    ("bilinear of 3d", lambda L: L.nn.functional.interpolate(_t(L, 1, 1, 4), size=3, mode="bilinear"),
     NotImplementedError),
    ("linear of 4d", lambda L: L.nn.functional.interpolate(_t(L, 1, 1, 4, 4), size=3, mode="linear"),
     NotImplementedError),
    ("bicubic of 3d", lambda L: L.nn.functional.interpolate(_t(L, 1, 1, 4), size=3, mode="bicubic"),
     NotImplementedError),
    ("unknown mode", lambda L: L.nn.functional.interpolate(_t(L, 1, 1, 4), size=3, mode="cubic"),
     NotImplementedError),
    ("2d input", lambda L: L.nn.functional.interpolate(_t(L, 1, 4), size=3), NotImplementedError),
    ("1d input", lambda L: L.nn.functional.interpolate(_t(L, 4), size=3, mode="linear"), NotImplementedError),
    ("zero size", lambda L: L.nn.functional.interpolate(_t(L, 1, 1, 4), size=0), RuntimeError),
    ("negative size", lambda L: L.nn.functional.interpolate(_t(L, 1, 1, 4, 4), size=(3, -2), mode="bilinear"),
     RuntimeError),
    ("scale to zero", lambda L: L.nn.functional.interpolate(_t(L, 1, 1, 4), scale_factor=0.1), RuntimeError),
    ("negative scale", lambda L: L.nn.functional.interpolate(_t(L, 1, 1, 4), scale_factor=-2.0, mode="linear"),
     RuntimeError),
    ("nan scale", lambda L: L.nn.functional.interpolate(_t(L, 1, 1, 4), scale_factor=float("nan")), RuntimeError),
    ("inf scale", lambda L: L.nn.functional.interpolate(_t(L, 1, 1, 4, 4), scale_factor=float("inf"),
                                                        mode="bilinear"), RuntimeError),
    ("zero channels", lambda L: L.nn.functional.interpolate(_t(L, 2, 0, 4), size=3), RuntimeError),
    ("empty spatial", lambda L: L.nn.functional.interpolate(_t(L, 1, 1, 0, 3), size=3), RuntimeError),
    ("int input", lambda L: L.nn.functional.interpolate(L.ones(1, 1, 3, dtype=L.int64), size=5),
     NotImplementedError),
    ("bool input", lambda L: L.nn.functional.interpolate(L.ones(1, 1, 3, 3, dtype=L.bool), size=5),
     NotImplementedError),
]


def _op(L, name):
    return getattr(L._C, "_" + name) if L is ember else getattr(L.ops.aten, name)


OP_ERRORS = [
    ("op output_size length", lambda L: _op(L, "upsample_nearest2d")(_t(L, 1, 1, 4, 4), [3]), RuntimeError),
    ("op input rank", lambda L: _op(L, "upsample_bilinear2d")(_t(L, 1, 4, 4), [3, 3], False), RuntimeError),
    ("op 1d of 4d", lambda L: _op(L, "upsample_linear1d")(_t(L, 1, 1, 4, 4), [3], False), RuntimeError),
    ("backward grad shape", lambda L: _op(L, "upsample_nearest2d_backward")(_t(L, 1, 1, 3, 4), [3, 3], [1, 1, 5, 5]),
     RuntimeError),
    ("backward input_size length",
     lambda L: _op(L, "upsample_bilinear2d_backward")(_t(L, 1, 1, 3, 3), [3, 3], [1, 1, 5], False), RuntimeError),
    ("backward int grad",
     lambda L: _op(L, "upsample_nearest1d_backward")(L.ones(1, 1, 3, dtype=L.uint8), [3], [1, 1, 5]),
     NotImplementedError),
]


@pytest.mark.parametrize("fn,exc", [pytest.param(*e[1:], id=e[0]) for e in ERRORS + OP_ERRORS])
def test_errors(fn, exc):
    with pytest.raises(exc):
        fn(ember)


@needs_torch
@pytest.mark.parametrize("fn,exc", [pytest.param(*e[1:], id=e[0]) for e in ERRORS + OP_ERRORS])
def test_errors_torch(fn, exc):
    """torch raises the table's exception type (so ember's is torch's)."""
    with pytest.raises(exc):
        fn(_torch)


def test_error_messages():
    with pytest.raises(ValueError, match="only one of size or scale_factor should be defined"):
        F.interpolate(ember.ones(1, 1, 4), size=3, scale_factor=2)
    with pytest.raises(RuntimeError, match=r"input \(H: 4, W: 4\) output \(H: 3, W: -2\)"):
        F.interpolate(ember.ones(1, 1, 4, 4), size=(3, -2))
    with pytest.raises(RuntimeError, match=r"Non-empty 3D data tensor expected .*\[2, 0, 4\]"):
        F.interpolate(ember.ones(2, 0, 4), size=3)
    with pytest.raises(NotImplementedError, match="Got 3D input, but bilinear mode needs 4D input"):
        F.interpolate(ember.ones(1, 1, 4), size=3, mode="bilinear")


# ---------------------------------------------------------------------------
# deprecated aliases and warnings
def _warned(fn):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        r = fn()
    return r, [(x.category, str(x.message)) for x in w]


def test_deprecated_aliases_warn():
    x = ember.from_numpy(_x((1, 2, 3, 4)))
    for name, fn, mode, ac in [("upsample", lambda: F.upsample(x, scale_factor=2, mode="bilinear"), "bilinear", None),
                               ("upsample_nearest", lambda: F.upsample_nearest(x, size=5), "nearest", None),
                               ("upsample_bilinear", lambda: F.upsample_bilinear(x, scale_factor=2), "bilinear", True)]:
        y, w = _warned(fn)
        assert w == [(UserWarning, f"`nn.functional.{name}` is deprecated. Use `nn.functional.interpolate` instead.")]
        kw = dict(size=5) if name == "upsample_nearest" else dict(scale_factor=2)
        assert y.tolist() == F.interpolate(x, mode=mode, align_corners=ac, **kw).tolist()
    _, w = _warned(lambda: F.interpolate(x, scale_factor=2, mode="bilinear"))
    assert w == []  # torch 2.x warns no more about align_corners


# ---------------------------------------------------------------------------
# modules
def test_modules():
    nn = ember.nn
    assert repr(nn.Upsample(scale_factor=2)) == "Upsample(scale_factor=2.0, mode='nearest')"
    assert repr(nn.Upsample(size=(3, 4), mode="bilinear", align_corners=True)) == \
        "Upsample(size=(3, 4), mode='bilinear')"
    assert repr(nn.Upsample(scale_factor=(2, 3), mode="bicubic")) == "Upsample(scale_factor=(2.0, 3.0), mode='bicubic')"
    assert repr(nn.UpsamplingNearest2d(scale_factor=2)) == "UpsamplingNearest2d(scale_factor=2.0, mode='nearest')"
    assert repr(nn.UpsamplingBilinear2d(size=4)) == "UpsamplingBilinear2d(size=4, mode='bilinear')"
    m = nn.UpsamplingBilinear2d(scale_factor=2)
    assert (m.mode, m.align_corners, m.recompute_scale_factor) == ("bilinear", True, None)
    x = ember.from_numpy(_x((1, 2, 3, 4)))
    assert m(x).tolist() == F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=True).tolist()
    u = nn.Upsample(scale_factor=1.5, mode="nearest-exact", recompute_scale_factor=True)
    assert u(x).tolist() == F.interpolate(x, scale_factor=1.5, mode="nearest-exact",
                                          recompute_scale_factor=True).tolist()
    assert nn.UpsamplingNearest2d(size=(5, 2))(x).tolist() == F.interpolate(x, size=(5, 2)).tolist()
    assert list(u.state_dict()) == [] and list(u.parameters()) == []
    u2 = pickle.loads(pickle.dumps(u))
    assert u2(x).tolist() == u(x).tolist() and repr(u2) == repr(u)
    state = dict(u.__dict__)
    del state["recompute_scale_factor"]  # a module pickled before the option existed
    old = nn.Upsample.__new__(nn.Upsample)
    old.__setstate__(state)
    assert old.recompute_scale_factor is True


@needs_torch
def test_module_reprs_match_torch():
    for make in (lambda nn: nn.Upsample(scale_factor=2), lambda nn: nn.Upsample(size=3, mode="linear"),
                 lambda nn: nn.Upsample(size=(3, 4), mode="bilinear", align_corners=True),
                 lambda nn: nn.Upsample(scale_factor=(2, 1.5)), lambda nn: nn.UpsamplingNearest2d(size=(2, 3)),
                 lambda nn: nn.UpsamplingBilinear2d(scale_factor=3)):
        assert repr(make(ember.nn)) == repr(make(_torch.nn))


# ---------------------------------------------------------------------------
# against torch: values, gradients, grad_fn names
def _torch_backward_differs(mode, shape, kw):
    """torch's upsample_nearest1d and upsample_bicubic2d backward copy (out == in) or
    halve (out == 2 in, nearest) whatever the given scale factor while their forward
    follows the scale: torch's gradient is then not its forward's (torch's own
    gradcheck fails); ember's is the adjoint of the forward."""
    s = kw.get("scale_factor")
    if s is None or kw.get("recompute_scale_factor") or kw.get("align_corners"):
        return False
    sf = s if isinstance(s, (list, tuple)) else [s] * (len(shape) - 2)
    outs = [(i, int(i * f)) for i, f in zip(shape[2:], sf)]
    if mode == "nearest" and len(shape) == 3:
        return any((o == i or o == 2 * i) and 1 / f != i / o for (i, o), f in zip(outs, sf))
    if mode == "bicubic":
        return any(o == i and f != 1 for (i, o), f in zip(outs, sf))
    return False


@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("mode,shape,kw", [pytest.param(*c, id=_id(c)) for c in CASES])
def test_matches_torch(mode, shape, kw, dtype):
    xv = _x(shape).astype(dtype)
    res = {}
    for L in (ember, _torch):
        x = L.from_numpy(xv.copy()).requires_grad_()
        y = L.nn.functional.interpolate(x, mode=mode, **kw)
        g = L.from_numpy(_x(tuple(y.shape), 3).astype(dtype))
        y.backward(g)
        res[L] = (y.detach().numpy(), x.grad.numpy(), type(y.grad_fn).__name__)
    tol = 2e-5 if dtype == "float32" else 1e-12
    (ey, eg, en), (ty, tg, tn) = res[ember], res[_torch]
    assert en == tn
    np.testing.assert_allclose(ey, ty, rtol=tol, atol=tol)
    if not _torch_backward_differs(mode, shape, kw):
        np.testing.assert_allclose(eg, tg, rtol=tol, atol=tol)


@needs_torch
@pytest.mark.parametrize("mode,shape,sf", [("nearest", (1, 2, 5), 2.1), ("nearest", (1, 2, 5), 1.1),
                                           ("bicubic", (1, 1, 3, 5), 1.1)])
def test_torch_backward_divergence(mode, shape, sf):
    """Where torch's backward is not the gradient of its forward (see
    _torch_backward_differs), ember's passes gradcheck and torch's fails it."""
    def check(L):
        x = L.from_numpy(_x(shape)).requires_grad_()
        return L.autograd.gradcheck(lambda x: L.nn.functional.interpolate(x, scale_factor=sf, mode=mode), (x,),
                                    raise_exception=False)
    assert check(ember)
    assert not check(_torch)


@needs_torch
def test_double_backward_names_match_torch():
    for mode, shape, size in [("nearest", (1, 2, 3), 5), ("nearest-exact", (1, 1, 2, 3), (3, 4)),
                              ("linear", (1, 2, 3), 5), ("bilinear", (1, 1, 2, 3), (3, 4)),
                              ("bicubic", (1, 1, 2, 3), (3, 4))]:
        names = []
        for L in (ember, _torch):
            x = L.from_numpy(_x(shape)).requires_grad_()
            y = L.nn.functional.interpolate(x, size=size, mode=mode)
            go = L.from_numpy(_x(tuple(y.shape), 4)).requires_grad_()
            (gx,) = L.autograd.grad(y, x, go, create_graph=True)
            names.append(type(gx.grad_fn).__name__)
        assert names[0] == names[1]


@needs_torch
def test_half_types_match_torch():
    xv = _x((2, 2, 5, 6)).astype(np.float32)
    for dt in ("float16", "bfloat16"):
        for mode, kw in [("nearest", dict(scale_factor=1.7)), ("bilinear", dict(size=(7, 4))),
                         ("bicubic", dict(scale_factor=2.0, align_corners=True))]:
            e = F.interpolate(ember.from_numpy(xv).to(getattr(ember, dt)), mode=mode, **kw).float().numpy()
            t = _torch.nn.functional.interpolate(_torch.from_numpy(xv).to(getattr(_torch, dt)), mode=mode,
                                                 **kw).float().numpy()
            np.testing.assert_allclose(e, t, rtol=1e-2, atol=1e-2)
    u = np.arange(30, dtype=np.uint8).reshape(1, 1, 5, 6)
    for mode in ("nearest", "nearest-exact"):
        np.testing.assert_array_equal(F.interpolate(ember.from_numpy(u), scale_factor=1.7, mode=mode).numpy(),
                                      _torch.nn.functional.interpolate(_torch.from_numpy(u), scale_factor=1.7,
                                                                       mode=mode).numpy())


# ---------------------------------------------------------------------------
# gradcheck through F.interpolate (every op also has op_db / autograd_cases_interp cases)
@pytest.mark.parametrize("mode,shape,kw", [("nearest", (1, 2, 5), dict(scale_factor=2.1)),
                                           ("nearest", (1, 1, 3, 4), dict(scale_factor=(1.1, 2.1))),
                                           ("nearest-exact", (1, 1, 3, 4), dict(size=(5, 2))),
                                           ("linear", (1, 2, 5), dict(scale_factor=0.6, align_corners=True)),
                                           ("bilinear", (1, 1, 3, 4), dict(scale_factor=1.37)),
                                           ("bicubic", (1, 1, 3, 5), dict(scale_factor=1.1))])
def test_gradcheck_and_gradgradcheck(mode, shape, kw):
    x = ember.from_numpy(_x(shape)).requires_grad_()
    fn = lambda x: F.interpolate(x, mode=mode, **kw)  # noqa: E731
    assert gradcheck(fn, (x,))
    assert gradgradcheck(fn, (x,))
