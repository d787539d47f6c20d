"""ember.optim's RAdam, NAdam, Adamax, Adadelta, ASGD, Rprop and LBFGS:
against NumPy re-implementations of the update equations in torch's docs
(float64), hand-computed first steps, and torch itself when installed (every
option, ~10 steps, state key for key); argument checks; state dicts loaded
from torch into ember and back."""
import copy
import itertools
import math

import numpy as np
import pytest

import ember

STEPS = 10
SHAPES = [(4, 3), (5,)]


# ---------------------------------------------------------------------------
# the update equations (float64 NumPy); `st` is the per-parameter state
def _decay(p, g, wd, decoupled, lr):
    if not wd:
        return p, g
    return (p * (1 - lr * wd), g) if decoupled else (p, g + wd * p)


def radam_ref(p, g, st, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, decoupled_weight_decay=False,
              maximize=False):
    b1, b2 = betas
    g = -g if maximize else g
    t = st["t"] = st.get("t", 0) + 1
    p, g = _decay(p, g, weight_decay, decoupled_weight_decay, lr)
    m = st["m"] = b1 * st.get("m", 0) + (1 - b1) * g
    v = st["v"] = b2 * st.get("v", 0) + (1 - b2) * g * g
    m_hat = m / (1 - b1 ** t)
    rho_inf = 2 / (1 - b2) - 1
    rho_t = rho_inf - 2 * t * b2 ** t / (1 - b2 ** t)
    if rho_t > 5:
        r = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
        return p - lr * m_hat * r * math.sqrt(1 - b2 ** t) / (np.sqrt(v) + eps)
    return p - lr * m_hat


def nadam_ref(p, g, st, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, momentum_decay=4e-3,
              decoupled_weight_decay=False, maximize=False):
    b1, b2 = betas
    g = -g if maximize else g
    t = st["t"] = st.get("t", 0) + 1
    p, g = _decay(p, g, weight_decay, decoupled_weight_decay, lr)
    mu = b1 * (1 - 0.5 * 0.96 ** (t * momentum_decay))
    mu_next = b1 * (1 - 0.5 * 0.96 ** ((t + 1) * momentum_decay))
    prod = st["prod"] = st.get("prod", 1.0) * mu
    m = st["m"] = b1 * st.get("m", 0) + (1 - b1) * g
    v = st["v"] = b2 * st.get("v", 0) + (1 - b2) * g * g
    denom = np.sqrt(v / (1 - b2 ** t)) + eps
    return p - lr * (1 - mu) / (1 - prod) * g / denom - lr * mu_next / (1 - prod * mu_next) * m / denom


def adamax_ref(p, g, st, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, maximize=False):
    b1, b2 = betas
    g = -g if maximize else g
    t = st["t"] = st.get("t", 0) + 1
    g = g + weight_decay * p
    m = st["m"] = b1 * st.get("m", 0) + (1 - b1) * g
    u = st["u"] = np.maximum(b2 * st.get("u", 0), np.abs(g) + eps)
    return p - lr / (1 - b1 ** t) * m / u


def adadelta_ref(p, g, st, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, maximize=False):
    g = -g if maximize else g
    g = g + weight_decay * p
    v = st["v"] = rho * st.get("v", 0) + (1 - rho) * g * g
    dx = np.sqrt(st.get("u", 0) + eps) / np.sqrt(v + eps) * g
    st["u"] = rho * st.get("u", 0) + (1 - rho) * dx * dx
    return p - lr * dx


def asgd_ref(p, g, st, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0, maximize=False):
    g = -g if maximize else g
    t = st["t"] = st.get("t", 0) + 1
    eta, mu = st.get("eta", lr), st.get("mu", 1.0)
    g = g + weight_decay * p
    p = p * (1 - lambd * eta) - eta * g
    st["ax"] = p.copy() if mu == 1 else st["ax"] + mu * (p - st["ax"])
    st["eta"] = lr / (1 + lambd * lr * t) ** alpha
    st["mu"] = 1 / max(1, t - t0)
    return p


