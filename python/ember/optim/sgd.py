"""SGD with momentum, dampening, Nesterov momentum and weight decay
(torch.optim.SGD's documented algorithm). State: 'momentum_buffer' (only
when momentum != 0), the first one a copy of the first gradient."""
from ._common import _step_body, _value
from .optimizer import Optimizer, _check_hyper

__all__ = ["SGD"]


class SGD(Optimizer):
    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, *,
                 maximize=False, foreach=None, differentiable=False, fused=None):
        _check_hyper(_value(lr) >= 0.0, "learning rate", lr)
        _check_hyper(momentum >= 0.0, "momentum value", momentum)
        _check_hyper(weight_decay >= 0.0, "weight_decay value", weight_decay)
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, maximize=maximize, foreach=foreach, differentiable=differentiable,
                        fused=fused)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, defaults)
        if fused and differentiable:
            raise RuntimeError("`fused` does not support `differentiable`")
        if fused and foreach:
            raise RuntimeError("`fused` and `foreach` cannot be `True` together.")

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            for key, value in (("nesterov", False), ("maximize", False), ("foreach", None),
                               ("differentiable", False), ("fused", False)):
                group.setdefault(key, value)

    @_step_body
    def step(self):
        for group in self.param_groups:
            lr, wd, momentum = _value(group["lr"]), group["weight_decay"], group["momentum"]
            dampening, nesterov = group["dampening"], group["nesterov"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = -p.grad if group["maximize"] else p.grad
                if wd != 0:
                    grad = grad.add(p, alpha=wd)
                if momentum != 0:
                    state = self.state[p]
                    buf = state.get("momentum_buffer")
                    if buf is None:
                        buf = grad.detach().clone()
                        state["momentum_buffer"] = buf
                    else:
                        buf.mul_(momentum).add_(grad, alpha=1 - dampening)
                    grad = grad.add(buf, alpha=momentum) if nesterov else buf
                p.add_(grad, alpha=-lr)
