"""nn activations (F.gelu ... F.glu and their nn modules): gradients checked by
finite differences (gradcheck / gradgradcheck in float64), torch's gradient
at every kink and its node names, in-place forms, module attributes and
reprs, error inputs, and the float32 GELU kernel's accuracy against math.erf
over a dense grid. Forward values by dtype and layout are in tests/op_db.py."""
import math

import numpy as np
import pytest

import ember
from ember import nn
from ember.autograd import gradcheck, gradgradcheck
from ember.nn import functional as F

try:
    import torch as _torch
except ImportError:
    _torch = None
needs_torch = pytest.mark.skipif(_torch is None, reason="torch not installed")

# name -> (call on lib's functional, inputs away from kinks are enough for gradcheck)
ACTS = {
    "gelu": lambda F, x: F.gelu(x),
    "gelu_tanh": lambda F, x: F.gelu(x, approximate="tanh"),
    "silu": lambda F, x: F.silu(x),
    "mish": lambda F, x: F.mish(x),
    "softplus": lambda F, x: F.softplus(x),
    "softplus_b2_t1": lambda F, x: F.softplus(x, beta=2, threshold=1),
    "softsign": lambda F, x: F.softsign(x),
    "elu": lambda F, x: F.elu(x),
    "elu_a2": lambda F, x: F.elu(x, 2.0),
    "selu": lambda F, x: F.selu(x),
    "celu": lambda F, x: F.celu(x),
    "celu_a2": lambda F, x: F.celu(x, 2.0),
    "leaky_relu": lambda F, x: F.leaky_relu(x),
    "leaky_relu_02": lambda F, x: F.leaky_relu(x, 0.2),
    "hardtanh": lambda F, x: F.hardtanh(x),
    "hardtanh_m2_1": lambda F, x: F.hardtanh(x, -2.0, 1.0),
    "relu6": lambda F, x: F.relu6(x),
    "hardswish": lambda F, x: F.hardswish(x),
    "hardsigmoid": lambda F, x: F.hardsigmoid(x),
    "logsigmoid": lambda F, x: F.logsigmoid(x),
    "threshold": lambda F, x: F.threshold(x, 1.0, -5.0),
    "relu": lambda F, x: F.relu(x),
    "sigmoid": lambda F, x: F.sigmoid(x),
    "tanh": lambda F, x: F.tanh(x),
}
NODE = {"gelu": "GeluBackward0", "gelu_tanh": "GeluBackward0", "silu": "SiluBackward0",
        "mish": "MishBackward0", "softplus": "SoftplusBackward0", "softplus_b2_t1": "SoftplusBackward0",
        "softsign": "DivBackward0", "elu": "EluBackward0", "elu_a2": "EluBackward0", "selu": "EluBackward0",
        "celu": "CeluBackward0", "celu_a2": "CeluBackward0", "leaky_relu": "LeakyReluBackward0",
        "leaky_relu_02": "LeakyReluBackward0", "hardtanh": "HardtanhBackward0",
        "hardtanh_m2_1": "HardtanhBackward0", "relu6": "HardtanhBackward0", "hardswish": "HardswishBackward0",
        "hardsigmoid": "HardsigmoidBackward0", "logsigmoid": "LogSigmoidBackward0",
        "threshold": "ThresholdBackward0", "relu": "ReluBackward0", "sigmoid": "SigmoidBackward0",
        "tanh": "TanhBackward0"}
# points away from every kink (-3, -2, -1, 0, 1, 3, 6) for finite differences
SMOOTH = [-4.1, -2.6, -1.7, -0.8, -0.35, 0.2, 0.55, 1.3, 2.2, 2.7, 4.4, 7.5]
# the kinks and thresholds, where the gradient is a choice torch makes
KINKS = [-3.0, -2.0, -1.0, 0.0, 0.5, 1.0, 2.0, 3.0, 6.0, 20.0, 25.0]


def _grad(y, x):
    return ember.autograd.grad(y, x, ember.ones_like(y))[0]


@pytest.mark.parametrize("name", sorted(ACTS))
def test_gradcheck(name):
    x = ember.tensor(SMOOTH, dtype=ember.float64, requires_grad=True)
    assert gradcheck(lambda t: ACTS[name](F, t), (x,))


@pytest.mark.parametrize("name", sorted(set(ACTS) - {"relu"}))
def test_gradgradcheck(name):
    x = ember.tensor(SMOOTH, dtype=ember.float64, requires_grad=True)
    assert gradgradcheck(lambda t: ACTS[name](F, t), (x,))