def rprop_ref(p, g, st, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), maximize=False):
    g = -g if maximize else g
    prev, size = st.get("prev", np.zeros_like(p)), st.get("size", np.full_like(p, lr))
    s = np.sign(g * prev)
    size = np.clip(size * np.where(s > 0, etas[1], np.where(s < 0, etas[0], 1.0)), *step_sizes)
    g = np.where(s < 0, 0.0, g)
    st["prev"], st["size"] = g, size
    return p - np.sign(g) * size


REFS = {"RAdam": radam_ref, "NAdam": nadam_ref, "Adamax": adamax_ref, "Adadelta": adadelta_ref,
        "ASGD": asgd_ref, "Rprop": rprop_ref}


def flags(**options):
    """Every combination of the given option values."""
    keys = list(options)
    return [dict(zip(keys, vals)) for vals in itertools.product(*options.values())]


CONFIGS = (
    [("RAdam", kw) for kw in flags(lr=[1e-2], weight_decay=[0, 0.1], decoupled_weight_decay=[False, True],
                                   maximize=[False, True])]
    + [("RAdam", dict(lr=0.05, betas=(0.5, 0.7)))]  # rho_t > 5 from the first steps
    + [("NAdam", kw) for kw in flags(lr=[1e-2], weight_decay=[0, 0.1], decoupled_weight_decay=[False, True],
                                     maximize=[False, True])]
    + [("NAdam", dict(momentum_decay=0.1, betas=(0.8, 0.9)))]
    + [("Adamax", kw) for kw in flags(lr=[2e-2], weight_decay=[0, 0.1], maximize=[False, True])]
    + [("Adadelta", kw) for kw in flags(lr=[1.0, 0.5], rho=[0.9], weight_decay=[0, 0.1], maximize=[False, True])]
    + [("ASGD", kw) for kw in flags(lr=[0.05], lambd=[1e-4, 0.1], t0=[1e6, 3], weight_decay=[0, 0.1],
                                    maximize=[False, True])]
    + [("Rprop", kw) for kw in flags(lr=[1e-2, 0.1], maximize=[False, True])]
    + [("Rprop", dict(etas=(0.3, 1.5), step_sizes=(1e-3, 0.05)))]
)


def config_id(c):
    return c[0] + "-" + "-".join(f"{k}={v}" for k, v in c[1].items())


# the small problem: loss = sum(c * (w - t)^2); the gradient oscillates in sign
# for the larger rates, so Rprop's sign logic is exercised
def problem(dtype="float64"):
    rng = np.random.default_rng(11)
    w0 = [rng.standard_normal(s) for s in SHAPES]
    targets = [rng.standard_normal(s) for s in SHAPES]
    scales = [rng.uniform(0.5, 8.0, s) for s in SHAPES]
    return [w.astype(dtype) for w in w0], targets, scales


def run_lib(L, name, kwargs, dtype="float64", steps=STEPS, device="cpu"):
    w0, targets, scales = problem(dtype)
    ps = [L.tensor(w, requires_grad=True, device=device) for w in w0]
    ts = [L.tensor(t.astype(dtype), device=device) for t in targets]
    cs = [L.tensor(c.astype(dtype), device=device) for c in scales]
    opt = getattr(L.optim, name)(ps, **kwargs)

    def closure():
        opt.zero_grad()
        loss = sum(((p - t) ** 2 * c).sum() for p, t, c in zip(ps, ts, cs))
        loss.backward()
        return loss
    for _ in range(steps):
        opt.step(closure)
    return [p.detach().cpu().numpy().astype(np.float64) for p in ps], opt


def run_ref(ref, kwargs, steps=STEPS):
    w, targets, scales = problem()
    states = [{} for _ in w]
    for _ in range(steps):
        w = [ref(p, 2 * c * (p - t), st, **kwargs) for p, t, c, st in zip(w, targets, scales, states)]
    return w


@pytest.mark.parametrize("config", CONFIGS, ids=config_id)
def test_against_numpy(config):
    name, kwargs = config
    expect = run_ref(REFS[name], kwargs)
    got, _ = run_lib(ember, name, kwargs, "float64")
    for g, e in zip(got, expect):
        np.testing.assert_allclose(g, e, rtol=1e-6 if name == "ASGD" else 1e-9, atol=1e-9)
    got32, _ = run_lib(ember, name, kwargs, "float32")
    for g, e in zip(got32, expect):
        np.testing.assert_allclose(g, e, rtol=2e-4, atol=2e-4)


