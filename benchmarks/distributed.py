"""all_reduce bus bandwidth (4 KB .. 256 MB) and a DDP training step on
2 ranks over loopback: ember's gloo (its own C TCP transport) next to
torch's gloo when PyTorch is installed, as ratios.

    python -m benchmarks.distributed [--ranks 2] [--max-mb 256] [--quick] [--torch-python PY]

Bus bandwidth is nccl-tests' definition: size * 2 (n - 1) / n / time.
Each library runs in its own set of worker processes (one library at a
time), started here with the launcher's environment variables.
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import time

WORKER = r'''
import json, sys, time
lib = __import__(sys.argv[1])
dist = lib.distributed
import importlib; importlib.import_module(sys.argv[1] + ".distributed")
max_mb, reps = float(sys.argv[2]), int(sys.argv[3])
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
out = {"allreduce": {}, "ddp": None}
size = 4096
while size <= max_mb * 2**20:
    t = lib.ones(size // 4)
    dist.all_reduce(t)
    n = max(2, min(reps, int(2e8 // size) + 2))
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(n):
        dist.all_reduce(t)
    dt = (time.perf_counter() - t0) / n
    out["allreduce"][size] = size * 2 * (world - 1) / world / dt
    size *= 4
# DDP step: a 4-layer MLP, 1024 wide, batch 64 per rank
nn = lib.nn
lib.manual_seed(0)
model = nn.Sequential(*[m for _ in range(4) for m in (nn.Linear(1024, 1024), nn.ReLU())])
ddp = nn.parallel.DistributedDataParallel(model)
opt = lib.optim.SGD(ddp.parameters(), lr=0.01)
x, y = lib.randn(64, 1024), lib.randn(64, 1024)
def step():
    opt.zero_grad()
    nn.functional.mse_loss(ddp(x), y).backward()
    opt.step()
for _ in range(3):
    step()
dist.barrier()
t0 = time.perf_counter()
for _ in range(reps):
    step()
out["ddp"] = (time.perf_counter() - t0) / reps
if rank == 0:
    print("RESULT " + json.dumps(out), flush=True)
dist.destroy_process_group()
'''


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(lib, ranks, max_mb, reps, python=sys.executable):
    port = free_port()
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    procs = []
    for r in range(ranks):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(ranks), LOCAL_RANK=str(r),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS="1",
                   PYTHONPATH=os.pathsep.join([os.path.join(here, "python"), os.environ.get("PYTHONPATH", "")]))
        procs.append(subprocess.Popen([python, "-c", WORKER, lib, str(max_mb), str(reps)],
                                      env=env, stdout=subprocess.PIPE, text=True))
    result = None
    for p in procs:
        out, _ = p.communicate(timeout=1800)
        for line in out.splitlines():
            if line.startswith("RESULT "):
                result = json.loads(line[7:])
        if p.returncode:
            raise SystemExit(f"{lib} worker exited {p.returncode}")
    return result


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--max-mb", type=float, default=256)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--torch-python", default=None,
                    help="the Python whose torch to compare with (default: this one, when it has torch)")
    a = ap.parse_args()
    reps = 3 if a.quick else 20
    res = {"ember": run("ember", a.ranks, a.max_mb, reps)}
    tp = a.torch_python or sys.executable
    if subprocess.run([tp, "-c", "import torch"], capture_output=True).returncode == 0:
        res["torch"] = run("torch", a.ranks, a.max_mb, reps, python=tp)
    e, t = res["ember"], res.get("torch")
    print(f"all_reduce bus bandwidth, {a.ranks} ranks on loopback (GB/s)")
    print(f"{'size':>10} {'ember':>10}" + (f" {'torch':>10} {'ember/torch':>12}" if t else ""))
    for size, bw in e["allreduce"].items():
        line = f"{int(size) // 1024:>8}KB {bw / 1e9:>10.3f}"
        if t:
            tb = t["allreduce"][size]
            line += f" {tb / 1e9:>10.3f} {bw / tb:>11.2f}x"
        print(line)
    line = f"DDP step (4x Linear(1024), batch 64/rank): ember {e['ddp'] * 1e3:.1f} ms"
    if t:
        line += f", torch {t['ddp'] * 1e3:.1f} ms, ember/torch time {e['ddp'] / t['ddp']:.2f}x"
    print(line)


if __name__ == "__main__":
    main()
