"""Writes layout_torch_reference.json with PyTorch (run in a venv that has
torch; ember's tests only read the file):

    python tests/data/make_layout_reference.py

The shapes and strides of tests/layout_cases.py's calls as torch lays them out."""
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from layout_cases import strides_of  # noqa: E402

if __name__ == "__main__":
    cases = strides_of(torch)
    with open(os.path.join(HERE, "layout_torch_reference.json"), "w") as f:  # one case a line
        f.write('{"torch": %s, "cases": {\n' % json.dumps(torch.__version__))
        f.write(",\n".join(f" {json.dumps(k)}: {json.dumps(v)}" for k, v in cases.items()))
        f.write("\n}}\n")
