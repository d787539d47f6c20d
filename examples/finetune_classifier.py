"""Pretrain a small transformer encoder, then fine-tune it as a sequence
classifier the way Hugging Face scripts do, with ember, written as a PyTorch script.

    python examples/finetune_classifier.py                  # under a minute on a laptop CPU
    python examples/finetune_classifier.py --epochs 5 --seed 1 --out-dir runs/ft

Step 1 (skipped when --pretrained names a checkpoint that exists): pretrain a
BERT-style encoder with a masked-token objective on generated sorted token
sequences of varying length, and save it (ember.save, PyTorch's format).
Step 2: load that checkpoint into a model with a new classification head
(load_state_dict(strict=False), reporting the missing and unexpected keys as
Hugging Face does) and fine-tune it to tell sorted sequences from sorted
sequences with two tokens swapped: AdamW with two parameter groups (no weight
decay for biases, LayerNorm and Embedding weights), a linear warmup then linear
decay schedule (LambdaLR), gradient clipping, a shuffling DataLoader and the
eval accuracy after every epoch. Step 3: save model + optimizer + scheduler,
reload them into fresh objects and check the reloaded model gives the same
logits. With the defaults the eval accuracy goes from 0.50 (chance: the classes
are balanced) to about 0.88 in 6 epochs; PyTorch gets about the same. Replace
`import ember as torch` with `import torch` and it runs on PyTorch.
"""
import argparse
import os
import time

import ember as torch
import ember.nn as nn
from ember.nn import functional as F
from ember.utils.data import DataLoader, TensorDataset

PAD, CLS, MASK = 0, 1, 2  # special tokens; data tokens are 3 .. vocab-1
FIRST_TOKEN = 3
IGNORE = -100  # cross_entropy's default ignore_index: positions without a label


# ---------------------------------------------------------------- generated data

def sorted_sequences(n, vocab, min_len, max_len, generator):
    """n token sequences [CLS, t1 <= t2 <= ... <= tk, PAD, ...] of random
    lengths k in [min_len, max_len]; returns (ids, padding mask: True = PAD)."""
    lengths = torch.randint(min_len, max_len + 1, (n, 1), generator=generator)
    tokens = torch.randint(FIRST_TOKEN, vocab, (n, max_len), generator=generator)
    pad = torch.arange(max_len).unsqueeze(0) >= lengths
    tokens = tokens.masked_fill(pad, vocab).sort(dim=1).values.masked_fill(pad, PAD)  # pads sort last
    ids = torch.cat([torch.full((n, 1), CLS, dtype=torch.long), tokens], dim=1)
    return ids, torch.cat([torch.zeros(n, 1, dtype=torch.bool), pad], dim=1)


def is_sorted(ids, pad):
    ok = (ids[:, 2:] >= ids[:, 1:-1]) | pad[:, 2:]
    return ok.all(dim=1)


