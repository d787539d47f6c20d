"""torch._check and its family: assert a condition the program relies on,
raising the given error type with a lazily built message when it fails
(torch's compiler also reads them as hints; eagerly they are plain checks)."""
from . import _C

__all__ = ["_check", "_check_with", "_check_index", "_check_value", "_check_type", "_check_not_implemented",
           "_check_tensor_all", "_check_tensor_all_with"]


def _message(message, default):
    if message is None:
        return default
    if not callable(message):
        raise TypeError(f"the message of a failed check must be a callable returning a str, got "
                        f"{type(message).__name__}")
    return str(message())


def _check_with(error_type, cond, message=None):
    if not isinstance(cond, bool):  # as torch: a tensor condition goes to _check_tensor_all
        raise TypeError(f"cond must be a bool, but got {type(cond)}")
    if cond:
        return
    raise error_type(_message(message, f"Expected cond to be True, but got False. (Could this error message "
                                       f"be improved? If so, please report an enhancement request to ember.)"))


def _check(cond, message=None):
    _check_with(RuntimeError, cond, message)


def _check_index(cond, message=None):
    _check_with(IndexError, cond, message)


def _check_value(cond, message=None):
    _check_with(ValueError, cond, message)


def _check_type(cond, message=None):
    _check_with(TypeError, cond, message)


def _check_not_implemented(cond, message=None):
    _check_with(NotImplementedError, cond, message)


def _check_tensor_all_with(error_type, cond, message=None):
    if not isinstance(cond, _C.Tensor) or cond.dtype is not _C._dtypes["bool"]:
        raise TypeError(f"cond must be a tensor with dtype ember.bool, got {getattr(cond, 'dtype', type(cond))}")
    _check_with(error_type, bool(cond.all().item()), message)


def _check_tensor_all(cond, message=None):
    _check_tensor_all_with(RuntimeError, cond, message)


def _assert(condition, message):
    """torch._assert: Python's assert as a function (symbolic tracers keep it;
    ember has none). A one-element tensor condition is read as a bool."""
    assert condition, message
