"""The safetensors format (Hugging Face weights), with `safetensors.torch`'s API:
save_file(tensors, filename, metadata=None), load_file(filename, device='cpu'),
save(tensors) -> bytes, load(bytes) -> dict.

Layout of a file:

    8 bytes            N, the header length (unsigned little-endian)
    N bytes            a JSON object, padded with spaces to a multiple of 8:
                       {"__metadata__": {str: str},            (optional)
                        "<name>": {"dtype": "F32", "shape": [2, 3],
                                   "data_offsets": [begin, end]}, ...}
    the byte buffer    every tensor's bytes, row-major, little-endian; offsets
                       are relative to the buffer and must tile it exactly

Nothing in a safetensors file is code: loading only parses JSON and maps
bytes, and every field is validated before a tensor is built.
"""
import json
import os
import struct

from ._lazy import numpy as np

from . import _C
from .serialization import _atomic_write

__all__ = ["SafetensorError", "save_file", "load_file", "save", "load"]

# safetensors dtype code -> ember dtype name
_CODE_TO_DTYPE = {"BOOL": "bool", "U8": "uint8", "I8": "int8", "I16": "int16", "I32": "int32",
                  "I64": "int64", "F16": "float16", "BF16": "bfloat16", "F32": "float32", "F64": "float64",
                  "C64": "complex64", "U16": "uint16", "U32": "uint32", "U64": "uint64"}  # no complex128
_DTYPE_TO_CODE = {v: k for k, v in _CODE_TO_DTYPE.items()}
_MAX_HEADER = 100_000_000  # the safetensors library's limit


class SafetensorError(ValueError):
    """A safetensors file or buffer that is malformed (safetensors' own error type)."""


def _dtype_name(dtype):
    return repr(dtype).split(".")[-1]


# -- writing ---------------------------------------------------------------------
def _check_tensors(tensors):
    if not isinstance(tensors, dict):
        raise ValueError(f"Expected a dict of [str, Tensor] but received {type(tensors).__name__}")
    for name, t in tensors.items():
        if not isinstance(name, str):
            raise ValueError(f"Expected a dict of [str, Tensor] but a key is {type(name).__name__}: {name!r}")
        if not isinstance(t, _C.Tensor):
            raise ValueError(f"Key `{name}` is invalid, expected ember.Tensor but received {type(t).__name__}")
        if t.device.type != "cpu":
            raise ValueError(f"Tensor `{name}` is on {t.device}; ember can only save CPU tensors")
        if _dtype_name(t.dtype) not in _DTYPE_TO_CODE:
            raise ValueError(f"Tensor `{name}` has dtype {t.dtype}, which the safetensors format has no code for")
        if not t.is_contiguous():
            raise ValueError(
                f"You are trying to save a non contiguous tensor: `{name}` which is not allowed. It either means "
                "you are trying to save tensors which are reference of each other in which case it's recommended "
                "to save only the full tensors, and reslice at load time, or simply call `.contiguous()` on your "
                "tensor to pack it before saving.")
    _check_no_shared_memory(tensors)


def _check_no_shared_memory(tensors):
    """Refuse tensors whose bytes overlap: the file would hold them twice and
    they would come back as separate tensors (safetensors refuses too)."""
    spans = sorted((t.data_ptr(), t.data_ptr() + t.numel() * t.element_size(), name)
                   for name, t in tensors.items() if t.numel())
    groups = []
    end = -1
    for start, stop, name in spans:
        if start < end:
            groups[-1].append(name)
        else:
            groups.append([name])
        end = max(end, stop) if start < end else stop
    shared = [sorted(g) for g in groups if len(g) > 1]
    if shared:
        raise RuntimeError(
            f"Some tensors share memory, this will lead to duplicate memory on disk and potential differences "
            f"when loading them again: {shared}. Save each storage once (e.g. drop tied weights or .clone() "
            "them) and re-tie them after loading.")


def _tensor_bytes(t):
    """A contiguous tensor's bytes as a uint8 NumPy view (no copy)."""
    t = t.detach()
    if t.numel() == 0:
        return np.zeros(0, dtype=np.uint8)
    return t.reshape(-1).view(_C._dtypes["uint8"]).numpy()


