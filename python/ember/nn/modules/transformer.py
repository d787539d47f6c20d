"""MultiheadAttention, TransformerEncoderLayer and TransformerEncoder
(torch.nn's): the same parameters and state_dict keys, initialized in torch's
order (same seed, same weights), masks with torch's conventions (a True in a
bool attn_mask or key_padding_mask means "may not attend")."""
import copy

from ... import _C
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .container import ModuleList
from .dropout import Dropout
from .linear import Linear, NonDynamicallyQuantizableLinear
from .module import Module
from .normalization import LayerNorm

__all__ = ["MultiheadAttention", "TransformerEncoderLayer", "TransformerEncoder"]


def _additive(mask, dtype):
    """A bool "may not attend" mask as 0 / -inf; float masks pass through."""
    if mask is None or mask.dtype != _C._dtypes["bool"]:
        return mask
    return _C.zeros(tuple(mask.shape), dtype=dtype).masked_fill(mask, float("-inf"))


class MultiheadAttention(Module):
    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False, add_zero_attn=False,
                 kdim=None, vdim=None, batch_first=False, device=None, dtype=None):
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got embed_dim={embed_dim} and "
                             f"num_heads={num_heads} instead")
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise AssertionError("embed_dim must be divisible by num_heads")
        kw = {"device": device, "dtype": dtype}
        if not self._qkv_same_embed_dim:
            self.q_proj_weight = Parameter(_C.empty((embed_dim, embed_dim), **kw))
            self.k_proj_weight = Parameter(_C.empty((embed_dim, self.kdim), **kw))
            self.v_proj_weight = Parameter(_C.empty((embed_dim, self.vdim), **kw))
            self.register_parameter("in_proj_weight", None)
        else:
            self.in_proj_weight = Parameter(_C.empty((3 * embed_dim, embed_dim), **kw))
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(_C.empty(3 * embed_dim, **kw))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, **kw)
        if add_bias_kv:
            self.bias_k = Parameter(_C.empty((1, 1, embed_dim), **kw))
            self.bias_v = Parameter(_C.empty((1, 1, embed_dim), **kw))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self):
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
        if self.bias_v is not None:
            init.xavier_normal_(self.bias_v)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        if is_causal and attn_mask is None:
            raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the Transformer "
                               "module method `generate_square_subsequent_mask` to create this mask.")
        batched = query.dim() == 3
        if self.batch_first and batched:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        if not batched:
            query, key, value = (t.unsqueeze(1) for t in (query, key, value))
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        L, N, E = query.shape
        H, hd = self.num_heads, self.head_dim
        if E != self.embed_dim:
            raise AssertionError(f"was expecting embedding dimension of {self.embed_dim}, but got {E}")
        b = self.in_proj_bias
        bq, bk, bv = (None, None, None) if b is None else (b[:E], b[E:2 * E], b[2 * E:])
        if self._qkv_same_embed_dim:
            w = self.in_proj_weight
            wq, wk, wv = w[:E], w[E:2 * E], w[2 * E:]
        else:
            wq, wk, wv = self.q_proj_weight, self.k_proj_weight, self.v_proj_weight
        q, k, v = F.linear(query, wq, bq), F.linear(key, wk, bk), F.linear(value, wv, bv)
        attn_mask = _additive(attn_mask, q.dtype)
        if attn_mask is not None and attn_mask.dim() == 2:
            attn_mask = attn_mask.unsqueeze(0)
        if self.bias_k is not None:
            k = _C.cat([k, self.bias_k.expand(1, N, E)])
            v = _C.cat([v, self.bias_v.expand(1, N, E)])
            if attn_mask is not None:
                attn_mask = _C.cat([attn_mask, attn_mask.new_zeros(tuple(attn_mask.shape[:-1]) + (1,))], -1)
            if key_padding_mask is not None:
                key_padding_mask = _C.cat([key_padding_mask,
                                           key_padding_mask.new_zeros((key_padding_mask.shape[0], 1))], -1)
        q = q.reshape(L, N * H, hd).transpose(0, 1)
        k = k.reshape(k.shape[0], N * H, hd).transpose(0, 1)
        v = v.reshape(v.shape[0], N * H, hd).transpose(0, 1)
        if self.add_zero_attn:
            k = _C.cat([k, k.new_zeros((N * H, 1, hd))], 1)
            v = _C.cat([v, v.new_zeros((N * H, 1, hd))], 1)
            if attn_mask is not None:
                attn_mask = _C.cat([attn_mask, attn_mask.new_zeros(tuple(attn_mask.shape[:-1]) + (1,))], -1)
            if key_padding_mask is not None:
                key_padding_mask = _C.cat([key_padding_mask,
                                           key_padding_mask.new_zeros((key_padding_mask.shape[0], 1))], -1)
        S = k.shape[1]
        if key_padding_mask is not None:
            if tuple(key_padding_mask.shape) != (N, S):
                raise AssertionError(f"expecting key_padding_mask shape of {(N, S)}, but got "
                                     f"{tuple(key_padding_mask.shape)}")
            pad = _additive(key_padding_mask, q.dtype).view(N, 1, 1, S).expand(N, H, 1, S).reshape(N * H, 1, S)
            attn_mask = pad if attn_mask is None else attn_mask + pad
        dropout_p = self.dropout if self.training else 0.0
        if need_weights:
            scores = (q * (hd ** -0.5)) @ k.transpose(-2, -1)
            if attn_mask is not None:
                scores = scores + attn_mask
            weights = F.softmax(scores, dim=-1)
            if dropout_p > 0.0:
                weights = F.dropout(weights, dropout_p)
            out = weights @ v
        else:
            if attn_mask is not None:  # (1 or N*H, 1 or L, S) -> (N, H, L, S)
                attn_mask = attn_mask.expand(N * H, L, S).reshape(N, H, L, S)
            out = F.scaled_dot_product_attention(q.view(N, H, L, hd), k.view(N, H, S, hd), v.view(N, H, S, hd),
                                                 attn_mask, dropout_p)
            out = out.view(N * H, L, hd)
            weights = None
        out = out.transpose(0, 1).contiguous().view(L * N, E)
        out = F.linear(out, self.out_proj.weight, self.out_proj.bias).view(L, N, E)
        if weights is not None:
            weights = weights.view(N, H, L, S)
            if average_attn_weights:
                weights = weights.mean(dim=1)
        if self.batch_first and batched:
            out = out.transpose(0, 1)
        if not batched:
            out = out.squeeze(1)
            if weights is not None:
                weights = weights.squeeze(0)
        return out, weights


