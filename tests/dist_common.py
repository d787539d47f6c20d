"""Multi-process harness for the ember.distributed tests: starts `world`
workers (tests/dist_workers.py, one scenario each) on 127.0.0.1 with a free
port, bounded by a timeout so a hang fails the test instead of stalling it."""
import os
import socket
import subprocess
import sys

import pytest

import ember

HERE = os.path.dirname(os.path.abspath(__file__))
# where the ember under test was imported from (site-packages when installed, python/ in a
# development build): child processes must import the same one
PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(ember.__file__)))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker_env(extra=None):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([PYTHON_DIR, HERE, env.get("PYTHONPATH", "")])
    env["OMP_NUM_THREADS"] = "1"
    env.update(extra or {})
    return env


def run_workers(scenario, world, timeout=60, env=None, per_rank_env=None, module="dist_workers"):
    """[(returncode, stdout, stderr)] per rank; fails the test on a timeout.
    `module` holds the scenarios (dist_workers, or nccl_workers for GPUs)."""
    port = free_port()
    procs = []
    for rank in range(world):
        e = worker_env({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(rank),
                        "WORLD_SIZE": str(world), "LOCAL_RANK": str(rank), **(env or {})})
        if per_rank_env:
            e.update(per_rank_env(rank))
        procs.append(subprocess.Popen([sys.executable, "-m", module, scenario], env=e,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    results, hung = [], False
    for p in procs:
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            hung = True
            for q in procs:
                q.kill()
            out, err = p.communicate()
        results.append((p.returncode, out, err))
    if hung:
        pytest.fail(f"{scenario}: workers did not finish within {timeout} s:\n"
                    + "\n".join(f"rank {i}: {err[-3000:]}" for i, (_, _, err) in enumerate(results)))
    return results


def check_ok(results):
    bad = [(i, rc, err) for i, (rc, _, err) in enumerate(results) if rc != 0]
    assert not bad, "\n".join(f"rank {i} exited {rc}:\n{err[-4000:]}" for i, rc, err in bad)
