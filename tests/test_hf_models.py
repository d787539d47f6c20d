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

import ember

pytestmark = pytest.mark.skipif(importlib.util.find_spec("transformers") is None,
                                reason="transformers not installed (pip install '.[hf]')")

# where the ember under test was imported from (site-packages when installed, python/ in a
# development build): child processes must import the same one
PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(ember.__file__)))


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


FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "hf")



def _run_model_check(tmp_path, body):
    r = run_as_torch(tmp_path, textwrap.dedent(f"""
        import numpy as np
        import torch
        FIX = {FIXTURES!r}
        exp = np.load(FIX + "/expected.npz")
        ids = torch.tensor(exp["input_ids"])
        mask = torch.tensor(exp["attention_mask"])
    """) + textwrap.dedent(body))
    assert r.returncode == 0, r.stderr[-4000:]
    return r


def test_bert_hidden_states_and_gradients_match_pytorch(tmp_path):
    _run_model_check(tmp_path, """
        from transformers import BertModel
        m = BertModel.from_pretrained(FIX + "/bert", add_pooling_layer=False).eval()
        hidden = m(input_ids=ids, attention_mask=mask).last_hidden_state
        np.testing.assert_allclose(hidden.detach().numpy(), exp["bert_hidden"], atol=1e-4, rtol=1e-4)
        (hidden * mask[..., None]).pow(2).sum().backward()
        np.testing.assert_allclose(m.embeddings.word_embeddings.weight.grad.numpy(),
                                   exp["bert_grad_word_embeddings"], atol=1e-4, rtol=1e-4)
    """)


def test_gpt2_loss_gradients_and_greedy_generation_match_pytorch(tmp_path):
    _run_model_check(tmp_path, """
        from transformers import GPT2LMHeadModel
        m = GPT2LMHeadModel.from_pretrained(FIX + "/gpt2").eval()
        res = m(input_ids=ids[:1], labels=ids[:1])
        np.testing.assert_allclose(res.logits.detach().numpy(), exp["gpt2_logits"], atol=1e-4, rtol=1e-4)
        np.testing.assert_allclose(float(res.loss), float(exp["gpt2_loss"]), rtol=1e-5)
        res.loss.backward()
        np.testing.assert_allclose(m.transformer.wte.weight.grad.numpy(), exp["gpt2_grad_wte"], atol=1e-5)
        with torch.no_grad():
            out = m.generate(ids[:1], max_new_tokens=6, do_sample=False, pad_token_id=0)
        np.testing.assert_array_equal(out.numpy(), exp["gpt2_greedy"])
    """)


@pytest.mark.skipif(not os.environ.get("EMBER_TORCH_PYTHON"),
                    reason="set EMBER_TORCH_PYTHON to a Python that has real torch + transformers")
def test_real_torch_loads_what_ember_saves(tmp_path):
    """save_pretrained on ember (safetensors; transformers 5 writes no other format) and torch.save
    of a state_dict, loaded by real PyTorch: the same hidden states, the same tensors."""
    r = run_as_torch(tmp_path, """
        import numpy as np, torch
        from transformers import BertConfig, BertModel
        torch.manual_seed(0)
        m = BertModel(BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                 intermediate_size=64)).eval()
        m.save_pretrained("saved")
        torch.save(m.state_dict(), "state.pt")
        np.save("hidden.npy", m(torch.tensor([[1, 5, 7, 9, 2]])).last_hidden_state.detach().numpy())
        """)
    assert r.returncode == 0, r.stderr[-3000:]
    script = tmp_path / "load_in_torch.py"
    script.write_text(textwrap.dedent("""
        import numpy as np, torch
        from transformers import BertModel
        m = BertModel.from_pretrained("saved")
        h = m(torch.tensor([[1, 5, 7, 9, 2]])).last_hidden_state.detach().numpy()
        sd = torch.load("state.pt")
        assert set(sd) == set(m.state_dict()) and all(torch.equal(sd[k], v) for k, v in m.state_dict().items())
        print(float(np.abs(h - np.load("hidden.npy")).max()))
        """))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "EMBER_AS_TORCH")}
    r = subprocess.run([os.environ["EMBER_TORCH_PYTHON"], str(script)], capture_output=True, text=True,
                       timeout=600, env=dict(env, HF_HUB_OFFLINE="1"), cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr[-3000:]
    assert float(r.stdout.strip().splitlines()[-1]) < 1e-5
