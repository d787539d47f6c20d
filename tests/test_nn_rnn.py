"""nn.RNNCell / LSTMCell / GRUCell, nn.RNN / LSTM / GRU and nn.utils.rnn's packed
sequences. Without torch: against a NumPy reference of the cell equations
written here, finite differences (gradcheck) and shapes, keys and error types
by hand. With torch installed: the same weights (copied through state_dict)
give the same outputs, final states and gradients, checkpoints load both
ways, and bad input raises torch's exception with torch's message."""
import math
import warnings

import numpy as np
import pytest

import ember
from ember import nn
from ember.nn.utils import rnn as rnn_utils

try:
    import torch as _torch
except ImportError:
    _torch = None
needs_torch = pytest.mark.skipif(_torch is None, reason="torch not installed")


def _rng(seed=0):
    return np.random.default_rng(seed)


def _np(t):
    return t.detach().numpy()


# ---------------------------------------------------------------------------
# NumPy reference: the cell equations, one step at a time.
# ---------------------------------------------------------------------------

def _sig(v):
    return 1.0 / (1.0 + np.exp(-v))


def _ref_step(mode, x, h, c, w_ih, w_hh, b_ih, b_hh, w_hr=None):
    """x (B, I), h (B, Hout), c (B, H) -> (h', c'); the gate order as torch's."""
    gi = x @ w_ih.T + (0 if b_ih is None else b_ih)
    gh = h @ w_hh.T + (0 if b_hh is None else b_hh)
    if mode in ("RNN_TANH", "RNN_RELU"):
        pre = gi + gh
        return (np.tanh(pre) if mode == "RNN_TANH" else np.maximum(pre, 0)), None
    if mode == "LSTM":
        H = w_hh.shape[0] // 4
        g = gi + gh
        i, f, gg, o = (g[:, k * H:(k + 1) * H] for k in range(4))
        c2 = _sig(f) * c + _sig(i) * np.tanh(gg)
        h2 = _sig(o) * np.tanh(c2)
        if w_hr is not None:
            h2 = h2 @ w_hr.T
        return h2, c2
    H = w_hh.shape[0] // 3
    r = _sig(gi[:, :H] + gh[:, :H])
    z = _sig(gi[:, H:2 * H] + gh[:, H:2 * H])
    n = np.tanh(gi[:, 2 * H:] + r * gh[:, 2 * H:])
    return (1 - z) * n + z * h, None


