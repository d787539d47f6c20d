"""torch.nn.attention.flex_attention: importable, so code that imports it for
torch >= 2.6 loads; ember has no flex-attention kernel, so flex_attention and
create_block_mask raise NotImplementedError when called and nothing is a
BlockMask. The mask helpers (and_masks, or_masks, noop_mask, create_mask) are
real: create_mask evaluates a mask_mod on the full (B, H, Q, KV) grid."""
from ... import _C

__all__ = ["BlockMask", "AuxRequest", "flex_attention", "create_block_mask", "create_mask", "and_masks", "or_masks", "noop_mask",
           "_mask_mod_signature", "_score_mod_signature"]

_NO_FLEX = ("ember has no flex attention kernel; use attn_implementation='sdpa' or 'eager' "
            "(F.scaled_dot_product_attention takes a dense attention mask)")
_DEFAULT_SPARSE_BLOCK_SIZE = 128  # torch's block size for block masks
_mask_mod_signature = object
_score_mod_signature = object


class BlockMask:
    """A block-sparse attention mask; ember builds none."""

    def __init__(self, *args, **kwargs):
        raise NotImplementedError(_NO_FLEX)

    @classmethod
    def from_kv_blocks(cls, *args, **kwargs):
        raise NotImplementedError(_NO_FLEX)


class AuxRequest:
    """Which auxiliary outputs (lse, max_scores) flex_attention should return."""

    def __init__(self, lse=False, max_scores=False):
        self.lse, self.max_scores = lse, max_scores


def flex_attention(query, key, value, score_mod=None, block_mask=None, scale=None, enable_gqa=False,
                   return_lse=False, kernel_options=None, **kwargs):
    raise NotImplementedError(_NO_FLEX)


def create_block_mask(mask_mod, B, H, Q_LEN, KV_LEN, device="cuda", BLOCK_SIZE=128, _compile=False):
    raise NotImplementedError(_NO_FLEX)


def noop_mask(batch, head, token_q, token_kv):
    """Attend everywhere."""
    return _C.ones((), dtype=_C._dtypes["bool"], device=batch.device)


def and_masks(*mask_mods):
    if not all(callable(m) for m in mask_mods):
        raise RuntimeError(f"All inputs should be callable mask_mods: {mask_mods}")

    def mask(b, h, q, kv):
        result = _C.ones((), dtype=_C._dtypes["bool"], device=q.device if isinstance(q, _C.Tensor) else None)
        for m in mask_mods:
            result = result & m(b, h, q, kv)
        return result
    return mask


def or_masks(*mask_mods):
    if not all(callable(m) for m in mask_mods):
        raise RuntimeError(f"All inputs should be callable mask_mods: {mask_mods}")

    def mask(b, h, q, kv):
        result = _C.zeros((), dtype=_C._dtypes["bool"], device=q.device if isinstance(q, _C.Tensor) else None)
        for m in mask_mods:
            result = result | m(b, h, q, kv)
        return result
    return mask


def create_mask(mod_fn, B, H, Q_LEN, KV_LEN, device="cpu"):
    """The dense bool mask [B, H, Q_LEN, KV_LEN] of mask_mod(b, h, q, kv), evaluated with broadcast
    index tensors (B, H: None means 1)."""
    B, H = B or 1, H or 1
    long = _C._dtypes["int64"]
    b = _C.arange(B, dtype=long, device=device).view(B, 1, 1, 1)
    h = _C.arange(H, dtype=long, device=device).view(1, H, 1, 1)
    q = _C.arange(Q_LEN, dtype=long, device=device).view(1, 1, Q_LEN, 1)
    kv = _C.arange(KV_LEN, dtype=long, device=device).view(1, 1, 1, KV_LEN)
    out = mod_fn(b, h, q, kv)
    if not isinstance(out, _C.Tensor):
        out = _C.tensor(bool(out), device=device)
    return out.to(_C._dtypes["bool"]).expand(B, H, Q_LEN, KV_LEN).contiguous()
