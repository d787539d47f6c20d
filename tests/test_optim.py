"""ember.optim's optimizers against NumPy re-implementations of the
algorithms in torch's docs (float64), and against torch itself when it is
installed: every flag combination, ~10 steps on a small problem. Also the
Optimizer base class (param groups, state, zero_grad, hooks, errors), state
dicts (round trip, and torch's loaded into ember), and the fused Adam/AdamW
kernel (csrc/ops/optim.c) against the op-by-op path."""
import copy
import itertools
import math

import numpy as np
import pytest

import ember

STEPS = 10
SHAPES = [(4, 3), (5,)]


# ---------------------------------------------------------------------------
# the algorithms, from torch's docs (float64 NumPy); `st` is the per-parameter state
def sgd_ref(p, g, st, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, maximize=False):
    g = -g if maximize else g
    if weight_decay:
        g = g + weight_decay * p
    if momentum:
        b = g.copy() if "b" not in st else momentum * st["b"] + (1 - dampening) * g
        st["b"] = b
        g = g + momentum * b if nesterov else b
    return p - lr * g


def adam_ref(p, g, st, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, maximize=False,
             decoupled=False):
    b1, b2 = betas
    g = -g if maximize else g
    t = st["t"] = st.get("t", 0) + 1
    m, v = st.get("m", np.zeros_like(p)), st.get("v", np.zeros_like(p))
    if weight_decay:
        if decoupled:
            p = p * (1 - lr * weight_decay)
        else:
            g = g + weight_decay * p
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    st["m"], st["v"] = m, v
    if amsgrad:
        v = st["vmax"] = np.maximum(st.get("vmax", np.zeros_like(p)), v)
    m_hat = m / (1 - b1 ** t)
    return p - lr * m_hat / (np.sqrt(v) / math.sqrt(1 - b2 ** t) + eps)


def adamw_ref(p, g, st, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, maximize=False):
    return adam_ref(p, g, st, lr, betas, eps, weight_decay, amsgrad, maximize, decoupled=True)


def rmsprop_ref(p, g, st, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False,
                maximize=False):
    g = -g if maximize else g
    if weight_decay:
        g = g + weight_decay * p
    v = st["v"] = alpha * st.get("v", 0) + (1 - alpha) * g * g
    vt = v
    if centered:
        ga = st["ga"] = alpha * st.get("ga", 0) + (1 - alpha) * g
        vt = v - ga * ga
    step = g / (np.sqrt(vt) + eps)
    if momentum > 0:
        b = st["b"] = momentum * st.get("b", 0) + step
        return p - lr * b
    return p - lr * step


def adagrad_ref(p, g, st, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10,
                maximize=False):
    g = -g if maximize else g
    t = st["t"] = st.get("t", 0) + 1
    if weight_decay:
        g = g + weight_decay * p
    clr = lr / (1 + (t - 1) * lr_decay)
    s = st["sum"] = st.get("sum", initial_accumulator_value) + g * g
    return p - clr * g / (np.sqrt(s) + eps)


def flags(**options):
    """Every combination of the given option values, as kwargs dicts."""
    keys = list(options)
    return [dict(zip(keys, vals)) for vals in itertools.product(*options.values())]


CONFIGS = (
    [("SGD", sgd_ref, dict(lr=0.05, **f)) for f in flags(momentum=[0, 0.9], dampening=[0, 0.3],
                                                          weight_decay=[0, 0.1], nesterov=[False, True],
                                                          maximize=[False, True])
     if not (f["nesterov"] and (f["momentum"] == 0 or f["dampening"] != 0))]
    + [("Adam", adam_ref, dict(lr=0.02, **f)) for f in flags(weight_decay=[0, 0.1], amsgrad=[False, True],
                                                              maximize=[False, True], fused=[None, False])]
    + [("Adam", adam_ref, dict(lr=0.02, betas=(0.5, 0.9), eps=1e-3))]
    + [("AdamW", adamw_ref, dict(lr=0.02, **f)) for f in flags(weight_decay=[0, 0.1], amsgrad=[False, True],
                                                                maximize=[False, True], fused=[None, False])]
    + [("AdamW", adamw_ref, dict())]
    + [("RMSprop", rmsprop_ref, dict(lr=0.01, **f)) for f in flags(weight_decay=[0, 0.1], momentum=[0, 0.5],
                                                                    centered=[False, True], maximize=[False, True])]
    + [("RMSprop", rmsprop_ref, dict(alpha=0.9, eps=1e-4))]
    + [("Adagrad", adagrad_ref, dict(lr=0.1, **f)) for f in flags(lr_decay=[0, 0.05], weight_decay=[0, 0.1],
                                                                   initial_accumulator_value=[0, 0.5],
                                                                   maximize=[False, True])]
    + [("Adagrad", adagrad_ref, dict(eps=1e-3))]
)