def _ref_layers(mode, params, x, h0, c0, num_layers, bidirectional):
    """x (T, B, I); params: name -> array (torch's names); h0 (L*D, B, Hout).
    Returns (output (T, B, D*Hout), h_n, c_n)."""
    D = 2 if bidirectional else 1
    inp = x
    hn, cn = [], []
    for layer in range(num_layers):
        outs = []
        for d in range(D):
            sfx = f"_l{layer}" + ("_reverse" if d else "")
            w = [params.get(n + sfx) for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_hr")]
            k = layer * D + d
            h, c = h0[k], (c0[k] if c0 is not None else None)
            T = inp.shape[0]
            out = [None] * T
            for t in (range(T - 1, -1, -1) if d else range(T)):
                h, c = _ref_step(mode, inp[t], h, c, *w)
                out[t] = h
            outs.append(np.stack(out))
            hn.append(h)
            cn.append(c)
        inp = np.concatenate(outs, -1)
    return inp, np.stack(hn), (np.stack(cn) if mode == "LSTM" else None)


def _params(m):
    return {n: _np(p) for n, p in m.named_parameters()}


# ---------------------------------------------------------------------------
# Without torch
# ---------------------------------------------------------------------------

def test_state_dict_keys_2_layer_bidirectional_lstm():
    m = nn.LSTM(10, 20, num_layers=2, bidirectional=True)
    assert list(m.state_dict().keys()) == [
        "weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0",
        "weight_ih_l0_reverse", "weight_hh_l0_reverse", "bias_ih_l0_reverse", "bias_hh_l0_reverse",
        "weight_ih_l1", "weight_hh_l1", "bias_ih_l1", "bias_hh_l1",
        "weight_ih_l1_reverse", "weight_hh_l1_reverse", "bias_ih_l1_reverse", "bias_hh_l1_reverse"]
    shapes = {k: tuple(v.shape) for k, v in m.state_dict().items()}
    assert shapes["weight_ih_l0"] == (80, 10) and shapes["weight_ih_l1"] == (80, 40)
    assert shapes["weight_hh_l1_reverse"] == (80, 20) and shapes["bias_hh_l0"] == (80,)
    p = nn.LSTM(3, 4, 2, proj_size=2, bidirectional=True)
    assert [k for k in p.state_dict() if k.endswith("l1")] == ["weight_ih_l1", "weight_hh_l1", "bias_ih_l1",
                                                                "bias_hh_l1", "weight_hr_l1"]
    assert tuple(p.weight_hr_l0.shape) == (2, 4) and tuple(p.weight_hh_l0.shape) == (16, 2)
    assert tuple(p.weight_ih_l1.shape) == (16, 4)
    assert list(nn.GRU(3, 4, bias=False).state_dict()) == ["weight_ih_l0", "weight_hh_l0"]
    assert [n for n, _ in nn.LSTMCell(3, 4).named_parameters()] == ["weight_ih", "weight_hh", "bias_ih", "bias_hh"]
    assert tuple(nn.GRUCell(3, 4).weight_ih.shape) == (12, 3)
    assert nn.RNNCell(3, 4, bias=False).bias_ih is None
    assert len(m.all_weights) == 4 and m.all_weights[1][0] is m.weight_ih_l0_reverse
    assert m._flat_weights_names == list(m.state_dict().keys())
    m.flatten_parameters()  # no-op, torch's API


def test_init_uniform_bound():
    for m, H in [(nn.LSTM(3, 16, 2), 16), (nn.GRUCell(5, 9), 9), (nn.RNN(2, 25, bidirectional=True), 25)]:
        bound = 1 / math.sqrt(H)
        for name, p in m.named_parameters():
            a = _np(p)
            assert np.all(np.abs(a) <= bound), name
            assert a.std() > bound / 4, name  # spread over the range, not constant


def test_repr():
    assert repr(nn.LSTM(3, 4, 2, batch_first=True, dropout=0.1, bidirectional=True, proj_size=2)) == \
        "LSTM(3, 4, proj_size=2, num_layers=2, batch_first=True, dropout=0.1, bidirectional=True)"
    assert repr(nn.GRU(3, 4, bias=False)) == "GRU(3, 4, bias=False)"
    assert repr(nn.RNNCell(3, 4, nonlinearity="relu")) == "RNNCell(3, 4, nonlinearity=relu)"
    assert repr(nn.LSTMCell(3, 4, bias=False)) == "LSTMCell(3, 4, bias=False)"


CELLS = [("RNN_TANH", lambda **k: nn.RNNCell(3, 5, **k)),
         ("RNN_RELU", lambda **k: nn.RNNCell(3, 5, nonlinearity="relu", **k)),
         ("LSTM", lambda **k: nn.LSTMCell(3, 5, **k)), ("GRU", lambda **k: nn.GRUCell(3, 5, **k))]


@pytest.mark.parametrize("mode,make", CELLS, ids=[c[0] for c in CELLS])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("given", [True, False])
def test_cells_against_numpy(mode, make, bias, batched, given):
    cell = make(bias=bias).double()
    r = _rng(1)
    x = r.standard_normal((4, 3) if batched else (3,))
    h = r.standard_normal((4, 5) if batched else (5,))
    c = r.standard_normal((4, 5) if batched else (5,))
    p = _params(cell)
    x2 = x if batched else x[None]
    h2 = (h if batched else h[None]) if given else np.zeros((x2.shape[0], 5))
    c2 = (c if batched else c[None]) if given else np.zeros((x2.shape[0], 5))
    eh, ec = _ref_step(mode, x2, h2, c2, p["weight_ih"], p["weight_hh"], p.get("bias_ih"), p.get("bias_hh"))
    if not batched:
        eh, ec = eh[0], (ec[0] if ec is not None else None)
    xe = ember.tensor(x)
    if mode == "LSTM":
        hh, cc = cell(xe, (ember.tensor(h), ember.tensor(c)) if given else None)
        np.testing.assert_allclose(_np(cc), ec, rtol=1e-12, atol=1e-12)
    else:
        hh = cell(xe, ember.tensor(h) if given else None)
    assert hh.shape == eh.shape
    np.testing.assert_allclose(_np(hh), eh, rtol=1e-12, atol=1e-12)


LAYERS = [("RNN_TANH", nn.RNN, {}), ("RNN_RELU", nn.RNN, {"nonlinearity": "relu"}), ("LSTM", nn.LSTM, {}),
          ("GRU", nn.GRU, {})]
CONFIGS = [{}, {"num_layers": 2}, {"bidirectional": True}, {"batch_first": True},
           {"num_layers": 2, "bidirectional": True, "batch_first": True}, {"bias": False, "num_layers": 2}]


@pytest.mark.parametrize("mode,cls,kw0", LAYERS, ids=[c[0] for c in LAYERS])
@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()) or "plain")
@pytest.mark.parametrize("given", [False, True])
def test_layers_against_numpy(mode, cls, kw0, cfg, given):
    m = cls(3, 4, **kw0, **cfg).double()
    L, D = cfg.get("num_layers", 1), 2 if cfg.get("bidirectional") else 1
    r = _rng(2)
    T, B = 5, 2
    x = r.standard_normal((T, B, 3))
    h0 = r.standard_normal((L * D, B, 4)) if given else np.zeros((L * D, B, 4))
    c0 = r.standard_normal((L * D, B, 4)) if given else np.zeros((L * D, B, 4))
    eo, eh, ec = _ref_layers(mode, _params(m), x, h0, c0 if mode == "LSTM" else None, L, D == 2)
    xin = np.ascontiguousarray(x.transpose(1, 0, 2)) if cfg.get("batch_first") else x
    hx = None
    if given:
        hx = (ember.tensor(h0), ember.tensor(c0)) if mode == "LSTM" else ember.tensor(h0)
    out, hn = m(ember.tensor(xin), hx)
    if mode == "LSTM":
        hn, cn = hn
        np.testing.assert_allclose(_np(cn), ec, rtol=1e-10, atol=1e-12)
    if cfg.get("batch_first"):
        eo = eo.transpose(1, 0, 2)
    assert out.shape == eo.shape == ((B, T, 4 * D) if cfg.get("batch_first") else (T, B, 4 * D))
    assert hn.shape == (L * D, B, 4)
    np.testing.assert_allclose(_np(out), eo, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(_np(hn), eh, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("mode,cls,kw0", LAYERS, ids=[c[0] for c in LAYERS])
def test_unbatched_layers_against_numpy(mode, cls, kw0):
    m = cls(3, 4, num_layers=2, bidirectional=True, **kw0).double()
    r = _rng(3)
    x = r.standard_normal((6, 3))
    h0 = r.standard_normal((4, 4))
    c0 = r.standard_normal((4, 4))
    eo, eh, ec = _ref_layers(mode, _params(m), x[:, None], h0[:, None], c0[:, None] if mode == "LSTM" else None,
                             2, True)
    hx = (ember.tensor(h0), ember.tensor(c0)) if mode == "LSTM" else ember.tensor(h0)
    out, hn = m(ember.tensor(x), hx)
    if mode == "LSTM":
        hn, cn = hn
        assert cn.shape == (4, 4)
        np.testing.assert_allclose(_np(cn), ec[:, 0], rtol=1e-10, atol=1e-12)
    assert out.shape == (6, 8) and hn.shape == (4, 4)
    np.testing.assert_allclose(_np(out), eo[:, 0], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(_np(hn), eh[:, 0], rtol=1e-10, atol=1e-12)


def test_lstm_proj_size_against_numpy():
    m = nn.LSTM(3, 5, num_layers=2, bidirectional=True, proj_size=2).double()
    r = _rng(4)
    x, h0, c0 = r.standard_normal((4, 3, 3)), r.standard_normal((4, 3, 2)), r.standard_normal((4, 3, 5))
    eo, eh, ec = _ref_layers("LSTM", _params(m), x, h0, c0, 2, True)
    out, (hn, cn) = m(ember.tensor(x), (ember.tensor(h0), ember.tensor(c0)))
    assert out.shape == (4, 3, 4) and hn.shape == (4, 3, 2) and cn.shape == (4, 3, 5)
    for a, b in [(out, eo), (hn, eh), (cn, ec)]:
        np.testing.assert_allclose(_np(a), b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("mode,cls,kw0", LAYERS, ids=[c[0] for c in LAYERS])
def test_layer_gradcheck(mode, cls, kw0):
    """Gradients of input, h0 and every parameter against finite differences."""
    m = cls(2, 3, num_layers=2, bidirectional=True, **kw0).double()
    r = _rng(5)
    x = ember.tensor(r.standard_normal((3, 2, 2)), requires_grad=True)
    h0 = ember.tensor(r.standard_normal((4, 2, 3)) * 0.5, requires_grad=True)
    c0 = ember.tensor(r.standard_normal((4, 2, 3)) * 0.5, requires_grad=True)
    names = [n for n, _ in m.named_parameters()]
    params = [p for _, p in m.named_parameters()]

    def f(x, h0, c0, *ps):
        for n, p in zip(names, ps):
            m._parameters[n] = p
        out, hn = m(x, (h0, c0) if mode == "LSTM" else h0)
        if mode == "LSTM":
            return out, hn[0], hn[1]
        return out, hn

    assert ember.autograd.gradcheck(f, (x, h0, c0, *params), eps=1e-6, atol=1e-5)


def _packed_reference(mode, m, x, lens, h0, c0, L, D):
    """Each sequence run alone on its own length (NumPy), then padded with zeros."""
    T, B = x.shape[:2]
    out = np.zeros((T, B, D * h0.shape[-1]))
    hn = np.zeros_like(h0)
    cn = np.zeros_like(c0) if c0 is not None else None
    p = _params(m)
    for b, n in enumerate(lens):
        o, h, c = _ref_layers(mode, p, x[:n, b:b + 1], h0[:, b:b + 1], c0[:, b:b + 1] if c0 is not None else None,
                              L, D == 2)
        out[:n, b] = o[:, 0]
        hn[:, b] = h[:, 0]
        if cn is not None:
            cn[:, b] = c[:, 0]
    return out, hn, cn


@pytest.mark.parametrize("mode,cls,kw0", LAYERS, ids=[c[0] for c in LAYERS])
@pytest.mark.parametrize("enforce_sorted", [True, False])
def test_packed_against_numpy(mode, cls, kw0, enforce_sorted):
    m = cls(3, 4, num_layers=2, bidirectional=True, **kw0).double()
    lens = [5, 3, 3, 1] if enforce_sorted else [3, 5, 1, 3]
    r = _rng(6)
    x = r.standard_normal((5, 4, 3))
    h0, c0 = r.standard_normal((4, 4, 4)), r.standard_normal((4, 4, 4))
    eo, eh, ec = _packed_reference(mode, m, x, lens, h0, c0 if mode == "LSTM" else None, 2, 2)
    packed = rnn_utils.pack_padded_sequence(ember.tensor(x), lens, enforce_sorted=enforce_sorted)
    hx = (ember.tensor(h0), ember.tensor(c0)) if mode == "LSTM" else ember.tensor(h0)
    out, hn = m(packed, hx)
    assert isinstance(out, rnn_utils.PackedSequence)
    if mode == "LSTM":
        hn, cn = hn
        np.testing.assert_allclose(_np(cn), ec, rtol=1e-10, atol=1e-12)
    padded, lengths = rnn_utils.pad_packed_sequence(out)
    assert lengths.tolist() == lens
    np.testing.assert_allclose(_np(padded), eo, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(_np(hn), eh, rtol=1e-10, atol=1e-12)
    # zeros h0 when none is given
    out0, _ = m(packed)
    eo0, _, _ = _packed_reference(mode, m, x, lens, 0 * h0, 0 * c0 if mode == "LSTM" else None, 2, 2)
    np.testing.assert_allclose(_np(rnn_utils.pad_packed_sequence(out0)[0]), eo0, rtol=1e-10, atol=1e-12)


def test_packed_gradcheck():
    m = nn.GRU(2, 3, bidirectional=True).double()
    x = ember.tensor(_rng(7).standard_normal((4, 3, 2)), requires_grad=True)

    def f(x):
        p = rnn_utils.pack_padded_sequence(x, [2, 4, 1], enforce_sorted=False)
        out, hn = m(p)
        return rnn_utils.pad_packed_sequence(out, batch_first=True)[0], hn

    assert ember.autograd.gradcheck(f, (x,), eps=1e-6, atol=1e-5)
    f(x)[0].sum().backward()
    assert x.grad is not None and not _np(x.grad)[2:, 2].any()  # padding gets no gradient


def test_pack_pad_round_trip():
    r = _rng(8)
    x = r.standard_normal((4, 3, 2))  # (B, T, *) below
    lens = [2, 3, 1, 3]
    p = rnn_utils.pack_padded_sequence(ember.tensor(x), lens, batch_first=True, enforce_sorted=False)
    assert p.batch_sizes.tolist() == [4, 3, 2] and p.batch_sizes.dtype == ember.int64
    assert p.sorted_indices.tolist() == [1, 3, 0, 2] and p.unsorted_indices.tolist() == [2, 0, 3, 1]
    assert _np(p.data).shape == (9, 2)
    np.testing.assert_array_equal(_np(p.data)[:4], x[[1, 3, 0, 2], 0])
    padded, lengths = rnn_utils.pad_packed_sequence(p, batch_first=True, padding_value=-1.0, total_length=5)
    assert padded.shape == (4, 5, 2) and lengths.tolist() == lens
    want = np.full((4, 5, 2), -1.0)
    for b, n in enumerate(lens):
        want[b, :n] = x[b, :n]
    np.testing.assert_array_equal(_np(padded), want)
    seqs = [ember.tensor(r.standard_normal((n, 2))) for n in (1, 4, 2)]
    ps = rnn_utils.pack_sequence(seqs, enforce_sorted=False)
    for a, b in zip(rnn_utils.unpack_sequence(ps), seqs):
        np.testing.assert_array_equal(_np(a), _np(b))
    sorted_ps = rnn_utils.pack_sequence(sorted(seqs, key=lambda s: -s.shape[0]))
    assert sorted_ps.sorted_indices is None and sorted_ps.batch_sizes.tolist() == [3, 2, 1, 1]
    with pytest.raises(RuntimeError, match="sorted in decreasing order"):
        rnn_utils.pack_sequence(seqs)
    with pytest.raises(RuntimeError, match="greater than 0"):
        rnn_utils.pack_padded_sequence(ember.tensor(x), [3, 2, 1, 0], batch_first=True)
    with pytest.raises(RuntimeError, match="batch_size"):
        rnn_utils.pack_padded_sequence(ember.tensor(x), [3, 2], batch_first=True)
    with pytest.raises(ValueError, match="total_length"):
        rnn_utils.pad_packed_sequence(p, total_length=2)
    d = p.double()
    assert isinstance(d, rnn_utils.PackedSequence) and d.data.dtype == ember.float64


def test_dropout_between_layers_only_in_training():
    r = _rng(9)
    x = ember.tensor(r.standard_normal((5, 2, 3)))
    m = nn.LSTM(3, 4, num_layers=2, dropout=1.0).double()
    p = _params(m)
    # p = 1 drops the whole first-layer output in training: layer 2 sees zeros
    m.train()
    out, (hn, cn) = m(x)
    z = np.zeros((2, 2, 4))
    l1_out, l1_h, l1_c = _ref_layers("LSTM", {k: v for k, v in p.items() if k.endswith("l0")}, _np(x), z[:1], z[:1],
                                     1, False)
    p2 = {k.replace("l1", "l0"): v for k, v in p.items() if k.endswith("l1")}
    eo, eh, ec = _ref_layers("LSTM", p2, np.zeros_like(l1_out), z[1:], z[1:], 1, False)
    np.testing.assert_allclose(_np(out), eo, rtol=1e-10, atol=1e-12)  # the last layer's output is not dropped
    np.testing.assert_allclose(_np(hn), np.concatenate([l1_h, eh]), rtol=1e-10, atol=1e-12)
    # eval: no dropout at all
    m.eval()
    out, _ = m(x)
    eo, _, _ = _ref_layers("LSTM", p, _np(x), np.zeros((2, 2, 4)), np.zeros((2, 2, 4)), 2, False)
    np.testing.assert_allclose(_np(out), eo, rtol=1e-10, atol=1e-12)
    # one layer: dropout does nothing even in training (and warns, as torch does)
    with pytest.warns(UserWarning, match="num_layers greater than 1"):
        one = nn.GRU(3, 4, dropout=0.9).double()
    one.train()
    eo, _, _ = _ref_layers("GRU", _params(one), _np(x), np.zeros((1, 2, 4)), None, 1, False)
    np.testing.assert_allclose(_np(one(x)[0]), eo, rtol=1e-10, atol=1e-12)
    # 0 < p < 1 in training: results vary between calls; with p = 0 they don't
    m2 = nn.GRU(3, 4, num_layers=3, dropout=0.5).double().train()
    a, b = _np(m2(x)[0]), _np(m2(x)[0])
    assert not np.allclose(a, b)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m3 = nn.GRU(3, 4, num_layers=2).double().train()
    np.testing.assert_array_equal(_np(m3(x)[0]), _np(m3(x)[0]))


def test_long_sequence_backward_against_numpy():
    """300 steps: the per-step pieces of the input projection all get their
    gradient (unbind backward over hundreds of pieces); d(sum h_T)/d x_0 by
    the chain rule in NumPy for a one-layer tanh RNN."""
    m = nn.RNN(2, 3).double()
    p = _params(m)
    x_np = _rng(10).standard_normal((300, 1, 2)) * 0.1
    x = ember.tensor(x_np, requires_grad=True)
    out, hn = m(x)
    hn.sum().backward()
    # backward through the recurrence by hand
    hs = [np.zeros((1, 3))]
    for t in range(300):
        hs.append(_ref_step("RNN_TANH", x_np[t], hs[-1], None, p["weight_ih_l0"], p["weight_hh_l0"],
                            p["bias_ih_l0"], p["bias_hh_l0"])[0])
    gh = np.ones((1, 3))
    gx = np.zeros_like(x_np)
    for t in range(299, -1, -1):
        gpre = gh * (1 - hs[t + 1] ** 2)
        gx[t] = gpre @ p["weight_ih_l0"]
        gh = gpre @ p["weight_hh_l0"]
    np.testing.assert_allclose(_np(x.grad), gx, rtol=1e-9, atol=1e-14)
    np.testing.assert_allclose(_np(out)[-1], hs[-1], rtol=1e-12)


def test_batch_first_output_is_contiguous():
    m = nn.GRU(3, 4, num_layers=2, bidirectional=True, batch_first=True)
    out, h = m(ember.randn(2, 7, 3))
    assert out.shape == (2, 7, 8) and out.is_contiguous() and h.is_contiguous()
    assert out.view(-1, 8).shape == (14, 8)  # as torch's output allows


def test_gradients_reach_every_parameter():
    m = nn.LSTM(3, 4, num_layers=2, bidirectional=True, batch_first=True)
    out, (h, c) = m(ember.randn(2, 5, 3))
    (out.sum() + h.sum() + c.sum()).backward()
    for n, p in m.named_parameters():
        assert p.grad is not None and p.grad.shape == p.shape and np.abs(_np(p.grad)).sum() > 0, n


def test_error_types():
    cell = nn.RNNCell(3, 4)
    with pytest.raises(ValueError, match="Expected input to be 1D or 2D, got 3D"):
        cell(ember.randn(2, 2, 3))
    with pytest.raises(RuntimeError, match="inconsistent input_size: got 5 expected 3"):
        cell(ember.randn(2, 5))
    with pytest.raises(RuntimeError, match="batch size"):
        cell(ember.randn(2, 3), ember.randn(3, 4))
    with pytest.raises(RuntimeError, match="inconsistent hidden_size"):
        nn.GRUCell(3, 4)(ember.randn(2, 3), ember.randn(2, 5))
    with pytest.raises(RuntimeError, match="two hidden states"):
        nn.LSTMCell(3, 4)(ember.randn(2, 3), (ember.randn(2, 4),))
    m = nn.LSTM(3, 4, 2)
    with pytest.raises(ValueError, match="Expected input to be 2D or 3D, got 4D"):
        m(ember.randn(1, 2, 3, 4))
    with pytest.raises(RuntimeError, match="input_size. Expected 3, got 6"):
        m(ember.randn(5, 2, 6))
    with pytest.raises(RuntimeError, match=r"Expected hidden\[0\] size \(2, 2, 4\), got \[1, 2, 4\]"):
        m(ember.randn(5, 2, 3), (ember.randn(1, 2, 4), ember.randn(2, 2, 4)))
    with pytest.raises(RuntimeError, match="hx and cx should also be 2-D"):
        m(ember.randn(5, 3), (ember.randn(2, 1, 4), ember.randn(2, 1, 4)))
    with pytest.raises(RuntimeError, match=r"Expected hidden size \(1, 2, 4\)"):
        nn.GRU(3, 4)(ember.randn(5, 2, 3), ember.randn(1, 2, 5))
    with pytest.raises(ValueError, match="Unknown nonlinearity"):
        nn.RNN(3, 4, nonlinearity="sigmoid")
    with pytest.raises(ValueError, match="dropout should be a number"):
        nn.GRU(3, 4, dropout=1.5)
    with pytest.raises(ValueError, match="proj_size has to be smaller"):
        nn.LSTM(3, 4, proj_size=4)
    with pytest.raises(ValueError, match="only supported for LSTM"):
        nn.GRU(3, 4, proj_size=2)
    with pytest.raises(ValueError, match="hidden_size must be greater than zero"):
        nn.LSTM(3, 0)
    with pytest.raises(ValueError, match="num_layers must be greater than zero"):
        nn.LSTM(3, 4, num_layers=0)
    with pytest.raises(TypeError, match="hidden_size should be of type int"):
        nn.LSTM(3, 4.0)
    with pytest.raises(ValueError, match=r"RNN input dtype \(ember.float64\) does not match weight dtype"):
        nn.GRU(3, 4)(ember.randn(5, 2, 3, dtype=ember.float64))
    with pytest.raises(IndexError):
        nn.LSTM(3, 4)(ember.randn(5, 2, 3), (ember.randn(1, 2, 4),))


@needs_torch
def test_dtype_error_matches_torch_words():
    caught = []
    for lib, T in [(_torch.nn, _torch), (nn, ember)]:
        with pytest.raises(ValueError) as info:
            lib.GRU(3, 4)(T.randn(5, 2, 3, dtype=T.float64))
        caught.append(str(info.value).replace("torch.", "").replace("ember.", ""))
    assert caught[0] == caught[1]


# ---------------------------------------------------------------------------
# Against torch
# ---------------------------------------------------------------------------

def _copy_into(e_mod, t_mod):
    e_mod.load_state_dict({k: ember.from_numpy(v.detach().numpy().copy()) for k, v in t_mod.state_dict().items()})


def _pair(e, t):
    return ember.tensor(e), _torch.tensor(t)


def _grads_equal(e_mod, t_mod, tol=1e-10):
    te = dict(t_mod.named_parameters())
    for n, p in e_mod.named_parameters():
        np.testing.assert_allclose(_np(p.grad), te[n].grad.numpy(), rtol=tol, atol=tol, err_msg=n)


@needs_torch
def test_same_seed_same_weights_as_torch():
    for name, args in [("LSTM", (3, 4, 2)), ("GRUCell", (3, 4)), ("RNN", (5, 6))]:
        ember.manual_seed(11)
        _torch.manual_seed(11)
        e, t = getattr(nn, name)(*args), getattr(_torch.nn, name)(*args)
        for (ne, pe), (nt, pt) in zip(e.named_parameters(), t.named_parameters()):
            assert ne == nt
            np.testing.assert_allclose(_np(pe), pt.detach().numpy(), rtol=1e-6, atol=1e-7)


TORCH_CELLS = [("RNNCell", {}), ("RNNCell", {"nonlinearity": "relu"}), ("LSTMCell", {}), ("GRUCell", {}),
               ("GRUCell", {"bias": False})]


@needs_torch
@pytest.mark.parametrize("name,kw", TORCH_CELLS)
@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("given", [True, False])
def test_cells_match_torch(name, kw, batched, given):
    t = getattr(_torch.nn, name)(3, 5, **kw).double()
    e = getattr(nn, name)(3, 5, **kw).double()
    _copy_into(e, t)
    r = _rng(12)
    shp = (4,) if batched else ()
    x = r.standard_normal(shp + (3,))
    xe, xt = ember.tensor(x, requires_grad=True), _torch.tensor(x, requires_grad=True)
    he = ht = None
    if given:
        hs = [r.standard_normal(shp + (5,)) for _ in range(2 if name == "LSTMCell" else 1)]
        he_l = [ember.tensor(h, requires_grad=True) for h in hs]
        ht_l = [_torch.tensor(h, requires_grad=True) for h in hs]
        he, ht = (tuple(he_l), tuple(ht_l)) if name == "LSTMCell" else (he_l[0], ht_l[0])
    oe, ot = e(xe, he), t(xt, ht)
    if name == "LSTMCell":
        le, lt = (oe[0] * 1.5 + oe[1]).sum(), (ot[0] * 1.5 + ot[1]).sum()
        oe, ot = oe[0], ot[0]
    else:
        le, lt = (oe * oe).sum(), (ot * ot).sum()
    assert tuple(oe.shape) == tuple(ot.shape)
    np.testing.assert_allclose(_np(oe), ot.detach().numpy(), rtol=1e-10, atol=1e-12)
    le.backward()
    lt.backward()
    _grads_equal(e, t)
    np.testing.assert_allclose(_np(xe.grad), xt.grad.numpy(), rtol=1e-10, atol=1e-12)
    if given:
        for a, b in zip(he_l, ht_l):
            np.testing.assert_allclose(_np(a.grad), b.grad.numpy(), rtol=1e-10, atol=1e-12)


TORCH_CFGS = [{}, {"num_layers": 2}, {"bidirectional": True}, {"batch_first": True},
              {"num_layers": 2, "bidirectional": True}, {"num_layers": 2, "bidirectional": True, "batch_first": True},
              {"bias": False}]
TORCH_LAYERS = [("RNN", {}), ("RNN", {"nonlinearity": "relu"}), ("LSTM", {}), ("GRU", {})]


def _run_both(e, t, x, hx_np, is_lstm):
    xe, xt = ember.tensor(x, requires_grad=True), _torch.tensor(x, requires_grad=True)
    he = ht = None
    leaves = []
    if hx_np is not None:
        le = [ember.tensor(h, requires_grad=True) for h in hx_np]
        lt = [_torch.tensor(h, requires_grad=True) for h in hx_np]
        leaves = list(zip(le, lt))
        he, ht = (tuple(le), tuple(lt)) if is_lstm else (le[0], lt[0])
    oe, se = e(xe, he)
    ot, st = t(xt, ht)
    return xe, xt, oe, se, ot, st, leaves


@needs_torch
@pytest.mark.parametrize("name,kw", TORCH_LAYERS)
@pytest.mark.parametrize("cfg", TORCH_CFGS, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()) or "plain")
@pytest.mark.parametrize("given", [False, True])
@pytest.mark.parametrize("batched", [True, False])
def test_layers_match_torch(name, kw, cfg, given, batched):
    t = getattr(_torch.nn, name)(3, 4, **kw, **cfg).double()
    e = getattr(nn, name)(3, 4, **kw, **cfg).double()
    _copy_into(e, t)
    is_lstm = name == "LSTM"
    S = cfg.get("num_layers", 1) * (2 if cfg.get("bidirectional") else 1)
    r = _rng(13)
    x = r.standard_normal(((2, 5, 3) if cfg.get("batch_first") else (5, 2, 3)) if batched else (5, 3))
    hx = None
    if given:
        hx = [r.standard_normal((S, 2, 4) if batched else (S, 4)) for _ in range(2 if is_lstm else 1)]
    xe, xt, oe, se, ot, st, leaves = _run_both(e, t, x, hx, is_lstm)
    states_e = se if is_lstm else (se,)
    states_t = st if is_lstm else (st,)
    assert tuple(oe.shape) == tuple(ot.shape)
    np.testing.assert_allclose(_np(oe), ot.detach().numpy(), rtol=1e-10, atol=1e-12)
    for a, b in zip(states_e, states_t):
        assert tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(_np(a), b.detach().numpy(), rtol=1e-10, atol=1e-12)
    w = r.standard_normal(tuple(ot.shape))
    (oe * ember.tensor(w)).sum().__add__(sum(s.sum() for s in states_e)).backward()
    ((ot * _torch.tensor(w)).sum() + sum(s.sum() for s in states_t)).backward()
    _grads_equal(e, t)
    np.testing.assert_allclose(_np(xe.grad), xt.grad.numpy(), rtol=1e-10, atol=1e-12)
    for a, b in leaves:
        np.testing.assert_allclose(_np(a.grad), b.grad.numpy(), rtol=1e-10, atol=1e-12)


@needs_torch
@pytest.mark.parametrize("batch_first", [False, True])
def test_lstm_proj_size_matches_torch(batch_first):
    kw = dict(num_layers=2, bidirectional=True, proj_size=2, batch_first=batch_first)
    t, e = _torch.nn.LSTM(3, 5, **kw).double(), nn.LSTM(3, 5, **kw).double()
    _copy_into(e, t)
    r = _rng(14)
    hx = [r.standard_normal((4, 3, 2)), r.standard_normal((4, 3, 5))]
    x = r.standard_normal((3, 4, 3) if batch_first else (4, 3, 3))
    xe, xt, oe, (he, ce), ot, (ht, ct), leaves = _run_both(e, t, x, hx, True)
    for a, b in [(oe, ot), (he, ht), (ce, ct)]:
        assert tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(_np(a), b.detach().numpy(), rtol=1e-10, atol=1e-12)
    (oe.sum() + he.sum() * 2 + ce.sum()).backward()
    (ot.sum() + ht.sum() * 2 + ct.sum()).backward()
    _grads_equal(e, t)
    for a, b in leaves:
        np.testing.assert_allclose(_np(a.grad), b.grad.numpy(), rtol=1e-10, atol=1e-12)


@needs_torch
@pytest.mark.parametrize("name", ["RNN", "LSTM", "GRU"])
@pytest.mark.parametrize("enforce_sorted", [True, False])
@pytest.mark.parametrize("batch_first", [False, True])
def test_packed_matches_torch(name, enforce_sorted, batch_first):
    kw = dict(num_layers=2, bidirectional=True, batch_first=batch_first)
    t, e = getattr(_torch.nn, name)(3, 4, **kw).double(), getattr(nn, name)(3, 4, **kw).double()
    _copy_into(e, t)
    is_lstm = name == "LSTM"
    lens = [6, 4, 4, 1] if enforce_sorted else [4, 1, 6, 4]
    r = _rng(15)
    x = r.standard_normal((4, 6, 3) if batch_first else (6, 4, 3))
    hx = [r.standard_normal((4, 4, 4)) for _ in range(2 if is_lstm else 1)]
    xe, xt = ember.tensor(x, requires_grad=True), _torch.tensor(x, requires_grad=True)
    pe = rnn_utils.pack_padded_sequence(xe, lens, batch_first=batch_first, enforce_sorted=enforce_sorted)
    pt = _torch.nn.utils.rnn.pack_padded_sequence(xt, lens, batch_first=batch_first, enforce_sorted=enforce_sorted)
    np.testing.assert_array_equal(_np(pe.data), pt.data.detach().numpy())
    assert pe.batch_sizes.tolist() == pt.batch_sizes.tolist()
    for a, b in [(pe.sorted_indices, pt.sorted_indices), (pe.unsorted_indices, pt.unsorted_indices)]:
        assert (a is None) == (b is None) and (a is None or a.tolist() == b.tolist())
    he_l = [ember.tensor(h, requires_grad=True) for h in hx]
    ht_l = [_torch.tensor(h, requires_grad=True) for h in hx]
    oe, se = e(pe, tuple(he_l) if is_lstm else he_l[0])
    ot, st = t(pt, tuple(ht_l) if is_lstm else ht_l[0])
    np.testing.assert_allclose(_np(oe.data), ot.data.detach().numpy(), rtol=1e-10, atol=1e-12)
    states_e, states_t = (se, st) if is_lstm else ((se,), (st,))
    for a, b in zip(states_e, states_t):
        np.testing.assert_allclose(_np(a), b.detach().numpy(), rtol=1e-10, atol=1e-12)
    de, le = rnn_utils.pad_packed_sequence(oe, batch_first=batch_first, total_length=7)
    dt, lt = _torch.nn.utils.rnn.pad_packed_sequence(ot, batch_first=batch_first, total_length=7)
    np.testing.assert_allclose(_np(de), dt.detach().numpy(), rtol=1e-10, atol=1e-12)
    assert le.tolist() == lt.tolist()
    w = r.standard_normal(tuple(dt.shape))
    ((de * ember.tensor(w)).sum() + sum(s.sum() for s in states_e)).backward()
    ((dt * _torch.tensor(w)).sum() + sum(s.sum() for s in states_t)).backward()
    _grads_equal(e, t)
    np.testing.assert_allclose(_np(xe.grad), xt.grad.numpy(), rtol=1e-10, atol=1e-12)
    for a, b in zip(he_l, ht_l):
        np.testing.assert_allclose(_np(a.grad), b.grad.numpy(), rtol=1e-10, atol=1e-12)


@needs_torch
def test_pack_sequence_matches_torch():
    r = _rng(16)
    arrs = [r.standard_normal((n, 2)) for n in (3, 5, 1)]
    pe = rnn_utils.pack_sequence([ember.tensor(a) for a in arrs], enforce_sorted=False)
    pt = _torch.nn.utils.rnn.pack_sequence([_torch.tensor(a) for a in arrs], enforce_sorted=False)
    np.testing.assert_array_equal(_np(pe.data), pt.data.numpy())
    assert pe.batch_sizes.tolist() == pt.batch_sizes.tolist()
    assert pe.sorted_indices.tolist() == pt.sorted_indices.tolist()


@needs_torch
def test_checkpoints_load_both_ways(tmp_path):
    t = _torch.nn.LSTM(3, 4, num_layers=2, bidirectional=True)
    _torch.save(t.state_dict(), tmp_path / "t.pt")
    e = nn.LSTM(3, 4, num_layers=2, bidirectional=True)
    e.load_state_dict(ember.load(tmp_path / "t.pt"))
    for n, p in t.state_dict().items():
        np.testing.assert_array_equal(_np(e.state_dict()[n]), p.numpy())
    e2 = nn.GRU(3, 4, batch_first=True)
    ember.save(e2.state_dict(), tmp_path / "e.pt")
    t2 = _torch.nn.GRU(3, 4, batch_first=True)
    t2.load_state_dict(_torch.load(tmp_path / "e.pt"))
    x = _rng(17).standard_normal((2, 3, 3)).astype(np.float32)
    np.testing.assert_allclose(_np(e2(ember.tensor(x))[0]), t2(_torch.tensor(x))[0].detach().numpy(),
                               rtol=1e-5, atol=1e-6)


ERROR_CASES = [
    ("RNNCell", (3, 4), {}, lambda T: (T.randn(2, 5),)),
    ("RNNCell", (3, 4), {}, lambda T: (T.randn(2, 2, 3),)),
    ("RNNCell", (3, 4), {}, lambda T: (T.randn(2, 3), T.randn(3, 4))),
    ("RNNCell", (3, 4), {}, lambda T: (T.randn(2, 3), T.randn(2, 5))),
    ("RNNCell", (3, 4), {}, lambda T: (T.randn(2, 3), T.randn(1, 2, 4))),
    ("RNNCell", (3, 4), {}, lambda T: (T.randn(3), T.randn(4, 4))),
    ("LSTMCell", (3, 4), {}, lambda T: (T.randn(2, 3), (T.randn(2, 4), T.randn(2, 5)))),
    ("LSTMCell", (3, 4), {}, lambda T: (T.randn(2, 3), (T.randn(2, 4), T.randn(3, 4)))),
    ("LSTMCell", (3, 4), {}, lambda T: (T.randn(2, 3), (T.randn(2, 4),))),
    ("LSTMCell", (3, 4), {}, lambda T: (T.randn(2, 3), (T.randn(1, 2, 4), T.randn(2, 4)))),
    ("GRUCell", (3, 4), {}, lambda T: (T.randn(2, 3), T.randn(1, 2, 4))),
    ("RNN", (3, 4, 2), {}, lambda T: (T.randn(5, 2, 6),)),
    ("RNN", (3, 4, 2), {}, lambda T: (T.randn(5, 2, 3, 1),)),
    ("RNN", (3, 4, 2), {}, lambda T: (T.randn(5, 2, 3), T.randn(1, 2, 4))),
    ("RNN", (3, 4, 2), {}, lambda T: (T.randn(5, 3), T.randn(2, 1, 4))),
    ("GRU", (3, 4), {}, lambda T: (T.randn(5, 2, 3), T.randn(2, 4))),
    ("LSTM", (3, 4, 2), {}, lambda T: (T.randn(5, 2, 3), (T.randn(2, 2, 4), T.randn(1, 2, 4)))),
    ("LSTM", (3, 4, 2), {}, lambda T: (T.randn(5, 2, 3), (T.randn(2, 2, 4), T.randn(2, 2)))),
    ("LSTM", (3, 4), {}, lambda T: (T.randn(5, 3), (T.randn(1, 2, 4), T.randn(1, 2, 4)))),
    ("LSTM", (3, 4), {}, lambda T: (T.randn(0, 2, 3),)),
    ("LSTM", (3, 4), {}, lambda T: (T.randn(5, 2, 3), T.randn(2, 2, 4))),
    ("LSTM", (3, 4), {}, lambda T: (T.randn(5, 2, 3), (T.randn(1, 2, 4),))),
    ("RNNCell", (3, 4), {}, lambda T: (T.randn(2, 3, dtype=T.float64),)),
]


@needs_torch
@pytest.mark.parametrize("case", range(len(ERROR_CASES)))
def test_forward_errors_match_torch(case):
    name, args, kw, make = ERROR_CASES[case]
    caught = []
    for lib, T in [(_torch.nn, _torch), (nn, ember)]:
        m = getattr(lib, name)(*args, **kw)
        with pytest.raises(Exception) as info:
            m(*make(T))
        caught.append(info.value)
    assert type(caught[1]) is type(caught[0])
    assert str(caught[1]) == str(caught[0])


CTOR_ERRORS = [("RNN", (3, 4), {"nonlinearity": "foo"}), ("GRU", (3, 4), {"dropout": 1.5}),
               ("LSTM", (3, 4), {"proj_size": 4}), ("LSTM", (3, 4), {"proj_size": -1}),
               ("GRU", (3, 4), {"proj_size": 2}), ("RNN", (3, 4), {"proj_size": 2}), ("LSTM", (3, 0), {}),
               ("LSTM", (3, 4), {"num_layers": 0}), ("LSTM", (3, 4.0), {})]


@needs_torch
@pytest.mark.parametrize("case", CTOR_ERRORS, ids=lambda c: f"{c[0]}-{c[2]}")
def test_constructor_errors_match_torch(case):
    name, args, kw = case
    caught = []
    for lib in (_torch.nn, nn):
        with pytest.raises(Exception) as info:
            getattr(lib, name)(*args, **kw)
        caught.append(info.value)
    assert type(caught[1]) is type(caught[0])
    assert str(caught[1]) == str(caught[0])


@needs_torch
def test_pack_errors_match_torch():
    cases = [(lambda T: T.randn(5, 3, 2), [5, 4, 6], {}), (lambda T: T.randn(5, 3, 2), [5, 4, 0], {}),
             (lambda T: T.randn(5, 3, 2), [5, 4], {})]
    for make, lens, kw in cases:
        caught = []
        for T in (_torch, ember):
            mod = _torch.nn.utils.rnn if T is _torch else rnn_utils
            with pytest.raises(Exception) as info:
                mod.pack_padded_sequence(make(T), lens, **kw)
            caught.append(info.value)
        assert type(caught[1]) is type(caught[0]) and str(caught[1]) == str(caught[0])


@needs_torch
def test_long_sequence_matches_torch():
    kw = dict(num_layers=2, bidirectional=True, batch_first=True)
    t, e = _torch.nn.LSTM(3, 4, **kw).double(), nn.LSTM(3, 4, **kw).double()
    _copy_into(e, t)
    x = _rng(18).standard_normal((2, 80, 3))
    xe, xt, oe, (he, ce), ot, (ht, ct), _ = _run_both(e, t, x, None, True)
    np.testing.assert_allclose(_np(oe), ot.detach().numpy(), rtol=1e-10, atol=1e-12)
    (oe.sum() + ce.sum()).backward()
    (ot.sum() + ct.sum()).backward()
    _grads_equal(e, t, tol=1e-9)
    np.testing.assert_allclose(_np(xe.grad), xt.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_char_lstm_learns_a_sequence():
    """A tutorial-style char model (Embedding -> LSTM -> Linear, Adam) written
    against the torch API learns to continue a repeating string."""
    torch = ember
    text = "hello world " * 8
    chars = sorted(set(text))
    idx = torch.tensor([chars.index(ch) for ch in text])

    class CharModel(torch.nn.Module):
        def __init__(self, n, h):
            super().__init__()
            self.emb = torch.nn.Embedding(n, 8)
            self.rnn = torch.nn.LSTM(8, h, batch_first=True)
            self.head = torch.nn.Linear(h, n)

        def forward(self, x, state=None):
            out, state = self.rnn(self.emb(x), state)
            return self.head(out), state

    torch.manual_seed(0)
    model = CharModel(len(chars), 32)
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    x, y = idx[:-1].unsqueeze(0), idx[1:].unsqueeze(0)
    losses = []
    for _ in range(60):
        logits, _ = model(x)
        loss = torch.nn.functional.cross_entropy(logits.view(-1, len(chars)), y.view(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.1 * losses[0]
    # greedy generation one step at a time, carrying (h, c)
    with torch.no_grad():
        ch, state, got = idx[:1].view(1, 1), None, []
        for _ in range(11):
            logits, state = model(ch, state)
            ch = logits[:, -1].argmax(-1).view(1, 1)
            got.append(chars[ch.item()])
    assert "".join(got) == "ello world "


@pytest.mark.parametrize("name", ["LSTM", "GRU"])
def test_on_cuda_matches_cpu(cuda, name):
    """On 'cuda' (a real GPU, else the fake backend): padded and packed input
    (unsorted, hx given) give the CPU's outputs, states and gradients."""
    cpu = getattr(nn, name)(3, 4, num_layers=2, bidirectional=True).double()
    dev = getattr(nn, name)(3, 4, num_layers=2, bidirectional=True).double()
    dev.load_state_dict(cpu.state_dict())
    dev.to("cuda")
    assert dev.weight_hh_l1_reverse.device.type == "cuda"
    r = _rng(19)
    x = r.standard_normal((6, 3, 3))
    hx = [r.standard_normal((4, 3, 4)) for _ in range(2 if name == "LSTM" else 1)]
    lens = [4, 6, 2]
    res = []
    for m, device in [(cpu, "cpu"), (dev, "cuda")]:
        xt = ember.tensor(x, device=device, requires_grad=True)
        hs = [ember.tensor(h, device=device) for h in hx]
        h = tuple(hs) if name == "LSTM" else hs[0]
        out, st = m(xt, h)
        packed = rnn_utils.pack_padded_sequence(xt, lens, enforce_sorted=False)
        pout, pst = m(packed, h)
        padded, _ = rnn_utils.pad_packed_sequence(pout)
        states = list(st) + list(pst) if name == "LSTM" else [st, pst]
        loss = out.sum() + (padded * padded).sum() + sum(s.sum() for s in states)
        loss.backward()
        res.append([_np(t.cpu()) for t in [out, padded, *states, xt.grad]]
                   + [_np(p.grad.cpu()) for p in m.parameters()])
    for a, b in zip(*res):
        np.testing.assert_allclose(b, a, rtol=1e-10, atol=1e-12)


@needs_torch
def test_packed_lstm_proj_size_matches_torch():
    kw = dict(num_layers=2, bidirectional=True, proj_size=3)
    t, e = _torch.nn.LSTM(3, 5, **kw).double(), nn.LSTM(3, 5, **kw).double()
    _copy_into(e, t)
    r = _rng(20)
    x = r.standard_normal((6, 3, 3))
    hx = (r.standard_normal((4, 3, 3)), r.standard_normal((4, 3, 5)))
    lens = [3, 6, 5]
    pe = rnn_utils.pack_padded_sequence(ember.tensor(x), lens, enforce_sorted=False)
    pt = _torch.nn.utils.rnn.pack_padded_sequence(_torch.tensor(x), lens, enforce_sorted=False)
    oe, (he, ce) = e(pe, tuple(ember.tensor(h) for h in hx))
    ot, (ht, ct) = t(pt, tuple(_torch.tensor(h) for h in hx))
    for a, b in [(oe.data, ot.data), (he, ht), (ce, ct)]:
        assert tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(_np(a), b.detach().numpy(), rtol=1e-10, atol=1e-12)
    (oe.data.sum() + he.sum() + ce.sum()).backward()
    (ot.data.sum() + ht.sum() + ct.sum()).backward()
    _grads_equal(e, t)
