"""Small helpers the optimizers share: the dtype of 'step' tensors and the
closure/no_grad wrapping of step()."""
import functools

from .. import _C
from ..autograd.grad_mode import enable_grad, no_grad


def _scalar_dtype():
    """torch keeps 'step' as a 0-d float32 tensor (float64 when that is the default dtype)."""
    return _C._dtypes["float64"] if _C.get_default_dtype() == _C._dtypes["float64"] else _C._dtypes["float32"]


def _new_step():
    return _C.tensor(0.0, dtype=_scalar_dtype())


def _step_body(fn):
    """step(closure=None): evaluate the closure with grad mode on, then run
    the update under no_grad (updates are not part of any graph); return the
    closure's loss."""
    @functools.wraps(fn)
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        with no_grad():
            fn(self)
        return loss
    return step


def _value(x):
    """A hyperparameter that may be a 1-element tensor, as a Python number."""
    return x.item() if isinstance(x, _C.Tensor) else x


def _check_lr(lr):
    """torch's lr check, shared by every optimizer: a 1-element tensor or a number >= 0."""
    if isinstance(lr, _C.Tensor) and lr.numel() != 1:
        raise ValueError("Tensor lr must be 1-element")
    if not 0.0 <= _value(lr):
        raise ValueError(f"Invalid learning rate: {lr}")


# the flags every optimizer's groups carry, with their defaults (for _restore_state)
GROUP_FLAGS = (("foreach", None), ("maximize", False), ("differentiable", False), ("capturable", False))


def _restore_state(optimizer, flags, step_keys=("step",)):
    """__setstate__ for optimizers saved by older versions: missing group
    flags get their defaults and Python-number 'step's become 0-d tensors."""
    for group in optimizer.param_groups:
        for key, value in flags:
            group.setdefault(key, value)
        for p in group["params"]:
            st = optimizer.state.get(p, {})
            for key in step_keys:
                if key in st and not isinstance(st[key], _C.Tensor):
                    st[key] = _C.tensor(float(st[key]), dtype=_scalar_dtype())
