"""ember.distributions: hand-computed densities/entropies/KLs (always run), sample
statistics, gradients through rsample/log_prob/entropy (gradcheck), and torch
parity for values, shapes, dtypes and validation errors (skipped without torch)."""
import math

import numpy as np
import pytest

import ember
from ember.autograd import gradcheck
from ember.distributions import (Bernoulli, Categorical, Distribution, Normal, Uniform,
                                 constraints, kl_divergence, register_kl)

rng = np.random.default_rng(7)


def f64(*shape):
    return ember.tensor(rng.standard_normal(shape), dtype=ember.float64).requires_grad_(True)


# -- hand references ----------------------------------------------------------------

def test_normal_by_hand():
    d = Normal(ember.tensor([0.0, 1.0]), ember.tensor([1.0, 2.0]))
    assert d.batch_shape == ember.Size([2]) and d.event_shape == ember.Size([])
    x = ember.tensor([0.5, -1.0])
    want = [-0.5 * 0.25 - 0.5 * math.log(2 * math.pi),
            -(4.0 / 8.0) - math.log(2.0) - 0.5 * math.log(2 * math.pi)]
    assert d.log_prob(x).tolist() == pytest.approx(want, rel=1e-6)
    assert d.entropy().tolist() == pytest.approx([0.5 + 0.5 * math.log(2 * math.pi) + math.log(s)
                                                  for s in (1.0, 2.0)], rel=1e-6)
    assert d.variance.tolist() == [1.0, 4.0] and d.stddev.tolist() == [1.0, 2.0]
    assert d.cdf(ember.tensor([0.0, 1.0])).tolist() == pytest.approx([0.5, 0.5])
    assert d.sample((3, 4)).shape == (3, 4, 2) and d.rsample().shape == (2,)
    assert Normal(0.0, 1.0).sample().shape == () and Normal(0.0, 1.0).loc.dtype == ember.float32


def test_categorical_by_hand():
    d = Categorical(probs=ember.tensor([[1.0, 3.0], [2.0, 2.0]]))
    assert d.batch_shape == ember.Size([2]) and d.probs.tolist() == [[0.25, 0.75], [0.5, 0.5]]
    assert d.log_prob(ember.tensor([1, 0])).tolist() == pytest.approx([math.log(0.75), math.log(0.5)])
    assert d.entropy().tolist() == pytest.approx(
        [-(0.25 * math.log(0.25) + 0.75 * math.log(0.75)), math.log(2)], rel=1e-6)
    lg = Categorical(logits=ember.tensor([0.0, math.log(3.0)]))
    assert lg.probs.tolist() == pytest.approx([0.25, 0.75])
    assert lg.logits.exp().sum().item() == pytest.approx(1.0)  # normalized like torch
    s = d.sample((4000,))
    assert s.shape == (4000, 2) and s.dtype == ember.int64
    assert (s[:, 0] == 1).float().mean().item() == pytest.approx(0.75, abs=0.04)
    assert d.enumerate_support().tolist() == [[0, 0], [1, 1]]
    with pytest.raises(ValueError, match="not both"):
        Categorical(probs=ember.tensor([0.5, 0.5]), logits=ember.tensor([0.0, 0.0]))
    with pytest.raises(ValueError, match="at least one-dimensional"):
        Categorical(probs=ember.tensor(1.0))


def test_bernoulli_uniform_by_hand():
    b = Bernoulli(probs=ember.tensor([0.2, 0.9]))
    assert b.log_prob(ember.tensor([1.0, 0.0])).tolist() == pytest.approx([math.log(0.2), math.log(0.1)], rel=1e-5)
    assert b.entropy()[0].item() == pytest.approx(-(0.2 * math.log(0.2) + 0.8 * math.log(0.8)), rel=1e-5)
    assert Bernoulli(logits=ember.tensor([0.0])).probs.tolist() == [0.5]
    assert b.sample((1000,)).mean(0).tolist() == pytest.approx([0.2, 0.9], abs=0.05)
    u = Uniform(ember.tensor([0.0, -1.0]), ember.tensor([2.0, 3.0]))
    assert u.log_prob(ember.tensor([1.0, 0.0])).tolist() == pytest.approx([-math.log(2), -math.log(4)])
    assert u.entropy().tolist() == pytest.approx([math.log(2), math.log(4)])
    assert u.mean.tolist() == [1.0, 1.0] and u.variance.tolist() == pytest.approx([4 / 12, 16 / 12])
    s = u.rsample((2000,))
    assert bool((s[:, 0] >= 0).all()) and bool((s[:, 0] < 2).all())
    assert s.mean(0).tolist() == pytest.approx([1.0, 1.0], abs=0.1)
    assert Uniform(0.0, 1.0, validate_args=False).log_prob(ember.tensor(2.0)).item() == -math.inf


