"""ember.save / ember.load in PyTorch's zip checkpoint format.

A checkpoint is an uncompressed zip archive whose records all sit under one
folder (`<archive>/`):

    data.pkl              the pickled object; every tensor is written as a call
                          of torch._utils._rebuild_tensor_v2 whose storage is a
                          persistent id ('storage', torch.<Dtype>Storage, key,
                          location, numel)
    .format_version       "1"
    .storage_alignment    "64": each record's bytes start at a multiple of 64
    byteorder             "little"
    data/<key>            the raw bytes of one storage (numel * itemsize)
    version               "3\\n"
    .data/serialization_id

Files move both ways: ember writes the names torch reads (torch.FloatStorage,
torch._utils._rebuild_tensor_v2, torch.float32, ...) and maps them back to
ember objects on load. Loading is safe by default (weights_only=True): the
unpickler only hands out the few globals needed to rebuild tensors and plain
containers, and refuses any other (os.system, builtins.eval, ...) before it
could be called.
"""
import collections
import io
import os
import pickle
import struct
import zlib

from ._lazy import numpy as np

from . import _C

__all__ = ["save", "load", "add_safe_globals", "get_safe_globals", "clear_safe_globals", "safe_globals"]

# -- dtype tables ---------------------------------------------------------------
# torch's legacy typed-storage class name for each ember dtype.
_STORAGE_NAME = {
    "bool": "BoolStorage", "uint8": "ByteStorage", "int8": "CharStorage", "int16": "ShortStorage",
    "int32": "IntStorage", "int64": "LongStorage", "float16": "HalfStorage",
    "bfloat16": "BFloat16Storage", "float32": "FloatStorage", "float64": "DoubleStorage",
    "complex64": "ComplexFloatStorage", "complex128": "ComplexDoubleStorage",
}
_STORAGE_DTYPE = {v: k for k, v in _STORAGE_NAME.items()}
# dtypes torch has no typed-storage class for: their tensors are pickled as
# _rebuild_tensor_v3(UntypedStorage of bytes, ..., dtype)
_UNTYPED_STORAGE_DTYPES = ("uint16", "uint32", "uint64")
# torch dtype attribute names (canonical and aliases) -> ember dtype name.
_TORCH_DTYPE_NAMES = {n: n for n in (*_STORAGE_NAME, *_UNTYPED_STORAGE_DTYPES)}
_TORCH_DTYPE_NAMES.update({"float": "float32", "double": "float64", "half": "float16",
                           "long": "int64", "int": "int32", "short": "int16",
                           "cfloat": "complex64", "cdouble": "complex128"})

_ALIGNMENT = 64  # torch's record alignment (.storage_alignment)
_ZIP64_SIZE = 0xFFFFFFFF  # sizes/offsets from here on need ZIP64 fields
_ZIP64_COUNT = 0xFFFF  # as do this many records


def _dtype_name(dtype):
    return repr(dtype).split(".")[-1]


# -- zip writer -----------------------------------------------------------------
class _ZipWriter:
    """Writes an uncompressed zip, one record at a time, sequentially (the
    target need not be seekable). Each record's data starts at a multiple of
    64 bytes: the local header carries a padding extra field ("FB" + 'Z's),
    as torch's writer does, so storages can be memory-mapped in place.
    Switches to ZIP64 fields when sizes or offsets pass 4 GiB."""

    _DOS_DATE = (0 << 9) | (1 << 5) | 1  # 1980-01-01: files are byte-for-byte reproducible

    def __init__(self, fp, archive_name):
        self.fp = fp
        self.prefix = archive_name
        self.offset = 0
        self.entries = []  # (name bytes, crc, size, header offset)

    def _write(self, data):
        self.fp.write(data)
        self.offset += memoryview(data).nbytes

    def write_record(self, name, data):
        name_b = f"{self.prefix}/{name}".encode("utf-8")
        mv = memoryview(data).cast("B")
        size = mv.nbytes
        crc = zlib.crc32(mv)
        zip64 = size >= _ZIP64_SIZE
        extra64 = struct.pack("<HHQQ", 1, 16, size, size) if zip64 else b""
        data_start = self.offset + 30 + len(name_b) + len(extra64) + 4
        pad = -data_start % _ALIGNMENT
        extra = extra64 + struct.pack("<HH", 0x4246, pad) + b"Z" * pad
        small = 0xFFFFFFFF if zip64 else size
        header = struct.pack("<IHHHHHIIIHH", 0x04034B50, 45 if zip64 else 20, 0, 0, 0,
                             self._DOS_DATE, crc, small, small, len(name_b), len(extra))
        self.entries.append((name_b, crc, size, self.offset))
        self._write(header + name_b + extra)
        if size:
            self._write(mv)

    def finish(self):
        cd_start = self.offset
        for name_b, crc, size, off in self.entries:
            zip64 = size >= _ZIP64_SIZE or off >= _ZIP64_SIZE
            extra = struct.pack("<HHQQQ", 1, 24, size, size, off) if zip64 else b""
            small, small_off = (0xFFFFFFFF, 0xFFFFFFFF) if zip64 else (size, off)
            self._write(struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 45 if zip64 else 20,
                                    45 if zip64 else 20, 0, 0, 0, self._DOS_DATE, crc, small, small,
                                    len(name_b), len(extra), 0, 0, 0, 0, small_off)
                        + name_b + extra)
        cd_size = self.offset - cd_start
        n = len(self.entries)
        if n >= _ZIP64_COUNT or cd_start >= _ZIP64_SIZE or cd_size >= _ZIP64_SIZE:
            eocd64 = self.offset
            self._write(struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, n, n, cd_size, cd_start))
            self._write(struct.pack("<IIQI", 0x07064B50, 0, eocd64, 1))
            self._write(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF,
                                    0xFFFFFFFF, 0xFFFFFFFF, 0))
        else:
            self._write(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, n, n, cd_size, cd_start, 0))


