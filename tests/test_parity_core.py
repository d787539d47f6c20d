"""Regression tests for torch-parity mismatches found by tests/parity_harness.py in the core
(tensor construction, quantile): hand values / NumPy references that run without torch,
and direct comparisons with torch when it is installed."""
import numpy as np
import pytest

import ember

from parity_harness import T, assert_parity


# -- ember.tensor() of a list of multi-element tensors --------------------------------

def test_tensor_of_multi_element_tensors_errors():
    # torch reads a float tensor element as a scalar (ValueError), an int one as an index (TypeError)
    with pytest.raises(ValueError, match="only one element tensors"):
        ember.tensor([ember.tensor([1.0, 2.0]), ember.tensor([3.0, 4.0])])
    with pytest.raises(TypeError, match="only integer tensors of a single element"):
        ember.tensor([ember.tensor([1, 2]), ember.tensor([3, 4])])
    assert ember.tensor([ember.tensor([1.0]), ember.tensor([2.0])]).tolist() == [1.0, 2.0]


def test_tensor_of_tensors_torch(torch):
    for dt in ("float32", "int64", "bool", "bfloat16"):
        assert_parity(torch, lambda L, a: L.tensor([a, a]), T(np.ones(2), dt))
        assert_parity(torch, lambda L, a: L.tensor([a[0], a[1]]), T(np.ones(2), dt))


# -- quantile / nanquantile -----------------------------------------------------------

ROWS = np.array([[1.0, 5.0, 2.0, np.nan], [4.0, 3.0, 2.0, 1.0]])


def test_quantile_by_hand():
    x = ember.tensor(ROWS)
    q = ember.quantile(x, 0.3, dim=1)
    assert np.isnan(q[0].item()) and q[1].item() == pytest.approx(1.9)  # rank 0.3 * 3 = 0.9
    nq = ember.nanquantile(x, 0.3, dim=1)
    assert nq.tolist() == pytest.approx([1.6, 1.9])  # row 0 over its 3 numbers: rank 0.6
    r = x[1]
    qs = ember.tensor([0.1, 0.5, 0.625, 0.875], dtype=ember.float64)
    assert ember.quantile(r, qs, interpolation="nearest").tolist() == [1.0, 3.0, 3.0, 4.0]  # half to even
    assert ember.quantile(r, qs, interpolation="lower").tolist() == [1.0, 2.0, 2.0, 3.0]
    assert ember.quantile(r, qs, interpolation="higher").tolist() == [2.0, 3.0, 3.0, 4.0]
    assert ember.quantile(r, qs, interpolation="midpoint").tolist() == [1.5, 2.5, 2.5, 3.5]
    assert r.quantile(0.5).item() == 2.5 and x.nanquantile(0.5, 1).tolist() == [2.0, 2.5]
    assert ember.nanquantile(ember.tensor([float("nan")] * 2), 0.5).isnan().item()


def test_quantile_shapes_by_hand():
    x = ember.tensor(np.arange(24.0).reshape(2, 3, 4))
    assert ember.quantile(x, 0.5).shape == ()
    assert ember.quantile(x, 0.5, keepdim=True).shape == (1, 1, 1)
    q = ember.tensor([0.2, 0.7], dtype=ember.float64)
    assert ember.quantile(x, q, dim=1).shape == (2, 2, 4)
    assert ember.quantile(x, q, dim=1, keepdim=True).shape == (2, 2, 1, 4)
    assert ember.quantile(x, ember.tensor(0.5, dtype=ember.float64), dim=-1).shape == (2, 3)
    assert ember.quantile(ember.tensor(3.0), 0.5, dim=0, keepdim=True).shape == ()


def test_quantile_against_numpy():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((5, 7))
    for method in ("linear", "lower", "higher", "midpoint"):
        for dim in (0, 1, None):
            got = ember.quantile(ember.tensor(a), ember.tensor([0.0, 0.3, 0.5, 1.0], dtype=ember.float64),
                                 dim=dim, interpolation=method).numpy()
            np.testing.assert_allclose(got, np.quantile(a, [0.0, 0.3, 0.5, 1.0], axis=dim, method=method))
    b = a.copy()
    b[1, 2] = b[3, 0] = np.nan
    np.testing.assert_allclose(ember.nanquantile(ember.tensor(b), 0.4, dim=1).numpy(),
                               np.nanquantile(b, 0.4, axis=1))


def test_quantile_errors():
    x = ember.tensor(ROWS, dtype=ember.float32)
    with pytest.raises(RuntimeError, match=r"q must be in the range \[0, 1\] but got 1.5"):
        ember.quantile(x, 1.5)
    with pytest.raises(RuntimeError, match="either float or double"):
        ember.quantile(x.long(), 0.5)
    with pytest.raises(RuntimeError, match="same dtype as the input"):
        ember.quantile(x, ember.tensor([0.5], dtype=ember.float64))
    with pytest.raises(RuntimeError, match="interpolation must be one of"):
        ember.quantile(x, 0.5, interpolation="foo")
    with pytest.raises(RuntimeError, match="scalar or 1D"):
        ember.quantile(x, ember.tensor([[0.5]]))
    with pytest.raises(RuntimeError, match="non-empty"):
        ember.quantile(ember.ones(2, 0), 0.5, dim=1)
    with pytest.raises(IndexError, match="Dimension out of range"):
        ember.quantile(x, 0.5, dim=2)
    with pytest.raises(TypeError):
        ember.quantile(x, [0.5])
    with pytest.raises(RuntimeError, match="q values must be in the range"):
        ember.quantile(x, ember.tensor([1.5]))


def test_quantile_gradient_by_finite_differences():
    rng = np.random.default_rng(1)
    a = ember.tensor(rng.standard_normal((3, 5)), requires_grad=True)
    q = ember.tensor([0.3, 0.8], dtype=ember.float64)
    assert ember.autograd.gradcheck(lambda t: ember.quantile(t, q, dim=1), (a,))
    assert ember.autograd.gradcheck(lambda t: ember.nanquantile(t, 0.5, interpolation="midpoint"), (a,))


def test_quantile_torch(torch):
    rng = np.random.default_rng(2)
    specs = [T(rng.standard_normal((3, 5))), T(ROWS, "float64"), T(rng.standard_normal((2, 3, 4)), "float64", "t")]
    for x in specs:
        for fn in ("quantile", "nanquantile"):
            for dim in (None, 0, -1):
                for kd in (False, True):
                    for mode in ("linear", "lower", "higher", "midpoint", "nearest"):
                        assert_parity(torch, lambda L, a, fn=fn, d=dim, k=kd, m=mode: getattr(L, fn)(
                            a, L.tensor([0.1, 0.5, 0.625, 0.9], dtype=a.dtype), dim=d, keepdim=k, interpolation=m), x)
                        assert_parity(torch, lambda L, a, fn=fn, d=dim, k=kd, m=mode: getattr(L, fn)(
                            a, 0.375, dim=d, keepdim=k, interpolation=m), x)
    a = torch.randn(3, 5, dtype=torch.float64, requires_grad=True)
    b = ember.tensor(a.detach().numpy(), requires_grad=True)
    torch.quantile(a, torch.tensor([0.3, 0.8], dtype=torch.float64), dim=1).sum().backward()
    ember.quantile(b, ember.tensor([0.3, 0.8], dtype=ember.float64), dim=1).sum().backward()
    np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy())
