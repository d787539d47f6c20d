"""Train a small character-level GPT with ember, written as a PyTorch script.

    python examples/train_gpt.py                 # a few minutes on a laptop CPU
    python examples/train_gpt.py --data my.txt --steps 2000 --out ckpt.pt

The default corpus is Python's own standard library source (it ships with
every Python install, so nothing is downloaded). Prints a progress line with
the training loss, the validation loss every --eval-interval steps, saves a
checkpoint (ember.save, PyTorch's format) and prints a sample at the end.
Replace `import ember as torch` with `import torch` and it runs on PyTorch.
"""
import argparse
import math
import os
import sys
import time

import ember as torch
import ember.nn as nn
from ember.nn import functional as F


def default_corpus(limit=2_000_000):
    """Text of the standard library's .py files, in a fixed order."""
    root = os.path.dirname(os.__file__)
    parts, size = [], 0
    for name in sorted(os.listdir(root)):
        if name.endswith(".py"):
            with open(os.path.join(root, name), encoding="utf-8", errors="replace") as f:
                text = f.read()
            parts.append(text)
            size += len(text)
            if size >= limit:
                break
    return "".join(parts)[:limit]


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size, dropout):
        super().__init__()
        self.n_head = n_head
        self.qkv = nn.Linear(n_embd, 3 * n_embd)
        self.proj = nn.Linear(n_embd, n_embd)
        self.drop = nn.Dropout(dropout)
        self.register_buffer("mask", torch.tril(torch.ones(block_size, block_size, dtype=torch.bool)), persistent=False)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(~self.mask[:T, :T], float("-inf"))
        att = self.drop(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.drop(self.proj(y))


class Block(nn.Module):
    def __init__(self, n_embd, n_head, block_size, dropout):
        super().__init__()
        self.ln1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, block_size, dropout)
        self.ln2 = nn.LayerNorm(n_embd)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd),
                                 nn.Dropout(dropout))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab, block_size, n_layer, n_embd, n_head, dropout):
        super().__init__()
        self.block_size = block_size
        self.tok = nn.Embedding(vocab, n_embd)
        self.pos = nn.Embedding(block_size, n_embd)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList([Block(n_embd, n_head, block_size, dropout) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.head = nn.Linear(n_embd, vocab, bias=False)
        self.head.weight = self.tok.weight  # tied input and output embeddings
        self.apply(self._init)

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def forward(self, idx, targets=None):
        B, T = idx.shape
        x = self.drop(self.tok(idx) + self.pos(torch.arange(T, device=idx.device)))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_f(x))
        loss = None if targets is None else F.cross_entropy(logits.view(B * T, -1), targets.view(B * T))
        return logits, loss

    @torch.no_grad()
    def generate(self, idx, n, temperature=0.8, generator=None):
        for _ in range(n):
            logits, _ = self(idx[:, -self.block_size:])
            probs = F.softmax(logits[:, -1, :] / temperature, dim=-1)
            idx = torch.cat([idx, torch.multinomial(probs, 1, generator=generator)], dim=1)
        return idx


def batches(data, block_size, batch_size, generator, device="cpu"):
    ix = torch.randint(0, len(data) - block_size - 1, (batch_size,), generator=generator)
    x = torch.stack([data[i:i + block_size] for i in ix.tolist()])
    y = torch.stack([data[i + 1:i + 1 + block_size] for i in ix.tolist()])
    return x.to(device), y.to(device)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", help="a text file (default: the Python standard library's source)")
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--block-size", type=int, default=64)
    ap.add_argument("--n-layer", type=int, default=4)
    ap.add_argument("--n-embd", type=int, default=128)
    ap.add_argument("--n-head", type=int, default=4)
    ap.add_argument("--dropout", type=float, default=0.0)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--eval-interval", type=int, default=100)
    ap.add_argument("--eval-batches", type=int, default=8)
    ap.add_argument("--sample-chars", type=int, default=300)
    ap.add_argument("--out", default="gpt_checkpoint.pt")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--seed", type=int, default=1337)
    args = ap.parse_args(argv)

    torch.manual_seed(args.seed)
    text = open(args.data, encoding="utf-8").read() if args.data else default_corpus()
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    data = torch.tensor([stoi[c] for c in text], dtype=torch.long)
    split = int(0.9 * len(data))
    train, val = data[:split], data[split:]
    print(f"corpus: {len(text):,} characters, vocabulary {len(chars)}", flush=True)

    model = GPT(len(chars), args.block_size, args.n_layer, args.n_embd, args.n_head, args.dropout).to(args.device)
    print(f"model: {sum(p.numel() for p in model.parameters()):,} parameters", flush=True)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95))
    warmup = max(1, args.steps // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * min(1.0, s / args.steps))))
    gen = torch.Generator().manual_seed(args.seed)

    @torch.no_grad()
    def evaluate(split_data):
        model.eval()
        losses = [model(*batches(split_data, args.block_size, args.batch_size, gen, args.device))[1].item()
                  for _ in range(args.eval_batches)]
        model.train()
        return sum(losses) / len(losses)

    t0 = time.time()
    for step in range(1, args.steps + 1):
        x, y = batches(train, args.block_size, args.batch_size, gen, args.device)
        _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if step % 10 == 0 or step == args.steps:
            rate = step / (time.time() - t0)
            bar = "#" * int(30 * step / args.steps)
            sys.stdout.write(f"\r[{bar:<30}] step {step}/{args.steps}  loss {loss.item():.3f}  {rate:.1f} it/s")
            sys.stdout.flush()
        if step % args.eval_interval == 0 or step == args.steps:
            print(f"\nstep {step}: train {evaluate(train):.3f}, val {evaluate(val):.3f}", flush=True)

    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "chars": "".join(chars),
                "args": vars(args)}, args.out)
    print(f"saved {args.out}")
    start = torch.tensor([[stoi.get("\n", 0)]], dtype=torch.long, device=args.device)
    out = model.generate(start, args.sample_chars, generator=gen)[0].tolist()
    print("--- sample ---")
    print("".join(chars[i] for i in out))
    return model


if __name__ == "__main__":
    main()