# -- save -----------------------------------------------------------------------
class _TorchGlobal:
    """A name the pickle refers to as GLOBAL '<module> <name>' (a torch name,
    written without importing torch)."""
    _cache = {}

    def __new__(cls, module, name):
        key = (module, name)
        if key not in cls._cache:
            obj = super().__new__(cls)
            obj.module, obj.name = module, name
            cls._cache[key] = obj
        return cls._cache[key]

    def __call__(self, *args):  # pickle's save_reduce wants a callable; it is never called
        raise TypeError(f"{self.module}.{self.name} is a name written into checkpoints, not a function")


class _StorageRef:
    """Stands for a tensor's storage inside data.pkl; pickled as a persistent id."""
    __slots__ = ("key", "dtype", "numel", "location")

    def __init__(self, key, dtype, numel, location="cpu"):
        self.key, self.dtype, self.numel, self.location = key, dtype, numel, location


def _storage_bytes(t, numel):
    """The whole storage under tensor `t` (numel elements of t's dtype) as a
    uint8 NumPy array viewing ember's memory (no copy)."""
    if numel == 0:
        return np.zeros(0, dtype=np.uint8)
    full = t.detach().as_strided((numel,), (1,), 0).view(_C._dtypes["uint8"])
    return (full.cpu() if full.device.type != "cpu" else full).numpy()