def config_id(c):
    return c[0] + "-" + "-".join(f"{k}={v}" for k, v in c[2].items())


# ---------------------------------------------------------------------------
# the small problem: loss = sum(c * (w - t)^2) over two parameters; ember and
# torch get their gradients from autograd, NumPy from the formula 2 c (w - t)
def problem(dtype="float64"):
    rng = np.random.default_rng(7)
    w0 = [rng.standard_normal(s) for s in SHAPES]
    targets = [rng.standard_normal(s) for s in SHAPES]
    scales = [rng.uniform(0.5, 2.0, s) for s in SHAPES]
    return [w.astype(dtype) for w in w0], targets, scales


def run_lib(L, name, kwargs, dtype="float64", steps=STEPS):
    w0, targets, scales = problem(dtype)
    ps = [L.tensor(w, requires_grad=True) for w in w0]
    ts = [L.tensor(t.astype(dtype)) for t in targets]
    cs = [L.tensor(c.astype(dtype)) for c in scales]
    opt = getattr(L.optim, name)(ps, **{k: v for k, v in kwargs.items() if k != "fused" or L is ember or v})

    def closure():
        opt.zero_grad()
        # (sum_to_size: ember's reductions have no backward formulas yet)
        loss = sum(((p - t) ** 2 * c).sum_to_size(()) for p, t, c in zip(ps, ts, cs))
        loss.backward()
        return loss
    for _ in range(steps):
        opt.step(closure)
    return [p.detach().numpy().astype(np.float64) for p in ps], opt


def run_ref(ref, kwargs, steps=STEPS):
    w, targets, scales = problem()
    kw = {k: v for k, v in kwargs.items() if k != "fused"}
    states = [{} for _ in w]
    for _ in range(steps):
        w = [ref(p, 2 * c * (p - t), st, **kw) for p, t, c, st in zip(w, targets, scales, states)]
    return w


@pytest.mark.parametrize("config", CONFIGS, ids=config_id)
def test_against_numpy(config):
    name, ref, kwargs = config
    expect = run_ref(ref, kwargs)
    got, _ = run_lib(ember, name, kwargs, "float64")
    for g, e in zip(got, expect):
        np.testing.assert_allclose(g, e, rtol=1e-9, atol=1e-12)
    got32, _ = run_lib(ember, name, kwargs, "float32")
    for g, e in zip(got32, expect):
        np.testing.assert_allclose(g, e, rtol=2e-4, atol=2e-5)


@pytest.mark.parametrize("config", CONFIGS, ids=config_id)
def test_against_torch(config, torch):
    name, _, kwargs = config
    for dtype, tol in (("float32", 1e-5), ("float64", 1e-12)):
        got, opt = run_lib(ember, name, kwargs, dtype)
        expect, topt = run_lib(torch, name, kwargs, dtype)
        for g, e in zip(got, expect):
            np.testing.assert_allclose(g, e, rtol=tol, atol=tol)
        # the same state, key for key
        for p, tp in zip(opt.param_groups[0]["params"], topt.param_groups[0]["params"]):
            st, tst = opt.state[p], topt.state[tp]
            assert sorted(st) == sorted(tst)
            for k in st:
                if st[k] is None:
                    assert tst[k] is None
                    continue
                assert str(st[k].dtype).split(".")[-1] == str(tst[k].dtype).split(".")[-1], k
                np.testing.assert_allclose(st[k].numpy(), tst[k].numpy(), rtol=tol * 10, atol=tol)
        assert opt.param_groups[0].keys() == topt.param_groups[0].keys()


