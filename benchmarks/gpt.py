"""A nanoGPT-style training step, the same code for ember and PyTorch.

`gpt_step(m)` builds a 4-layer, 256-wide GPT (4 heads, 64 tokens, batch 8,
vocabulary 65, tied embeddings) with library `m` (ember or torch), an AdamW
optimizer, and returns the callable that runs one training step: forward,
cross-entropy, backward, gradient clipping, optimizer step.
`gpt_step(m, **GPT2_SMALL)` is the same step on GPT-2 small (124M
parameters). Both libraries draw the same initial weights and batches
(ember's generator is torch's mt19937), so their steps do the same
arithmetic.
"""
import math


def make_gpt(m, vocab=65, block=64, n_layer=4, n_embd=256, n_head=4):
    nn, F = m.nn, m.nn.functional

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(n_embd, 3 * n_embd)
            self.proj = nn.Linear(n_embd, n_embd)

        def forward(self, x):
            B, T, C = x.shape
            q, k, v = self.qkv(x).split(C, dim=2)
            q, k, v = (t.view(B, T, n_head, C // n_head).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.proj(y.transpose(1, 2).contiguous().view(B, T, C))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.attn = nn.LayerNorm(n_embd), Attention()
            self.ln2 = nn.LayerNorm(n_embd)
            self.fc, self.out = nn.Linear(n_embd, 4 * n_embd), nn.Linear(4 * n_embd, n_embd)

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            return x + self.out(F.gelu(self.fc(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos = nn.Embedding(vocab, n_embd), nn.Embedding(block, n_embd)
            self.blocks = nn.ModuleList([Block() for _ in range(n_layer)])
            self.ln_f = nn.LayerNorm(n_embd)
            self.head = nn.Linear(n_embd, vocab, bias=False)
            self.head.weight = self.tok.weight
            for name, p in self.named_parameters():
                if p.dim() >= 2:
                    nn.init.normal_(p, std=0.02 / (math.sqrt(2 * n_layer) if name.endswith("proj.weight") else 1))

        def forward(self, idx, targets):
            x = self.tok(idx) + self.pos(m.arange(idx.shape[1], device=idx.device))
            for b in self.blocks:
                x = b(x)
            logits = self.head(self.ln_f(x))
            return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))

    return GPT()


# GPT-2 small: 12 layers, 768 wide, 12 heads, GPT-2's BPE vocabulary, a
# 1024-position table; trained here on batches of 4 x 64 tokens
GPT2_SMALL = dict(batch=4, seq=64, block=1024, vocab=50257, n_layer=12, n_embd=768, n_head=12)


def gpt_step(m, batch=8, block=64, vocab=65, seq=None, device=None, autocast=None, **shape):
    """One training step's callable (returns the loss; .model is the model) on
    batches of batch x seq tokens (seq defaults to block, the positional
    table's size); shape: make_gpt's n_layer, n_embd, n_head. device: where
    the model and batches live; autocast: a dtype to run the forward in under
    m.autocast on that device."""
    import contextlib
    seq = seq or block
    m.manual_seed(0)
    model = make_gpt(m, vocab=vocab, block=block, **shape)
    if device is not None:
        model = model.to(device)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    other = [p for p in model.parameters() if p.dim() < 2]
    opt = m.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}],
                        lr=3e-4, betas=(0.9, 0.95))
    x = m.randint(0, vocab, (batch, seq), device=device)
    y = m.randint(0, vocab, (batch, seq), device=device)

    def step():
        ctx = m.autocast(str(x.device.type), dtype=autocast) if autocast is not None else contextlib.nullcontext()
        with ctx:
            loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        m.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss
    step.model = model
    return step
