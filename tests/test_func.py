"""ember.autograd.functional (vjp, jvp, jacobian, hessian, hvp, vhp) and ember.func
(grad, grad_and_value, vjp, jvp, jacrev, jacfwd, hessian, vmap, functional_call,
stack_module_state): hand-derived derivatives and finite differences (always run),
torch parity for values, structures and errors (skipped without torch)."""
import warnings

import numpy as np
import pytest

import ember
from ember import func as ef
from ember.autograd import functional as AF

rng = np.random.default_rng(11)


def randn(*shape):
    return rng.standard_normal(shape)


def E(a):
    return ember.tensor(a)


def close(x, ref, tol=1e-8):
    np.testing.assert_allclose(x.detach().numpy(), np.asarray(ref, dtype=np.float64), rtol=tol, atol=tol)


def fd_jacobian(f, x, eps=1e-6):
    """Central finite differences of numpy function f at x: shape f(x).shape + x.shape."""
    out = np.asarray(f(x))
    jac = np.zeros(out.shape + x.shape)
    for idx in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[idx] = eps
        jac[(Ellipsis,) + idx] = (np.asarray(f(x + d)) - np.asarray(f(x - d))) / (2 * eps)
    return jac


def cubic(a):  # sum(a^3) + sum(a)^2: gradient 3a^2 + 2 sum(a), Hessian diag(6a) + 2
    return (a ** 3).sum() + a.sum() ** 2


# -- autograd.functional against hand-derived values ----------------------------------

def test_functional_hand_values():
    x = randn(3)
    v = randn(3)
    grad = 3 * x ** 2 + 2 * x.sum()
    hess = np.diag(6 * x) + 2
    out, g = AF.vjp(cubic, E(x))
    close(g, grad)
    assert out.grad_fn is None and not g.requires_grad
    _, jv = AF.jvp(cubic, E(x), E(v))
    close(jv, grad @ v)
    close(AF.jacobian(cubic, E(x)), grad)
    close(AF.hessian(cubic, E(x)), hess)
    close(AF.hessian(cubic, E(x), vectorize=True, outer_jacobian_strategy="forward-mode"), hess)
    close(AF.hvp(cubic, E(x), E(v))[1], hess @ v)
    close(AF.vhp(cubic, E(x), E(v))[1], v @ hess)


def test_functional_tuples_against_finite_differences():
    a, b = randn(2, 3), randn(3)

    def f(x, y):
        return (x.sin() * y).sum(0), x.exp().sum()

    jac = AF.jacobian(f, (E(a), E(b)))
    assert isinstance(jac, tuple) and len(jac) == 2 and len(jac[0]) == 2
    assert jac[0][0].shape == (3, 2, 3) and jac[0][1].shape == (3, 3) and jac[1][0].shape == (2, 3)
    close(jac[0][0], fd_jacobian(lambda x: (np.sin(x) * b).sum(0), a), 1e-6)
    close(jac[0][1], fd_jacobian(lambda y: (np.sin(a) * y).sum(0), b), 1e-6)
    close(jac[1][0], fd_jacobian(lambda x: np.exp(x).sum(), a), 1e-6)
    jf = AF.jacobian(f, (E(a), E(b)), vectorize=True, strategy="forward-mode")
    for r1, r2 in zip(jac, jf):
        for p, q in zip(r1, r2):
            close(p, q.numpy())
    outs, vj = AF.vjp(f, (E(a), E(b)), (ember.ones(3, dtype=ember.float64), E(np.array(2.0))))
    close(vj[0], np.cos(a) * b + 2 * np.exp(a))
    close(vj[1], np.sin(a).sum(0))


