"""ember.nn.utils.parametrize, parametrizations.weight_norm / spectral_norm and the older
nn.utils.weight_norm / spectral_norm: hand and NumPy references (always run), and torch
parity -- same weights and seeds give the same values, buffers, gradients and state_dict
keys (skipped without torch)."""
import warnings

import numpy as np
import pytest

import ember
from ember import nn
from ember.nn.utils import parametrize, parametrizations as EP

rng = np.random.default_rng(5)


def randn(*shape):
    return rng.standard_normal(shape)


def close(x, ref, tol=1e-10):
    np.testing.assert_allclose(x.detach().numpy(), np.asarray(ref), rtol=tol, atol=tol)


class Symmetric(nn.Module):
    def forward(self, X):
        return X.triu() + X.triu(1).transpose(0, 1)

    def right_inverse(self, A):
        return A.triu()


class Double(nn.Module):
    def forward(self, X):
        return 2 * X

    def right_inverse(self, A):
        return A / 2


class SumOfTwo(nn.Module):  # right_inverse returns two tensors: original0, original1
    def forward(self, a, b):
        return a + b

    def right_inverse(self, A):
        return A * 0.25, A * 0.75


def test_register_and_remove_by_hand():
    m = nn.Linear(3, 3).double()
    w0 = m.weight.detach().numpy().copy()
    orig = m.weight
    parametrize.register_parametrization(m, "weight", Symmetric())
    assert type(m).__name__ == "ParametrizedLinear" and isinstance(m, nn.Linear)
    assert parametrize.is_parametrized(m) and parametrize.is_parametrized(m, "weight")
    assert not parametrize.is_parametrized(m, "bias")
    assert parametrize.type_before_parametrizations(m) is nn.Linear
    assert m.parametrizations.weight.original is orig  # the same Parameter object
    sym = np.triu(w0) + np.triu(w0, 1).T
    close(m.weight, sym)
    assert list(m.state_dict()) == ["bias", "parametrizations.weight.original"]
    # assignment goes through right_inverse
    a = randn(3, 3)
    a = a + a.T
    m.weight = ember.tensor(a)
    close(m.weight, a)
    close(m.parametrizations.weight.original, np.triu(a))
    # a second parametrization chains after the first
    parametrize.register_parametrization(m, "weight", Double())
    close(m.weight, 2 * a)
    assert len(m.parametrizations.weight) == 2
    with parametrize.cached():
        assert m.weight is m.weight
    assert m.weight is not m.weight
    # gradient flows to original
    x = ember.tensor(randn(2, 3))
    m(x).sum().backward()
    assert m.parametrizations.weight.original.grad is not None
    parametrize.remove_parametrizations(m, "weight", leave_parametrized=True)
    assert type(m) is nn.Linear and not parametrize.is_parametrized(m)
    assert isinstance(m.weight, nn.Parameter) and m.weight is orig
    close(m.weight, 2 * a)
    assert list(m.state_dict()) == ["bias", "weight"]  # re-registered last, as in torch
    # a parametrized module deep-copies (AveragedModel does) into an independent one
    import copy
    m2 = nn.Linear(2, 2)
    parametrize.register_parametrization(m2, "weight", Double())
    c = copy.deepcopy(m2)
    assert type(c) is type(m2) and c.parametrizations.weight.original is not m2.parametrizations.weight.original
    close(c.weight, m2.weight.detach().numpy())
    with pytest.raises(RuntimeError, match="only supported through state_dict"):
        __import__("pickle").dumps(m2)


