"""The examples run (briefly): train_gpt.py trains a tiny model a few steps,
its loss goes down, it writes a checkpoint that loads back into the same
model, and it samples text; finetune_classifier.py pretrains, loads the
checkpoint under a new head, fine-tunes, saves and reloads."""
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


import finetune_classifier  # noqa: E402


def test_finetune_classifier_pretrains_finetunes_saves_and_reloads(tmp_path, capsys):
    small = ["--pretrain-steps", "30", "--epochs", "2", "--train-size", "384", "--eval-size", "128",
             "--batch-size", "32", "--d-model", "32", "--n-layers", "1", "--n-heads", "2", "--lr", "3e-3",
             "--max-len", "10", "--out-dir", str(tmp_path), "--seed", "0"]
    result = finetune_classifier.main(small)
    text = capsys.readouterr().out
    # the pretrained checkpoint's LM head is reported unused, the new classifier head as newly initialized
    assert "were not used when initializing SequenceClassifier: ['lm_head.weight', 'lm_head.bias']" in text
    assert "newly initialized: ['classifier.weight', 'classifier.bias']" in text
    assert "reloaded model, optimizer and scheduler: same eval accuracy" in text  # the script checks the logits
    losses = [loss for loss, _ in result["history"]]
    assert losses[-1] < losses[0] and result["chance"] == 0.5  # it trains, on balanced classes

    ckpt = ember.load(str(tmp_path / "finetuned.pt"))
    assert set(ckpt) == {"config", "model", "optimizer", "scheduler", "epoch", "eval_accuracy"}
    assert ckpt["scheduler"]["last_epoch"] == 2 * 12  # 384 / 32 batches an epoch
    # decay: in_proj, out_proj, linear1, linear2 and classifier weights; none: 2 embeddings, 6 LayerNorm, 5 biases
    assert [len(g["params"]) for g in ckpt["optimizer"]["param_groups"]] == [5, 13]
    assert [g["weight_decay"] for g in ckpt["optimizer"]["param_groups"]] == [0.01, 0.0]
    pretrained = ember.load(str(tmp_path / "pretrained.pt"))
    assert "lm_head.weight" in pretrained["model"] and "classifier.weight" not in pretrained["model"]

    # a second run finds the pretrained checkpoint, skips pretraining and fine-tunes the same way
    again = finetune_classifier.main(["--pretrain-steps", "1"] + small[2:])
    text = capsys.readouterr().out
    assert "loaded the pretrained checkpoint" in text and "pretraining" not in text
    assert again["history"] == result["history"]


def test_finetuned_checkpoint_gives_the_same_logits_in_torch(tmp_path, torch):
    """The same script on PyTorch (its import lines swapped) loads ember's
    fine-tuned checkpoint and computes the logits ember computes."""
    args = ["--pretrain-steps", "5", "--epochs", "1", "--train-size", "64", "--eval-size", "64", "--d-model", "32",
            "--n-layers", "2", "--n-heads", "2", "--out-dir", str(tmp_path)]
    result = finetune_classifier.main(args)
    source = pathlib.Path(finetune_classifier.__file__).read_text()
    for ours, theirs in [("import ember as torch", "import torch"), ("import ember.nn as nn", "import torch.nn as nn"),
                         ("from ember.", "from torch.")]:
        source = source.replace(ours, theirs)
    on_torch = {"__name__": "finetune_classifier_on_torch"}
    exec(compile(source, "finetune_classifier_on_torch.py", "exec"), on_torch)
    assert on_torch["torch"] is torch

    ckpt = torch.load(result["checkpoint"], weights_only=True)
    theirs = on_torch["SequenceClassifier"](ckpt["config"])
    theirs.load_state_dict(ckpt["model"])
    theirs.eval()
    ids, pad, _ = finetune_classifier.classification_data(64, 24, 6, 16, ember.Generator().manual_seed(5))
    ours = result["model"].eval()
    with ember.no_grad():
        expected = ours(ids, pad)[0].tolist()
    with torch.no_grad():
        actual = theirs(torch.tensor(ids.tolist()), torch.tensor(pad.tolist()))[0].tolist()
    assert max(abs(a - e) for row_a, row_e in zip(actual, expected) for a, e in zip(row_a, row_e)) < 1e-4
