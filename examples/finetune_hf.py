"""Fine-tune a Hugging Face sequence classifier with transformers' Trainer (optionally with a
peft LoRA adapter) on ember: a plain transformers + PyTorch script, run unchanged with

    python -m ember.as_torch examples/finetune_hf.py                 # about a minute of CPU
    python -m ember.as_torch examples/finetune_hf.py --lora          # LoRA adapter, then merge_and_unload
    python examples/finetune_hf.py                                   # the same script on real PyTorch

Nothing is downloaded: the model is a small BERT built from a config (seeded random weights) and
the data are generated token sequences; the task is to say whether a sequence contains the
marker token (the classes are balanced, so chance is 0.50). The script trains with Trainer
(AdamW, linear warmup and decay, gradient clipping, shuffled batches), evaluates accuracy
with compute_metrics, saves the model with save_pretrained, loads it back with from_pretrained
and checks the reloaded model gives the same logits. Needs transformers and accelerate (and peft
for --lora); see packaging/torch-on-ember for installing them next to ember without PyTorch.
"""
import argparse
import os
import tempfile

import numpy as np
import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

MARKER, FIRST_TOKEN = 3, 4  # token 0 is padding, 1 [CLS], 2 unused


class MarkerDataset(torch.utils.data.Dataset):
    """n sequences [CLS, t1..tk]; label 1 when the marker token occurs among t1..tk."""

    def __init__(self, n, vocab, length, seed):
        rs = np.random.RandomState(seed)
        ids = rs.randint(FIRST_TOKEN, vocab, size=(n, length))
        labels = rs.randint(0, 2, size=n)
        for row, label in zip(ids, labels):
            if label:
                row[rs.randint(1, length)] = MARKER
        ids[:, 0] = 1
        self.ids, self.labels = torch.tensor(ids), torch.tensor(labels)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.labels[i]}


def accuracy(eval_pred):
    logits, labels = eval_pred
    return {"accuracy": float((np.argmax(logits, axis=-1) == labels).mean())}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=150)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--lora", action="store_true", help="train a peft LoRA adapter instead of all weights")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out-dir", default=None, help="where Trainer writes (default: a temporary directory)")
    args = p.parse_args()

    torch.manual_seed(args.seed)
    vocab = 40
    config = BertConfig(vocab_size=vocab, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=32, num_labels=2)
    model = BertForSequenceClassification(config)
    if args.lora:
        from peft import LoraConfig, get_peft_model
        model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules=["query", "value"],
                                                 modules_to_save=["classifier"]))
        model.print_trainable_parameters()
    train, test = MarkerDataset(2048, vocab, 12, args.seed + 1), MarkerDataset(512, vocab, 12, args.seed + 2)

    with tempfile.TemporaryDirectory() as tmp:
        out_dir = args.out_dir or tmp
        targs = TrainingArguments(output_dir=out_dir, max_steps=args.steps, per_device_train_batch_size=args.batch_size,
                                  per_device_eval_batch_size=256, learning_rate=args.lr, warmup_steps=args.steps // 10,
                                  weight_decay=0.01, logging_steps=max(1, args.steps // 10), eval_strategy="no",
                                  save_strategy="no", report_to=[], use_cpu=True, seed=args.seed,
                                  disable_tqdm=True, dataloader_num_workers=0)
        trainer = Trainer(model=model, args=targs, train_dataset=train, eval_dataset=test, compute_metrics=accuracy)
        before = trainer.evaluate()["eval_accuracy"]
        trainer.train()
        after = trainer.evaluate()["eval_accuracy"]
        losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
        print(f"loss {losses[0]:.3f} -> {losses[-1]:.3f}; test accuracy {before:.3f} -> {after:.3f} (chance 0.50)")

        if args.lora:
            model = model.merge_and_unload()  # plain BertForSequenceClassification with the adapter folded in
        model.eval()
        saved = os.path.join(out_dir, "final")
        model.save_pretrained(saved)
        back = BertForSequenceClassification.from_pretrained(saved).eval()
        with torch.no_grad():
            same = torch.allclose(model(test.ids[:64]).logits, back(test.ids[:64]).logits, atol=1e-6)
        print(f"save_pretrained -> from_pretrained gives the same logits: {same}")
    return after, same


if __name__ == "__main__":
    main()