@pytest.mark.parametrize("name", list(REFS))
def test_tensor_lr_and_flags(name):
    """A 0-d tensor lr, and foreach/capturable/differentiable given explicitly:
    the same updates (one algorithm serves every flag)."""
    kwargs = [c[1] for c in CONFIGS if c[0] == name][0]
    expect = run_ref(REFS[name], kwargs)
    lr = kwargs.get("lr", {"RAdam": 1e-3, "NAdam": 2e-3, "Adamax": 2e-3, "Adadelta": 1.0, "ASGD": 1e-2,
                           "Rprop": 1e-2}[name])
    for flags_ in (dict(foreach=True), dict(foreach=False, capturable=True), dict(differentiable=False)):
        got, opt = run_lib(ember, name, dict(kwargs, lr=ember.tensor(lr, dtype=ember.float64), **flags_))
        for g, e in zip(got, expect):
            np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-9)
        assert all(opt.param_groups[0][k] == v for k, v in flags_.items())


@pytest.mark.parametrize("name", list(REFS))
def test_on_cuda(name, cuda):
    """Parameters on the GPU (the fake backend without one): the same updates as
    the NumPy reference, and the state on the parameter's device (as torch's)."""
    kwargs = [c[1] for c in CONFIGS if c[0] == name][-1]
    expect = run_ref(REFS[name], kwargs)
    got, opt = run_lib(ember, name, kwargs, "float32", device="cuda")
    for g, e in zip(got, expect):
        np.testing.assert_allclose(g, e, rtol=2e-4, atol=2e-4)
    st = opt.state[opt.param_groups[0]["params"][0]]
    for k, v in st.items():
        scalar_on_cpu = k in ("step", "mu_product") and name != "ASGD"
        assert v.device.type == ("cpu" if scalar_on_cpu else "cuda"), k


