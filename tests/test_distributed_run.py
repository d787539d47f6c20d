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


TORCH_DDP_SCRIPT = textwrap.dedent("""
    # written for PyTorch: run unchanged through `-m ember.as_torch`
    import numpy as np
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(3, 1, dtype=torch.float64))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = np.random.default_rng(1)
    X, Y = g.standard_normal((8, 3)), g.standard_normal((8, 1))
    half = slice(rank * 4, rank * 4 + 4)
    for _ in range(5):
        opt.zero_grad()
        loss = ((model(torch.tensor(X[half])) - torch.tensor(Y[half])) ** 2).mean()
        loss.backward()
        opt.step()
    w = model.module.weight.detach().numpy().ravel().tolist() + model.module.bias.detach().numpy().tolist()
    print("params", rank, " ".join(repr(v) for v in w), flush=True)
    dist.destroy_process_group()
""")


def test_an_unchanged_torch_ddp_script_runs_under_the_launcher_and_as_torch(tmp_path):
    import numpy as np
    script = tmp_path / "train.py"
    script.write_text(TORCH_DDP_SCRIPT)
    r = run([sys.executable, "-m", "ember.distributed.run", "--nproc-per-node", "2", "--master-port",
             str(free_port()), "-m", "ember.as_torch", str(script)], timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    got = {}
    for line in r.stdout.splitlines():
        if line.startswith("params"):
            _, rank, *vals = line.split()
            got[int(rank)] = np.array([float(v) for v in vals])
    assert set(got) == {0, 1}, r.stdout
    # NumPy: the same start (rank 0's, broadcast by DDP), gradient of the mean
    # loss over the whole batch (DDP averages the two halves' gradients)
    import ember
    ember.manual_seed(0)
    lin = ember.nn.Linear(3, 1, dtype=ember.float64)
    w, b = lin.weight.detach().numpy().ravel().copy(), lin.bias.detach().numpy().copy()
    g = np.random.default_rng(1)
    X, Y = g.standard_normal((8, 3)), g.standard_normal((8, 1))
    for _ in range(5):
        err = X @ w[:, None] + b - Y
        gw = sum(2 * X[h].T @ err[h] / 4 for h in (slice(0, 4), slice(4, 8))).ravel() / 2
        gb = sum(2 * err[h].sum(0) / 4 for h in (slice(0, 4), slice(4, 8))) / 2
        w, b = w - 0.1 * gw, b - 0.1 * gb
    for rank in (0, 1):
        np.testing.assert_allclose(got[rank], np.concatenate([w, b]), rtol=1e-12, atol=1e-12)