class _Pickler(pickle._Pickler):
    """The pure-Python pickler, because it lets us write GLOBAL opcodes for
    torch's names without importing torch (the C pickler checks each global
    by importing it)."""

    dispatch = pickle._Pickler.dispatch.copy()

    def __init__(self, file, protocol):
        super().__init__(file, protocol)
        self.storages = {}  # id(EmStorage) -> (storage object, _StorageRef, tensor, nbytes)

    def _save_torch_global(self, obj):
        self.write(pickle.GLOBAL + f"{obj.module}\n{obj.name}\n".encode("utf-8"))
        self.memoize(obj)

    dispatch[_TorchGlobal] = _save_torch_global

    def _save_dtype(self, obj):
        self.save(_TorchGlobal("torch", _dtype_name(obj)))

    dispatch[_C.dtype] = _save_dtype

    def persistent_id(self, obj):
        if type(obj) is _StorageRef:
            if _dtype_name(obj.dtype) in _UNTYPED_STORAGE_DTYPES:  # its size in bytes
                return ("storage", _TorchGlobal("torch.storage", "UntypedStorage"), obj.key, obj.location,
                        obj.numel * obj.dtype.itemsize)
            storage_type = _TorchGlobal("torch", _STORAGE_NAME[_dtype_name(obj.dtype)])
            return ("storage", storage_type, obj.key, obj.location, obj.numel)
        return None

    def _storage_ref(self, t):
        storage = t.untyped_storage()
        entry = self.storages.get(id(storage))
        if entry is None:
            nbytes = storage.nbytes()
            isz = t.element_size()
            ref = _StorageRef(str(len(self.storages)), t.dtype, nbytes // isz, str(t.device))
            entry = self.storages[id(storage)] = (storage, ref, t)  # keep storage alive until written
        elif entry[1].dtype != t.dtype:
            raise RuntimeError(
                "Cannot save multiple tensors or storages that view the same data as different types: "
                f"found {entry[1].dtype} and {t.dtype} views of one storage")
        return entry[1]

    def reducer_override(self, obj):
        if isinstance(obj, _C.Tensor):
            param_cls = _parameter_class()
            if param_cls is not None and isinstance(obj, param_cls):
                data = obj.detach()
                return (_TorchGlobal("torch._utils", "_rebuild_parameter"),
                        (data, obj.requires_grad, collections.OrderedDict()))
            ref = self._storage_ref(obj)
            if _dtype_name(obj.dtype) in _UNTYPED_STORAGE_DTYPES:
                return (_TorchGlobal("torch._utils", "_rebuild_tensor_v3"),
                        (ref, obj.storage_offset(), tuple(obj.shape), tuple(obj.stride()),
                         obj.requires_grad, collections.OrderedDict(), obj.dtype))
            return (_TorchGlobal("torch._utils", "_rebuild_tensor_v2"),
                    (ref, obj.storage_offset(), tuple(obj.shape), tuple(obj.stride()),
                     obj.requires_grad, collections.OrderedDict()))
        if isinstance(obj, _C.Size):
            return (_TorchGlobal("torch", "Size"), (tuple(obj),))
        if isinstance(obj, _C.device):
            args = (obj.type,) if obj.index is None else (obj.type, obj.index)
            return (_TorchGlobal("torch", "device"), args)
        if isinstance(obj, _C.UntypedStorage):
            raise TypeError("ember.save: saving a bare storage is not supported; save a tensor instead")
        return NotImplemented


def _parameter_class():
    """ember.nn.Parameter once it exists (another part of ember builds it)."""
    from . import nn
    return getattr(nn, "Parameter", None)


def _is_path(f):
    return isinstance(f, (str, os.PathLike))


def save(obj, f, pickle_module=None, pickle_protocol=2, _use_new_zipfile_serialization=True,
         _disable_byteorder_record=False):
    """Save `obj` to the path or binary file object `f` in PyTorch's zip
    checkpoint format (readable by torch.load). Writing to a path goes
    through a temporary file that replaces the target only once complete,
    so a failed save never damages an existing checkpoint."""
    if pickle_module is not None and pickle_module is not pickle:
        raise ValueError("ember.save only supports the standard pickle module")
    if not _use_new_zipfile_serialization:
        raise NotImplementedError("ember.save writes only the zip checkpoint format "
                                  "(_use_new_zipfile_serialization=False is not supported)")
    if _is_path(f):
        path = os.fspath(f)
        stem = os.path.splitext(os.path.basename(path))[0] or "archive"
        _atomic_write(path, lambda fp: _save_to(obj, fp, stem, pickle_protocol, _disable_byteorder_record))
    else:
        if not hasattr(f, "write"):
            raise TypeError(f"ember.save: expected a path or a file object with write(), got {type(f).__name__}")
        _save_to(obj, f, "archive", pickle_protocol, _disable_byteorder_record)


def _atomic_write(path, write):
    """Run write(binary file) on a new file next to `path`, flush it to disk,
    then rename it over `path`: an existing file is replaced only by a
    complete one, and a failure leaves it (and no temporary file) behind."""
    directory = os.path.dirname(os.path.abspath(path))
    while True:
        tmp = os.path.join(directory, f".{os.path.basename(path)}.{os.urandom(6).hex()}.tmp")
        try:  # mode 0o666 & ~umask, like any new file
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
            break
        except FileExistsError:
            continue
    try:
        with os.fdopen(fd, "wb") as fp:
            write(fp)
            fp.flush()
            os.fsync(fp.fileno())
        if os.path.exists(path):
            os.chmod(tmp, os.stat(path).st_mode & 0o7777)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _save_to(obj, fp, archive_name, protocol, no_byteorder):
    buf = io.BytesIO()
    pickler = _Pickler(buf, protocol)
    pickler.dump(obj)
    zw = _ZipWriter(fp, archive_name)
    zw.write_record("data.pkl", buf.getbuffer())
    zw.write_record(".format_version", b"1")
    zw.write_record(".storage_alignment", str(_ALIGNMENT).encode())
    if not no_byteorder:
        zw.write_record("byteorder", b"little")
    for storage, ref, tensor in pickler.storages.values():
        zw.write_record(f"data/{ref.key}", _storage_bytes(tensor, ref.numel))
    zw.write_record("version", b"3\n")
    zw.write_record(".data/serialization_id", ("%040d" % int.from_bytes(os.urandom(16), "little"))[:40].encode())
    zw.finish()


# -- load -----------------------------------------------------------------------
class _StorageType:
    """What GLOBAL torch.<Dtype>Storage unpickles to: only a dtype name."""
    __slots__ = ("dtype",)

    def __init__(self, dtype):
        self.dtype = dtype

    def __repr__(self):
        return f"<storage type {self.dtype}>"


class _LoadedStorage:
    """A storage read from the file: a 1-D ember tensor over all of its elements."""
    __slots__ = ("tensor", "key")

    def __init__(self, tensor, key):
        self.tensor, self.key = tensor, key


def _check_int(value, what):
    if not isinstance(value, int) or isinstance(value, bool):
        raise pickle.UnpicklingError(f"corrupt checkpoint: {what} must be an int, got {type(value).__name__}")
    return int(value)


def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad=False,
                       backward_hooks=None, metadata=None):
    if type(storage) is not _LoadedStorage:
        raise pickle.UnpicklingError(
            f"corrupt checkpoint: a tensor's storage must be a storage record, got {type(storage).__name__}")
    if not isinstance(size, (tuple, list)) or not isinstance(stride, (tuple, list)):
        raise pickle.UnpicklingError("corrupt checkpoint: a tensor's size and stride must be tuples")
    offset = _check_int(storage_offset, "storage_offset")
    size = tuple(_check_int(s, "size") for s in size)
    stride = tuple(_check_int(s, "stride") for s in stride)
    if len(size) != len(stride):
        raise RuntimeError(f"mismatch in length of strides and shape: size {list(size)}, stride {list(stride)}")
    if offset < 0 or any(s < 0 for s in size) or any(s < 0 for s in stride):
        raise RuntimeError(f"corrupt checkpoint: negative size {list(size)}, stride {list(stride)} "
                           f"or storage offset {offset}")
    base = storage.tensor
    numel = base.numel()
    if all(size):
        needed = offset + 1 + sum((n - 1) * st for n, st in zip(size, stride))
    else:
        needed = 0
    if needed > numel:
        raise RuntimeError(
            f"setStorage: sizes {list(size)}, strides {list(stride)}, storage offset {offset}, and itemsize "
            f"{base.element_size()} requiring a storage size of {needed * base.element_size()} are out of "
            f"bounds for storage of size {numel * base.element_size()} (storage record '{storage.key}')")
    # detach: a plain tensor (as torch loads it), not an autograd view of `base`
    t = base.as_strided(size, stride, offset).detach()
    if requires_grad:
        t.requires_grad_(bool(requires_grad))
    return t


def _rebuild_tensor(storage, storage_offset, size, stride):
    return _rebuild_tensor_v2(storage, storage_offset, size, stride)