def test_kl_by_hand():
    p, q = Normal(0.0, 1.0), Normal(1.0, 2.0)
    want = math.log(2.0) + (1.0 + 1.0) / (2 * 4.0) - 0.5
    assert kl_divergence(p, q).item() == pytest.approx(want, rel=1e-6)
    pc, qc = Categorical(probs=ember.tensor([0.5, 0.5, 0.0])), Categorical(probs=ember.tensor([0.25, 0.75, 0.0]))
    assert kl_divergence(pc, qc).item() == pytest.approx(0.5 * math.log(2) + 0.5 * math.log(2 / 3), rel=1e-5)
    assert kl_divergence(qc, Categorical(probs=ember.tensor([1.0, 0.0, 0.0]))).item() == math.inf
    with pytest.raises(NotImplementedError):
        kl_divergence(p, pc)

    class MyNormal(Normal):
        pass

    @register_kl(MyNormal, Normal)
    def _kl(p, q):
        return ember.tensor(42.0)

    assert kl_divergence(MyNormal(0.0, 1.0), q).item() == 42.0
    assert kl_divergence(Normal(0.0, 1.0), MyNormal(0.0, 1.0)).item() == 0.0  # falls back


def test_validation_errors():
    with pytest.raises(ValueError, match=r"Expected parameter scale .* GreaterThan\(lower_bound=0.0\)"):
        Normal(ember.zeros(2), ember.tensor([1.0, -1.0]))
    Normal(0.0, -1.0, validate_args=False)  # no check when asked not to
    with pytest.raises(ValueError, match="must be a Tensor"):
        Normal(0.0, 1.0).log_prob(1.0)
    with pytest.raises(ValueError, match=r"within the support \(Boolean\(\)\)"):
        Bernoulli(probs=0.5).log_prob(ember.tensor(0.5))
    with pytest.raises(ValueError, match="not broadcastable"):
        Normal(ember.zeros(2), ember.ones(2)).log_prob(ember.zeros(3))
    with pytest.raises(ValueError, match=r"LessThan\(upper_bound=0.0\)"):
        Uniform(1.0, 0.0)
    assert isinstance(Normal(0.0, 1.0), Distribution) and constraints.positive.check(ember.tensor(1.0)).item()


# -- gradients -------------------------------------------------------------------------

def test_gradcheck_log_prob_entropy_kl():
    value = ember.tensor(rng.standard_normal(3), dtype=ember.float64)
    assert gradcheck(lambda m, s: Normal(m, s.exp()).log_prob(value), (f64(3), f64(3)))
    assert gradcheck(lambda s: Normal(0.0, s.exp()).entropy(), (f64(3),))
    assert gradcheck(lambda a, b, c, d: kl_divergence(Normal(a, b.exp()), Normal(c, d.exp())),
                     (f64(2), f64(2), f64(2), f64(2)))
    idx = ember.tensor([0, 2])
    assert gradcheck(lambda lg: Categorical(logits=lg).log_prob(idx), (f64(2, 3),))
    assert gradcheck(lambda lg: Categorical(logits=lg).entropy(), (f64(2, 3),))
    assert gradcheck(lambda lg: Categorical(probs=lg.exp()).entropy(), (f64(2, 3),))
    assert gradcheck(lambda a, b: kl_divergence(Categorical(logits=a), Categorical(logits=b)),
                     (f64(2, 3), f64(2, 3)))
    bvals = ember.tensor([0.0, 1.0, 1.0], dtype=ember.float64)
    assert gradcheck(lambda lg: Bernoulli(logits=lg).log_prob(bvals), (f64(3),))
    assert gradcheck(lambda lg: Bernoulli(logits=lg).entropy(), (f64(3),))
    assert gradcheck(lambda lo, w: Uniform(lo, lo + w.exp()).entropy(), (f64(2), f64(2)))


