"""python -m ember.distributed.run — torchrun for ember.

    python -m ember.distributed.run --nproc-per-node 4 train.py --lr 0.1
    python -m ember.distributed.run --nnodes 2 --node-rank 0 --master-addr node0 \\
        --master-port 29500 --nproc-per-node 8 train.py

Starts --nproc-per-node workers on this node with torchrun's environment
(RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR,
MASTER_PORT, TORCHELASTIC_RUN_ID, ...), so `init_process_group()` (env://)
finds the job; worker rank 0 hosts the TCPStore. The launcher forwards
SIGINT/SIGTERM/SIGHUP to the workers. When a worker fails, the others are
stopped (SIGTERM, then SIGKILL after a grace period) and the launcher
exits 1 naming the failed rank, its exit code or signal and the end of its
stderr (its traceback) — or restarts the whole group, --max-restarts
times. The rendezvous is static (torchrun's c10d elastic rendezvous, with
nodes joining and leaving, is not implemented): --nnodes takes a number,
or MIN:MAX with MIN == MAX.
"""
import argparse
import collections
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid

TAIL_LINES = 60


def _free_port():
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m ember.distributed.run",
                                description="Start a distributed ember job on this node (torchrun's flags).")
    p.add_argument("--nnodes", default="1", help="number of nodes, N or N:N")
    p.add_argument("--nproc-per-node", "--nproc_per_node", default="1",
                   help="workers on this node: a number, or 'cpu' / 'auto' (one per CPU core)")
    p.add_argument("--node-rank", "--node_rank", type=int, default=0)
    p.add_argument("--master-addr", "--master_addr", default="127.0.0.1")
    p.add_argument("--master-port", "--master_port", type=int, default=29500)
    p.add_argument("--rdzv-endpoint", "--rdzv_endpoint", default="",
                   help="host[:port] of the store (instead of --master-addr/--master-port)")
    p.add_argument("--rdzv-backend", "--rdzv_backend", default="static",
                   help="accepted for torchrun compatibility; the rendezvous is always static")
    p.add_argument("--rdzv-id", "--rdzv_id", default="none")
    p.add_argument("--rdzv-conf", "--rdzv_conf", default="")
    p.add_argument("--standalone", action="store_true",
                   help="a single-node job on a free local port")
    p.add_argument("--max-restarts", "--max_restarts", type=int, default=0)
    p.add_argument("--monitor-interval", "--monitor_interval", type=float, default=0.1)
    p.add_argument("--tee", "-t", default="0",
                   help="torchrun's --tee (1: stdout, 2: stderr, 3: both): here any value but 0 "
                        "prefixes the workers' lines with [rankN]:")
    p.add_argument("--role", default="default")
    p.add_argument("-m", "--module", action="store_true", help="run the script as a module (python -m)")
    p.add_argument("--no-python", "--no_python", action="store_true",
                   help="run the script as an executable, not through python")
    p.add_argument("--run-path", "--run_path", action="store_true")
    p.add_argument("training_script")
    p.add_argument("training_script_args", nargs=argparse.REMAINDER)
    a = p.parse_args(argv)
    nn = a.nnodes.split(":")
    if len(nn) == 2 and nn[0] != nn[1]:
        p.error(f"--nnodes {a.nnodes}: elastic node ranges are not supported; give one number")
    try:
        a.nnodes = int(nn[0])
    except ValueError:
        p.error(f"--nnodes must be a number, got {a.nnodes!r}")
    if a.nproc_per_node in ("cpu", "auto"):
        a.nproc_per_node = os.cpu_count() or 1
    else:
        try:
            a.nproc_per_node = int(a.nproc_per_node)
        except ValueError:
            p.error(f"--nproc-per-node must be a number, 'cpu' or 'auto', got {a.nproc_per_node!r}")
    if a.nnodes < 1 or a.nproc_per_node < 1 or not 0 <= a.node_rank < a.nnodes:
        p.error(f"invalid job shape: --nnodes {a.nnodes} --nproc-per-node {a.nproc_per_node} "
                f"--node-rank {a.node_rank}")
    if a.standalone:
        a.master_addr, a.master_port, a.nnodes, a.node_rank = "127.0.0.1", _free_port(), 1, 0
    elif a.rdzv_endpoint:
        host, _, port = a.rdzv_endpoint.rpartition(":") if ":" in a.rdzv_endpoint else (a.rdzv_endpoint, "", "")
        a.master_addr = host.strip("[]") or a.master_addr
        if port:
            a.master_port = int(port)
    return a


def _command(a):
    if a.no_python:
        return [a.training_script, *a.training_script_args]
    if a.module:
        return [sys.executable, "-u", "-m", a.training_script, *a.training_script_args]
    return [sys.executable, "-u", a.training_script, *a.training_script_args]