def _rebuild_tensor_v3(storage, storage_offset, size, stride, requires_grad, backward_hooks, dtype, metadata=None):
    if (type(storage) is _LoadedStorage and isinstance(dtype, _C.dtype) and dtype != storage.tensor.dtype
            and storage.tensor.dtype == _C._dtypes["uint8"]):
        storage = _LoadedStorage(_bytes_as(storage.tensor, dtype, storage.key), storage.key)  # an UntypedStorage
    t = _rebuild_tensor_v2(storage, storage_offset, size, stride, False)
    if isinstance(dtype, _C.dtype) and dtype != t.dtype:
        raise RuntimeError(f"corrupt checkpoint: tensor dtype {dtype} does not match its storage's {t.dtype}")
    if requires_grad:
        t.requires_grad_(True)
    return t


def _bytes_as(raw, dtype, key):
    """A 1-D uint8 tensor of a storage's bytes, read as elements of dtype."""
    itemsize = dtype.itemsize
    if raw.numel() % itemsize:
        raise RuntimeError(f"ember.load: corrupt checkpoint: storage '{key}' of {raw.numel()} bytes "
                           f"does not hold whole {_dtype_name(dtype)} elements")
    if raw.numel() and raw.data_ptr() % itemsize:
        raw = raw.clone()  # realign a misaligned record
    return raw.view(dtype)


def _make_parameter(data, requires_grad):
    if not isinstance(data, _C.Tensor):
        raise pickle.UnpicklingError(f"corrupt checkpoint: Parameter data must be a tensor, got {type(data).__name__}")
    param_cls = _parameter_class()
    if param_cls is not None:
        return param_cls(data, bool(requires_grad))
    # ember.nn.Parameter does not exist yet: a leaf tensor with requires_grad stands in.
    t = data.detach()
    t.requires_grad_(bool(requires_grad))
    return t


def _set_state(obj, state):
    """Attribute state saved with a parameter/tensor subclass: only plain
    string-keyed entries go into the object's __dict__."""
    if isinstance(state, tuple) and len(state) == 2:
        state = {**(state[0] or {}), **(state[1] or {})}
    if not state:
        return obj
    if not isinstance(state, dict) or not all(isinstance(k, str) for k in state):
        raise pickle.UnpicklingError("corrupt checkpoint: tensor state must be a dict with string keys")
    obj.__dict__.update(state)
    return obj


def _rebuild_parameter(data, requires_grad, backward_hooks=None):
    return _make_parameter(data, requires_grad)


def _rebuild_parameter_with_state(data, requires_grad, backward_hooks, state):
    return _set_state(_make_parameter(data, requires_grad), state)


def _rebuild_from_type_v2(func, new_type, args, state):
    if func not in (_rebuild_tensor_v2, _rebuild_tensor, _rebuild_tensor_v3, _rebuild_parameter,
                    _rebuild_parameter_with_state):
        raise pickle.UnpicklingError("corrupt checkpoint: _rebuild_from_type_v2 needs a tensor rebuild function")
    if not isinstance(args, tuple):
        raise pickle.UnpicklingError("corrupt checkpoint: rebuild arguments must be a tuple")
    t = func(*args)
    if new_type is _C.Tensor or new_type is type(t):
        pass
    elif new_type is _PARAMETER_MARKER:
        t = _make_parameter(t, t.requires_grad)
    else:
        raise pickle.UnpicklingError(f"corrupt checkpoint: can't rebuild a tensor of type {new_type!r}")
    return _set_state(t, state)


class _ParameterMarker:
    """torch.nn.parameter.Parameter as a class reference when ember has none."""


_PARAMETER_MARKER = _ParameterMarker()


def _torch_global(module, name):
    """ember's stand-in for a torch name in a checkpoint, or None."""
    if module == "torch._utils":
        return {"_rebuild_tensor_v2": _rebuild_tensor_v2, "_rebuild_tensor": _rebuild_tensor,
                "_rebuild_tensor_v3": _rebuild_tensor_v3, "_rebuild_parameter": _rebuild_parameter,
                "_rebuild_parameter_with_state": _rebuild_parameter_with_state}.get(name)
    if module == "torch._tensor" and name == "_rebuild_from_type_v2":
        return _rebuild_from_type_v2
    if module == "torch.nn.parameter" and name == "Parameter":
        return _parameter_class() or _PARAMETER_MARKER
    if module in ("torch", "torch.storage") and name.endswith("Storage"):
        if name in _STORAGE_DTYPE:
            return _StorageType(_STORAGE_DTYPE[name])
        if name == "UntypedStorage":
            return _StorageType("uint8")
        raise RuntimeError(f"ember.load: the checkpoint holds a torch.{name}, whose dtype ember does not have")
    if module == "torch":
        if name in _TORCH_DTYPE_NAMES:
            return _C._dtypes[_TORCH_DTYPE_NAMES[name]]
        return {"Size": _C.Size, "device": _C.device, "Tensor": _C.Tensor}.get(name)
    return None


# Plain-container globals torch's weights_only unpickler allows too.
_SAFE_GLOBALS = {
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("collections", "Counter"): collections.Counter,
    ("builtins", "set"): set,
    ("builtins", "frozenset"): frozenset,
    ("builtins", "bytearray"): bytearray,
    ("builtins", "complex"): complex,
    ("_codecs", "encode"): __import__("codecs").encode,  # protocol 2 writes bytes as _codecs.encode(str, 'latin1')
}


# Globals the user allowed for weights_only loading (add_safe_globals / safe_globals): objects,
# or (object, "module.qualname") pairs for objects pickled under another name.
_user_safe_globals = []


def _global_name(obj):
    return f"{obj.__module__}.{obj.__qualname__}"


