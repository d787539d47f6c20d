"""ember.optim.lr_scheduler.CyclicLR: the lr (and momentum / Adam beta1)
sequences against the triangle-wave formula written out here, and against
torch itself when installed (every mode, custom scale functions, SGD and
Adam); state dicts; errors."""
import math
import warnings

import numpy as np
import pytest

import ember

N = 30


def run(L, opt_name="SGD", opt_kw=None, n=N, lrs=(0.1, 0.05), **kw):
    """(lr per group, momentum or beta1 per group) after construction and after each step."""
    groups = [{"params": [L.zeros(2, requires_grad=True)], "lr": lr} for lr in lrs]
    opt = getattr(L.optim, opt_name)(groups, lr=lrs[0], **(opt_kw or {}))
    sched = L.optim.lr_scheduler.CyclicLR(opt, **kw)

    def momentum(g):
        return g["betas"][0] if "betas" in g else g.get("momentum", 0.0)
    seq = [[[g["lr"] for g in opt.param_groups], [momentum(g) for g in opt.param_groups]]]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(n):
            opt.step()
            sched.step()
            seq.append([[g["lr"] for g in opt.param_groups], [momentum(g) for g in opt.param_groups]])
    assert sched.get_last_lr() == seq[-1][0]
    return np.array(seq), opt, sched


def triangle(it, up, down):
    """Position on the wave at iteration it: 0 at the base, 1 at the top; and the cycle number."""
    cycle = it // (up + down) + 1
    pos = it % (up + down)
    return (pos / up if pos <= up else 1 - (pos - up) / down), cycle


class Halve:
    """A callable object scale function (its attributes go into state_dict)."""

    def __init__(self):
        self.base = 0.5

    def __call__(self, x):
        return self.base ** x


CASES = {
    "triangular": dict(base_lr=0.01, max_lr=0.1, step_size_up=4),
    "triangular-down": dict(base_lr=[0.01, 0.02], max_lr=[0.1, 0.3], step_size_up=3, step_size_down=5),
    "triangular2": dict(base_lr=0.01, max_lr=0.1, step_size_up=2, step_size_down=4, mode="triangular2"),
    "exp_range": dict(base_lr=0.01, max_lr=0.1, step_size_up=5, mode="exp_range", gamma=0.95),
    "scale_fn-cycle": dict(base_lr=0.01, max_lr=0.1, step_size_up=3, scale_fn=lambda c: 1 / c),
    "scale_fn-iterations": dict(base_lr=0.01, max_lr=0.1, step_size_up=3, scale_fn=lambda i: 0.9 ** i,
                                scale_mode="iterations"),
    "momentum": dict(base_lr=0.01, max_lr=0.1, step_size_up=4, base_momentum=0.7, max_momentum=[0.95, 0.9]),
    "no-momentum-cycle": dict(base_lr=0.01, max_lr=0.1, step_size_up=4, cycle_momentum=False),
}


def expected(kw, n=N, groups=2):
    up = float(kw["step_size_up"])
    down = float(kw.get("step_size_down") or up)
    base = kw["base_lr"] if isinstance(kw["base_lr"], list) else [kw["base_lr"]] * groups
    top = kw["max_lr"] if isinstance(kw["max_lr"], list) else [kw["max_lr"]] * groups
    mode, gamma = kw.get("mode", "triangular"), kw.get("gamma", 1.0)
    bm = kw.get("base_momentum", 0.8)
    mm = kw.get("max_momentum", 0.9)
    mm = mm if isinstance(mm, list) else [mm] * groups
    out = []
    for it in range(n + 1):
        h, cycle = triangle(it, up, down)
        if "scale_fn" in kw:
            amp = kw["scale_fn"](cycle if kw.get("scale_mode", "cycle") == "cycle" else it)
        else:
            amp = {"triangular": 1.0, "triangular2": 0.5 ** (cycle - 1), "exp_range": gamma ** it}[mode]
        out.append([[b + (t - b) * h * amp for b, t in zip(base, top)],
                    [m - (m - bm) * h * amp for m in mm]])
    return np.array(out)


@pytest.mark.parametrize("name", list(CASES))
def test_against_formula(name):
    kw = CASES[name]
    seq, opt, _ = run(ember, opt_kw=dict(momentum=0.5), **kw)
    exp = expected(kw)
    np.testing.assert_allclose(seq[:, 0], exp[:, 0], rtol=1e-10, atol=1e-14)
    if kw.get("cycle_momentum", True):
        np.testing.assert_allclose(seq[:, 1], exp[:, 1], rtol=1e-10, atol=1e-14)
        assert [g["base_momentum"] for g in opt.param_groups] == [kw.get("base_momentum", 0.8)] * 2
    else:
        assert (seq[:, 1] == 0.5).all()
    # construction sets lr to base_lr, and initial_lr with it
    assert [g["initial_lr"] for g in opt.param_groups] == list(exp[0, 0])


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("opt_name", ["SGD", "Adam"])
def test_against_torch(name, opt_name, torch):
    kw = CASES[name]
    opt_kw = dict(momentum=0.5) if opt_name == "SGD" else {}
    seq, opt, sched = run(ember, opt_name, opt_kw, **kw)
    tseq, topt, tsched = run(torch, opt_name, opt_kw, **kw)
    np.testing.assert_allclose(seq, tseq, rtol=1e-12, atol=1e-15)
    for g, tg in zip(opt.param_groups, topt.param_groups):
        assert {k: v for k, v in g.items() if k != "params"} == {k: v for k, v in tg.items() if k != "params"}
    assert sched.last_epoch == tsched.last_epoch and sched.scale_mode == tsched.scale_mode
    sd, tsd = sched.state_dict(), tsched.state_dict()
    assert sorted(sd) == sorted(tsd)
    for k in sd:
        if k not in ("_scale_fn_custom",):
            assert sd[k] == tsd[k], k