def classification_data(n, vocab, min_len, max_len, generator):
    """n sequences, half sorted (label 1) and half not (label 0): sorted
    sequences with two random positions swapped. A swap of two equal tokens
    leaves a sequence sorted, so labels are computed, then classes balanced."""
    ids, pad = sorted_sequences(2 * n, vocab, min_len, max_len, generator)
    lengths = (~pad).sum(dim=1, keepdim=True) - 1  # real tokens, CLS excluded
    i = 1 + (torch.rand(2 * n, 1, generator=generator) * lengths).long()
    j = 1 + (torch.rand(2 * n, 1, generator=generator) * lengths).long()
    swapped = ids.scatter(1, i, ids.gather(1, j)).scatter(1, j, ids.gather(1, i))
    ids = torch.cat([ids[:n], swapped[n:]])
    labels = is_sorted(ids, pad).long()
    keep = torch.cat([(labels == 1).nonzero()[: n // 2, 0], (labels == 0).nonzero()[: n - n // 2, 0]])
    return ids[keep], pad[keep], labels[keep]


def mask_tokens(ids, pad, generator, prob=0.15):
    """BERT's masking: pick `prob` of the real tokens as targets and replace
    them with MASK; every other position gets the IGNORE label."""
    chosen = (torch.rand(ids.shape, generator=generator) < prob) & ~pad
    chosen[:, 0] = False  # never the CLS token
    labels = ids.masked_fill(~chosen, IGNORE)
    return ids.masked_fill(chosen, MASK), labels


# ---------------------------------------------------------------------- models

class Encoder(nn.Module):
    def __init__(self, vocab, max_len, d_model, n_layers, n_heads, dropout):
        super().__init__()
        self.tok_embed = nn.Embedding(vocab, d_model, padding_idx=PAD)
        self.pos_embed = nn.Embedding(max_len + 1, d_model)
        layer = nn.TransformerEncoderLayer(d_model, n_heads, dim_feedforward=4 * d_model, dropout=dropout,
                                           activation="gelu", batch_first=True, norm_first=True)
        self.transformer = nn.TransformerEncoder(layer, n_layers, norm=nn.LayerNorm(d_model),
                                                 enable_nested_tensor=False)
        self.drop = nn.Dropout(dropout)

    def forward(self, ids, pad):
        x = self.tok_embed(ids) + self.pos_embed(torch.arange(ids.shape[1]))
        return self.transformer(self.drop(x), src_key_padding_mask=pad)


class MaskedLM(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.encoder = Encoder(**config)
        self.lm_head = nn.Linear(config["d_model"], config["vocab"])

    def forward(self, ids, pad, labels=None):
        logits = self.lm_head(self.encoder(ids, pad))
        loss = None if labels is None else F.cross_entropy(logits.flatten(0, 1), labels.flatten())
        return logits, loss


class SequenceClassifier(nn.Module):
    """The encoder with a fresh head on the CLS token's output."""

    def __init__(self, config, num_labels=2):
        super().__init__()
        self.encoder = Encoder(**config)
        self.dropout = nn.Dropout(config["dropout"])
        self.classifier = nn.Linear(config["d_model"], num_labels)

    def forward(self, ids, pad, labels=None):
        logits = self.classifier(self.dropout(self.encoder(ids, pad)[:, 0]))
        loss = None if labels is None else F.cross_entropy(logits, labels)
        return logits, loss


# --------------------------------------------------------------------- training

def linear_warmup_then_decay(warmup_steps, total_steps):
    """The multiplier Hugging Face's get_linear_schedule_with_warmup uses."""
    def factor(step):
        if step < warmup_steps:
            return step / max(1, warmup_steps)
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))
    return factor


def adamw_with_decay_groups(model, lr, weight_decay):
    """AdamW with weight decay on weight matrices only: biases, LayerNorm and
    Embedding weights (picked by name, as Hugging Face's Trainer does) get none."""
    def no_decay(name):
        return name.endswith("bias") or "norm" in name or "embed" in name

    groups = [
        {"params": [p for n, p in model.named_parameters() if not no_decay(n)], "weight_decay": weight_decay},
        {"params": [p for n, p in model.named_parameters() if no_decay(n)], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=lr)


def pretrain(config, args, generator):
    model = MaskedLM(config)
    opt = adamw_with_decay_groups(model, args.pretrain_lr, args.weight_decay)
    warmup = max(1, args.pretrain_steps // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, linear_warmup_then_decay(warmup, args.pretrain_steps))
    model.train()
    for step in range(1, args.pretrain_steps + 1):
        ids, pad = sorted_sequences(args.batch_size, config["vocab"], args.min_len, config["max_len"], generator)
        inputs, labels = mask_tokens(ids, pad, generator)
        _, loss = model(inputs, pad, labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
        opt.step()
        sched.step()
        if step % 50 == 0 or step == args.pretrain_steps:
            print(f"  pretrain step {step}/{args.pretrain_steps}: masked-token loss {loss.item():.3f}", flush=True)
    return model


def load_pretrained(model, state_dict):
    """Load matching weights, leave the new head as initialized, and say so."""
    result = model.load_state_dict(state_dict, strict=False)
    name = type(model).__name__
    if result.unexpected_keys:
        print(f"Some weights of the model checkpoint were not used when initializing {name}: "
              f"{result.unexpected_keys}")
    if result.missing_keys:
        print(f"Some weights of {name} were not initialized from the model checkpoint and are newly "
              f"initialized: {result.missing_keys}\nYou should probably TRAIN this model on a down-stream task.")
    return result


@torch.no_grad()
def evaluate(model, loader):
    model.eval()
    all_logits, correct, total = [], 0, 0
    for ids, pad, labels in loader:
        logits, _ = model(ids, pad)
        correct += (logits.argmax(dim=-1) == labels).sum().item()
        total += labels.numel()
        all_logits.append(logits)
    model.train()
    return correct / total, torch.cat(all_logits)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--epochs", type=int, default=6, help="fine-tuning epochs")
    ap.add_argument("--pretrain-steps", type=int, default=300)
    ap.add_argument("--train-size", type=int, default=4000, help="fine-tuning examples")
    ap.add_argument("--eval-size", type=int, default=500)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=3e-3, help="fine-tuning peak learning rate")
    ap.add_argument("--pretrain-lr", type=float, default=3e-3)
    ap.add_argument("--warmup-ratio", type=float, default=0.1)
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--max-grad-norm", type=float, default=1.0)
    ap.add_argument("--vocab", type=int, default=24, help="3 special tokens + data tokens")
    ap.add_argument("--min-len", type=int, default=6)
    ap.add_argument("--max-len", type=int, default=16)
    ap.add_argument("--d-model", type=int, default=64)
    ap.add_argument("--n-layers", type=int, default=2)
    ap.add_argument("--n-heads", type=int, default=4)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--out-dir", default="finetune_out")
    ap.add_argument("--pretrained", help="pretrained checkpoint (default: OUT_DIR/pretrained.pt; made if missing)")
    ap.add_argument("--seed", type=int, default=42)
    args = ap.parse_args(argv)
    if args.epochs < 1 or args.pretrain_steps < 1:
        ap.error("--epochs and --pretrain-steps must be at least 1")

    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    os.makedirs(args.out_dir, exist_ok=True)
    pretrained_path = args.pretrained or os.path.join(args.out_dir, "pretrained.pt")
    t0 = time.time()

    # 1. pretrain, or reuse the checkpoint
    if os.path.exists(pretrained_path):
        ckpt = torch.load(pretrained_path, map_location="cpu", weights_only=True)
        config = ckpt["config"]
        print(f"loaded the pretrained checkpoint {pretrained_path}", flush=True)
    else:
        config = {"vocab": args.vocab, "max_len": args.max_len, "d_model": args.d_model, "n_layers": args.n_layers,
                  "n_heads": args.n_heads, "dropout": args.dropout}
        print(f"pretraining a masked-token encoder for {args.pretrain_steps} steps", flush=True)
        mlm = pretrain(config, args, gen)
        ckpt = {"config": config, "model": mlm.state_dict()}
        torch.save(ckpt, pretrained_path)
        print(f"saved {pretrained_path}", flush=True)

    # 2. fine-tune a classifier from it (reseeded: the same run whether it pretrained or loaded)
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed + 1)
    model = SequenceClassifier(config)
    load_pretrained(model, ckpt["model"])
    print(f"model: {sum(p.numel() for p in model.parameters()):,} parameters", flush=True)

    def dataset(n):
        return TensorDataset(*classification_data(n, config["vocab"], args.min_len, config["max_len"], gen))

    train_set, eval_set = dataset(args.train_size), dataset(args.eval_size)
    chance = eval_set.tensors[2].float().mean().item()  # the share of sorted sequences: 0.5
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True, generator=gen)
    eval_loader = DataLoader(eval_set, batch_size=256)

    opt = adamw_with_decay_groups(model, args.lr, args.weight_decay)
    total_steps = args.epochs * len(train_loader)
    warmup_steps = int(args.warmup_ratio * total_steps)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, linear_warmup_then_decay(warmup_steps, total_steps))

    accuracy, _ = evaluate(model, eval_loader)
    print(f"before fine-tuning: eval accuracy {accuracy:.3f} (chance {chance:.3f})", flush=True)
    model.train()
    history = []  # (mean train loss, eval accuracy) per epoch
    for epoch in range(1, args.epochs + 1):
        running, batches = 0.0, 0
        for ids, pad, labels in train_loader:
            _, loss = model(ids, pad, labels)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
            opt.step()
            sched.step()
            running, batches = running + loss.item(), batches + 1
        accuracy, logits = evaluate(model, eval_loader)
        history.append((running / batches, accuracy))
        print(f"epoch {epoch}/{args.epochs}: train loss {running / batches:.3f}, eval accuracy {accuracy:.3f}, "
              f"lr {sched.get_last_lr()[0]:.2e}", flush=True)

    # 3. save everything, reload into fresh objects, check nothing changed
    finetuned_path = os.path.join(args.out_dir, "finetuned.pt")
    torch.save({"config": config, "model": model.state_dict(), "optimizer": opt.state_dict(),
                "scheduler": sched.state_dict(), "epoch": args.epochs, "eval_accuracy": accuracy}, finetuned_path)
    saved = torch.load(finetuned_path, map_location="cpu", weights_only=True)
    fresh = SequenceClassifier(saved["config"])
    fresh.load_state_dict(saved["model"])  # strict: every key must match
    fresh_opt = adamw_with_decay_groups(fresh, args.lr, args.weight_decay)
    fresh_opt.load_state_dict(saved["optimizer"])
    fresh_sched = torch.optim.lr_scheduler.LambdaLR(fresh_opt, linear_warmup_then_decay(warmup_steps, total_steps))
    fresh_sched.load_state_dict(saved["scheduler"])
    reloaded_accuracy, reloaded_logits = evaluate(fresh, eval_loader)
    assert reloaded_accuracy == accuracy and (reloaded_logits == logits).all().item(), "reloaded model differs"
    assert fresh_sched.get_last_lr() == sched.get_last_lr() and fresh_sched.last_epoch == sched.last_epoch
    state = opt.state[opt.param_groups[0]["params"][0]]
    reloaded_state = fresh_opt.state[fresh_opt.param_groups[0]["params"][0]]
    assert all((state[k] == reloaded_state[k]).all().item() for k in ("step", "exp_avg", "exp_avg_sq"))
    print(f"saved {finetuned_path}; reloaded model, optimizer and scheduler: same eval accuracy "
          f"{reloaded_accuracy:.3f} and logits ({time.time() - t0:.1f}s in all)")
    return {"history": history, "chance": chance, "model": model, "checkpoint": finetuned_path}


if __name__ == "__main__":
    main()
