"""TransformerDecoderLayer, TransformerDecoder and Transformer against torch
(same weights through load_state_dict: outputs, gradients, reprs, parameter
names, masks, errors), their causal / padding masks by what they must not
see (no torch needed), and LazyLinear / UninitializedParameter."""
import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F

try:
    import torch as _torch
except ImportError:
    _torch = None
needs_torch = pytest.mark.skipif(_torch is None, reason="torch not installed")
pytestmark = pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")  # torch's encoder, about itself


def rng(seed=0):
    return np.random.default_rng(seed)


def copy_into(e_mod, t_mod):
    e_mod.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in t_mod.state_dict().items()})


def compare(e_mod, t_mod, e_args, t_args, e_kw=None, t_kw=None, rtol=1e-9):
    """Outputs and the gradients of every parameter and float input of sum(out * w)."""
    eo, to = e_mod(*e_args, **(e_kw or {})), t_mod(*t_args, **(t_kw or {}))
    assert tuple(eo.shape) == tuple(to.shape)
    np.testing.assert_allclose(eo.detach().numpy(), to.detach().numpy(), rtol=rtol, atol=1e-10)
    w = rng(99).standard_normal(tuple(to.shape))
    (eo * ember.tensor(w)).sum().backward()
    (to * _torch.tensor(w)).sum().backward()
    for (n, ep), (nt, tp) in zip(e_mod.named_parameters(), t_mod.named_parameters()):
        assert n == nt
        np.testing.assert_allclose(ep.grad.numpy(), tp.grad.numpy(), rtol=1e-7, atol=1e-9, err_msg=n)
    for ea, ta in zip(e_args, t_args):
        if getattr(ta, "grad", None) is not None:
            np.testing.assert_allclose(ea.grad.numpy(), ta.grad.numpy(), rtol=1e-7, atol=1e-9)


def pair(a):
    return ember.tensor(a).requires_grad_(), _torch.tensor(a).requires_grad_()


LAYER_KW = [{}, {"batch_first": True}, {"norm_first": True}, {"activation": "gelu"}, {"bias": False},
            {"layer_norm_eps": 1e-3, "dim_feedforward": 7}]


@needs_torch
@pytest.mark.parametrize("kw", LAYER_KW)
def test_decoder_layer_matches_torch(kw):
    em = nn.TransformerDecoderLayer(8, 2, dim_feedforward=kw.pop("dim_feedforward", 16), dropout=0.0, **kw)
    tm = _torch.nn.TransformerDecoderLayer(8, 2, dim_feedforward=em.linear1.out_features, dropout=0.0, **kw)
    assert repr(em) == repr(tm)
    assert [n for n, _ in em.named_parameters()] == [n for n, _ in tm.named_parameters()]
    em.double(), tm.double()
    copy_into(em, tm)
    bf = kw.get("batch_first", False)
    T, S, N = 5, 4, 3
    tgt_shape, mem_shape = ((N, T, 8), (N, S, 8)) if bf else ((T, N, 8), (S, N, 8))
    (et, tt), (ee, te) = pair(rng(1).standard_normal(tgt_shape)), pair(rng(2).standard_normal(mem_shape))
    e_mask = nn.Transformer.generate_square_subsequent_mask(T, dtype=ember.float64)
    t_mask = _torch.nn.Transformer.generate_square_subsequent_mask(T, dtype=_torch.float64)
    kpm = np.zeros((N, S), dtype=bool)
    kpm[1, -2:] = True
    compare(em, tm, (et, ee), (tt, te),
            {"tgt_mask": e_mask, "memory_key_padding_mask": ember.tensor(kpm)},
            {"tgt_mask": t_mask, "memory_key_padding_mask": _torch.tensor(kpm)})


