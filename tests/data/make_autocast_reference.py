"""Writes autocast_cpu_torch_reference.json: the result dtype of every call in
tests/autocast_cases.py under torch.autocast('cpu', dtype) for bfloat16 and
float16, as PyTorch computes it. Needs torch; run from the repository root:

    python tests/data/make_autocast_reference.py
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from autocast_cases import cases  # noqa: E402

out = {}
for low in (torch.bfloat16, torch.float16):
    name = str(low).split(".")[-1]
    got = {}
    for case, call in cases(torch, low).items():
        with torch.autocast("cpu", dtype=low):
            got[case] = str(call().dtype).split(".")[-1]
    out[name] = got
out["torch"] = torch.__version__
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "autocast_cpu_torch_reference.json"), "w") as f:
    json.dump(out, f, indent=1, sort_keys=True)