def test_functional_create_graph_and_errors():
    x = E(randn(3)).requires_grad_(True)
    _, g = AF.vjp(cubic, x, create_graph=True)
    assert g.requires_grad
    g.sum().backward()  # d/dx sum(grad) = row sums of the Hessian
    xn = x.detach().numpy()
    hess = np.diag(6 * xn) + 2
    close(x.grad, hess.sum(1))
    with pytest.raises(RuntimeError, match="v can only be None"):
        AF.vjp(lambda t: t * 2, ember.ones(3))
    with pytest.raises(RuntimeError, match="invalid size"):
        AF.jvp(lambda t: t * 2, ember.ones(3), ember.ones(2))
    with pytest.raises(TypeError, match="must be either a Tensor or a tuple of Tensors"):
        AF.jacobian(lambda t: t, [ember.ones(2)])
    with pytest.raises(RuntimeError, match="single element"):
        AF.hessian(lambda t: t * 2, ember.ones(3))
    with pytest.raises(RuntimeError, match="does not require gradients"):
        AF.jacobian(lambda t: ember.ones(2), ember.ones(2), strict=True)
    with pytest.raises(ValueError, match="forward-mode"):
        AF.jacobian(lambda t: t, ember.ones(2), strategy="sideways")
    assert AF.jacobian(lambda t, u: t * 2, (ember.ones(2), ember.ones(3)))[1].abs().sum().item() == 0


# -- ember.func against hand values / finite differences ------------------------------

def test_grad_argnums_aux_and_nesting():
    x, y = randn(3), randn(3)
    g = ef.grad(lambda a, b: (a.sin() * b).sum(), argnums=(0, 1))(E(x), E(y))
    close(g[0], np.cos(x) * y)
    close(g[1], np.sin(x))
    g, aux = ef.grad(lambda a: ((a ** 2).sum(), {"n": a.norm()}), has_aux=True)(E(x))
    close(g, 2 * x)
    close(aux["n"], np.linalg.norm(x))
    g, (value, _) = ef.grad_and_value(lambda a: ((a ** 2).sum(), 0), has_aux=True)(E(x))
    close(value, (x ** 2).sum())
    close(ef.grad(ef.grad(lambda a: a.sin().sum() if a.dim() == 0 else a))(E(np.array(0.3))), -np.sin(0.3))
    # a pytree argument: the gradient has its structure
    g = ef.grad(lambda p: (p["w"] * p["b"][0]).sum())({"w": E(x), "b": [E(y)]})
    close(g["w"], y)
    close(g["b"][0], x)
    assert not g["w"].requires_grad
    xr = E(x).requires_grad_(True)  # composes with ordinary autograd
    ef.grad(lambda a: (a ** 3).sum())(xr).sum().backward()
    close(xr.grad, 6 * x)


def test_jacrev_jacfwd_hessian_finite_differences():
    x, y = randn(3), randn(2)

    def f(a, b):
        return ember.outer(a.exp(), b.sin())

    def fnp(a, b):
        return np.outer(np.exp(a), np.sin(b))
    jr = ef.jacrev(f, argnums=(0, 1))(E(x), E(y))
    jf = ef.jacfwd(f, argnums=(0, 1))(E(x), E(y))
    for j, ref in zip(jr, (fd_jacobian(lambda a: fnp(a, y), x), fd_jacobian(lambda b: fnp(x, b), y))):
        close(j, ref, 1e-6)
    for p, q in zip(jr, jf):
        close(p, q.numpy())
    h = ef.hessian(lambda a: (a.exp() * a).sum())(E(x))
    close(h, np.diag(np.exp(x) * (x + 2)))


def test_vjp_jvp_func():
    x, v = randn(3), randn(3)
    out, fn = ef.vjp(lambda a: (a.exp(), a * 2), E(x))
    (g,) = fn((E(v), E(v)))
    close(g, np.exp(x) * v + 2 * v)
    with pytest.raises(RuntimeError, match="pytree structure of cotangents"):
        fn(E(v))
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        fn((E(v), ember.ones(2, dtype=ember.float64)))
    out, jv = ef.jvp(lambda a, b: a.sin() * b, (E(x), E(v)), (E(v), E(x)))
    close(jv, np.cos(x) * v * v + np.sin(x) * x)
    with pytest.raises(RuntimeError, match="Expected primals to be a tuple"):
        ef.jvp(lambda a: a, E(x), E(x))