def test_glu_gradcheck_and_gradgradcheck():
    x = ember.tensor(np.linspace(-2, 2, 24).reshape(4, 6), dtype=ember.float64, requires_grad=True)
    for dim in (0, 1, -1):
        assert gradcheck(lambda t: F.glu(t, dim), (x,))
        assert gradgradcheck(lambda t: F.glu(t, dim), (x,))
    assert type(F.glu(x).grad_fn).__name__ == "GluBackward0"


@pytest.mark.parametrize("name", sorted(ACTS))
def test_node_names(name):
    x = ember.tensor(SMOOTH, dtype=ember.float64, requires_grad=True)
    assert type(ACTS[name](F, x).grad_fn).__name__ == NODE[name]


def test_gelu_known_values():
    # hand values: gelu(1) = Φ(1) = 0.5(1 + erf(1/√2)); tanh form from its formula
    x = ember.tensor([1.0, -1.0, 0.0], dtype=ember.float64)
    phi1 = 0.5 * (1 + math.erf(1 / math.sqrt(2)))
    np.testing.assert_allclose(F.gelu(x).numpy(), [phi1, -(1 - phi1), 0.0], rtol=1e-15)
    t = math.tanh(math.sqrt(2 / math.pi) * (1 + 0.044715))
    np.testing.assert_allclose(F.gelu(x, approximate="tanh").numpy(), [0.5 * (1 + t), -0.5 * (1 - t), 0.0],
                               rtol=1e-15)


def _ulp_error(actual, ref):
    ref32 = np.abs(ref).astype(np.float32)
    spacing = np.spacing(ref32).astype(np.float64)
    return np.abs(actual.astype(np.float64) - ref) / spacing


def test_gelu_float32_accuracy_dense_grid():
    """The vectorized float32 GELU (Note [vector gelu]) against math.erf/erfc:
    a few ulp, up to ~16 where 0.5·(1 + erf) cancels (x in (-1.42, -0.5)),
    and relative accuracy kept into the tail where torch's float32 kernel
    loses it."""
    x = np.linspace(-13, 13, 400_001).astype(np.float32)
    xd = x.astype(np.float64)
    erfc = np.vectorize(math.erfc, otypes=[float])
    ref = xd * 0.5 * erfc(-xd / math.sqrt(2))
    got = F.gelu(ember.from_numpy(x)).numpy()
    ok = np.abs(ref) > 1e-30  # below: float32 subnormals, flushed to 0 by design
    err = _ulp_error(got[ok], ref[ok])
    assert err.max() < 20, err.max()
    mid = (xd[ok] < -1.5) | (xd[ok] > -0.45)
    assert err[mid].max() < 6, err[mid].max()
    assert np.all(np.abs(got[~ok]) <= 1e-30)
    # the same numbers whatever the layout (the strided loop shares the math)
    strided = F.gelu(ember.from_numpy(np.stack([x, x], 1))[:, 1]).numpy()
    np.testing.assert_array_equal(strided, got)


def test_gelu_tanh_and_silu_float32_accuracy():
    x = np.linspace(-10, 10, 200_001).astype(np.float32)
    xd = x.astype(np.float64)
    u = math.sqrt(2 / math.pi) * (xd + 0.044715 * xd ** 3)
    ref = xd / (1 + np.exp(-2 * u))  # = 0.5·x·(1 + tanh u), without cancellation
    ok = np.abs(ref) > 1e-30
    err = _ulp_error(F.gelu(ember.from_numpy(x), approximate="tanh").numpy()[ok], ref[ok])
    assert err[xd[ok] > -3].max() < 16, err[xd[ok] > -3].max()
    assert err.max() < 200
    ref = xd / (1 + np.exp(-xd))
    err = _ulp_error(F.silu(ember.from_numpy(x)).numpy(), ref)
    assert err.max() < 4


def test_gelu_backward_float32_accuracy():
    x = np.linspace(-10, 10, 100_001).astype(np.float32)
    xd = x.astype(np.float64)
    g = ember.ones(x.shape[0])
    erfc = np.vectorize(math.erfc, otypes=[float])
    d_exact = 0.5 * erfc(-xd / math.sqrt(2)) + xd * np.exp(-xd * xd / 2) / math.sqrt(2 * math.pi)
    got = ember._C._gelu_backward(g, ember.from_numpy(x)).numpy()
    np.testing.assert_allclose(got, d_exact, rtol=2e-6, atol=3e-7)
    k, kap = math.sqrt(2 / math.pi), 0.044715
    t = np.tanh(k * (xd + kap * xd ** 3))
    d_tanh = 0.5 * (1 + t) + 0.5 * xd * (1 - t * t) * k * (1 + 3 * kap * xd * xd)
    got = ember._C._gelu_backward(g, ember.from_numpy(x), "tanh").numpy()
    np.testing.assert_allclose(got, d_tanh, rtol=2e-6, atol=3e-7)


