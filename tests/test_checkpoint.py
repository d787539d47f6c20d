"""ember.utils.checkpoint (torch.utils.checkpoint): gradients through a
checkpointed function against finite differences (gradcheck) and NumPy's
hand-derived ones, parameters used inside it getting theirs (also with no
input requiring grad, use_reentrant=False), the random-number state
replayed (dropout's mask the same in the recomputation), autocast replayed,
intermediate values not kept, checkpoint_sequential, and torch's warnings
and errors. `L` runs each test on ember and, when installed, on torch."""
import gc
import warnings
import weakref

import numpy as np
import pytest

import ember


def _mlp_np(x, w, b, g):
    """y = tanh(x w^T + b); loss = sum(y * g): (y, dx, dw, db)"""
    y = np.tanh(x @ w.T + b)
    dz = (1 - y * y) * g
    return y, dz @ w, dz.T @ x, dz.sum(0)


@pytest.mark.parametrize("reentrant", [True, False])
def test_gradcheck_through_checkpoint(reentrant):
    rng = np.random.default_rng(0)
    x = ember.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    w = ember.tensor(rng.standard_normal((5, 4)), requires_grad=True)

    def f(x, w):
        return ember.utils.checkpoint.checkpoint(lambda a, b: (a @ b.T).tanh() * 2, x, w, use_reentrant=reentrant)
    assert ember.autograd.gradcheck(f, (x, w))


@pytest.mark.parametrize("reentrant", [True, False])
def test_module_parameters_get_numpys_gradients(L, reentrant):
    rng = np.random.default_rng(1)
    x_np, w_np, b_np, g_np = (rng.standard_normal(s) for s in [(6, 4), (3, 4), (3,), (6, 3)])
    lin = L.nn.Linear(4, 3).double()
    with L.no_grad():
        lin.weight.copy_(L.tensor(w_np))
        lin.bias.copy_(L.tensor(b_np))
    x = L.tensor(x_np, requires_grad=True)
    y = L.utils.checkpoint.checkpoint(lambda t: L.tanh(lin(t)), x, use_reentrant=reentrant)
    y.backward(L.tensor(g_np))
    y_ref, dx, dw, db = _mlp_np(x_np, w_np, b_np, g_np)
    np.testing.assert_allclose(y.detach().numpy(), y_ref, rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), dx, rtol=1e-12)
    np.testing.assert_allclose(lin.weight.grad.numpy(), dw, rtol=1e-12)
    np.testing.assert_allclose(lin.bias.grad.numpy(), db, rtol=1e-12)


def test_non_reentrant_without_input_grad_still_trains_parameters(L):
    rng = np.random.default_rng(2)
    x_np, g_np = rng.standard_normal((6, 4)), rng.standard_normal((6, 3))
    lin = L.nn.Linear(4, 3).double()
    y = L.utils.checkpoint.checkpoint(lambda t: L.tanh(lin(t)), L.tensor(x_np), use_reentrant=False)
    assert y.requires_grad
    y.backward(L.tensor(g_np))
    _, _, dw, db = _mlp_np(x_np, lin.weight.detach().numpy(), lin.bias.detach().numpy(), g_np)
    np.testing.assert_allclose(lin.weight.grad.numpy(), dw, rtol=1e-12)
    np.testing.assert_allclose(lin.bias.grad.numpy(), db, rtol=1e-12)


def test_reentrant_without_input_grad_warns(L):
    lin = L.nn.Linear(4, 3)
    with pytest.warns(UserWarning, match="None of the inputs have requires_grad=True"):
        y = L.utils.checkpoint.checkpoint(lin, L.randn(2, 4), use_reentrant=True)
    assert not y.requires_grad


def test_missing_use_reentrant_warns(L):
    with pytest.warns(UserWarning, match="use_reentrant parameter should be passed explicitly"):
        L.utils.checkpoint.checkpoint(lambda t: t * 2, L.randn(2, requires_grad=True))


