"""torch.multiprocessing: Python's multiprocessing, with tensors that move
between processes through shared memory, and torch's spawn().

Everything multiprocessing offers (Process, Queue, Pool, get_context, ...)
is re-exported. Once this module is imported, a tensor whose storage is in
shared memory (Tensor.share_memory_()) is sent to other processes as the
name of its shared file, so both sides see one copy; other tensors are sent
by value. Only the "file_system" sharing strategy exists (ember passes file
names, not descriptors)."""
import multiprocessing
from multiprocessing import *  # noqa: F401,F403
from multiprocessing.reduction import ForkingPickler

from .. import _C, _shared_memory
from .spawn import (ProcessContext, ProcessException, ProcessExitedException, ProcessRaisedException,  # noqa: F401
                    SpawnContext, spawn, start_processes)

__all__ = multiprocessing.__all__ + ["spawn", "start_processes", "ProcessContext", "SpawnContext",
                                     "ProcessException", "ProcessRaisedException", "ProcessExitedException",
                                     "get_sharing_strategy", "set_sharing_strategy", "get_all_sharing_strategies"]

_sharing_strategy = "file_system"
_all_sharing_strategies = {"file_system"}


def set_sharing_strategy(new_strategy):
    if new_strategy not in _all_sharing_strategies:
        raise AssertionError(f"sharing strategy {new_strategy!r} is not one of {sorted(_all_sharing_strategies)} "
                             "(ember shares tensors through named files only)")
    global _sharing_strategy
    _sharing_strategy = new_strategy


def get_sharing_strategy():
    return _sharing_strategy


def get_all_sharing_strategies():
    return set(_all_sharing_strategies)


def init_reductions():
    """Send shared tensors by file name through multiprocessing's pickler."""
    from ..nn.parameter import Parameter
    for cls in (_C.Tensor, Parameter):
        ForkingPickler.register(cls, _shared_memory.reduce_tensor)


init_reductions()