class _Worker:
    def __init__(self, local_rank, rank, proc, prefix):
        self.local_rank, self.rank, self.proc = local_rank, rank, proc
        self.tail = collections.deque(maxlen=TAIL_LINES)
        self.pumps = [threading.Thread(target=self._pump, args=(proc.stdout, sys.stdout, prefix, False), daemon=True),
                      threading.Thread(target=self._pump, args=(proc.stderr, sys.stderr, prefix, True), daemon=True)]
        for t in self.pumps:
            t.start()

    def _pump(self, src, dst, prefix, keep):
        tag = f"[rank{self.rank}]:" if prefix else ""
        for line in iter(src.readline, b""):
            text = line.decode(errors="replace")
            if keep:
                self.tail.append(text)
            dst.write(tag + text)
            dst.flush()
        src.close()


def _start(a, run_id, restart):
    world = a.nnodes * a.nproc_per_node
    workers = []
    for local in range(a.nproc_per_node):
        rank = a.node_rank * a.nproc_per_node + local
        env = dict(os.environ)
        env.update(
            RANK=str(rank), LOCAL_RANK=str(local), WORLD_SIZE=str(world),
            LOCAL_WORLD_SIZE=str(a.nproc_per_node), GROUP_RANK=str(a.node_rank),
            GROUP_WORLD_SIZE=str(a.nnodes), ROLE_RANK=str(rank), ROLE_WORLD_SIZE=str(world),
            ROLE_NAME=a.role, MASTER_ADDR=a.master_addr, MASTER_PORT=str(a.master_port),
            TORCHELASTIC_RUN_ID=run_id, TORCHELASTIC_RESTART_COUNT=str(restart),
            TORCHELASTIC_MAX_RESTARTS=str(a.max_restarts), PYTHONUNBUFFERED="1")
        if "OMP_NUM_THREADS" not in os.environ and a.nproc_per_node > 1:
            env["OMP_NUM_THREADS"] = "1"  # torchrun's default: workers don't oversubscribe the cores
        proc = subprocess.Popen(_command(a), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
        workers.append(_Worker(local, rank, proc, str(a.tee) != "0"))
    return workers


def _stop(workers, sig=signal.SIGTERM, grace=5.0):
    for w in workers:
        if w.proc.poll() is None:
            try:
                os.killpg(w.proc.pid, sig)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + grace
    for w in workers:
        try:
            w.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            try:
                os.killpg(w.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            w.proc.wait()
    for w in workers:
        for t in w.pumps:
            t.join(timeout=2)


def _describe(code):
    if code < 0:
        try:
            return f"killed by signal {-code} ({signal.Signals(-code).name})"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


class _Interrupted(Exception):
    def __init__(self, sig):
        self.sig = sig


def _watch(a, workers):
    """None when every worker succeeded, else the worker that failed first.
    Workers that fail in the same poll are told apart by their stderr: a
    rank that only reports losing its peer (DistError) is a casualty, not
    the cause."""
    while True:
        failed = [w for w in workers if w.proc.poll() not in (None, 0)]
        if failed:
            time.sleep(0.1)
            for t in (t for w in failed for t in w.pumps):
                t.join(timeout=1)
            causes = [w for w in failed if not any("DistBackendError" in l or "DistError" in l
                                                   for l in w.tail)]
            return (causes or failed)[0]
        if all(w.proc.poll() == 0 for w in workers):
            return None
        time.sleep(a.monitor_interval)


def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)
    run_id = a.rdzv_id if a.rdzv_id != "none" else uuid.uuid4().hex[:12]
    workers = []

    def on_signal(sig, frame):
        raise _Interrupted(sig)
    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        for restart in range(a.max_restarts + 1):
            workers = _start(a, run_id, restart)
            failed = _watch(a, workers)
            if failed is None:
                for w in workers:
                    for t in w.pumps:
                        t.join(timeout=5)
                return 0
            others = [w for w in workers if w is not failed]
            _stop(others)
            for t in failed.pumps:
                t.join(timeout=2)
            code = failed.proc.returncode
            report = (f"\nember.distributed.run: worker rank {failed.rank} (local rank "
                      f"{failed.local_rank}) failed with {_describe(code)}; stopped the other "
                      f"{len(others)} worker(s).\n")
            if failed.tail:
                report += f"--- last lines of rank {failed.rank}'s stderr ---\n" + "".join(failed.tail)
            sys.stderr.write(report)
            if restart < a.max_restarts:
                sys.stderr.write(f"ember.distributed.run: restarting the workers "
                                 f"({restart + 1}/{a.max_restarts})\n")
                continue
            return 1
    except _Interrupted as e:
        # forward the signal, give the workers time to exit, then make sure
        sys.stderr.write(f"ember.distributed.run: got {signal.Signals(e.sig).name}; stopping the workers\n")
        _stop(workers, sig=e.sig)
        return 128 + e.sig
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    return 1


if __name__ == "__main__":
    sys.exit(main())
