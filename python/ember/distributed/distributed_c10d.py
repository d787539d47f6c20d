"""Process groups and collectives (torch.distributed.distributed_c10d).

Backends (the communicator each group owns is chosen by name in _backends.py,
all with one method set): "gloo", ember's own CPU transport written in C over
TCP (csrc/distributed; not the Gloo library; a _C._GlooComm, a full mesh of
sockets); "mpi", libmpi loaded at run time (_C._MpiComm); "nccl", CUDA
tensors over libnccl (ember._cuda._NcclComm). A CPU group has one progress
thread: every operation of the group — collective or point-to-point, async or not —
runs on that thread in the order it was issued, with the GIL released while
bytes move, so `async_op=True` overlaps communication with compute and the
wire order is the program order on every rank. A blocking call is an async
one followed by `wait()`.

Tensors of any layout are accepted: the transport moves contiguous memory,
so other layouts are copied in and the results copied back. (torch's gloo
reads a sliced tensor's underlying storage span instead; ember reduces the
view's elements.)
"""
import collections
import datetime
import enum
import io
import pickle
import threading
import time

import ember
from ember import _C
from ember.futures import Future

from . import _backends
from .rendezvous import rendezvous
from .store import DistNetworkError, DistStoreError, PrefixStore, Store

default_pg_timeout = datetime.timedelta(minutes=30)
_P2P_WINDOW = 0.002  # seconds an isend/irecv waits for companions (see ProcessGroup._progress)


class RedOpType(enum.IntEnum):
    SUM = 0
    AVG = 1
    PRODUCT = 2
    MIN = 3
    MAX = 4
    BAND = 5
    BOR = 6
    BXOR = 7
    PREMUL_SUM = 8
    UNUSED = 9

    def __str__(self):
        return f"RedOpType.{self.name}"


class ReduceOp:
    RedOpType = RedOpType
    SUM = RedOpType.SUM
    AVG = RedOpType.AVG
    PRODUCT = RedOpType.PRODUCT
    MIN = RedOpType.MIN
    MAX = RedOpType.MAX
    BAND = RedOpType.BAND
    BOR = RedOpType.BOR
    BXOR = RedOpType.BXOR
    PREMUL_SUM = RedOpType.PREMUL_SUM
    UNUSED = RedOpType.UNUSED


class reduce_op:  # torch's deprecated spelling
    SUM, PRODUCT, MIN, MAX = ReduceOp.SUM, ReduceOp.PRODUCT, ReduceOp.MIN, ReduceOp.MAX


class Backend(str):
    UNDEFINED = "undefined"
    GLOO = "gloo"
    NCCL = "nccl"
    UCC = "ucc"
    MPI = "mpi"
    backend_list = [UNDEFINED, GLOO, NCCL, UCC, MPI]

    def __new__(cls, name):
        if not isinstance(name, str):
            raise ValueError(f"Backend name must be a string, but got: {name}")
        value = getattr(Backend, name.upper(), Backend.UNDEFINED)
        if value == Backend.UNDEFINED:
            value = name.lower()
        return super().__new__(cls, value)


class _NonMember:
    def __repr__(self):
        return "<non-group member>"


class GroupMember:
    WORLD = None  # the default group once initialized
    NON_GROUP_MEMBER = _NonMember()


class group:  # torch.distributed.group.WORLD
    WORLD = None


_UNAVAILABLE = {
    "ucc": "Distributed package doesn't have UCC built in",
}


def is_available():
    return True


def is_gloo_available():
    return True


def is_nccl_available():
    return _backends.nccl_available()


def is_mpi_available():
    return _backends.mpi_available()


def is_ucc_available():
    return False


def is_backend_available(backend):
    b = Backend(backend)
    return b == Backend.GLOO or (b == Backend.MPI and is_mpi_available()) or (
        b == Backend.NCCL and is_nccl_available())


def is_torchelastic_launched():
    import os
    return os.environ.get("TORCHELASTIC_RUN_ID") is not None


# ------------------------------------------------------------------ Work

class Work:
    """The handle of an operation on a group's progress thread."""

    def __init__(self, outputs=()):
        self._event = threading.Event()
        self._exc = None
        self._outputs = list(outputs)
        self._future = None
        self._lock = threading.Lock()
        self._source = -1

    def _complete(self, exc=None):
        with self._lock:
            self._exc = exc
            self._event.set()
            fut = self._future
        if fut is not None:
            if exc is None:
                fut.set_result(self._outputs)
            else:
                fut.set_exception(exc)

    def wait(self, timeout=None):
        t = timeout.total_seconds() if isinstance(timeout, datetime.timedelta) else timeout
        if not self._event.wait(t):
            raise _C.DistBackendError(f"Work.wait timed out after {t} s")
        if self._exc is not None:
            raise self._exc
        return True

    def is_completed(self):
        return self._event.is_set()

    def is_success(self):
        return self._event.is_set() and self._exc is None

    def exception(self):
        return self._exc

    def result(self):
        self.wait()
        return self._outputs

    def source_rank(self):
        return self._source

    def synchronize(self):
        self.wait()

    def get_future(self):
        with self._lock:
            if self._future is None:
                self._future = Future()
                if self._event.is_set():
                    if self._exc is None:
                        self._future.set_result(self._outputs)
                    else:
                        self._future.set_exception(self._exc)
            return self._future


