"""MultiheadAttention / TransformerEncoderLayer / TransformerEncoder: state_dict
keys, shapes, masks and need_weights by hand; with torch installed, the same
seed gives the same weights, and the same weights give the same outputs and
gradients."""
import numpy as np
import pytest

import ember
from ember import nn

try:
    import torch as _torch
except ImportError:
    _torch = None
needs_torch = pytest.mark.skipif(_torch is None, reason="torch not installed")
RNG = np.random.default_rng(0)


def test_mha_shapes_keys_and_masks_by_hand():
    m = nn.MultiheadAttention(8, 2)
    assert [n for n, _ in m.named_parameters()] == ["in_proj_weight", "in_proj_bias", "out_proj.weight",
                                                     "out_proj.bias"]
    x = ember.from_numpy(RNG.standard_normal((5, 3, 8)).astype(np.float32))
    out, w = m(x, x, x)
    assert out.shape == (5, 3, 8) and w.shape == (3, 5, 5)
    np.testing.assert_allclose(w.sum(-1).detach().numpy(), np.ones((3, 5)), rtol=1e-5)
    causal = ember.ones(5, 5, dtype=ember.bool).triu(1)  # True: may not attend
    _, w = m(x, x, x, attn_mask=causal)
    assert not np.triu(w.detach().numpy()[0], 1).any()
    pad = ember.zeros(3, 5, dtype=ember.bool)
    pad[:, 4] = True
    _, w = m(x, x, x, key_padding_mask=pad)
    assert not w.detach().numpy()[..., 4].any()
    out2, none = m(x, x, x, key_padding_mask=pad, need_weights=False)
    assert none is None
    np.testing.assert_allclose(out2.detach().numpy(), m(x, x, x, key_padding_mask=pad)[0].detach().numpy(),
                               rtol=1e-5, atol=1e-6)
    bf = nn.MultiheadAttention(8, 2, batch_first=True)
    assert bf(x, x, x)[0].shape == (5, 3, 8)
    with pytest.raises(RuntimeError, match="is_causal"):
        m(x, x, x, is_causal=True)
    with pytest.raises(AssertionError):
        nn.MultiheadAttention(8, 3)


def _copy_into(e_mod, t_mod):
    e_mod.load_state_dict({k: ember.from_numpy(v.detach().numpy().copy()) for k, v in t_mod.state_dict().items()})


@needs_torch
@pytest.mark.parametrize("kw", [{}, {"batch_first": True}, {"kdim": 6, "vdim": 4}, {"add_bias_kv": True},
                                {"add_zero_attn": True}, {"bias": False}])
def test_mha_matches_torch(kw):
    ember.manual_seed(5)
    _torch.manual_seed(5)
    e, t = nn.MultiheadAttention(8, 2, **kw), _torch.nn.MultiheadAttention(8, 2, **kw)
    for (ne, pe), (nt, pt) in zip(e.named_parameters(), t.named_parameters()):
        assert ne == nt
        np.testing.assert_allclose(pe.detach().numpy(), pt.detach().numpy(), rtol=1e-5, atol=1e-6)
    e.double(), t.double()
    _copy_into(e, t)
    shp = (3, 5, 8) if kw.get("batch_first") else (5, 3, 8)
    q = RNG.standard_normal(shp)
    k = RNG.standard_normal(shp[:-1] + (kw.get("kdim", 8),))
    v = RNG.standard_normal(shp[:-1] + (kw.get("vdim", 8),))
    mask = np.triu(np.ones((5, 5), bool), 1)
    pad = np.zeros((3, 5), bool)
    pad[1, 3] = True
    for need in (True, False):
        res = []
        for L, mod in ((ember, e), (_torch, t)):
            xs = [L.tensor(a, requires_grad=True) for a in (q, k, v)]
            out, w = mod(*xs, attn_mask=L.tensor(mask), key_padding_mask=L.tensor(pad), need_weights=need)
            out.sum().backward()
            res.append([out.detach().numpy()] + [x.grad.numpy() for x in xs]
                       + ([w.detach().numpy()] if w is not None else []))
        for a, b in zip(*res):
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-10)


@needs_torch
@pytest.mark.parametrize("kw", [{}, {"norm_first": True, "activation": "gelu"}, {"batch_first": True}])
def test_encoder_matches_torch(kw):
    ember.manual_seed(1)
    _torch.manual_seed(1)
    e = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, **kw), 2, norm=nn.LayerNorm(8))
    t = _torch.nn.TransformerEncoder(_torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, **kw), 2,
                                     norm=_torch.nn.LayerNorm(8), enable_nested_tensor=False)
    assert [n for n, _ in e.named_parameters()] == [n for n, _ in t.named_parameters()]
    assert repr(e) == repr(t)
    e.double(), t.double()
    _copy_into(e, t)
    x = RNG.standard_normal((4, 3, 8))
    T = x.shape[1] if kw.get("batch_first") else x.shape[0]
    mask = np.triu(np.full((T, T), -np.inf), 1)
    res = []
    for L, mod in ((ember, e), (_torch, t)):
        xi = L.tensor(x, requires_grad=True)
        y = mod(xi, mask=L.tensor(mask))
        y.sum().backward()
        res.append((y.detach().numpy(), xi.grad.numpy()))
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-10)
