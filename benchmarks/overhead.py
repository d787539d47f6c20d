"""Per-op overhead as instructions per call, counted by valgrind's callgrind:
unlike wall time, the count does not move with the load of a shared machine,
so two builds can be compared to a percent.

    python -m benchmarks.overhead                      # this tree's ember
    python -m benchmarks.overhead --against OLD/python # and another build, side by side

Each case runs N times in a fresh interpreter and 0 times in another; the
difference over N is the cost of one call, the Python loop around it
included (the same for both builds). Needs valgrind on PATH.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

CASES = {
    "a + b (4 f32)": "x + y",
    "ember.add(a, b)": "ember.add(x, y)",
    "a.add(b)": "x.add(y)",
    "a.add_(b)": "x.add_(y)",
    "a * 2.0": "x * 2.0",
    "a.sum()": "x.sum()",
    "a[0]": "x[0]",
    "ember.zeros(4)": "ember.zeros(4)",
    "F.linear(a, Parameter)": "F.linear(m, w)",
    "10 muls + backward": "chain()",
}

PROGRAM = """
import sys, ember
F = ember.nn.functional
x = ember.ones(4); y = ember.ones(4); m = ember.ones(2, 4); w = ember.nn.Parameter(ember.ones(4, 4))
def chain():
    a = ember.ones(4, requires_grad=True)
    b = a
    for _ in range(10):
        b = b * 1.0
    b.sum().backward()
n = int(sys.argv[1])
for _ in range(n):
    {stmt}
"""


def count(pythonpath, stmt, n):
    with tempfile.TemporaryDirectory() as d:
        prog = os.path.join(d, "case.py")
        with open(prog, "w") as f:
            f.write(PROGRAM.format(stmt=stmt))
        # one thread: an idle BLAS or OpenMP worker spinning would be counted too
        env = dict(os.environ, PYTHONPATH=pythonpath, PYTHONHASHSEED="0", OMP_NUM_THREADS="1",
                   OPENBLAS_NUM_THREADS="1")
        r = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={d}/cg.out", sys.executable,
                            prog, str(n)], capture_output=True, text=True, env=env)
        m = re.search(r"Collected : (\d+)", r.stderr)
        if not m:
            raise RuntimeError(f"callgrind gave no count:\n{r.stderr[-2000:]}")
        return int(m.group(1))


def per_call(pythonpath, stmt, n):
    return (count(pythonpath, stmt, n) - count(pythonpath, stmt, 0)) / n


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--against", help="the python/ folder of another ember build")
    ap.add_argument("-n", type=int, default=50000, help="calls per case (default 50000)")
    ap.add_argument("--filter", default="", help="only cases whose name contains this")
    args = ap.parse_args()
    here = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python")
    head = f"{'case':28s}{'this tree':>14s}"
    if args.against:
        head += f"{'other':>14s}{'ratio':>8s}"
    print(head + "   (instructions per call)")
    for name, stmt in CASES.items():
        if args.filter not in name:
            continue
        a = per_call(here, stmt, args.n)
        line = f"{name:28s}{a:14.0f}"
        if args.against:
            b = per_call(args.against, stmt, args.n)
            line += f"{b:14.0f}{a / b:8.3f}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