# ---------------------------------------------------------------------------
# the Optimizer base class
def params(*shapes):
    return [ember.zeros(s, requires_grad=True) for s in shapes]


def test_param_groups_and_defaults():
    a, b = params((2,), (3,))
    opt = ember.optim.SGD([{"params": [a]}, {"params": b, "lr": 0.5}], lr=0.1, momentum=0.9)
    assert opt.defaults["lr"] == 0.1 and opt.defaults["momentum"] == 0.9
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.5]
    assert opt.param_groups[1]["params"] == [b] and opt.param_groups[1]["momentum"] == 0.9
    a.grad, b.grad = ember.ones(2), ember.ones(3)
    opt.param_groups[0]["lr"] = 0.25  # users edit the groups between steps
    opt.step()
    np.testing.assert_allclose(a.detach().numpy(), [-0.25, -0.25])
    np.testing.assert_allclose(b.detach().numpy(), [-0.5] * 3)
    assert "momentum_buffer" in opt.state[a] and a in opt.state  # keyed by the tensor itself
    assert hash(a) != hash(ember.zeros(2)) or a is not ember.zeros(2)
    opt.add_param_group({"params": params((1,)), "lr": 2.0})
    assert len(opt.param_groups) == 3 and opt.param_groups[2]["momentum"] == 0.9
    assert "SGD (" in repr(opt) and "Parameter Group 2" in repr(opt)


def test_group_errors():
    a, b = params((2,), (2,))
    with pytest.raises(ValueError, match="more than one parameter group"):
        ember.optim.SGD([{"params": [a]}, {"params": [a, b]}])
    opt = ember.optim.Adam([a])
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [a]})
    assert len(opt.param_groups) == 1
    with pytest.warns(UserWarning, match="duplicate parameters"):
        ember.optim.SGD([a, a])
    with pytest.raises(TypeError, match="iterable of Tensors"):
        ember.optim.SGD(a)
    with pytest.raises(ValueError, match="empty parameter list"):
        ember.optim.SGD([])
    with pytest.raises(TypeError, match="can only optimize Tensors"):
        ember.optim.SGD([a, 3.0])
    with pytest.raises(TypeError, match="ordered collections"):
        ember.optim.SGD([{"params": {a}}])
    with pytest.raises(ValueError, match="non-leaf"):
        ember.optim.SGD([a * 2])
    with pytest.raises(TypeError, match="param_group must be a dict"):
        opt.add_param_group([b])


@pytest.mark.parametrize("make,match", [
    (lambda p: ember.optim.SGD(p, lr=-1), "Invalid learning rate: -1"),
    (lambda p: ember.optim.SGD(p, momentum=-0.5), "Invalid momentum value: -0.5"),
    (lambda p: ember.optim.SGD(p, weight_decay=-1), "Invalid weight_decay value: -1"),
    (lambda p: ember.optim.SGD(p, nesterov=True), "Nesterov momentum requires a momentum and zero dampening"),
    (lambda p: ember.optim.Adam(p, lr=-1), "Invalid learning rate: -1"),
    (lambda p: ember.optim.Adam(p, eps=-1), "Invalid epsilon value: -1"),
    (lambda p: ember.optim.Adam(p, betas=(1.0, 0.9)), "Invalid beta parameter at index 0: 1.0"),
    (lambda p: ember.optim.AdamW(p, betas=(0.9, -0.1)), "Invalid beta parameter at index 1: -0.1"),
    (lambda p: ember.optim.AdamW(p, weight_decay=-1), "Invalid weight_decay value: -1"),
    (lambda p: ember.optim.RMSprop(p, alpha=-1), "Invalid alpha value: -1"),
    (lambda p: ember.optim.RMSprop(p, momentum=-1), "Invalid momentum value: -1"),
    (lambda p: ember.optim.Adagrad(p, lr_decay=-1), "Invalid lr_decay value: -1"),
    (lambda p: ember.optim.Adagrad(p, initial_accumulator_value=-1), "Invalid initial_accumulator_value value: -1"),
    (lambda p: ember.optim.Adagrad(p, eps=-1), "Invalid epsilon value: -1"),
])
def test_bad_hyperparameters(make, match):
    with pytest.raises(ValueError, match=match):
        make(params((2,)))


