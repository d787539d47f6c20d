"""NAdam (torch.optim.NAdam's documented algorithm): Adam with Nesterov
momentum whose coefficient mu_t = beta1 (1 - 0.5 * 0.96^(t momentum_decay))
warms up; L2 or decoupled weight decay. State per parameter: 'step',
'mu_product' (the running product of the mu_t, a 0-d tensor), 'exp_avg',
'exp_avg_sq'."""
from .. import _C
from ._common import _check_lr, _new_step, _restore_state, GROUP_FLAGS, _scalar_dtype, _step_body, _value
from .optimizer import Optimizer, _check_hyper
from .radam import _check_betas

__all__ = ["NAdam"]


class NAdam(Optimizer):
    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, momentum_decay=4e-3,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False):
        _check_lr(lr)
        _check_hyper(eps >= 0.0, "epsilon value", eps)
        _check_betas(betas)
        _check_hyper(weight_decay >= 0.0, "weight_decay value", weight_decay)
        _check_hyper(momentum_decay >= 0.0, "momentum_decay value", momentum_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, momentum_decay=momentum_decay,
                        decoupled_weight_decay=decoupled_weight_decay, maximize=maximize, foreach=foreach,
                        capturable=capturable, differentiable=differentiable)
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        _restore_state(self, GROUP_FLAGS + (("decoupled_weight_decay", False),), step_keys=("step", "mu_product"))

    @_step_body
    def step(self):
        for group in self.param_groups:
            lr = _value(group["lr"])
            beta1, beta2 = (_value(b) for b in group["betas"])
            wd, eps, momentum_decay = group["weight_decay"], group["eps"], group["momentum_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = _new_step()
                    state["mu_product"] = _C.tensor(1.0, dtype=_scalar_dtype())
                    state["exp_avg"] = _C.zeros_like(p)
                    state["exp_avg_sq"] = _C.zeros_like(p)
                grad = -p.grad if group["maximize"] else p.grad
                exp_avg, exp_avg_sq, mu_product = state["exp_avg"], state["exp_avg_sq"], state["mu_product"]
                state["step"] += 1
                step = state["step"].item()
                bias_correction2 = 1 - beta2 ** step
                if wd != 0:
                    if group["decoupled_weight_decay"]:
                        p.mul_(1 - lr * wd)
                    else:
                        grad = grad.add(p, alpha=wd)
                mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * momentum_decay)))
                mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * momentum_decay)))
                mu_product *= mu
                exp_avg.lerp_(grad, 1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                denom = exp_avg_sq.div(bias_correction2).sqrt().add_(eps)
                prod = mu_product.item()
                p.addcdiv_(grad, denom, value=-lr * (1.0 - mu) / (1.0 - prod))
                p.addcdiv_(exp_avg, denom, value=-lr * mu_next / (1.0 - prod * mu_next))