def test_special_values():
    inf, nan = math.inf, math.nan
    x = ember.tensor([nan, inf, -inf])
    assert np.isnan(F.gelu(x).numpy()[[0, 2]]).all() and F.gelu(x)[1].item() == inf
    assert F.softplus(x).tolist()[1:] == [inf, 0.0]
    assert F.elu(x).tolist()[1:] == [inf, -1.0]
    assert F.logsigmoid(x).tolist()[1:] == [0.0, -inf]
    assert F.hardsigmoid(x).tolist()[1:] == [1.0, 0.0]
    assert F.hardtanh(x).tolist()[1:] == [1.0, -1.0]
    assert all(math.isnan(F.__dict__[n](x)[0].item()) for n in
               ("gelu", "silu", "mish", "softplus", "elu", "selu", "celu", "leaky_relu", "hardtanh", "relu6",
                "hardswish", "hardsigmoid", "logsigmoid"))


# ------------------------------------------------------------- in place
INPLACE = {  # functional call with inplace / F.<name>_ -> torch's node name
    "elu": (lambda F, x: F.elu(x, inplace=True), "EluBackward1"),
    "elu_": (lambda F, x: F.elu_(x, 0.5), "EluBackward1"),
    "selu": (lambda F, x: F.selu(x, inplace=True), "EluBackward1"),
    "selu_": (lambda F, x: F.selu_(x), "EluBackward1"),
    "celu": (lambda F, x: F.celu(x, inplace=True), "CeluBackward1"),
    "celu_": (lambda F, x: F.celu_(x, 2.0), "CeluBackward1"),
    "silu": (lambda F, x: F.silu(x, inplace=True), "SiluBackward0"),
    "mish": (lambda F, x: F.mish(x, inplace=True), "MishBackward0"),
    "hardswish": (lambda F, x: F.hardswish(x, inplace=True), "HardswishBackward0"),
    "hardsigmoid": (lambda F, x: F.hardsigmoid(x, inplace=True), "HardsigmoidBackward0"),
    "relu6": (lambda F, x: F.relu6(x, inplace=True), "HardtanhBackward0"),
    "leaky_relu": (lambda F, x: F.leaky_relu(x, 0.1, inplace=True), "LeakyReluBackward1"),
    "leaky_relu_": (lambda F, x: F.leaky_relu_(x), "LeakyReluBackward1"),
    "hardtanh": (lambda F, x: F.hardtanh(x, inplace=True), "HardtanhBackward0"),
    "hardtanh_": (lambda F, x: F.hardtanh_(x, -0.5, 2.0), "HardtanhBackward0"),
    "threshold": (lambda F, x: F.threshold(x, 0.0, 1.0, inplace=True), "ThresholdBackward1"),
    "threshold_": (lambda F, x: F.threshold_(x, 0.0, 1.0), "ThresholdBackward1"),
    "relu_": (lambda F, x: F.relu_(x), "ReluBackward0"),
}


@pytest.mark.parametrize("name", sorted(INPLACE))
def test_inplace(name):
    fn, node = INPLACE[name]
    base = [-2.5, -0.7, 0.3, 1.6, 4.0, 7.0]
    leaf = ember.tensor(base, dtype=ember.float64, requires_grad=True)
    x = leaf * 1.0
    version = x._version
    y = fn(F, x)
    assert y is x and x._version == version + 1
    assert type(y.grad_fn).__name__ == node
    # same values and gradients as the out-of-place form
    leaf2 = ember.tensor(base, dtype=ember.float64, requires_grad=True)
    ref = fn(F, leaf2 * 1.0)  # in place on a fresh non-leaf
    np.testing.assert_array_equal(y.detach().numpy(), ref.detach().numpy())
    g = _grad(y, leaf)
    assert g.shape == leaf.shape
    # the gradient of the in-place op equals finite differences
    assert gradcheck(lambda t: fn(F, t * 1.0), (ember.tensor(base, dtype=ember.float64, requires_grad=True),))


def test_inplace_on_leaf_raises():
    x = ember.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError):
        F.elu_(x)
    with pytest.raises(RuntimeError):
        F.silu(x, inplace=True)


