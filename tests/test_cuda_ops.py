"""Every op of the op table (tests/op_db.py) on 'cuda' against the same call
on the CPU (the CPU is the reference here; tests/test_ops.py
checks the CPU against NumPy). Runs on a real GPU when there is one, else on
the fake backend (Note [GPU tests] in tests/cuda_common.py).

Per op and dtype, a few samples (the first of each layout, two contiguous
ones): the result lies on the device it was asked for, with the CPU's dtype,
shape and values (the table's tolerances); views alias on the device where
they do on the CPU; in-place and out= forms write into the device tensor;
bad inputs raise the CPU's exception type. For every op with a backward
formula, one backward on the device gives the CPU's gradients, on the
device; gradcheck runs on the device for a cheap sample. Then the device
checks themselves: CPU and cuda tensors mixed, cuda:0 with cuda:1.
"""
import numpy as np
import pytest

import ember
from autograd_common import build
from cuda_common import OnDevice
from op_db import ERRORS, OPS, OPS_BY_NAME, RANDOM, TS, is_float, rng_for
from test_autograd_ops import BACKWARD, CASES
from test_ops import TOL, Failures, call, materialize, out_ok, prepare, to_np

pytestmark = pytest.mark.usefixtures("cuda_device")
D = OnDevice("cuda")  # `ember` making its tensors on the current GPU
DEV0 = ember.device("cuda", 0)


class Exact:
    """same()'s `op` outside the table: default tolerances, values checked."""
    tol, scaled_atol, check_values = None, False, True


# ---------------------------------------------------------------------------
# comparing a device result with the CPU's
def host_np(t):
    """A device or CPU tensor's values as NumPy (bfloat16 widened)."""
    return to_np(t.detach().cpu())


def close(dev, cpu, dt, op):
    rtol, atol = (op.tol or TOL).get(dt, TOL[dt])
    if op.scaled_atol and dt in ("float16", "bfloat16") and cpu.size:
        finite = np.abs(cpu[np.isfinite(cpu)])
        atol *= max(1.0, finite.max() if finite.size else 1.0)
    np.testing.assert_allclose(dev.astype(np.float64), cpu.astype(np.float64), rtol=rtol, atol=atol,
                               equal_nan=True)


def same(dev, cpu, op, device=DEV0, values=True):
    """dev (a device result) against cpu (the CPU's), recursively through tuples."""
    if isinstance(cpu, ember.Tensor):
        assert isinstance(dev, ember.Tensor), f"expected a Tensor, got {type(dev).__name__}"
        assert dev.device == device, f"result on {dev.device}, expected {device}"
        assert dev.dtype == cpu.dtype, f"dtype {dev.dtype}, the CPU's {cpu.dtype}"
        assert tuple(dev.shape) == tuple(cpu.shape), f"shape {tuple(dev.shape)}, the CPU's {tuple(cpu.shape)}"
        if values and op.check_values:
            d, c = host_np(dev), host_np(cpu)
            dt = str(cpu.dtype).split(".")[-1]
            if is_float(dt):
                close(d, c, dt, op)
            else:
                np.testing.assert_array_equal(d, c)
    elif isinstance(cpu, (tuple, list)):
        assert isinstance(dev, (tuple, list)) and len(dev) == len(cpu), f"{dev!r} vs the CPU's {cpu!r}"
        for d, c in zip(dev, cpu):
            same(d, c, op, device, values)
    elif isinstance(cpu, float) and cpu != cpu:
        assert dev != dev, f"{dev!r}, the CPU's nan"
    else:
        assert dev == cpu, f"{dev!r}, the CPU's {cpu!r}"


def storage_ptr(t):
    return t.untyped_storage().data_ptr() if t.numel() else None


def aliasing(x, result):
    """For each result tensor: does it share x's storage?"""
    outs = result if isinstance(result, (tuple, list)) else (result,)
    return [storage_ptr(o) == storage_ptr(x) for o in outs if isinstance(o, ember.Tensor) and o.numel()]


def both(fn):
    """fn(ember) and fn(D): the CPU's result, or the same exception type on the device."""
    try:
        cpu = fn(ember)
    except Exception as e:
        with pytest.raises(type(e)):
            fn(D)
        return None
    return cpu, fn(D)


