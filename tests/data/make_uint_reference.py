"""Record torch's results for tests/uint_cases.py (run with torch installed):
    python tests/data/make_uint_reference.py  ->  tests/data/uint_torch_reference.json
and a checkpoint torch wrote with uint16/32/64 tensors -> tests/data/uint_torch_checkpoint.pt"""
import json
import os
import sys
import warnings

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import uint_cases  # noqa: E402

warnings.simplefilter("ignore")
res = uint_cases.all_results(torch)
for v in res.values():
    if "value" in v and isinstance(v["value"], str):
        v["value"] = v["value"].replace("torch.", "ember.")
path = os.path.join(os.path.dirname(__file__), "uint_torch_reference.json")
with open(path, "w") as f:
    json.dump({"torch": torch.__version__, "results": res}, f, indent=0, sort_keys=True)
print(f"{len(res)} results from torch {torch.__version__} -> {path}")
ckpt = {d: torch.tensor([2 ** uint_cases.BITS[d] - 1, 0, 7], dtype=getattr(torch, d)) for d in uint_cases.UNSIGNED}
ckpt["view"] = ckpt["uint32"][1:]  # a view sharing the uint32 storage
torch.save(ckpt, os.path.join(os.path.dirname(__file__), "uint_torch_checkpoint.pt"))