class _Item:
    """One queued operation: `run` (a collective) or `p2p` (messages for
    _GlooComm.p2p), then `finish` (copies results out), then its Works."""
    __slots__ = ("work", "works", "run", "p2p", "finish", "coalesce")

    def __init__(self, work, run=None, p2p=None, finish=None, works=None, coalesce=False):
        self.work, self.run, self.p2p, self.finish = work, run, p2p, finish
        self.works = works if works is not None else [work]
        self.coalesce = coalesce  # an isend/irecv: may wait for more messages to join


class ProcessGroup:
    """A group of ranks with one transport mesh and one progress thread.
    rank()/size() are this process's rank in the group and its size."""

    def __init__(self, store, rank, size, timeout, ranks=None, name="", backend="gloo", comm=None):
        self._store = store
        self._rank = rank
        self._size = size
        self._ranks = list(ranks) if ranks is not None else list(range(size))
        self._timeout = timeout
        self._name = name
        self._items = collections.deque()
        self._cond = threading.Condition()
        self._closed = False
        self._backend = backend
        if comm is None:
            make = _backends.nccl_comm if backend == "nccl" else _backends.gloo_comm
            comm = make(store, rank, size, timeout)
        self._comm = comm
        # NCCL enqueues on the caller's CUDA stream and returns at once: its
        # operations run inline; CPU backends move bytes on a progress thread
        self._thread = None
        if backend != "nccl":
            self._thread = threading.Thread(target=self._progress, daemon=True,
                                            name=f"ember-{backend}-progress-{name or 'default'}")
            self._thread.start()

    def rank(self):
        return self._rank

    def size(self):
        return self._size

    def name(self):
        return self._backend

    def _get_backend_name(self):
        return self._backend

    @property
    def group_name(self):
        return self._name

    def __repr__(self):
        return f"<ember ProcessGroup {self._backend} ranks={self._ranks} rank={self._rank}>"

    # -- the progress thread
    def _submit(self, item, async_op):
        with self._cond:
            if self._closed:
                raise RuntimeError("the process group has been destroyed")
            if self._thread is not None:
                self._items.append(item)
                self._cond.notify()
        if self._thread is None:
            self._run([item])
        if async_op:
            return item.work
        item.work.wait()
        return None

    def _progress(self):
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._items or self._closed)
                if not self._items:
                    return
                batch = [self._items.popleft()]
                # point-to-point messages issued back to back go in one step:
                # a send and the matching receive must progress together (two
                # ranks that each isend a large message and then irecv would
                # otherwise both sit in their sends). An isend/irecv waits up to
                # _P2P_WINDOW s for more messages to join it.
                if batch[0].p2p is not None:
                    deadline = time.monotonic() + (_P2P_WINDOW if batch[0].coalesce else 0.0)
                    while True:
                        while self._items and self._items[0].p2p is not None:
                            batch.append(self._items.popleft())
                        left = deadline - time.monotonic()
                        if self._items or left <= 0 or not batch[-1].coalesce:
                            break
                        self._cond.wait(left)
            self._run(batch)
            # the finished step's buffers go now, not when the next one comes
            # (an FSDP unit's gathered parameters would live on until then)
            del batch

    def _run(self, batch):
        """One step: the batch's transfers, its finishes, then its Works."""
        exc = None
        try:
            if batch[0].p2p is not None:
                self._comm.p2p([op for it in batch for op in it.p2p])
            else:
                batch[0].run()
            for it in batch:
                if it.finish is not None:
                    it.finish()
        except BaseException as e:  # delivered to the caller's wait()
            exc = e
        for it in batch:
            for w in it.works:
                w._complete(exc)

    def _shutdown(self):
        with self._cond:
            self._closed = True
            self._cond.notify()
        if self._thread is not None and threading.current_thread() is not self._thread:
            self._thread.join(timeout=self._timeout.total_seconds())
        self._comm.close()


class _World:
    def __init__(self):
        self.default = None
        self.store = None
        self.backend = None
        self.groups = []
        self.group_count = 0
        self.barrier_count = 0


_world = _World()
# Note [store generations]: the n-th init_process_group of a process keys its
# rendezvous under "default_pg/n" (its subgroups under it), so a store used
# again after destroy_process_group never hands out the old groups'
# addresses. Ranks agree on n because each runs the same sequence of inits.
_generation = [0]

_NOT_INIT = ("Default process group has not been initialized, please make sure to call "
             "init_process_group.")


def _default():
    if _world.default is None:
        raise ValueError(_NOT_INIT)
    return _world.default


def _group(g):
    """The ProcessGroup for `group=`, or None where this rank is not a member."""
    if g is None or g is GroupMember.WORLD:
        return _default()
    if g is GroupMember.NON_GROUP_MEMBER:
        return None
    if not isinstance(g, ProcessGroup):
        raise TypeError(f"group must be a ProcessGroup, got {type(g).__name__}")
    return g


