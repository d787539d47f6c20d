"""cross, cov, corrcoef, histogram, gradient, atleast_*d, renorm, diagflat, chain_matmul
(ember/_products.py, _statistics.py, _calculus.py, _shape_functions.py, _distances.py): NumPy
references and hand values (always run), torch parity for values, errors and gradients (skipped
without torch), float64 gradchecks."""
import warnings

import numpy as np
import pytest

import ember
from ember.autograd import gradcheck

rng = np.random.default_rng(7)


def randn(*shape, dtype=np.float64):
    return rng.standard_normal(shape).astype(dtype)


def E(a):
    return ember.tensor(a)


def close(x, ref, tol=1e-6):
    np.testing.assert_allclose(np.asarray(x.detach().numpy(), dtype=np.float64), ref, rtol=tol, atol=tol)


# -- NumPy references ---------------------------------------------------------------

def test_cross_against_numpy():
    a, b = randn(4, 3), randn(4, 3)
    close(ember.linalg.cross(E(a), E(b)), np.cross(a, b))
    close(E(a).cross(E(b), dim=1), np.cross(a, b))
    a2, b2 = randn(3, 5), randn(1, 5)  # broadcast along the non-cross dim
    close(ember.cross(E(a2), E(b2).expand(3, 5), dim=0), np.cross(a2, np.broadcast_to(b2, (3, 5)), axis=0))
    a3, b3 = randn(2, 1, 3), randn(1, 4, 3)  # broadcast both ways
    close(ember.linalg.cross(E(a3), E(b3)), np.cross(a3, b3))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        c = ember.cross(E(a2), E(np.broadcast_to(b2, (3, 5)).copy()))  # first dim of size 3
    assert any("dim arg is deprecated" in str(x.message) for x in w)
    close(c, np.cross(a2, np.broadcast_to(b2, (3, 5)), axis=0))


