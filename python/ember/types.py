"""torch.types: the type aliases torch's annotations use (for code that
imports them; nothing here changes behaviour)."""
import builtins
from typing import Any, List, Sequence, Tuple, Union

from . import _C

_bool = builtins.bool
_int = builtins.int
_float = builtins.float
_complex = builtins.complex
_dtype = _C.dtype
_device = _C.device
_size = Union[_C.Size, List[builtins.int], Tuple[builtins.int, ...]]
_layout = Any
_qscheme = Any
_dispatchkey = Union[builtins.str, Any]
_TensorOrTensors = Union[_C.Tensor, Sequence[_C.Tensor]]
SymInt = builtins.int
SymFloat = builtins.float
SymBool = builtins.bool
IntLikeType = builtins.int
FloatLikeType = builtins.float
Number = Union[builtins.int, builtins.float, builtins.bool]
Device = Union[_C.device, builtins.str, builtins.int, None]
Storage = _C.UntypedStorage
TensorOrTensors = _TensorOrTensors
PySymType = Union[builtins.int, builtins.float, builtins.bool]
FileLike = Any

__all__ = ["Number", "Device", "Storage", "SymInt", "SymFloat", "SymBool"]