@needs_torch
def test_decoder_layer_module_activation_and_unbatched():
    em = nn.TransformerDecoderLayer(8, 4, 12, dropout=0.0, activation=nn.GELU(approximate="tanh")).double()
    tm = _torch.nn.TransformerDecoderLayer(8, 4, 12, dropout=0.0,
                                           activation=_torch.nn.GELU(approximate="tanh")).double()
    assert repr(em) == repr(tm)
    copy_into(em, tm)
    (et, tt), (ee, te) = pair(rng(3).standard_normal((5, 8))), pair(rng(4).standard_normal((6, 8)))
    tgt_kpm = np.array([False, False, False, True, True])
    compare(em, tm, (et, ee), (tt, te), {"tgt_key_padding_mask": ember.tensor(tgt_kpm)},
            {"tgt_key_padding_mask": _torch.tensor(tgt_kpm)})


@needs_torch
@pytest.mark.parametrize("norm", [False, True])
def test_decoder_stack_matches_torch(norm):
    el = nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0)
    tl = _torch.nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0)
    em = nn.TransformerDecoder(el, 2, nn.LayerNorm(8) if norm else None).double()
    tm = _torch.nn.TransformerDecoder(tl, 2, _torch.nn.LayerNorm(8) if norm else None).double()
    assert repr(em) == repr(tm)
    for p in tm.parameters():  # layers differ from each other (deepcopies start equal)
        p.data.add_(_torch.tensor(rng(p.numel()).standard_normal(tuple(p.shape))) * 0.1)
    copy_into(em, tm)
    (et, tt), (ee, te) = pair(rng(5).standard_normal((4, 2, 8))), pair(rng(6).standard_normal((3, 2, 8)))
    bool_mask = np.triu(np.ones((4, 4), dtype=bool), 1)
    compare(em, tm, (et, ee), (tt, te), {"tgt_mask": ember.tensor(bool_mask), "tgt_is_causal": True},
            {"tgt_mask": _torch.tensor(bool_mask), "tgt_is_causal": True})


@needs_torch
@pytest.mark.parametrize("kw", [{}, {"batch_first": True, "norm_first": True}, {"activation": "gelu", "bias": False}])
def test_transformer_matches_torch(kw):
    em = nn.Transformer(8, 2, 2, 1, 16, dropout=0.0, **kw)
    tm = _torch.nn.Transformer(8, 2, 2, 1, 16, dropout=0.0, **kw)
    assert repr(em) == repr(tm)
    assert [(n, tuple(p.shape)) for n, p in em.named_parameters()] == \
        [(n, tuple(p.shape)) for n, p in tm.named_parameters()]
    assert (em.d_model, em.nhead, em.batch_first) == (tm.d_model, tm.nhead, tm.batch_first)
    em.double(), tm.double()
    copy_into(em, tm)
    bf = kw.get("batch_first", False)
    src_shape, tgt_shape = ((2, 6, 8), (2, 4, 8)) if bf else ((6, 2, 8), (4, 2, 8))
    (es, ts), (et, tt) = pair(rng(7).standard_normal(src_shape)), pair(rng(8).standard_normal(tgt_shape))
    src_kpm = np.zeros((2, 6), dtype=bool)
    src_kpm[0, -1] = True
    e_kw = {"tgt_mask": nn.Transformer.generate_square_subsequent_mask(4, dtype=ember.float64),
            "src_key_padding_mask": ember.tensor(src_kpm), "memory_key_padding_mask": ember.tensor(src_kpm)}
    t_kw = {"tgt_mask": _torch.nn.Transformer.generate_square_subsequent_mask(4, dtype=_torch.float64),
            "src_key_padding_mask": _torch.tensor(src_kpm), "memory_key_padding_mask": _torch.tensor(src_kpm)}
    compare(em, tm, (es, et), (ts, tt), e_kw, t_kw)