def test_bad_hyperparameters_like_torch(torch):
    """torch raises the same type for the same values."""
    for name, kw in [("SGD", dict(lr=-1)), ("Adam", dict(betas=(1.0, 0.9))), ("Adagrad", dict(lr_decay=-1)),
                     ("RMSprop", dict(alpha=-1)), ("AdamW", dict(eps=-1))]:
        with pytest.raises(ValueError):
            getattr(torch.optim, name)([torch.zeros(2, requires_grad=True)], **kw)
        with pytest.raises(ValueError):
            getattr(ember.optim, name)(params((2,)), **kw)
    with pytest.raises(RuntimeError, match="cannot be `True` together"):
        ember.optim.Adam(params((2,)), fused=True, foreach=True)


def test_zero_grad():
    a, b = params((2,), (3,))
    opt = ember.optim.SGD([a, b])
    a.grad = ember.ones(2)
    opt.zero_grad()
    assert a.grad is None and b.grad is None
    a.grad = ember.ones(2)
    g = a.grad
    opt.zero_grad(set_to_none=False)
    assert a.grad is g and a.grad.tolist() == [0.0, 0.0]


def test_params_without_grad_are_skipped():
    for name in ("SGD", "Adam", "AdamW", "RMSprop", "Adagrad"):
        a, b = params((2,), (3,))
        opt = getattr(ember.optim, name)([a, b], lr=0.1, **({"momentum": 0.9} if name == "SGD" else {}))
        a.grad = ember.ones(2)
        opt.step()
        assert b.tolist() == [0.0] * 3 and a.tolist() != [0.0, 0.0]
        if name != "Adagrad":  # Adagrad makes its state up front, like torch
            assert len(opt.state[b]) == 0


def test_step_runs_without_grad_and_returns_the_loss():
    a = ember.tensor([1.0, 2.0], requires_grad=True)
    opt = ember.optim.Adam([a], lr=0.1)
    seen = []

    def closure():
        seen.append(ember.is_grad_enabled())
        opt.zero_grad()
        loss = (a * a).sum_to_size(())
        loss.backward()
        return loss
    loss = opt.step(closure)
    assert seen == [True] and loss.item() == 5.0
    assert a.grad_fn is None and a.requires_grad and a.is_leaf
    assert opt.step() is None


def test_state_step_is_a_float32_tensor():
    a = params((2,))[0]
    for name in ("Adam", "AdamW", "RMSprop", "Adagrad"):
        opt = getattr(ember.optim, name)([a])
        a.grad = ember.ones(2)
        opt.step()
        opt.step()
        st = opt.state[a]["step"]
        assert isinstance(st, ember.Tensor) and st.dtype == ember.float32 and st.shape == () and st.item() == 2.0


def test_step_hooks():
    a = params((2,))[0]
    opt = ember.optim.SGD([a], lr=1.0)
    calls = []
    h1 = opt.register_step_pre_hook(lambda o, args, kw: calls.append(("pre", o is opt)))
    h2 = opt.register_step_post_hook(lambda o, args, kw: calls.append(("post", a.tolist())))
    a.grad = ember.ones(2)
    opt.step()
    assert calls == [("pre", True), ("post", [-1.0, -1.0])]
    h1.remove()
    h2.remove()
    opt.step()
    assert len(calls) == 2


def test_updates_bump_the_version_counter():
    for name in ("SGD", "Adam", "AdamW"):
        a = params((3,))[0]
        opt = getattr(ember.optim, name)([a], lr=0.1)
        a.grad = ember.ones(3)
        v = a._version
        opt.step()
        assert a._version > v, name


# ---------------------------------------------------------------------------
# state dicts
def train(opt, ps, steps, seed):
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        for p in ps:
            p.grad = ember.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32))
        opt.step()


OPT_KW = [("SGD", dict(lr=0.1, momentum=0.9)), ("Adam", dict(lr=0.1, amsgrad=True)), ("AdamW", dict(lr=0.1)),
          ("RMSprop", dict(lr=0.01, momentum=0.5, centered=True)), ("Adagrad", dict(lr=0.1))]


