"""F.conv_transpose1d/2d/3d and nn.ConvTranspose1d/2d/3d: values against a
direct-loop NumPy scatter (every stride / padding / output_padding /
dilation / groups combination below), gradients by finite differences
(gradcheck, float64) and against torch with the same weights; torch's
errors, module init, repr and output_size; a 'cuda' tensor through the
device path gives the CPU's result."""
import itertools

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


def np_conv_transpose(x, w, b, stride, padding, output_padding, groups, dilation):
    """y[n, g*Og + o, i*s - p + k*d] += x[n, g*Cg + c, i] * w[g*Cg + c, o, k], by loops over kernel taps."""
    n = x.ndim - 2
    s, p, op, d = ([v] * n if isinstance(v, int) else list(v) for v in (stride, padding, output_padding, dilation))
    N, Cin = x.shape[:2]
    Og, ks = w.shape[1], w.shape[2:]
    Cg = Cin // groups
    full = [(i - 1) * s[a] + d[a] * (ks[a] - 1) + 1 + op[a] for a, i in enumerate(x.shape[2:])]
    y = np.zeros((N, Og * groups, *full))
    for g in range(groups):
        xg, wg = x[:, g * Cg:(g + 1) * Cg], w[g * Cg:(g + 1) * Cg]
        for tap in itertools.product(*[range(k) for k in ks]):
            contrib = np.einsum("nc...,co->no...", xg, wg[(slice(None), slice(None)) + tap])
            sl = tuple(slice(t * d[a], t * d[a] + s[a] * (x.shape[2 + a] - 1) + 1, s[a]) for a, t in enumerate(tap))
            y[(slice(None), slice(g * Og, (g + 1) * Og)) + sl] += contrib
    crop = tuple(slice(p[a], full[a] - p[a]) for a in range(n))
    y = y[(slice(None), slice(None)) + crop]
    return y + (0 if b is None else b.reshape((1, -1) + (1,) * n))


# (stride, padding, output_padding, dilation, groups); output_padding >= stride is legal below the dilation
COMBOS = [(1, 0, 0, 1, 1), (2, 1, 1, 1, 1), (3, 2, 2, 1, 2), (2, 0, 1, 2, 2), (1, 1, 2, 3, 1), (2, 1, 0, 2, 1)]


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("stride,padding,output_padding,dilation,groups", COMBOS)
def test_against_numpy(n, stride, padding, output_padding, dilation, groups):
    x = RNG.standard_normal((2, 4) + (5, 4, 3)[:n])
    w = RNG.standard_normal((4, 3) + (3, 2, 2)[:n])
    b = RNG.standard_normal(3 * groups)
    fn = getattr(F, f"conv_transpose{n}d")
    out = fn(T(x), T(w), T(b), stride, padding, output_padding, groups, dilation)
    ref = np_conv_transpose(x, w, b, stride, padding, output_padding, groups, dilation)
    assert tuple(out.shape) == ref.shape
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-10, atol=1e-10)
    # float32 and unbatched input
    out32 = fn(T(x[0]).float(), T(w).float(), None, stride, padding, output_padding, groups, dilation)
    np.testing.assert_allclose(out32.numpy(), ref[0] - b.reshape((-1,) + (1,) * n), rtol=1e-4, atol=1e-4)