def test_adam_beta1_cycles_and_beta2_stays():
    seq, opt, _ = run(ember, "Adam", {}, n=8, base_lr=0.001, max_lr=0.01, step_size_up=4)
    assert [g["betas"][1] for g in opt.param_groups] == [0.999, 0.999]
    # beta1 from max_momentum 0.9 down to base 0.8 at the top of the lr wave, and back
    np.testing.assert_allclose(seq[[0, 2, 4, 8], 1, 0], [0.9, 0.85, 0.8, 0.9], atol=1e-12)


def test_state_dict_round_trip():
    fn = Halve()
    seq, opt, sched = run(ember, opt_kw=dict(momentum=0.5), n=7, base_lr=0.01, max_lr=0.1, step_size_up=3,
                          scale_fn=fn)
    sd = sched.state_dict()
    assert sd["_scale_fn_custom"] == {"base": 0.5} and "_scale_fn_ref" not in sd
    fn.base = 0.25
    sched.load_state_dict(sd)
    assert fn.base == 0.5 and sched.last_epoch == 7
    # a plain function is not saved; loading keeps the scheduler's own
    _, _, s2 = run(ember, opt_kw=dict(momentum=0.5), n=2, base_lr=0.01, max_lr=0.1, step_size_up=3,
                   mode="exp_range", gamma=0.9)
    sd2 = s2.state_dict()
    assert sd2["_scale_fn_custom"] is None
    _, _, s3 = run(ember, opt_kw=dict(momentum=0.5), n=0, base_lr=0.01, max_lr=0.1, step_size_up=3)
    s3.load_state_dict(sd2)
    assert s3.mode == "exp_range" and s3.scale_mode == "iterations" and s3.last_epoch == 2
    assert s3.scale_fn(2) == pytest.approx(0.81)


def test_resume_needs_initial_lr():
    p = ember.zeros(2, requires_grad=True)
    opt = ember.optim.SGD([p], lr=0.1, momentum=0.9)
    with pytest.raises(KeyError, match="initial_lr"):
        ember.optim.lr_scheduler.CyclicLR(opt, 0.01, 0.1, last_epoch=3)


def test_errors():
    p = ember.zeros(2, requires_grad=True)
    CyclicLR = ember.optim.lr_scheduler.CyclicLR
    with pytest.raises(ValueError, match="mode is invalid and scale_fn is None"):
        CyclicLR(ember.optim.SGD([p], lr=0.1, momentum=0.9), 0.01, 0.1, mode="sawtooth")
    with pytest.raises(ValueError, match="optimizer must support momentum or beta1"):
        CyclicLR(ember.optim.Adagrad([p], lr=0.1), 0.01, 0.1)
    CyclicLR(ember.optim.Adagrad([p], lr=0.1), 0.01, 0.1, cycle_momentum=False)  # fine without momentum
    with pytest.raises(ValueError, match="max_lr must have the same length as optimizer.param_groups"):
        CyclicLR(ember.optim.SGD([p], lr=0.1, momentum=0.9), 0.01, [0.1, 0.2])
    with pytest.raises(TypeError, match="is not an Optimizer"):
        CyclicLR(object(), 0.01, 0.1)


def test_errors_like_torch(torch):
    for make in (lambda L, o: L.optim.lr_scheduler.CyclicLR(o, 0.01, 0.1, mode="sawtooth"),
                 lambda L, o: L.optim.lr_scheduler.CyclicLR(o, 0.01, [0.1, 0.2])):
        errs = []
        for L in (ember, torch):
            with pytest.raises(Exception) as info:
                make(L, L.optim.SGD([L.zeros(2, requires_grad=True)], lr=0.1, momentum=0.9))
            errs.append(info.value)
        assert type(errs[0]) is type(errs[1]) and str(errs[0]) == str(errs[1])


def test_large_step_counts_stay_periodic():
    """The wave after many cycles equals the first cycle's (triangular)."""
    seq, _, _ = run(ember, opt_kw=dict(momentum=0.5), n=4 * 8 + 8, lrs=(0.1,), base_lr=0.0, max_lr=1.0,
                    step_size_up=4)
    np.testing.assert_allclose(seq[-9:, 0, 0], seq[:9, 0, 0], atol=1e-12)
    assert math.isclose(seq[4, 0, 0], 1.0)