@pytest.mark.parametrize("name,kw", OPT_KW, ids=[o[0] for o in OPT_KW])
def test_state_dict_round_trip(name, kw):
    w0 = [np.arange(6.0, dtype=np.float32).reshape(2, 3), np.ones(4, np.float32)]
    a = [ember.tensor(w, requires_grad=True) for w in w0]
    opt_a = getattr(ember.optim, name)([{"params": a[:1]}, {"params": a[1:], "lr": 0.05}], **kw)
    train(opt_a, a, 4, 0)
    sd = opt_a.state_dict()
    assert sorted(sd) == ["param_groups", "state"]
    assert [g["params"] for g in sd["param_groups"]] == [[0], [1]]
    assert sd["param_groups"][1]["lr"] == 0.05 and sorted(sd["state"]) == [0, 1]
    b = [ember.tensor(p.detach().numpy(), requires_grad=True) for p in a]
    opt_b = getattr(ember.optim, name)([{"params": b[:1]}, {"params": b[1:]}], **kw)
    # (state_dict() hands out the optimizer's own tensors, as torch's does: copy, as saving would)
    opt_b.load_state_dict(copy.deepcopy(sd))
    assert opt_b.param_groups[1]["lr"] == 0.05 and opt_b.param_groups[1]["params"] == b[1:]
    assert set(opt_b.state) == set(b)
    train(opt_a, a, 3, 1)
    train(opt_b, b, 3, 1)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x.detach().numpy(), y.detach().numpy())


def test_load_state_dict_mismatch_leaves_the_optimizer_alone():
    a, b = params((2,), (3,))
    opt = ember.optim.Adam([a, b])
    a.grad, b.grad = ember.ones(2), ember.ones(3)
    opt.step()
    sd = opt.state_dict()
    other = ember.optim.Adam([params((2,))[0]])
    with pytest.raises(ValueError, match="doesn't match the size"):
        other.load_state_dict(sd)
    assert len(other.state) == 0
    two = ember.optim.Adam([{"params": [params((2,))[0]]}, {"params": [params((3,))[0]]}])
    with pytest.raises(ValueError, match="different number of parameter groups"):
        two.load_state_dict(sd)


def to_ember(obj):
    """A torch state dict with its tensors converted through NumPy."""
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


@pytest.mark.parametrize("name,kw", OPT_KW, ids=[o[0] for o in OPT_KW])
def test_torch_state_dict_loads_into_ember(name, kw, torch):
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
    assert eopt.state[ep[0]]["step"].dtype == ember.float32 if "step" in eopt.state[ep[0]] else True
    for gs in grads[4:]:
        for p, g in zip(tp, gs):
            p.grad = torch.tensor(g)
        for p, g in zip(ep, gs):
            p.grad = ember.tensor(g)
        topt.step()
        eopt.step()
    for x, y in zip(ep, tp):
        np.testing.assert_allclose(x.detach().numpy(), y.detach().numpy(), rtol=1e-5, atol=1e-6)
    # and back: ember's state dict loads into torch
    topt2 = getattr(torch.optim, name)([{"params": tp[:1]}, {"params": tp[1:]}], **kw)
    topt2.load_state_dict(to_torch(eopt.state_dict(), torch))
    assert topt2.param_groups[1]["lr"] == 0.03


