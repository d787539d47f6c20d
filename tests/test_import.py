"""`import ember` stays light: NumPy (whose own import takes longer than the
rest of ember's) loads on first use, and ember.utils.data on first access."""
import subprocess
import sys

PROBE = """
import sys
import ember
print('numpy' in sys.modules)
ember.utils.data.TensorDataset  # attribute access loads the package, as after `import torch`
x = ember.ones(2)
print(repr(x), x.numpy().sum())
"""


def test_import_ember_does_not_load_numpy():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    lines = out.stdout.splitlines()
    assert lines[0] == "False"
    assert lines[1] == "tensor([1., 1.]) 2.0"
