"""The Hugging Face stack on ember, run as users run it: a transformers script
under `python -m ember.as_torch`. Skips when transformers is not installed
(the `[hf]` extra; see packaging/torch-on-ember for satisfying accelerate's and
peft's `torch` requirement without PyTorch)."""
import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("transformers") is None,
                                reason="transformers not installed (pip install '.[hf]')")

PYTHON_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python")


def run_as_torch(tmp_path, source, timeout=600):
    path = tmp_path / "script.py"
    path.write_text(textwrap.dedent(source))
    env = dict(os.environ)
    env["PYTHONPATH"] = PYTHON_DIR + os.pathsep + env.get("PYTHONPATH", "")
    env["HF_HUB_OFFLINE"] = "1"
    return subprocess.run([sys.executable, "-m", "ember.as_torch", str(path)], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=str(tmp_path))


def test_no_real_torch_in_the_hf_environment():
    """The HF runs below must be ember's: no real torch package may be importable here
    (a torch distribution, if any, is torch-on-ember, which ships no code)."""
    spec = importlib.util.find_spec("torch")
    assert spec is None or (spec.origin or "").startswith(os.path.join(PYTHON_DIR, "ember")), spec


def test_transformers_imports_with_ember_as_torch(tmp_path):
    r = run_as_torch(tmp_path, """
        import importlib.metadata, torch, ember
        import transformers
        from transformers.utils import import_utils
        assert torch is ember
        assert import_utils.is_torch_available()
        assert import_utils.is_torch_greater_or_equal("2.6")
        from transformers import BertConfig, BertModel, GPT2Config, GPT2LMHeadModel  # noqa: F401
        print(transformers.__version__, importlib.metadata.version("torch"))
        """)
    assert r.returncode == 0, r.stderr[-3000:]