def test_dropout_mask_is_replayed(L):
    L.manual_seed(3)
    x = L.ones(2000, dtype=L.float64, requires_grad=True)
    p = 0.4
    y = L.utils.checkpoint.checkpoint(lambda t: L.nn.functional.dropout(t, p, training=True) * 3, x,
                                      use_reentrant=False)
    L.rand(100)  # the generator moves on between forward and backward
    y.sum().backward()
    kept = y.detach().numpy() != 0
    assert 0.5 < kept.mean() < 0.7
    np.testing.assert_allclose(x.grad.numpy(), np.where(kept, 3 / (1 - p), 0.0), rtol=1e-12)


def test_intermediate_values_are_not_kept():
    refs = []

    def f(t):
        mid = t.exp()
        refs.append(weakref.ref(mid))
        return mid.sin()
    x = ember.randn(1000, dtype=ember.float64, requires_grad=True)
    y = ember.utils.checkpoint.checkpoint(f, x, use_reentrant=False)
    gc.collect()
    assert refs[0]() is None  # the forward's intermediate is gone
    y.sum().backward()
    xn = x.detach().numpy()
    np.testing.assert_allclose(x.grad.numpy(), np.cos(np.exp(xn)) * np.exp(xn), rtol=1e-10, atol=1e-12)


def test_autocast_is_replayed(L):
    lin = L.nn.Linear(8, 4)
    x = L.randn(3, 8, requires_grad=True)
    with L.autocast("cpu", dtype=L.bfloat16):
        y = L.utils.checkpoint.checkpoint(lin, x, use_reentrant=False)
    assert y.dtype == L.bfloat16
    y.float().sum().backward()
    assert lin.weight.grad.dtype == L.float32 and x.grad.dtype == L.float32
    # d/dW of sum(x W^T) = column sums of x, to bfloat16's precision
    np.testing.assert_allclose(lin.weight.grad.numpy(), np.tile(x.detach().numpy().sum(0), (4, 1)),
                               rtol=3e-2, atol=3e-2)


def test_checkpoint_sequential_matches_numpy(L):
    rng = np.random.default_rng(4)
    seq = L.nn.Sequential(*[L.nn.Sequential(L.nn.Linear(4, 4), L.nn.Tanh()) for _ in range(4)]).double()
    x_np = rng.standard_normal((5, 4))
    x = L.tensor(x_np, requires_grad=True)
    y = L.utils.checkpoint.checkpoint_sequential(seq, 2, x, use_reentrant=False)
    y.sum().backward()
    # NumPy: forward and backward through the four layers
    ws = [m[0].weight.detach().numpy() for m in seq]
    bs = [m[0].bias.detach().numpy() for m in seq]
    acts = [x_np]
    for w, b in zip(ws, bs):
        acts.append(np.tanh(acts[-1] @ w.T + b))
    np.testing.assert_allclose(y.detach().numpy(), acts[-1], rtol=1e-12)
    g = np.ones_like(acts[-1])
    for i in range(3, -1, -1):
        dz = (1 - acts[i + 1] ** 2) * g
        np.testing.assert_allclose(seq[i][0].weight.grad.numpy(), dz.T @ acts[i], rtol=1e-10)
        g = dz @ ws[i]
    np.testing.assert_allclose(x.grad.numpy(), g, rtol=1e-10)


def test_kwargs_only_without_reentrant(L):
    x = L.randn(3, requires_grad=True)
    y = L.utils.checkpoint.checkpoint(lambda t, k: t * k, x, use_reentrant=False, k=2.0)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full(3, 2.0))
    with pytest.raises(ValueError, match="Unexpected keyword arguments"):
        L.utils.checkpoint.checkpoint(lambda t, k: t * k, x, use_reentrant=True, k=2.0)


def test_tuple_outputs(L):
    x = L.tensor([1.0, 2.0], requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a, b = L.utils.checkpoint.checkpoint(lambda t: (t * 2, t * t), x, use_reentrant=True)
    (a.sum() + b.sum()).backward()
    np.testing.assert_allclose(x.grad.numpy(), [2 + 2.0, 2 + 4.0])
