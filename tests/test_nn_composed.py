"""The less common nn layers and functionals (nn/_activations.py, _shuffle.py, _pool_nd.py,
_embedding_bag.py, _dropout.py and their modules): PReLU / RReLU / shrinks / Softmax2d /
gumbel_softmax / local response norm, the padding layers, pixel and channel shuffles, pdist and
cdist, max_unpool, lp_pool, embedding_bag, BatchNorm3d / InstanceNorm3d. Values and gradients
against torch with the same weights, reprs against torch's, torch's exception types; NumPy /
hand references without torch."""
import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F

try:
    import torch as _torch
    import torch.nn.functional as _TF
except ImportError:
    _torch = None
needs_torch = pytest.mark.skipif(_torch is None, reason="torch not installed")


def rng(seed=0):
    return np.random.default_rng(seed)


def check(ef, tf, arrays, grads=(0,), rtol=1e-10, atol=1e-12):
    """ef(*ember tensors) against tf(*torch tensors): value, then the gradients of sum(out * w)."""
    e = [ember.tensor(a).requires_grad_() if i in grads else ember.tensor(a) for i, a in enumerate(arrays)]
    t = [_torch.tensor(a).requires_grad_() if i in grads else _torch.tensor(a) for i, a in enumerate(arrays)]
    eo, to = ef(*e), tf(*t)
    assert tuple(eo.shape) == tuple(to.shape)
    np.testing.assert_allclose(eo.detach().numpy(), to.detach().numpy(), rtol=rtol, atol=atol)
    if grads:
        w = rng(9).standard_normal(tuple(to.shape))
        (eo * ember.tensor(w)).sum().backward()
        (to * _torch.tensor(w)).sum().backward()
        for i in grads:
            np.testing.assert_allclose(e[i].grad.numpy(), t[i].grad.numpy(), rtol=max(rtol, 1e-8),
                                       atol=max(atol, 1e-10))


def errors_match(ef, tf):
    with pytest.raises(Exception) as te:
        tf()
    with pytest.raises(type(te.value)):
        ef()


def same_module(em, tm, *arrays, grads=(0,)):
    """Copy tm's state into em, compare repr, outputs and input / parameter gradients."""
    em.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    assert repr(em) == repr(tm)
    check(em, tm, list(arrays), grads=grads)
    for (n, ep), (_, tp) in zip(em.named_parameters(), tm.named_parameters()):
        np.testing.assert_allclose(ep.grad.numpy(), tp.grad.numpy(), rtol=1e-8, atol=1e-10, err_msg=n)


# ----------------------------------------------------------------- activations

@needs_torch
@pytest.mark.parametrize("shape,n", [((4, 3, 5), 3), ((4, 3), 1), ((5,), 1), ((2, 3, 2, 2), 3)])
def test_prelu_matches_torch(shape, n):
    x = rng(1).standard_normal(shape)
    em, tm = nn.PReLU(n, init=0.1).double(), _torch.nn.PReLU(n, init=0.1).double()
    with _torch.no_grad():
        tm.weight.copy_(_torch.tensor(rng(2).standard_normal(n)))
    same_module(em, tm, x)


@needs_torch
def test_activation_functions_match_torch():
    x = rng(3).standard_normal((4, 6)) * 2
    x[0, :3] = [0.5, -0.5, 0.0]  # on the thresholds
    for ef, tf in [(lambda a: F.hardshrink(a, 0.7), lambda a: _TF.hardshrink(a, 0.7)),
                   (F.hardshrink, _TF.hardshrink), (F.softshrink, _TF.softshrink),
                   (lambda a: F.softshrink(a, 1.2), lambda a: _TF.softshrink(a, 1.2)),
                   (F.tanhshrink, _TF.tanhshrink),
                   (lambda a: F.rrelu(a, 0.1, 0.3), lambda a: _TF.rrelu(a, 0.1, 0.3)),
                   (lambda a: F.local_response_norm(a.view(2, 3, 4), 3),
                    lambda a: _TF.local_response_norm(a.view(2, 3, 4), 3))]:
        check(ef, tf, [x])
    y = rng(4).standard_normal((2, 7, 3, 4))
    check(lambda a: F.local_response_norm(a, 4, alpha=0.1, beta=0.5, k=2.0),
          lambda a: _TF.local_response_norm(a, 4, alpha=0.1, beta=0.5, k=2.0), [y])
    check(lambda a: F.local_response_norm(a, 2), lambda a: _TF.local_response_norm(a, 2), [y.reshape(2, 7, 3, 2, 2)])
    check(nn.Softmax2d(), _torch.nn.Softmax2d(), [y])
    check(nn.Softmax2d(), _torch.nn.Softmax2d(), [y[0]])


