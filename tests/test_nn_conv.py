"""F.pad, F.unfold, F.conv1d, F.conv2d (composed on C ops): values against
NumPy and hand-computed values, gradcheck, torch's errors; values and
gradients against torch when installed."""
import numpy as np
import pytest

import ember
from ember.autograd import gradcheck
from ember.nn import functional as F

try:
    import torch as _torch
except ImportError:
    _torch = None
needs_torch = pytest.mark.skipif(_torch is None, reason="torch not installed")
RNG = np.random.default_rng(0)


def T(a, grad=False):
    t = ember.from_numpy(np.ascontiguousarray(a))
    return t.requires_grad_() if grad else t


def test_pad_by_hand():
    x = T(np.arange(5.0).reshape(1, 1, 5))
    np.testing.assert_array_equal(F.pad(x, (2, 3), mode="reflect").numpy()[0, 0], [2, 1, 0, 1, 2, 3, 4, 3, 2, 1])
    np.testing.assert_array_equal(F.pad(x, (2, 1), mode="replicate").numpy()[0, 0], [0, 0, 0, 1, 2, 3, 4, 4])
    np.testing.assert_array_equal(F.pad(x, (2, 1), mode="circular").numpy()[0, 0], [3, 4, 0, 1, 2, 3, 4, 0])
    np.testing.assert_array_equal(F.pad(x, (-1, 2)).numpy()[0, 0], [1, 2, 3, 4, 0, 0])
    np.testing.assert_array_equal(F.pad(T(np.ones((2, 3))), (1, 1, 1, 1), value=7).numpy(),
                                  np.pad(np.ones((2, 3)), 1, constant_values=7))
    with pytest.raises(RuntimeError, match="Padding size should be less"):
        F.pad(x, (5, 0), mode="reflect")
    with pytest.raises(NotImplementedError):
        F.pad(T(np.ones(5)), (1, 1), mode="reflect")
    with pytest.raises(RuntimeError, match="divisible by 2"):
        F.pad(x, (1,))


def np_conv2d(x, w, b, stride, padding, dilation, groups):
    x = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    N, C, H, W = x.shape
    Co, Cg, kh, kw = w.shape
    oh = (H - dilation * (kh - 1) - 1) // stride + 1
    ow = (W - dilation * (kw - 1) - 1) // stride + 1
    out = np.zeros((N, Co, oh, ow))
    per = Co // groups
    for o in range(Co):
        g = o // per
        for i in range(oh):
            for j in range(ow):
                patch = x[:, g * Cg:(g + 1) * Cg, i * stride:i * stride + dilation * (kh - 1) + 1:dilation,
                          j * stride:j * stride + dilation * (kw - 1) + 1:dilation]
                out[:, o, i, j] = (patch * w[o]).sum((1, 2, 3))
    return out + (0 if b is None else b.reshape(1, -1, 1, 1))