@needs_torch
def test_transformer_init_and_errors_match_torch():
    em, tm = nn.Transformer(8, 2, 1, 1, 16), _torch.nn.Transformer(8, 2, 1, 1, 16)
    for (n, ep), (_, tp) in zip(em.named_parameters(), tm.named_parameters()):
        e, t = ep.detach().numpy(), tp.detach().numpy()
        if ep.dim() > 1:  # Xavier-uniform over all matrices: the same bound
            bound = np.sqrt(6.0 / (t.shape[0] + t.shape[1]))
            assert np.abs(e).max() <= bound and np.abs(e).max() > 0.5 * bound, n
        else:
            np.testing.assert_array_equal(e == 0, t == 0, err_msg=n)  # biases zero, norms one
    for sz in (1, 4):
        np.testing.assert_array_equal(nn.Transformer.generate_square_subsequent_mask(sz).numpy(),
                                      _torch.nn.Transformer.generate_square_subsequent_mask(sz).numpy())
    assert nn.Transformer.generate_square_subsequent_mask(3).dtype == ember.float32
    for es, et, ts, tt in [((5, 2, 8), (4, 3, 8), (5, 2, 8), (4, 3, 8)), ((5, 2, 6), (4, 2, 6), (5, 2, 6), (4, 2, 6))]:
        with pytest.raises(RuntimeError) as t_err:
            tm(_torch.zeros(ts), _torch.zeros(tt))
        with pytest.raises(RuntimeError) as e_err:
            em(ember.zeros(es), ember.zeros(et))
        assert str(e_err.value) == str(t_err.value)
    with pytest.raises(RuntimeError):
        _torch.nn.TransformerDecoderLayer(8, 2, activation="tanh")
    with pytest.raises(RuntimeError, match="relu/gelu"):
        nn.TransformerDecoderLayer(8, 2, activation="tanh")


# ----------------------------------------------------------------- no torch: what the masks hide

def test_decoder_masks_hide_the_future_and_padded_memory():
    ember.manual_seed(0)
    m = nn.TransformerDecoder(nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0), 2).double().eval()
    tgt = rng(9).standard_normal((5, 2, 8))
    mem = rng(10).standard_normal((4, 2, 8))
    mask = nn.Transformer.generate_square_subsequent_mask(5, dtype=ember.float64)
    np.testing.assert_array_equal(mask.numpy(), np.triu(np.full((5, 5), -np.inf), 1))
    kpm = ember.tensor(np.array([[False, False, True, True], [False, False, False, False]]))
    base = m(ember.tensor(tgt), ember.tensor(mem), tgt_mask=mask, memory_key_padding_mask=kpm).detach().numpy()
    later = tgt.copy()
    later[3:] += 5.0  # change the future of positions 0..2
    padded = mem.copy()
    padded[2:, 0] -= 3.0  # change memory that sample 0 may not see
    out = m(ember.tensor(later), ember.tensor(padded), tgt_mask=mask, memory_key_padding_mask=kpm).detach().numpy()
    np.testing.assert_allclose(out[:3], base[:3], rtol=1e-12, atol=1e-12)
    assert not np.allclose(out[3:], base[3:])
    same_mem = m(ember.tensor(tgt), ember.tensor(padded), tgt_mask=mask, memory_key_padding_mask=kpm).detach().numpy()
    np.testing.assert_allclose(same_mem[:, 0], base[:, 0], rtol=1e-12, atol=1e-12)
    assert not np.allclose(m(ember.tensor(tgt), ember.tensor(padded), tgt_mask=mask).detach().numpy()[:, 0],
                           base[:, 0])
    # the causal hint is detected from the mask itself, and a bool mask means the same thing
    bool_mask = ember.tensor(np.triu(np.ones((5, 5), dtype=bool), 1))
    np.testing.assert_allclose(m(ember.tensor(tgt), ember.tensor(mem), tgt_mask=bool_mask,
                                 memory_key_padding_mask=kpm).detach().numpy(), base, rtol=1e-12, atol=1e-12)


def test_transformer_trains():
    ember.manual_seed(0)
    m = nn.Transformer(8, 2, 1, 1, 16, dropout=0.1, batch_first=True)
    opt = ember.optim.Adam(m.parameters(), lr=1e-2)
    src = ember.tensor(rng(11).standard_normal((4, 6, 8)), dtype=ember.float32)
    tgt = ember.tensor(rng(12).standard_normal((4, 5, 8)), dtype=ember.float32)
    mask = m.generate_square_subsequent_mask(5)
    losses = []
    for _ in range(30):
        loss = F.mse_loss(m(src, tgt, tgt_mask=mask, tgt_is_causal=True), tgt)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss))
    assert losses[-1] < 0.5 * losses[0]