def test_vmap_loops_and_stacks():
    X, W = randn(4, 3), randn(3, 2)
    close(ef.vmap(lambda r, w: r @ w, in_dims=(0, None))(E(X), E(W)), X @ W)
    close(ember.vmap(lambda c: c.sum(), in_dims=1)(E(X)), X.sum(0))
    outer = ef.vmap(ef.vmap(lambda a, b: a * b, in_dims=(0, None)), in_dims=(None, 0))(E(X[0]), E(X[1]))
    close(outer, np.outer(X[1], X[0]))
    close(ef.vmap(ef.grad(lambda a: (a ** 3).sum()))(E(X)), 3 * X ** 2)
    t, s = ef.vmap(lambda a: (a, a.sum()), out_dims=(1, 0))(E(X))
    close(t, X.T)
    close(s, X.sum(1))
    d = ef.vmap(lambda p: p["x"] * p["y"], in_dims=({"x": 0, "y": None},))({"x": E(X), "y": E(X[0])})
    close(d, X * X[0])
    assert ef.vmap(lambda a: a * 2, in_dims=1)(ember.ones(0, 3)).shape == (3, 0)
    xr = E(X).requires_grad_(True)  # autograd through the stacked result
    ef.vmap(lambda r: (r ** 2).sum())(xr).sum().backward()
    close(xr.grad, 2 * X)


def test_vmap_randomness_and_errors():
    with pytest.raises(RuntimeError, match="randomness error mode"):
        ef.vmap(lambda a: a + ember.rand(3))(ember.ones(2, 3))
    same = ef.vmap(lambda a: a + ember.rand(3), randomness="same")(ember.zeros(2, 3))
    assert ember.equal(same[0], same[1])
    diff = ef.vmap(lambda a: a + ember.rand(3), randomness="different")(ember.zeros(2, 3))
    assert not ember.equal(diff[0], diff[1])
    with pytest.raises(ValueError, match="same size in the mapped dimension"):
        ef.vmap(lambda a, b: a * b)(ember.ones(2, 3), ember.ones(3, 3))
    with pytest.raises(ValueError, match="in_dims is not compatible"):
        ef.vmap(lambda a, b: a * b, in_dims=(0,))(ember.ones(2, 3), ember.ones(2, 3))
    with pytest.raises(ValueError, match="cannot vmap over non-Tensor"):
        ef.vmap(lambda a, b: a * b, in_dims=(0, 0))(ember.ones(2, 3), 2.0)
    with pytest.raises(ValueError, match="expected in_dim to satisfy -2 <= in_dim < 2"):
        ef.vmap(lambda a: a, in_dims=2)(ember.ones(2, 3))
    with pytest.raises(ValueError, match="must only return Tensors"):
        ef.vmap(lambda a: 2.0)(ember.ones(2, 3))
    with pytest.raises(ValueError, match="BatchedTensor when out_dim is None"):
        ef.vmap(lambda a: a, out_dims=None)(ember.ones(2, 3).cumsum(0))
    with pytest.raises(RuntimeError, match="randomness"):
        ef.vmap(lambda a: a, randomness="maybe")


def test_grad_errors():
    with pytest.raises(RuntimeError, match="scalar Tensor, got tensor with 1 dims"):
        ef.grad(lambda a: a)(ember.ones(3))
    with pytest.raises(RuntimeError, match="to return a Tensor"):
        ef.grad(lambda a: 1.0)(ember.ones(3))
    with pytest.raises(RuntimeError, match="Got argnum=2, but only 1 positional inputs"):
        ef.grad(lambda a: a.sum(), argnums=2)(ember.ones(3))
    with pytest.raises(RuntimeError, match="non-empty"):
        ef.grad(lambda a: a.sum(), argnums=())(ember.ones(3))
    with pytest.raises(RuntimeError, match="must be unique"):
        ef.grad(lambda a: a.sum(), argnums=(0, 0))(ember.ones(3))
    with pytest.raises(RuntimeError, match=r"tuple: \(output, aux\)"):
        ef.grad(lambda a: a.sum(), has_aux=True)(ember.ones(3))
    with pytest.raises(ValueError, match="must be Tensor"):
        ef.grad(lambda a: a)(1.0)


