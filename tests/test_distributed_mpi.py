"""The "mpi" backend of ember.distributed, run under a real MPI launcher:
`mpiexec -n N python -m mpi_workers SCENARIO` (tests/mpi_workers.py; the
backend-neutral scenarios come from dist_workers.py with
EMBER_DIST_BACKEND=mpi). Expected values are NumPy's. Skips when no MPICH-
family launcher (Hydra's mpiexec: the `mpich` wheel, MPICH, Intel MPI) or
no libmpi with MPICH's ABI is found; EMBER_MPIEXEC names a launcher."""
import os
import shutil
import signal
import subprocess
import sys

import pytest

from dist_common import HERE, worker_env

import ember.distributed as dist


def _find_mpiexec():
    for c in (os.environ.get("EMBER_MPIEXEC"), os.path.join(os.path.dirname(sys.executable), "mpiexec"),
              shutil.which("mpiexec")):
        if c and os.access(c, os.X_OK):
            return c
    return None


def _launcher():
    """(mpiexec, env) or a reason to skip."""
    mpiexec = _find_mpiexec()
    if mpiexec is None:
        return None, "no mpiexec (pip install mpich, or set EMBER_MPIEXEC)"
    try:
        v = subprocess.run([mpiexec, "--version"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"{mpiexec} --version failed: {e}"
    if "HYDRA" not in v:
        return None, f"{mpiexec} is not MPICH's Hydra launcher (ember's mpi backend speaks MPICH's ABI)"
    # the library is looked up beside the launcher (PATH) as a worker would
    env = worker_env({"PATH": os.path.dirname(mpiexec) + os.pathsep + os.environ.get("PATH", "")})
    r = subprocess.run([sys.executable, "-c", "from ember.distributed import _backends; "
                        "print(_backends.mpi_load())"], env=env, capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        return None, "no MPI library with MPICH's ABI loads: " + r.stderr.strip()[-300:]
    return (mpiexec, env), None


_LAUNCH, _WHY = _launcher()
needs_mpi = pytest.mark.skipif(_LAUNCH is None, reason=f"MPI absent: {_WHY}")


def run_mpi(scenario, n, timeout=60):
    """mpiexec -n n on the loopback interface; fails the test on a timeout
    (the whole launcher's process group is killed)."""
    mpiexec, env = _LAUNCH
    env = dict(env, EMBER_DIST_BACKEND="mpi")
    p = subprocess.Popen([mpiexec, "-iface", "lo", "-n", str(n), sys.executable, "-m", "mpi_workers",
                          scenario], cwd=HERE, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        pytest.fail(f"{scenario} under mpiexec -n {n} did not finish within {timeout} s:\n{err[-4000:]}")
    assert p.returncode == 0, f"{scenario} under mpiexec -n {n} exited {p.returncode}:\n{err[-6000:]}"
    assert out.count("ok") >= n or scenario == "collectives", out
    return out


@needs_mpi
@pytest.mark.parametrize("n", [2, 4])
def test_collectives_every_dtype_and_op_against_numpy(n):
    run_mpi("collectives", n, timeout=120)


@needs_mpi
@pytest.mark.parametrize("scenario", ["ddp", "zero", "sync_bn"])
def test_ddp_zero_and_sync_bn_under_mpi_match_numpy(scenario):
    run_mpi(scenario, 2)


@needs_mpi
@pytest.mark.parametrize("n", [2, 3])
def test_complex_bad_input_subgroups_threads_and_timeouts(n):
    run_mpi("extra", n)


def test_mpi_is_unavailable_outside_a_launcher():
    # this pytest process was not started by mpiexec
    if any(v in os.environ for v in ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID")):
        pytest.skip("the test process itself runs under a launcher")
    assert not dist.is_mpi_available() and not dist.is_backend_available("mpi")
    with pytest.raises(RuntimeError, match="MPI launcher"):
        dist.init_process_group("mpi")
    assert not dist.is_initialized()
