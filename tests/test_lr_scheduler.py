"""ember.optim.lr_scheduler: the learning-rate sequences against hand-written
formulas (the closed forms in torch's docs) and against torch itself when it
is installed; the initial step, get_last_lr, state dicts, warnings, errors."""
import math
import warnings

import numpy as np
import pytest

import ember
from ember.optim import lr_scheduler as S

N = 25


def make_opt(L, name="SGD", lrs=(0.1,), **kw):
    groups = [{"params": [L.zeros(2, requires_grad=True)], "lr": lr} for lr in lrs]
    return getattr(L.optim, name)(groups, lr=lrs[0], **kw)


def lr_sequence(L, make_sched, n=N, lrs=(0.1,), opt_name="SGD", opt_kw=None, metrics=None):
    """lrs seen by the optimizer: after construction, then after each step."""
    opt = make_opt(L, opt_name, lrs, **(opt_kw or {}))
    sched = make_sched(L.optim.lr_scheduler, opt)
    seq = [[g["lr"] for g in opt.param_groups]]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warnings in the right order of calls
        for i in range(n):
            opt.step()
            sched.step(metrics[i]) if metrics is not None else sched.step()
            seq.append([g["lr"] for g in opt.param_groups])
    assert sched.get_last_lr() == seq[-1]
    return np.array(seq), opt, sched


def lam(e):
    return 0.95 ** e


