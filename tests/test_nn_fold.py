"""The C convolution ops (csrc/ops/conv.c): F.unfold / F.fold / nn.Unfold / nn.Fold
and F.conv1d / F.conv2d on _im2col / _col2im / _convolution / _convolution_backward.
Values against direct-loop NumPy references in float64 (tests/op_db.py),
gradcheck / gradgradcheck, the threaded and the BLAS-threaded paths, dtypes,
strides, torch's errors; values, gradients and node names against torch when
installed."""
import numpy as np
import pytest

import ember
from ember.autograd import gradcheck, gradgradcheck
from ember.nn import functional as F
from op_db import np_col2im, np_conv, np_conv_backward, np_im2col
from test_nn_conv import T  # the same tensor helper

try:
    import torch as _torch
except ImportError:
    _torch = None
needs_torch = pytest.mark.skipif(_torch is None, reason="torch not installed")
RNG = np.random.default_rng(5)


def test_unfold_fold_by_hand():
    x = T(np.arange(9.0).reshape(1, 1, 3, 3))
    cols = F.unfold(x, 2).numpy()[0]  # the four 2x2 windows as columns
    np.testing.assert_array_equal(cols, [[0, 1, 3, 4], [1, 2, 4, 5], [3, 4, 6, 7], [4, 5, 7, 8]])
    back = F.fold(T(cols[None]), (3, 3), 2).numpy()[0, 0]  # overlapping windows sum: counts x value
    np.testing.assert_array_equal(back, np.arange(9.0).reshape(3, 3) * [[1, 2, 1], [2, 4, 2], [1, 2, 1]])
    ones = F.fold(F.unfold(T(np.ones((1, 2, 4, 5))), 3, padding=1), (4, 5), 3, padding=1).numpy()
    assert ones[0, 0, 0, 0] == 4 and ones[0, 1, 1, 1] == 9  # corner: 4 windows, interior: 9


@pytest.mark.parametrize("shape,k,d,p,s", [((2, 3, 5, 4), (2, 2), (1, 1), (1, 0), (1, 2)),
                                           ((3, 6, 7), (3, 2), (2, 1), (1, 1), (2, 1)),
                                           ((1, 2, 9, 8), (1, 1), (1, 1), (0, 0), (3, 2)),
                                           ((2, 1, 4, 4), (4, 4), (1, 1), (2, 2), (3, 3))])
def test_unfold_fold_against_numpy(shape, k, d, p, s):
    x = RNG.standard_normal(shape)
    cols = F.unfold(T(x), k, d, p, s)
    np.testing.assert_array_equal(cols.numpy(), np_im2col(x, k, d, p, s))
    c = RNG.standard_normal(cols.shape)
    np.testing.assert_allclose(F.fold(T(c), shape[-2:], k, d, p, s).numpy(), np_col2im(c, shape[-2:], k, d, p, s),
                               rtol=1e-12, atol=1e-12)
    # adjoints: <unfold(x), c> = <x, fold(c)>
    lhs = (cols.numpy() * c).sum()
    rhs = (x * F.fold(T(c), shape[-2:], k, d, p, s).numpy()).sum()
    assert abs(lhs - rhs) < 1e-9 * max(1.0, abs(lhs))


def test_unfold_fold_dtypes_and_strides():
    x = RNG.standard_normal((2, 3, 6, 5))
    want = np_im2col(x, (2, 3), (1, 1), (1, 1), (1, 1))
    for dt, tol in ((ember.float32, 1e-6), (ember.float16, 1e-2), (ember.bfloat16, 5e-2)):
        got = F.unfold(T(x).to(dt), (2, 3), padding=1)
        assert got.dtype == dt
        np.testing.assert_allclose(got.float().numpy(), want, rtol=tol, atol=tol)
    xt = T(np.ascontiguousarray(np.swapaxes(x, -1, -2))).transpose(-1, -2)  # non-contiguous input
    np.testing.assert_array_equal(F.unfold(xt, (2, 3), padding=1).numpy(), want)
    with pytest.raises(NotImplementedError, match="im2col_out_cpu"):
        F.unfold(T(np.ones((1, 2, 3, 3), np.int64)), 2)
    with pytest.raises(NotImplementedError, match="col2im_out_cpu"):
        F.fold(T(np.ones((1, 4, 4), np.int32)), (3, 3), 2)
    assert F.unfold(T(np.ones((0, 2, 3, 3))), 2).shape == (0, 8, 4)
    assert F.fold(T(np.ones((0, 8, 4))), (3, 3), 2).shape == (0, 2, 3, 3)