@needs_torch
def test_activation_module_reprs():
    for em, tm in [(nn.PReLU(), _torch.nn.PReLU()), (nn.PReLU(4, 0.3), _torch.nn.PReLU(4, 0.3)),
                   (nn.RReLU(), _torch.nn.RReLU()), (nn.RReLU(0.1, 0.2, True), _torch.nn.RReLU(0.1, 0.2, True)),
                   (nn.Hardshrink(), _torch.nn.Hardshrink()), (nn.Softshrink(0.3), _torch.nn.Softshrink(0.3)),
                   (nn.Tanhshrink(), _torch.nn.Tanhshrink()), (nn.Softmax2d(), _torch.nn.Softmax2d()),
                   (nn.LocalResponseNorm(3), _torch.nn.LocalResponseNorm(3)),
                   (nn.LocalResponseNorm(2, 0.1, 0.5, 2), _torch.nn.LocalResponseNorm(2, 0.1, 0.5, 2))]:
        assert repr(em) == repr(tm)


def test_rrelu_training_draws_slopes_in_range_and_eval_uses_the_mean():
    ember.manual_seed(0)
    x = (-ember.ones(2000, dtype=ember.float64)).requires_grad_()
    m = nn.RReLU(0.1, 0.3)
    y = m(x)
    slopes = -y.detach().numpy()
    assert slopes.min() >= 0.1 and slopes.max() <= 0.3 and slopes.std() > 0.03
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), slopes)  # the gradient is the drawn slope
    m.eval()
    np.testing.assert_allclose(m(ember.tensor([-2.0, 3.0])).numpy(), [-0.4, 3.0], rtol=1e-6)
    z = ember.tensor([-1.0, 2.0])
    F.rrelu(z, 0.2, 0.2, training=True, inplace=True)
    np.testing.assert_allclose(z.numpy(), [-0.2, 2.0], rtol=1e-6)


def test_shrinks_and_prelu_by_hand():
    x = ember.tensor([-2.0, -0.5, -0.2, 0.0, 0.3, 0.5, 1.5])
    np.testing.assert_allclose(F.hardshrink(x).numpy(), [-2.0, 0, 0, 0, 0, 0, 1.5])
    np.testing.assert_allclose(F.softshrink(x).numpy(), [-1.5, 0, 0, 0, 0, 0, 1.0])
    np.testing.assert_allclose(F.tanhshrink(x).numpy(), x.numpy() - np.tanh(x.numpy()), atol=1e-6)
    w = ember.tensor([0.1, 0.2])
    got = F.prelu(ember.tensor([[-1.0, -1.0], [2.0, -3.0]]), w)
    np.testing.assert_allclose(got.numpy(), [[-0.1, -0.2], [2.0, -0.6]], rtol=1e-6)
    np.testing.assert_allclose(nn.PReLU()(ember.tensor([-4.0, 4.0])).detach().numpy(), [-1.0, 4.0])


def test_gumbel_softmax():
    ember.manual_seed(1)
    logits = ember.tensor(np.log([[0.7, 0.2, 0.1]]).repeat(4000, 0)).requires_grad_()
    soft = F.gumbel_softmax(logits, tau=0.5)
    np.testing.assert_allclose(soft.detach().numpy().sum(1), 1.0, rtol=1e-9)
    hard = F.gumbel_softmax(logits, hard=True)
    h = hard.detach().numpy()
    assert set(np.unique(h)) == {0.0, 1.0} and (h.sum(1) == 1).all()
    # sampling the argmax of logits + Gumbel noise draws each class with its probability
    np.testing.assert_allclose(h.mean(0), [0.7, 0.2, 0.1], atol=0.03)
    # straight-through: the hard sample's gradient is the soft sample's
    w = ember.tensor(rng(0).standard_normal((4000, 3)))
    (hard * w).sum().backward()
    assert logits.grad is not None and float(logits.grad.abs().sum()) > 0
    np.testing.assert_allclose(logits.grad.numpy().sum(1), 0.0, atol=1e-9)  # softmax's gradient sums to zero


