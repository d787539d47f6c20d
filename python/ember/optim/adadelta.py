"""Adadelta (torch.optim.Adadelta's documented algorithm): steps scaled by
RMS(past updates) / RMS(gradients), both running means with factor rho.
State per parameter: 'step', 'square_avg', 'acc_delta'."""
from .. import _C
from ._common import _check_lr, _new_step, _restore_state, GROUP_FLAGS, _step_body, _value
from .optimizer import Optimizer, _check_hyper

__all__ = ["Adadelta"]


class Adadelta(Optimizer):
    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *, capturable=False,
                 maximize=False, differentiable=False):
        _check_lr(lr)
        _check_hyper(0.0 <= rho <= 1.0, "rho value", rho)
        _check_hyper(eps >= 0.0, "epsilon value", eps)
        _check_hyper(weight_decay >= 0.0, "weight_decay value", weight_decay)
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize,
                        capturable=capturable, foreach=foreach, differentiable=differentiable)
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        _restore_state(self, GROUP_FLAGS)

    @_step_body
    def step(self):
        for group in self.param_groups:
            lr, rho, eps, wd = _value(group["lr"]), group["rho"], group["eps"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = _new_step()
                    state["square_avg"] = _C.zeros_like(p)
                    state["acc_delta"] = _C.zeros_like(p)
                state["step"] += 1
                grad = -p.grad if group["maximize"] else p.grad
                if wd != 0:
                    grad = grad.add(p, alpha=wd)
                square_avg, acc_delta = state["square_avg"], state["acc_delta"]
                square_avg.mul_(rho).addcmul_(grad, grad, value=1 - rho)
                std = square_avg.add(eps).sqrt_()
                delta = acc_delta.add(eps).sqrt_().div_(std).mul_(grad)
                acc_delta.mul_(rho).addcmul_(delta, delta, value=1 - rho)
                p.add_(delta, alpha=-lr)
