"""Adagrad (torch.optim.Adagrad's documented algorithm): a running sum of
squared gradients ('sum', started at initial_accumulator_value when the
optimizer is made) scales each step; the rate decays as lr / (1 + (t-1) lr_decay)."""
from .. import _C
from ._common import _new_step, _step_body, _value
from .optimizer import Optimizer, _check_hyper

__all__ = ["Adagrad"]


class Adagrad(Optimizer):
    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10,
                 foreach=None, *, maximize=False, differentiable=False, fused=None):
        _check_hyper(_value(lr) >= 0.0, "learning rate", lr)
        _check_hyper(lr_decay >= 0.0, "lr_decay value", lr_decay)
        _check_hyper(weight_decay >= 0.0, "weight_decay value", weight_decay)
        _check_hyper(initial_accumulator_value >= 0.0, "initial_accumulator_value value",
                     initial_accumulator_value)
        _check_hyper(eps >= 0.0, "epsilon value", eps)
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, foreach=foreach, maximize=maximize,
                        differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)
        if fused and differentiable:
            raise RuntimeError("`fused` does not support `differentiable`")
        if fused and foreach:
            raise RuntimeError("`fused` and `foreach` cannot be `True` together.")
        # torch makes the state here, not at the first step
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                state["step"] = _new_step()
                state["sum"] = _C.full_like(p, initial_accumulator_value)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            for key, value in (("foreach", None), ("maximize", False), ("differentiable", False),
                               ("fused", None)):
                group.setdefault(key, value)
            for p in group["params"]:
                st = self.state.get(p, {})
                if st and not isinstance(st["step"], _C.Tensor):
                    st["step"] = _C.tensor(float(st["step"]), dtype=_new_step().dtype)

    def share_memory(self):
        pass  # one process: nothing to share

    @_step_body
    def step(self):
        for group in self.param_groups:
            lr, lr_decay, wd, eps = _value(group["lr"]), group["lr_decay"], group["weight_decay"], group["eps"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                state["step"] += 1
                step = state["step"].item()
                grad = -p.grad if group["maximize"] else p.grad
                if wd != 0:
                    grad = grad.add(p, alpha=wd)
                clr = lr / (1 + (step - 1) * lr_decay)
                state["sum"].addcmul_(grad, grad, value=1)
                std = state["sum"].sqrt().add_(eps)
                p.addcdiv_(grad, std, value=-clr)
