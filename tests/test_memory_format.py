"""Memory formats (Note [memory format]): channels-last inputs give
channels-last results with torch's strides, for the rows tagged `format`
(convolution, pooling, batch/group norm, 2-d interpolation and their
backwards), `.grad` follows its leaf's layout (torch's layout contract), and
`Tensor.to` / `Module.to` take `memory_format=`.

Strides are hand-computed: channels_last lays (N, C, H, W) out as
(H*W*C, 1, W*C, C). Values are compared with the same call on a contiguous
copy of the input, whose kernels the other test files check against NumPy:
the layout must not change a single value."""
import json
import os

import numpy as np
import pytest

import ember
import ember.nn.functional as F
import layout_cases


def cl_strides(shape):
    n, c, h, w = shape
    return (h * w * c, 1, w * c, c)


def cl(t):
    return t.contiguous(memory_format=ember.channels_last)


def _x(seed=0, shape=(2, 3, 6, 6)):
    g = np.random.default_rng(seed)
    return ember.tensor(g.standard_normal(shape))


# row -> a call taking (x) whose output 0 comes from that row
W = ember.tensor(np.random.default_rng(1).standard_normal((4, 3, 3, 3)))
WT = ember.tensor(np.random.default_rng(2).standard_normal((3, 4, 3, 3)))
FORWARD = {
    "_convolution": lambda x: F.conv2d(x, W, padding=1),
    "_convolution_transpose": lambda x: F.conv_transpose2d(x, WT, stride=2),
    "_max_pool2d_with_indices": lambda x: F.max_pool2d(x, 2),
    "_avg_pool2d": lambda x: F.avg_pool2d(x, 3, stride=1, padding=1),
    "_adaptive_avg_pool2d": lambda x: F.adaptive_avg_pool2d(x, (2, 3)),
    "_native_batch_norm": lambda x: F.batch_norm(x, None, None, training=True),
    "_native_group_norm": lambda x: F.group_norm(x, 3),
    "_upsample_nearest2d": lambda x: F.interpolate(x, scale_factor=2, mode="nearest"),
    "_upsample_nearest_exact2d": lambda x: F.interpolate(x, scale_factor=2, mode="nearest-exact"),
    "_upsample_bilinear2d": lambda x: F.interpolate(x, size=(7, 9), mode="bilinear"),
    "_upsample_bicubic2d": lambda x: F.interpolate(x, size=(7, 9), mode="bicubic", align_corners=True),
}
# each backward row, reached by differentiating its forward
BACKWARD = {
    "_convolution_backward": "_convolution",
    "_max_pool2d_backward": "_max_pool2d_with_indices",
    "_avg_pool2d_backward": "_avg_pool2d",
    "_adaptive_avg_pool2d_backward": "_adaptive_avg_pool2d",
    "_native_batch_norm_backward": "_native_batch_norm",
    "_native_group_norm_backward": "_native_group_norm",
    "_upsample_nearest2d_backward": "_upsample_nearest2d",
    "_upsample_nearest_exact2d_backward": "_upsample_nearest_exact2d",
    "_upsample_bilinear2d_backward": "_upsample_bilinear2d",
    "_upsample_bicubic2d_backward": "_upsample_bicubic2d",
}
FORMAT_ROWS = list(FORWARD) + list(BACKWARD)


@pytest.mark.parametrize("row", list(FORWARD))
def test_channels_last_in_channels_last_out(row):
    x = _x()
    ref = FORWARD[row](x)
    y = FORWARD[row](cl(x))
    assert y.stride() == cl_strides(y.shape), (row, y.stride())
    # convolution sums in another order on channels-last images (conv_nhwc.c)
    np.testing.assert_allclose(y.numpy(), ref.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("row", list(FORWARD))
def test_contiguous_in_contiguous_out(row):
    y = FORWARD[row](_x())
    assert y.is_contiguous()


@pytest.mark.parametrize("row", list(BACKWARD))
def test_gradients_of_channels_last_inputs_are_channels_last(row):
    fwd = FORWARD[BACKWARD[row]]
    g = np.random.default_rng(3).standard_normal(fwd(_x()).shape)
    grads = []
    for layout in (lambda t: t, cl):
        x = layout(_x()).detach().requires_grad_()
        # a channels-last incoming gradient, as the next layer of a
        # channels-last network gives it
        fwd(x).backward(cl(ember.tensor(g)))
        grads.append(x.grad)
    assert grads[1].stride() == cl_strides(grads[1].shape), (row, grads[1].stride())
    np.testing.assert_allclose(grads[1].numpy(), grads[0].numpy(), rtol=1e-12, atol=1e-12)


def np_conv2d(x, w, b, stride, padding, dilation):
    """float64 NumPy convolution by its definition: a sum over the window."""
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    oh = (h + 2 * padding - dilation * (kh - 1) - 1) // stride + 1
    ow = (wd + 2 * padding - dilation * (kw - 1) - 1) // stride + 1
    y = np.zeros((n, o, oh, ow)) + b[None, :, None, None]
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i * dilation:i * dilation + stride * oh:stride, j * dilation:j * dilation + stride * ow:stride]
            y += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j])
    return y