def test_remove_leave_unparametrized_and_sequences():
    m = nn.Linear(2, 2).double()
    w = m.weight.detach().numpy().copy()
    parametrize.register_parametrization(m, "weight", Double())
    close(m.parametrizations.weight.original, w / 2)  # right_inverse at registration
    parametrize.remove_parametrizations(m, "weight", leave_parametrized=False)
    close(m.weight, w / 2)
    m = nn.Linear(2, 2).double()
    w = m.weight.detach().numpy().copy()
    parametrize.register_parametrization(m, "weight", SumOfTwo())
    assert [k for k in m.state_dict()] == ["bias", "parametrizations.weight.original0",
                                           "parametrizations.weight.original1"]
    close(m.parametrizations.weight.original0, w * 0.25)
    close(m.weight, w)
    with pytest.raises(ValueError, match="Cannot leave unparametrized"):
        parametrize.remove_parametrizations(m, "weight", leave_parametrized=False)
    parametrize.remove_parametrizations(m, "weight")
    assert isinstance(m.weight, nn.Parameter)
    close(m.weight, w)


def test_buffers_unsafe_and_errors():
    m = nn.BatchNorm1d(3)
    parametrize.register_parametrization(m, "running_mean", Double())
    assert "parametrizations.running_mean.original" in m.state_dict()

    class Flatten(nn.Module):
        def forward(self, X):
            return X.reshape(-1)
    m = nn.Linear(2, 3)
    with pytest.raises(ValueError, match="may not change the shape"):
        parametrize.register_parametrization(m, "weight", Flatten())
    parametrize.register_parametrization(m, "weight", Flatten(), unsafe=True)
    assert m.weight.shape == (6,)

    class ToDouble(nn.Module):
        def forward(self, X):
            return X.double()
    with pytest.raises(ValueError, match="may not change the dtype"):
        parametrize.register_parametrization(nn.Linear(2, 2), "weight", ToDouble())
    with pytest.raises(ValueError, match="does not have a parameter, a buffer, or a parametrized element"):
        parametrize.register_parametrization(nn.Linear(2, 2), "foo", Double())
    with pytest.raises(ValueError, match="does not have a parametrization on weight"):
        parametrize.remove_parametrizations(nn.Linear(2, 2), "weight")

    class NoInverse(nn.Module):
        def forward(self, X):
            return X * 3
    m = nn.Linear(2, 2)
    parametrize.register_parametrization(m, "weight", NoInverse())
    with pytest.raises(RuntimeError, match="does not implement right_inverse"):
        m.weight = ember.ones(2, 2)


def test_weight_norm_by_hand():
    m = nn.Linear(3, 4).double()
    w = m.weight.detach().numpy().copy()
    EP.weight_norm(m)
    g = m.parametrizations.weight.original0
    v = m.parametrizations.weight.original1
    assert g.shape == (4, 1) and v.shape == (4, 3)
    close(g, np.linalg.norm(w, axis=1, keepdims=True))
    close(m.weight, w)
    with ember.no_grad():
        g.mul_(2)
    close(m.weight, 2 * w)
    m2 = EP.weight_norm(nn.Linear(3, 4).double(), dim=None)
    assert m2.parametrizations.weight.original0.shape == ()
    # an old-style checkpoint (weight_g / weight_v) loads into the parametrized module
    m3 = nn.Linear(3, 4).double()
    EP.weight_norm(m3)
    m3.load_state_dict({"weight_g": ember.ones(4, 1, dtype=ember.float64),
                        "weight_v": ember.tensor(w), "bias": ember.zeros(4, dtype=ember.float64)})
    close(m3.weight, w / np.linalg.norm(w, axis=1, keepdims=True))


def _gapped_linear():
    """A Linear(5, 4) whose weight has singular values 3, 1, 0.5, 0.2: power iteration
    converges fast (by a factor 1/3 a step), whatever the random start."""
    m = nn.Linear(5, 4).double()
    u = np.linalg.qr(randn(4, 4))[0]
    v = np.linalg.qr(randn(5, 5))[0][:4]
    w = u @ np.diag([3.0, 1.0, 0.5, 0.2]) @ v
    with ember.no_grad():
        m.weight.copy_(ember.tensor(w))
    return m, w


