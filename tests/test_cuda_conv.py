"""Convolution, im2col / col2im and upsampling on 'cuda' (Note
[CUDA im2col] in csrc/cuda/conv.h, Note [CUDA upsample] in
csrc/cuda/upsample.h). On a real GPU when present, else on Note [fake CUDA],
whose im2col / col2im entries run the kernels' own index math
(csrc/cuda/conv_math.h) and whose upsampling entries run the kernels' loops
over the tables the front-end uploads. Every test checks
`_C._cuda_fallback_counts` to prove the op did not take Note [CUDA
fallback]. References: direct-loop NumPy convolutions and unfolds for small
cases, and, as the issue allows, the same op on the CPU (values and
gradients); gradcheck in float64 on the device."""

import numpy as np
import pytest

import ember
from cuda_common import native
import ember.nn.functional as F
from ember import _C, _cuda_fake
from ember.autograd import gradcheck

FLOATS = [ember.float32, ember.float64, ember.float16, ember.bfloat16]
TOL = {ember.float32: 1e-5, ember.float64: 1e-12, ember.float16: 2e-3, ember.bfloat16: 2e-2}
CONV_OPS = ("_convolution", "_convolution_backward", "_im2col", "_col2im")




def _arr(seed, *shape):
    return np.random.default_rng(seed).standard_normal(shape)


def _np(t):
    t = t.detach().cpu()
    if t.dtype in (ember.float16, ember.bfloat16):
        t = t.float()
    return t.numpy().astype(np.float64)


def _close(gpu, cpu, dtype, scale=4):
    tol = TOL[dtype] * scale
    np.testing.assert_allclose(_np(gpu), _np(cpu), rtol=tol, atol=tol)


def _pair(a, dtype, requires_grad=False):
    """The same values as a CPU tensor and a GPU tensor (leaves)."""
    c = ember.tensor(a).to(dtype)
    g = c.cuda()
    c.requires_grad_(requires_grad)
    g.requires_grad_(requires_grad)
    return c, g


# ------------------------------------------------------------ NumPy references

def np_unfold(x, k, d, p, s):
    """im2col by loops: (N, C*kh*kw, L)."""
    N, C, H, W = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])))
    oh = (H + 2 * p[0] - d[0] * (k[0] - 1) - 1) // s[0] + 1
    ow = (W + 2 * p[1] - d[1] * (k[1] - 1) - 1) // s[1] + 1
    out = np.zeros((N, C * k[0] * k[1], oh * ow), x.dtype)
    for c in range(C):
        for ki in range(k[0]):
            for kj in range(k[1]):
                row = (c * k[0] + ki) * k[1] + kj
                for oy in range(oh):
                    for ox in range(ow):
                        out[:, row, oy * ow + ox] = xp[:, c, oy * s[0] + ki * d[0], ox * s[1] + kj * d[1]]
    return out


def np_fold(cols, size, k, d, p, s):
    """col2im by loops: the adjoint of np_unfold."""
    N, rows, L = cols.shape
    C = rows // (k[0] * k[1])
    H, W = size
    out = np.zeros((N, C, H + 2 * p[0], W + 2 * p[1]), cols.dtype)
    oh = (H + 2 * p[0] - d[0] * (k[0] - 1) - 1) // s[0] + 1
    ow = (W + 2 * p[1] - d[1] * (k[1] - 1) - 1) // s[1] + 1
    for c in range(C):
        for ki in range(k[0]):
            for kj in range(k[1]):
                row = (c * k[0] + ki) * k[1] + kj
                for oy in range(oh):
                    for ox in range(ow):
                        out[:, c, oy * s[0] + ki * d[0], ox * s[1] + kj * d[1]] += cols[:, row, oy * ow + ox]
    return out[:, :, p[0]:p[0] + H, p[1]:p[1] + W]


