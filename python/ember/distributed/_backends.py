"""The backends behind a ProcessGroup: each makes a communicator object with
one method set (all_reduce, broadcast, reduce, all_gather, reduce_scatter,
gather, scatter, all_to_all, p2p, recv_any, barrier, close), so the
collectives in distributed_c10d run the same on every backend.

  gloo  _C._GlooComm: ember's own CPU transport over TCP (csrc/distributed)
  mpi   _C._MpiComm: libmpi loaded at run time (csrc/distributed/mpi.c, MPICH's ABI)
  nccl  ember._cuda._NcclComm: libnccl loaded at run time (csrc/cuda/nccl.cpp), CUDA tensors
"""
import glob
import os
import sys

from ember import _C

from .store import DistStoreError

# ------------------------------------------------------------------ gloo

def gloo_comm(store, rank, size, timeout):
    comm = _C._GlooComm(rank, size, timeout.total_seconds(), store._local_address())
    try:
        store.set(f"gloo/addr/{rank}", f"{store._local_address()}\n{comm.port}")
        hosts, ports = [], []
        for r in range(size):
            try:
                v = store.get(f"gloo/addr/{r}").decode().split("\n")
            except DistStoreError as e:
                raise DistStoreError(
                    f"rank {rank}: rank {r} did not join the process group within "
                    f"{timeout.total_seconds():g} s (world_size={size}; is every rank started, "
                    f"and is world_size right?): {e}") from None
            hosts.append(v[0])
            ports.append(int(v[1]))
        comm.connect(hosts, ports)
    except BaseException:
        comm.close()
        raise
    return comm


# ------------------------------------------------------------------- mpi

_MPI_LAUNCH_VARS = ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID")
_mpi_state = {}  # "version" once loaded, "error" when it cannot be


def mpi_launched():
    """True when an MPI launcher (mpirun/mpiexec/srun) started this process."""
    return any(v in os.environ for v in _MPI_LAUNCH_VARS)


def mpi_library_candidates():
    """Where libmpi (MPICH's ABI, soname libmpi.so.12) is looked for, in order:
    EMBER_MPI_LIBRARY; the `mpich` wheel's lib dir (it installs into the
    environment's prefix) and the one of the mpiexec on PATH; the system's."""
    if os.environ.get("EMBER_MPI_LIBRARY"):
        return [os.environ["EMBER_MPI_LIBRARY"]]
    dirs = [os.path.join(sys.prefix, "lib"), os.path.join(sys.base_prefix, "lib")]
    for p in os.environ.get("PATH", "").split(os.pathsep):
        if p and os.path.exists(os.path.join(p, "mpiexec")):
            dirs.append(os.path.join(os.path.dirname(os.path.realpath(os.path.join(p, "mpiexec"))),
                                     "..", "lib"))
    found = []
    for d in dirs:
        for name in ("libmpi.so.12", "libmpich.so.12"):
            f = os.path.join(d, name)
            if os.path.exists(f) and f not in found:
                found.append(f)
    for pat in ("/usr/lib/*-linux-gnu/libmpich.so.12", "/usr/lib/*-linux-gnu/libmpi.so.12",
                "/usr/lib64/mpich/lib/libmpi.so.12", "/usr/lib64/libmpich.so.12"):
        found += sorted(glob.glob(pat))
    return found + ["libmpi.so.12"]  # the loader's own search (LD_LIBRARY_PATH, ldconfig)


def mpi_load():
    """The loaded library's version string, or raises RuntimeError saying why not."""
    if "version" in _mpi_state:
        return _mpi_state["version"]
    if "error" not in _mpi_state:
        errors = []
        for path in mpi_library_candidates():
            try:
                _mpi_state["version"] = _C._mpi_load(path)
                _mpi_state["path"] = path
                return _mpi_state["version"]
            except OSError as e:
                errors.append(str(e))
        _mpi_state["error"] = "; ".join(errors)
    raise RuntimeError("Distributed package doesn't have MPI built in: no MPI library with "
                       "MPICH's ABI could be loaded (install one, e.g. `pip install mpich`, or set "
                       f"EMBER_MPI_LIBRARY): {_mpi_state['error']}")


def mpi_available():
    if not mpi_launched():
        return False
    try:
        mpi_load()
        return True
    except RuntimeError:
        return False


def mpi_world_comm(timeout):
    if not mpi_launched():
        raise RuntimeError("the mpi backend needs the processes started by an MPI launcher "
                           "(mpiexec, mpirun or srun): none of " + ", ".join(_MPI_LAUNCH_VARS)
                           + " is set")
    mpi_load()
    comm = _C._MpiComm(timeout.total_seconds())
    if not _mpi_state.get("atexit"):
        import atexit
        # after every group is gone (registered first, runs last); a rank whose
        # operation timed out waits up to 5 s for the late ranks to finish it
        atexit.register(_C._mpi_finalize, 5.0)
        _mpi_state["atexit"] = True
    return comm


# ------------------------------------------------------------------ nccl

_nccl_state = {}


def _cuda_module():
    try:
        from ember import _cuda
    except ImportError:
        return None
    return _cuda if hasattr(_cuda, "_NcclComm") else None