# ---------------------------------------------------------------------------
# the fused Adam/AdamW kernel
def test_fused_kernel_is_used_by_default(monkeypatch):
    calls = []
    real = ember._C._fused_adamw_
    monkeypatch.setattr(ember._C, "_fused_adamw_", lambda *a, **k: (calls.append(len(a[0])), real(*a, **k)))
    a, b = params((3, 4), (5,))
    opt = ember.optim.AdamW([a, b])
    a.grad, b.grad = ember.ones(3, 4), ember.ones(5)
    opt.step()
    assert calls == [2]
    ember.optim.AdamW([a, b], fused=False).step()
    ember.optim.AdamW([a, b], foreach=False).step()
    assert calls == [2]


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("name", ["Adam", "AdamW"])
def test_fused_matches_op_by_op(name, dtype):
    """The fused pass and the op-by-op path agree (the op-by-op path is
    checked against NumPy and torch above)."""
    rng = np.random.default_rng(5)
    dt = getattr(ember, dtype)
    w0 = [rng.standard_normal(s) for s in [(64, 33), (7,), ()]]
    grads = [[rng.standard_normal(np.shape(w)) for w in w0] for _ in range(6)]
    half = dtype in ("float16", "bfloat16")
    if half:  # the op-by-op path would round every intermediate: compare with it in float32
        w0 = [ember.tensor(w, dtype=dt).double().numpy() for w in w0]
        grads = [[ember.tensor(g, dtype=dt).double().numpy() for g in gs] for gs in grads]
    results = []
    for fused, run_dt in ((None, dt), (False, ember.float32 if half else dt)):
        ps = [ember.tensor(w, dtype=run_dt, requires_grad=True) for w in w0]
        opt = getattr(ember.optim, name)(ps, lr=0.01, weight_decay=0.1, amsgrad=True, fused=fused)
        for gs in grads:
            for p, g in zip(ps, gs):
                p.grad = ember.tensor(g, dtype=run_dt)
            opt.step()
        results.append([p.detach().to(ember.float64).numpy() for p in ps] +
                       [opt.state[ps[0]][k].to(ember.float64).numpy() for k in ("exp_avg", "exp_avg_sq",
                                                                                 "max_exp_avg_sq")])
    tol = {"float32": 1e-6, "float64": 1e-14, "float16": 4e-3, "bfloat16": 3e-2}[dtype]
    for x, y in zip(*results):
        np.testing.assert_allclose(x, y, rtol=tol, atol=tol)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_fused_one_region_covers_every_chunk(threads):
    """The fused pass cuts the chunks of all parameters into one run per
    thread: big tensors (many chunks) between small ones all get updated, as
    the op-by-op path updates them."""
    rng = np.random.default_rng(8)
    w0 = [rng.standard_normal(s).astype(np.float32) for s in [(300, 257), (5,), (70001,), (3, 3), (), (8193,)]]
    grads = [[rng.standard_normal(np.shape(w)).astype(np.float32) for w in w0] for _ in range(3)]
    before = ember.get_num_threads()
    ember.set_num_threads(threads)
    try:
        results = []
        for fused in (None, False):
            ps = [ember.tensor(w, requires_grad=True) for w in w0]
            opt = ember.optim.AdamW(ps, lr=0.01, weight_decay=0.1, fused=fused)
            for gs in grads:
                for p, g in zip(ps, gs):
                    p.grad = ember.tensor(g)
                opt.step()
            results.append([p.detach().numpy() for p in ps])
    finally:
        ember.set_num_threads(before)
    for x, y, w in zip(*results, w0):
        assert not np.array_equal(x, w)
        np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-6)


def test_fused_falls_back_for_strided_params():
    """A transposed parameter (or gradient) takes the op-by-op path, and gets the same numbers."""
    rng = np.random.default_rng(2)
    w = rng.standard_normal((4, 6)).astype(np.float32)
    g = rng.standard_normal((6, 4)).astype(np.float32)
    expect = run_ref_single(w, g.T)
    p = ember.tensor(w.T.copy()).t().detach().requires_grad_()  # [4, 6] with strides (1, 4)
    assert not p.is_contiguous()
    opt = ember.optim.AdamW([p], lr=0.1)
    for _ in range(3):
        p.grad = ember.tensor(g).t()
        opt.step()
    np.testing.assert_allclose(p.detach().numpy(), expect, rtol=1e-5, atol=1e-6)


def run_ref_single(w, g):
    st, w = {}, w.astype(np.float64)
    for _ in range(3):
        w = adamw_ref(w, g.astype(np.float64), st, lr=0.1)
    return w


def fused_args(n=1, shape=(3,), dtype=None):
    dtype = dtype or ember.float32
    mk = lambda: [ember.ones(shape, dtype=dtype) for _ in range(n)]  # noqa: E731
    return [mk(), mk(), mk(), mk(), [], [ember.tensor(1.0) for _ in range(n)]]


KW = dict(lr=0.1, beta1=0.9, beta2=0.99, weight_decay=0.0, eps=1e-8, maximize=False)