def test_spectral_norm_by_hand():
    m, w = _gapped_linear()
    EP.spectral_norm(m, n_power_iterations=5)
    close(m.weight, w / 3.0, 1e-9)  # 15 + 1 steps at registration
    assert list(m.state_dict()) == ["bias", "parametrizations.weight.original",
                                    "parametrizations.weight.0._u", "parametrizations.weight.0._v"]
    m.eval()
    u = m.parametrizations.weight[0]._u.clone()
    m(ember.ones(1, 5, dtype=ember.float64))
    assert ember.equal(u, m.parametrizations.weight[0]._u)  # no power iteration in eval mode
    with pytest.raises(IndexError, match="Dimension out of range"):
        EP.spectral_norm(nn.Linear(2, 2), dim=3)
    with pytest.raises(ValueError, match="n_power_iterations to be positive"):
        EP.spectral_norm(nn.Linear(2, 2), n_power_iterations=0)
    with pytest.raises(ValueError, match="has no parameter or buffer with name 'foo'"):
        EP.spectral_norm(nn.Linear(2, 2), name="foo")


def test_old_weight_norm_and_spectral_norm_by_hand():
    m = nn.Linear(3, 4).double()
    w = m.weight.detach().numpy().copy()
    with pytest.warns(FutureWarning, match="deprecated"):
        nn.utils.weight_norm(m)
    assert list(m.state_dict()) == ["bias", "weight_g", "weight_v"]
    close(m.weight_g, np.linalg.norm(w, axis=1, keepdims=True))
    with ember.no_grad():
        m.weight_g.mul_(3)
    m(ember.ones(1, 3, dtype=ember.float64))
    close(m.weight, 3 * w)
    with pytest.raises(RuntimeError, match="Cannot register two weight_norm hooks"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        nn.utils.weight_norm(m)
    nn.utils.remove_weight_norm(m)
    assert list(m.state_dict()) == ["bias", "weight"] and isinstance(m.weight, nn.Parameter)
    close(m.weight, 3 * w)
    with pytest.raises(ValueError, match="weight_norm of 'weight' not found"):
        nn.utils.remove_weight_norm(m)

    m, w = _gapped_linear()
    nn.utils.spectral_norm(m, n_power_iterations=30)
    assert list(m.state_dict()) == ["bias", "weight_orig", "weight_u", "weight_v"]
    m(ember.ones(1, 5, dtype=ember.float64))
    close(m.weight, w / 3.0, 1e-9)
    nn.utils.remove_spectral_norm(m)
    assert list(m.state_dict()) == ["bias", "weight"]
    with pytest.raises(ValueError, match="spectral_norm of 'weight' not found"):
        nn.utils.remove_spectral_norm(m)


# -- torch parity ----------------------------------------------------------------------

def _twin(torch, make):
    """An ember module and a torch module with the same weights."""
    tm = make(torch.nn).double()
    em = make(nn).double()
    em.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    return em, tm


def _same_state(em, tm, tol=1e-12):
    es, ts = em.state_dict(), tm.state_dict()
    assert list(es) == list(ts)
    for k in es:
        np.testing.assert_allclose(es[k].numpy(), ts[k].detach().numpy(), rtol=tol, atol=tol, err_msg=k)


@pytest.mark.parametrize("dim", [0, 1, None, -1])
def test_weight_norm_against_torch(torch, dim):
    from torch.nn.utils import parametrizations as TP
    em, tm = _twin(torch, lambda N: N.Conv1d(2, 4, 3))
    EP.weight_norm(em, dim=dim)
    TP.weight_norm(tm, dim=dim)
    assert type(em).__name__ == type(tm).__name__
    assert repr(em).replace("ember", "torch") == repr(tm)
    _same_state(em, tm)
    x = randn(2, 2, 5)
    ye, yt = em(ember.tensor(x)), tm(torch.tensor(x))
    close(ye, yt.detach().numpy())
    ye.pow(2).sum().backward()
    yt.pow(2).sum().backward()
    for a, b in zip(em.parameters(), tm.parameters()):
        close(a.grad, b.grad.numpy())


@pytest.mark.parametrize("make,kw", [(lambda N: N.Linear(5, 4), {}), (lambda N: N.Conv2d(3, 4, 2), {"eps": 1e-6}),
                                     (lambda N: N.Conv2d(3, 4, 2), {"n_power_iterations": 3, "dim": 1})])
def test_spectral_norm_against_torch(torch, make, kw):
    from torch.nn.utils import parametrizations as TP
    em, tm = _twin(torch, make)
    ember.manual_seed(3)
    torch.manual_seed(3)
    EP.spectral_norm(em, **kw)
    TP.spectral_norm(tm, **kw)
    _same_state(em, tm, 1e-10)
    shape = (2, 5) if isinstance(em, nn.Linear) else (2, 3, 4, 4)
    x = randn(*shape)
    for mode in ("train", "train", "eval"):
        getattr(em, mode)()
        getattr(tm, mode)()
        ye, yt = em(ember.tensor(x)), tm(torch.tensor(x))
        close(ye, yt.detach().numpy(), 1e-10)
        _same_state(em, tm, 1e-10)
    ye.sum().backward()
    yt.sum().backward()
    close(em.parametrizations.weight.original.grad, tm.parametrizations.weight.original.grad.numpy(), 1e-10)


def test_old_style_against_torch(torch):
    em, tm = _twin(torch, lambda N: N.Linear(5, 4))
    ember.manual_seed(4)
    torch.manual_seed(4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        nn.utils.spectral_norm(em)
        torch.nn.utils.spectral_norm(tm)
    _same_state(em, tm)
    assert em.state_dict()._metadata[""]["spectral_norm"] == tm.state_dict()._metadata[""]["spectral_norm"]
    x = randn(3, 5)
    for mode in ("train", "eval"):
        getattr(em, mode)()
        getattr(tm, mode)()
        close(em(ember.tensor(x)), tm(torch.tensor(x)).detach().numpy())
        _same_state(em, tm)
    em, tm = _twin(torch, lambda N: N.Conv1d(2, 3, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        nn.utils.weight_norm(em, dim=1)
        torch.nn.utils.weight_norm(tm, dim=1)
    _same_state(em, tm)
    x = randn(1, 2, 4)
    close(em(ember.tensor(x)), tm(torch.tensor(x)).detach().numpy())
    nn.utils.remove_weight_norm(em)
    torch.nn.utils.remove_weight_norm(tm)
    _same_state(em, tm)


def test_parametrize_state_dict_round_trip_with_torch(torch):
    from torch.nn.utils import parametrize as TPZ
    em, tm = _twin(torch, lambda N: N.Linear(3, 3))

    class TSym(torch.nn.Module):
        def forward(self, X):
            return X.triu() + X.triu(1).transpose(0, 1)

        def right_inverse(self, A):
            return A.triu()
    parametrize.register_parametrization(em, "weight", Symmetric())
    TPZ.register_parametrization(tm, "weight", TSym())
    _same_state(em, tm)
    close(em.weight, tm.weight.detach().numpy())
    # torch's state_dict loads into the ember module
    sd = {k: ember.tensor(v.detach().numpy() * 2) for k, v in tm.state_dict().items()}
    em.load_state_dict(sd)
    close(em.weight, 2 * tm.weight.detach().numpy())


# -- orthogonal --------------------------------------------------------------------------

def _orth_error(W):
    W = W.detach().numpy()
    Wt = np.swapaxes(W, -1, -2)
    G = Wt @ W if W.shape[-2] >= W.shape[-1] else W @ Wt
    return np.abs(G - np.eye(G.shape[-1])).max()


@pytest.mark.parametrize("shape,kw", [((3, 3), {}), ((5, 3), {}), ((3, 5), {}),
                                      ((4, 4), {"orthogonal_map": "householder"}),
                                      ((5, 3), {"use_trivialization": False}),
                                      ((5, 3), {"orthogonal_map": "matrix_exp"})])
def test_orthogonal_by_hand(shape, kw):
    m = nn.Linear(shape[1], shape[0]).double()
    EP.orthogonal(m, **kw)
    assert _orth_error(m.weight) < 1e-12
    opt = ember.optim.SGD(m.parameters(), lr=0.5)
    for _ in range(3):  # stays orthogonal while training
        opt.zero_grad()
        m(ember.tensor(randn(4, shape[1]))).pow(2).sum().backward()
        opt.step()
    assert _orth_error(m.weight) < 1e-12
    q = np.linalg.qr(randn(max(shape), min(shape)))[0]
    q = q if shape[0] >= shape[1] else q.T
    m.weight = ember.tensor(q)  # assigning an orthogonal matrix sets the weight to it
    close(m.weight, q, 1e-10)


def test_orthogonal_matrix_exp_rotation_and_batches():
    class Rot(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(ember.zeros(2, 3, 3, dtype=ember.float64))
    m = Rot()
    EP.orthogonal(m, orthogonal_map="matrix_exp", use_trivialization=False)
    with ember.no_grad():  # the lower triangle t gives exp([[0, -t], [t, 0]]): a rotation by t
        m.parametrizations.weight.original.copy_(ember.zeros(2, 3, 3, dtype=ember.float64))
        m.parametrizations.weight.original[0, 1, 0] = 0.7
    W = m.weight.detach().numpy()
    c, s = np.cos(0.7), np.sin(0.7)
    close(ember.tensor(W[0]), [[c, -s, 0], [s, c, 0], [0, 0, 1]], 1e-14)
    close(ember.tensor(W[1]), np.eye(3), 1e-14)
    with pytest.raises(NotImplementedError, match="not possible to assign"):
        m.weight = ember.tensor(np.stack([np.eye(3)] * 2))
    with pytest.raises(ValueError, match="orthogonal_map has to be one of"):
        EP.orthogonal(nn.Linear(2, 2), orthogonal_map="foo")
    with pytest.raises(ValueError, match="Got a tensor of 1 dimensions"):
        EP.orthogonal(nn.Linear(2, 2), name="bias")


@pytest.mark.parametrize("shape,kw", [((3, 3), {}), ((5, 3), {}), ((3, 5), {}), ((3, 5), {"use_trivialization": False}),
                                      ((3, 3), {"orthogonal_map": "householder"}),
                                      ((4, 4), {"orthogonal_map": "matrix_exp", "use_trivialization": False})])
def test_orthogonal_against_torch(torch, shape, kw):
    from torch.nn.utils import parametrizations as TP
    em, tm = _twin(torch, lambda N: N.Linear(shape[1], shape[0]))
    torch.manual_seed(1)
    ember.manual_seed(1)  # the random completion of a non-square weight draws the same numbers
    EP.orthogonal(em, **kw)
    TP.orthogonal(tm, **kw)
    _same_state(em, tm, 1e-12)
    close(em.weight, tm.weight.detach().numpy(), 1e-12)
    x = randn(2, shape[1])
    ye, yt = em(ember.tensor(x)), tm(torch.tensor(x))
    ye.pow(2).sum().backward()
    yt.pow(2).sum().backward()
    close(em.parametrizations.weight.original.grad, tm.parametrizations.weight.original.grad.numpy(), 1e-12)


@pytest.mark.skipif(not hasattr(ember.linalg, "solve"), reason="the Cayley map needs ember.linalg.solve")
def test_orthogonal_cayley_against_torch(torch):
    from torch.nn.utils import parametrizations as TP
    em, tm = _twin(torch, lambda N: N.Linear(3, 3))
    EP.orthogonal(em, orthogonal_map="cayley")
    TP.orthogonal(tm, orthogonal_map="cayley")
    with ember.no_grad():
        em.parametrizations.weight.original.copy_(ember.tensor(np.tril(randn(3, 3))))
    with torch.no_grad():
        tm.parametrizations.weight.original.copy_(torch.tensor(em.parametrizations.weight.original.detach().numpy()))
    close(em.weight, tm.weight.detach().numpy(), 1e-12)
    assert _orth_error(em.weight) < 1e-12