# ---------------------------------------------------------------------------
# which samples: a few per op and dtype
def picks(op, dtype):
    """The first sample of each layout (two contiguous ones, and a big one
    for float32: the tiled inputs that take the threaded paths)."""
    out = []
    for layout in op.layouts:
        samples = op.get_samples(dtype, layout)
        small = [s for s in samples if s.tile == 1]
        out += [(prepare(s, layout), layout) for s in small[:2 if layout == "contig" else 1]]
        if layout == "contig" and dtype == "float32":
            out += [(s, layout) for s in samples if s.tile > 1][:1]
    return out


def named_device(s):
    """The device a sample names (_to_device(x, 'cpu', ...)): its results go there."""
    for a in list(s.args) + list(s.kwargs.values()):
        if isinstance(a, str) and a.split(":")[0] in ("cpu", "cuda"):
            return ember.device(a)
    return None


def variant_of(op, s):
    return "F" if "F" in op.variants and s.desc != "varargs" else "M"


def op_params(pred=lambda op: True):
    return [pytest.param(op.name, id=op.name) for op in OPS if op.kind != "random" and pred(op)]


# ---------------------------------------------------------------------------
# arguments torch wants on the CPU whatever the device (their values steer the op)
CPU_ARGS = {"tensor_split": 1}


def run_sample(op, s, layout):
    variant = variant_of(op, s)
    cargs, ckw, _ = materialize(ember, s, layout)
    dargs, dkw, _ = materialize(D, s, layout)
    if op.name in CPU_ARGS:
        dargs[CPU_ARGS[op.name]] = cargs[CPU_ARGS[op.name]]
    try:
        cpu = call(ember, op, variant, cargs, ckw)
    except Exception as e:
        with pytest.raises(type(e)):
            call(D, op, variant, dargs, dkw)
        return
    dev = call(D, op, variant, dargs, dkw)
    same(dev, cpu, op, device=named_device(s) or DEV0)
    if op.kind == "fill":
        assert dev is dargs[0], f"{op.name} must return self"
    if op.kind == "view" and isinstance(cargs[0], ember.Tensor):
        assert aliasing(dargs[0], dev) == aliasing(cargs[0], cpu), "aliasing differs from the CPU's"


@pytest.mark.parametrize("name", op_params())
def test_op(name):
    """op(...) on device tensors: the CPU's result, on the device."""
    op, fails, n = OPS_BY_NAME[name], Failures(), 0
    for dtype in op.dtypes:
        for s, layout in picks(op, dtype):
            n += 1
            with fails.case(s, layout, f"cuda {dtype}"):
                run_sample(op, s, layout)
    assert n
    fails.check()


@pytest.mark.parametrize("name", op_params(lambda op: "I" in op.variants))
def test_inplace(name):
    """x.op_(...) on a device x: returns x, bumps its version, holds the CPU's values."""
    op, fails, n = OPS_BY_NAME[name], Failures(), 0
    for dtype in op.dtypes:
        for layout in ("contig", "T"):
            if layout not in op.layouts:
                continue
            for s in op.get_samples(dtype, layout)[:1]:
                if not isinstance(s.args[0], TS):
                    continue
                n += 1
                with fails.case(s, layout, f"cuda {dtype} in-place"):
                    inplace_case(op, s, layout)
    if not n:
        pytest.skip("no sample with a tensor self")
    fails.check()


def inplace_case(op, s, layout):
    cargs, ckw, _ = materialize(ember, s, layout)
    dargs, dkw, _ = materialize(D, s, layout)
    if not isinstance(cargs[0], ember.Tensor):
        return
    try:
        call(ember, op, "I", cargs, ckw)
    except Exception as e:
        with pytest.raises(type(e)):
            call(D, op, "I", dargs, dkw)
        return
    x = dargs[0]
    before = x._version
    res = call(D, op, "I", dargs, dkw)
    assert res is x, f"{op.name}_ must return self"
    if op.kind != "view":  # restriding ops (t_, unsqueeze_) change no data
        assert x._version > before, "the version counter did not move"
    same(x, cargs[0], op)


@pytest.mark.parametrize("name", op_params(lambda op: "O" in op.variants))
def test_out(name):
    """op(..., out=o) with o on the device: returns o, resizing an empty o,
    and writes through a transposed o."""
    op, fails, n = OPS_BY_NAME[name], Failures(), 0
    for dtype in op.dtypes:
        for layout in ("contig", "T"):
            samples = [s for s in op.get_samples(dtype, layout) if out_ok(op, s) and s.tile == 1][:1]
            for s in samples:
                n += 1
                with fails.case(s, layout, f"cuda {dtype} out="):
                    out_case(op, s, layout)
    if not n:
        pytest.skip("no sample with out=")
    fails.check()