# ----------------------------------------------------------------- LazyLinear

def test_lazy_linear_materializes_at_first_forward():
    from ember.nn.parameter import UninitializedParameter, is_lazy
    m = nn.LazyLinear(3)
    assert repr(m) == "LazyLinear(in_features=0, out_features=3, bias=True)"
    assert isinstance(m.weight, UninitializedParameter) and is_lazy(m.weight) and m.has_uninitialized_params()
    assert repr(m.weight) == "<UninitializedParameter>"
    x = rng(13).standard_normal((2, 5)).astype(np.float32)
    y = m(ember.tensor(x))
    assert type(m) is nn.Linear and repr(m) == "Linear(in_features=5, out_features=3, bias=True)"
    assert type(m.weight) is nn.Parameter and not is_lazy(m.weight) and m.weight.shape == (3, 5)
    bound = 1 / np.sqrt(5)
    assert np.abs(m.weight.detach().numpy()).max() <= bound and np.abs(m.bias.detach().numpy()).max() <= bound
    np.testing.assert_allclose(y.detach().numpy(), x @ m.weight.detach().numpy().T + m.bias.detach().numpy(),
                               rtol=1e-5, atol=1e-6)
    # an optimizer built after the first forward trains it
    opt = ember.optim.SGD(m.parameters(), lr=0.1)
    before = m.weight.detach().numpy().copy()
    m(ember.tensor(x)).sum().backward()
    opt.step()
    np.testing.assert_allclose(m.weight.detach().numpy(), before - 0.1 * x.sum(0)[None, :].repeat(3, 0), rtol=1e-5)
    nb = nn.LazyLinear(2, bias=False, dtype=ember.float64)
    nb(ember.zeros(4, 7, dtype=ember.float64))
    assert nb.bias is None and nb.weight.dtype == ember.float64 and nb.weight.shape == (2, 7)


def test_lazy_linear_loads_a_state_dict_and_works_in_sequential():
    src = nn.Linear(4, 2)
    m = nn.LazyLinear(2)
    m.load_state_dict(src.state_dict())
    np.testing.assert_array_equal(m.weight.detach().numpy(), src.weight.detach().numpy())
    x = ember.randn(3, 4)
    np.testing.assert_allclose(m(x).detach().numpy(), src(x).detach().numpy())
    seq = nn.Sequential(nn.LazyLinear(6), nn.ReLU(), nn.LazyLinear(1))
    assert seq(ember.randn(2, 9)).shape == (2, 1)
    assert [tuple(p.shape) for p in seq.parameters()] == [(6, 9), (6,), (1, 6), (1,)]


@needs_torch
def test_lazy_linear_repr_and_values_match_torch():
    em, tm = nn.LazyLinear(4), _torch.nn.LazyLinear(4)
    assert repr(em) == repr(tm)
    x = rng(14).standard_normal((3, 6))
    em(ember.tensor(x, dtype=ember.float32)), tm(_torch.tensor(x, dtype=_torch.float32))
    assert repr(em) == repr(tm) and type(tm).__name__ == type(em).__name__
    copy_into(em, tm)
    em.double(), tm.double()
    (ex, tx) = pair(x)
    compare(em, tm, (ex,), (tx,))


def test_lazy_linear_deepcopy_dtype_and_uninitialized_state_dict():
    import copy
    m = nn.LazyLinear(3)
    twin = copy.deepcopy(m)
    assert twin(ember.randn(2, 4)).shape == (2, 3) and type(twin) is nn.Linear
    assert type(m) is nn.LazyLinear and m.has_uninitialized_params()  # the copy's first forward left m lazy
    fresh = nn.LazyLinear(3)
    fresh.load_state_dict(m.state_dict())  # an uninitialized state_dict: still lazy
    assert fresh.has_uninitialized_params()
    m.double()
    assert m(ember.randn(2, 4, dtype=ember.float64)).dtype == ember.float64 and m.weight.dtype == ember.float64
    assert isinstance(nn.UninitializedParameter(), nn.Parameter)