@pytest.mark.parametrize("stride,padding,dilation,groups", [(1, 0, 1, 1), (2, 1, 1, 1), (1, 2, 2, 1), (1, 1, 1, 2)])
def test_conv2d_against_numpy(stride, padding, dilation, groups):
    x = RNG.standard_normal((2, 4, 7, 6))
    w = RNG.standard_normal((6, 4 // groups, 3, 2))
    b = RNG.standard_normal(6)
    got = F.conv2d(T(x), T(w), T(b), stride, padding, dilation, groups).numpy()
    np.testing.assert_allclose(got, np_conv2d(x, w, b, stride, padding, dilation, groups), rtol=1e-10, atol=1e-12)


def test_gradcheck_conv_and_unfold():
    x, w, b = T(RNG.standard_normal((1, 2, 5, 4)), True), T(RNG.standard_normal((3, 2, 2, 2)), True), \
        T(RNG.standard_normal(3), True)
    assert gradcheck(lambda x, w, b: F.conv2d(x, w, b, stride=1, padding=1), [x, w, b])
    assert gradcheck(lambda x: F.unfold(x, 2, stride=1), [x])  # overlapping windows sum their gradients
    x1, w1 = T(RNG.standard_normal((2, 2, 7)), True), T(RNG.standard_normal((4, 1, 3)), True)
    assert gradcheck(lambda x, w: F.conv1d(x, w, padding="same", groups=2), [x1, w1])
    assert gradcheck(lambda x: F.pad(x, (1, 2), mode="reflect"), [x1])


def test_conv_errors_and_shapes():
    x = T(np.ones((1, 3, 5, 5)))
    with pytest.raises(RuntimeError, match="channels"):
        F.conv2d(x, T(np.ones((2, 2, 3, 3))))
    with pytest.raises(RuntimeError, match="strided"):  # torch's F raises RuntimeError (its modules ValueError)
        F.conv2d(x, T(np.ones((2, 3, 3, 3))), padding="same", stride=2)
    with pytest.raises(RuntimeError):
        F.conv2d(x, T(np.ones((2, 3, 7, 7))))
    with pytest.raises(RuntimeError, match="stride"):
        F.conv2d(x, T(np.ones((2, 3, 3, 3))), stride=0)
    with pytest.raises(RuntimeError, match="padding"):
        F.unfold(x, 2, padding=-1)
    assert F.conv2d(T(np.ones((3, 5, 5))), T(np.ones((2, 3, 3, 3))), padding="same").shape == (2, 5, 5)
    assert F.conv1d(T(np.ones((2, 3, 9))), T(np.ones((4, 3, 3))), stride=2).shape == (2, 4, 4)


@needs_torch
@pytest.mark.parametrize("kw", [{}, {"stride": 2, "padding": 1}, {"dilation": 2, "padding": "same"},
                                {"groups": 2}, {"padding": "valid"}])
def test_conv_matches_torch(kw):
    x, w, b = RNG.standard_normal((2, 4, 8, 7)), RNG.standard_normal((6, 4 // kw.get("groups", 1), 3, 3)), \
        RNG.standard_normal(6)
    x1, w1 = RNG.standard_normal((2, 4, 9)), RNG.standard_normal((6, 4 // kw.get("groups", 1), 3))
    for fn, args in (("conv2d", (x, w, b)), ("conv1d", (x1, w1, b))):
        res = []
        for L in (ember, _torch):
            xs = [L.tensor(a, requires_grad=True) for a in args]
            y = getattr(L.nn.functional, fn)(*xs, **kw)
            y.sum().backward()
            res.append([y.detach().numpy()] + [t.grad.numpy() for t in xs])
        for a, c in zip(*res):
            np.testing.assert_allclose(a, c, rtol=1e-9, atol=1e-10)
    for mode in ("reflect", "replicate", "circular", "constant"):
        a = [L.nn.functional.pad(L.tensor(x), (1, 2, 2, 1), mode=mode).numpy() for L in (ember, _torch)]
        np.testing.assert_array_equal(*a)


def test_conv_modules():
    m = ember.nn.Conv2d(4, 6, 3, padding=1, groups=2)
    assert m.weight.shape == (6, 2, 3, 3) and m.bias.shape == (6,)
    bound = 1 / np.sqrt(2 * 9)
    assert np.abs(m.weight.detach().numpy()).max() <= bound and np.abs(m.bias.detach().numpy()).max() <= bound
    assert m(T(np.ones((1, 4, 5, 5), np.float32))).shape == (1, 6, 5, 5)
    assert repr(m) == "Conv2d(4, 6, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), groups=2)"
    c1 = ember.nn.Conv1d(3, 5, 3, padding="same", padding_mode="zeros")
    assert c1(T(np.ones((2, 3, 7), np.float32))).shape == (2, 5, 7)
    with pytest.raises(ValueError):
        ember.nn.Conv2d(3, 4, 3, groups=2)


@needs_torch
@pytest.mark.parametrize("args,kw", [((3, 8, 3), {}), ((3, 8, (3, 2)), {"stride": 2, "padding": 1, "dilation": 2,
                                                                         "bias": False, "padding_mode": "reflect"}),
                                     ((4, 8, 3), {"groups": 2, "padding_mode": "circular", "padding": 1})])
def test_conv_modules_match_torch(args, kw):
    for name, shape in (("Conv2d", (2, args[0], 9, 8)), ("Conv1d", (2, args[0], 9))):
        a = args if name == "Conv2d" else (args[0], args[1], args[2] if isinstance(args[2], int) else args[2][0])
        k = {n: (v[0] if isinstance(v, tuple) and name == "Conv1d" else v) for n, v in kw.items()}
        ember.manual_seed(2)
        _torch.manual_seed(2)
        e, t = getattr(ember.nn, name)(*a, **k), getattr(_torch.nn, name)(*a, **k)
        assert repr(e) == repr(t)
        for pe, pt in zip(e.parameters(), t.parameters()):
            np.testing.assert_allclose(pe.detach().numpy(), pt.detach().numpy(), rtol=1e-6, atol=1e-7)
        x = RNG.standard_normal(shape).astype(np.float32)
        np.testing.assert_allclose(e(T(x)).detach().numpy(), t(_torch.from_numpy(x)).detach().numpy(),
                                   rtol=1e-4, atol=1e-5)
