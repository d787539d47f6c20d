"""The "nccl" backend of ember.distributed: two processes, one GPU each
(tests/nccl_workers.py), every collective against NumPy. Skips unless the
real CUDA extension is built, libnccl loads and two CUDA devices exist; the
availability answers are checked everywhere."""
import subprocess
import sys

import pytest

from dist_common import check_ok, run_workers, worker_env

import ember.distributed as dist


def _gpus_for_nccl():
    """(number of CUDA devices, whether NCCL is available), asked in a fresh
    process so that this one's CUDA state (or test double) does not count."""
    code = ("import ember, ember.distributed as d\n"
            "from ember.distributed import _backends as b\n"
            "m = b._cuda_module()\n"
            "n = ember.cuda.device_count() if b.nccl_load() and m._nccl_available() else 0\n"
            "print(n, d.is_nccl_available())")
    r = subprocess.run([sys.executable, "-c", code], env=worker_env(), capture_output=True, text=True,
                       timeout=120)
    if r.returncode != 0:
        return 0, False
    n, avail = r.stdout.split()
    return int(n), avail == "True"


def test_nccl_availability_is_true_only_with_the_library_and_a_device():
    from ember.distributed import _backends
    avail = dist.is_nccl_available()
    assert avail == dist.is_backend_available("nccl")
    if _backends._cuda_module() is None or _backends.nccl_load() is None:
        assert not avail
        with pytest.raises(RuntimeError, match="NCCL"):
            dist.init_process_group("nccl", init_method="tcp://127.0.0.1:1", rank=0, world_size=1)
        assert not dist.is_initialized()
    else:
        assert avail == bool(_backends._cuda_module()._nccl_available())


def test_nccl_library_loads_and_refuses_cleanly_without_a_device():
    """Where ember._cuda is built and libnccl is found (a CUDA toolkit without a GPU,
    say): the id is NCCL's 128 bytes, and a communicator on a device that does not
    exist raises instead of crashing."""
    from ember.distributed import _backends
    m = _backends._cuda_module()
    if m is None or _backends.nccl_load() is None:
        pytest.skip("ember._cuda is not built here, or libnccl.so.2 is not found")
    assert _backends.nccl_load() >= 20700
    uid = m._nccl_unique_id()
    assert isinstance(uid, bytes) and len(uid) == 128
    with pytest.raises(ValueError, match="128 bytes"):
        m._NcclComm(0, 1, b"x", 0)
    with pytest.raises(RuntimeError):
        m._NcclComm(0, 1, uid, 1000)  # no such device
    if not m._nccl_available():
        assert "device" in m._nccl_why() and "no CUDA device" in _backends.nccl_why()


def test_nccl_collectives_on_two_gpus_against_numpy():
    n, avail = _gpus_for_nccl()
    if not avail or n < 2:
        pytest.skip(f"needs ember's CUDA extension, libnccl and 2 CUDA devices (nccl available: {avail}, "
                    f"devices: {n})")
    check_ok(run_workers("collectives", 2, timeout=180, module="nccl_workers"))
