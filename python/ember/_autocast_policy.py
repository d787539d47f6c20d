"""autocast's policies for the torch functions ember writes in Python
(Note [autocast] in csrc/ops/autocast.c does the op table's rows): torch casts
at its op's boundary, so a composite must cast at its own entry rather than
let each inner op apply its own policy (cdist is float32 in torch; its inner
matmul would otherwise run in bfloat16).

    @fp32_policy     floating inputs cast to float32, run with autocast off
    @lower_policy    floating inputs cast to autocast's dtype, run with autocast off
"""
import functools

from . import _C

_LOW = None


def _state(args, kwargs):
    """(enabled, dtype, device type) for the call's first tensor, or None."""
    for a in (*args, *kwargs.values()):
        t = a if isinstance(a, _C.Tensor) else (a[0] if isinstance(a, (list, tuple)) and a and
                                                  isinstance(a[0], _C.Tensor) else None)
        if t is not None:
            dev = t.device.type
            if dev not in ("cpu", "cuda"):
                return None
            on, dt = _C._get_autocast(dev)
            return (dev, dt) if on else None
    return None


def _cast(a, dtype):
    if isinstance(a, _C.Tensor):
        return a.to(dtype) if a.is_floating_point() and a.dtype != dtype else a
    if isinstance(a, (list, tuple)) and a and all(isinstance(t, _C.Tensor) for t in a):
        return type(a)(_cast(t, dtype) for t in a)
    return a


def _policy(target):
    def decorate(fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            state = _state(args, kwargs)
            if state is None:
                return fn(*args, **kwargs)
            dev, low = state
            dtype = _C._dtypes["float32"] if target == "fp32" else low
            args = tuple(_cast(a, dtype) for a in args)
            kwargs = {k: _cast(v, dtype) for k, v in kwargs.items()}
            prev = _C._set_autocast(dev, False, low)
            try:
                return fn(*args, **kwargs)
            finally:
                _C._set_autocast(dev, *prev)
        return wrapped
    return decorate


fp32_policy = _policy("fp32")
lower_policy = _policy("lower")
