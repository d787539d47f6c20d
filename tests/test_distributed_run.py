"""python -m ember.distributed.run: the environment it gives workers, a
failing worker stopping the job, signal forwarding and restarts. Each test
runs the launcher in a subprocess bounded by a timeout."""
import os
import signal
import subprocess
import sys
import textwrap
import time

from dist_common import free_port, worker_env

SCRIPT = textwrap.dedent("""
    import os, sys, time, signal
    import ember, ember.distributed as dist
    mode = sys.argv[1]
    if mode == "term":
        def bye(sig, frame):
            open(os.path.join(sys.argv[2], "term" + os.environ["RANK"]), "w").close()
            sys.exit(3)
        signal.signal(signal.SIGTERM, bye)
        open(os.path.join(sys.argv[2], "ready" + os.environ["RANK"]), "w").close()
        time.sleep(60)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    if mode == "fail" and rank == 1:
        raise ValueError("worker one broke")
    if mode == "flaky" and rank == 1 and os.environ["TORCHELASTIC_RESTART_COUNT"] == "0":
        os._exit(7)
    if mode == "fail":
        time.sleep(60)  # never finishes on its own: the launcher must stop it
    t = ember.tensor([float(rank + 1)])
    dist.all_reduce(t)
    keys = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR",
            "TORCHELASTIC_RESTART_COUNT"]
    print("env", *[os.environ[k] for k in keys], "sum", t.item(), flush=True)
    dist.destroy_process_group()
""")


def launch(tmp_path, *args, timeout=60):
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    cmd = [sys.executable, "-m", "ember.distributed.run", *args, str(script)]
    return cmd


def run(cmd, timeout=60):
    return subprocess.run(cmd, env=worker_env(), capture_output=True, text=True, timeout=timeout)


def test_workers_get_torchrun_environment_and_prefixed_output(tmp_path):
    r = run(launch(tmp_path, "--nproc-per-node", "2", "--master-port", str(free_port()), "--tee", "3")
            + ["ok"])
    assert r.returncode == 0, r.stderr
    lines = sorted(l for l in r.stdout.splitlines() if "env" in l)
    assert lines == ["[rank0]:env 0 0 2 2 0 127.0.0.1 0 sum 3.0",
                     "[rank1]:env 1 1 2 2 0 127.0.0.1 0 sum 3.0"], r.stdout


def test_failed_worker_stops_the_job_naming_rank_and_traceback(tmp_path):
    t0 = time.monotonic()
    r = run(launch(tmp_path, "--standalone", "--nproc-per-node", "2") + ["fail"])
    assert time.monotonic() - t0 < 30  # the sleeping rank 0 was stopped
    assert r.returncode == 1
    assert "worker rank 1 (local rank 1) failed with exit code 1" in r.stderr, r.stderr
    assert "ValueError: worker one broke" in r.stderr.split("worker rank 1")[1]


def test_restart_after_failure(tmp_path):
    r = run(launch(tmp_path, "--standalone", "--nproc-per-node", "2", "--max-restarts", "1") + ["flaky"])
    assert r.returncode == 0, r.stderr
    assert "failed with exit code 7" in r.stderr and "restarting the workers (1/1)" in r.stderr
    assert sorted(l.split()[-3] for l in r.stdout.splitlines() if l.startswith("env")) == ["1", "1"]


def test_sigterm_is_forwarded_to_the_workers(tmp_path):
    cmd = launch(tmp_path, "--standalone", "--nproc-per-node", "2") + ["term", str(tmp_path)]
    p = subprocess.Popen(cmd, env=worker_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while not all((tmp_path / f"ready{r}").exists() for r in range(2)):
            assert time.monotonic() < deadline and p.poll() is None, "workers did not start"
            time.sleep(0.05)
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 128 + signal.SIGTERM, err
    assert (tmp_path / "term0").exists() and (tmp_path / "term1").exists()


def test_bad_flags():
    r = run([sys.executable, "-m", "ember.distributed.run", "--nnodes", "1:4", "x.py"])
    assert r.returncode == 2 and "elastic" in r.stderr
