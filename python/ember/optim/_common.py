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
