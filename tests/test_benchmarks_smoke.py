"""The benchmark harness runs end to end (tiny sizes, a few repeats) and
prints a row for every case. Timings themselves are not checked."""
import os
import pathlib
import subprocess
import sys


ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_compare_smoke():
    import ember
    sys.path.insert(0, str(ROOT))
    try:
        from benchmarks.compare import CASES
    finally:
        sys.path.remove(str(ROOT))
    # the child finds ember where this process found it (in-place build or installed)
    path = [str(pathlib.Path(ember.__file__).parents[1]), os.environ.get("PYTHONPATH", "")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in path if p))
    proc = subprocess.run([sys.executable, "-m", "benchmarks.compare", "--smoke", "--quick"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)  # a busy machine
    assert proc.returncode == 0, proc.stderr
    for case in CASES:
        assert case.name in proc.stdout, case.name