def test_fused_kernel_errors_write_nothing():
    args = fused_args(2)
    args[1][1] = ember.ones(4)  # the second grad has the wrong shape
    with pytest.raises(RuntimeError, match=r"grad 1 has shape \[4\] but its parameter has shape \[3\]"):
        ember._C._fused_adamw_(*args, **KW)
    assert args[0][0].tolist() == [1.0] * 3 and args[2][0].tolist() == [1.0] * 3  # the first was not stepped
    args = fused_args(2)
    args[3].pop()
    with pytest.raises(RuntimeError, match="same length"):
        ember._C._fused_adam_(*args, **KW)
    args = fused_args(1, dtype=ember.int64)
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        ember._C._fused_adamw_(*args, **KW)
    args = fused_args(1, shape=(3, 4))
    args[2][0] = ember.ones(4, 3).t()
    with pytest.raises(RuntimeError, match="not contiguous"):
        ember._C._fused_adamw_(*args, **KW)
    args = fused_args(1)
    args[2][0] = args[0][0]
    with pytest.raises(RuntimeError, match="share memory"):
        ember._C._fused_adamw_(*args, **KW)
    args = fused_args(1)
    args[0][0].requires_grad_()
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        ember._C._fused_adamw_(*args, **KW)
    with ember.no_grad():
        ember._C._fused_adamw_(*args, **KW)
    args = fused_args(1)
    args[4] = [ember.ones(3), ember.ones(3)]
    with pytest.raises(RuntimeError, match="max_exp_avg_sqs"):
        ember._C._fused_adamw_(*args, **KW)
    with pytest.raises(TypeError):
        ember._C._fused_adamw_([1.0], *args[1:], **KW)
    assert ember._C._fused_adamw_([], [], [], [], [], [], **KW) is None


def test_fused_kernel_against_torch(torch):
    """torch._fused_adamw_ and ember's on the same inputs (amsgrad, maximize, weight decay)."""
    rng = np.random.default_rng(11)
    vals = [rng.standard_normal(1000).astype(np.float32) for _ in range(3)] + \
        [rng.uniform(0, 2, 1000).astype(np.float32) for _ in range(2)]
    for name in ("_fused_adam_", "_fused_adamw_"):
        kw = dict(lr=0.01, beta1=0.8, beta2=0.95, weight_decay=0.1, eps=1e-6, maximize=True)
        e = [ember.tensor(v) for v in vals]
        t = [torch.tensor(v) for v in vals]
        getattr(ember._C, name)([e[0]], [e[1]], [e[2]], [e[3]], [e[4]], [ember.tensor(4.0)], **kw)
        getattr(torch, name)([t[0]], [t[1]], [t[2]], [t[3]], [t[4]], [torch.tensor(4.0)], amsgrad=True, **kw)
        for x, y in zip(e, t):
            np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=1e-6, atol=1e-7)


def test_a_wrapper_that_skips_optimizer_init_steps_its_inner_optimizer():
    """accelerate's AcceleratedOptimizer subclasses Optimizer without calling its __init__ and
    forwards step to the optimizer it wraps: its step runs (as in torch, without hooks of its own)
    and the inner optimizer's global and per-instance hooks run exactly once."""
    class Wrapper(ember.optim.Optimizer):
        def __init__(self, inner):
            self.inner = inner

        @property
        def param_groups(self):
            return self.inner.param_groups

        def step(self, closure=None):
            return self.inner.step(closure)

    w = ember.nn.Parameter(ember.tensor([1.0, 2.0]))
    inner = ember.optim.SGD([w], lr=0.5)
    calls = []
    inner.register_step_pre_hook(lambda o, a, k: calls.append(("inner-pre", o is inner)))
    handle = ember.optim.optimizer.register_optimizer_step_post_hook(lambda o, a, k: calls.append(("global", type(o).__name__)))
    try:
        wrapper = Wrapper(inner)
        (w * w).sum().backward()
        wrapper.step()
        wrapper.zero_grad()
    finally:
        handle.remove()
    np.testing.assert_allclose(w.detach().numpy(), [0.0, 0.0])  # w - 0.5 * 2w
    assert w.grad is None
    assert calls == [("inner-pre", True), ("global", "SGD")]