def add_safe_globals(safe_globals):
    """Allow these classes and functions in weights_only=True loads: the
    unpickler may then look them up, call them and set state on instances of
    the allowed classes (their __setstate__ or __dict__)."""
    if not isinstance(safe_globals, (list, tuple)):
        raise TypeError(f"add_safe_globals: expected a list of globals, got {type(safe_globals).__name__}")
    for g in safe_globals:
        if isinstance(g, tuple):
            if len(g) != 2 or not isinstance(g[1], str):
                raise TypeError(f"add_safe_globals: expected (object, 'module.name') pairs, got {g!r}")
        elif not (hasattr(g, "__module__") and hasattr(g, "__qualname__")):
            raise TypeError(f"add_safe_globals: {g!r} is not a class or function (it has no __module__/__qualname__)")
    _user_safe_globals.extend(safe_globals)


def get_safe_globals():
    return list(_user_safe_globals)


def clear_safe_globals():
    _user_safe_globals.clear()


class safe_globals:
    """Context manager: add_safe_globals(globals) inside the block only."""

    def __init__(self, safe_globals):
        self.safe_globals = safe_globals
        self._saved = None

    def __enter__(self):
        self._saved = list(_user_safe_globals)
        add_safe_globals(self.safe_globals)
        return self

    def __exit__(self, *exc):
        _user_safe_globals[:] = self._saved
        return False


def _user_allowlist():
    """{'module.qualname': object} of the user's safe globals."""
    out = {}
    for g in _user_safe_globals:
        if isinstance(g, tuple):
            out[g[1]] = g[0]
        else:
            out[_global_name(g)] = g
    return out


class _Unpickler(pickle._Unpickler):
    """Unpickles data.pkl. weights_only=True: find_class hands out only the
    allowlisted globals, and BUILD (setting state on an object) only works on
    tensors and OrderedDicts, so no function or class outside the list can
    be reached. The pure-Python unpickler is used because its opcode table
    can be restricted; data.pkl is small (tensor bytes live in other records)."""

    dispatch = pickle._Unpickler.dispatch.copy()

    def __init__(self, file, weights_only, storage_loader):
        super().__init__(file, encoding="utf-8")
        self.weights_only = weights_only
        self.storage_loader = storage_loader

    def find_class(self, module, name):
        import _compat_pickle
        if (module, name) in _compat_pickle.NAME_MAPPING:
            module, name = _compat_pickle.NAME_MAPPING[(module, name)]
        elif module in _compat_pickle.IMPORT_MAPPING:
            module = _compat_pickle.IMPORT_MAPPING[module]
        obj = _torch_global(module, name)
        if obj is not None:
            return obj
        if (module, name) in _SAFE_GLOBALS:
            return _SAFE_GLOBALS[(module, name)]
        allowed = _user_allowlist().get(f"{module}.{name}")
        if allowed is not None:
            return allowed
        if self.weights_only:
            raise pickle.UnpicklingError(
                f"Weights only load failed: ember.load(weights_only=True) refused the global "
                f"'{module}.{name}'. Only tensors, storages, dtypes, devices and plain containers can be "
                "loaded this way, and what ember.serialization.add_safe_globals allows. If (and only if) you "
                "trust the source of this file, pass "
                "weights_only=False, which lets the file run arbitrary code.")
        if module.split(".")[0] == "torch":
            raise pickle.UnpicklingError(f"ember.load: the checkpoint needs torch's '{module}.{name}', "
                                         "which ember does not provide")
        return super().find_class(module, name)

    def persistent_load(self, pid):
        # zip format: ('storage', type, key, location, numel); the legacy format adds view metadata
        if not (isinstance(pid, tuple) and len(pid) in (5, 6) and pid[0] == "storage"):
            raise pickle.UnpicklingError(f"corrupt checkpoint: unknown persistent id {pid!r:.200}")
        _, storage_type, key, location, numel = pid[:5]
        view = pid[5] if len(pid) == 6 else None
        if isinstance(storage_type, _C.dtype):
            dtype_name = _dtype_name(storage_type)
        elif type(storage_type) is _StorageType:
            dtype_name = storage_type.dtype
        else:
            raise pickle.UnpicklingError(f"corrupt checkpoint: storage type {storage_type!r:.100} is not a storage class")
        if not isinstance(key, str) or not isinstance(location, str):
            raise pickle.UnpicklingError("corrupt checkpoint: storage key and location must be strings")
        numel = _check_int(numel, "storage numel")
        if len(pid) == 6:
            return self.storage_loader(key, location, dtype_name, numel, view)
        return self.storage_loader(key, location, dtype_name, numel)

    def load_build(self):
        if not self.weights_only:
            return super().load_build()
        state = self.stack.pop()
        inst = self.stack[-1]
        if isinstance(inst, _C.Tensor):
            _set_state(inst, state)
        elif type(inst) is collections.OrderedDict and isinstance(state, dict):
            inst.__dict__.update(state)  # its attributes: a state_dict's _metadata (the items came by SETITEMS)
        elif any(type(inst) is g for g in _user_allowlist().values()):
            self.stack.append(state)  # an allowlisted class: its own __setstate__ (or __dict__), as pickle does
            super().load_build()
        else:
            raise pickle.UnpicklingError(
                f"Weights only load failed: ember.load(weights_only=True) can only set state on tensors, "
                f"OrderedDicts and classes allowed by add_safe_globals, not on {type(inst).__name__}")

    dispatch[pickle.BUILD[0]] = load_build