def test_rsample_gradients():
    loc = ember.zeros(5, requires_grad=True)
    log_scale = ember.zeros(5, requires_grad=True)
    ember.manual_seed(3)
    d = Normal(loc, log_scale.exp())
    x = d.rsample((4,))
    x.sum().backward()
    eps = x.detach()  # loc 0, scale 1: the sample is the noise itself
    assert loc.grad.tolist() == [4.0] * 5
    np.testing.assert_allclose(log_scale.grad.numpy(), eps.sum(0).numpy(), rtol=1e-6)
    assert d.sample().requires_grad is False
    lo, hi = ember.zeros(3, requires_grad=True), ember.ones(3, requires_grad=True)
    u = Uniform(lo, hi).rsample()
    u.sum().backward()
    np.testing.assert_allclose(hi.grad.numpy(), u.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(lo.grad.numpy(), 1 - u.detach().numpy(), rtol=1e-6)


# -- torch parity -------------------------------------------------------------------------

def _params(lib, spec):
    return {k: lib.tensor(v) if isinstance(v, np.ndarray) else v for k, v in spec.items()}


CASES = [
    ("Normal", {"loc": rng.standard_normal((2, 3)).astype(np.float32), "scale": 1.5},
     rng.standard_normal((4, 2, 3)).astype(np.float32)),
    ("Normal", {"loc": 0.5, "scale": np.array([0.5, 2.0])}, np.array([0.1, -3.0])),
    ("Categorical", {"probs": np.array([[0.1, 0.2, 0.7], [1.0, 1.0, 2.0]], dtype=np.float32)},
     np.array([[2, 0], [1, 1]])),
    ("Categorical", {"logits": rng.standard_normal((3, 4))}, np.array([0, 3, 1])),
    ("Categorical", {"probs": np.array([0.5, 0.5, 0.0], dtype=np.float32)}, np.array([0, 2])),
    ("Bernoulli", {"probs": np.array([0.0, 0.3, 1.0], dtype=np.float32)}, np.array([0.0, 1.0, 1.0], dtype=np.float32)),
    ("Bernoulli", {"logits": rng.standard_normal(3)}, np.array([1.0, 0.0, 1.0])),
    ("Bernoulli", {"probs": 0.25}, np.array([1.0, 0.0], dtype=np.float32)),
    ("Uniform", {"low": np.array([0.0, -1.0], dtype=np.float32), "high": 2.0}, np.array([1.0, 2.0], dtype=np.float32)),
]


def _cmp(got, want, what):
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1], what
    assert tuple(got.shape) == tuple(want.shape), what
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=2e-5, atol=1e-6,
                               equal_nan=True, err_msg=what)


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_torch_parity(torch, case):
    name, spec, value = case
    e = getattr(ember.distributions, name)(**_params(ember, spec))
    t = getattr(torch.distributions, name)(**_params(torch, spec))
    assert tuple(e.batch_shape) == tuple(t.batch_shape) and tuple(e.event_shape) == tuple(t.event_shape)
    _cmp(e.log_prob(ember.tensor(value)), t.log_prob(torch.tensor(value)), "log_prob")
    _cmp(e.entropy(), t.entropy(), "entropy")
    for attr in ("mean", "variance", "stddev", "mode"):
        _cmp(getattr(e, attr), getattr(t, attr), attr)
    for attr in ("probs", "logits"):
        if hasattr(t, attr):
            _cmp(getattr(e, attr), getattr(t, attr), attr)
    got, want = e.sample((5,)), t.sample((5,))
    assert tuple(got.shape) == tuple(want.shape) and got.dtype.is_floating_point == want.dtype.is_floating_point
    assert repr(e).replace("ember.", "torch.") == repr(t)