def test_lbfgs_on_cuda(cuda):
    """L-BFGS on GPU parameters reaches the NumPy solution of A x = b."""
    rng = np.random.default_rng(4)
    a = rng.standard_normal((4, 4))
    A, b = a @ a.T + np.eye(4), rng.standard_normal(4)
    x = ember.zeros(4, requires_grad=True, device="cuda")
    At, bt = ember.tensor(A, dtype=ember.float32, device="cuda"), ember.tensor(b, dtype=ember.float32, device="cuda")
    opt = ember.optim.LBFGS([x], line_search_fn="strong_wolfe", max_iter=50)

    def closure():
        opt.zero_grad()
        loss = 0.5 * (x * (At @ x)).sum() - (bt * x).sum()
        loss.backward()
        return loss
    opt.step(closure)
    np.testing.assert_allclose(x.detach().cpu().numpy(), np.linalg.solve(A, b), rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("config", CONFIGS, ids=config_id)
def test_against_torch(config, torch):
    name, kwargs = config
    for dtype, tol in (("float32", 2e-5), ("float64", 1e-12)):
        got, opt = run_lib(ember, name, kwargs, dtype)
        expect, topt = run_lib(torch, name, kwargs, dtype)
        for g, e in zip(got, expect):
            np.testing.assert_allclose(g, e, rtol=tol, atol=tol)
        for p, tp in zip(opt.param_groups[0]["params"], topt.param_groups[0]["params"]):
            st, tst = opt.state[p], topt.state[tp]
            assert sorted(st) == sorted(tst)
            for k in st:
                assert str(st[k].dtype).split(".")[-1] == str(tst[k].dtype).split(".")[-1], k
                assert tuple(st[k].shape) == tuple(tst[k].shape), k
                np.testing.assert_allclose(st[k].numpy(), tst[k].numpy(), rtol=tol * 10, atol=tol)
        assert opt.param_groups[0] == {k: (v if k != "params" else opt.param_groups[0]["params"])
                                       for k, v in topt.param_groups[0].items()}


# ---------------------------------------------------------------------------
# first steps by hand (one parameter, one element: p = 1, gradient 0.5 then -0.25)
def two_steps(name, **kw):
    p = ember.tensor([1.0], dtype=ember.float64, requires_grad=True)
    opt = getattr(ember.optim, name)([p], **kw)
    out = []
    for g in (0.5, -0.25):
        p.grad = ember.tensor([g], dtype=ember.float64)
        opt.step()
        out.append(p.item())
    return out


def test_hand_computed_steps():
    # Adamax, lr 0.1: m = 0.05, u = 0.5 -> p = 1 - 0.1 / 0.1 * 0.05 / 0.5 = 0.9;
    # then m = 0.045 - 0.025 = 0.02, u = max(0.4995, 0.25) -> p -= 0.1 / 0.19 * 0.02 / 0.4995
    a = two_steps("Adamax", lr=0.1, eps=0.0)
    assert a[0] == pytest.approx(0.9, abs=1e-12)
    assert a[1] == pytest.approx(0.9 - 0.1 / 0.19 * 0.02 / 0.4995, abs=1e-12)
    # Rprop, lr 0.1: the first step moves by 0.1 against the gradient's sign; the
    # sign then flips, so the size halves to 0.05 and that step is skipped
    assert two_steps("Rprop", lr=0.1) == pytest.approx([0.9, 0.9], abs=1e-12)
    # ASGD with lambd = 0: p -= lr g, then eta = lr (eta is kept in float32, as torch does)
    assert two_steps("ASGD", lr=0.1, lambd=0.0) == pytest.approx([0.95, 0.975], abs=1e-8)
    # Adadelta, rho 0.5, eps 0: v = 0.125, the first step is 0 (no past updates yet)
    assert two_steps("Adadelta", rho=0.5, eps=0.0) == pytest.approx([1.0, 1.0], abs=1e-12)
    # RAdam, t = 1: rho_1 = rho_inf - 2 b2 / (1 - b2) = 1 < 5 -> p -= lr * m_hat = lr * g
    assert two_steps("RAdam", lr=0.1)[0] == pytest.approx(0.95, abs=1e-12)
    # NAdam, momentum_decay 0: mu = mu_next = b1 / 2 = 0.45, one step:
    # p -= lr (0.55 / 0.55) g / |g| + lr (0.45 / (1 - 0.2025)) (0.05 / |g|)
    n = two_steps("NAdam", lr=0.1, momentum_decay=0.0, eps=0.0)
    assert n[0] == pytest.approx(1 - 0.1 - 0.1 * 0.45 / (1 - 0.45 ** 2) * 0.1, abs=1e-8)  # mu_product: float32


# ---------------------------------------------------------------------------
# L-BFGS
def lbfgs_problem(L, dtype, **kw):
    """A badly scaled quadratic plus a quartic term, in two parameters."""
    rng = np.random.default_rng(5)
    a = rng.standard_normal((6, 6))
    A = L.tensor((a @ a.T + np.diag(np.arange(1, 7))).astype(dtype))
    b = L.tensor(rng.standard_normal(6).astype(dtype))
    w = L.tensor(rng.standard_normal(4).astype(dtype), requires_grad=True)
    v = L.tensor(rng.standard_normal(2).astype(dtype), requires_grad=True)
    opt = L.optim.LBFGS([w, v], **kw)

    def closure():
        opt.zero_grad()
        x = L.cat([w, v])
        loss = 0.5 * (x * (A @ x)).sum() - (b * x).sum() + 0.05 * (x ** 4).sum()
        loss.backward()
        return loss
    return opt, closure, (w, v)


@pytest.mark.parametrize("kw", [dict(), dict(line_search_fn="strong_wolfe"), dict(history_size=2, max_iter=7),
                                dict(history_size=3, line_search_fn="strong_wolfe", max_iter=5),
                                dict(lr=0.1, max_iter=4, tolerance_change=1e-3), dict(maximize=True, max_iter=3)],
                         ids=["plain", "wolfe", "history2", "wolfe-history3", "lr", "maximize"])
def test_lbfgs_against_torch(kw, torch):
    for dtype, tol in (("float64", 1e-9), ("float32", 2e-4)):
        opt, closure, ps = lbfgs_problem(ember, dtype, **kw)
        topt, tclosure, tps = lbfgs_problem(torch, dtype, **kw)
        for _ in range(3):
            loss, tloss = opt.step(closure), topt.step(tclosure)
            assert loss.item() == pytest.approx(tloss.item(), rel=tol, abs=tol)
        for p, tp in zip(ps, tps):
            np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(), rtol=tol, atol=tol)
        st, tst = opt.state[ps[0]], topt.state[tps[0]]
        assert sorted(st) == sorted(tst)
        if dtype == "float64":  # (in float32 rounding can move a stopping test by one iteration)
            assert st["func_evals"] == tst["func_evals"] and st["n_iter"] == tst["n_iter"]
            assert len(st["old_dirs"]) == len(tst["old_dirs"])
        assert ps[1] not in opt.state or len(opt.state[ps[1]]) == 0


