"""Optimizer and LR-scheduler state written by PyTorch (tests/fixtures/optim_*.pt
and sched_*.pt, made by tests/fixtures/make_optim_fixtures.py) loads into
ember's optimizers and schedulers with ember.load's safe loader, and the next
step gives the numbers torch computed; and the reverse, where torch is
installed: ember's saved optimizer state continues identically in torch."""
import pathlib

import numpy as np
import pytest

import ember

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
OPTIMIZERS = ["sgd", "adam", "adamw_amsgrad", "rmsprop", "adagrad"]
SCHEDULERS = ["steplr", "cosine", "onecycle"]
STEPS = 3  # the steps torch took before saving (make_optim_fixtures.STEPS)


def close(actual, expected, what):
    np.testing.assert_allclose(np.asarray(actual.detach().tolist() if hasattr(actual, "detach") else actual),
                               np.asarray(expected.tolist() if hasattr(expected, "tolist") else expected),
                               rtol=1e-5, atol=1e-6, err_msg=what)


def model(lib):
    """make_optim_fixtures.model(): Linear(4, 3) -> Tanh -> Linear(3, 2), weights sin(0.7 k + i) / 2."""
    net = lib.nn.Sequential(lib.nn.Linear(4, 3), lib.nn.Tanh(), lib.nn.Linear(3, 2))
    with lib.no_grad():
        for i, p in enumerate(net.parameters()):
            k = np.arange(p.numel(), dtype=np.float32)
            p.copy_(lib.tensor((np.sin(0.7 * k + i) / 2).astype(np.float32).reshape(tuple(p.shape))))
    return net


def make_optimizer(lib, net, fixture):
    groups = [{"params": [p for i in idx for p in net[i].parameters()], **extra} for idx, extra in fixture["groups"]]
    return getattr(lib.optim, fixture["class"])(groups, **fixture["defaults"])


def step(lib, net, opt, x, y):
    opt.zero_grad()
    lib.nn.functional.mse_loss(net(x), y).backward()
    opt.step()


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_torch_optimizer_state_continues_in_ember(name):
    fx = ember.load(FIXTURES / f"optim_{name}.pt")  # the safe (weights_only) loader
    net = model(ember)
    net.load_state_dict(fx["model"])
    opt = make_optimizer(ember, net, fx)
    opt.load_state_dict(fx["optimizer"])
    saved_groups = fx["optimizer"]["param_groups"]
    for group, saved in zip(opt.param_groups, saved_groups):
        assert group["lr"] == saved["lr"] and len(group["params"]) == len(saved["params"])
    step(ember, net, opt, fx["x"], fx["y"])
    for key, value in net.state_dict().items():
        close(value, fx["next_model"][key], f"{name}: parameter {key} after the next step")
    ours = opt.state_dict()["state"]
    theirs = fx["next_optimizer"]["state"]
    assert sorted(ours) == sorted(theirs)
    for index in theirs:
        assert sorted(ours[index]) == sorted(theirs[index]), f"{name}: state keys of parameter {index}"
        for key, value in theirs[index].items():
            close(ours[index][key], value, f"{name}: state[{index}][{key!r}] after the next step")
    if "step" in theirs[0]:  # SGD keeps no step count
        assert float(ours[0]["step"]) == STEPS + 1


@pytest.mark.parametrize("name", SCHEDULERS)
def test_torch_scheduler_state_continues_in_ember(name):
    fx = ember.load(FIXTURES / f"sched_{name}.pt")
    net = model(ember)
    opt = ember.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    sched = getattr(ember.optim.lr_scheduler, fx["class"])(opt, **fx["options"])
    opt.load_state_dict(fx["optimizer"])
    sched.load_state_dict(fx["scheduler"])
    assert sched.last_epoch == STEPS
    assert sched.get_last_lr() == pytest.approx(fx["last_lr"], rel=1e-12)
    lrs, momenta = [], []
    for _ in fx["next_lr"]:
        opt.step()
        sched.step()
        lrs.append(sched.get_last_lr()[0])
        momenta.append(opt.param_groups[0]["momentum"])
    assert lrs == pytest.approx(fx["next_lr"], rel=1e-12)
    assert momenta == pytest.approx(fx["next_momentum"], rel=1e-12)


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_ember_optimizer_state_continues_in_torch(name, torch, tmp_path):
    fx = ember.load(FIXTURES / f"optim_{name}.pt")  # only for the optimizer's settings
    x, y = np.cos(np.arange(32, dtype=np.float32)).reshape(8, 4), np.sin(np.arange(16, dtype=np.float32)).reshape(8, 2)
    net = model(ember)
    opt = make_optimizer(ember, net, fx)
    for _ in range(STEPS):
        step(ember, net, opt, ember.tensor(x), ember.tensor(y))
    ember.save({"model": net.state_dict(), "optimizer": opt.state_dict()}, tmp_path / "ember_optim.pt")

    saved = torch.load(tmp_path / "ember_optim.pt", weights_only=True)
    tnet = model(torch)
    tnet.load_state_dict(saved["model"])
    topt = make_optimizer(torch, tnet, fx)
    topt.load_state_dict(saved["optimizer"])
    step(torch, tnet, topt, torch.tensor(x), torch.tensor(y))
    step(ember, net, opt, ember.tensor(x), ember.tensor(y))
    for (key, value), expected in zip(net.state_dict().items(), tnet.state_dict().values()):
        close(value, expected.numpy(), f"{name}: parameter {key}, torch continuing ember's state")
    ours, theirs = opt.state_dict()["state"], topt.state_dict()["state"]
    for index in theirs:
        for key, value in theirs[index].items():
            close(ours[index][key], value.numpy(), f"{name}: state[{index}][{key!r}]")