CASES = {
    # name: (make scheduler, closed form lr(base, epoch) or None)
    "LambdaLR": (lambda S, o: S.LambdaLR(o, lam), lambda b, e: b * 0.95 ** e),
    "LambdaLR-list": (lambda S, o: S.LambdaLR(o, [lam, lambda e: 1 / (e + 1)]), None),
    "MultiplicativeLR": (lambda S, o: S.MultiplicativeLR(o, lambda e: 0.9), lambda b, e: b * 0.9 ** e),
    "StepLR": (lambda S, o: S.StepLR(o, step_size=4, gamma=0.5), lambda b, e: b * 0.5 ** (e // 4)),
    "MultiStepLR": (lambda S, o: S.MultiStepLR(o, milestones=[3, 7, 7, 12], gamma=0.1),
                    lambda b, e: b * 0.1 ** sum(e >= m for m in [3, 7, 7, 12])),
    "ConstantLR": (lambda S, o: S.ConstantLR(o, factor=0.25, total_iters=6),
                   lambda b, e: b * (0.25 if e < 6 else 1.0)),
    "LinearLR": (lambda S, o: S.LinearLR(o, start_factor=0.2, end_factor=0.9, total_iters=8),
                 lambda b, e: b * (0.2 + 0.7 * min(e, 8) / 8)),
    "ExponentialLR": (lambda S, o: S.ExponentialLR(o, gamma=0.8), lambda b, e: b * 0.8 ** e),
    "PolynomialLR": (lambda S, o: S.PolynomialLR(o, total_iters=10, power=2.0),
                     lambda b, e: b * (1 - min(e, 10) / 10) ** 2),
    "CosineAnnealingLR": (lambda S, o: S.CosineAnnealingLR(o, T_max=10, eta_min=0.001),
                          lambda b, e: 0.001 + (b - 0.001) * (1 + math.cos(math.pi * e / 10)) / 2),
    "CosineAnnealingWarmRestarts": (lambda S, o: S.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2, eta_min=0.01),
                                    None),
    "CosineAnnealingWarmRestarts-1": (lambda S, o: S.CosineAnnealingWarmRestarts(o, T_0=4),
                                      lambda b, e: b * (1 + math.cos(math.pi * (e % 4) / 4)) / 2),
    "OneCycleLR": (lambda S, o: S.OneCycleLR(o, max_lr=1.0, total_steps=N + 1), None),
    "OneCycleLR-linear-3phase": (lambda S, o: S.OneCycleLR(o, max_lr=[1.0, 0.5], epochs=2, steps_per_epoch=13,
                                                           anneal_strategy="linear", three_phase=True), None),
    "SequentialLR": (lambda S, o: S.SequentialLR(o, [S.LinearLR(o, start_factor=0.1, total_iters=5),
                                                     S.ExponentialLR(o, gamma=0.9)], milestones=[5]),
                     lambda b, e: b * (0.1 + 0.9 * e / 5) if e < 5 else b * 0.9 ** (e - 5)),
    "ChainedScheduler": (lambda S, o: S.ChainedScheduler([S.ConstantLR(o, factor=0.5, total_iters=4),
                                                          S.ExponentialLR(o, gamma=0.9)]),
                         lambda b, e: b * 0.9 ** e * (0.5 if e < 4 else 1.0)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_against_formula(name):
    make, formula = CASES[name]
    seq, opt, sched = lr_sequence(ember, make, lrs=(0.1, 0.05))
    if formula is not None:
        expect = [[formula(b, e) for b in (0.1, 0.05)] for e in range(N + 1)]
        np.testing.assert_allclose(seq, expect, rtol=1e-10, atol=1e-14)
    assert [g["initial_lr"] for g in opt.param_groups] == ([0.1, 0.05] if "OneCycle" not in name else
                                                           [g["max_lr"] / 25.0 for g in opt.param_groups])


@pytest.mark.parametrize("name", list(CASES))
def test_against_torch(name, torch):
    make, _ = CASES[name]
    seq, opt, sched = lr_sequence(ember, make, lrs=(0.1, 0.05))
    tseq, topt, tsched = lr_sequence(torch, make, lrs=(0.1, 0.05))
    np.testing.assert_allclose(seq, tseq, rtol=1e-12, atol=1e-15)
    assert getattr(sched, "last_epoch", None) == getattr(tsched, "last_epoch", None)
    for g, tg in zip(opt.param_groups, topt.param_groups):
        assert {k: v for k, v in g.items() if k != "params"} == {k: v for k, v in tg.items() if k != "params"}


def test_warm_restarts_formula():
    """T_0=3, T_mult=2: periods of 3, 6, 12 epochs."""
    seq, _, _ = lr_sequence(ember, CASES["CosineAnnealingWarmRestarts"][0], lrs=(0.1,))
    starts = [0, 3, 9, 21]
    for e in range(N + 1):
        k = max(i for i, s in enumerate(starts) if s <= e)
        t_cur, t_i = e - starts[k], 3 * 2 ** k
        assert seq[e][0] == pytest.approx(0.01 + 0.09 * (1 + math.cos(math.pi * t_cur / t_i)) / 2, rel=1e-12)


def test_one_cycle_formula():
    """Cosine up from max_lr/25 to max_lr over 30% of the steps, then down to
    initial/1e4; momentum the opposite way between 0.95 and 0.85."""
    total = N + 1
    seq, opt, _ = lr_sequence(ember, lambda S, o: S.OneCycleLR(o, max_lr=1.0, total_steps=total), lrs=(0.1,),
                              opt_kw={"momentum": 0.9})
    up = 0.3 * total - 1

    def cos_anneal(a, b, pct):
        return b + (a - b) / 2 * (math.cos(math.pi * pct) + 1)
    for e in range(N + 1):
        lr = cos_anneal(0.04, 1.0, e / up) if e <= up else cos_anneal(1.0, 0.04 / 1e4, (e - up) / (total - 1 - up))
        assert seq[e][0] == pytest.approx(lr, rel=1e-12)
    assert opt.param_groups[0]["momentum"] == pytest.approx(cos_anneal(0.85, 0.95, (N - up) / (total - 1 - up)))


def test_one_cycle_adam_betas(torch):
    for L in (ember, torch):
        opt = make_opt(L, "AdamW", (0.1,))
        sched = L.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.5, total_steps=10)
        for _ in range(4):
            opt.step()
            sched.step()
        yield_betas = opt.param_groups[0]["betas"]
        if L is ember:
            ember_betas = yield_betas
    assert ember_betas == pytest.approx(yield_betas)


def test_reduce_on_plateau():
    metrics = [1.0, 0.9, 0.9, 0.9, 0.9, 0.89995, 0.9, 0.5, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6]
    make = lambda S, o: S.ReduceLROnPlateau(o, factor=0.5, patience=2, cooldown=1, min_lr=0.02)  # noqa: E731
    seq, _, sched = lr_sequence(ember, make, n=len(metrics), lrs=(0.1,), metrics=metrics)
    # by hand: bad epochs counted after the last improvement (rel threshold 1e-4), reduce after > 2,
    # then one cooldown epoch in which nothing is counted; never below min_lr
    expect = [0.1] * 5 + [0.05] * 6 + [0.025] * 4 + [0.02] * 2
    np.testing.assert_allclose(seq[:, 0], expect)
    assert sched.best == 0.5


def test_reduce_on_plateau_against_torch(torch):
    rng = np.random.default_rng(0)
    metrics = list(np.round(rng.uniform(0, 1, 40), 2))
    for mode, thr_mode in (("min", "rel"), ("max", "abs")):
        make = lambda S, o: S.ReduceLROnPlateau(o, mode=mode, threshold_mode=thr_mode, threshold=0.05,  # noqa
                                                patience=1, cooldown=2, factor=0.3, min_lr=[0.001, 0.0])
        seq, _, _ = lr_sequence(ember, make, n=40, lrs=(0.1, 0.2), metrics=metrics)
        tseq, _, _ = lr_sequence(torch, make, n=40, lrs=(0.1, 0.2), metrics=metrics)
        np.testing.assert_allclose(seq, tseq)


def test_initial_step_and_last_epoch():
    opt = make_opt(ember, lrs=(0.1,))
    sched = S.StepLR(opt, step_size=2)
    assert sched.last_epoch == 0 and sched._step_count == 1
    assert opt.param_groups[0]["initial_lr"] == 0.1 and sched.base_lrs == [0.1]
    assert sched.get_last_lr() == [0.1]
    opt.param_groups[0]["lr"] = 1.0  # user edits carry on in the chainable form
    opt.step()
    sched.step()
    opt.step()
    sched.step()
    assert sched.last_epoch == 2 and opt.param_groups[0]["lr"] == pytest.approx(0.1)
    with pytest.raises(KeyError, match="initial_lr"):
        S.StepLR(make_opt(ember), step_size=2, last_epoch=3)
    assert S._LRScheduler is S.LRScheduler


def test_step_before_optimizer_step_warns(torch):
    for L in (ember, torch):
        opt = make_opt(L)
        sched = L.optim.lr_scheduler.ExponentialLR(opt, gamma=0.5)
        with pytest.warns(UserWarning, match="Detected call of `lr_scheduler.step\\(\\)` before `optimizer.step\\(\\)`"):
            sched.step()
        opt.step()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            sched.step()
        assert opt.param_groups[0]["lr"] == pytest.approx(0.025)


def test_step_before_optimizer_step_warns_without_torch():
    opt = make_opt(ember)
    sched = S.ExponentialLR(opt, gamma=0.5)
    with pytest.warns(UserWarning, match="before `optimizer.step\\(\\)`"):
        sched.step()
    opt2 = make_opt(ember)
    sched2 = S.ExponentialLR(opt2, gamma=0.5)
    opt2.step = lambda: None  # replaced after the scheduler was made
    with pytest.warns(UserWarning, match="has been overridden"):
        sched2.step()
    with pytest.warns(UserWarning, match="deprecated"):
        sched.step(5)
    assert opt.param_groups[0]["lr"] == pytest.approx(0.1 * 0.5 ** 5)  # the closed form
    with pytest.warns(UserWarning, match="get_last_lr"):
        sched.get_lr()


@pytest.mark.parametrize("name", [n for n in CASES if n != "LambdaLR-list"])
def test_state_dict_round_trip(name):
    make, _ = CASES[name]
    opt = make_opt(ember, lrs=(0.1, 0.05))
    sched = make(S, opt)
    for _ in range(7):
        opt.step()
        sched.step()
    sd = sched.state_dict()
    assert "optimizer" not in sd
    opt2 = make_opt(ember, lrs=(0.1, 0.05))  # resuming as in torch: build both, then load both
    sched2 = make(S, opt2)
    opt2.load_state_dict(opt.state_dict())
    sched2.load_state_dict(sd)
    assert sched2.last_epoch == sched.last_epoch if hasattr(sched, "last_epoch") else True
    for _ in range(6):
        for o, s in ((opt, sched), (opt2, sched2)):
            o.step()
            s.step()
        assert sched2.get_last_lr() == pytest.approx(sched.get_last_lr())
        assert [g["lr"] for g in opt2.param_groups] == pytest.approx([g["lr"] for g in opt.param_groups])


def test_lambda_state_dict_keeps_callable_objects():
    class Warmup:
        def __init__(self, n):
            self.n = n

        def __call__(self, e):
            return min(1.0, (e + 1) / self.n)
    opt = make_opt(ember)
    sched = S.LambdaLR(opt, Warmup(4))
    sd = sched.state_dict()
    assert sd["lr_lambdas"] == [{"n": 4}]
    sched2 = S.LambdaLR(make_opt(ember), Warmup(10))
    sched2.load_state_dict(sd)
    assert sched2.lr_lambdas[0].n == 4
    assert S.LambdaLR(make_opt(ember), lam).state_dict()["lr_lambdas"] == [None]


@pytest.mark.parametrize("make,exc,match", [
    (lambda o: S.StepLR(object(), 2), TypeError, "is not an Optimizer"),
    (lambda o: S.ConstantLR(o, factor=1.5), ValueError, "between 0 and 1"),
    (lambda o: S.LinearLR(o, start_factor=0), ValueError, "greater than 0"),
    (lambda o: S.LinearLR(o, end_factor=2), ValueError, "between 0 and 1"),
    (lambda o: S.LambdaLR(o, [lam, lam]), ValueError, "Expected 1 lr_lambdas, but got 2"),
    (lambda o: S.MultiplicativeLR(o, 0.9), TypeError, "lr_lambda should be a function"),
    (lambda o: S.CosineAnnealingWarmRestarts(o, T_0=0), ValueError, "positive integer T_0"),
    (lambda o: S.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=0), ValueError, "T_mult >= 1"),
    (lambda o: S.OneCycleLR(o, max_lr=1.0), ValueError, "total_steps OR"),
    (lambda o: S.OneCycleLR(o, max_lr=1.0, total_steps=0), ValueError, "positive integer total_steps"),
    (lambda o: S.OneCycleLR(o, max_lr=1.0, total_steps=5, pct_start=2.0), ValueError, "pct_start"),
    (lambda o: S.OneCycleLR(o, max_lr=1.0, total_steps=5, anneal_strategy="x"), ValueError, "anneal_strategy"),
    (lambda o: S.OneCycleLR(o, max_lr=[1.0, 2.0], total_steps=5), ValueError, "same length"),
    (lambda o: S.ReduceLROnPlateau(o, factor=1.0), ValueError, "Factor should be < 1.0"),
    (lambda o: S.ReduceLROnPlateau(o, mode="up"), ValueError, "mode up is unknown"),
    (lambda o: S.ReduceLROnPlateau(o, min_lr=[0.1, 0.2]), ValueError, "expected 1 min_lrs"),
    (lambda o: S.SequentialLR(o, [S.StepLR(o, 2)], milestones=[3]), ValueError, "one more"),
    (lambda o: S.SequentialLR(o, [], milestones=[]), ValueError, "at least one scheduler"),
    (lambda o: S.ChainedScheduler([S.ReduceLROnPlateau(o)]), ValueError, "does not support `ReduceLROnPlateau`"),
    (lambda o: S.SequentialLR(o, [S.StepLR(o, 2), S.StepLR(make_opt(ember), 2)], milestones=[3]), ValueError,
     "same optimizer"),
])
def test_errors(make, exc, match):
    with pytest.raises(exc, match=match):
        make(make_opt(ember))


def test_one_cycle_too_many_steps():
    opt = make_opt(ember)
    sched = S.OneCycleLR(opt, max_lr=1.0, total_steps=3)
    for _ in range(3):
        opt.step()
        sched.step()
    with pytest.raises(ValueError, match="Tried to step 4 times"):
        opt.step()
        sched.step()
