"""ember.optim.swa_utils: AveragedModel (SWA mean, EMA, avg_fn / multi_avg_fn,
use_buffers), SWALR and update_bn: NumPy / hand references (always run) and torch
parity on the same weights, data and schedules (skipped without torch)."""
import math

import numpy as np
import pytest

import ember
from ember import nn
from ember.optim import swa_utils as S

rng = np.random.default_rng(3)


def close(x, ref, tol=1e-12):
    np.testing.assert_allclose(np.asarray(x.detach().numpy() if isinstance(x, ember.Tensor) else x),
                               np.asarray(ref), rtol=tol, atol=tol)


def _net():
    return nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2)).double()


def _snapshots(model, k):
    """Perturbs the model's parameters k times, yielding their values after each."""
    for _ in range(k):
        with ember.no_grad():
            for p in model.parameters():
                p.add_(ember.tensor(rng.standard_normal(tuple(p.shape))))
        yield [p.detach().numpy().copy() for p in model.parameters()]


def test_swa_mean_by_hand():
    model = _net()
    avg = S.AveragedModel(model)
    assert list(avg.state_dict())[0] == "n_averaged"
    seen = []
    for snap in _snapshots(model, 4):
        avg.update_parameters(model)
        seen.append(snap)
    assert avg.n_averaged.item() == 4 and avg.n_averaged.dtype == ember.int64
    for i, p in enumerate(avg.module.parameters()):
        close(p, np.mean([s[i] for s in seen], axis=0), 1e-12)
    # buffers are copied, not averaged, without use_buffers
    model(ember.tensor(rng.standard_normal((5, 3))))
    avg.update_parameters(model)
    for b1, b2 in zip(avg.module.buffers(), model.buffers()):
        close(b1, b2.numpy())
    x = ember.tensor(rng.standard_normal((2, 3)))
    avg.eval()
    assert avg(x).shape == (2, 2)


@pytest.mark.parametrize("kind", ["avg_fn", "multi_avg_fn"])
def test_ema_by_hand(kind):
    model = _net()
    decay = 0.8
    kw = {"avg_fn": S.get_ema_avg_fn(decay)} if kind == "avg_fn" else \
        {"multi_avg_fn": S.get_ema_multi_avg_fn(decay), "use_buffers": True}
    avg = S.AveragedModel(model, **kw)
    snaps = list(_snapshots(model, 3))
    # replay: the first update copies, later ones blend
    model2 = _net()
    ema = None
    for snap in snaps:
        with ember.no_grad():
            for p, v in zip(model2.parameters(), snap):
                p.copy_(ember.tensor(v))
        avg.update_parameters(model2)
        ema = [v.copy() for v in snap] if ema is None else [decay * e + (1 - decay) * v for e, v in zip(ema, snap)]
    for p, e in zip(avg.module.parameters(), ema):
        close(p, e, 1e-12)


def test_swa_fns_by_hand():
    a, c = ember.tensor([1.0, 2.0]), ember.tensor([3.0, 6.0])
    close(S.get_swa_avg_fn()(a, c, ember.tensor(1)), [2.0, 4.0])
    close(S.get_ema_avg_fn(0.5)(a, c, 0), [2.0, 4.0])
    lst = [a.clone()]
    S.get_swa_multi_avg_fn()(lst, [c], ember.tensor(3))
    close(lst[0], [1.5, 3.0])
    ints = [ember.tensor([4, 8])]
    S.get_swa_multi_avg_fn()(ints, [ember.tensor([8, 16])], 1)
    assert ints[0].tolist() == [6, 12]
    ints = [ember.tensor([4, 8])]
    S.get_swa_multi_avg_fn()(ints, [ember.tensor([5, 8])], 2)  # (4 + (5 - 4) / 3) truncated
    assert ints[0].tolist() == [4, 8]
    with pytest.raises(AssertionError):
        S.AveragedModel(_net(), avg_fn=S.get_swa_avg_fn(), multi_avg_fn=S.get_swa_multi_avg_fn())


def test_swalr_by_hand():
    p = nn.Parameter(ember.zeros(1))
    opt = ember.optim.SGD([p], lr=1.0)
    sched = S.SWALR(opt, swa_lr=0.1, anneal_epochs=4, anneal_strategy="linear")
    lrs = [opt.param_groups[0]["lr"]]
    for _ in range(6):
        opt.step()
        sched.step()
        lrs.append(opt.param_groups[0]["lr"])
    # linear from 1.0 to 0.1 over 4 steps, then held
    close(np.array(lrs), [1.0, 0.775, 0.55, 0.325, 0.1, 0.1, 0.1], 1e-12)
    opt = ember.optim.SGD([p], lr=1.0)
    sched = S.SWALR(opt, swa_lr=0.0, anneal_epochs=2)
    opt.step()
    sched.step()
    close(opt.param_groups[0]["lr"], (1 + math.cos(math.pi / 2)) / 2, 1e-12)
    state = sched.state_dict()
    assert "anneal_func" not in state and state["_anneal_strategy"] == "cos"
    sched2 = S.SWALR(ember.optim.SGD([p], lr=1.0), swa_lr=0.5, anneal_strategy="linear")
    sched2.load_state_dict(state)
    assert sched2.anneal_func is S.SWALR._cosine_anneal
    with pytest.raises(ValueError, match="anneal_strategy must be one of 'cos' or 'linear'"):
        S.SWALR(opt, swa_lr=0.1, anneal_strategy="exp")
    with pytest.raises(ValueError, match="anneal_epochs must be equal or greater than 0"):
        S.SWALR(opt, swa_lr=0.1, anneal_epochs=-1)
    with pytest.raises(ValueError, match="must have the same length as optimizer.param_groups"):
        S.SWALR(opt, swa_lr=[0.1, 0.2])