# -- reading the archive ----------------------------------------------------------
def _resolve_location(location, map_location, storage_tensor):
    """The device a storage saved at `location` goes to: 'cpu' or 'cuda:N'."""
    target = location
    if map_location is None:
        pass
    elif isinstance(map_location, (str, _C.device)):
        target = str(map_location)
    elif isinstance(map_location, dict):
        target = str(map_location.get(location, location))
    elif callable(map_location):
        storage = storage_tensor.untyped_storage()
        result = map_location(storage, location)
        if result is None:
            pass
        elif result is storage:
            target = "cpu"
        else:
            raise TypeError("ember.load: a map_location function must return the storage it was given "
                            f"(or None); got {type(result).__name__}")
    else:
        raise TypeError(f"ember.load: map_location must be a str, ember.device, dict or callable, "
                        f"got {type(map_location).__name__}")
    kind = target.split(":")[0]
    if kind == "cuda" and not _cuda_available():
        raise RuntimeError(
            f"Attempting to deserialize object on a CUDA device ('{target}') but ember.cuda.is_available() "
            "is False. If you are running on a CPU-only machine, please use ember.load with "
            "map_location=ember.device('cpu') to map your storages to the CPU.")
    if kind not in ("cpu", "cuda"):
        raise RuntimeError(f"ember.load: don't know how to restore data location '{target}' "
                           f"(storage saved at '{location}')")
    if kind == "cuda":
        index = target.split(":")[1] if ":" in target else "0"
        from . import cuda
        if not index.isdigit() or int(index) >= cuda.device_count():
            raise RuntimeError(f"Attempting to deserialize object on CUDA device {index} but "
                               f"ember.cuda.device_count() is {cuda.device_count()}. Please use ember.load "
                               "with map_location to map your storages to an existing device.")
        return f"cuda:{int(index)}"
    return "cpu"


def _cuda_available():
    from . import cuda
    return cuda.is_available()


class _Archive:
    """Reads storages out of an opened zip checkpoint (copied or memory-mapped)."""

    def __init__(self, zf, prefix, map_location, mmap_array, byteswap):
        self.zf, self.prefix = zf, prefix
        self.map_location = map_location
        self.mmap_array = mmap_array  # np.memmap of the whole file, or None
        self.byteswap = byteswap
        self.bases = {}  # key -> uint8 ember tensor over the record
        self.typed = {}  # (key, dtype) -> _LoadedStorage

    def _record_bytes(self, key, nbytes):
        name = f"{self.prefix}/data/{key}"
        try:
            info = self.zf.getinfo(name)
        except KeyError:
            raise RuntimeError(f"ember.load: corrupt checkpoint: storage record '{name}' is missing") from None
        if info.file_size != nbytes:
            raise RuntimeError(
                f"ember.load: corrupt checkpoint: storage record '{name}' holds {info.file_size} bytes "
                f"but the tensors need a storage of {nbytes} bytes")
        _check_compression(info)
        if self.mmap_array is not None:
            start = _record_data_offset(self.zf, info)
            if info.compress_type != 0:
                raise RuntimeError(f"ember.load(mmap=True): record '{name}' is compressed and can't be mapped")
            if start + nbytes > self.mmap_array.shape[0]:
                raise RuntimeError(f"ember.load: corrupt checkpoint: record '{name}' runs past the end of the file")
            return self.mmap_array[start:start + nbytes]
        arr = np.empty(nbytes, dtype=np.uint8)
        if info.compress_type == 0:
            # Stored (torch always stores): read straight into the array, then check the CRC.
            fp = self.zf.fp
            fp.seek(_record_data_offset(self.zf, info))
            got = fp.readinto(memoryview(arr))
            # CRC 0 means torch was told not to compute it (set_crc32_options(False)).
            if got == nbytes and info.CRC != 0 and zlib.crc32(arr) != info.CRC:
                raise RuntimeError(f"ember.load: corrupt checkpoint: Bad CRC-32 for record '{name}'")
        else:
            got = _read_record(self.zf, name, memoryview(arr))
        if got != nbytes:
            raise RuntimeError(f"ember.load: corrupt checkpoint: record '{name}' is truncated")
        return arr

    def load_storage(self, key, location, dtype_name, numel):
        dtype = _C._dtypes[dtype_name]
        cached = self.typed.get((key, dtype_name))
        if cached is not None:
            return cached
        itemsize = _C.empty(0, dtype=dtype).element_size()
        if numel < 0:
            raise RuntimeError(f"ember.load: corrupt checkpoint: storage '{key}' has negative size {numel}")
        base = self.bases.get(key)
        if base is None:
            arr = self._record_bytes(key, numel * itemsize)
            if self.byteswap and itemsize > 1:
                arr = arr.view(f">u{itemsize}").astype(f"<u{itemsize}").view(np.uint8)
            base = self.bases[key] = _C.from_numpy(arr)
        if base.numel() == 0:
            typed = _C.empty(0, dtype=dtype)
        elif base.data_ptr() % itemsize or base.numel() % itemsize:
            if base.numel() % itemsize:
                raise RuntimeError(f"ember.load: corrupt checkpoint: storage '{key}' of {base.numel()} bytes "
                                   f"does not hold whole {dtype_name} elements")
            typed = _C.from_numpy(base.numpy().copy()).view(dtype)  # realign a misaligned record
        else:
            typed = base.view(dtype)
        target = _resolve_location(location, self.map_location, typed)
        if target != "cpu":
            typed = typed.to(target)
        loaded = self.typed[(key, dtype_name)] = _LoadedStorage(typed, key)
        return loaded