class Tiny(ember.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = ember.nn.Linear(3, 2)
        self.register_buffer("scale", ember.tensor(2.0))

    def forward(self, x):
        return self.l1(x) * self.scale


def test_functional_call_and_stack_module_state():
    m = Tiny()
    w, b, x = E(randn(2, 3)).float(), E(randn(2)).float(), E(randn(5, 3)).float()
    before = m.l1.weight
    out = ef.functional_call(m, {"l1.weight": w, "l1.bias": b, "scale": ember.tensor(3.0)}, (x,))
    close(out.double(), (x.numpy() @ w.numpy().T + b.numpy()) * 3, 1e-5)
    assert m.l1.weight is before and m.scale.item() == 2.0
    out = ef.functional_call(m, ({"l1.weight": w}, {"l1.bias": b}), x)
    close(out.double(), (x.numpy() @ w.numpy().T + b.numpy()) * 2, 1e-5)
    with pytest.raises(ValueError, match="appeared in multiple dictionaries"):
        ef.functional_call(m, ({"l1.weight": w}, {"l1.weight": w}), x)
    with pytest.raises(RuntimeError, match="Missing key"):
        ef.functional_call(m, {"l1.weight": w}, x, strict=True)
    # gradient with respect to the given parameters, through functional_call
    g = ef.grad(lambda p: ef.functional_call(m, p, (x,)).sum())({"l1.weight": w, "l1.bias": b})
    close(g["l1.bias"].double(), np.full(2, 5 * 2.0), 1e-6)
    with pytest.warns(FutureWarning):
        ember.nn.utils.stateless.functional_call(m, {"l1.weight": w}, x)
    models = [Tiny() for _ in range(3)]
    params, buffers = ef.stack_module_state(models)
    assert params["l1.weight"].shape == (3, 2, 3) and buffers["scale"].shape == (3,)
    assert params["l1.weight"].requires_grad and params["l1.weight"].is_leaf
    ys = ef.vmap(lambda p, bu: ef.functional_call(models[0], (p, bu), (x,)))(params, buffers)
    for i, mi in enumerate(models):
        close(ys[i].double(), mi(x).double().detach().numpy(), 1e-6)


# -- torch parity ----------------------------------------------------------------------

def _cmp(a, b, tol=1e-10):
    if isinstance(a, (tuple, list)):
        assert type(a) is type(b) and len(a) == len(b)
        for p, q in zip(a, b):
            _cmp(p, q, tol)
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            _cmp(a[k], b[k], tol)
    else:
        assert tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=tol, atol=tol)


def test_autograd_functional_against_torch(torch):
    import torch.autograd.functional as TF
    a, b, v3, v23 = randn(2, 3), randn(3), randn(3), randn(2, 3)

    def f(L):
        return lambda x, y: ((L.sin(x) * y).sum(0), x.exp().sum())

    def s(L):
        return lambda x, y: (x.sin() * y).sum() ** 2
    EA, TA = (E(a), E(b)), (torch.tensor(a), torch.tensor(b))
    _cmp(AF.jacobian(f(ember), EA), TF.jacobian(f(torch), TA))
    _cmp(AF.hessian(s(ember), EA), TF.hessian(s(torch), TA))
    _cmp(AF.vjp(f(ember), EA, (E(v3), E(np.array(1.5)))), TF.vjp(f(torch), TA, (torch.tensor(v3), torch.tensor(1.5))))
    _cmp(AF.jvp(f(ember), EA, (E(v23), E(v3))), TF.jvp(f(torch), TA, (torch.tensor(v23), torch.tensor(v3))))
    _cmp(AF.hvp(s(ember), EA, (E(v23), E(v3))), TF.hvp(s(torch), TA, (torch.tensor(v23), torch.tensor(v3))))
    _cmp(AF.vhp(s(ember), EA, (E(v23), E(v3))), TF.vhp(s(torch), TA, (torch.tensor(v23), torch.tensor(v3))))
    _cmp(AF.jacobian(lambda x: x ** 2, E(b)), TF.jacobian(lambda x: x ** 2, torch.tensor(b)))