def test_lbfgs_finds_the_minimum():
    """The quadratic 0.5 x'Ax - b'x: its minimum solves A x = b (NumPy)."""
    rng = np.random.default_rng(2)
    a = rng.standard_normal((5, 5))
    A = a @ a.T + np.eye(5)
    b = rng.standard_normal(5)
    for search in (None, "strong_wolfe"):
        x = ember.zeros(5, dtype=ember.float64, requires_grad=True)
        opt = ember.optim.LBFGS([x], line_search_fn=search, max_iter=100, tolerance_grad=1e-12,
                                tolerance_change=1e-15)
        At, bt = ember.tensor(A), ember.tensor(b)

        def closure():
            opt.zero_grad()
            loss = 0.5 * (x * (At @ x)).sum() - (bt * x).sum()
            loss.backward()
            return loss
        for _ in range(3):
            opt.step(closure)
        np.testing.assert_allclose(x.detach().numpy(), np.linalg.solve(A, b), rtol=1e-6, atol=1e-8)


def test_lbfgs_first_step_by_hand():
    """One iteration: d = -g, t = min(1, 1/|g|_1) lr, one evaluation."""
    x = ember.tensor([1.0, -2.0], dtype=ember.float64, requires_grad=True)
    opt = ember.optim.LBFGS([x], lr=0.5, max_iter=1)
    calls = []

    def closure():
        calls.append(1)
        opt.zero_grad()
        loss = (x * x * ember.tensor([1.0, 3.0], dtype=ember.float64)).sum()
        loss.backward()
        return loss
    loss = opt.step(closure)
    assert loss.item() == pytest.approx(13.0)  # the loss before the step
    g = np.array([2.0, -12.0])
    np.testing.assert_allclose(x.detach().numpy(), np.array([1.0, -2.0]) - 0.5 / 14 * g, rtol=1e-12)
    assert len(calls) == 1 and opt.state[x]["func_evals"] == 1 and opt.state[x]["n_iter"] == 1


def test_lbfgs_errors_and_defaults():
    x = ember.zeros(2, requires_grad=True)
    opt = ember.optim.LBFGS([x])
    g = opt.param_groups[0]
    assert (g["lr"], g["max_iter"], g["max_eval"], g["history_size"], g["line_search_fn"]) == (1, 20, 25, 100, None)
    assert ember.optim.LBFGS([x], max_iter=8).param_groups[0]["max_eval"] == 10
    with pytest.raises(ValueError, match="per-parameter options"):
        ember.optim.LBFGS([{"params": [x]}, {"params": [ember.zeros(1, requires_grad=True)]}])
    with pytest.raises(ValueError, match="Invalid learning rate: -1"):
        ember.optim.LBFGS([x], lr=-1)
    bad = ember.optim.LBFGS([x], line_search_fn="armijo")

    def closure():
        bad.zero_grad()
        loss = ((x - 1) ** 2).sum()
        loss.backward()
        return loss
    with pytest.raises(RuntimeError, match="only 'strong_wolfe' is supported"):
        bad.step(closure)