def _read_record(zf, name, into=None):
    """A record's bytes (or, with `into`, the count read into that buffer); a
    record the archive cannot deliver as its central directory describes it
    raises RuntimeError saying what is wrong with the file."""
    import zipfile
    info = zf.getinfo(name)
    try:
        with zf.open(info) as rf:
            return rf.readinto(into) if into is not None else rf.read()
    except EOFError:  # zipfile's EOFError says nothing: the record's data ends early
        raise RuntimeError(
            f"ember.load: corrupt checkpoint: record '{name}' is truncated: the zip central directory "
            f"says it holds {info.compress_size} bytes from offset {info.header_offset}, but the file "
            f"ends before them") from None
    except (zipfile.BadZipFile, OSError, zlib.error) as e:
        raise RuntimeError(f"ember.load: corrupt checkpoint: can't read record '{name}': {e}") from None


def _check_compression(info):
    """torch stores records uncompressed; a deflated record that would expand
    more than 100x (a zip bomb) is refused before it is inflated."""
    if info.compress_type != 0 and info.file_size > 100 * info.compress_size + (1 << 20):
        raise RuntimeError(f"ember.load: refusing record '{info.filename}': {info.compress_size} compressed "
                           f"bytes claim to expand to {info.file_size}")


def _record_data_offset(zf, info):
    """Where a stored record's bytes start in the file (after its local header)."""
    fp = zf.fp
    fp.seek(info.header_offset)
    header = fp.read(30)
    if len(header) != 30 or header[:4] != b"PK\x03\x04":
        raise RuntimeError(f"ember.load: corrupt checkpoint: bad local header for '{info.filename}'")
    name_len, extra_len = struct.unpack("<HH", header[26:30])
    return info.header_offset + 30 + name_len + extra_len


_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C


def _open_source(f, mmap):
    """(binary file object, path or None, whether we opened it)."""
    if _is_path(f):
        path = os.fspath(f)
        return open(path, "rb"), path, True
    if mmap:
        raise ValueError("ember.load: f must be a file path in order to use the mmap argument")
    if not hasattr(f, "read"):
        raise TypeError(f"ember.load: expected a path or a file object with read(), got {type(f).__name__}")
    if not (hasattr(f, "seek") and hasattr(f, "tell")):
        f = io.BytesIO(f.read())
    return f, None, False


def load(f, map_location=None, pickle_module=None, *, weights_only=True, mmap=False, **pickle_load_args):
    """Load an object saved with ember.save or torch.save (zip format).

    weights_only=True (the default) only rebuilds tensors, dtypes, devices and
    plain containers (dict, OrderedDict, list, tuple, set, numbers, strings,
    bytes, None); any other global in the file raises pickle.UnpicklingError
    before anything runs. weights_only=False uses a full unpickler: it can
    run arbitrary code from the file, so only use it on files you trust.

    map_location: 'cpu', ember.device('cpu'), a dict {saved location: new
    location} or a callable(storage, location). mmap=True maps storages from
    the file (copy-on-write) instead of reading them; f must be a path.
    """
    if pickle_module is not None and pickle_module is not pickle:
        raise ValueError("ember.load only supports the standard pickle module")
    if weights_only is None:
        weights_only = True
    if map_location is not None and not isinstance(map_location, (str, _C.device, dict)) \
            and not callable(map_location):
        raise TypeError(f"ember.load: map_location must be a str, ember.device, dict or callable, "
                        f"got {type(map_location).__name__}")
    fp, path, opened = _open_source(f, mmap)
    try:
        start = fp.tell()
        magic = fp.read(4)
        fp.seek(start)
        if magic[:2] != b"PK":
            if magic[:1] == b"\x80" and _read_small_pickle(fp) == _LEGACY_MAGIC:
                return _load_legacy(fp, map_location, bool(weights_only))
            _raise_not_zip(fp, magic)
        return _load_zip(fp, path, map_location, bool(weights_only), mmap)
    finally:
        if opened:
            fp.close()


def _raise_not_zip(fp, magic):
    if not magic:
        raise EOFError("Ran out of input: ember.load got an empty file")
    raise RuntimeError("ember.load: not a PyTorch checkpoint (PytorchStreamReader failed reading zip "
                       "archive: failed finding central directory)")


def _read_small_pickle(fp):
    """One of the legacy format's header pickles (ints, strings, dicts), read
    with the restricted unpickler; None if it is not a pickle."""
    try:
        return _Unpickler(fp, True, None).load()
    except Exception:  # noqa: BLE001  (not the legacy format's header)
        return None