def _group_rank(pg, rank, group_rank, what):
    """A root/peer given as a global rank (rank=) or a group rank (group_rank=)."""
    if group_rank is not None:
        if rank is not None:
            raise ValueError(f"Can only specify {what} or group_{what}, not both")
        r = group_rank
    elif rank is None:
        r = 0 if what in ("src", "dst") else None
        if r is None:
            raise ValueError(f"{what} must be given")
    else:
        if rank not in pg._ranks:
            raise ValueError(f"Global rank {rank} is not part of group {pg}")
        r = pg._ranks.index(rank)
    if not 0 <= r < pg._size:
        raise ValueError(f"Invalid {what} rank {r} for a group of {pg._size}")
    return r


def _check_tensor(t, name):
    if not isinstance(t, ember.Tensor):
        raise TypeError(f"Invalid function argument. Expected parameter `{name}` of type "
                        f"torch.Tensor but got {type(t)} instead.")


def _check_list(ts, name):
    if not isinstance(ts, (list, tuple)) or not all(isinstance(t, ember.Tensor) for t in ts):
        raise TypeError(f"Invalid function argument. Expected parameter `{name}` of type "
                        f"List[torch.Tensor] but got {type(ts)} instead.")


def _op(op, pg=None):
    try:
        op = RedOpType(int(op))
    except (TypeError, ValueError):
        raise ValueError(f"unknown reduce op {op!r}") from None
    if op >= RedOpType.PREMUL_SUM:
        raise ValueError(f"ReduceOp.{op.name} is not supported by the "
                         f"{pg._backend if pg is not None else 'gloo'} backend")
    return int(op)


def _dense(t):
    """Contiguous memory with t's elements (t itself when it already is)."""
    return t if t.is_contiguous() else t.contiguous()


def _write_back(dst, src):
    if dst is not src:
        with ember.no_grad():
            dst.copy_(src.reshape(dst.shape))


def _flat_cat(ts, dtype):
    if not ts:
        return ember.empty(0, dtype=dtype)
    with ember.no_grad():
        return ember.cat([t.reshape(-1) for t in ts])


def _same_dtype(ts, dtype, what):
    for t in ts:
        if t.dtype != dtype:
            raise RuntimeError(f"{what}: tensors must all have dtype {dtype}, got {t.dtype}")


# --------------------------------------------------------------- lifecycle

def _parse_backend(backend):
    if backend is None:
        return "gloo"
    b = str(backend).lower()
    if ":" in b:  # "cpu:gloo,cuda:nccl": the CPU half is what runs here
        parts = dict(p.split(":", 1) for p in b.split(","))
        if parts.get("cpu") == "gloo":
            return "gloo"
        b = next(iter(parts.values()))
    if b in ("gloo", "mpi", "nccl"):
        return b
    if b in _UNAVAILABLE:
        raise RuntimeError(_UNAVAILABLE[b])
    raise ValueError(f"Invalid backend: '{backend}'")


def _timedelta(timeout):
    if timeout is None:
        return default_pg_timeout
    if isinstance(timeout, datetime.timedelta):
        return timeout
    return datetime.timedelta(seconds=float(timeout))


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1,
                       store=None, group_name="", pg_options=None, device_id=None):
    if _world.default is not None:
        raise ValueError("trying to initialize the default process group twice!")
    backend = _parse_backend(backend)
    timeout = _timedelta(timeout)
    if backend == "nccl" and not is_nccl_available():
        raise RuntimeError(f"Distributed package doesn't have NCCL built in ({_backends.nccl_why()})")
    if backend == "mpi":  # MPI's launcher did the rendezvous: rank and size are MPI's
        comm = _backends.mpi_world_comm(timeout)
        if (rank >= 0 and rank != comm.rank) or (world_size > 0 and world_size != comm.size):
            comm.close()
            raise ValueError(f"init_process_group('mpi'): rank={rank}, world_size={world_size} "
                             f"disagree with MPI's rank {comm.rank} of {comm.size}")
        _generation[0] += 1
        pg = ProcessGroup(None, comm.rank, comm.size, timeout, name=group_name or "0",
                          backend="mpi", comm=comm)
        _world.default, _world.store, _world.backend = pg, None, backend
        _world.groups = [pg]
        GroupMember.WORLD = group.WORLD = pg
        return
    if store is not None:
        if init_method is not None:
            raise ValueError("Cannot specify both init_method and store.")
        if world_size <= 0 or rank < 0:
            raise ValueError("world_size and rank must be given with store=")
        if not isinstance(store, Store):
            raise TypeError(f"store must be a Store, got {type(store).__name__}")
    else:
        store, rank, world_size = rendezvous(init_method or "env://", rank, world_size, timeout)
    store.set_timeout(timeout)
    _generation[0] += 1
    store = PrefixStore(f"default_pg/{_generation[0]}", store)
    pg = ProcessGroup(store, rank, world_size, timeout, name=group_name or "0", backend=backend)
    _world.default, _world.store, _world.backend = pg, store, backend
    _world.groups = [pg]
    GroupMember.WORLD = group.WORLD = pg
    try:
        barrier()  # every rank is connected before anyone goes on
    except BaseException:
        destroy_process_group()
        raise