class TransformerEncoderLayer(Module):
    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation=F.relu, layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first,
                                            **kw)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        if isinstance(activation, str):
            if activation not in ("relu", "gelu"):
                raise RuntimeError(f"activation should be relu/gelu, not {activation}")
            activation = F.relu if activation == "relu" else F.gelu
        self.activation = activation

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            return x + self._ff_block(self.norm2(x))
        x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
        return self.norm2(x + self._ff_block(x))

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask, need_weights=False,
                           is_causal=is_causal)[0]
        return self.dropout1(x)

    def _ff_block(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerEncoder(Module):
    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True, mask_check=True):
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(encoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        out = src
        for layer in self.layers:
            out = layer(out, src_mask=mask, src_key_padding_mask=src_key_padding_mask, is_causal=bool(is_causal))
        return self.norm(out) if self.norm is not None else out



# ---------------------------------------------------------------------------
# the decoder side and the whole Transformer
__all__ += ["TransformerDecoderLayer", "TransformerDecoder", "Transformer"]


def _generate_square_subsequent_mask(sz, device=None, dtype=None):
    """(sz, sz) float mask: 0 on and below the diagonal, -inf above (position i sees 0..i)."""
    dtype = _C._dtypes["float32"] if dtype is None else dtype
    return _C.triu(_C.full((sz, sz), float("-inf"), dtype=dtype, device=device), diagonal=1)


def _detect_is_causal_mask(mask, is_causal=None, size=None):
    """is_causal as given; when it is None, whether mask equals the causal mask of its size."""
    make_causal = is_causal is True
    if is_causal is None and mask is not None:
        sz = size if size is not None else mask.size(-2)
        causal = _generate_square_subsequent_mask(sz, device=mask.device, dtype=mask.dtype)
        make_causal = tuple(mask.shape) == tuple(causal.shape) and bool((mask == causal).all())
    return make_causal


def _activation_fn(activation):
    if isinstance(activation, str):
        if activation not in ("relu", "gelu"):
            raise RuntimeError(f"activation should be relu/gelu, not {activation}")
        return F.relu if activation == "relu" else F.gelu
    return activation


class TransformerDecoderLayer(Module):
    """Self-attention over tgt, attention over memory, a feed-forward block;
    each with dropout and a residual connection, normalized after (or before,
    with norm_first) each block."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation=F.relu, layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=batch_first, bias=bias, **kw)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=batch_first, bias=bias,
                                                 **kw)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        self.activation = _activation_fn(activation)

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False):
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask, memory_key_padding_mask, memory_is_causal)
            return x + self._ff_block(self.norm3(x))
        x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
        x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask, memory_is_causal))
        return self.norm3(x + self._ff_block(x))

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal=False):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask, is_causal=bool(is_causal),
                           need_weights=False)[0]
        return self.dropout1(x)

    def _mha_block(self, x, mem, attn_mask, key_padding_mask, is_causal=False):
        x = self.multihead_attn(x, mem, mem, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                                is_causal=bool(is_causal), need_weights=False)[0]
        return self.dropout2(x)

    def _ff_block(self, x):
        return self.dropout3(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerDecoder(Module):
    """num_layers copies of decoder_layer, then the optional norm."""

    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(decoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False):
        out = tgt
        seq_len = None
        if len(self.layers):
            batch_first = self.layers[0].self_attn.batch_first
            seq_len = tgt.size(0) if tgt.dim() == 2 else tgt.size(1 if batch_first else 0)
        tgt_is_causal = _detect_is_causal_mask(tgt_mask, tgt_is_causal, seq_len)
        for layer in self.layers:
            out = layer(out, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                        tgt_key_padding_mask=tgt_key_padding_mask, memory_key_padding_mask=memory_key_padding_mask,
                        tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)
        return self.norm(out) if self.norm is not None else out


class Transformer(Module):
    """An encoder of num_encoder_layers and a decoder of num_decoder_layers
    (each followed by a LayerNorm); matrices re-initialized Xavier-uniform."""

    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6, dim_feedforward=2048,
                 dropout=0.1, activation=F.relu, custom_encoder=None, custom_decoder=None, layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            layer = TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                                            batch_first, norm_first, bias, **kw)
            self.encoder = TransformerEncoder(layer, num_encoder_layers,
                                              LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw))
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            layer = TransformerDecoderLayer(d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                                            batch_first, norm_first, bias, **kw)
            self.decoder = TransformerDecoder(layer, num_decoder_layers,
                                              LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw))
        self._reset_parameters()
        self.d_model = d_model
        self.nhead = nhead
        self.batch_first = batch_first

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None, src_key_padding_mask=None,
                tgt_key_padding_mask=None, memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                memory_is_causal=False):
        batched = src.dim() == 3
        if batched and src.size(0 if self.batch_first else 1) != tgt.size(0 if self.batch_first else 1):
            raise RuntimeError("the batch number of src and tgt must be equal")
        if src.size(-1) != self.d_model or tgt.size(-1) != self.d_model:
            raise RuntimeError("the feature number of src and tgt must be equal to d_model")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask, is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask, tgt_is_causal=tgt_is_causal,
                            memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz, device=None, dtype=None):
        return _generate_square_subsequent_mask(sz, device=device, dtype=dtype)

    def _reset_parameters(self):
        for p in self.parameters():
            if p.dim() > 1:
                init.xavier_uniform_(p)
