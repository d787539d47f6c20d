"""Reductions on 'cuda' through the native path (Note [CUDA reduce]): every
reduction op of the table (tests/op_db.py) with its dim / keepdim / dtype
variants, in every memory layout, on GPU tensors, against the table's NumPy
reference. On a machine without a GPU this runs on Note [fake CUDA] (host
memory behind the CUDA interface, the CPU kernels behind the backend's
`reduce`), where the fake also counts launches: each call with outputs must
have launched at least one reduction instead of taking Note [CUDA fallback].
On a real GPU the same comparisons check ember._cuda's kernels."""

import numpy as np
import pytest

import ember
from ember import _C, _cuda_fake
from op_db import DTYPES, LAYOUTS, OPS, TS
from test_ops import JUNK, about, call, check, expected_of, lib_value, np_value, out_ok, prepare, raw

# reductions of the reduce iterator; scans and selections (cumsum, cummax,
# median, mode) run through Note [CUDA sort] instead: tests/test_cuda_sort.py
NATIVE = [op for op in OPS if op.kind == "reduce" and op.name not in
          ("cumsum", "cumprod", "cummax", "cummin", "median", "nanmedian", "mode")]
NATIVE_BY_NAME = {op.name: op for op in NATIVE}




def launches(mode):
    return _cuda_fake.counters()["reduce"] if mode == "fake" else 0


def gpu_realize(ts, layout):
    """ts as a GPU tensor in `layout`: the contiguous base moves to the device,
    the view is taken there (as test_ops.realize does on the CPU)."""
    v, dt = ts.values, ts.dtype
    if not ts.lay or v.ndim == 0:
        return raw(ember, v, dt).cuda()
    if layout == "T" and v.ndim >= 2:
        return raw(ember, np.swapaxes(v, -1, -2), dt).cuda().transpose(-1, -2)
    if layout == "slice":
        big = np.full(v.shape[:-1] + (2 * v.shape[-1],), JUNK[v.dtype.kind], v.dtype)
        big[..., ::2] = v
        return raw(ember, big, dt).cuda()[(slice(None),) * (v.ndim - 1) + (slice(None, None, 2),)]
    if layout == "expand" and v.shape[0] > 1:
        return raw(ember, v[:1], dt).cuda().expand(*v.shape)
    return raw(ember, v, dt).cuda()


def gpu_args(sample, layout):
    args = [gpu_realize(a, layout) if isinstance(a, TS) else lib_value(ember, a, layout) for a in sample.args]
    kwargs = {k: lib_value(ember, v, layout) for k, v in sample.kwargs.items()}
    return args, kwargs, [np_value(a) for a in sample.args]


def to_cpu(r):
    """A result (tensor or tuple of tensors) on the host, after checking it is on the GPU."""
    if isinstance(r, (tuple, list)):
        return tuple(to_cpu(x) for x in r)
    assert r.device.type == "cuda", f"result on {r.device}"
    return r.cpu()


def n_out(expect):
    return sum(np.size(e) for e in expect) if isinstance(expect, tuple) else np.size(expect)


def params():
    return [(op.name, d) for op in NATIVE for d in DTYPES if d in op.dtypes]


@pytest.mark.parametrize("name,dtype", params())
def test_reduction_on_cuda(cuda, name, dtype):
    op = NATIVE_BY_NAME[name]
    for layout in LAYOUTS:
        for s in op.get_samples(dtype, layout):
            s = prepare(s, layout)
            variant = "F" if "F" in op.variants else "M"
            with about(s, layout, variant + " cuda"):
                args, kwargs, values = gpu_args(s, layout)
                expect, dt = expected_of(op, s, values)
                before = launches(cuda)
                res = call(ember, op, variant, args, kwargs)
                check(ember, to_cpu(res), expect, dt, op.check_values, op.tol, op.scaled_atol)
                # nansum into an integer dtype zeroes NaNs on the host first: the fallback
                host_only = name == "nansum" and "dtype" in s.kwargs and \
                    str(s.kwargs["dtype"]) not in ("float16", "bfloat16", "float32", "float64") and \
                    dtype in ("float16", "bfloat16", "float32", "float64")
                if cuda == "fake" and n_out(expect) and not host_only:
                    assert launches(cuda) > before, "the reduction took the CPU fallback"


