"""RAdam (torch.optim.RAdam's documented algorithm): Adam whose adaptive
term is switched on only once the variance of its estimate is tractable
(rho_t > 5), scaled by the rectification term; L2 or decoupled weight decay.
State per parameter: 'step' (0-d float32 tensor), 'exp_avg', 'exp_avg_sq'."""
from .. import _C
from ._common import _check_lr, _new_step, _restore_state, GROUP_FLAGS, _step_body, _value
from .optimizer import Optimizer, _check_hyper

__all__ = ["RAdam"]


def _check_betas(betas):
    _check_hyper(0.0 <= _value(betas[0]) < 1.0, "beta parameter at index 0", betas[0])
    _check_hyper(0.0 <= _value(betas[1]) < 1.0, "beta parameter at index 1", betas[1])


class RAdam(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, decoupled_weight_decay=False,
                 *, foreach=None, maximize=False, capturable=False, differentiable=False):
        _check_lr(lr)
        _check_hyper(eps >= 0.0, "epsilon value", eps)
        _check_betas(betas)
        _check_hyper(weight_decay >= 0.0, "weight_decay value", weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, maximize=maximize,
                        foreach=foreach, capturable=capturable, decoupled_weight_decay=decoupled_weight_decay,
                        differentiable=differentiable)
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        _restore_state(self, GROUP_FLAGS + (("decoupled_weight_decay", False),))

    @_step_body
    def step(self):
        for group in self.param_groups:
            lr = _value(group["lr"])
            beta1, beta2 = (_value(b) for b in group["betas"])
            wd, eps = group["weight_decay"], group["eps"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = _new_step()
                    state["exp_avg"] = _C.zeros_like(p)
                    state["exp_avg_sq"] = _C.zeros_like(p)
                grad = -p.grad if group["maximize"] else p.grad
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                state["step"] += 1
                step = state["step"].item()
                if wd != 0:
                    if group["decoupled_weight_decay"]:
                        p.mul_(1 - lr * wd)
                    else:
                        grad = grad.add(p, alpha=wd)
                exp_avg.lerp_(grad, 1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                bias_correction1 = 1 - beta1 ** step
                bias_correction2 = 1 - beta2 ** step
                corrected_avg = exp_avg / bias_correction1
                # length of the approximated simple moving average, and its limit
                rho_inf = 2 / (1 - beta2) - 1
                rho_t = rho_inf - 2 * step * (beta2 ** step) / bias_correction2
                if rho_t > 5.0:
                    rect = ((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
                    adaptive = (bias_correction2 ** 0.5) / exp_avg_sq.sqrt().add_(eps)
                    p.add_(corrected_avg * lr * adaptive * rect, alpha=-1.0)
                else:
                    p.add_(corrected_avg * lr, alpha=-1.0)