# ---------------------------------------------------------------- errors
ERRS = [
    (lambda L: L.nn.functional.gelu(L.ones(2), approximate="foo"), RuntimeError),
    (lambda L: L.nn.functional.gelu(L.ones(2, dtype=L.int64)), NotImplementedError),
    (lambda L: L.nn.functional.silu(L.ones(2, dtype=L.int64)), NotImplementedError),
    (lambda L: L.nn.functional.elu(L.ones(2, dtype=L.int32)), NotImplementedError),
    (lambda L: L.nn.functional.leaky_relu(L.ones(2, dtype=L.bool)), NotImplementedError),
    (lambda L: L.nn.functional.hardtanh(L.ones(2, dtype=L.bool)), NotImplementedError),
    (lambda L: L.nn.functional.threshold(L.ones(2, dtype=L.bool), 0, 1), NotImplementedError),
    (lambda L: L.nn.functional.logsigmoid(L.ones(2, dtype=L.int64)), NotImplementedError),
    (lambda L: L.nn.functional.glu(L.ones(3, 5)), RuntimeError),
    (lambda L: L.nn.functional.glu(L.tensor(1.0)), RuntimeError),
    (lambda L: L.nn.functional.glu(L.ones(2, 4), 3), IndexError),
    (lambda L: L.nn.functional.glu(L.ones(2, 4, dtype=L.int64)), NotImplementedError),
    (lambda L: L.nn.functional.hardtanh(L.ones(2), 2.0, 1.0), ValueError),
    (lambda L: L.nn.functional.threshold(L.ones(2)), TypeError),
    (lambda L: L.nn.functional.elu(L.ones(2), "a"), TypeError),
]


@pytest.mark.parametrize("i", range(len(ERRS)))
def test_errors(i):
    make, exc = ERRS[i]
    with pytest.raises(exc):
        make(ember)


@needs_torch
@pytest.mark.parametrize("i", range(len(ERRS)))
def test_errors_match_torch(i):
    make, exc = ERRS[i]
    with pytest.raises(exc):
        make(_torch)


def test_error_messages():
    with pytest.raises(RuntimeError, match="Halving dimension must be even, but dimension 1 is size 5"):
        F.glu(ember.ones(3, 5))
    with pytest.raises(RuntimeError, match="approximate argument must be either none or tanh"):
        F.gelu(ember.ones(2), approximate="x")
    with pytest.raises(NotImplementedError, match="'Long'"):
        F.gelu(ember.ones(2, dtype=ember.int64))


# --------------------------------------------------------------- modules
MODULES = [
    ("GELU", (), {}), ("GELU", ("tanh",), {}), ("SiLU", (), {}), ("SiLU", (True,), {}), ("Mish", (), {}),
    ("Mish", (True,), {}), ("Softplus", (), {}), ("Softplus", (2, 10), {}), ("Softsign", (), {}),
    ("ELU", (), {}), ("ELU", (1.0, True), {}), ("ELU", (), {"alpha": 0.5}), ("SELU", (), {}),
    ("SELU", (True,), {}), ("CELU", (), {}), ("CELU", (2.0,), {}), ("LeakyReLU", (), {}),
    ("LeakyReLU", (0.2, True), {}), ("Hardtanh", (), {}), ("Hardtanh", (-2, 2, True), {}), ("ReLU6", (), {}),
    ("ReLU6", (True,), {}), ("Hardswish", (), {}), ("Hardswish", (True,), {}), ("Hardsigmoid", (), {}),
    ("LogSigmoid", (), {}), ("Threshold", (0.1, 20), {}), ("Threshold", (0.1, 20, True), {}), ("GLU", (), {}),
    ("GLU", (0,), {}), ("ReLU", (), {}), ("ReLU", (True,), {}), ("Sigmoid", (), {}), ("Tanh", (), {}),
]
REPRS = {  # torch's reprs, written out
    0: "GELU(approximate='none')", 1: "GELU(approximate='tanh')", 2: "SiLU()", 3: "SiLU(inplace=True)",
    6: "Softplus(beta=1.0, threshold=20.0)", 7: "Softplus(beta=2, threshold=10)", 9: "ELU(alpha=1.0)",
    10: "ELU(alpha=1.0, inplace=True)", 14: "CELU(alpha=1.0)", 16: "LeakyReLU(negative_slope=0.01)",
    17: "LeakyReLU(negative_slope=0.2, inplace=True)", 18: "Hardtanh(min_val=-1.0, max_val=1.0)",
    19: "Hardtanh(min_val=-2, max_val=2, inplace=True)", 20: "ReLU6()", 21: "ReLU6(inplace=True)",
    23: "Hardswish()", 26: "Threshold(threshold=0.1, value=20)", 28: "GLU(dim=-1)", 29: "GLU(dim=0)",
}


