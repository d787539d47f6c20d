"""Rprop (torch.optim.Rprop's documented algorithm): per-element step sizes
grown by etaplus while the gradient keeps its sign and shrunk by etaminus
when it flips (that element then skips its update), clamped to step_sizes;
only the gradient's sign is used. State per parameter: 'step', 'prev',
'step_size'."""
from .. import _C
from ._common import _check_lr, _new_step, _restore_state, GROUP_FLAGS, _step_body, _value
from .optimizer import Optimizer

__all__ = ["Rprop"]


class Rprop(Optimizer):
    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *, capturable=False,
                 foreach=None, maximize=False, differentiable=False):
        _check_lr(lr)
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        defaults = dict(lr=lr, etas=etas, step_sizes=step_sizes, foreach=foreach, maximize=maximize,
                        differentiable=differentiable, capturable=capturable)
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        _restore_state(self, GROUP_FLAGS)

    @_step_body
    def step(self):
        for group in self.param_groups:
            etaminus, etaplus = group["etas"]
            step_size_min, step_size_max = group["step_sizes"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = _new_step()
                    state["prev"] = _C.zeros_like(p)
                    state["step_size"] = _C.full_like(p.grad, _value(group["lr"]))
                grad = -p.grad if group["maximize"] else p.grad
                prev, step_size = state["prev"], state["step_size"]
                state["step"] += 1
                sign = grad.mul(prev).sign()
                flipped = sign.lt(0)
                sign[sign.gt(0)] = etaplus  # the sign tensor becomes the step-size factor
                sign[flipped] = etaminus
                sign[sign.eq(0)] = 1
                step_size.mul_(sign).clamp_(step_size_min, step_size_max)
                # where the sign flipped, forget the gradient: no step now, and no flip test next time
                grad = grad.clone()
                grad[flipped] = 0
                p.addcmul_(grad.sign(), step_size, value=-1)
                prev.copy_(grad)