def _layout(tensors, metadata):
    """(header bytes, [tensor bytes in file order])."""
    if metadata is not None:
        if not isinstance(metadata, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                     for k, v in metadata.items()):
            raise ValueError("metadata must be a dict of str to str")
    _check_tensors(tensors)
    # Like safetensors: larger elements first (keeps every tensor aligned), then by name.
    order = sorted(tensors, key=lambda n: (-tensors[n].element_size(), n))
    header = {}
    if metadata:
        header["__metadata__"] = metadata
    chunks, offset = [], 0
    for name in order:
        t = tensors[name]
        data = _tensor_bytes(t)
        header[name] = {"dtype": _DTYPE_TO_CODE[_dtype_name(t.dtype)], "shape": list(t.shape),
                        "data_offsets": [offset, offset + data.nbytes]}
        chunks.append(data)
        offset += data.nbytes
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text, chunks


def save(tensors, metadata=None):
    """The safetensors bytes of a dict {name: tensor}."""
    head, chunks = _layout(tensors, metadata)
    return b"".join([head] + [c.tobytes() for c in chunks])


def save_file(tensors, filename, metadata=None):
    """Write a dict {name: tensor} to `filename` as safetensors. The file is
    written under a temporary name and renamed when complete, so a failed
    save leaves an existing file untouched."""
    head, chunks = _layout(tensors, metadata)

    def write(fp):
        fp.write(head)
        for c in chunks:
            fp.write(memoryview(c))
    _atomic_write(os.fspath(filename), write)