@pytest.mark.parametrize("name", [op.name for op in NATIVE if "O" in op.variants])
def test_reduction_out_on_cuda(cuda, name):
    """out= on the device: resized when empty, written through a transposed out."""
    op = NATIVE_BY_NAME[name]
    dtype = "float32" if "float32" in op.dtypes else op.dtypes[0]
    samples = [s for s in op.get_samples(dtype, "contig") if out_ok(op, s) and s.tile == 1]
    assert samples
    for i, s in enumerate(samples):
        with about(s, "contig", "out= cuda"):
            args, kwargs, values = gpu_args(s, "contig")
            expect, dt = expected_of(op, s, values)
            shape, edt = np.shape(expect), getattr(ember, dt)
            if len(shape) == 2:
                out = ember.empty(shape[::-1], dtype=edt, device="cuda").t()
            else:
                out = ember.empty(0 if i == 0 else shape, dtype=edt, device="cuda")
            res = call(ember, op, "O", args, kwargs, out=out)
            assert res is out
            check(ember, to_cpu(out), expect, dt, tol=op.tol)


def test_out_on_another_device_raises(cuda):
    x = ember.arange(6.0).reshape(2, 3).cuda()
    with pytest.raises(RuntimeError, match="same device"):
        ember.sum(x, 1, out=ember.empty(2, dtype=ember.float32))
    with pytest.raises(IndexError):
        x.sum(5)
    with pytest.raises(IndexError, match="non-zero size"):
        ember.empty(0, 3, device="cuda").amax(0)


def test_long_and_column_reductions(cuda):
    """Shapes the GPU kernels split differently: one long row (a grid-wide
    reduction), many short rows, and a reduced outer dim (column reduction)."""
    rng = np.random.default_rng(7)
    for shape, dim in (((1, 300001), 1), ((4097, 3), 1), ((513, 257), 0), ((5, 1000, 7), 1),
                       ((64, 33, 2), (0, 2))):
        a = rng.standard_normal(shape).astype(np.float32)
        x = ember.tensor(a).cuda()
        np.testing.assert_allclose(x.sum(dim).cpu().numpy(), a.astype(np.float64).sum(dim), rtol=1e-5, atol=1e-4)
        np.testing.assert_allclose(x.std(dim).cpu().numpy(), a.astype(np.float64).std(dim, ddof=1), rtol=1e-5)
        np.testing.assert_allclose(x.amax(dim).cpu().numpy(), a.max(dim))
        if isinstance(dim, int):
            np.testing.assert_array_equal(x.argmin(dim).cpu().numpy(), a.argmin(dim))
        np.testing.assert_allclose(x.norm(dim=dim).cpu().numpy(), np.sqrt((a.astype(np.float64) ** 2).sum(dim)),
                                   rtol=1e-5)
    # ties: the first index; NaN wins and propagates
    t = np.array([[1, 3, 3, 0], [np.nan, 2, np.nan, 5]], np.float32)
    xt = ember.tensor(t).cuda()
    np.testing.assert_array_equal(xt.argmax(1).cpu().numpy(), [1, 0])
    v, i = xt.max(1)
    assert v.cpu().numpy()[0] == 3 and np.isnan(v.cpu().numpy()[1])
    np.testing.assert_array_equal(i.cpu().numpy(), [1, 0])


def test_gradients_through_gpu_reductions(cuda):
    """Backward of sum / mean / amax on the device (sum_to_size undoes broadcasting)."""
    a = np.arange(12, dtype=np.float64).reshape(3, 4)
    x = ember.tensor(a).cuda().requires_grad_()
    b = ember.ones(4, dtype=ember.float64, device="cuda").requires_grad_()
    ((x * b).sum(0).mean() + x.amax()).backward()
    g = np.full((3, 4), 0.25)
    g[2, 3] += 1
    np.testing.assert_allclose(x.grad.cpu().numpy(), g)
    np.testing.assert_allclose(b.grad.cpu().numpy(), a.sum(0) / 4)
    assert x.grad.device.type == "cuda"