def test_fold_unfold_errors():
    x = T(np.ones((2, 12, 9)))
    with pytest.raises(RuntimeError, match=r"divisible by the product of kernel_size.*input.size\(1\)=12"):
        F.fold(x, (4, 4), (4, 4))
    with pytest.raises(RuntimeError, match=r"sliding blocks 3 \* 3 = 9, but got input.size\(2\)=8"):
        F.fold(T(np.ones((2, 12, 8))), (4, 4), 2)
    with pytest.raises(RuntimeError, match="Expected 2D or 3D"):
        F.fold(T(np.ones((2, 0, 9))), (4, 4), 2)
    with pytest.raises(RuntimeError, match="output_size equals to 2, but got size 3"):
        F.fold(x, (4, 4, 4), 2)
    with pytest.raises(RuntimeError, match="kernel size should be greater than zero"):
        F.fold(x, (4, 4), 0)
    with pytest.raises(RuntimeError, match="stride should be greater than zero"):
        F.unfold(T(np.ones((1, 2, 4, 4))), 2, stride=0)
    with pytest.raises(RuntimeError, match="dilation should be greater than zero"):
        F.unfold(T(np.ones((1, 2, 4, 4))), 2, dilation=(1, 0))
    with pytest.raises(RuntimeError, match="padding should be non-negative"):
        F.unfold(T(np.ones((1, 2, 4, 4))), 2, padding=-1)
    with pytest.raises(RuntimeError, match="Expected 3D or 4D"):
        F.unfold(T(np.ones((2, 3, 4, 4, 4))), 2)
    with pytest.raises(RuntimeError, match=r"calculated shape of the array of sliding blocks as \(0, 0\)"):
        F.unfold(T(np.ones((2, 3, 1, 1))), 2)
    with pytest.raises(RuntimeError, match="overflow"):
        F.unfold(T(np.ones((1, 1, 4, 4))), 3, dilation=2 ** 62)


def test_fold_unfold_modules():
    u, f = ember.nn.Unfold(2, padding=1), ember.nn.Fold((4, 4), 2)
    assert repr(u) == "Unfold(kernel_size=2, dilation=1, padding=1, stride=1)"
    assert repr(f) == "Fold(output_size=(4, 4), kernel_size=2, dilation=1, padding=0, stride=1)"
    x = RNG.standard_normal((2, 3, 4, 4))
    np.testing.assert_array_equal(u(T(x)).numpy(), np_im2col(x, (2, 2), (1, 1), (1, 1), (1, 1)))
    c = RNG.standard_normal((2, 12, 9))
    np.testing.assert_allclose(f(T(c)).numpy(), np_col2im(c, (4, 4), (2, 2), (1, 1), (0, 0), (1, 1)), atol=1e-12)
    assert list(ember.nn.Sequential(ember.nn.Unfold(1), ember.nn.Fold((4, 4), 1))(T(x)).shape) == [2, 3, 4, 4]


def test_gradcheck_fold_unfold():
    x, c = T(RNG.standard_normal((2, 2, 4, 3)), True), T(RNG.standard_normal((2, 8, 6)), True)
    assert gradcheck(lambda x: F.unfold(x, 2, padding=(1, 0), stride=(1, 2)), [x])
    assert gradcheck(lambda c: F.fold(c, (4, 4), 2, stride=(1, 2)), [c])
    assert gradgradcheck(lambda x: F.unfold(x * x, 2, dilation=(2, 1)), [x])
    assert gradgradcheck(lambda c: F.fold(c * c, (4, 3), 2, padding=(1, 0), stride=(2, 1)), [c])
    y = F.unfold(x, 2)
    assert type(y.grad_fn).__name__ == "Im2ColBackward0"
    assert type(F.fold(y, (4, 3), 2).grad_fn).__name__ == "Col2ImBackward0"
    g, = ember.autograd.grad((y * y).sum(), [x], create_graph=True)
    assert type(g.grad_fn).__name__ == "Col2ImBackward0"


@pytest.mark.parametrize("kw", [dict(stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2),
                                dict(stride=1, padding=0, dilation=1, groups=1),
                                dict(stride=(1, 3), padding=(0, 1), dilation=2, groups=4)])