def np_conv2d(x, w, b, stride, padding, dilation, groups):
    """A direct-loop 2-d convolution (float64)."""
    x = np.pad(x, ((0, 0), (0, 0), (padding[0], padding[0]), (padding[1], padding[1])))
    N, C, H, W = x.shape
    Co, Cg, kh, kw = w.shape
    oh = (H - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (W - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((N, Co, oh, ow))
    per = Co // groups
    for o in range(Co):
        g = o // per
        for i in range(oh):
            for j in range(ow):
                patch = x[:, g * Cg:(g + 1) * Cg, i * stride[0]:i * stride[0] + dilation[0] * (kh - 1) + 1:dilation[0],
                          j * stride[1]:j * stride[1] + dilation[1] * (kw - 1) + 1:dilation[1]]
                out[:, o, i, j] = (patch * w[o]).sum((1, 2, 3))
    return out + (0 if b is None else b.reshape(1, -1, 1, 1))


# ------------------------------------------------------------ im2col / col2im

WINDOWS = [  # kernel, dilation, padding, stride
    ((2, 2), (1, 1), (0, 0), (1, 1)),
    ((3, 2), (1, 2), (1, 0), (2, 1)),
    ((1, 3), (2, 1), (2, 1), (1, 3)),
    ((3, 3), (2, 2), (3, 3), (2, 2)),  # windows that see only padding
]


@pytest.mark.parametrize("k,d,p,s", WINDOWS)
def test_unfold_fold_against_numpy(cuda, k, d, p, s):
    x = _arr(0, 2, 3, 7, 6)
    cols = np_unfold(x, k, d, p, s)
    with native("_im2col", "_col2im", entries=("im2col", "col2im")):
        u = F.unfold(ember.tensor(x).cuda(), k, dilation=d, padding=p, stride=s)
        c = _arr(1, *cols.shape)
        f = F.fold(ember.tensor(c).cuda(), (7, 6), k, dilation=d, padding=p, stride=s)
    assert u.device.type == "cuda" and f.device.type == "cuda"
    np.testing.assert_array_equal(u.cpu().numpy(), cols)
    np.testing.assert_allclose(f.cpu().numpy(), np_fold(c, (7, 6), k, d, p, s), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", FLOATS)
def test_unfold_fold_dtypes_equal_cpu(cuda, dtype):
    """im2col copies values; col2im sums in the CPU's order (float32 for halves): equal to the CPU."""
    xc, xg = _pair(_arr(2, 2, 3, 6, 5), dtype)
    cc, cg = _pair(_arr(3, 2, 3 * 4, 15), dtype)
    with native("_im2col", "_col2im"):
        ug = F.unfold(xg, (2, 2), padding=1, stride=(1, 1))
        fg = F.fold(cg, (5, 4), (2, 2), padding=(1, 0), dilation=(2, 1))
    assert ug.dtype == dtype and fg.dtype == dtype
    np.testing.assert_array_equal(_np(ug), _np(F.unfold(xc, (2, 2), padding=1, stride=(1, 1))))
    np.testing.assert_array_equal(_np(fg), _np(F.fold(cc, (5, 4), (2, 2), padding=(1, 0), dilation=(2, 1))))


def test_unfold_fold_unbatched_noncontiguous_bool(cuda):
    base = _arr(4, 3, 8, 7)
    xc = ember.tensor(base)[:, ::2, 1:].transpose(1, 2)  # (3, 6, 4), strided
    xg = ember.tensor(base).cuda()[:, ::2, 1:].transpose(1, 2)
    assert not xg.is_contiguous()
    bc = ember.tensor(_arr(5, 1, 4, 6) > 0)
    bg = bc.cuda()
    with native("_im2col", "_col2im"):
        ug = F.unfold(xg, 2, stride=2)
        fg = F.fold(F.unfold(bg, 2), (4, 6), 2)
        eg = F.unfold(ember.empty(0, 3, 6, 4, device="cuda"), 2)
    np.testing.assert_array_equal(ug.cpu().numpy(), F.unfold(xc, 2, stride=2).numpy())
    assert fg.dtype == ember.bool
    np.testing.assert_array_equal(fg.cpu().numpy(), F.fold(F.unfold(bc, 2), (4, 6), 2).numpy())
    assert tuple(eg.shape) == (0, 12, 15)


def _raises_like_cpu(fn, *cpu_and_gpu_args):
    """fn raises on the GPU what it raises on the CPU (type and message)."""
    cpu_args = [a for a in cpu_and_gpu_args]
    gpu_args = [a.cuda() if isinstance(a, ember.Tensor) else a for a in cpu_and_gpu_args]
    with pytest.raises(Exception) as ce:
        fn(*cpu_args)
    with pytest.raises(type(ce.value)) as ge:
        fn(*gpu_args)
    assert str(ge.value) == str(ce.value)


def test_unfold_fold_errors_as_cpu(cuda):
    x = ember.tensor(_arr(6, 1, 2, 4, 4))
    _raises_like_cpu(lambda t: F.unfold(t, 5), x)  # no sliding block fits
    _raises_like_cpu(lambda t: F.unfold(t, 2, stride=0), x)
    _raises_like_cpu(lambda t: F.unfold(t, 2, padding=-1), x)
    _raises_like_cpu(lambda t: F.unfold(t, 2), ember.ones(2, 3))
    _raises_like_cpu(lambda t: F.unfold(t, 2), ember.ones(1, 2, 4, 4, dtype=ember.int64))
    _raises_like_cpu(lambda t: F.fold(t, (4, 4), 2), ember.ones(1, 7, 9))  # rows not divisible
    _raises_like_cpu(lambda t: F.fold(t, (4, 4), 2), ember.ones(1, 8, 8))  # wrong block count
    _raises_like_cpu(lambda t: F.fold(t, (4, 4), 0), ember.ones(1, 8, 9))


# ------------------------------------------------------------ convolution

CONVS = [  # stride, padding, dilation, groups, bias
    ((1, 1), (0, 0), (1, 1), 1, True),
    ((2, 1), (1, 2), (1, 1), 1, False),
    ((1, 2), (2, 1), (2, 1), 2, True),
    ((3, 3), (1, 1), (1, 2), 4, True),  # depthwise
    ((1, 1), (0, 0), (1, 1), 2, False),  # 1x1 when the kernel is: a plain GEMM
]


@pytest.mark.parametrize("stride,padding,dilation,groups,bias", CONVS)
@pytest.mark.parametrize("kernel", [(3, 2), (1, 1)])
def test_conv2d_against_numpy(cuda, stride, padding, dilation, groups, bias, kernel):
    x = _arr(7, 3, 4, 9, 8)
    w = _arr(8, 8, 4 // groups, *kernel)
    b = _arr(9, 8) if bias else None
    want = np_conv2d(x, w, b, stride, padding, dilation, groups)
    entries = ("im2col",) if (kernel, stride, padding) != ((1, 1), (1, 1), (0, 0)) else ()
    with native("_convolution", entries=entries):
        y = F.conv2d(ember.tensor(x).cuda(), ember.tensor(w).cuda(), None if b is None else ember.tensor(b).cuda(),
                     stride=stride, padding=padding, dilation=dilation, groups=groups)
    assert y.device.type == "cuda"
    np.testing.assert_allclose(y.cpu().numpy(), want, rtol=1e-12, atol=1e-12)


def test_conv1x1_is_a_plain_gemm(cuda):
    """stride 1, no padding, 1x1: no im2col, forward and input gradient; the weight gradient's
    transposed layout is a device copy, not im2col either."""
    xc, xg = _pair(_arr(10, 3, 6, 5, 4), ember.float64, True)
    wc, wg = _pair(_arr(11, 4, 3, 1, 1), ember.float64, True)
    before = _cuda_fake.counters() if _C._cuda_backend_name() == "fake" else None
    with native("_convolution", "_convolution_backward"):
        yg = F.conv2d(xg, wg, groups=2)
        yg.backward(ember.ones_like(yg))
    if before is not None:
        after = _cuda_fake.counters()
        assert after["im2col"] == before["im2col"] and after["col2im"] == before["col2im"]
    yc = F.conv2d(xc, wc, groups=2)
    yc.backward(ember.ones_like(yc))
    _close(yg, yc, ember.float64)
    _close(xg.grad, xc.grad, ember.float64)
    _close(wg.grad, wc.grad, ember.float64)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("spatial", [1, 2])
def test_conv_forward_backward_equal_cpu(cuda, dtype, spatial):
    shape = (2, 4, 7) if spatial == 1 else (2, 4, 7, 6)
    wshape = (6, 2, 3) if spatial == 1 else (6, 2, 3, 2)
    xc, xg = _pair(_arr(12, *shape), dtype, True)
    wc, wg = _pair(_arr(13, *wshape) * 0.5, dtype, True)
    bc, bg = _pair(_arr(14, 6), dtype, True)
    conv = F.conv1d if spatial == 1 else F.conv2d
    kw = dict(stride=2, padding=1, dilation=1 if spatial == 1 else (1, 2), groups=2)
    go = None
    with native(*CONV_OPS, entries=("im2col", "col2im")):
        yg = conv(xg, wg, bg, **kw)
        go = ember.tensor(_arr(15, *yg.shape)).to(dtype)
        yg.backward(go.cuda())
    yc = conv(xc, wc, bc, **kw)
    yc.backward(go)
    assert yg.dtype == dtype and xg.grad.dtype == dtype and wg.grad.device.type == "cuda"
    scale = 4 if dtype in (ember.float32, ember.float64) else 16
    _close(yg, yc, dtype, scale)
    _close(xg.grad, xc.grad, dtype, scale)
    _close(wg.grad, wc.grad, dtype, scale)
    _close(bg.grad, bc.grad, dtype, scale)


def test_conv_noncontiguous_inputs(cuda):
    xb, wb = _arr(16, 2, 9, 8, 3), _arr(17, 3, 4, 5, 2)
    xc = ember.tensor(xb).permute(0, 3, 1, 2)[:, :, ::2]   # (2, 3, 5, 8), strided
    wc = ember.tensor(wb).permute(1, 0, 3, 2)[:, :, ::2]   # (4, 3, 1, 5)
    xg = ember.tensor(xb).cuda().permute(0, 3, 1, 2)[:, :, ::2]
    wg = ember.tensor(wb).cuda().permute(1, 0, 3, 2)[:, :, ::2]
    assert not xg.is_contiguous() and not wg.is_contiguous()
    with native("_convolution"):
        yg = F.conv2d(xg, wg, padding=(0, 2))
    np.testing.assert_allclose(yg.cpu().numpy(), F.conv2d(xc, wc, padding=(0, 2)).numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("mask", [[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 0], [1, 1, 1]])
def test_convolution_backward_output_mask(cuda, mask):
    gy, x, w = _arr(18, 2, 4, 3, 6), _arr(19, 2, 2, 5, 6), _arr(20, 4, 1, 3, 3)
    args = ([1, 1], [0, 1], [1, 1], 2, mask)
    with native("_convolution_backward"):
        rg = _C._convolution_backward(*(ember.tensor(a).cuda() for a in (gy, x, w)), *args)
    rc = _C._convolution_backward(*(ember.tensor(a) for a in (gy, x, w)), *args)
    for want, g, c in zip(mask, rg, rc):
        assert g.device.type == "cuda"
        if want:
            np.testing.assert_allclose(g.cpu().numpy(), c.numpy(), rtol=1e-12, atol=1e-12)
        else:
            assert g.numel() == 0


def test_conv_gradcheck_float64_on_device(cuda):
    x = ember.tensor(_arr(21, 1, 2, 5, 4)).cuda().requires_grad_()
    w = ember.tensor(_arr(22, 4, 1, 2, 3)).cuda().requires_grad_()
    b = ember.tensor(_arr(23, 4)).cuda().requires_grad_()
    with native("_convolution", "_convolution_backward"):
        assert gradcheck(lambda x, w, b: F.conv2d(x, w, b, stride=(2, 1), padding=1, dilation=(1, 2), groups=2),
                         (x, w, b))
    x1 = ember.tensor(_arr(24, 2, 3, 6)).cuda().requires_grad_()
    w1 = ember.tensor(_arr(25, 2, 3, 2)).cuda().requires_grad_()
    with native("_convolution", "_convolution_backward"):
        assert gradcheck(lambda x, w: F.conv1d(x, w, padding=2, dilation=2), (x1, w1))
    c = ember.tensor(_arr(26, 1, 8, 6)).cuda().requires_grad_()
    with native("_im2col", "_col2im"):
        assert gradcheck(lambda c: F.unfold(F.fold(c, (4, 5), 2, stride=(1, 2)), 3, padding=1), (c,))


def test_conv_modules_on_cuda(cuda):
    ember.manual_seed(0)
    c1, c2 = ember.nn.Conv1d(3, 4, 3, padding=1), ember.nn.Conv2d(4, 6, (3, 2), stride=2, groups=2, bias=False)
    x = ember.tensor(_arr(27, 2, 3, 10)).float()
    y_cpu = c2(c1(x).unsqueeze(-1).expand(-1, -1, -1, 4))
    y_cpu.sum().backward()
    grads = [p.grad.clone() for p in (*c1.parameters(), *c2.parameters())]
    for m in (c1, c2):
        m.zero_grad()
        m.cuda()
    with native(*CONV_OPS):
        y = c2(c1(x.cuda()).unsqueeze(-1).expand(-1, -1, -1, 4))
        y.sum().backward()
    _close(y, y_cpu, ember.float32)
    for p, g in zip((*c1.parameters(), *c2.parameters()), grads):
        assert p.grad.device.type == "cuda"
        _close(p.grad, g, ember.float32)


def test_conv_empty_and_no_input_channels(cuda):
    with native("_convolution", "_convolution_backward"):
        x = ember.empty(0, 2, 5, 5, device="cuda", requires_grad=True)
        w = ember.ones(3, 2, 2, 2, device="cuda", requires_grad=True)
        y = F.conv2d(x, w, ember.ones(3, device="cuda"))
        y.sum().backward()
    assert tuple(y.shape) == (0, 3, 4, 4)
    np.testing.assert_array_equal(w.grad.cpu().numpy(), np.zeros((3, 2, 2, 2)))
    with native("_convolution"):
        y = F.conv2d(ember.ones(2, 0, 3, 3, device="cuda"), ember.ones(4, 0, 2, 2, device="cuda"),
                     ember.arange(4.0, device="cuda"))
    np.testing.assert_array_equal(y.cpu().numpy(), np.broadcast_to(np.arange(4.0).reshape(1, 4, 1, 1), (2, 4, 2, 2)))


def test_integer_conv_falls_back(cuda):
    """Integer convolutions have no GPU kernel: Note [CUDA fallback] computes them, right."""
    x = ember.arange(2 * 2 * 4 * 4).reshape(2, 2, 4, 4)
    w = ember.ones(3, 2, 2, 2, dtype=ember.int64)
    _C._cuda_fallback_counts(True)
    y = F.conv2d(x.cuda(), w.cuda())
    assert "_convolution" in _C._cuda_fallback_counts(True)
    assert y.device.type == "cuda" and y.dtype == ember.int64
    np.testing.assert_array_equal(y.cpu().numpy(), F.conv2d(x, w).numpy())


def test_conv_errors_as_cpu(cuda):
    x, w = ember.ones(1, 4, 5, 5), ember.ones(6, 2, 3, 3)
    conv = lambda *a, **k: F.conv2d(*a, **k)  # noqa: E731
    _raises_like_cpu(lambda x, w: conv(x, w, groups=3), x, w)
    _raises_like_cpu(lambda x, w: conv(x, w), x, w)  # channels
    _raises_like_cpu(lambda x, w: conv(x, w, groups=2, stride=0), x, w)
    _raises_like_cpu(lambda x, w: conv(x, w, groups=2, padding=-1), x, w)
    _raises_like_cpu(lambda x, w: conv(x, w, groups=2, dilation=3), x, w)  # kernel larger than the input
    _raises_like_cpu(lambda x, w, b: conv(x, w, b, groups=2), x, w, ember.ones(5))
    _raises_like_cpu(lambda x, w: conv(x, w, groups=2), x, w.double())
    _raises_like_cpu(lambda x, w: conv(x, w, groups=2), ember.ones(1, 4, 5, 5, dtype=ember.bool),
                     ember.ones(6, 2, 3, 3, dtype=ember.bool))
    _raises_like_cpu(lambda x, w: F.conv1d(x, w), ember.ones(1, 4, 5), w)


def test_conv_batch_in_chunks(cuda):
    """A column matrix over 256 MiB is built a chunk of images at a time (here 2 + 1 images,
    103 MB of float64 columns each); values and gradients equal the CPU's."""
    xc, xg = _pair(_arr(28, 3, 1, 1200, 1200), ember.float64, True)
    wc, wg = _pair(_arr(29, 2, 1, 3, 3), ember.float64, True)
    with native("_convolution", "_convolution_backward"):
        yg = F.conv2d(xg, wg)
        yg.backward(ember.ones_like(yg))
    yc = F.conv2d(xc, wc)
    yc.backward(ember.ones_like(yc))
    _close(yg, yc, ember.float64)
    _close(xg.grad, xc.grad, ember.float64)
    np.testing.assert_allclose(_np(wg.grad), _np(wc.grad), rtol=1e-9)


# ------------------------------------------------------------ upsampling

UP_OPS = ("_upsample_nearest1d", "_upsample_nearest2d", "_upsample_nearest_exact1d", "_upsample_nearest_exact2d",
          "_upsample_linear1d", "_upsample_bilinear2d", "_upsample_bicubic2d")
UP_ALL = UP_OPS + tuple(op + "_backward" for op in UP_OPS)

UPSAMPLES = [  # mode, spatial, kwargs
    ("nearest", 1, dict(size=11)),
    ("nearest", 1, dict(scale_factor=1.7)),
    ("nearest", 2, dict(size=(9, 4))),
    ("nearest", 2, dict(scale_factor=2)),
    ("nearest", 2, dict(scale_factor=(0.6, 2.5))),
    ("nearest-exact", 1, dict(scale_factor=2.3)),
    ("nearest-exact", 2, dict(size=(3, 11))),
    ("linear", 1, dict(size=13, align_corners=False)),
    ("linear", 1, dict(scale_factor=0.7, align_corners=True)),
    ("bilinear", 2, dict(size=(8, 9), align_corners=False)),
    ("bilinear", 2, dict(size=(8, 9), align_corners=True)),
    ("bilinear", 2, dict(scale_factor=(1.5, 0.5))),
    ("bilinear", 2, dict(scale_factor=2, recompute_scale_factor=True)),
    ("bicubic", 2, dict(size=(9, 7), align_corners=False)),
    ("bicubic", 2, dict(size=(3, 13), align_corners=True)),
    ("bicubic", 2, dict(scale_factor=1.3)),
]


def _up_input(spatial, seed=30):
    return _arr(seed, 2, 3, 5) if spatial == 1 else _arr(seed, 2, 3, 5, 6)


@pytest.mark.parametrize("mode,spatial,kw", UPSAMPLES)
def test_interpolate_forward_backward_equal_cpu(cuda, mode, spatial, kw):
    xc, xg = _pair(_up_input(spatial), ember.float64, True)
    entries = ("interp_nearest", "interp") if mode.startswith("nearest") else ("interp",)
    with native(*UP_ALL, entries=entries):
        yg = F.interpolate(xg, mode=mode, **kw)
        go = ember.tensor(_arr(31, *yg.shape))
        yg.backward(go.cuda())
    yc = F.interpolate(xc, mode=mode, **kw)
    yc.backward(go)
    assert yg.device.type == "cuda" and tuple(yg.shape) == tuple(yc.shape)
    np.testing.assert_allclose(_np(yg), _np(yc), rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(_np(xg.grad), _np(xc.grad), rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("mode", ["nearest", "bilinear", "bicubic"])
def test_interpolate_dtypes_equal_cpu(cuda, dtype, mode):
    xc, xg = _pair(_up_input(2, 32), dtype, True)
    kw = {} if mode == "nearest" else dict(align_corners=False)
    with native(*UP_ALL):
        yg = F.interpolate(xg, size=(7, 10), mode=mode, **kw)
        yg.backward(ember.ones_like(yg))
    yc = F.interpolate(xc, size=(7, 10), mode=mode, **kw)
    yc.backward(ember.ones_like(yc))
    assert yg.dtype == dtype and xg.grad.dtype == dtype
    _close(yg, yc, dtype)
    _close(xg.grad, xc.grad, dtype)


def test_interpolate_uint8_noncontiguous_and_empty_batch(cuda):
    a = (np.arange(2 * 3 * 4 * 5) % 251).astype(np.uint8).reshape(2, 3, 4, 5)
    with native(*UP_OPS):
        yu = F.interpolate(ember.tensor(a).cuda(), scale_factor=2)
        xg = ember.tensor(_arr(33, 2, 6, 5, 3)).cuda().permute(0, 3, 2, 1)[:, :, ::2]  # (2, 3, 3, 6)
        yn = F.interpolate(xg, size=(5, 4), mode="bilinear", align_corners=True)
        ye = F.interpolate(ember.empty(0, 3, 4, 4, device="cuda"), size=(8, 8), mode="bicubic")
    assert yu.dtype == ember.uint8
    np.testing.assert_array_equal(yu.cpu().numpy(), F.interpolate(ember.tensor(a), scale_factor=2).numpy())
    xc = ember.tensor(_arr(33, 2, 6, 5, 3)).permute(0, 3, 2, 1)[:, :, ::2]
    np.testing.assert_allclose(yn.cpu().numpy(), F.interpolate(xc, size=(5, 4), mode="bilinear",
                                                               align_corners=True).numpy(), rtol=1e-13)
    assert tuple(ye.shape) == (0, 3, 8, 8)


def test_interpolate_gradcheck_on_device(cuda):
    for mode, kw in [("bilinear", dict(align_corners=False)), ("bicubic", dict(align_corners=True)),
                     ("nearest", {})]:
        x = ember.tensor(_arr(34, 1, 2, 3, 4)).cuda().requires_grad_()
        with native(*UP_ALL):
            assert gradcheck(lambda x: F.interpolate(x, size=(5, 3), mode=mode, **kw), (x,))
    x = ember.tensor(_arr(35, 1, 2, 4)).cuda().requires_grad_()
    with native(*UP_ALL):
        assert gradcheck(lambda x: F.interpolate(x, scale_factor=1.6, mode="linear"), (x,))


def test_upsample_modules_on_cuda(cuda):
    x = ember.tensor(_up_input(2, 36)).float()
    for m in (ember.nn.Upsample(scale_factor=2, mode="bilinear"), ember.nn.Upsample(size=(4, 9), mode="nearest")):
        with native(*UP_OPS):
            y = m(x.cuda())
        _close(y, m(x), ember.float32)


def test_upsample_errors_as_cpu(cuda):
    x = ember.ones(1, 2, 3, 3)
    _raises_like_cpu(lambda t: _C._upsample_bilinear2d(t, [0, 4], False), x)
    _raises_like_cpu(lambda t: _C._upsample_bilinear2d(t, [4], False), x)
    _raises_like_cpu(lambda t: _C._upsample_bilinear2d(t, [4, 4], False), ember.ones(1, 2, 3, 3, dtype=ember.int64))
    _raises_like_cpu(lambda t: _C._upsample_nearest2d_backward(t, [4, 4], [1, 2, 3, 3]), ember.ones(1, 2, 4, 5))
    _raises_like_cpu(lambda t: _C._upsample_nearest1d(t, [4]), ember.ones(1, 0, 3))
