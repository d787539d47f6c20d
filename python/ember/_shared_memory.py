"""Tensor.share_memory_() / is_shared(): moving a tensor's data into shared
memory, so that processes see one copy.

ember's storages cannot be moved in place from Python, so share_memory_()
makes a file under /dev/shm (the POSIX shared-memory filesystem), maps it
with UntypedStorage.from_file(shared=True), copies the data in and re-points
the tensor at it with set_(). Forked children inherit the MAP_SHARED mapping;
other processes (spawn, forkserver, or a Queue to anyone) receive the file's
name through ember.multiprocessing's pickler reduction and map the same file.
The files are unlinked when the process that made them exits ("file_system"
strategy in torch's terms). A storage is shared when the mapping holding its
data is a shared mapping (read from /proc/self/maps: no bookkeeping can go
stale). Limitation: other tensors viewing the old storage keep the old copy."""
import atexit
import os
import tempfile

from . import _C

_SHM_DIR = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
_PREFIX = "ember_shm_"
_made = []  # files this process created; unlinked at exit


def _unlink_made():
    for path in _made:
        try:
            os.unlink(path)
        except OSError:
            pass


atexit.register(_unlink_made)


def _mapping_of(address):
    """(shared?, path) of the /proc/self/maps entry holding address, or None."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split(None, 5)
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                if lo <= address < hi:
                    path = parts[5].strip() if len(parts) > 5 else ""
                    return parts[1][3] == "s", path
    except OSError:
        return None
    return None


def storage_file(tensor):
    """The shared file a tensor's storage maps, or None if it is not shared."""
    if tensor.device.type != "cpu":
        return None
    storage = tensor.untyped_storage()
    if storage.nbytes() == 0:
        return None
    found = _mapping_of(storage.data_ptr())
    if found is None or not found[0]:
        return None
    path = found[1]
    return path if path and not path.endswith(" (deleted)") else None


def is_shared(tensor):
    """Whether the tensor's data lives in shared memory (CUDA tensors: ember's
    are not shared across processes; False)."""
    return storage_file(tensor) is not None


def _map_file(path, nbytes):
    return _C.UntypedStorage.from_file(path, True, nbytes)


def share_memory_(tensor):
    """Move the tensor's storage into a shared-memory file (no-op if it is
    already shared, or if it lives on a GPU). Returns the tensor."""
    if tensor.device.type != "cpu" or is_shared(tensor):
        return tensor
    from .autograd.grad_mode import no_grad
    old = tensor.untyped_storage()
    nbytes = old.nbytes()
    fd, path = tempfile.mkstemp(prefix=_PREFIX, dir=_SHM_DIR)
    try:
        os.ftruncate(fd, max(nbytes, 1))
    finally:
        os.close(fd)
    _made.append(path)
    new = _map_file(path, max(nbytes, 1))
    itemsize = tensor.element_size()
    with no_grad():
        whole_new = _C.empty(0, dtype=tensor.dtype).set_(new, 0, (nbytes // itemsize,), (1,))
        whole_old = _C.empty(0, dtype=tensor.dtype).set_(old, 0, (nbytes // itemsize,), (1,))
        whole_new.copy_(whole_old)
        tensor.set_(new, tensor.storage_offset(), tuple(tensor.shape), tuple(tensor.stride()))
    return tensor


def rebuild_shared(path, nbytes, dtype_name, offset, size, stride, requires_grad, is_parameter=False):
    """The receiving side: a tensor (or Parameter) over the same shared file."""
    storage = _map_file(path, nbytes)
    t = _C.empty(0, dtype=_C._dtypes[dtype_name]).set_(storage, offset, tuple(size), tuple(stride))
    if is_parameter:
        from .nn.parameter import Parameter
        return Parameter(t, requires_grad)
    if requires_grad:
        t.requires_grad_(True)
    return t


def reduce_tensor(tensor):
    """ForkingPickler's reduction: a shared tensor travels as its file's name,
    any other one by value (its ordinary pickling)."""
    path = storage_file(tensor)
    if path is None:
        return tensor.__reduce_ex__(2)
    return (rebuild_shared, (path, tensor.untyped_storage().nbytes(), repr(tensor.dtype).split(".")[-1],
                             tensor.storage_offset(), tuple(tensor.shape), tuple(tensor.stride()),
                             tensor.requires_grad, type(tensor).__name__ == "Parameter"))