def test_update_bn_by_hand():
    model = _net()
    data = [ember.tensor(rng.standard_normal((8, 3))) for _ in range(3)]
    with ember.no_grad():
        h = [model[0](x).numpy() for x in data]
    bn = model[1]
    bn.momentum = 0.3
    model.eval()
    S.update_bn([(x, 0) for x in data], model)
    assert bn.momentum == 0.3 and not model.training
    # the cumulative average of the per-batch statistics (unbiased variance)
    close(bn.running_mean, np.mean([b.mean(0) for b in h], axis=0), 1e-12)
    close(bn.running_var, np.mean([b.var(0, ddof=1) for b in h], axis=0), 1e-12)
    assert bn.num_batches_tracked.item() == 3
    S.update_bn(data, nn.Linear(2, 2))  # no BatchNorm: nothing to do


# -- torch parity ----------------------------------------------------------------------

def _twins(torch):
    tm = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 2)).double()
    em = _net()
    em.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    return em, tm


@pytest.mark.parametrize("kw", [{}, {"use_buffers": True}, {"ema": 0.9}, {"ema_multi": 0.7, "use_buffers": True}])
def test_averaged_model_against_torch(torch, kw):
    from torch.optim import swa_utils as TS
    kw = dict(kw)
    ekw, tkw = {}, {}
    if "ema" in kw:
        d = kw.pop("ema")
        ekw["avg_fn"], tkw["avg_fn"] = S.get_ema_avg_fn(d), TS.get_ema_avg_fn(d)
    if "ema_multi" in kw:
        d = kw.pop("ema_multi")
        ekw["multi_avg_fn"], tkw["multi_avg_fn"] = S.get_ema_multi_avg_fn(d), TS.get_ema_multi_avg_fn(d)
    em, tm = _twins(torch)
    ea, ta = S.AveragedModel(em, **ekw, **kw), TS.AveragedModel(tm, **tkw, **kw)
    eo = ember.optim.SGD(em.parameters(), lr=0.1, momentum=0.9)
    to = torch.optim.SGD(tm.parameters(), lr=0.1, momentum=0.9)
    for step in range(4):
        x = rng.standard_normal((6, 3))
        for m, o, X in ((em, eo, ember.tensor(x)), (tm, to, torch.tensor(x))):
            o.zero_grad()
            m(X).pow(2).sum().backward()
            o.step()
        ea.update_parameters(em)
        ta.update_parameters(tm)
    es, ts = ea.state_dict(), ta.state_dict()
    assert list(es) == list(ts)
    for k in es:
        close(es[k], ts[k].numpy(), 1e-10)
    x = rng.standard_normal((2, 3))
    ea.eval()
    ta.eval()
    close(ea(ember.tensor(x)), ta(torch.tensor(x)).detach().numpy(), 1e-10)


@pytest.mark.parametrize("strategy,epochs", [("cos", 3), ("linear", 5), ("cos", 0)])
def test_swalr_against_torch(torch, strategy, epochs):
    from torch.optim import swa_utils as TS
    ep = [nn.Parameter(ember.zeros(1)), nn.Parameter(ember.zeros(1))]
    tp = [torch.nn.Parameter(torch.zeros(1)), torch.nn.Parameter(torch.zeros(1))]
    eo = ember.optim.SGD([{"params": [ep[0]]}, {"params": [ep[1]], "lr": 0.3}], lr=1.0)
    to = torch.optim.SGD([{"params": [tp[0]]}, {"params": [tp[1]], "lr": 0.3}], lr=1.0)
    es = S.SWALR(eo, swa_lr=[0.05, 0.01], anneal_epochs=epochs, anneal_strategy=strategy)
    ts = TS.SWALR(to, swa_lr=[0.05, 0.01], anneal_epochs=epochs, anneal_strategy=strategy)
    for _ in range(7):
        eo.step()
        to.step()
        es.step()
        ts.step()
        close(np.array(es.get_last_lr()), ts.get_last_lr(), 1e-12)
    assert sorted(es.state_dict()) == sorted(ts.state_dict())


def test_update_bn_against_torch(torch):
    from torch.optim import swa_utils as TS
    em, tm = _twins(torch)
    data = [rng.standard_normal((5, 3)) for _ in range(4)]
    S.update_bn([ember.tensor(x) for x in data], em)
    TS.update_bn([torch.tensor(x) for x in data], tm)
    for k, v in tm.state_dict().items():
        close(em.state_dict()[k], v.numpy(), 1e-12)