def test_local_response_norm_against_numpy():
    x = rng(5).standard_normal((2, 5, 3))
    size, alpha, beta, k = 3, 0.2, 0.75, 1.5
    sq = np.pad(x ** 2, ((0, 0), (size // 2, (size - 1) // 2), (0, 0)))
    div = np.stack([sq[:, c:c + size].mean(1) for c in range(5)], 1)
    want = x / (k + alpha * div) ** beta
    got = F.local_response_norm(ember.tensor(x), size, alpha, beta, k)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)


@needs_torch
def test_activation_errors_match_torch():
    x, y = ember.randn(2, 4), _torch.randn(2, 4)
    for ef, tf in [(lambda: F.prelu(x, ember.ones(3)), lambda: _TF.prelu(y, _torch.ones(3))),
                   (lambda: F.prelu(x, ember.ones(2, 2)), lambda: _TF.prelu(y, _torch.ones(2, 2))),
                   (lambda: F.softshrink(x, -1.0), lambda: _TF.softshrink(y, -1.0)),
                   (lambda: F.local_response_norm(x, 2), lambda: _TF.local_response_norm(y, 2)),
                   (lambda: nn.Softmax2d()(x), lambda: _torch.nn.Softmax2d()(y))]:
        errors_match(ef, tf)


# ----------------------------------------------------------------- padding

PAD_CASES = [("ConstantPad1d", (2, 1.5), (2, 3, 5)), ("ConstantPad1d", ((1, 3), -1.0), (3, 5)),
             ("ConstantPad2d", ((1, 0, 2, 1), 0.5), (2, 3, 4, 5)), ("ConstantPad3d", (1, 2.0), (1, 2, 3, 3, 3)),
             ("ZeroPad1d", (2,), (2, 3, 5)), ("ZeroPad2d", ((1, 1, 2, 0),), (2, 3, 4, 5)),
             ("ZeroPad2d", ((-1, 1, 0, 2),), (3, 4, 5)), ("ZeroPad3d", (1,), (2, 2, 3, 3, 3)),
             ("ReflectionPad1d", (2,), (2, 3, 5)), ("ReflectionPad1d", ((3, 1),), (3, 5)),
             ("ReflectionPad2d", ((1, 2, 2, 1),), (2, 3, 4, 5)), ("ReflectionPad3d", (1,), (1, 2, 3, 3, 3)),
             ("ReplicationPad1d", ((3, 1),), (2, 3, 5)), ("ReplicationPad2d", (2,), (3, 4, 5)),
             ("ReplicationPad3d", ((1, 0, 2, 1, 0, 2),), (2, 2, 3, 3, 3)),
             ("CircularPad1d", ((2, 1),), (2, 3, 5)), ("CircularPad2d", (1,), (2, 3, 4, 5)),
             ("CircularPad3d", ((1, 0, 1, 2, 0, 1),), (1, 2, 3, 3, 3))]


@needs_torch
@pytest.mark.parametrize("name,args,shape", PAD_CASES)
def test_padding_modules_match_torch(name, args, shape):
    em, tm = getattr(nn, name)(*args), getattr(_torch.nn, name)(*args)
    assert repr(em) == repr(tm)
    check(em, tm, [rng(6).standard_normal(shape)])


def test_padding_modules_against_numpy():
    x = rng(7).standard_normal((2, 3, 4))
    cases = [(nn.ReflectionPad1d((2, 1)), np.pad(x, ((0, 0), (0, 0), (2, 1)), mode="reflect")),
             (nn.ReplicationPad1d(2), np.pad(x, ((0, 0), (0, 0), (2, 2)), mode="edge")),
             (nn.CircularPad1d((1, 3)), np.pad(x, ((0, 0), (0, 0), (1, 3)), mode="wrap")),
             (nn.ConstantPad1d(1, 9.0), np.pad(x, ((0, 0), (0, 0), (1, 1)), constant_values=9.0)),
             (nn.ZeroPad2d((1, 0, 0, 2)), np.pad(x, ((0, 0), (0, 2), (1, 0)))),
             (nn.ReflectionPad2d(1), np.pad(x, ((0, 0), (1, 1), (1, 1)), mode="reflect"))]
    for m, want in cases:
        np.testing.assert_array_equal(m(ember.tensor(x)).numpy(), want)
    assert nn.ZeroPad2d(1).padding == (1, 1, 1, 1) and nn.ConstantPad3d(2, 0.0).padding == (2,) * 6


@needs_torch
def test_padding_errors_match_torch():
    for name, args, shape in [("CircularPad1d", (1,), (2, 3, 4, 5)), ("CircularPad2d", (1,), (4, 5)),
                              ("ReflectionPad1d", (5,), (2, 3, 4)), ("ReflectionPad2d", (1,), (2, 2, 3, 4, 5))]:
        errors_match(lambda: getattr(nn, name)(*args)(ember.zeros(shape)),
                     lambda: getattr(_torch.nn, name)(*args)(_torch.zeros(shape)))


# ----------------------------------------------------------------- shuffles, distances

@needs_torch
def test_shuffles_match_torch():
    x = rng(8).standard_normal((2, 18, 3, 4))
    check(lambda a: F.pixel_shuffle(a, 3), lambda a: _TF.pixel_shuffle(a, 3), [x])
    check(lambda a: F.pixel_shuffle(a, 3), lambda a: _TF.pixel_shuffle(a, 3), [x.reshape(1, 2, 18, 3, 4)])
    for shape in [(3, 6, 4, 2), (2, 2, 6, 4)]:
        check(lambda a: F.pixel_unshuffle(a, 2), lambda a: _TF.pixel_unshuffle(a, 2), [rng(1).standard_normal(shape)])
    check(lambda a: F.channel_shuffle(a, 3), lambda a: _TF.channel_shuffle(a, 3), [x])
    check(lambda a: F.channel_shuffle(a, 2), lambda a: _TF.channel_shuffle(a, 2), [x.reshape(2, 18, 12)])
    for em, tm in [(nn.PixelShuffle(3), _torch.nn.PixelShuffle(3)), (nn.PixelUnshuffle(2), _torch.nn.PixelUnshuffle(2)),
                   (nn.ChannelShuffle(3), _torch.nn.ChannelShuffle(3))]:
        assert repr(em) == repr(tm)
    y = _torch.tensor(x)
    for ef, tf in [(lambda: F.pixel_shuffle(ember.zeros(4, 4), 2), lambda: _TF.pixel_shuffle(_torch.zeros(4, 4), 2)),
                   (lambda: F.pixel_shuffle(ember.tensor(x), 4), lambda: _TF.pixel_shuffle(y, 4)),
                   (lambda: F.pixel_shuffle(ember.tensor(x), 0), lambda: _TF.pixel_shuffle(y, 0)),
                   (lambda: F.pixel_unshuffle(ember.tensor(x), 2), lambda: _TF.pixel_unshuffle(y, 2)),
                   (lambda: F.channel_shuffle(ember.tensor(x), 4), lambda: _TF.channel_shuffle(y, 4)),
                   (lambda: F.channel_shuffle(ember.tensor(x), 0), lambda: _TF.channel_shuffle(y, 0)),
                   (lambda: F.channel_shuffle(ember.zeros(2, 4), 2),
                    lambda: _TF.channel_shuffle(_torch.zeros(2, 4), 2))]:
        errors_match(ef, tf)


def test_shuffles_by_hand():
    x = ember.arange(8).view(1, 8, 1, 1).double()
    out = F.pixel_shuffle(x, 2)  # channels 0..3 -> the first output channel's 2x2 block
    np.testing.assert_array_equal(out.numpy()[0], [[[0, 1], [2, 3]], [[4, 5], [6, 7]]])
    np.testing.assert_array_equal(F.pixel_unshuffle(out, 2).numpy(), x.numpy())
    np.testing.assert_array_equal(F.channel_shuffle(x, 2).numpy().ravel(), [0, 4, 1, 5, 2, 6, 3, 7])


@needs_torch
@pytest.mark.parametrize("p", [2.0, 1.0, 0.5, 3.0, float("inf")])
def test_pdist_cdist_match_torch(p):
    x = rng(9).standard_normal((6, 4))
    check(lambda a: F.pdist(a, p), lambda a: _TF.pdist(a, p), [x])
    y = rng(10).standard_normal((5, 4))
    check(lambda a, b: ember.cdist(a, b, p), lambda a, b: _torch.cdist(a, b, p), [x, y], grads=(0, 1), rtol=1e-9)
    check(lambda a, b: ember.cdist(a, b, p), lambda a, b: _torch.cdist(a, b, p),
          [x.reshape(2, 3, 4), y[:4].reshape(2, 2, 4)], grads=(0, 1), rtol=1e-9)
    for ef, tf in [(lambda: F.pdist(ember.zeros(3)), lambda: _TF.pdist(_torch.zeros(3))),
                   (lambda: F.pdist(ember.zeros(3, 2), -1), lambda: _TF.pdist(_torch.zeros(3, 2), -1)),
                   (lambda: F.pdist(ember.zeros(3, 2).long()), lambda: _TF.pdist(_torch.zeros(3, 2).long()))]:
        errors_match(ef, tf)


def test_pdist_against_numpy():
    x = rng(11).standard_normal((5, 3))
    want = [np.linalg.norm(x[i] - x[j]) for i in range(5) for j in range(i + 1, 5)]
    np.testing.assert_allclose(F.pdist(ember.tensor(x)).numpy(), want, rtol=1e-12)
    np.testing.assert_allclose(ember.pdist(ember.tensor(x), 1).numpy(),
                               [np.abs(x[i] - x[j]).sum() for i in range(5) for j in range(i + 1, 5)], rtol=1e-12)
    assert F.pdist(ember.zeros(1, 3)).shape == (0,)


# ----------------------------------------------------------------- unpooling and lp pooling

@needs_torch
@pytest.mark.parametrize("k,s,p,shape", [(2, None, 0, (2, 3, 8, 6)), (3, 2, 1, (2, 3, 7, 7)),
                                         ((2, 3), (2, 2), (1, 0), (2, 3, 7, 8))])
def test_max_unpool2d_matches_torch(k, s, p, shape):
    x = _torch.tensor(rng(12).standard_normal(shape))
    out, idx = _TF.max_pool2d(x, k, s, p, return_indices=True)
    em, tm = nn.MaxUnpool2d(k, s, p), _torch.nn.MaxUnpool2d(k, s, p)
    assert repr(em) == repr(tm)
    e_idx = ember.tensor(idx.numpy())
    try:  # the default output size can be smaller than the pooled input: torch's error then
        tm(out, idx)
    except RuntimeError:
        with pytest.raises(RuntimeError, match="invalid max index"):
            em(ember.tensor(out.numpy()), e_idx)
    else:
        check(lambda a: em(a, e_idx), lambda a: tm(a, idx), [out.numpy()])
    check(lambda a: em(a, e_idx, output_size=x.shape), lambda a: tm(a, idx, output_size=x.shape), [out.numpy()])
    check(lambda a: em(a, e_idx[0], x.shape[-2:]), lambda a: tm(a, idx[0], x.shape[-2:]), [out[0].numpy()])


@needs_torch
def test_max_unpool1d_and_errors_match_torch():
    x = _torch.tensor(rng(13).standard_normal((2, 3, 9)))
    out, idx = _TF.max_pool1d(x, 3, 2, return_indices=True)
    em, tm = nn.MaxUnpool1d(3, 2), _torch.nn.MaxUnpool1d(3, 2)
    assert repr(em) == repr(tm)
    e_idx = ember.tensor(idx.numpy())
    check(lambda a: em(a, e_idx), lambda a: tm(a, idx), [out.numpy()])
    check(lambda a: em(a, e_idx, [9]), lambda a: tm(a, idx, [9]), [out.numpy()])
    eo = ember.tensor(out.numpy())
    for ef, tf in [(lambda: em(eo, e_idx, [20]), lambda: tm(out, idx, [20])),
                   (lambda: F.max_unpool1d(eo, e_idx * 0 + 40, 3, 2),
                    lambda: _TF.max_unpool1d(out, idx * 0 + 40, 3, 2)),
                   (lambda: F.max_unpool1d(eo, e_idx[:, :2], 3, 2), lambda: _TF.max_unpool1d(out, idx[:, :2], 3, 2)),
                   (lambda: F.max_unpool1d(eo, e_idx.int(), 3, 2), lambda: _TF.max_unpool1d(out, idx.int(), 3, 2)),
                   (lambda: em(eo, e_idx, [1, 2, 3, 4]), lambda: tm(out, idx, [1, 2, 3, 4]))]:
        errors_match(ef, tf)


def test_max_unpool_by_hand():
    x = ember.tensor([[[[1.0, 5.0, 2.0, 0.0], [3.0, 4.0, 8.0, 7.0]]]])
    out, idx = F.max_pool2d(x, 2, return_indices=True)
    up = F.max_unpool2d(out, idx, 2)
    np.testing.assert_array_equal(up.numpy(), [[[[0, 5, 0, 0], [0, 0, 8, 0]]]])


@needs_torch
@pytest.mark.parametrize("norm", [2, 1.5, 3])
def test_lp_pool_matches_torch(norm):
    x = np.abs(rng(14).standard_normal((2, 3, 7, 8))) + 0.1
    for em, tm, a in [(nn.LPPool2d(norm, 2), _torch.nn.LPPool2d(norm, 2), x),
                      (nn.LPPool2d(norm, (3, 2), stride=(2, 1), ceil_mode=True),
                       _torch.nn.LPPool2d(norm, (3, 2), stride=(2, 1), ceil_mode=True), x),
                      (nn.LPPool1d(norm, 3, stride=2), _torch.nn.LPPool1d(norm, 3, stride=2), x[0]),
                      (nn.LPPool1d(norm, 2), _torch.nn.LPPool1d(norm, 2), x[:, :, 0])]:
        assert repr(em) == repr(tm)
        check(em, tm, [a], rtol=1e-9)


def test_lp_pool_against_numpy():
    x = np.abs(rng(15).standard_normal((1, 2, 4, 6)))
    want = (x.reshape(1, 2, 2, 2, 3, 2) ** 3).sum((3, 5)) ** (1 / 3)
    np.testing.assert_allclose(F.lp_pool2d(ember.tensor(x), 3, 2).numpy(), want, rtol=1e-10)


# ----------------------------------------------------------------- embedding_bag

def _bag_args(seed):
    r = rng(seed)
    idx = r.integers(0, 10, 12)
    idx[[1, 5]] = 3  # padding_idx 3 appears in some bags
    offsets = np.array([0, 0, 4, 7, 12])  # an empty first bag, an empty last one
    return idx, offsets, r.standard_normal((10, 3)), r.random(12)


@needs_torch
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("padding_idx", [None, 3])
@pytest.mark.parametrize("include_last_offset", [False, True])
def test_embedding_bag_matches_torch(mode, padding_idx, include_last_offset):
    idx, offsets, w, psw = _bag_args(16)
    em = nn.EmbeddingBag(10, 3, mode=mode, padding_idx=padding_idx, include_last_offset=include_last_offset)
    tm = _torch.nn.EmbeddingBag(10, 3, mode=mode, padding_idx=padding_idx, include_last_offset=include_last_offset)
    assert repr(em) == repr(tm)
    em, tm = em.double(), tm.double()
    with _torch.no_grad():
        tm.weight.copy_(_torch.tensor(w))
    em.load_state_dict({"weight": ember.tensor(w)})
    eo, to = em(ember.tensor(idx), ember.tensor(offsets)), tm(_torch.tensor(idx), _torch.tensor(offsets))
    np.testing.assert_allclose(eo.detach().numpy(), to.detach().numpy(), rtol=1e-12)
    g = rng(1).standard_normal(tuple(to.shape))
    (eo * ember.tensor(g)).sum().backward()
    (to * _torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(em.weight.grad.numpy(), tm.weight.grad.numpy(), rtol=1e-10, atol=1e-12)
    idx2 = idx.reshape(3, 4)
    np.testing.assert_allclose(em(ember.tensor(idx2)).detach().numpy(), tm(_torch.tensor(idx2)).detach().numpy(),
                               rtol=1e-12)
    if mode == "sum":
        e_psw = ember.tensor(psw).requires_grad_()
        t_psw = _torch.tensor(psw).requires_grad_()
        eo = em(ember.tensor(idx), ember.tensor(offsets), per_sample_weights=e_psw)
        to = tm(_torch.tensor(idx), _torch.tensor(offsets), per_sample_weights=t_psw)
        np.testing.assert_allclose(eo.detach().numpy(), to.detach().numpy(), rtol=1e-12)
        (eo * ember.tensor(g)).sum().backward()
        (to * _torch.tensor(g)).sum().backward()
        np.testing.assert_allclose(e_psw.grad.numpy(), t_psw.grad.numpy(), rtol=1e-10, atol=1e-12)


@needs_torch
def test_embedding_bag_reprs_and_errors_match_torch():
    for kw in [{}, {"mode": "sum", "max_norm": 1.0}, {"norm_type": 1.0, "padding_idx": -1},
               {"scale_grad_by_freq": True, "mode": "max"}]:
        assert repr(nn.EmbeddingBag(6, 2, **kw)) == repr(_torch.nn.EmbeddingBag(6, 2, **kw))
    ew, tw = ember.randn(5, 2), _torch.randn(5, 2)
    E, T = ember.tensor, _torch.tensor
    cases = [((E([1, 2, 3]), ew, E([1, 2])), (T([1, 2, 3]), tw, T([1, 2]))),
             ((E([1, 2, 3]), ew, E([0, 5])), (T([1, 2, 3]), tw, T([0, 5]))),
             ((E([1, 2, 3]), ew, None), (T([1, 2, 3]), tw, None)),
             ((E([[1, 2, 3]]), ew, E([0])), (T([[1, 2, 3]]), tw, T([0]))),
             ((E([1.0, 2.0]), ew, E([0])), (T([1.0, 2.0]), tw, T([0]))),
             ((E([[[1]]]), ew, None), (T([[[1]]]), tw, None))]
    for ea, ta in cases:
        errors_match(lambda: F.embedding_bag(*ea), lambda: _TF.embedding_bag(*ta))
    errors_match(lambda: F.embedding_bag(E([1, 2]), ew, E([0]), mode="x"),
                 lambda: _TF.embedding_bag(T([1, 2]), tw, T([0]), mode="x"))
    errors_match(lambda: F.embedding_bag(E([1, 2]), ew, E([0]), per_sample_weights=ember.ones(2)),
                 lambda: _TF.embedding_bag(T([1, 2]), tw, T([0]), per_sample_weights=_torch.ones(2)))
    errors_match(lambda: F.embedding_bag(E([1, 2]), ew, E([0]), mode="sum", per_sample_weights=ember.ones(3)),
                 lambda: _TF.embedding_bag(T([1, 2]), tw, T([0]), mode="sum", per_sample_weights=_torch.ones(3)))


@needs_torch
@pytest.mark.parametrize("kw", [{"mode": "sum", "scale_grad_by_freq": True},
                                {"mode": "mean", "scale_grad_by_freq": True, "padding_idx": 3},
                                {"mode": "mean", "max_norm": 1.0}, {"mode": "max", "max_norm": 0.5, "norm_type": 1.0}])
def test_embedding_bag_renorm_and_frequency_scaling_match_torch(kw):
    r = rng(21)
    w, idx, off = r.standard_normal((10, 3)), np.array([1, 2, 1, 1, 5, 2, 3, 3, 0]), np.array([0, 3, 5])
    ew, tw = ember.tensor(w).requires_grad_(), _torch.tensor(w).requires_grad_()
    eo = F.embedding_bag(ember.tensor(idx), ew, ember.tensor(off), **kw)
    to = _TF.embedding_bag(_torch.tensor(idx), tw, _torch.tensor(off), **kw)
    np.testing.assert_allclose(eo.detach().numpy(), to.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(ew.detach().numpy(), tw.detach().numpy(), rtol=1e-12)  # rows renormed in place
    g = r.standard_normal(tuple(to.shape))
    (eo * ember.tensor(g)).sum().backward()
    (to * _torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(ew.grad.numpy(), tw.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_embedding_bag_against_numpy():
    idx, offsets, w, psw = _bag_args(17)
    ends = list(offsets[1:]) + [len(idx)]
    e = (ember.tensor(idx), ember.tensor(w), ember.tensor(offsets))
    for mode in ("sum", "mean", "max"):
        want = []
        for a, b in zip(offsets, ends):
            rows = w[idx[a:b]]
            want.append(np.zeros(3) if b == a else {"sum": rows.sum(0), "mean": rows.mean(0), "max": rows.max(0)}[mode])
        np.testing.assert_allclose(F.embedding_bag(e[0], e[1], e[2], mode=mode).numpy(), want, rtol=1e-12)
    want = [(w[idx[a:b]] * psw[a:b, None]).sum(0) for a, b in zip(offsets, ends)]
    got = F.embedding_bag(e[0], e[1], e[2], mode="sum", per_sample_weights=ember.tensor(psw))
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)
    # padding_idx entries leave the bag (and the mean's count)
    got = F.embedding_bag(ember.tensor([3, 1, 3]), e[1], ember.tensor([0]), padding_idx=3)
    np.testing.assert_allclose(got.numpy(), [w[1]], rtol=1e-12)
    bag = nn.EmbeddingBag.from_pretrained(ember.tensor(w), mode="sum")
    assert not bag.weight.requires_grad
    np.testing.assert_allclose(bag(ember.tensor([[0, 1]])).numpy(), [w[0] + w[1]], rtol=1e-12)


# ----------------------------------------------------------------- 3-d normalization

@needs_torch
@pytest.mark.parametrize("cls,kw", [("BatchNorm3d", {}), ("BatchNorm3d", {"affine": False, "momentum": None}),
                                    ("InstanceNorm3d", {}), ("InstanceNorm3d", {"affine": True,
                                                                                "track_running_stats": True})])
def test_norm3d_matches_torch(cls, kw):
    x = rng(18).standard_normal((2, 3, 4, 3, 5))
    em, tm = getattr(nn, cls)(3, **kw).double(), getattr(_torch.nn, cls)(3, **kw).double()
    assert repr(em) == repr(tm)
    grads = (0,)
    check(em, tm, [x], grads=grads, rtol=1e-9, atol=1e-10)
    for k, v in tm.state_dict().items():
        np.testing.assert_allclose(em.state_dict()[k].numpy(), v.numpy(), rtol=1e-9, err_msg=k)
    em.eval(), tm.eval()
    check(em, tm, [x[0] if cls == "InstanceNorm3d" else x], grads=(), rtol=1e-9, atol=1e-10)
    errors_match(lambda: em(ember.zeros(2, 3, 4)), lambda: tm(_torch.zeros(2, 3, 4)))


def test_batchnorm3d_against_numpy():
    x = rng(19).standard_normal((2, 3, 2, 2, 2))
    m = nn.BatchNorm3d(3).double()
    mean = x.mean((0, 2, 3, 4), keepdims=True)
    var = x.var((0, 2, 3, 4), keepdims=True)
    np.testing.assert_allclose(m(ember.tensor(x)).detach().numpy(), (x - mean) / np.sqrt(var + 1e-5), rtol=1e-9)
    np.testing.assert_allclose(m.running_mean.numpy(), 0.1 * mean.ravel(), rtol=1e-9)
    y = nn.InstanceNorm3d(3)(ember.tensor(x)).numpy()
    mu, v = x.mean((2, 3, 4), keepdims=True), x.var((2, 3, 4), keepdims=True)
    np.testing.assert_allclose(y, (x - mu) / np.sqrt(v + 1e-5), rtol=1e-9)


# ----------------------------------------------------------------- on the GPU (or the fake backend)

def test_composites_run_on_cuda_like_on_cpu(cuda):
    """Each composite keeps its tensors on the input's device: the CUDA result
    and gradient equal the CPU's (Note [fake CUDA] without a GPU)."""
    r = rng(20)
    x = r.standard_normal((2, 8, 4, 6))
    idx = r.integers(0, 10, 9)
    w = r.standard_normal((10, 3))
    lp = r.standard_normal((6, 2, 5))
    cases = [
        (lambda a: F.prelu(a, ember.tensor([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8], device=a.device)), x),
        (lambda a: F.softshrink(a) + F.hardshrink(a) + F.tanhshrink(a), x),
        (lambda a: F.local_response_norm(a, 3), x),
        (lambda a: F.pixel_unshuffle(F.pixel_shuffle(a, 2), 2) * F.channel_shuffle(a, 4), x),
        (lambda a: F.pdist(a[0, 0]), x),
        (lambda a: F.lp_pool2d(a.abs() + 0.1, 2, 2), x),
        (lambda a: F.pad(a, (1, 2, 2, 1), "reflect"), x),
        (lambda a: F.multi_margin_loss(a[0, 0], ember.tensor([1, 0, 5, 2], device=a.device)), x),
        (lambda a: F.multilabel_margin_loss(a[0, 0], ember.tensor([[1, -1, 0, 0, 0, 0]] * 4, device=a.device)), x),
        (lambda a: F.gaussian_nll_loss(a, a * 0.5, 0.3, full=True) + F.poisson_nll_loss(a, a.abs()), x),
        (lambda a: F.triplet_margin_loss(a[0, 0], a[0, 1], a[1, 0], swap=True), x),
        (lambda a: F.cosine_embedding_loss(a[0, 0], a[0, 1], ember.tensor([1.0, -1, 1, -1], device=a.device)), x),
        (lambda a: F.embedding_bag(ember.tensor(idx, device=a.device), a, ember.tensor([0, 2, 2, 6], device=a.device),
                                   mode="max"), w),
        (lambda a: F.embedding_bag(ember.tensor(idx, device=a.device), a, ember.tensor([0, 4], device=a.device),
                                   padding_idx=2), w),
        (lambda a: F.ctc_loss(a.log_softmax(2), ember.tensor([[1, 2], [3, 0]], device=a.device), [6, 5], [2, 1]), lp),
    ]
    for i, (fn, arr) in enumerate(cases):
        outs, grads = [], []
        for dev in ("cpu", "cuda"):
            a = ember.tensor(arr, device=dev).requires_grad_()
            out = fn(a)
            assert out.device.type == dev, i
            g = ember.tensor(rng(i).standard_normal(tuple(out.shape)), device=dev)
            (out * g).sum().backward()
            outs.append(out.detach().cpu().numpy())
            grads.append(a.grad.cpu().numpy())
        np.testing.assert_allclose(outs[1], outs[0], rtol=1e-9, atol=1e-12, err_msg=str(i))
        np.testing.assert_allclose(grads[1], grads[0], rtol=1e-9, atol=1e-12, err_msg=str(i))
    m = nn.Transformer(8, 2, 1, 1, 16, dropout=0.0).double()
    src, tgt = ember.tensor(r.standard_normal((5, 2, 8))), ember.tensor(r.standard_normal((4, 2, 8)))
    mask = nn.Transformer.generate_square_subsequent_mask(4, dtype=ember.float64)
    want = m(src, tgt, tgt_mask=mask).detach().numpy()
    m.cuda()
    got = m(src.cuda(), tgt.cuda(), tgt_mask=nn.Transformer.generate_square_subsequent_mask(4, device="cuda",
                                                                                            dtype=ember.float64))
    np.testing.assert_allclose(got.detach().cpu().numpy(), want, rtol=1e-8, atol=1e-10)
    lazy = nn.LazyLinear(3).cuda()
    assert lazy(ember.randn(2, 4, device="cuda")).device.type == "cuda" and lazy.weight.device.type == "cuda"


# ----------------------------------------------------------------- dropout3d, alpha dropouts

def test_alpha_dropout_keeps_selu_statistics_and_its_affine_form():
    ember.manual_seed(3)
    x = ember.randn(100000, dtype=ember.float64).requires_grad_()
    p, neg = 0.3, 1.7580993408473766
    a = ((neg * neg * p + 1) * (1 - p)) ** -0.5
    b = neg * a * p
    y = F.alpha_dropout(x, p, training=True)
    yn, xn = y.detach().numpy(), x.detach().numpy()
    assert abs(yn.mean()) < 0.02 and abs(yn.std() - 1) < 0.02
    dropped = np.isclose(yn, -neg * a + b, rtol=0, atol=1e-12)
    assert abs(dropped.mean() - p) < 0.01
    np.testing.assert_allclose(yn[~dropped], a * xn[~dropped] + b, rtol=1e-12)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.where(dropped, 0.0, a), rtol=1e-12)
    assert F.alpha_dropout(x, p) is x  # training defaults to False, as in torch
    assert float(F.alpha_dropout(x, 1.0, True).abs().sum()) == 0.0
    f = F.feature_alpha_dropout(ember.randn(400, 30, 5, dtype=ember.float64), p, training=True).numpy()
    const = np.isclose(f, -neg * a + b, rtol=0, atol=1e-12)
    assert (const.all(-1) | ~const.any(-1)).all()  # whole (sample, channel) rows are dropped together
    assert abs(const.all(-1).mean() - p) < 0.02


def test_dropout3d_zeroes_whole_channels():
    ember.manual_seed(4)
    for shape in [(3, 40, 2, 2, 2), (40, 2, 3, 2)]:
        out = nn.Dropout3d(0.25)(ember.ones(shape)).numpy()
        per_channel = out.reshape(shape[:-3] + (-1,))
        assert np.isclose(per_channel, 0.0).sum() + np.isclose(per_channel, 1 / 0.75).sum() == per_channel.size
        assert (per_channel.min(-1) == per_channel.max(-1)).all()
        assert 0.1 < (per_channel[..., 0] == 0).mean() < 0.4
    m = nn.Dropout3d().eval()
    x = ember.randn(2, 3, 2, 2, 2)
    assert m(x) is x
    with pytest.warns(UserWarning, match="dropout3d: Received a 3-D input"):
        F.dropout3d(ember.ones(4, 2, 2))
    for bad in (-0.1, 1.5):
        for fn in (F.dropout3d, F.alpha_dropout, F.feature_alpha_dropout):
            with pytest.raises(ValueError, match="between 0 and 1"):
                fn(x, bad)
        with pytest.raises(ValueError):
            nn.AlphaDropout(bad)


@needs_torch
def test_dropout_module_reprs_match_torch():
    for name, args in [("Dropout3d", ()), ("AlphaDropout", (0.2,)), ("FeatureAlphaDropout", (0.1, True))]:
        assert repr(getattr(nn, name)(*args)) == repr(getattr(_torch.nn, name)(*args))
