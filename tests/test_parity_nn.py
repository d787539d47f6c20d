"""Regression tests for torch-parity mismatches found by tests/parity_harness.py in
nn.functional and autograd: each test states torch's behaviour by hand (exception type,
dtype, value), so it runs without torch, and compares with torch directly when installed."""
import math
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import ember
import ember.nn.functional as F

from parity_harness import T, assert_parity


# -- autograd: a second backward through a freed graph ----------------------------------

SECOND_BACKWARD = [
    ("pow_scalar", lambda L, x: (x * 2).pow(2).sum()),
    ("pow_leaf", lambda L, x: x.pow(2).sum()),
    ("rpow", lambda L, x: (2 ** x).sum()),
    ("float_power", lambda L, x: x.float_power(2).sum()),
    ("cumprod", lambda L, x: (x * 1).cumprod(0).sum()),
    ("einsum", lambda L, x: L.einsum("i,i->", x * 1, x * 1)),
    ("clamp", lambda L, x: (x * 2).clamp(0, 1).sum()),
]
_CHILD = """
import ember
from test_parity_nn import SECOND_BACKWARD
x = ember.tensor([0.5, 2.0], dtype=ember.float64, requires_grad=True)
y = dict(SECOND_BACKWARD)[{name!r}](ember, x)
y.backward()
try:
    y.backward()
except RuntimeError as e:
    print("RuntimeError", "second time" in str(e))
else:
    print("no error")
"""


@pytest.mark.parametrize("name", [c[0] for c in SECOND_BACKWARD])
def test_second_backward_raises_not_crashes(name):
    # in a child process: before the fix these were segmentation faults (pow, cumprod, einsum ...)
    here = os.path.dirname(os.path.abspath(__file__))
    path = [os.path.dirname(os.path.dirname(os.path.abspath(ember.__file__))), here, os.environ.get("PYTHONPATH")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in path if p))
    r = subprocess.run([sys.executable, "-c", _CHILD.format(name=name)], capture_output=True, text=True,
                       env=env, timeout=120, cwd=here)
    assert r.returncode == 0, f"child died: rc={r.returncode} {r.stderr[-500:]}"
    assert r.stdout.strip() == "RuntimeError True", r.stdout + r.stderr[-300:]


def test_second_backward_without_saved_tensors_runs_again():
    # torch: nodes that saved nothing (add, views, sum) can run backward again
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    y = (x + 1).view(2).sum()
    y.backward()
    y.backward()
    assert x.grad.tolist() == [2.0, 2.0]


def test_second_backward_torch(torch):
    for _, f in SECOND_BACKWARD:
        for L in (torch, ember):
            x = L.tensor([0.5, 2.0], dtype=L.float64, requires_grad=True)
            y = f(L, x)
            y.backward()
            with pytest.raises(RuntimeError, match="second time"):
                y.backward()


# -- softmax: the dim is checked before the dtype --------------------------------------

@pytest.mark.parametrize("fn", ["softmax", "log_softmax", "softmin"])
def test_softmax_bad_dim_on_int_is_index_error(fn):
    with pytest.raises(IndexError, match="Dimension out of range"):
        getattr(F, fn)(ember.ones(2, 3, dtype=ember.int64), 3)
    with pytest.raises(NotImplementedError):
        getattr(F, fn)(ember.ones(2, 3, dtype=ember.int64), 1)


def test_softmax_errors_torch(torch):
    for fn in ("softmax", "log_softmax", "softmin"):
        for d in (1, 3, -3):
            assert_parity(torch, lambda L, a, fn=fn, d=d: getattr(L.nn.functional, fn)(a, d),
                          T(np.ones((2, 3)), "int64"))


# -- channel dropout ranks -------------------------------------------------------------