def test_conv2d_and_backward_against_numpy(kw):
    x, w, b = RNG.standard_normal((3, 4, 7, 8)), RNG.standard_normal((8, 4 // kw["groups"], 3, 2)), \
        RNG.standard_normal(8)
    args = [[v] * 2 if isinstance(v, int) else list(v) for v in (kw["stride"], kw["padding"], kw["dilation"])]
    xs, ws, bs = T(x, True), T(w, True), T(b, True)
    y = F.conv2d(xs, ws, bs, **kw)
    np.testing.assert_allclose(y.detach().numpy(), np_conv(x, w, b, *args, kw["groups"]), rtol=1e-11, atol=1e-11)
    gy = RNG.standard_normal(tuple(y.shape))
    y.backward(T(gy))
    want = np_conv_backward(gy, x, w, *args, kw["groups"])
    for got, exp in zip((xs.grad, ws.grad, bs.grad), want):
        np.testing.assert_allclose(got.numpy(), exp, rtol=1e-11, atol=1e-11)
    # the fused backward op alone, with parts of output_mask off (those outputs are empty)
    gx, gw, gb = ember._C._convolution_backward(T(gy), T(x), T(w), *args, kw["groups"], [1, 0, 1])
    assert gw.numel() == 0
    np.testing.assert_allclose(gx.numpy(), want[0], rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(gb.numpy(), want[2], rtol=1e-11, atol=1e-11)


@pytest.mark.parametrize("N,C,O,HW", [(8, 8, 8, 16), (2, 16, 32, 16), (1, 16, 32, 24), (1, 3, 5, 9)])
def test_conv_threaded_paths(N, C, O, HW):
    """Images split across threads, one big image split inside (im2col by channel, GEMMs
    by column block), a small single-threaded one; and a 1x1 convolution (no im2col)."""
    x, w, b = RNG.standard_normal((N, C, HW, HW)), RNG.standard_normal((O, C, 3, 3)), RNG.standard_normal(O)
    for ww, pad in ((w, 1), (w[:, :, :1, :1], 0)):
        xs, ws = T(x.astype(np.float32), True), T(ww.astype(np.float32), True)
        y = F.conv2d(xs, ws, T(b.astype(np.float32)), padding=pad)
        np.testing.assert_allclose(y.detach().numpy(), np_conv(x, ww, b, [1, 1], [pad, pad], [1, 1], 1),
                                   rtol=2e-4, atol=2e-4)
        gy = RNG.standard_normal(tuple(y.shape))
        y.backward(T(gy.astype(np.float32)))
        gx, gw, _ = np_conv_backward(gy, x, ww, [1, 1], [pad, pad], [1, 1], 1)
        np.testing.assert_allclose(xs.grad.numpy(), gx, rtol=2e-4, atol=2e-4 * np.abs(gx).max())
        np.testing.assert_allclose(ws.grad.numpy(), gw, rtol=2e-4, atol=2e-4 * np.abs(gw).max())


def test_conv_dtypes_strides_and_edges():
    x, w, b = RNG.standard_normal((2, 4, 6, 5)), RNG.standard_normal((3, 4, 2, 2)), RNG.standard_normal(3)
    want = np_conv(x, w, b, [1, 1], [1, 1], [1, 1], 1)
    for dt, tol in ((ember.float32, 1e-5), (ember.float16, 2e-2), (ember.bfloat16, 1e-1)):
        got = F.conv2d(T(x).to(dt), T(w).to(dt), T(b).to(dt), padding=1)
        assert got.dtype == dt
        np.testing.assert_allclose(got.float().numpy(), want, rtol=tol, atol=tol * np.abs(want).max())
    xi, wi = RNG.integers(-5, 6, (2, 4, 6, 5)), RNG.integers(-5, 6, (3, 4, 2, 2))
    for dt in (np.int64, np.int32, np.int16):
        got = F.conv2d(T(xi.astype(dt)), T(wi.astype(dt)), stride=2)
        assert got.numpy().dtype == dt
        np.testing.assert_array_equal(got.numpy(), np_conv(xi, wi, None, [2, 2], [0, 0], [1, 1], 1))
    with pytest.raises(NotImplementedError, match="Bool"):
        F.conv2d(T(np.ones((1, 1, 3, 3), bool)), T(np.ones((1, 1, 2, 2), bool)))
    # any strides: a transposed input and a sliced weight
    xt = T(np.ascontiguousarray(np.swapaxes(x, -1, -2))).transpose(-1, -2)
    wbig = np.zeros((3, 4, 2, 4))
    wbig[..., ::2] = w
    np.testing.assert_allclose(F.conv2d(xt, T(wbig)[..., ::2], T(b), padding=1).numpy(), want, rtol=1e-12, atol=1e-12)
    # empty batch, no input channels
    assert F.conv2d(T(np.ones((0, 4, 6, 5))), T(w)).shape == (0, 3, 5, 4)
    y = F.conv2d(T(np.ones((2, 0, 4, 4))), T(np.ones((3, 0, 2, 2))), T(b))
    np.testing.assert_array_equal(y.numpy(), np.broadcast_to(b.reshape(1, 3, 1, 1), (2, 3, 3, 3)))


def test_conv_errors():
    x = T(np.ones((2, 3, 4, 4)))
    with pytest.raises(RuntimeError, match="Input type .torch.FloatTensor. and weight type .torch.DoubleTensor."):
        F.conv2d(x.float(), T(np.ones((2, 3, 3, 3))))
    with pytest.raises(RuntimeError, match="expected bias to be 1-dimensional with 2 elements"):
        F.conv2d(x, T(np.ones((2, 3, 3, 3))), T(np.ones(3)))
    with pytest.raises(RuntimeError, match="Input type .float. and bias type .double."):
        F.conv2d(x.float(), T(np.ones((2, 3, 3, 3))).float(), T(np.ones(2)))
    with pytest.raises(RuntimeError, match="expected weight to be at least 1 at dimension 0"):
        F.conv2d(x, T(np.ones((0, 3, 3, 3))))
    with pytest.raises(RuntimeError, match="expected weight to be divisible by 2 at dimension 0"):
        F.conv2d(T(np.ones((2, 4, 4, 4))), T(np.ones((3, 2, 3, 3))), groups=2)
    with pytest.raises(RuntimeError, match="non-positive groups"):
        F.conv2d(x, T(np.ones((2, 3, 3, 3))), groups=0)
    with pytest.raises(RuntimeError, match="negative padding"):
        F.conv2d(x, T(np.ones((2, 3, 3, 3))), padding=(-1, 0))
    with pytest.raises(RuntimeError, match="non-positive dilation"):
        F.conv2d(x, T(np.ones((2, 3, 3, 3))), dilation=0)
    with pytest.raises(RuntimeError, match=r"a list of 2 values .* stride=\[1, 1, 1\]"):
        F.conv2d(x, T(np.ones((2, 3, 3, 3))), stride=(1, 1, 1))
    with pytest.raises(RuntimeError, match=r"\(4 x 4\). Kernel size: \(5 x 5\)"):
        F.conv2d(x, T(np.ones((2, 3, 3, 3))), dilation=2)
    with pytest.raises(RuntimeError, match="Expected 4-dimensional input for 4-dimensional weight"):
        F.conv1d(T(np.ones((2, 3, 4))), T(np.ones((2, 3, 3, 3))))
    with pytest.raises(RuntimeError, match="Expected 3D .unbatched. or 4D .batched. input to conv2d"):
        F.conv2d(T(np.ones((2, 3, 4, 4, 1))), T(np.ones((2, 3, 3, 3))))
    with pytest.raises(RuntimeError, match="Invalid padding string: 'foo'"):
        F.conv2d(x, T(np.ones((2, 3, 3, 3))), padding="foo")
    with pytest.raises(RuntimeError, match="grad_output"):
        ember._C._convolution_backward(T(np.ones((2, 2, 3, 3))), x, T(np.ones((2, 3, 3, 3))), [1, 1], [0, 0],
                                       [1, 1], 1, [1, 1, 1])


def test_conv_double_backward():
    x, w, b = T(RNG.standard_normal((2, 4, 5, 4)), True), T(RNG.standard_normal((4, 2, 2, 3)), True), \
        T(RNG.standard_normal(4), True)
    assert gradgradcheck(lambda x, w, b: F.conv2d(x, w, b, stride=(2, 1), padding=1, groups=2), [x, w, b])
    x1, w1 = T(RNG.standard_normal((2, 3, 6)), True), T(RNG.standard_normal((2, 3, 2)), True)
    assert gradgradcheck(lambda x, w: F.conv1d(x, w, padding=1, dilation=2), [x1, w1])
    y = F.conv2d(x, w, b, groups=2)
    assert type(y.grad_fn).__name__ == "ConvolutionBackward0"
    gx, gw = ember.autograd.grad(y.square().sum(), [x, w], create_graph=True)
    assert type(gx.grad_fn).__name__ == "ConvolutionBackwardBackward0"
    # gradcheck of the fused backward op itself, every output wanted, and only some
    g = T(RNG.standard_normal((2, 4, 4, 2)), True)
    for mask in ([1, 1, 1], [1, 0, 0], [0, 1, 1]):
        def fused(g, x, w, mask=mask):
            out = ember._C._convolution_backward(g, x, w, [1, 1], [0, 0], [1, 1], 2, mask)
            return tuple(o for o, m in zip(out, mask) if m)
        assert gradcheck(fused, [g, x, w])


@needs_torch
def test_fold_unfold_match_torch():
    x, c = RNG.standard_normal((2, 3, 6, 5)), RNG.standard_normal((2, 12, 9))
    for args, kw in (((x, (2, 3)), dict(dilation=(1, 2), padding=1, stride=(2, 1))), ((x[0], 2), {})):
        res = []
        for L in (ember, _torch):
            t = L.tensor(args[0], requires_grad=True)
            y = L.nn.functional.unfold(t, *args[1:], **kw)
            y.backward(L.tensor(np.linspace(-1, 1, y.numel()).reshape(tuple(y.shape))))
            res.append((y.detach().numpy(), t.grad.numpy(), type(y.grad_fn).__name__))
        np.testing.assert_allclose(res[0][0], res[1][0])
        np.testing.assert_allclose(res[0][1], res[1][1], rtol=1e-12, atol=1e-12)
        assert res[0][2] == res[1][2]
    for L in (ember, _torch):
        t = L.tensor(c, requires_grad=True)
        y = L.nn.functional.fold(t, (4, 4), 2)
        y.sum().backward()
        res.append((y.detach().numpy(), t.grad.numpy(), type(y.grad_fn).__name__, repr(L.nn.Fold(4, (2, 2)))))
    for a, b in zip(res[-2], res[-1]):
        (np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12) if isinstance(a, np.ndarray) else None)
        assert isinstance(a, np.ndarray) or a == b
    for fn in (lambda L: L.nn.functional.fold(L.ones(2, 12, 8), (4, 4), 2),
               lambda L: L.nn.functional.fold(L.ones(2, 10, 9), (4, 4), 2),
               lambda L: L.nn.functional.unfold(L.ones(2, 0, 4, 4), 2)):
        with pytest.raises(RuntimeError) as te:
            fn(_torch)
        with pytest.raises(RuntimeError) as ee:
            fn(ember)
        assert str(te.value) == str(ee.value)


@needs_torch
@pytest.mark.parametrize("kw", [dict(stride=2, padding=1, groups=2), dict(dilation=(2, 1), padding="same"),
                                dict(padding=(0, 2))])
def test_conv_double_backward_matches_torch(kw):
    x, w, b = RNG.standard_normal((2, 4, 6, 5)), RNG.standard_normal((6, 4 // kw.get("groups", 1), 3, 2)), \
        RNG.standard_normal(6)
    res = []
    for L in (ember, _torch):
        xs, ws, bs = (L.tensor(a, requires_grad=True) for a in (x, w, b))
        y = L.nn.functional.conv2d(xs, ws, bs, **kw)
        gx, gw, gb = L.autograd.grad((y * y).sum(), [xs, ws, bs], create_graph=True)
        (gx.square().sum() + (gw * gw.detach()).sum() + gb.sum()).backward()
        res.append([t.detach().numpy() for t in (y, gx, gw, gb, xs.grad, ws.grad, bs.grad)]
                   + [type(y.grad_fn).__name__])
        if kw.get("padding") != "same":  # (there gx comes out of F.pad's backward: ember has no ConstantPadNd node)
            res[-1].append(type(gx.grad_fn).__name__)
    for a, c in zip(*res):
        if isinstance(a, str):
            assert a == c
        else:
            np.testing.assert_allclose(a, c, rtol=1e-9, atol=1e-9)
