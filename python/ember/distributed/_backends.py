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

def _cuda_module():
    try:
        from ember import _cuda
    except ImportError:
        return None
    return _cuda if hasattr(_cuda, "_NcclComm") else None


def nccl_available():
    """libnccl loads and a CUDA device exists."""
    m = _cuda_module()
    if m is None:
        return False
    try:
        return bool(m._nccl_available())
    except RuntimeError:
        return False


def nccl_why():
    """Why the nccl backend cannot run here (for the error message)."""
    m = _cuda_module()
    if m is None:
        return "ember was built without its CUDA extension (nvcc), which holds the nccl backend"
    return m._nccl_why() or "it can run"


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
    return m._NcclComm(rank, size, bytes(uid), ember.cuda.current_device(), timeout.total_seconds())