def destroy_process_group(group=None):
    if group is None or group is GroupMember.WORLD:
        for pg in _world.groups:
            pg._shutdown()
        _world.__init__()
        GroupMember.WORLD = globals()["group"].WORLD = None
        return
    pg = _group(group)
    if pg is not None:
        pg._shutdown()
        if pg in _world.groups:
            _world.groups.remove(pg)


def is_initialized():
    return _world.default is not None


def get_rank(group=None):
    if _world.default is None:
        raise ValueError(_NOT_INIT)
    pg = _group(group)
    return -1 if pg is None else pg._rank


def get_world_size(group=None):
    if _world.default is None:
        raise ValueError(_NOT_INIT)
    pg = _group(group)
    return -1 if pg is None else pg._size


def get_backend(group=None):
    _default()
    pg = _group(group)
    if pg is None:
        raise ValueError("Invalid process group specified")
    return Backend(_world.backend)


def get_global_rank(group, group_rank):
    pg = _group(group)
    if pg is None:
        raise ValueError("Invalid process group specified")
    if not 0 <= group_rank < pg._size:
        raise ValueError(f"Group rank {group_rank} is not part of group {pg}")
    return pg._ranks[group_rank]


def get_group_rank(group, global_rank):
    pg = _group(group)
    if pg is None or global_rank not in pg._ranks:
        raise ValueError(f"Global rank {global_rank} is not part of group {pg}")
    return pg._ranks.index(global_rank)


def get_process_group_ranks(group):
    pg = _group(group)
    if pg is None:
        raise ValueError("Invalid process group specified")
    return list(pg._ranks)


def get_node_local_rank(fallback_rank=None):
    import os
    if "LOCAL_RANK" in os.environ:
        return int(os.environ["LOCAL_RANK"])
    if fallback_rank is not None:
        return int(fallback_rank)
    raise RuntimeError("LOCAL_RANK is not in the environment. Consider passing fallback_rank to "
                       "allow `get_node_local_rank` to work, assuming you are not running in a "
                       "multi-device context and want the code to run locally instead.")


def new_group(ranks=None, timeout=None, backend=None, pg_options=None,
              use_local_synchronization=False, group_desc=None, device_id=None):
    """A subgroup; every rank of the world calls it (with the same ranks),
    members get the group, the others GroupMember.NON_GROUP_MEMBER."""
    world = _default()
    if backend is not None:
        _parse_backend(backend)
    n = world._size
    ranks = sorted(set(range(n) if ranks is None else ranks))
    for r in ranks:
        if not 0 <= r < n:
            raise ValueError(f"new_group: rank {r} is out of range for world size {n}")
    _world.group_count += 1
    idx = _world.group_count
    me = world._ranks[world._rank]
    if world._backend == "mpi":
        # MPI makes the group with a call that cannot time out: every rank first
        # meets in a barrier that can, so a missing rank raises instead of hanging
        barrier(group=world)
    if me not in ranks:
        return GroupMember.NON_GROUP_MEMBER
    timeout = _timedelta(timeout) if timeout is not None else world._timeout
    backend = _parse_backend(backend) if backend is not None else world._backend
    if backend != world._backend and "mpi" in (backend, world._backend):
        raise ValueError(f"new_group: a {backend} group in a {world._backend} world (an mpi group "
                         "is made from the mpi world's communicator)")
    if backend == "mpi":  # the members make it from the world's communicator, in issue order
        made = []
        split = lambda: made.append(world._comm.split(ranks, timeout.total_seconds(), idx))  # noqa: E731
        world._submit(_Item(Work(), run=split), async_op=False)
        pg = ProcessGroup(None, ranks.index(me), len(ranks), timeout, ranks=ranks, name=str(idx),
                          backend="mpi", comm=made[0])
    else:
        pg = ProcessGroup(PrefixStore(f"group{idx}", _world.store), ranks.index(me), len(ranks),
                          timeout, ranks=ranks, name=str(idx), backend=backend)
    _world.groups.append(pg)
    barrier(group=pg)
    return pg


# ------------------------------------------------------------- collectives

def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    _check_tensor(tensor, "tensor")
    pg = _group(group)
    if pg is None:
        return None
    op, buf = _op(op, pg), _dense(tensor)
    return pg._submit(_Item(Work([tensor]), lambda: pg._comm.all_reduce(buf, op),
                            finish=lambda: _write_back(tensor, buf)), async_op)


def broadcast(tensor, src=None, group=None, async_op=False, group_src=None):
    _check_tensor(tensor, "tensor")
    pg = _group(group)
    if pg is None:
        return None
    root, buf = _group_rank(pg, src, group_src, "src"), _dense(tensor)
    return pg._submit(_Item(Work([tensor]), lambda: pg._comm.broadcast(buf, root),
                            finish=lambda: _write_back(tensor, buf)), async_op)