class _LegacyStorages:
    """Storages of a legacy (pre-1.6, non-zip) checkpoint. Their bytes come
    after the object pickle, so each storage is created zero-filled when the
    pickle names it and filled in afterwards (tensors share its memory)."""

    def __init__(self, map_location, file_size):
        self.map_location = map_location
        self.file_size = file_size  # no storage can be larger than the file
        self.roots = {}  # key -> (uint8 NumPy array, dtype name, numel)
        self.loaded = {}  # (key, view) -> _LoadedStorage

    def load_storage(self, key, location, dtype_name, numel, view=None):
        dtype = _C._dtypes[dtype_name]
        itemsize = _C.empty(0, dtype=dtype).element_size()
        if key not in self.roots:
            if numel < 0 or numel * itemsize > self.file_size:
                raise RuntimeError(f"ember.load: corrupt legacy checkpoint: storage '{key}' claims {numel} "
                                   f"elements, more than the {self.file_size}-byte file holds")
            self.roots[key] = (np.zeros(numel * itemsize, dtype=np.uint8), dtype_name, numel)
        arr, root_dtype, root_numel = self.roots[key]
        if root_dtype != dtype_name or root_numel != numel:
            raise RuntimeError(f"ember.load: corrupt legacy checkpoint: storage '{key}' is described twice "
                               "with different types or sizes")
        cache_key = (key, view if isinstance(view, tuple) else None)
        if cache_key in self.loaded:
            return self.loaded[cache_key]
        typed = _C.from_numpy(arr).view(dtype) if numel else _C.empty(0, dtype=dtype)
        if view is not None:  # (view key, element offset, element count): a slice of the root storage
            if not (isinstance(view, tuple) and len(view) == 3):
                raise pickle.UnpicklingError(f"corrupt legacy checkpoint: bad storage view {view!r:.100}")
            offset, count = _check_int(view[1], "view offset"), _check_int(view[2], "view size")
            if offset < 0 or count < 0 or offset + count > numel:
                raise RuntimeError(f"ember.load: corrupt legacy checkpoint: storage view [{offset}, "
                                   f"{offset + count}) is outside storage '{key}' of {numel} elements")
            typed = typed[offset:offset + count] if count else _C.empty(0, dtype=dtype)
        target = _resolve_location(location, self.map_location, typed)
        if target != "cpu":
            typed = typed.to(target)
        loaded = self.loaded[cache_key] = _LoadedStorage(typed, key)
        return loaded

    def read_data(self, fp, keys):
        """The raw storages: for each key, an int64 element count and the bytes."""
        if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
            raise RuntimeError("ember.load: corrupt legacy checkpoint: bad storage key list")
        for key in keys:
            if key not in self.roots:
                raise RuntimeError(f"ember.load: corrupt legacy checkpoint: storage '{key}' was never described")
            arr, dtype_name, numel = self.roots[key]
            head = fp.read(8)
            if len(head) != 8 or struct.unpack("<q", head)[0] != numel:
                raise RuntimeError(f"ember.load: corrupt legacy checkpoint: storage '{key}' should hold "
                                   f"{numel} elements")
            if fp.readinto(memoryview(arr)) != arr.nbytes:
                raise RuntimeError(f"ember.load: corrupt legacy checkpoint: storage '{key}' is truncated")


def _load_legacy(fp, map_location, weights_only):
    """PyTorch's pre-1.6 format: pickles of the magic number, the protocol
    version, system info and the object, a pickled list of storage keys, then
    each storage's raw bytes."""
    version = _read_small_pickle(fp)
    info = _read_small_pickle(fp)
    if version != 1001 or not isinstance(info, dict):
        raise RuntimeError(f"ember.load: unsupported legacy checkpoint (protocol version {version!r:.50})")
    if not info.get("little_endian", True):
        raise RuntimeError("ember.load: big-endian legacy checkpoints are not supported")
    here = fp.tell()
    file_size = fp.seek(0, io.SEEK_END)
    fp.seek(here)
    storages = _LegacyStorages(map_location, file_size)
    obj = _unpickle(_Unpickler(fp, weights_only, storages.load_storage))
    keys = _unpickle(_Unpickler(fp, True, None))
    storages.read_data(fp, keys)
    return obj


def _load_zip(fp, path, map_location, weights_only, mmap):
    import zipfile
    try:
        zf = zipfile.ZipFile(fp)
        names = zf.namelist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, struct.error) as e:
        raise RuntimeError(f"ember.load: corrupt checkpoint: PytorchStreamReader failed reading zip archive: {e}") from None
    with zf:
        if not names or "/" not in names[0]:
            raise RuntimeError("ember.load: corrupt checkpoint: the zip archive's records are not inside one folder")
        prefix = names[0].split("/")[0]
        if f"{prefix}/data.pkl" not in names:
            if f"{prefix}/constants.pkl" in names:
                raise RuntimeError("ember.load: this is a TorchScript archive (torch.jit.save), not a checkpoint")
            raise RuntimeError(f"ember.load: corrupt checkpoint: no '{prefix}/data.pkl' record in the archive")
        byteswap = False
        if f"{prefix}/byteorder" in names:
            order = _read_record(zf, f"{prefix}/byteorder")
            if order not in (b"little", b"big"):
                raise RuntimeError(f"ember.load: corrupt checkpoint: unknown byteorder {order[:20]!r}")
            byteswap = order == b"big"
        mmap_array = None
        if mmap:
            if byteswap:
                raise RuntimeError("ember.load(mmap=True) can't map a big-endian checkpoint")
            mmap_array = np.memmap(path, dtype=np.uint8, mode="c")
        archive = _Archive(zf, prefix, map_location, mmap_array, byteswap)
        _check_compression(zf.getinfo(f"{prefix}/data.pkl"))
        data = _read_record(zf, f"{prefix}/data.pkl")
        try:
            return _unpickle(_Unpickler(io.BytesIO(data), weights_only, archive.load_storage))
        except zipfile.BadZipFile as e:
            raise RuntimeError(f"ember.load: corrupt checkpoint: {e}") from None


def _unpickle(unpickler):
    """Run the unpickler; with weights_only, any error other than ember's own
    (RuntimeError for bad tensors) becomes an UnpicklingError naming the cause."""
    try:
        return unpickler.load()
    except (RuntimeError, pickle.UnpicklingError, MemoryError, OSError):
        raise
    except Exception as e:
        if not unpickler.weights_only or type(e).__name__ == "BadZipFile":
            raise
        raise pickle.UnpicklingError(f"Weights only load failed: the checkpoint's pickle is malformed "
                                     f"({type(e).__name__}: {e})") from None