# ---------------------------------------------------------------------------
# constructor checks, defaults
BAD = [("RAdam", dict(lr=-1.0), "Invalid learning rate: -1.0"), ("RAdam", dict(eps=-1.0), "Invalid epsilon value"),
       ("RAdam", dict(betas=(1.0, 0.9)), "Invalid beta parameter at index 0: 1.0"),
       ("NAdam", dict(betas=(0.9, -0.1)), "Invalid beta parameter at index 1"),
       ("NAdam", dict(momentum_decay=-1.0), "Invalid momentum_decay value: -1.0"),
       ("NAdam", dict(weight_decay=-1.0), "Invalid weight_decay value"),
       ("Adamax", dict(lr=-0.5), "Invalid learning rate"), ("Adamax", dict(eps=-1e-3), "Invalid epsilon value"),
       ("Adadelta", dict(rho=1.5), "Invalid rho value: 1.5"), ("Adadelta", dict(eps=-1.0), "Invalid epsilon"),
       ("ASGD", dict(lambd=-1.0), "Invalid lambd value"), ("ASGD", dict(alpha=-1.0), "Invalid alpha value"),
       ("ASGD", dict(weight_decay=-1.0), "Invalid weight_decay value"),
       ("Rprop", dict(etas=(1.2, 0.5)), "Invalid eta values: 1.2, 0.5"),
       ("Rprop", dict(lr=-1.0), "Invalid learning rate")]


@pytest.mark.parametrize("name,kw,match", BAD, ids=[f"{b[0]}-{list(b[1])[0]}" for b in BAD])
def test_bad_hyperparameters(name, kw, match):
    with pytest.raises(ValueError, match=match.replace("(", r"\(")):
        getattr(ember.optim, name)([ember.zeros(2, requires_grad=True)], **kw)


@pytest.mark.parametrize("name,kw,match", BAD, ids=[f"{b[0]}-{list(b[1])[0]}" for b in BAD])
def test_bad_hyperparameters_like_torch(name, kw, match, torch):
    with pytest.raises(ValueError) as info:
        getattr(torch.optim, name)([torch.zeros(2, requires_grad=True)], **kw)
    with pytest.raises(ValueError) as mine:
        getattr(ember.optim, name)([ember.zeros(2, requires_grad=True)], **kw)
    assert str(mine.value) == str(info.value)


def test_tensor_lr_must_have_one_element():
    for name in ("RAdam", "NAdam", "Adamax", "Adadelta", "ASGD", "Rprop", "LBFGS"):
        with pytest.raises(ValueError, match="Tensor lr must be 1-element"):
            getattr(ember.optim, name)([ember.zeros(2, requires_grad=True)], lr=ember.tensor([0.1, 0.2]))


NAMES = ["RAdam", "NAdam", "Adamax", "Adadelta", "ASGD", "Rprop", "LBFGS"]


def test_defaults_like_torch(torch):
    for name in NAMES:
        e = getattr(ember.optim, name)([ember.zeros(2, requires_grad=True)]).defaults
        t = getattr(torch.optim, name)([torch.zeros(2, requires_grad=True)]).defaults
        assert e == t, name


def test_params_without_grad_get_no_state():
    for name in NAMES[:-1]:
        a, b = ember.ones(2, requires_grad=True), ember.ones(3, requires_grad=True)
        opt = getattr(ember.optim, name)([a, b])
        a.grad = ember.ones(2)
        opt.step()
        assert len(opt.state[a]) > 0 and len(opt.state.get(b, {})) == 0, name
        assert b.tolist() == [1.0, 1.0, 1.0]