def nccl_library_candidates():
    """Where libnccl.so.2 is looked for: EMBER_NCCL_LIBRARY; the
    nvidia-nccl-cu13 (or -cu12) wheel's lib dir on sys.path; the CUDA
    toolkit's lib64; the loader's own search."""
    if os.environ.get("EMBER_NCCL_LIBRARY"):
        return [os.environ["EMBER_NCCL_LIBRARY"]]
    found = []
    for p in sys.path:
        f = os.path.join(p or ".", "nvidia", "nccl", "lib", "libnccl.so.2")
        if os.path.exists(f) and f not in found:
            found.append(f)
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and os.path.exists(os.path.join(root, "lib64", "libnccl.so.2")):
            found.append(os.path.join(root, "lib64", "libnccl.so.2"))
    return found + ["libnccl.so.2"]


def nccl_load():
    """NCCL's version code once libnccl is loaded, else None (the reasons are kept
    for nccl_why)."""
    m = _cuda_module()
    if m is None:
        return None
    if "version" not in _nccl_state and "error" not in _nccl_state:
        errors = []
        for path in nccl_library_candidates():
            try:
                _nccl_state["version"] = m._nccl_load(path)
                break
            except OSError as e:
                errors.append(str(e))
        else:
            _nccl_state["error"] = "; ".join(errors)
    return _nccl_state.get("version")


def nccl_available():
    """libnccl loads and a CUDA device exists (the real backend's count, not a test double's)."""
    return nccl_load() is not None and bool(_cuda_module()._nccl_available())


def nccl_why():
    """Why the nccl backend cannot run here (for the error message)."""
    m = _cuda_module()
    if m is None:
        return "ember was built without its CUDA extension (nvcc), which holds the nccl backend"
    if nccl_load() is None:
        return "libnccl.so.2 could not be loaded: " + _nccl_state.get("error", "?")
    return m._nccl_why() or "it can run"


def _dtype_codes():
    import ember
    names = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
             "float64", "complex64", "complex128"]  # ember's dtype codes (csrc/ember.h)
    return {getattr(ember, n): i for i, n in enumerate(names)}


class NcclComm:
    """The nccl communicator with the method set of the CPU ones: tensors in,
    buffer descriptors (data pointer, numel, dtype code, device) to
    ember._cuda._NcclComm."""

    def __init__(self, comm):
        self._c = comm
        self._codes = _dtype_codes()
        self.rank, self.size = comm.rank, comm.size

    def _d(self, t, what):
        if t.device.type != "cuda":
            raise RuntimeError(f"{what}: the nccl backend takes CUDA tensors; this one is on "
                               f"{t.device} (use the gloo backend for CPU tensors)")
        if not t.is_contiguous():
            raise RuntimeError(f"{what}: the transport takes contiguous tensors")
        return (t.data_ptr(), t.numel(), self._codes[t.dtype], t.device.index)

    def all_reduce(self, t, op):
        self._c.all_reduce(self._d(t, "all_reduce"), op)

    def broadcast(self, t, root):
        self._c.broadcast(self._d(t, "broadcast"), root)

    def reduce(self, t, root, op):
        self._c.reduce(self._d(t, "reduce"), root, op)

    def all_gather(self, out, t):
        self._c.all_gather(self._d(out, "all_gather"), self._d(t, "all_gather"))

    def reduce_scatter(self, out, t, op):
        self._c.reduce_scatter(self._d(out, "reduce_scatter"), self._d(t, "reduce_scatter"), op)

    def gather(self, t, big, root):
        self._c.gather(self._d(t, "gather"), None if big is None else self._d(big, "gather"), root)

    def scatter(self, t, big, root):
        self._c.scatter(self._d(t, "scatter"), None if big is None else self._d(big, "scatter"), root)

    def all_to_all(self, out, t, send_counts, recv_counts):
        self._c.all_to_all(self._d(out, "all_to_all"), self._d(t, "all_to_all"), send_counts, recv_counts)

    def p2p(self, ops):
        self._c.p2p([(s, self._d(t, "send" if s else "recv"), peer, tag) for s, t, peer, tag in ops])

    def recv_any(self, t, tag):
        return self._c.recv_any(t, tag)

    def barrier(self):
        self._c.barrier()

    def close(self):
        self._c.close()


def nccl_comm(store, rank, size, timeout):
    import ember
    if not nccl_available():
        raise RuntimeError(f"Distributed package doesn't have NCCL built in ({nccl_why()})")
    m = _cuda_module()
    # the unique id names the communicator: rank 0 makes it, the store carries it
    if rank == 0:
        uid = m._nccl_unique_id()
        store.set("nccl/uid", uid)
    else:
        try:
            uid = store.get("nccl/uid")
        except DistStoreError as e:
            raise DistStoreError(f"rank {rank}: rank 0 did not publish the NCCL id within "
                                 f"{timeout.total_seconds():g} s: {e}") from None
    dev = ember.cuda.current_device()
    return NcclComm(m._NcclComm(rank, size, bytes(uid), dev, timeout.total_seconds()))