@pytest.mark.parametrize("geom", [(2, 3, 7, 4, 3, 1, 1, 1), (3, 5, 9, 6, 3, 2, 0, 1), (1, 4, 8, 8, 1, 1, 0, 1),
                                  (2, 4, 8, 3, 2, 2, 1, 2), (2, 3, 6, 5, 5, 1, 2, 1), (4, 16, 5, 8, 1, 1, 0, 1)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_channels_last_convolution_against_numpy(geom, dtype):
    n, c, h, o, k, stride, padding, dilation = geom
    g = np.random.default_rng(sum(geom))
    x, w, b = g.standard_normal((n, c, h, h)), g.standard_normal((o, c, k, k)), g.standard_normal(o)
    ref = np_conv2d(x, w, b, stride, padding, dilation)
    dt = getattr(ember, dtype)
    # a 1x1 weight made channels-last keeps its contiguous strides (both
    # layouts fit it) and says nothing, as in torch
    layouts = ((cl, lambda t: t), (cl, cl)) + (((lambda t: t, cl),) if k > 1 else ())
    for xl, wl in layouts:
        y = F.conv2d(xl(ember.tensor(x, dtype=dt)), wl(ember.tensor(w, dtype=dt)), ember.tensor(b, dtype=dt),
                     stride=stride, padding=padding, dilation=dilation)
        assert y.stride() == cl_strides(y.shape)
        tol = 1e-4 if dtype == "float32" else 1e-12
        np.testing.assert_allclose(y.numpy(), ref, rtol=tol, atol=tol)


def np_conv2d_grads(x, w, gy, stride, padding, dilation):
    """(gx, gw, gb) of np_conv2d for upstream gy: each window position's
    patch gets gy times the weight tap back, and gives gy times itself to it."""
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    oh, ow = gy.shape[2:]
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    gxp, gw = np.zeros_like(xp), np.zeros_like(w)
    for i in range(kh):
        for j in range(kw):
            sl = (slice(None), slice(None), slice(i * dilation, i * dilation + stride * oh, stride),
                  slice(j * dilation, j * dilation + stride * ow, stride))
            gxp[sl] += np.einsum("nohw,oc->nchw", gy, w[:, :, i, j])
            gw[:, :, i, j] = np.einsum("nohw,nchw->oc", gy, xp[sl])
    return gxp[:, :, padding:padding + h, padding:padding + wd], gw, gy.sum((0, 2, 3))


@pytest.mark.parametrize("geom", [(2, 3, 7, 4, 3, 1, 1, 1), (3, 5, 9, 6, 3, 2, 0, 1), (1, 4, 8, 8, 1, 1, 0, 1),
                                  (3, 4, 8, 3, 1, 2, 0, 1), (2, 3, 9, 4, 3, 1, 2, 2), (1, 2, 5, 3, 2, 1, 1, 1)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_channels_last_convolution_gradients_against_numpy(geom, dtype):
    """The NHWC backward (cpu/conv_nhwc.c): channels-last gradients, NumPy's values."""
    n, c, h, o, k, stride, padding, dilation = geom
    g = np.random.default_rng(sum(geom) + 7)
    x, w, b = g.standard_normal((n, c, h, h)), g.standard_normal((o, c, k, k)), g.standard_normal(o)
    dt = getattr(ember, dtype)
    xt, wt = (cl(ember.tensor(v, dtype=dt)).requires_grad_() for v in (x, w))
    bt = ember.tensor(b, dtype=dt, requires_grad=True)
    y = F.conv2d(xt, wt, bt, stride=stride, padding=padding, dilation=dilation)
    gy = g.standard_normal(tuple(y.shape))
    y.backward(cl(ember.tensor(gy, dtype=dt)))
    tol = 1e-4 if dtype == "float32" else 1e-11
    for got, want in zip((xt.grad, wt.grad, bt.grad), np_conv2d_grads(x, w, gy, stride, padding, dilation)):
        np.testing.assert_allclose(got.numpy(), want, rtol=tol, atol=tol)
    assert xt.grad.stride() == cl_strides(x.shape)
    if k > 1:
        assert wt.grad.stride() == cl_strides(w.shape)


def test_max_pool_indices_follow_the_layout():
    y, i = F.max_pool2d(cl(_x()), 2, return_indices=True)
    assert i.stride() == cl_strides(i.shape) and y.stride() == cl_strides(y.shape)
    _, ref = F.max_pool2d(_x(), 2, return_indices=True)
    np.testing.assert_array_equal(i.numpy(), ref.numpy())


def test_channels_last_weight_makes_a_channels_last_convolution():
    y = F.conv2d(_x(), cl(W), padding=1)
    assert y.stride() == cl_strides(y.shape)


def test_suggested_format_rules_as_torch():
    # N, C=1 tensors: channels_last's strides say channels-last, the
    # contiguous ones say contiguous, though both are "contiguous"
    a = ember.zeros(2, 1, 4, 4)
    assert F.avg_pool2d(a, 1).stride() == (16, 16, 4, 1)
    b = ember.zeros(2, 4, 4, 1).permute(0, 3, 1, 2)  # NHWC memory, C == 1
    assert b.stride() == (16, 1, 4, 1)
    assert F.avg_pool2d(b, 1).stride() == (16, 1, 4, 1)
    # a slice of a channels-last tensor is still channels-last ordered
    s = cl(_x())[:, :, 1:5, 1:5]
    assert F.avg_pool2d(s, 1).stride() == cl_strides((2, 3, 4, 4))


def test_grad_follows_the_leaf_layout():
    x = cl(_x()).detach().requires_grad_()
    (x * 2).sum().backward()  # an expanded incoming gradient
    assert x.grad.stride() == x.stride()
    np.testing.assert_array_equal(x.grad.numpy(), np.full(x.shape, 2.0))
    t = ember.zeros(4, 3).t().detach().requires_grad_()  # dense, transposed
    (t * 3).sum().backward()
    assert t.grad.stride() == (1, 3)
    u = ember.zeros(4, 6)[:, ::2].detach().requires_grad_()  # not dense: contiguous
    (u * 1).sum().backward()
    assert u.grad.stride() == (3, 1)


def test_tensor_to_memory_format():
    x = _x()
    y = x.to(memory_format=ember.channels_last)
    assert y.stride() == cl_strides(x.shape)
    np.testing.assert_array_equal(y.numpy(), x.numpy())
    z = x.to(ember.float32, memory_format=ember.channels_last)
    assert z.dtype == ember.float32 and z.stride() == cl_strides(x.shape)
    assert y.to(memory_format=ember.contiguous_format).is_contiguous()
    assert y.to(memory_format=ember.channels_last) is y
    assert y.to(memory_format=ember.preserve_format) is y
    with pytest.raises(RuntimeError, match="required rank 4 tensor to use channels_last format"):
        ember.zeros(2, 3).to(memory_format=ember.channels_last)
    with pytest.raises(TypeError, match="memory_format"):
        x.to(memory_format="channels_last")
    # differentiable, as torch's
    a = _x().requires_grad_()
    a.to(memory_format=ember.channels_last).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), np.ones(a.shape))


def test_module_to_memory_format():
    m = ember.nn.Sequential(ember.nn.Conv2d(3, 4, 3), ember.nn.BatchNorm2d(4), ember.nn.Linear(4, 2))
    m.to(memory_format=ember.channels_last)
    assert m[0].weight.stride() == cl_strides(m[0].weight.shape)
    assert isinstance(m[0].weight, ember.nn.Parameter)
    assert m[0].bias.stride() == (1,) and m[2].weight.is_contiguous()
    y = m[0](cl(_x().float()))
    assert y.stride() == cl_strides(y.shape)
    y.sum().backward()
    assert m[0].weight.grad.stride() == m[0].weight.stride()


def test_meta_keeps_the_format():
    x = ember.empty(2, 3, 8, 8, device="meta").contiguous(memory_format=ember.channels_last)
    y = F.conv2d(x, ember.empty(4, 3, 3, 3, device="meta"))
    assert y.is_meta and y.stride() == cl_strides(y.shape)


# Note [output layout]: the strides torch gives the calls of
# tests/layout_cases.py, stored by data/make_layout_reference.py
LAYOUT_REF = json.load(open(os.path.join(os.path.dirname(__file__), "data", "layout_torch_reference.json")))["cases"]


@pytest.mark.parametrize("name", sorted(LAYOUT_REF))
def test_layout_as_torch_lays_it_out(name):
    x, y, t, x3 = ins = layout_cases._inputs(ember)
    f = layout_cases.cases()[name]
    r = f(ember, *ins)
    assert [list(r.shape), list(r.stride())] == LAYOUT_REF[name]
    if "empty" not in name:  # the layout changes no value: the same call on contiguous inputs
        want = f(ember, x.contiguous(), y, t.contiguous(), x3.contiguous())
        np.testing.assert_array_equal(r.numpy(), want.numpy())