# ---------------------------------------------------------------------------
# state dicts: torch's loads into ember, and ember's into torch
def to_ember(obj):
    import torch
    if isinstance(obj, torch.Tensor):
        return ember.from_numpy(obj.detach().numpy().copy())
    if isinstance(obj, dict):
        return {k: to_ember(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_ember(v) for v in obj)
    return obj


def to_torch(obj, torch):
    if isinstance(obj, ember.Tensor):
        return torch.from_numpy(obj.numpy().copy())
    if isinstance(obj, dict):
        return {k: to_torch(v, torch) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_torch(v, torch) for v in obj)
    return obj


OPT_KW = [("RAdam", dict(lr=0.1, weight_decay=0.1)), ("NAdam", dict(decoupled_weight_decay=True, weight_decay=0.1)),
          ("Adamax", dict(lr=0.05)), ("Adadelta", dict(weight_decay=0.01)), ("ASGD", dict(t0=2, lambd=0.1)),
          ("Rprop", dict(lr=0.05))]


@pytest.mark.parametrize("name,kw", OPT_KW, ids=[o[0] for o in OPT_KW])
def test_state_dict_torch_to_ember_and_back(name, kw, torch):
    rng = np.random.default_rng(3)
    w0 = [rng.standard_normal((3, 2)).astype(np.float32), rng.standard_normal(5).astype(np.float32)]
    tp = [torch.tensor(w, requires_grad=True) for w in w0]
    topt = getattr(torch.optim, name)([{"params": tp[:1]}, {"params": tp[1:], "lr": 0.03}], **kw)
    grads = [[rng.standard_normal(w.shape).astype(np.float32) for w in w0] for _ in range(8)]
    for gs in grads[:4]:
        for p, g in zip(tp, gs):
            p.grad = torch.tensor(g)
        topt.step()
    ep = [ember.tensor(p.detach().numpy(), requires_grad=True) for p in tp]
    eopt = getattr(ember.optim, name)([{"params": ep[:1]}, {"params": ep[1:]}], **kw)
    eopt.load_state_dict(to_ember(topt.state_dict()))
    assert eopt.param_groups[1]["lr"] == 0.03
    for gs in grads[4:]:
        for p, g in zip(tp, gs):
            p.grad = torch.tensor(g)
        for p, g in zip(ep, gs):
            p.grad = ember.tensor(g)
        topt.step()
        eopt.step()
    for x, y in zip(ep, tp):
        np.testing.assert_allclose(x.detach().numpy(), y.detach().numpy(), rtol=1e-5, atol=1e-6)
    # ember's state dict into a fresh torch optimizer: the same next step
    tq = [torch.tensor(p.detach().numpy(), requires_grad=True) for p in ep]
    topt2 = getattr(torch.optim, name)([{"params": tq[:1]}, {"params": tq[1:]}], **kw)
    topt2.load_state_dict(to_torch(eopt.state_dict(), torch))
    assert topt2.param_groups[1]["lr"] == 0.03
    for p, q, g in zip(ep, tq, grads[0]):
        p.grad, q.grad = ember.tensor(g), torch.tensor(g)
    eopt.step()
    topt2.step()
    for x, y in zip(ep, tq):
        np.testing.assert_allclose(x.detach().numpy(), y.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_state_dict_round_trip_within_ember():
    for name, kw in OPT_KW:
        a = ember.tensor([1.0, 2.0], requires_grad=True)
        opt = getattr(ember.optim, name)([a], **kw)
        for g in ([0.5, -1.0], [0.25, 1.0]):
            a.grad = ember.tensor(g)
            opt.step()
        sd = copy.deepcopy(opt.state_dict())  # state_dict() hands out the live state, as torch does
        b = ember.tensor(a.tolist(), requires_grad=True)
        opt2 = getattr(ember.optim, name)([b], **kw)
        opt2.load_state_dict(sd)
        a.grad, b.grad = ember.tensor([0.1, 0.2]), ember.tensor([0.1, 0.2])
        opt.step()
        opt2.step()
        assert a.tolist() == b.tolist(), name


def test_lbfgs_state_dict_torch_to_ember_and_back(torch):
    """LBFGS's state (history lists, d, t, H_diag...) loads across, and the next steps agree."""
    kw = dict(history_size=3, max_iter=4)
    topt, tclosure, tps = lbfgs_problem(torch, "float64", **kw)
    topt.step(tclosure)
    opt, closure, ps = lbfgs_problem(ember, "float64", **kw)
    with ember.no_grad():
        for p, tp in zip(ps, tps):
            p.copy_(ember.tensor(tp.detach().numpy()))
    opt.load_state_dict(to_ember(topt.state_dict()))
    assert sorted(opt.state[ps[0]]) == sorted(topt.state[tps[0]])
    topt.step(tclosure)
    opt.step(closure)
    for p, tp in zip(ps, tps):
        np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(), rtol=1e-10, atol=1e-12)
    topt2, tclosure2, tps2 = lbfgs_problem(torch, "float64", **kw)
    with torch.no_grad():
        for p, tp in zip(ps, tps2):
            tp.copy_(torch.tensor(p.detach().numpy()))
    topt2.load_state_dict(to_torch(copy.deepcopy(opt.state_dict()), torch))
    topt2.step(tclosure2)
    opt.step(closure)
    for p, tp in zip(ps, tps2):
        np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(), rtol=1e-10, atol=1e-12)