def reduce(tensor, dst=None, op=ReduceOp.SUM, group=None, async_op=False, group_dst=None):
    _check_tensor(tensor, "tensor")
    pg = _group(group)
    if pg is None:
        return None
    root, op, buf = _group_rank(pg, dst, group_dst, "dst"), _op(op, pg), _dense(tensor)
    return pg._submit(_Item(Work([tensor]), lambda: pg._comm.reduce(buf, root, op),
                            finish=lambda: _write_back(tensor, buf)), async_op)


def all_gather(tensor_list, tensor, group=None, async_op=False):
    _check_list(tensor_list, "tensor_list")
    _check_tensor(tensor, "tensor")
    pg = _group(group)
    if pg is None:
        return None
    if len(tensor_list) != pg._size:
        raise RuntimeError(f"all_gather: tensor_list has {len(tensor_list)} tensors, expected "
                           f"one per rank ({pg._size})")
    _same_dtype(tensor_list, tensor.dtype, "all_gather")
    n = tensor.numel()
    for t in tensor_list:
        if t.numel() != n:
            raise RuntimeError(f"all_gather: every output must have the input's {n} elements, "
                               f"got shape {list(t.shape)}")
    buf, out = _dense(tensor), ember.empty(pg._size * n, dtype=tensor.dtype)

    def finish():
        with ember.no_grad():
            for i, t in enumerate(tensor_list):
                t.copy_(out[i * n:(i + 1) * n].reshape(t.shape))
    return pg._submit(_Item(Work(tensor_list), lambda: pg._comm.all_gather(out, buf),
                            finish=finish), async_op)


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    _check_tensor(output_tensor, "output_tensor")
    _check_tensor(input_tensor, "input_tensor")
    pg = _group(group)
    if pg is None:
        return None
    if output_tensor.numel() != pg._size * input_tensor.numel():
        raise RuntimeError("all_gather_into_tensor: output tensor size must be equal to world_size "
                           f"times input tensor size ({list(output_tensor.shape)} vs "
                           f"{pg._size} x {list(input_tensor.shape)})")
    out, buf = _dense(output_tensor), _dense(input_tensor)
    return pg._submit(_Item(Work([output_tensor]), lambda: pg._comm.all_gather(out, buf),
                            finish=lambda: _write_back(output_tensor, out)), async_op)


_all_gather_base = all_gather_into_tensor


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    _check_tensor(output, "output")
    _check_tensor(input, "input")
    pg = _group(group)
    if pg is None:
        return None
    if input.numel() != pg._size * output.numel():
        raise RuntimeError("reduce_scatter_tensor: input tensor size must be equal to world_size "
                           f"times output tensor size ({list(input.shape)} vs {pg._size} x "
                           f"{list(output.shape)})")
    op, out, buf = _op(op, pg), _dense(output), _dense(input)
    return pg._submit(_Item(Work([output]), lambda: pg._comm.reduce_scatter(out, buf, op),
                            finish=lambda: _write_back(output, out)), async_op)


_reduce_scatter_base = reduce_scatter_tensor


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    _check_tensor(output, "output")
    _check_list(input_list, "input_list")
    pg = _group(group)
    if pg is None:
        return None
    if len(input_list) != pg._size:
        raise RuntimeError(f"reduce_scatter: input_list has {len(input_list)} tensors, expected "
                           f"one per rank ({pg._size})")
    _same_dtype(input_list, output.dtype, "reduce_scatter")
    for t in input_list:
        if t.numel() != output.numel():
            raise RuntimeError(f"reduce_scatter: every input must have the output's "
                               f"{output.numel()} elements, got shape {list(t.shape)}")
    op, out, buf = _op(op, pg), _dense(output), _flat_cat(input_list, output.dtype)
    return pg._submit(_Item(Work([output]), lambda: pg._comm.reduce_scatter(out, buf, op),
                            finish=lambda: _write_back(output, out)), async_op)


def gather(tensor, gather_list=None, dst=None, group=None, async_op=False, group_dst=None):
    _check_tensor(tensor, "tensor")
    pg = _group(group)
    if pg is None:
        return None
    root, buf, n = _group_rank(pg, dst, group_dst, "dst"), _dense(tensor), tensor.numel()
    big, finish = None, None
    if pg._rank == root:
        if gather_list is None or len(gather_list) != pg._size:
            raise ValueError(f"gather: the destination rank needs gather_list with {pg._size} tensors")
        _check_list(gather_list, "gather_list")
        _same_dtype(gather_list, tensor.dtype, "gather")
        for t in gather_list:
            if t.numel() != n:
                raise RuntimeError(f"gather: every output must have the input's {n} elements, "
                                   f"got shape {list(t.shape)}")
        big = ember.empty(pg._size * n, dtype=tensor.dtype)

        def finish():
            with ember.no_grad():
                for i, t in enumerate(gather_list):
                    t.copy_(big[i * n:(i + 1) * n].reshape(t.shape))
    elif gather_list:
        raise ValueError("gather: Argument ``gather_list`` must NOT be specified on non-destination ranks.")
    return pg._submit(_Item(Work(gather_list or []), lambda: pg._comm.gather(buf, big, root),
                            finish=finish), async_op)