# -- reading ---------------------------------------------------------------------
def _no_duplicates(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise SafetensorError(f"Error while deserializing header: duplicate key {k!r}")
        out[k] = v
    return out


def _is_count(x):
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def _parse(data, size):
    """Validate the header of a safetensors image of `size` bytes whose first
    bytes (at least the header, when it is valid) are `data`; return (buffer
    start, metadata, [(name, dtype name, shape, begin, end)] in buffer order)."""
    if size < 8:
        raise SafetensorError(f"Error while deserializing header: HeaderTooSmall: {size} bytes can't hold "
                              "the 8-byte header length")
    (n,) = struct.unpack("<Q", bytes(data[:8]))
    if n > _MAX_HEADER:
        raise SafetensorError(f"Error while deserializing header: HeaderTooLarge: header length {n} "
                              f"exceeds the limit of {_MAX_HEADER} bytes")
    if 8 + n > size:
        raise SafetensorError(f"Error while deserializing header: header length {n} runs past the end of the "
                              f"data ({size} bytes in all)")
    raw = bytes(data[8:8 + n])
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SafetensorError(f"Error while deserializing header: InvalidHeader: not UTF-8 ({e})") from None
    if not text.startswith("{"):
        raise SafetensorError("Error while deserializing header: InvalidHeaderStart: the header must be a JSON "
                              f"object starting with '{{', got {text[:20]!r}")
    try:
        header = json.loads(text, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as e:
        raise SafetensorError(f"Error while deserializing header: InvalidHeaderDeserialization: {e}") from None
    if not isinstance(header, dict):
        raise SafetensorError("Error while deserializing header: the header is not a JSON object")
    metadata = header.pop("__metadata__", None)
    if metadata is not None and not (isinstance(metadata, dict)
                                     and all(isinstance(v, str) for v in metadata.values())):
        raise SafetensorError("Error while deserializing header: __metadata__ must map strings to strings")
    entries = []
    for name, info in header.items():
        if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
            raise SafetensorError(f"Error while deserializing header: tensor `{name}` must have exactly the "
                                  f"fields dtype, shape and data_offsets, got {info!r:.200}")
        code, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
        if code not in _CODE_TO_DTYPE:
            raise SafetensorError(f"Error while deserializing header: tensor `{name}` has dtype {code!r}, "
                                  f"which ember does not support (known: {sorted(_CODE_TO_DTYPE)})")
        if not isinstance(shape, list) or not all(_is_count(d) for d in shape):
            raise SafetensorError(f"Error while deserializing header: tensor `{name}` has an invalid shape {shape!r:.100}")
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(_is_count(o) for o in offsets)
                and offsets[0] <= offsets[1]):
            raise SafetensorError(f"Error while deserializing header: tensor `{name}` has invalid data_offsets "
                                  f"{offsets!r:.100}")
        dtype = _CODE_TO_DTYPE[code]
        itemsize = _C.empty(0, dtype=_C._dtypes[dtype]).element_size()
        nbytes = itemsize
        for d in shape:
            nbytes *= d
        if offsets[1] - offsets[0] != nbytes:
            raise SafetensorError(
                f"Error while deserializing header: TensorInvalidInfo: tensor `{name}` of dtype {code} and shape "
                f"{shape} needs {nbytes} bytes but data_offsets {offsets} cover {offsets[1] - offsets[0]}")
        entries.append((name, dtype, tuple(shape), offsets[0], offsets[1]))
    entries.sort(key=lambda e: (e[3], e[4]))
    buffer_len = size - 8 - n
    expected = 0
    for name, _, _, begin, end in entries:
        if begin != expected:
            what = "overlaps the previous tensor" if begin < expected else "leaves a gap before it"
            raise SafetensorError(f"Error while deserializing header: InvalidOffset: tensor `{name}` starts at "
                                  f"byte {begin} of the buffer, which {what} (expected {expected})")
        expected = end
    if expected != buffer_len:
        raise SafetensorError(f"Error while deserializing header: MetadataIncompleteBuffer: the tensors cover "
                              f"{expected} bytes but the data buffer holds {buffer_len}")
    return 8 + n, metadata, entries


def _build(array, start, entries):
    """Tensors over the uint8 NumPy `array` (the whole file or buffer), by
    name in sorted order as safetensors returns them."""
    out = {}
    for name, dtype_name, shape, begin, end in sorted(entries):
        dtype = _C._dtypes[dtype_name]
        if begin == end:
            out[name] = _C.empty(shape, dtype=dtype)
            continue
        chunk = array[start + begin:start + end]
        itemsize = (end - begin) // max(1, int(np.prod(shape, dtype=np.int64)))
        if chunk.ctypes.data % itemsize:
            chunk = chunk.copy()  # misaligned in the file: copy to an aligned buffer
        out[name] = _C.from_numpy(chunk).view(dtype).reshape(shape)
    return out


def _check_device(device):
    dev = str(device) if not isinstance(device, int) else f"cuda:{device}"
    if dev.split(":")[0] != "cpu":
        raise RuntimeError(f"safetensors: can't load tensors to device '{dev}': ember has no CUDA yet; use device='cpu'")


def _read_header(path):
    """(the file's first bytes: its length field and header, the file size)."""
    size = os.path.getsize(path)
    with open(path, "rb") as fp:
        head = fp.read(8)
        if len(head) == 8:
            n = struct.unpack("<Q", head)[0]
            head += fp.read(min(n, _MAX_HEADER))
    return head, size


def load_file(filename, device="cpu"):
    """Load a safetensors file into {name: tensor}. The file is memory-mapped
    copy-on-write: tensors read pages from disk on demand, and writing to
    them never changes the file."""
    _check_device(device)
    path = os.fspath(filename)
    start, _, entries = _parse(*_read_header(path))  # validate before mapping anything
    array = np.memmap(path, dtype=np.uint8, mode="c")
    return _build(array, start, entries)


def load(data):
    """Load safetensors bytes (from save() or a file's contents) into {name: tensor}."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"safetensors.load expects bytes, got {type(data).__name__}")
    data = memoryview(data).cast("B")
    start, _, entries = _parse(data, data.nbytes)
    array = np.frombuffer(data, dtype=np.uint8)[start:].copy()  # tensors own their (writable) memory
    return _build(array, 0, entries)


def load_metadata(filename):
    """The `__metadata__` dict of a safetensors file (None if it has none)."""
    return _parse(*_read_header(os.fspath(filename)))[1]
