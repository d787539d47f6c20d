"""Tensors from other objects: asarray (sharing memory with tensors, NumPy
arrays and buffers unless a copy is asked for) and frombuffer (a 1-D view of
any object with the buffer protocol)."""
import warnings

from . import _C
from ._checks import _check_cpu, _dt, _type_name


def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad=False):
    """A tensor from obj, sharing memory with tensors/NumPy arrays when copy is not True."""
    _check_cpu(device)
    result = None
    if isinstance(obj, _C.Tensor):
        result = obj
    elif isinstance(obj, _C.UntypedStorage):  # its bytes, shared, as a 1-D uint8 tensor (torch's reading)
        result = _C.empty(0, dtype=_dt("uint8"), device=obj.device).set_(obj)
    else:
        try:
            import numpy as np
        except ImportError:  # pragma: no cover
            np = None
        if np is not None and isinstance(obj, np.ndarray) and obj.dtype != np.dtype(object):
            try:
                result = _C.from_numpy(obj)
            except (TypeError, ValueError):
                result = None
        elif np is not None and isinstance(obj, np.generic):
            result = None
    if result is not None:
        if dtype is not None and result.dtype != dtype:
            if copy is False:
                raise ValueError(f"can't alias tensor with dtype '{_type_name(result.dtype)}' "
                                 f"into dtype '{_type_name(dtype)}'.")
            result = result.to(dtype)
        elif copy:
            result = result.clone()
    else:
        if copy is False:
            raise ValueError(f"can't alias {type(obj).__name__} into a tensor without copying "
                             "(copy=False)")
        if isinstance(obj, (bytes, bytearray, memoryview)):  # buffers are shared, as torch
            result = frombuffer(obj, dtype=_dt("uint8") if dtype is None else dtype)
        else:
            result = _C.tensor(obj, dtype=dtype)
    if requires_grad:
        if result is obj:
            result.requires_grad_(True)
        else:
            result = result.detach().requires_grad_(True) if result.grad_fn is not None \
                else result.requires_grad_(True)
    return result


_warned_read_only_buffer = False


def frombuffer(buffer, *, dtype, count=-1, offset=0, requires_grad=False):
    """A 1-D tensor viewing an object's buffer (shares memory; no copy)."""
    import numpy as np
    global _warned_read_only_buffer
    try:
        view = memoryview(buffer)
    except TypeError:
        raise ValueError("object does not implement Python buffer protocol.") from None
    length = view.nbytes
    elem = _C.empty((0,), dtype=dtype).element_size()
    if length <= 0 or count == 0:
        raise ValueError(f"both buffer length ({length}) and count ({count}) must not be 0")
    if offset < 0 or offset >= length:
        raise ValueError(f"offset ({offset} bytes) must be non-negative and no greater than "
                         f"buffer length ({length} bytes) minus 1")
    if count < 0:
        if (length - offset) % elem:
            raise ValueError(f"buffer length ({length - offset} bytes) after offset ({offset} "
                             f"bytes) must be a multiple of element size ({elem})")
        count = (length - offset) // elem
    elif offset + count * elem > length:
        raise ValueError(f"requested buffer length ({count} * {elem} bytes) after offset "
                         f"({offset} bytes) must not be greater than actual buffer length "
                         f"({length} bytes)")
    raw = np.frombuffer(view.cast("B") if view.format != "B" or view.ndim != 1 else view,
                        dtype=np.uint8, count=count * elem, offset=offset)
    if not raw.flags.writeable:
        if not _warned_read_only_buffer:
            warnings.warn("The given buffer is not writable, and ember does not support "
                          "non-writable tensors. This means you can write to the underlying "
                          "(supposedly non-writable) buffer using the tensor. You may want to "
                          "copy the buffer to protect its data or make it writable before "
                          "converting it to a tensor.", UserWarning, stacklevel=2)
            _warned_read_only_buffer = True
        raw = raw.view()
        raw.flags.writeable = False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = _C.from_numpy(raw)
    if dtype != _dt("uint8"):
        result = result.view(dtype)
    if requires_grad:
        result.requires_grad_(True)
    return result


__all__ = ["asarray", "frombuffer"]