def out_case(op, s, layout):
    cargs, ckw, _ = materialize(ember, s, layout)
    cpu = call(ember, op, "F" if "F" in op.variants else "M", cargs, ckw)
    if isinstance(cpu, (tuple, list)):
        return  # several outputs: out= takes a tuple; the single-result ops cover the path
    dargs, dkw, _ = materialize(D, s, layout)
    shape = tuple(cpu.shape)
    if layout == "T" and len(shape) == 2:
        out = ember.empty(shape[::-1], dtype=cpu.dtype, device="cuda").t()
    else:
        out = ember.empty(0, dtype=cpu.dtype, device="cuda")
    before = out._version
    res = call(D, op, "O", dargs, dkw, out=out)
    assert res is out, "out= must return the out tensor"
    assert out._version > before, "the version counter did not move"
    same(out, cpu, op)


def test_random_ops():
    """Random ops on device tensors: the result on the device, in range."""
    fails = Failures()
    for name, (dtypes, _, cases) in RANDOM.items():
        for dtype in dtypes:
            for case in cases:
                if dtype not in case.dtypes:
                    continue
                with fails.case(case.desc, name, dtype):
                    t = ember.empty(1000, dtype=getattr(ember, dtype), device="cuda")
                    r = case.call(D, t, None)
                    if case.inplace:
                        assert r is t
                    assert r.device == DEV0
                    v = host_np(r).astype(np.float64)
                    lo = case.lo(dtype) if callable(case.lo) else case.lo
                    hi = case.hi(dtype) if callable(case.hi) else case.hi
                    assert np.all(np.isfinite(v)) and v.min() >= lo and v.max() <= hi, (v.min(), v.max())
    fails.check()


@pytest.mark.parametrize("fn,exc,match", [pytest.param(*e[1:], id=e[0]) for e in ERRORS])
def test_error(fn, exc, match):
    """The table's bad inputs, made on the device: the CPU's exception type."""
    with pytest.raises(exc):
        fn(D)


# ---------------------------------------------------------------------------
# gradients: one backward on the device against the CPU's
def grad_cases(name):
    """The first two out-of-place cases and the first in-place one. Seeded
    random draws are left out: the device draws from its own generator
    (Note [GPU random numbers]; native dropout: tests/test_cuda_nn_kernels.py)."""
    cases = CASES[(name, "")] + CASES[(name, "inplace")] + CASES[(name, "inplace_view")]
    return [c for c in cases if c.desc != "seeded"]


def outputs_of(r):
    return [o for o in (r if isinstance(r, (tuple, list)) else [r])
            if isinstance(o, ember.Tensor) and o.requires_grad]


def grads_on(L, c, name):
    leaves, fn = build(L, c)
    outs = outputs_of(fn(*leaves))
    rng = rng_for("cuda-upstream", name)
    gos = [L.from_numpy(rng.uniform(-1, 1, tuple(o.shape))).to(o.dtype) for o in outs]
    ember.autograd.backward(outs, gos)
    return leaves


@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in sorted(BACKWARD) if grad_cases(n)])
def test_gradients(name):
    """The same call and upstream gradient on the CPU and on the device: the
    same leaf gradients, the device's on the device."""
    fails = Failures()
    for c in grad_cases(name):
        with fails.case(c, c.layout, "cuda backward"):
            cpu = grads_on(ember, c, name)
            dev = grads_on(OnDevice("cuda", keep_integers_on_cpu=True) if name in CPU_ARGS else D, c, name)
            for d, h in zip(dev, cpu):
                if h.grad is None:
                    assert d.grad is None or not np.any(host_np(d.grad)), "a gradient where the CPU has none"
                    continue
                assert d.grad is not None, "no gradient where the CPU has one"
                assert d.grad.device == d.device == DEV0, f"gradient on {d.grad.device}"
                np.testing.assert_allclose(host_np(d.grad), host_np(h.grad), rtol=1e-7, atol=1e-9,
                                           equal_nan=True)
    fails.check()


CHEAP_GRADCHECK = ("mul", "div", "exp", "sum", "mm", "matmul", "cat", "_index", "transpose", "where",
                   "softmax", "_log_softmax", "pow", "index_select", "max")


