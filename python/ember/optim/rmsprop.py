"""RMSprop (torch.optim.RMSprop's documented algorithm): a running mean of
squared gradients ('square_avg'), optionally centered by a running mean of
gradients ('grad_avg') and with momentum ('momentum_buffer')."""
from .. import _C
from ._common import _new_step, _step_body, _value
from .optimizer import Optimizer, _check_hyper

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        _check_hyper(_value(lr) >= 0.0, "learning rate", lr)
        _check_hyper(eps >= 0.0, "epsilon value", eps)
        _check_hyper(momentum >= 0.0, "momentum value", momentum)
        _check_hyper(weight_decay >= 0.0, "weight_decay value", weight_decay)
        _check_hyper(alpha >= 0.0, "alpha value", alpha)
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                        weight_decay=weight_decay, capturable=capturable, foreach=foreach, maximize=maximize,
                        differentiable=differentiable)
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            for key, value in (("momentum", 0), ("centered", False), ("foreach", None), ("maximize", False),
                               ("differentiable", False), ("capturable", False)):
                group.setdefault(key, value)
            for p in group["params"]:
                st = self.state.get(p, {})
                if st and not isinstance(st["step"], _C.Tensor):
                    st["step"] = _C.tensor(float(st["step"]), dtype=_new_step().dtype)

    @_step_body
    def step(self):
        for group in self.param_groups:
            lr, alpha, eps = _value(group["lr"]), group["alpha"], group["eps"]
            wd, momentum, centered = group["weight_decay"], group["momentum"], group["centered"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = _new_step()
                    state["square_avg"] = _C.zeros_like(p)
                    if momentum > 0:
                        state["momentum_buffer"] = _C.zeros_like(p)
                    if centered:
                        state["grad_avg"] = _C.zeros_like(p)
                grad = -p.grad if group["maximize"] else p.grad
                square_avg = state["square_avg"]
                state["step"] += 1
                if wd != 0:
                    grad = grad.add(p, alpha=wd)
                square_avg.mul_(alpha).addcmul_(grad, grad, value=1 - alpha)
                if centered:
                    grad_avg = state["grad_avg"]
                    grad_avg.lerp_(grad, 1 - alpha)
                    avg = square_avg.addcmul(grad_avg, grad_avg, value=-1).sqrt_()
                else:
                    avg = square_avg.sqrt()
                avg = avg.add_(eps)
                if momentum > 0:
                    buf = state["momentum_buffer"]
                    buf.mul_(momentum).addcdiv_(grad, avg)
                    p.add_(buf, alpha=-lr)
                else:
                    p.addcdiv_(grad, avg, value=-lr)