def scatter(tensor, scatter_list=None, src=None, group=None, async_op=False, group_src=None):
    _check_tensor(tensor, "tensor")
    pg = _group(group)
    if pg is None:
        return None
    root, buf = _group_rank(pg, src, group_src, "src"), _dense(tensor)
    big = None
    if pg._rank == root:
        if scatter_list is None or len(scatter_list) != pg._size:
            raise ValueError(f"scatter: the source rank needs scatter_list with {pg._size} tensors")
        _check_list(scatter_list, "scatter_list")
        _same_dtype(scatter_list, tensor.dtype, "scatter")
        for t in scatter_list:
            if t.numel() != tensor.numel():
                raise RuntimeError(f"scatter: every input must have the output's "
                                   f"{tensor.numel()} elements, got shape {list(t.shape)}")
        big = _flat_cat(scatter_list, tensor.dtype)
    elif scatter_list:
        raise ValueError("scatter: Argument ``scatter_list`` must NOT be specified on non-source ranks.")
    return pg._submit(_Item(Work([tensor]), lambda: pg._comm.scatter(buf, big, root),
                            finish=lambda: _write_back(tensor, buf)), async_op)


def all_to_all(output_tensor_list, input_tensor_list, group=None, async_op=False):
    _check_list(output_tensor_list, "output_tensor_list")
    _check_list(input_tensor_list, "input_tensor_list")
    pg = _group(group)
    if pg is None:
        return None
    if len(output_tensor_list) != pg._size or len(input_tensor_list) != pg._size:
        raise RuntimeError(f"all_to_all: expected {pg._size} input and output tensors")
    dtype = input_tensor_list[0].dtype
    _same_dtype(input_tensor_list, dtype, "all_to_all")
    _same_dtype(output_tensor_list, dtype, "all_to_all")
    sc = [t.numel() for t in input_tensor_list]
    rc = [t.numel() for t in output_tensor_list]
    buf, out = _flat_cat(input_tensor_list, dtype), ember.empty(sum(rc), dtype=dtype)

    def finish():
        with ember.no_grad():
            o = 0
            for t, k in zip(output_tensor_list, rc):
                t.copy_(out[o:o + k].reshape(t.shape))
                o += k
    return pg._submit(_Item(Work(output_tensor_list), lambda: pg._comm.all_to_all(out, buf, sc, rc),
                            finish=finish), async_op)