@pytest.mark.parametrize("name", [n for n in CHEAP_GRADCHECK if n in BACKWARD and CASES[(n, "")]])
def test_gradcheck_on_device(name):
    """Full gradcheck (finite differences against the formulas) with device inputs."""
    c = CASES[(name, "")][0]
    leaves, fn = build(D, c)
    assert all(x.is_cuda for x in leaves)
    assert ember.autograd.gradcheck(fn, tuple(leaves), **c.tol)


# ---------------------------------------------------------------------------
# tensors on different devices
MIXED = [
    ("add", lambda a, b: a + b),
    ("mul-method", lambda a, b: a.mul(b)),
    ("matmul", lambda a, b: a @ b.t()),
    ("cat", lambda a, b: ember.cat([a, b])),
    ("where", lambda a, b: ember.where(a > 0, a, b)),
    ("add_", lambda a, b: a.add_(b)),
    ("copy-out", lambda a, b: ember.add(a, a, out=b)),
    ("index_select", lambda a, b: a.index_select(0, b[0].long().clamp(0, 1))),
]


@pytest.mark.parametrize("fn", [pytest.param(f, id=i) for i, f in MIXED])
def test_mixed_cpu_and_cuda(fn):
    """A CPU tensor of rank >= 1 with a cuda one: RuntimeError, either way round."""
    g, c = ember.ones(2, 3, device="cuda"), ember.ones(2, 3)
    for a, b in ((g, c), (c, g)):
        with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
            fn(a, b)


def test_cpu_scalar_tensor_is_allowed():
    """0-d CPU tensors take part as scalars (torch allows them with cuda tensors)."""
    g = ember.arange(6.0, device="cuda").view(2, 3)
    s = ember.tensor(2.0)
    for r, want in ((g * s, np.arange(6.0).reshape(2, 3) * 2), (s + g, np.arange(6.0).reshape(2, 3) + 2),
                    (ember.where(g > 2, g, s), np.where(np.arange(6.0) > 2, np.arange(6.0), 2).reshape(2, 3))):
        assert r.device == DEV0
        np.testing.assert_array_equal(host_np(r), want)
    g.mul_(s)
    np.testing.assert_array_equal(host_np(g), np.arange(6.0).reshape(2, 3) * 2)


def test_tensor_split_wants_cpu_indices():
    """tensor_split reads its index tensor on the host: a device one is a RuntimeError (as torch)."""
    g = ember.arange(6.0, device="cuda")
    assert [p.tolist() for p in ember.tensor_split(g, ember.tensor([2, 3]))] == [[0.0, 1.0], [2.0], [3.0, 4.0, 5.0]]
    for sections in (ember.tensor([2, 3], device="cuda"), ember.tensor(2, device="cuda")):
        with pytest.raises(RuntimeError, match="on cpu"):
            ember.tensor_split(g, sections)


def test_cpu_index_into_cuda():
    """CPU index tensors may index a cuda tensor (torch allows it); the result stays on the device."""
    g = ember.arange(10.0, device="cuda")
    r = g[ember.tensor([1, 3, 5])]
    assert r.device == DEV0
    np.testing.assert_array_equal(host_np(r), [1.0, 3.0, 5.0])
    g[ember.tensor([0, 2])] = 7.0
    np.testing.assert_array_equal(host_np(g)[:3], [7.0, 1.0, 7.0])


def two_devices():
    if ember.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")


@pytest.mark.parametrize("fn", [pytest.param(f, id=i) for i, f in MIXED])
def test_mixed_cuda0_and_cuda1(fn):
    two_devices()
    a, b = ember.ones(2, 3, device="cuda:0"), ember.ones(2, 3, device="cuda:1")
    for x, y in ((a, b), (b, a)):
        with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
            fn(x, y)


def test_ops_on_cuda1_stay_there():
    """An op on cuda:1 tensors gives cuda:1 results whatever the current device."""
    two_devices()
    v = np.arange(12.0).reshape(3, 4)
    h, x = ember.from_numpy(v), ember.from_numpy(v).to("cuda:1")
    calls = {"exp": lambda t: t.exp(), "sum": lambda t: t.sum(0), "mm": lambda t: t @ t.t(),
             "max": lambda t: t.max(1), "view": lambda t: t.t(), "like": ember.zeros_like,
             "index": lambda t: t[ember.tensor([0, 2], device=t.device)], "cat": lambda t: ember.cat([t, t])}
    fails = Failures()
    for current in (0, 1):
        with ember.cuda.device(current):
            for what, f in calls.items():
                with fails.case(what, f"current cuda:{current}"):
                    same(f(x), f(h), Exact, device=ember.device("cuda", 1))
    fails.check()
