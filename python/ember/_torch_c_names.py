"""Names torch code reads off torch._C, answered by ember's Python layer and
set on ember._C (so `torch._C.X` finds them under ember.as_torch):

- _log_api_usage_once(event): torch's usage logging; ember logs nothing.
- _TensorMeta: the metaclass of Tensor (subclasses' metaclasses derive from it).
- _nn._parse_to(*args, **kwargs): Tensor.to's arguments parsed as torch does,
  (device, dtype, non_blocking, memory_format).
- PyTorchFileReader: records of a torch zip checkpoint (also torch.PyTorchFileReader).
- DispatchKey / DispatchKeySet: torch's dispatch key names and sets of them, as
  values (torchvision builds a set of the autocast keys at import). ember's
  dispatcher has its own keys and takes no torch key sets, so nothing here
  changes dispatch (there is no _ExcludeDispatchKeyGuard).
"""
import enum
import sys
import types
import zipfile

from . import _C


def _log_api_usage_once(event):
    """torch's API-usage logging hook: ember logs nothing."""
    if not isinstance(event, str):
        raise TypeError(f"_log_api_usage_once(): argument 'event' must be str, not {type(event).__name__}")


def _parse_to(*args, **kwargs):
    """(device, dtype, non_blocking, memory_format) from to()'s forms:
    to(device, dtype, non_blocking, copy), to(dtype, ...), to(tensor, ...), keywords."""
    memory_format = kwargs.get("memory_format")
    if memory_format is not None and not isinstance(memory_format, _C.memory_format):
        raise TypeError(f"to(): argument 'memory_format' must be torch.memory_format, not "
                        f"{type(memory_format).__name__}")
    from .nn.modules.module import _parse_to as parse
    device, dtype, non_blocking = parse(*args, **kwargs)
    return device, dtype, non_blocking, memory_format


_nn = types.ModuleType("ember._C._nn", "torch._C._nn: the argument parsers nn code calls")
_nn._parse_to = _parse_to


class PyTorchFileReader:
    """The records of a torch zip checkpoint (what torch.save writes), by
    name relative to the archive's top folder ("data.pkl", "data/0", ...)."""

    def __init__(self, file):
        try:
            self._zip = zipfile.ZipFile(file if isinstance(file, str) or hasattr(file, "read") else str(file))
        except (zipfile.BadZipFile, OSError) as e:
            raise RuntimeError(f"PytorchStreamReader failed reading zip archive: {e}") from None
        names = self._zip.namelist()
        if not names:
            raise RuntimeError("PytorchStreamReader failed reading zip archive: it holds no records")
        self._prefix = names[0].split("/")[0] + "/"
        self._records = {n[len(self._prefix):]: n for n in names if n.startswith(self._prefix)}

    def _name(self, name):
        if name not in self._records:
            raise RuntimeError(f"PytorchStreamReader failed locating file {name}: file not found")
        return self._records[name]

    def has_record(self, name):
        return name in self._records

    def get_all_records(self):
        return list(self._records)

    def get_record(self, name):
        """The record's bytes."""
        return self._zip.read(self._name(name))

    def get_record_offset(self, name):
        """Where the record's bytes start in the file (records are stored uncompressed)."""
        from .serialization import _record_data_offset
        return _record_data_offset(self._zip, self._zip.getinfo(self._name(name)))

    def get_storage_from_record(self, name, numel, dtype):
        """A 1-D tensor of numel elements of dtype holding the record's bytes."""
        import numpy as np
        data = self.get_record(name)
        itemsize = _C.empty(0, dtype=dtype).element_size()
        if len(data) < numel * itemsize:
            raise RuntimeError(f"PytorchStreamReader: record {name} holds {len(data)} bytes, fewer than "
                               f"{numel} elements of {dtype}")
        raw = _C.from_numpy(np.frombuffer(data, dtype=np.uint8, count=numel * itemsize).copy())
        return raw.view(dtype)

    def serialization_id(self):
        return self.get_record(".data/serialization_id").decode() if self.has_record(".data/serialization_id") \
            else ""


DispatchKey = enum.IntEnum("DispatchKey", [
    "Undefined", "CPU", "CUDA", "XPU", "MPS", "Meta", "HIP", "SparseCPU", "SparseCUDA", "QuantizedCPU",
    "BackendSelect", "Python", "Functionalize", "ADInplaceOrView", "AutogradOther", "AutogradCPU", "AutogradCUDA",
    "AutogradXPU", "AutogradMPS", "AutogradMeta", "AutocastCPU", "AutocastCUDA", "AutocastXPU", "AutocastMPS",
    "FuncTorchBatched", "BatchedNestedTensor", "PythonTLSSnapshot", "PreDispatch", "PythonDispatcher",
    "CompositeImplicitAutograd", "CompositeExplicitAutograd", "Autograd", "PrivateUse1"], start=0)
DispatchKey.__module__ = "torch._C"


class DispatchKeySet:
    """A set of DispatchKeys (|, &, -, has, iteration); a value only."""
    __slots__ = ("_keys",)

    def __init__(self, *keys):
        found = set()
        for k in keys:
            if isinstance(k, DispatchKeySet):
                found |= k._keys
            elif isinstance(k, DispatchKey):
                if k is not DispatchKey.Undefined:
                    found.add(k)
            else:
                raise TypeError(f"DispatchKeySet(): expected DispatchKey, got {type(k).__name__}")
        self._keys = frozenset(found)

    def __or__(self, other):
        return DispatchKeySet(self, other)

    def __and__(self, other):
        out = DispatchKeySet()
        out._keys = self._keys & DispatchKeySet(other)._keys
        return out

    def __sub__(self, other):
        out = DispatchKeySet()
        out._keys = self._keys - DispatchKeySet(other)._keys
        return out

    def __eq__(self, other):
        return isinstance(other, DispatchKeySet) and self._keys == other._keys

    def __hash__(self):
        return hash(self._keys)

    def has(self, key):
        return key in self._keys

    def empty(self):
        return not self._keys

    def __iter__(self):
        return iter(sorted(self._keys))

    def __repr__(self):
        return "DispatchKeySet(" + ", ".join(k.name for k in self) + ")"


def attach():
    _C._log_api_usage_once = _log_api_usage_once
    _C._TensorMeta = type(_C.Tensor)
    _C._nn = _nn
    _C.PyTorchFileReader = PyTorchFileReader
    _C.DispatchKey = DispatchKey
    _C.DispatchKeySet = DispatchKeySet
    sys.modules.setdefault("ember._C._nn", _nn)
    from . import overrides  # torch._C's names for the __torch_function__ state
    _C.DisableTorchFunctionSubclass = overrides.DisableTorchFunctionSubclass
    _C.DisableTorchFunction = overrides.DisableTorchFunction
    _C._is_torch_function_enabled = overrides._is_torch_function_enabled
    _C._is_torch_function_mode_enabled = overrides._is_torch_function_mode_enabled
    _C._len_torch_function_stack = overrides._len_torch_function_stack
    _C._push_on_torch_function_stack = overrides._push_mode
    _C._pop_torch_function_stack = overrides._pop_mode
    _C._get_function_stack_at = lambda i: overrides._mode_stack[i]


attach()