@pytest.mark.parametrize("pair", [
    ("Normal", {"loc": np.array([0.0, 1.0]), "scale": np.array([1.0, 0.5])},
     {"loc": np.array([0.5, -1.0]), "scale": np.array([2.0, 0.25])}),
    ("Categorical", {"logits": rng.standard_normal((2, 4))}, {"logits": rng.standard_normal((2, 4))}),
    ("Categorical", {"probs": np.array([0.5, 0.5, 0.0])}, {"probs": np.array([0.2, 0.0, 0.8])}),
    ("Bernoulli", {"probs": np.array([0.0, 0.5, 1.0])}, {"probs": np.array([0.3, 0.5, 0.0])}),
    ("Uniform", {"low": np.array([0.0, 0.0]), "high": np.array([1.0, 2.0])},
     {"low": np.array([-1.0, 0.5]), "high": np.array([2.0, 3.0])}),
])
def test_kl_torch_parity(torch, pair):
    name, ps, qs = pair
    E, T = getattr(ember.distributions, name), getattr(torch.distributions, name)
    _cmp(kl_divergence(E(**_params(ember, ps)), E(**_params(ember, qs))),
         torch.distributions.kl_divergence(T(**_params(torch, ps)), T(**_params(torch, qs))), "kl")


@pytest.mark.parametrize("build", [
    lambda L, D: D.Normal(L.zeros(2), L.tensor([1.0, -1.0])),
    lambda L, D: D.Normal(L.tensor([float("nan")]), L.ones(1)),
    lambda L, D: D.Categorical(probs=L.tensor([-1.0, 2.0])),
    lambda L, D: D.Categorical(logits=L.tensor([[0.0, float("nan")]])),
    lambda L, D: D.Bernoulli(probs=L.tensor([1.5])),
    lambda L, D: D.Bernoulli(logits=L.tensor([float("nan")])),
    lambda L, D: D.Uniform(1.0, 0.0),
    lambda L, D: D.Categorical(probs=L.tensor([1.0, 2.0])).log_prob(L.tensor(2)),
    lambda L, D: D.Categorical(probs=L.tensor([1.0, 2.0])).log_prob(L.tensor([0.5])),
    lambda L, D: D.Bernoulli(probs=L.tensor([0.5])).log_prob(L.tensor([0.5])),
    lambda L, D: D.Uniform(0.0, 1.0).log_prob(L.tensor([2.0])),
    lambda L, D: D.Normal(L.zeros(2), L.ones(2)).log_prob(L.zeros(3)),
    lambda L, D: D.Normal(0.0, 1.0).log_prob(1.0),
])
def test_validation_messages_match_torch(torch, build):
    with pytest.raises(Exception) as want:
        build(torch, torch.distributions)
    with pytest.raises(type(want.value)) as got:
        build(ember, ember.distributions)
    assert str(got.value).replace("ember.", "torch.") == str(want.value)


def test_relaxed_bernoulli_density_by_hand_and_samples():
    from ember.distributions import LogitRelaxedBernoulli, RelaxedBernoulli
    t, p = 0.5, np.array([0.2, 0.7])
    d = RelaxedBernoulli(ember.tensor(t), probs=ember.tensor(p, dtype=ember.float32))
    y = np.array([0.3, 0.9])
    # binary Concrete density: t a (y(1-y))^(-t-1) / (a y^-t + (1-y)^-t)^2 with a = p / (1 - p)
    a = p / (1 - p)
    want = np.log(t * a * (y * (1 - y)) ** (-t - 1) / (a * y ** -t + (1 - y) ** -t) ** 2)
    np.testing.assert_allclose(d.log_prob(ember.tensor(y, dtype=ember.float32)).numpy(), want, rtol=1e-5)
    ember.manual_seed(0)
    s = d.rsample((40000,))
    assert tuple(s.shape) == (40000, 2) and float(s.min()) > 0 and float(s.max()) < 1
    # P(Y > 1/2) = P(logits + logistic noise > 0) = p, for any temperature
    np.testing.assert_allclose((s > 0.5).float().mean(0).numpy(), p, atol=0.01)
    x = LogitRelaxedBernoulli(ember.tensor(t), logits=ember.tensor([0.0])).log_prob(ember.tensor([0.0]))
    np.testing.assert_allclose(x.numpy(), [np.log(t) - 2 * np.log(2)], rtol=1e-6)
    assert not d.sample().requires_grad


def test_wishart_is_not_available():
    from ember.distributions.wishart import Wishart
    with pytest.raises(NotImplementedError, match="Wishart"):
        Wishart(df=3.0, covariance_matrix=ember.eye(2))