def test_func_against_torch(torch):
    import torch.func as tf
    x, y, X = randn(3), randn(3), randn(4, 3)

    def g(L):
        return lambda a, b: {"p": a * b, "q": (a.sin(), b.exp().sum())}
    EA, TA = (E(x), E(y)), (torch.tensor(x), torch.tensor(y))
    _cmp(ef.jacrev(g(ember), argnums=(0, 1))(*EA), tf.jacrev(g(torch), argnums=(0, 1))(*TA))
    _cmp(ef.jacfwd(g(ember), argnums=1)(*EA), tf.jacfwd(g(torch), argnums=1)(*TA))
    _cmp(ef.hessian(lambda a, b: (a.sin() * b).sum() ** 2, argnums=(0, 1))(*EA),
         tf.hessian(lambda a, b: (a.sin() * b).sum() ** 2, argnums=(0, 1))(*TA))
    _cmp(ef.grad_and_value(lambda a, b: (a * b.cos()).sum())(*EA),
         tf.grad_and_value(lambda a, b: (a * b.cos()).sum())(*TA))
    _cmp(ef.vmap(lambda r: (r.sum(), r * 2), out_dims=(0, 1))(E(X)),
         tf.vmap(lambda r: (r.sum(), r * 2), out_dims=(0, 1))(torch.tensor(X)))
    _cmp(ef.vmap(ef.jacrev(lambda r: r.sin()))(E(X)), tf.vmap(tf.jacrev(lambda r: r.sin()))(torch.tensor(X)))
    lin = torch.nn.Linear(3, 2).double()
    elin = ember.nn.Linear(3, 2).double()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pw = randn(2, 3)
        _cmp(ef.functional_call(elin, {"weight": E(pw), "bias": E(y[:2])}, E(X)),
             tf.functional_call(lin, {"weight": torch.tensor(pw), "bias": torch.tensor(y[:2])}, torch.tensor(X)))


# -- double backward through views (the engine's CopySlices under create_graph) ----------

def _view_cases():
    return [
        ("select*sum", lambda a: a[0] * a.sum()),
        ("select*select", lambda a: a[0] * a[1]),
        ("narrow", lambda a: (a.narrow(0, 0, 1) * a.narrow(0, 1, 1)).sum()),
        ("expand", lambda a: (a[0:1].expand(3) * a).sum()),
        ("in-place on a view", lambda a: (lambda z: (z.narrow(0, 0, 2).mul_(a[1:]), (z * z).sum())[1])(a.clone())),
        ("transposed slice", lambda a: (a.view(3, 1).t()[:, 1:] ** 3).sum()),
        ("diagonal", lambda a: (a.view(1, 3) * a.view(3, 1)).diagonal().pow(2).sum()),
        ("strided", lambda a: (a.view(3, 1).expand(3, 2).t()[1, ::2] ** 3).sum()),
    ]


def _third_order(L, f, device="cpu"):
    a = L.tensor([1.0, 2.0, 3.0], dtype=L.float64, device=device).requires_grad_(True)
    (g,) = L.autograd.grad(f(a), a, create_graph=True)
    u = L.tensor([1.0, 2.0, -1.0], dtype=L.float64, device=device).requires_grad_(True)
    (db,) = L.autograd.grad(g, a, u, create_graph=True)
    du, da = L.autograd.grad(db, (u, a), L.tensor([1.0, 0.5, 0.0], dtype=L.float64, device=device),
                             allow_unused=True)
    return [t.detach().cpu().numpy() if t is not None else None for t in (g, db, du, da)]


def test_hvp_jvp_through_indexing_by_hand():
    # f = a0 * sum(a): H = e0 1^T + 1 e0^T
    x = np.array([1.0, 2.0, 3.0])
    v = np.array([0.5, -1.0, 2.0])
    H = np.outer(np.eye(3)[0], np.ones(3)) + np.outer(np.ones(3), np.eye(3)[0])
    close(AF.hvp(lambda a: a[0] * a.sum(), E(x), E(v))[1], H @ v)
    close(AF.jvp(lambda a: a[1:] * a[0], E(x), E(v))[1], v[1:] * x[0] + x[1:] * v[0])
    _, jv = ef.jvp(lambda a: a[::2].exp(), (E(x),), (E(v),))
    close(jv, np.exp(x[::2]) * v[::2])


@pytest.mark.parametrize("case", range(8))
def test_double_backward_through_views_against_torch(torch, case):
    name, f = _view_cases()[case]
    for got, ref in zip(_third_order(ember, f), _third_order(torch, f)):
        assert (got is None) == (ref is None), name
        if got is not None:
            np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12, err_msg=name)


def test_double_backward_through_views_on_cuda(cuda):
    for name, f in _view_cases():
        for got, ref in zip(_third_order(ember, f, "cuda"), _third_order(ember, f)):
            assert (got is None) == (ref is None), name
            if got is not None:
                np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12, err_msg=name)


# -- the torch.func tutorials' patterns: per-sample gradients, model ensembling ----------