@pytest.mark.parametrize("i", range(len(MODULES)))
def test_module(i):
    name, args, kw = MODULES[i]
    m = getattr(nn, name)(*args, **kw)
    if i in REPRS:
        assert repr(m) == REPRS[i]
    base = np.linspace(-4, 4, 24).reshape(4, 6)
    x = ember.tensor(base, dtype=ember.float64)
    y = m(x * 1.0)
    assert y.shape == ((4, 3) if name == "GLU" and m.dim != 0 else (2, 6) if name == "GLU" else (4, 6))
    assert not list(m.parameters())
    if _torch is not None:
        tm = getattr(_torch.nn, name)(*args, **kw)
        assert repr(m) == repr(tm)
        assert {k: v for k, v in vars(m).items() if not k.startswith("_") and k != "training"} == \
               {k: v for k, v in vars(tm).items() if not k.startswith("_") and k != "training"}
        ty = tm(_torch.tensor(base))
        np.testing.assert_allclose(y.numpy(), ty.numpy(), rtol=1e-12, atol=1e-14)


def test_modules_in_sequential():
    model = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 8), nn.SiLU(), nn.Linear(8, 2), nn.LogSigmoid())
    out = model(ember.ones(3, 4))
    assert out.shape == (3, 2)
    assert "(1): GELU(approximate='none')" in repr(model)


# ------------------------------------------------------- torch parity
@needs_torch
@pytest.mark.parametrize("name", sorted(ACTS))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_values_and_kink_gradients_match_torch(name, dtype):
    pts = sorted(set(KINKS + [-k for k in KINKS] + SMOOTH + [-0.0]))
    x = ember.tensor(pts, dtype=getattr(ember, dtype), requires_grad=True)
    tx = _torch.tensor(pts, dtype=getattr(_torch, dtype), requires_grad=True)
    y, ty = ACTS[name](F, x), ACTS[name](_torch.nn.functional, tx)
    rtol = 1e-6 if dtype == "float32" else 1e-13
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=rtol, atol=rtol)
    g = _grad(y, x).numpy()
    (tg,) = _torch.autograd.grad(ty, tx, _torch.ones_like(ty))
    np.testing.assert_allclose(g, tg.numpy(), rtol=rtol, atol=rtol)
    assert type(y.grad_fn).__name__ == type(ty.grad_fn).__name__


@needs_torch
@pytest.mark.parametrize("name", sorted(ACTS))
def test_nan_inf_gradients_match_torch(name):
    if name in ("gelu", "gelu_tanh", "silu", "mish", "softsign", "sigmoid", "tanh", "selu", "celu", "celu_a2",
                "elu_a2", "softplus_b2_t1"):
        pts = [math.nan]  # torch's ±inf gradients of the smooth ones come from inf·0 in its kernels
    else:
        pts = [math.nan, math.inf, -math.inf]
    x = ember.tensor(pts, dtype=ember.float64, requires_grad=True)
    tx = _torch.tensor(pts, dtype=_torch.float64, requires_grad=True)
    g = _grad(ACTS[name](F, x), x).numpy()
    (tg,) = _torch.autograd.grad(ACTS[name](_torch.nn.functional, tx), tx, _torch.ones(len(pts), dtype=_torch.float64))
    np.testing.assert_array_equal(g, tg.numpy())


@needs_torch
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", sorted(ACTS))
def test_half_types_match_torch(name, dtype):
    pts = np.linspace(-6, 6, 97)
    x = ember.tensor(pts, dtype=getattr(ember, dtype))
    tx = _torch.tensor(pts, dtype=getattr(_torch, dtype))
    y, ty = ACTS[name](F, x), ACTS[name](_torch.nn.functional, tx)
    assert y.dtype == x.dtype
    # computed in float32 and rounded once: at most one unit of the half type apart
    tol = 1e-2 if dtype == "bfloat16" else 1e-3
    np.testing.assert_allclose(y.float().numpy(), ty.float().numpy(), rtol=tol, atol=tol)


@needs_torch
def test_glu_matches_torch():
    base = np.linspace(-3, 3, 48).reshape(2, 4, 6)
    for dim in (0, 1, 2, -1):
        x = ember.tensor(base, requires_grad=True)
        tx = _torch.tensor(base, requires_grad=True)
        y, ty = F.glu(x, dim), _torch.nn.functional.glu(tx, dim)
        np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-13)
        np.testing.assert_allclose(_grad(y, x).numpy(),
                                   _torch.autograd.grad(ty, tx, _torch.ones_like(ty))[0].numpy(), rtol=1e-13)
