"""float16 / bfloat16 without float32 copies of whole tensors: the casts'
contiguous runs (F16C where the CPU has it, EMBER_F16C=0 forcing the
portable loops), and softmax / log_softmax / layer_norm / rms_norm computing a
block at a time in float32. References: NumPy (float16 rounding, the
bfloat16 rounding written out on the bits, float64 formulas)."""
import os
import subprocess
import sys

import numpy as np
import pytest

import ember

F = ember.nn.functional
TOL = {"bfloat16": 1e-2, "float16": 2e-3}


def bf16_bits(x):
    """float32 -> bfloat16 bits, round to nearest even, NaN quieted."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    r[nan] = ((u[nan] >> 16) | 0x40).astype(np.uint16)
    return r


def as_np(t):
    """A half tensor's values as float64."""
    if t.dtype == ember.bfloat16:
        return (t.view(ember.int16).numpy().view(np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return t.numpy().astype(np.float64)


def values(n, seed=0):
    x = np.random.default_rng(seed).standard_normal(n).astype(np.float32) * 4
    x[:10] = [np.nan, np.inf, -np.inf, 3.4e38, -0.0, 1e-40, 65504.0, 65520.0, 6e-8, -2.5e-5]
    return x


def check_casts():
    """The casts of every length around the vector widths, both directions."""
    for n in (1, 7, 8, 9, 31, 64, 1000, 4099):
        x = values(n + 10, n)
        t = ember.from_numpy(x)
        bits = t.to(ember.bfloat16).view(ember.int16).numpy().view(np.uint16)
        np.testing.assert_array_equal(bits, bf16_bits(x))
        with np.errstate(over="ignore"):
            want16 = x.astype(np.float16)
        h = t.to(ember.float16)
        np.testing.assert_array_equal(h.numpy().view(np.uint16)[~np.isnan(want16)],
                                      want16.view(np.uint16)[~np.isnan(want16)])
        assert np.isnan(h.numpy()[np.isnan(want16)]).all()
        np.testing.assert_array_equal(h.float().numpy(), want16.astype(np.float32))
        wide = t.to(ember.bfloat16).float().numpy()
        np.testing.assert_array_equal(wide.view(np.uint32), bf16_bits(x).astype(np.uint32) << 16)
        # strided sources and the iterator's buffered path
        np.testing.assert_array_equal(t[::2].to(ember.float16).numpy(), x[::2].astype(np.float16))
        a, b = ember.from_numpy(want16), ember.from_numpy(want16[::-1].copy())
        with np.errstate(over="ignore", invalid="ignore"):
            np.testing.assert_array_equal((a + b).numpy(), (want16.astype(np.float32) + want16[::-1]).astype(np.float16))


def test_casts_default_path():
    check_casts()


def test_casts_portable_path():
    """The same checks with the F16C path switched off (every machine tests both)."""
    env = dict(os.environ, EMBER_F16C="0")
    code = "import test_half_kernels as t; t.check_casts(); print('ok')"
    here = os.path.dirname(__file__)
    env["PYTHONPATH"] = os.pathsep.join([here] + [p for p in [env.get("PYTHONPATH")] if p])
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-2000:]


def np_softmax(x, dim, lg):
    m = np.max(x, axis=dim, keepdims=True)
    e = np.exp(x - m)
    s = e.sum(axis=dim, keepdims=True)
    return (x - m - np.log(s)) if lg else e / s


@pytest.mark.parametrize("dt", ["bfloat16", "float16"])
@pytest.mark.parametrize("shape,dim", [((6, 1000), 1), ((3, 5, 7), 1), ((4, 3), 0), ((2, 50257), 1),
                                       ((8, 2, 16, 16), -1), ((0, 3), 1), ((), 0)])
@pytest.mark.parametrize("lg", [False, True])
def test_softmax_half(dt, shape, dim, lg):
    x = ember.from_numpy(np.asarray(np.random.default_rng(1).standard_normal(shape) * 3, np.float32)).to(getattr(ember, dt))
    xv = as_np(x)
    y = (F.log_softmax if lg else F.softmax)(x, dim)
    assert y.dtype == x.dtype and y.shape == x.shape
    want = np_softmax(xv, dim if xv.ndim else None, lg) if xv.size else xv
    np.testing.assert_allclose(as_np(y), want, rtol=TOL[dt], atol=TOL[dt] * (4 if lg else 0.05))
    # the gradient: the fused backward in the half dtype
    xr = x.detach().clone().requires_grad_()
    g = ember.from_numpy(np.asarray(np.random.default_rng(2).standard_normal(shape), np.float32)).to(x.dtype)
    (F.log_softmax if lg else F.softmax)(xr, dim).backward(g)
    yv, gv = as_np(y), as_np(g)
    d = dim if xv.ndim else None
    want_g = gv - np.exp(yv) * gv.sum(axis=d, keepdims=True) if lg else yv * (gv - (gv * yv).sum(axis=d, keepdims=True))
    assert xr.grad.dtype == x.dtype
    np.testing.assert_allclose(as_np(xr.grad), want_g, rtol=4 * TOL[dt], atol=4 * TOL[dt])


@pytest.mark.parametrize("dt", ["bfloat16", "float16"])
@pytest.mark.parametrize("shape,ns", [((64, 256), (256,)), ((3, 5, 7), (5, 7)), ((2, 0), (0,)), ((0, 3), (3,))])
@pytest.mark.parametrize("affine", [0, 1, 2])
def test_layer_norm_half(dt, shape, ns, affine):
    rng = np.random.default_rng(3)
    d = getattr(ember, dt)
    x = ember.from_numpy(rng.standard_normal(shape).astype(np.float32) * 2 + 1).to(d)
    w = ember.from_numpy(rng.standard_normal(ns).astype(np.float32)).to(d) if affine else None
    b = ember.from_numpy(rng.standard_normal(ns).astype(np.float32)).to(d) if affine == 2 else None
    y = F.layer_norm(x, ns, w, b, eps=1e-5)
    assert y.dtype == d
    xv = as_np(x)
    axes = tuple(range(xv.ndim - len(ns), xv.ndim))
    if xv.size:
        mu = xv.mean(axis=axes, keepdims=True)
        want = (xv - mu) / np.sqrt(((xv - mu) ** 2).mean(axis=axes, keepdims=True) + 1e-5)
        if w is not None:
            want = want * as_np(w)
        if b is not None:
            want = want + as_np(b)
        np.testing.assert_allclose(as_np(y), want, rtol=2 * TOL[dt], atol=2 * TOL[dt])
        r = F.rms_norm(x, ns, w, eps=1e-5)
        want_r = xv / np.sqrt((xv ** 2).mean(axis=axes, keepdims=True) + 1e-5) * (as_np(w) if w is not None else 1)
        assert r.dtype == d
        np.testing.assert_allclose(as_np(r), want_r, rtol=2 * TOL[dt], atol=2 * TOL[dt])
    else:
        assert y.shape == x.shape


def test_complex_input_is_refused_as_torch():
    z = ember.tensor([[1 + 1j, 2.0]])
    for call in (lambda: F.softmax(z, 1), lambda: F.log_softmax(z, 1), lambda: F.layer_norm(z, (2,))):
        with pytest.raises(NotImplementedError, match="ComplexFloat"):
            call()