def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None, group=None,
                      async_op=False):
    _check_tensor(output, "output")
    _check_tensor(input, "input")
    pg = _group(group)
    if pg is None:
        return None
    if output.dtype != input.dtype:
        raise RuntimeError(f"all_to_all_single: output dtype {output.dtype} and input dtype "
                           f"{input.dtype} differ")

    def counts(t, splits, what):
        rows = t.shape[0] if t.dim() else 1
        row = t.numel() // rows if rows else 0
        if splits is None or len(splits) == 0:
            if rows % pg._size:
                raise RuntimeError(f"all_to_all_single: {what} dim 0 ({rows}) must be divisible by "
                                   f"the group size ({pg._size}) when no split sizes are given")
            splits = [rows // pg._size] * pg._size
        splits = [int(s) for s in splits]
        if len(splits) != pg._size or sum(splits) != rows or min(splits) < 0:
            raise RuntimeError(f"all_to_all_single: {what} split sizes {splits} must be "
                               f"{pg._size} non-negative numbers adding up to dim 0 ({rows})")
        return [s * row for s in splits]
    sc = counts(input, input_split_sizes, "input")
    rc = counts(output, output_split_sizes, "output")
    out, buf = _dense(output), _dense(input)
    return pg._submit(_Item(Work([output]), lambda: pg._comm.all_to_all(out, buf, sc, rc),
                            finish=lambda: _write_back(output, out)), async_op)


def barrier(group=None, async_op=False, device_ids=None):
    pg = _group(group)
    if pg is None:
        return None
    return pg._submit(_Item(Work(), pg._comm.barrier), async_op)


def monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
    """Rank 0 of the group checks in every other rank within `timeout` and
    raises naming the ranks that did not arrive; the others wait for rank
    0's all-clear. Goes through the store, so a broken transport still
    reports which rank is missing."""
    pg = _group(group)
    if pg is None:
        return None
    if pg._backend != "gloo":
        raise RuntimeError("monitored_barrier is only implemented for GLOO backend.")
    t = _timedelta(timeout).total_seconds() if timeout is not None else pg._timeout.total_seconds()
    _world.barrier_count += 1
    key = f"monitored_barrier/{id(pg) if pg._name == '' else pg._name}/{_world.barrier_count}"
    store = pg._store
    store.set(f"{key}/{pg._rank}", b"1")
    if pg._rank == 0:
        missing = []
        import time
        deadline = time.monotonic() + t
        for r in range(1, pg._size):
            try:
                store.wait([f"{key}/{r}"], datetime.timedelta(seconds=max(0.0, deadline - time.monotonic())))
            except DistStoreError:
                missing.append(pg._ranks[r])
                if not wait_all_ranks:
                    break
        if missing:
            raise RuntimeError(f"[Rank 0]: Ranks {', '.join(map(str, missing))} failed to pass "
                               f"monitoredBarrier in {int(t * 1000)} ms")
        store.set(f"{key}/done", b"1")
        # rank 0 may host the store: it leaves only once every rank has seen "done"
        try:
            store.wait([f"{key}/ack/{r}" for r in range(1, pg._size)], datetime.timedelta(seconds=t))
        except DistStoreError:
            late = [pg._ranks[r] for r in range(1, pg._size) if not store.check([f"{key}/ack/{r}"])]
            raise RuntimeError(f"[Rank 0]: Ranks {', '.join(map(str, late))} did not leave "
                               f"monitoredBarrier within {int(t * 1000)} ms") from None
    else:
        try:
            store.wait([f"{key}/done"], datetime.timedelta(seconds=t))
        except DistStoreError:
            raise RuntimeError(f"[Rank {pg._ranks[pg._rank]}]: monitoredBarrier: rank 0 did not "
                               f"release the barrier within {int(t * 1000)} ms (rank 0 failed, "
                               "or another rank is missing)") from None
        try:
            store.set(f"{key}/ack/{pg._rank}", b"1")
        except DistNetworkError:
            # rank 0 hosts the store and leaves as soon as it has seen every ack: it can
            # close the connection after storing ours and before answering. Had it failed
            # instead, its own exit status fails the job.
            pass


# ----------------------------------------------------------- point to point

def _p2p_item(pg, is_send, tensor, peer, tag, coalesce=True):
    buf = _dense(tensor)
    w = Work([tensor])
    w._source = pg._ranks[peer]
    return _Item(w, p2p=[(is_send, buf, peer, int(tag))],
                 finish=None if is_send else (lambda: _write_back(tensor, buf)), coalesce=coalesce)


def _peer(pg, rank, group_rank, what):
    r = _group_rank(pg, rank, group_rank, what)
    if r == pg._rank:
        raise ValueError(f"Invalid {what} rank: {r} is this rank; a rank cannot send to or "
                         "receive from itself")
    return r


def isend(tensor, dst=None, group=None, tag=0, group_dst=None):
    return _post_send(tensor, dst, group, tag, group_dst, True)


def _post_send(tensor, dst, group, tag, group_dst, coalesce):
    _check_tensor(tensor, "tensor")
    pg = _group(group)
    if pg is None:
        return None
    return pg._submit(_p2p_item(pg, True, tensor, _peer(pg, dst, group_dst, "dst"), tag, coalesce), True)


def send(tensor, dst=None, group=None, tag=0, group_dst=None):
    w = _post_send(tensor, dst, group, tag, group_dst, False)
    if w is not None:
        w.wait()


def irecv(tensor, src=None, group=None, tag=0, group_src=None):
    return _post_recv(tensor, src, group, tag, group_src, True)


def _post_recv(tensor, src, group, tag, group_src, coalesce):
    _check_tensor(tensor, "tensor")
    pg = _group(group)
    if pg is None:
        return None
    if src is None and group_src is None:
        buf = _dense(tensor)
        w = Work([tensor])

        def run():
            w._source = pg._ranks[pg._comm.recv_any(buf, int(tag))]
        return pg._submit(_Item(w, run, finish=lambda: _write_back(tensor, buf)), True)
    return pg._submit(_p2p_item(pg, False, tensor, _peer(pg, src, group_src, "src"), tag, coalesce), True)


def recv(tensor, src=None, group=None, tag=0, group_src=None):
    """Receives into tensor; returns the sender's global rank (-1 when not a member)."""
    w = _post_recv(tensor, src, group, tag, group_src, False)
    if w is None:
        return -1
    w.wait()
    return w._source


class P2POp:
    """One send or receive of batch_isend_irecv: P2POp(dist.isend or
    dist.irecv, tensor, peer, group=None, tag=0)."""

    def __init__(self, op, tensor, peer=None, group=None, tag=0, group_peer=None):
        if op not in (isend, irecv, send, recv):
            raise ValueError("Invalid ``op``. Expected ``op`` to be of type ``torch.distributed.isend`` "
                             "or ``torch.distributed.irecv``.")
        _check_tensor(tensor, "tensor")
        self.op, self.tensor, self.peer, self.group, self.tag = op, tensor, peer, group, tag
        self.group_peer = group_peer


def batch_isend_irecv(p2p_op_list):
    """Every send and receive of the list at once; a list of Works."""
    if not p2p_op_list or not all(isinstance(p, P2POp) for p in p2p_op_list):
        raise ValueError("Invalid ``p2p_op_list``. Each op is expected to to be of type "
                         "``torch.distributed.P2POp``.")
    groups = {id(p.group) for p in p2p_op_list}
    if len(groups) > 1:
        raise ValueError("All ops need to use the same group.")
    pg = _group(p2p_op_list[0].group)
    if pg is None:
        return []
    ops, finishes, works = [], [], []
    for p in p2p_op_list:
        is_send = p.op in (isend, send)
        peer = _peer(pg, p.peer, p.group_peer, "peer")
        it = _p2p_item(pg, is_send, p.tensor, peer, p.tag)
        ops += it.p2p
        if it.finish is not None:
            finishes.append(it.finish)
        works.append(it.work)
    def finish():
        for f in finishes:
            f()
    pg._submit(_Item(works[0], p2p=ops, finish=finish, works=works), True)
    return works


# -------------------------------------------------------- object collectives

def _to_tensor(obj):
    buf = io.BytesIO()
    pickle.Pickler(buf).dump(obj)
    data = buf.getvalue()
    t = ember.frombuffer(bytearray(data), dtype=ember.uint8) if data else ember.empty(0, dtype=ember.uint8)
    return t, len(data)


def _from_tensor(t, n):
    return pickle.loads(bytes(t[:n].numpy()))


def broadcast_object_list(object_list, src=None, group=None, device=None, group_src=None):
    pg = _group(group)
    if pg is None:
        return
    root = _group_rank(pg, src, group_src, "src")
    if pg._rank == root:
        parts = [_to_tensor(o) for o in object_list]
        sizes = ember.tensor([n for _, n in parts], dtype=ember.int64)
    else:
        sizes = ember.zeros(len(object_list), dtype=ember.int64)
    broadcast(sizes, group=group, group_src=root)
    total = int(sizes.sum()) if len(object_list) else 0
    data = _flat_cat([p for p, _ in parts], ember.uint8) if pg._rank == root else \
        ember.empty(total, dtype=ember.uint8)
    broadcast(data, group=group, group_src=root)
    if pg._rank != root:
        off = 0
        for i, n in enumerate(sizes.tolist()):
            object_list[i] = _from_tensor(data[off:off + n], n)
            off += n


def _padded(obj, size):
    t, n = _to_tensor(obj)
    out = ember.zeros(size, dtype=ember.uint8)
    if n:
        out[:n] = t
    return out


def _sizes(pg, group, n):
    sizes = ember.zeros(pg._size, dtype=ember.int64)
    all_gather_into_tensor(sizes, ember.tensor([n], dtype=ember.int64), group=group)
    return sizes.tolist()


def all_gather_object(object_list, obj, group=None):
    pg = _group(group)
    if pg is None:
        return
    _, n = _to_tensor(obj)
    sizes = _sizes(pg, group, n)
    m = max(sizes)
    out = ember.empty(pg._size * m, dtype=ember.uint8)
    all_gather_into_tensor(out, _padded(obj, m), group=group)
    for i, k in enumerate(sizes):
        object_list[i] = _from_tensor(out[i * m:(i + 1) * m], k)


def gather_object(obj, object_gather_list=None, dst=None, group=None, group_dst=None):
    pg = _group(group)
    if pg is None:
        return
    root = _group_rank(pg, dst, group_dst, "dst")
    _, n = _to_tensor(obj)
    sizes = _sizes(pg, group, n)
    m = max(sizes)
    mine = _padded(obj, m)
    outs = [ember.empty(m, dtype=ember.uint8) for _ in range(pg._size)] if pg._rank == root else None
    gather(mine, outs, group=group, group_dst=root)
    if pg._rank == root:
        if object_gather_list is None:
            raise ValueError("gather_object: the destination rank needs object_gather_list")
        for i, k in enumerate(sizes):
            object_gather_list[i] = _from_tensor(outs[i], k)


def scatter_object_list(scatter_object_output_list, scatter_object_input_list=None, src=None,
                        group=None, group_src=None):
    pg = _group(group)
    if pg is None:
        return
    root = _group_rank(pg, src, group_src, "src")
    if not isinstance(scatter_object_output_list, list) or len(scatter_object_output_list) < 1:
        raise ValueError("Expected argument scatter_object_output_list to be a list of size at least 1.")
    meta = ember.zeros(pg._size + 1, dtype=ember.int64)  # the sizes, then their maximum
    if pg._rank == root:
        if scatter_object_input_list is None or len(scatter_object_input_list) != pg._size:
            raise ValueError(f"scatter_object_list: the source rank needs {pg._size} objects")
        ns = [_to_tensor(o)[1] for o in scatter_object_input_list]
        meta = ember.tensor(ns + [max(ns)], dtype=ember.int64)
    broadcast(meta, group=group, group_src=root)
    sizes = meta.tolist()
    m = sizes[-1]
    ins = [_padded(o, m) for o in scatter_object_input_list] if pg._rank == root else None
    out = ember.empty(m, dtype=ember.uint8)
    scatter(out, ins, group=group, group_src=root)
    scatter_object_output_list[0] = _from_tensor(out, sizes[pg._rank])