def test_dropout2d_other_ranks_warn_and_drop_features():
    ember.manual_seed(0)
    with pytest.warns(UserWarning, match="Received a 2-D input to dropout2d"):
        y = F.dropout2d(ember.ones(6, 50), 0.5)
    # (N, C) read as torch does: one draw per element of the 2-d input, kept values are 1 / (1 - p)
    assert set(np.unique(y.numpy()).tolist()) <= {0.0, 2.0}
    with pytest.warns(UserWarning, match="assuming that channel-wise 1D dropout"):
        y = F.dropout2d(ember.ones(4, 8, 30), 0.5)
    rows = y.numpy().reshape(32, 30)  # a 3-d input is (N, C, L): whole rows of L dropped
    assert ((rows == 0).all(1) | (rows == 2).all(1)).all()
    with pytest.warns(UserWarning), pytest.raises(RuntimeError, match="at least 2 dimensions"):
        F.dropout2d(ember.ones(3), 0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert F.dropout2d(ember.ones(3), 1.0).tolist() == [0.0, 0.0, 0.0]  # p = 1: no rank check
        assert F.dropout2d(ember.ones(3), 0.5, training=False).tolist() == [1.0, 1.0, 1.0]
        assert F.dropout3d(ember.tensor(2.0), 1.0).item() == 0.0
        assert F.dropout2d(ember.ones(1, 2, 3, 4, 5), 0.0).shape == (1, 2, 3, 4, 5)
    with pytest.raises(RuntimeError, match="dropout1d: Expected 2D or 3D input"):
        F.dropout1d(ember.ones(2, 3, 4, 5), 0.5)
    y = F.dropout1d(ember.ones(5, 40), 0.5)  # unbatched (C, L): whole channels
    assert ((y.numpy() == 0).all(1) | (y.numpy() == 2).all(1)).all()


def test_dropout_ranks_torch(torch):
    for name in ("dropout1d", "dropout2d", "dropout3d"):
        for shape in ((3,), (2, 3), (2, 3, 4), (1, 2, 3, 4), (1, 2, 3, 4, 5), ()):
            for p in (0.0, 0.5, 1.0):
                assert_parity(torch, lambda L, a, n=name, p=p: getattr(L.nn.functional, n)(a, p).shape,
                              T(np.ones(shape)))
                assert_parity(torch, lambda L, a, n=name: getattr(L.nn.functional, n)(a, 1.0), T(np.ones(shape)))


# -- pointwise losses with other target dtypes -----------------------------------------

X = np.array([[0.2, 0.7, 0.4], [0.9, 0.1, 0.5]])
Y = np.array([[1, 0, 1], [0, 0, 1]])


def test_bce_target_dtype_must_match():
    x = ember.tensor(X, dtype=ember.float32)
    for dt, name in ((ember.int64, "Long"), (ember.float64, "Double"), (ember.bool, "Bool")):
        with pytest.raises(RuntimeError, match=f"Found dtype {name} but expected Float"):
            F.binary_cross_entropy(x, ember.tensor(Y).to(dt))
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type Long"):
        F.binary_cross_entropy_with_logits(x, ember.tensor(Y))
    with pytest.raises(NotImplementedError):
        F.binary_cross_entropy_with_logits(x, ember.tensor(Y).bool())
    with pytest.raises(RuntimeError, match="Integral inputs not supported"):
        F.kl_div(x, ember.tensor(Y), reduction="batchmean")


def test_bool_targets_and_result_dtypes_by_hand():
    x = ember.tensor(X, dtype=ember.float32)
    yb = ember.tensor(Y).bool()
    assert F.mse_loss(x, yb).item() == pytest.approx(np.mean((X - Y) ** 2), rel=1e-6)
    d = np.abs(X - Y)
    assert F.smooth_l1_loss(x, yb, beta=0.5).item() == pytest.approx(
        np.mean(np.where(d < 0.5, 0.5 * d ** 2 / 0.5, d - 0.25)), rel=1e-6)
    h = F.huber_loss(x, ember.tensor(Y, dtype=ember.float64))
    assert h.dtype == ember.float32  # torch's huber keeps the input dtype
    assert h.item() == pytest.approx(np.mean(np.where(d < 1, 0.5 * d ** 2, d - 0.5)), rel=1e-6)
    # soft margin: log(1 + exp(-x * y)); a uint8 target is not negated on its own (it would wrap)
    s = F.soft_margin_loss(x, ember.tensor(Y, dtype=ember.uint8), reduction="none")
    assert s.dtype == ember.float32
    np.testing.assert_allclose(s.numpy(), np.log1p(np.exp(-X * Y)), rtol=1e-6)
    assert F.soft_margin_loss(x, ember.tensor(Y, dtype=ember.float64)).dtype == ember.float32


def test_loss_target_dtypes_torch(torch):
    names = ["binary_cross_entropy", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
             "soft_margin_loss", "kl_div"]
    for name in names:
        for tdt in ("bool", "uint8", "int64", "float32", "float64"):
            for red in ("mean", "none"):
                assert_parity(torch, lambda L, a, b, n=name, r=red: getattr(L.nn.functional, n)(a, b, reduction=r),
                              T(X), T(Y, tdt))
    for tdt in ("bool", "uint8", "int64", "float32", "float64"):
        assert_parity(torch, lambda L, a, b: L.nn.functional.binary_cross_entropy_with_logits(a, b), T(X), T(Y, tdt))


def test_bce_value_unchanged_for_matching_dtype():
    x = ember.tensor(X, dtype=ember.float64)
    want = -np.mean(Y * np.log(X) + (1 - Y) * np.log(1 - X))
    assert F.binary_cross_entropy(x, ember.tensor(Y, dtype=ember.float64)).item() == pytest.approx(want)
    assert math.isfinite(F.binary_cross_entropy_with_logits(x, ember.tensor(Y, dtype=ember.float64)).item())


# -- float-only kernels: torch's error order ------------------------------------------

def test_shrinks_reject_integer_inputs():
    for fn, kernel in ((F.hardshrink, "hardshrink_cpu"), (F.softshrink, "softshrink_check")):
        with pytest.raises(NotImplementedError, match=f'"{kernel}" not implemented for \'Long\''):
            fn(ember.tensor([1, -2]))
        assert fn(ember.tensor([1.0, -0.25])).tolist()[1] == 0.0


def test_logcumsumexp_checks_dim_first():
    with pytest.raises(IndexError, match="Dimension out of range"):
        ember.logcumsumexp(ember.tensor([1, 2]), 2)
    with pytest.raises(NotImplementedError):
        ember.logcumsumexp(ember.tensor([1, 2]), 0)
    with pytest.raises(TypeError):
        ember.logcumsumexp(ember.tensor([1.0, 2.0]), (0, 1))


def test_float_only_order_torch(torch):
    for dt in ("int64", "bool", "uint8", "float32"):
        x = T(np.array([[1, 0, 1], [0, 1, 1]]), dt)
        assert_parity(torch, lambda L, a: L.nn.functional.hardshrink(a), x)
        assert_parity(torch, lambda L, a: L.nn.functional.softshrink(a), x)
        for dim in (0, 2, -3, (0, 1)):
            assert_parity(torch, lambda L, a, d=dim: L.logcumsumexp(a, d), x)