def test_cross_errors():
    with pytest.raises(RuntimeError, match="must have length 3. Got 2 and 2"):
        ember.linalg.cross(ember.ones(3, 2), ember.ones(3, 2))
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        ember.linalg.cross(ember.ones(3), ember.ones(4, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError, match="no dimension of size 3"):
            ember.cross(ember.ones(2, 2), ember.ones(2, 2))
    with pytest.raises(IndexError):
        ember.cross(ember.ones(3), ember.ones(3), dim=2)
    with pytest.raises(RuntimeError, match="expected scalar type Long but found Double"):
        ember.cross(ember.tensor([1, 2, 3]), ember.tensor([1.0, 2.0, 3.0], dtype=ember.float64), dim=0)


@pytest.mark.parametrize("shape", [(3, 6), (1, 5), (4,), (2, 1)])
def test_cov_corrcoef_against_numpy(shape):
    x = randn(*shape)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        close(ember.cov(E(x)), np.cov(x))
        close(E(x).cov(correction=0), np.cov(x, ddof=0))
        if shape[-1] > 1:
            close(ember.corrcoef(E(x)), np.corrcoef(x))


def test_cov_weights_against_numpy():
    x = randn(3, 5)
    fw = np.array([1, 2, 0, 3, 1])
    aw = np.array([0.5, 1.0, 2.0, 0.1, 1.5])
    close(ember.cov(E(x), fweights=E(fw)), np.cov(x, fweights=fw))
    close(ember.cov(E(x), aweights=E(aw)), np.cov(x, aweights=aw))
    close(ember.cov(E(x), fweights=E(fw), aweights=E(aw), correction=2), np.cov(x, fweights=fw, aweights=aw, ddof=2))
    ints = ember.arange(6).view(2, 3)
    got = ember.cov(ints)
    assert got.dtype == ember.float32
    close(got, np.cov(np.arange(6).reshape(2, 3)))


def test_cov_errors():
    with pytest.raises(RuntimeError, match="two or fewer dimensions"):
        ember.cov(ember.ones(2, 2, 2))
    with pytest.raises(NotImplementedError, match="bool dtype"):
        ember.cov(ember.tensor([[True, False]]))
    with pytest.raises(RuntimeError, match="integral dtype"):
        ember.cov(ember.ones(2, 3), fweights=ember.ones(3))
    with pytest.raises(RuntimeError, match="cannot be negative"):
        ember.cov(ember.ones(2, 3), fweights=ember.tensor([1, -2, 3]))
    with pytest.raises(RuntimeError, match="floating point dtype"):
        ember.cov(ember.ones(2, 3), aweights=ember.tensor([1, 2, 3]))
    with pytest.raises(RuntimeError, match="same numel"):
        ember.cov(ember.ones(2, 3), aweights=ember.ones(4))
    with pytest.warns(UserWarning, match="degrees of freedom"):
        r = ember.cov(ember.ones(2, 1))
    assert np.isnan(r.numpy()).all()


@pytest.mark.parametrize("bins", [1, 4, 10])
def test_histogram_against_numpy(bins):
    x = randn(50).astype(np.float32)
    h = ember.histogram(E(x), bins)
    ref_h, ref_e = np.histogram(x, bins)
    np.testing.assert_array_equal(h.hist.numpy(), ref_h.astype(np.float32))
    np.testing.assert_allclose(h.bin_edges.numpy(), ref_e, rtol=1e-6, atol=1e-6)
    w = rng.random(50)
    hw, ew = E(x.astype(np.float64)).histogram(bins, range=(-1.0, 2.0), weight=E(w), density=True)
    ref_h, ref_e = np.histogram(x.astype(np.float64), bins, range=(-1.0, 2.0), weights=w, density=True)
    close(hw, ref_h)
    close(ew, ref_e)


def test_histogram_edges_and_errors():
    edges = np.array([0.0, 0.5, 2.0, 3.0])
    x = np.array([-1.0, 0.0, 0.5, 0.7, 2.0, 3.0, 3.5])
    h, e = ember.histogram(E(x), E(edges))
    np.testing.assert_array_equal(h.numpy(), np.histogram(x, edges)[0])
    h, e = ember.histogram(ember.ones(3), 2)  # an empty range is widened by 0.5 each side
    assert e.tolist() == [0.5, 1.0, 1.5] and h.tolist() == [0.0, 3.0]
    h, e = ember.histogram(ember.empty(0), 2)
    assert e.tolist() == [0.0, 0.5, 1.0] and h.tolist() == [0.0, 0.0]
    assert type(ember.histogram(ember.ones(3), 2)).__name__ == "histogram"
    with pytest.raises(RuntimeError, match="bins must be > 0"):
        ember.histogram(ember.ones(3), 0)
    with pytest.raises(RuntimeError, match="min should not exceed max"):
        ember.histogram(ember.ones(3), 3, range=(2.0, 1.0))
    with pytest.raises(NotImplementedError, match="Long"):
        ember.histogram(ember.arange(5), 3)
    with pytest.raises(RuntimeError, match="same dtype"):
        ember.histogram(ember.ones(3), ember.tensor([0.0, 1.0], dtype=ember.float64))
    with pytest.raises(RuntimeError, match="same dtype"):
        ember.histogram(ember.ones(3), 2, weight=ember.ones(3, dtype=ember.int64))


def test_histogramdd_against_numpy():
    x = randn(60, 3)
    w = rng.random(60)
    for kw in ({"bins": [3, 4, 2]}, {"bins": 4, "range": [-1.0, 1.0, -2.0, 2.0, 0.0, 1.0]},
               {"bins": 3, "density": True}):
        got = ember.histogramdd(E(x), weight=E(w), **kw)
        np_kw = dict(kw)
        if "range" in np_kw:
            r = np_kw.pop("range")
            np_kw["range"] = [r[0:2], r[2:4], r[4:6]]
        ref_h, ref_e = np.histogramdd(x, weights=w, **np_kw)
        close(got.hist, ref_h)
        assert isinstance(got.bin_edges, tuple) and len(got.bin_edges) == 3
        for e, r in zip(got.bin_edges, ref_e):
            close(e, r)
    edges = [np.array([-1.0, 0.0, 1.0]), np.array([-3.0, 0.0, 3.0]), np.array([-1.0, -0.5, 0.0, 2.0])]
    got = ember.histogramdd(E(x).reshape(6, 10, 3), bins=[E(e) for e in edges])
    close(got.hist, np.histogramdd(x, bins=edges)[0])
    with pytest.raises(RuntimeError, match="size of bins must be equal"):
        ember.histogramdd(E(x), bins=[2, 2])
    with pytest.raises(RuntimeError, match="range should have 6 elements"):
        ember.histogramdd(E(x), bins=2, range=[0.0, 1.0])
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        ember.histogramdd(ember.ones(3), bins=2)


@pytest.mark.parametrize("edge_order", [1, 2])
def test_gradient_against_numpy(edge_order):
    f = randn(6, 5)
    for got, ref in zip(ember.gradient(E(f), edge_order=edge_order), np.gradient(f, edge_order=edge_order)):
        close(got, ref)
    got = ember.gradient(E(f), spacing=[2.0, 0.5], edge_order=edge_order)
    for g, r in zip(got, np.gradient(f, 2.0, 0.5, edge_order=edge_order)):
        close(g, r)
    xs = np.array([0.0, 1.0, 3.0, 4.0, 7.0, 7.5])
    (g,) = ember.gradient(E(f), spacing=(E(xs),), dim=0, edge_order=edge_order)
    close(g, np.gradient(f, xs, axis=0, edge_order=edge_order))
    (g,) = ember.gradient(E(f), spacing=3.0, dim=-1, edge_order=edge_order)
    close(g, np.gradient(f, 3.0, axis=-1, edge_order=edge_order))


def test_gradient_int_and_errors():
    (g,) = ember.gradient(ember.arange(5) ** 2)
    assert g.dtype == ember.float32
    close(g, np.gradient(np.arange(5.0) ** 2))
    with pytest.raises(RuntimeError, match="edge_order=1 and edge_order=2"):
        ember.gradient(ember.ones(5), edge_order=3)
    with pytest.raises(RuntimeError, match="at least edge_order\\+1"):
        ember.gradient(ember.ones(2, 2), edge_order=2)
    with pytest.raises(RuntimeError, match="same length"):
        ember.gradient(ember.ones(3, 3), spacing=[1.0, 2.0], dim=0)


def test_atleast_diagflat_by_hand():
    s = ember.tensor(2.0)
    assert ember.atleast_1d(s).shape == (1,)
    assert ember.atleast_2d(s).shape == (1, 1)
    assert ember.atleast_3d(s).shape == (1, 1, 1)
    v, m = ember.ones(4), ember.ones(2, 3)
    assert [t.shape for t in ember.atleast_2d(v, m)] == [(1, 4), (2, 3)]
    assert [t.shape for t in ember.atleast_3d((v, m))] == [(1, 4, 1), (2, 3, 1)]
    assert ember.atleast_3d(ember.ones(2, 3, 4, 5)).shape == (2, 3, 4, 5)
    with pytest.raises(TypeError):
        ember.atleast_1d(1.0)
    x = randn(2, 2)
    close(ember.diagflat(E(x), 1), np.diagflat(x, 1))
    close(E(x).diagflat(-2), np.diagflat(x, -2))


def test_renorm_by_hand():
    x = np.array([[3.0, 4.0], [0.3, 0.4], [6.0, 8.0]])
    got = ember.renorm(E(x), 2, 0, 1.0)
    # rows of norm 5 and 10 scaled to 1 (torch adds 1e-7 to the norm); the row of norm 0.5 kept
    ref = np.array([[3 / (5 + 1e-7), 4 / (5 + 1e-7)], [0.3, 0.4], [6 / (10 + 1e-7), 8 / (10 + 1e-7)]])
    close(got, ref)
    y = E(x.copy())
    y.renorm_(1, 1, 2.0)
    col = np.abs(x).sum(0)
    close(y, x * np.where(col > 2.0, 2.0 / (col + 1e-7), 1.0))
    for args, msg in [((ember.ones(3), 2, 0, 1.0), "at least 2 dimensions"),
                      ((ember.ones(3, 3), -1, 0, 1.0), "non-positive-norm"),
                      ((ember.ones(3, 3), 2, 0, -1.0), "maxnorm to be >= 0")]:
        with pytest.raises(RuntimeError, match=msg):
            ember.renorm(*args)
    with pytest.raises(NotImplementedError, match="floating point"):
        ember.renorm(ember.ones(2, 2, dtype=ember.int64), 2, 0, 1)


def test_chain_matmul_by_hand():
    a, b, c = randn(2, 3), randn(3, 4), randn(4, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        close(ember.chain_matmul(E(a), E(b), E(c)), a @ b @ c)
        close(ember.chain_matmul(E(a)), a)
        with pytest.raises(RuntimeError, match="one or more matrices"):
            ember.chain_matmul()
        with pytest.raises(RuntimeError, match="Tensor dimension is 3"):
            ember.chain_matmul(ember.ones(2, 2, 2))
        with pytest.raises(RuntimeError, match="tensors 0 and 1 with shapes"):
            ember.chain_matmul(ember.ones(2, 3), ember.ones(2, 3))


def test_gradchecks():
    def leaf(*s):
        return E(randn(*s)).requires_grad_(True)
    assert gradcheck(lambda a, b: ember.linalg.cross(a, b), (leaf(2, 3), leaf(2, 3)))
    assert gradcheck(lambda x: ember.cov(x), (leaf(3, 5),))
    assert gradcheck(lambda x: ember.corrcoef(x), (leaf(3, 5),))
    assert gradcheck(lambda x: ember.gradient(x, spacing=2.0, edge_order=2)[1], (leaf(4, 5),))
    assert gradcheck(lambda x: ember.renorm(x, 2, 1, 0.5), (leaf(3, 4),))
    assert gradcheck(lambda x: ember.diagflat(x, 1), (leaf(3),))


# -- torch parity -------------------------------------------------------------------

def test_against_torch(torch):
    x = randn(4, 6)
    T = torch.tensor
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pairs = [
            (ember.cov(E(x), correction=3), torch.cov(T(x), correction=3)),
            (ember.corrcoef(E(x)), torch.corrcoef(T(x))),
            (ember.renorm(E(x), 3, 1, 1.5), torch.renorm(T(x), 3, 1, 1.5)),
            (ember.diagflat(E(x[0]), -1), torch.diagflat(T(x[0]), -1)),
            (ember.cross(E(x[:3]), E(x[1:])), torch.cross(T(x[:3]), T(x[1:]))),
            (ember.chain_matmul(E(x), E(x.T)), torch.chain_matmul(T(x), T(x.T))),
        ]
        xs = randn(6) ** 2
        xs.sort()
        for eo in (1, 2):
            for a, b in zip(ember.gradient(E(x), spacing=(E(np.arange(4.0) ** 2), E(xs)), edge_order=eo),
                            torch.gradient(T(x), spacing=(T(np.arange(4.0) ** 2), T(xs)), edge_order=eo)):
                pairs.append((a, b))
        h1 = ember.histogram(E(x.astype(np.float32)), 7, weight=E(x.astype(np.float32) ** 2), density=True)
        h2 = torch.histogram(T(x.astype(np.float32)), 7, weight=T(x.astype(np.float32) ** 2), density=True)
        pairs += [(h1.hist, h2.hist), (h1.bin_edges, h2.bin_edges)]
        h1 = ember.histogramdd(E(x[:, :3]), bins=[2, 3, 4], density=True)
        h2 = torch.histogramdd(T(x[:, :3]), bins=[2, 3, 4], density=True)
        pairs += [(h1.hist, h2.hist)] + list(zip(h1.bin_edges, h2.bin_edges))
    for a, b in pairs:
        assert a.dtype.is_floating_point and tuple(a.shape) == tuple(b.shape)
        close(a, b.numpy(), 1e-5)


def test_renorm_grad_against_torch(torch):
    x = randn(3, 4)
    a = E(x).requires_grad_(True)
    b = torch.tensor(x, requires_grad=True)
    w = randn(3, 4)
    (ember.renorm(a, 2, 0, 1.0) * E(w)).sum().backward()
    (torch.renorm(b, 2, 0, 1.0) * torch.tensor(w)).sum().backward()
    close(a.grad, b.grad.numpy())