def test_per_axis_arguments():
    x, w = RNG.standard_normal((1, 2, 4, 5, 3)), RNG.standard_normal((2, 2, 2, 3, 2))
    args = ((1, 2, 3), (0, 1, 1), (0, 1, 2), 1, (2, 1, 1))
    np.testing.assert_allclose(F.conv_transpose3d(T(x), T(w), None, *args).numpy(),
                               np_conv_transpose(x, w, None, *args), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("n", [1, 2, 3])
def test_gradcheck(n):
    x = T(RNG.standard_normal((2, 2) + (3, 3, 2)[:n]), True)
    w = T(RNG.standard_normal((2, 2) + (2, 2, 2)[:n]), True)
    b = T(RNG.standard_normal(4), True)
    fn = getattr(F, f"conv_transpose{n}d")
    assert gradcheck(lambda a, c, e: fn(a, c, e, 2, 1, 1, 2, 1), (x, w, b))
    assert gradcheck(lambda a, c: fn(a, c, None, 1, 0, 1, 1, 2), (x, w[:1].repeat(*([2] + [1] * (n + 1)))))


def test_double_backward_and_grad_fn():
    x = T(RNG.standard_normal((1, 2, 3, 3)), True)
    w = T(RNG.standard_normal((2, 3, 2, 2)), True)
    b = T(RNG.standard_normal(3), True)
    from ember.autograd import gradgradcheck
    assert gradgradcheck(lambda a, c, e: F.conv_transpose2d(a, c, e, stride=2, padding=1, output_padding=1),
                         (x, w, b))
    # output_padding >= stride (below the dilation): the formula pads / cuts to the convolution's windows
    assert gradgradcheck(lambda a, c: F.conv_transpose2d(a, c, None, 1, 1, (2, 1), 1, 3), (x, w))
    assert type(F.conv_transpose2d(x, w, b).grad_fn).__name__ == "ConvolutionBackward0"  # torch's node name


def test_direct_op_calls_are_checked():
    """_C._convolution_transpose checks what nn.functional checks first: errors, never a crash."""
    x, w = ember.ones(1, 3, 5, 5), ember.ones(3, 2, 3, 3)
    op = ember._C._convolution_transpose
    for args, msg in [((x, w, None, [0], [0], [0], [1], 1), "non-positive stride"),
                      ((x, w, None, [2], [0], [2], [1], 1), "output padding must be smaller"),
                      ((x, w, None, [1], [9], [0], [1], 1), "Output size is too small"),
                      ((x, w, None, [1], [0], [0], [1], 0), "non-positive groups"),
                      ((x, w, None, [1], [0], [0], [1], 2), "divisible by 2"),
                      ((x, ember.ones(0, 2, 3, 3), None, [1], [0], [0], [1], 1), "at least 1"),
                      ((x[0], w, None, [1], [0], [0], [1], 1), "4-dimensional weight"),
                      ((x, w, ember.ones(3), [1], [0], [0], [1], 1), "bias to be 1-dimensional with 2"),
                      ((x, w.double(), None, [1], [0], [0], [1], 1), "expected scalar type"),
                      ((x, w, None, [1, 1, 1], [0], [0], [1], 1), "list of 2 values")]:
        with pytest.raises(RuntimeError, match=msg):
            op(*args)


def test_errors():
    x, w = T(np.ones((1, 3, 5, 5))), T(np.ones((3, 2, 3, 3)))
    with pytest.raises(RuntimeError, match=r"expected input\[1, 3, 5, 5\] to have 4 channels, but got 3"):
        F.conv_transpose2d(x, T(np.ones((4, 2, 3, 3))))
    with pytest.raises(RuntimeError, match="output padding must be smaller than either stride or dilation"):
        F.conv_transpose2d(x, w, stride=2, output_padding=2)
    with pytest.raises(RuntimeError, match="output_padding_height: 0 output_padding_width: 2"):
        F.conv_transpose1d(x[0], w[..., 0], stride=2, output_padding=2)
    with pytest.raises(RuntimeError, match="expected bias to be 1-dimensional with 2 elements"):
        F.conv_transpose2d(x, w, T(np.ones(3)))
    with pytest.raises(RuntimeError, match="Output size is too small"):
        F.conv_transpose2d(x, w, padding=5)
    with pytest.raises(RuntimeError, match="Expected 3D \\(unbatched\\) or 4D \\(batched\\) input"):
        F.conv_transpose2d(x[0, 0], w)
    with pytest.raises(RuntimeError, match="non-positive stride"):
        F.conv_transpose2d(x, w, stride=0)
    with pytest.raises(RuntimeError, match="negative padding"):
        F.conv_transpose2d(x, w, padding=-1)
    with pytest.raises(RuntimeError, match="negative output_padding"):
        F.conv_transpose2d(x, w, output_padding=-1)
    with pytest.raises(RuntimeError, match="divisible by 2 at dimension 0"):
        F.conv_transpose2d(x, w, groups=2)
    with pytest.raises(RuntimeError, match="list of 2 values"):
        F.conv_transpose2d(x, w, stride=[1, 2, 3])
    with pytest.raises(RuntimeError, match="expected scalar type Double but found Float"):
        F.conv_transpose2d(x, w.float())
    with pytest.raises(TypeError, match="padding"):
        F.conv_transpose2d(x, w, padding="same")
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        F.conv_transpose2d(x.long(), w.long())
    with pytest.raises(RuntimeError, match="Only zero batch or zero channel inputs .* \\[1, 2, 1, 0\\]"):
        F.conv_transpose1d(ember.ones(1, 2, 0), ember.ones(2, 3, 3))
    assert tuple(F.conv_transpose2d(ember.ones(0, 3, 5, 5), w.float()).shape) == (0, 2, 7, 7)
    with pytest.raises(ValueError, match='Only "zeros" padding mode'):
        ember.nn.ConvTranspose2d(3, 4, 3, padding_mode="reflect")


@needs_torch
def test_errors_match_torch():
    cases = [((1, 3, 5, 5), (4, 2, 3, 3), {}), ((1, 3, 5, 5), (3, 2, 3, 3), {"stride": 2, "output_padding": 2}),
             ((1, 3, 5, 5), (3, 2, 3, 3), {"padding": 5}), ((1, 3, 5, 5, 5), (3, 2, 3, 3, 3), {"groups": 0}),
             ((1, 3, 5, 5, 5), (3, 2, 3, 3, 3), {"output_padding": [1, 1]})]
    for xs, ws, kw in cases:
        fn = f"conv_transpose{len(xs) - 2}d"
        with pytest.raises(RuntimeError) as theirs:
            getattr(_torch.nn.functional, fn)(_torch.ones(xs), _torch.ones(ws), **kw)
        with pytest.raises(RuntimeError) as ours:
            getattr(F, fn)(ember.ones(xs), ember.ones(ws), **kw)
        assert str(ours.value) == str(theirs.value)


@needs_torch
@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("stride,padding,output_padding,dilation,groups", COMBOS)
def test_matches_torch(n, dtype, stride, padding, output_padding, dilation, groups):
    x = RNG.standard_normal((2, 4) + (5, 4, 3)[:n])
    w = RNG.standard_normal((4, 3) + (3, 2, 2)[:n])
    b = RNG.standard_normal(3 * groups)
    go = None
    res = {}
    for lib in (ember, _torch):
        dt = getattr(lib, dtype)
        xs, ws, bs = (lib.tensor(a, dtype=dt, requires_grad=True) for a in (x, w, b))
        y = getattr(lib.nn.functional, f"conv_transpose{n}d")(xs, ws, bs, stride, padding, output_padding, groups,
                                                             dilation)
        if go is None:
            go = RNG.standard_normal(tuple(y.shape))
        y.backward(lib.tensor(go, dtype=dt))
        res[lib.__name__] = [t.detach().numpy() for t in (y, xs.grad, ws.grad, bs.grad)]
    tol = 1e-4 if dtype == "float32" else 1e-10
    for a, c in zip(res["ember"], res["torch"]):
        np.testing.assert_allclose(a, c, rtol=tol, atol=tol)


def test_module_shapes_init_and_output_size():
    ember.manual_seed(0)
    m = ember.nn.ConvTranspose2d(3, 4, 3, stride=2, output_padding=1, groups=1)
    assert tuple(m.weight.shape) == (3, 4, 3, 3) and m.transposed and m.output_padding == (1, 1)
    bound = 1 / np.sqrt(4 * 9)  # fan_in of the weight as torch computes it: size(1) * receptive field
    assert np.abs(m.weight.detach().numpy()).max() <= bound and np.abs(m.bias.detach().numpy()).max() <= bound
    assert repr(m) == "ConvTranspose2d(3, 4, kernel_size=(3, 3), stride=(2, 2), output_padding=(1, 1))"
    m3 = ember.nn.ConvTranspose3d(4, 8, (1, 2, 3), stride=(1, 2, 3), padding=1, dilation=2, groups=2, bias=False)
    assert repr(m3) == ("ConvTranspose3d(4, 8, kernel_size=(1, 2, 3), stride=(1, 2, 3), padding=(1, 1, 1), "
                        "dilation=(2, 2, 2), groups=2, bias=False)")
    assert tuple(m3.weight.shape) == (4, 4, 1, 2, 3)
    x = ember.randn(1, 3, 5, 5)
    assert tuple(m(x).shape) == (1, 4, 12, 12)
    assert tuple(m(x, output_size=[11, 11]).shape) == (1, 4, 11, 11)
    assert tuple(m(x, output_size=[1, 4, 12, 11]).shape) == (1, 4, 12, 11)
    with pytest.raises(ValueError, match="valid sizes range from \\[11, 11\\] to \\[12, 12\\]"):
        m(x, output_size=[13, 13])
    with pytest.raises(ValueError, match="output_size must have 2 or 4 elements"):
        m(x, output_size=[9])
    m1 = ember.nn.ConvTranspose1d(2, 2, 3)
    xs = RNG.standard_normal((2, 2, 6))
    np.testing.assert_allclose(m1(T(xs).float()).detach().numpy(),
                               np_conv_transpose(xs, m1.weight.detach().double().numpy(),
                                                 m1.bias.detach().double().numpy(), 1, 0, 0, 1, 1), rtol=1e-5,
                               atol=1e-5)


@needs_torch
def test_modules_match_torch():
    for n in (1, 2, 3):
        args = dict(in_channels=4, out_channels=6, kernel_size=3, stride=2, padding=1, output_padding=1, groups=2)
        tm = getattr(_torch.nn, f"ConvTranspose{n}d")(**args).double()
        em = getattr(ember.nn, f"ConvTranspose{n}d")(**args).double()
        em.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
        assert repr(em) == repr(tm)
        x = RNG.standard_normal((2, 4) + (4, 3, 5)[:n])
        size = [2 * s for s in x.shape[2:]]
        a = tm(_torch.tensor(x), output_size=size).detach().numpy()
        np.testing.assert_allclose(em(T(x), output_size=size).detach().numpy(), a, rtol=1e-10, atol=1e-10)


def test_cuda_matches_cpu(cuda):
    x = RNG.standard_normal((2, 4, 5, 4))
    w = RNG.standard_normal((4, 3, 3, 2))
    for n, xs, ws, pad in ((2, x, w, 1), (3, x[..., None], w[..., None], (1, 1, 0))):
        fn = getattr(F, f"conv_transpose{n}d")  # Note [CUDA fallback]: the CPU kernel on host copies
        xc, wc = T(xs, True), T(ws, True)
        xg, wg = T(xs).cuda().requires_grad_(), T(ws).cuda().requires_grad_()
        yc, yg = fn(xc, wc, None, 2, pad, 1, 2), fn(xg, wg, None, 2, pad, 1, 2)
        assert yg.device.type == "cuda"
        np.testing.assert_allclose(yg.detach().cpu().numpy(), yc.detach().numpy(), rtol=1e-10, atol=1e-10)
        yc.sum().backward()
        yg.sum().backward()
        np.testing.assert_allclose(xg.grad.cpu().numpy(), xc.grad.numpy(), rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(wg.grad.cpu().numpy(), wc.grad.numpy(), rtol=1e-10, atol=1e-10)


def test_top_level_functions():
    """torch.conv1d/2d/3d and torch.conv_transpose1d/2d/3d are nn.functional's."""
    for name in ("conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"):
        assert getattr(ember, name) is getattr(F, name)
    x, w = RNG.standard_normal((1, 2, 3)), RNG.standard_normal((2, 1, 2))
    np.testing.assert_allclose(ember.conv_transpose1d(T(x), T(w), stride=2).numpy(),
                               np_conv_transpose(x, w, None, 2, 0, 0, 1, 1), rtol=1e-12)