def test_per_sample_grads_by_hand():
    lin = ember.nn.Linear(3, 1, bias=False).double()
    X, y = randn(6, 3), randn(6)
    params = {k: v.detach() for k, v in lin.named_parameters()}

    def loss(p, x, t):
        return ((ef.functional_call(lin, p, (x.unsqueeze(0),)).squeeze() - t) ** 2)
    g = ef.vmap(ef.grad(loss), in_dims=(None, 0, 0))(params, E(X), E(y))["weight"]
    w = lin.weight.detach().numpy()[0]
    close(g, (2 * (X @ w - y))[:, None, None] * X[:, None, :])


def test_per_sample_grads_and_ensembles_against_torch(torch):
    import copy
    import torch.func as tf

    def build(L):
        return L.nn.Sequential(L.nn.Linear(4, 8), L.nn.ReLU(), L.nn.Linear(8, 3)).double()
    tm, em = build(torch), build(ember)
    em.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    X, Y = randn(5, 4), np.array([0, 2, 1, 1, 0])

    def per_sample(L, F, model):
        params = {k: v.detach() for k, v in model.named_parameters()}

        def compute_loss(p, sample, target):
            pred = F.functional_call(model, p, (sample.unsqueeze(0),))
            return L.nn.functional.cross_entropy(pred, target.unsqueeze(0))
        return F.vmap(F.grad(compute_loss), in_dims=(None, 0, 0))(params, L.tensor(X), L.tensor(Y))
    _cmp(per_sample(ember, ef, em), per_sample(torch, tf, tm), 1e-12)

    tms = [torch.nn.Linear(4, 3).double() for _ in range(3)]
    ems = [ember.nn.Linear(4, 3).double() for _ in range(3)]
    for e, t in zip(ems, tms):
        e.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in t.state_dict().items()})

    def ensemble(L, F, models, base):
        params, buffers = F.stack_module_state(models)
        return F.vmap(lambda p, b, x: F.functional_call(base, (p, b), (x,)), in_dims=(0, 0, None))(
            params, buffers, L.tensor(X))
    _cmp(ensemble(ember, ef, ems, ems[0]), ensemble(torch, tf, tms, copy.deepcopy(tms[0]).to("meta")), 1e-12)


def test_grad_through_closed_over_parameters_against_torch(torch):
    """A gradient penalty: func.grad of a model with respect to its input, then
    backward into the model's parameters (which the function closes over)."""
    import torch.func as tf

    def build(L):
        return L.nn.Sequential(L.nn.Linear(3, 5), L.nn.Tanh(), L.nn.Linear(5, 1)).double()
    tm, em = build(torch), build(ember)
    em.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    X = randn(4, 3)
    for L, F, m in ((ember, ef, em), (torch, tf, tm)):
        g = F.grad(lambda x: m(x).sum())(L.tensor(X))
        assert g.requires_grad
        ((g.norm(dim=1) - 1) ** 2).mean().backward()
    for (n, a), b in zip(em.named_parameters(), tm.parameters()):
        # the last bias does not reach the input gradient: no .grad in either
        assert (a.grad is None) == (b.grad is None), n
        if a.grad is not None:
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-12, atol=1e-12, err_msg=n)
    with ember.no_grad():  # no graph kept under no_grad
        assert not ef.grad(lambda x: em(x).sum())(E(X)).requires_grad


def test_functional_call_on_parametrized_module():
    from ember.nn.utils import parametrizations as EP
    m = EP.weight_norm(ember.nn.Linear(2, 2).double())
    g0 = m.parametrizations.weight.original0.detach().clone()
    w_before = m.weight.detach().clone()
    W = E(randn(2, 2))
    x = E(randn(1, 2))
    out = ef.functional_call(m, {"weight": W}, (x,))  # the parametrized tensor by its own name
    close(out, x.numpy() @ W.numpy().T + m.bias.detach().numpy())
    assert ember.equal(m.parametrizations.weight.original0, g0)  # right_inverse did not run
    close(m.weight, w_before.numpy())
    g = E(np.ones((2, 1)))
    v = m.parametrizations.weight.original1.detach().numpy()
    out = ef.functional_call(m, {"parametrizations.weight.original0": g}, (x,))
    close(out, x.numpy() @ (v / np.linalg.norm(v, axis=1, keepdims=True)).T + m.bias.detach().numpy())
