"""Adamax (torch.optim.Adamax's documented algorithm): Adam with the infinity
norm, exp_inf = max(beta2 * exp_inf, |g| + eps). State per parameter:
'step', 'exp_avg', 'exp_inf'."""
from .. import _C
from ._common import _check_lr, _new_step, _restore_state, GROUP_FLAGS, _step_body, _value
from .optimizer import Optimizer, _check_hyper
from .radam import _check_betas

__all__ = ["Adamax"]


class Adamax(Optimizer):
    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, foreach=None, *,
                 maximize=False, differentiable=False, capturable=False):
        _check_lr(lr)
        _check_hyper(eps >= 0.0, "epsilon value", eps)
        _check_betas(betas)
        _check_hyper(weight_decay >= 0.0, "weight_decay value", weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, foreach=foreach,
                        maximize=maximize, differentiable=differentiable, capturable=capturable)
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        _restore_state(self, GROUP_FLAGS)

    @_step_body
    def step(self):
        for group in self.param_groups:
            lr, eps, wd = _value(group["lr"]), group["eps"], group["weight_decay"]
            beta1, beta2 = (_value(b) for b in group["betas"])
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = _new_step()
                    state["exp_avg"] = _C.zeros_like(p)
                    state["exp_inf"] = _C.zeros_like(p)
                grad = -p.grad if group["maximize"] else p.grad
                exp_avg, exp_inf = state["exp_avg"], state["exp_inf"]
                state["step"] += 1
                if wd != 0:
                    grad = grad.add(p, alpha=wd)
                exp_avg.lerp_(grad, 1 - beta1)
                _C.maximum(exp_inf.mul_(beta2), grad.abs().add_(eps), out=exp_inf)
                clr = lr / (1 - beta1 ** state["step"].item())
                p.addcdiv_(exp_avg, exp_inf, value=-clr)
