"""The examples run (briefly): train_gpt.py trains a tiny model a few steps,
its loss goes down, it writes a checkpoint that loads back into the same
model, and it samples text."""
import pathlib
import sys

import ember

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "examples"))
import train_gpt  # noqa: E402


def test_train_gpt_runs_saves_and_samples(tmp_path, capsys):
    data = tmp_path / "corpus.txt"
    data.write_text("the quick brown fox jumps over the lazy dog. " * 200)
    out = tmp_path / "ckpt.pt"
    args = ["--data", str(data), "--steps", "30", "--batch-size", "8", "--block-size", "16",
            "--n-layer", "1", "--n-embd", "32", "--n-head", "2", "--lr", "3e-3", "--eval-interval", "30",
            "--eval-batches", "2", "--sample-chars", "40", "--out", str(out)]
    model = train_gpt.main(args)
    text = capsys.readouterr().out
    assert "--- sample ---" in text and "saved" in text
    first = float(text.split("loss ")[1].split()[0])  # the loss printed at step 10
    val = float(text.split("val ")[-1].split()[0])
    assert val < first < 4.0  # ln(28 characters) = 3.3 at the start: it learned something
    ckpt = ember.load(str(out))
    assert set(ckpt) == {"model", "optimizer", "chars", "args"}
    fresh = train_gpt.GPT(len(ckpt["chars"]), 16, 1, 32, 2, 0.0)
    assert fresh.load_state_dict(ckpt["model"]).missing_keys == []
    for (n, p), (_, q) in zip(model.state_dict().items(), fresh.state_dict().items()):
        assert ember.equal(p, q) if hasattr(ember, "equal") else bool((p == q).all()), n
