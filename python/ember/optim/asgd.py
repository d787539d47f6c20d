"""ASGD (torch.optim.ASGD's documented algorithm): SGD with a decaying rate
eta_t = lr / (1 + lambd lr t)^alpha and a running average of the iterates
('ax') that starts averaging after t0 steps. State per parameter: 'step',
'eta', 'mu' (0-d tensors) and 'ax'."""
from .. import _C
from ._common import _check_lr, _restore_state, GROUP_FLAGS, _scalar_dtype, _step_body, _value
from .optimizer import Optimizer, _check_hyper

__all__ = ["ASGD"]


class ASGD(Optimizer):
    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0, foreach=None,
                 maximize=False, differentiable=False, capturable=False):
        _check_lr(lr)
        _check_hyper(lambd >= 0.0, "lambd value", lambd)
        _check_hyper(alpha >= 0.0, "alpha value", alpha)
        _check_hyper(weight_decay >= 0.0, "weight_decay value", weight_decay)
        defaults = dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay, foreach=foreach,
                        maximize=maximize, differentiable=differentiable, capturable=capturable)
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        _restore_state(self, GROUP_FLAGS, step_keys=("step", "eta", "mu"))

    @_step_body
    def step(self):
        for group in self.param_groups:
            lr, lambd, alpha, t0 = _value(group["lr"]), group["lambd"], group["alpha"], group["t0"]
            wd = group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    dt, dev = _scalar_dtype(), p.device  # (torch keeps these on the parameter's device)
                    state["step"] = _C.tensor(0.0, dtype=dt, device=dev)
                    state["eta"] = _C.tensor(float(lr), dtype=dt, device=dev)
                    state["mu"] = _C.tensor(1.0, dtype=dt, device=dev)
                    state["ax"] = _C.zeros_like(p)
                grad = -p.grad if group["maximize"] else p.grad
                eta, mu, ax = state["eta"], state["mu"], state["ax"]
                state["step"] += 1
                if wd != 0:
                    grad = grad.add(p, alpha=wd)
                eta_value = eta.item()
                p.mul_(1 - lambd * eta_value)  # decay term
                p.add_(grad, alpha=-eta_value)
                if mu.item() != 1:
                    ax.add_(p.sub(ax).mul_(mu))
                else:
                    ax.copy_(p)
                step = state["step"].item()
                eta.fill_(lr / ((1 + lambd * lr * step) ** alpha))
                mu.fill_(1 / max(1, step - t0))
