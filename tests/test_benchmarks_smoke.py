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
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)  # a loaded machine is slow
    assert proc.returncode == 0, proc.stderr
    for case in CASES:
        assert case.name in proc.stdout, case.name


def test_hf_benchmark_smoke():
    """benchmarks/hf.py's harness with tiny configs, ember's worker only (PyTorch is not needed)."""
    import importlib.util
    import pytest
    import ember
    if importlib.util.find_spec("transformers") is None:
        pytest.skip("transformers not installed (pip install '.[hf]')")
    path = [str(pathlib.Path(ember.__file__).parents[1]), os.environ.get("PYTHONPATH", "")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in path if p))
    env.pop("EMBER_BENCH_TORCH_PYTHON", None)
    proc = subprocess.run([sys.executable, "-m", "benchmarks.hf", "--smoke"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    sys.path.insert(0, str(ROOT))
    try:
        from benchmarks.hf import CASES
    finally:
        sys.path.remove(str(ROOT))
    for case in CASES:
        assert case in proc.stdout, case
