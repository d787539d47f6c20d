"""Every op of the op table against its NumPy reference (tests/op_db.py):
op x dtype x layout (contiguous, transposed, sliced with a step, expanded,
0-d, empty), the function / method / in-place / out= variants, torch's type
promotion with Python scalars and 0-d tensors, Python operators, views
sharing storage, random ops' statistics, and the error inputs.

When PyTorch is importable the *_torch tests also run the same samples and
error inputs through torch, to check this table itself; they skip without it.
"""
import operator
from contextlib import contextmanager
from dataclasses import replace

import numpy as np
import pytest

import ember
from op_db import (DT, DTYPES, ERRORS, FLOATS, LAYOUTS, NP, OPS, OPS_BY_NAME, RANDOM, TS, Sample, can_cast,
                   contiguous_strides, gen_values, is_complex, is_float, layout_strides, promote_types, quantize,
                   result_type, rng_for, torch_view_strides)

try:
    import torch as _torch
except ImportError:
    _torch = None
needs_torch = pytest.mark.skipif(_torch is None, reason="torch not installed")

TOL = {"float16": (2e-3, 1e-3), "bfloat16": (1.6e-2, 1e-2), "float32": (1e-5, 1e-6), "float64": (1e-10, 1e-12),
       "complex64": (1e-5, 1e-6), "complex128": (1e-10, 1e-12)}
JUNK = {"b": True, "f": np.nan, "i": 111, "u": 111, "c": np.nan}  # by NumPy kind: fills the gaps of sliced layouts


# ---------------------------------------------------------------------------
# building tensors (ember or torch: the same calls) and comparing them
def raw(L, values, dtype):
    """A contiguous tensor holding exactly `values` (bfloat16: from its bits, no conversion)."""
    if dtype == "bfloat16":
        bits = (np.asarray(values, np.float32).view(np.uint32) >> 16).astype(np.uint16).view(np.int16)
        return L.from_numpy(np.array(bits, order="C")).view(L.bfloat16).clone()  # clone: not a view
    return L.from_numpy(np.array(values, NP[dtype], order="C"))


def realize(L, ts, layout):
    """ts as a tensor in `layout` (TS with lay=False stay contiguous)."""
    v, dt = ts.values, ts.dtype
    if not ts.lay or v.ndim == 0:
        return raw(L, v, dt)
    if layout == "T" and v.ndim >= 2:
        return raw(L, np.swapaxes(v, -1, -2), dt).transpose(-1, -2)
    if layout == "slice":
        big = np.full(v.shape[:-1] + (2 * v.shape[-1],), JUNK[v.dtype.kind], v.dtype)
        big[..., ::2] = v
        return raw(L, big, dt)[(slice(None),) * (v.ndim - 1) + (slice(None, None, 2),)]
    if layout == "expand" and v.shape[0] > 1:
        return raw(L, v[:1], dt).expand(*v.shape)
    return raw(L, v, dt)


def is_ts_list(a):
    """A list of tensor specs: the tensors argument of cat, stack, ..."""
    return isinstance(a, list) and any(isinstance(x, TS) for x in a)


def prepare(sample, layout):
    """For the expanded layout, make each laid-out TS constant along dim 0."""
    if layout != "expand":
        return sample

    def fix(a):
        if is_ts_list(a):
            return [fix(x) for x in a]
        if isinstance(a, TS) and a.lay and a.values.ndim and a.shape[0] > 1:
            return TS(np.broadcast_to(a.values[:1], a.shape), a.dtype)
        return a
    return replace(sample, args=tuple(fix(a) for a in sample.args))


def lib_value(L, a, layout, tile=1):
    if isinstance(a, tuple) and any(isinstance(x, TS) for x in a):  # index keys / index_put's indices
        return tuple(lib_value(L, x, layout, tile) for x in a)
    if isinstance(a, TS):
        return realize(L, TS(np.tile(a.values, tile), a.dtype, a.lay, exact=True) if tile > 1 else a, layout)
    if is_ts_list(a):
        return [lib_value(L, x, layout, tile) for x in a]
    if isinstance(a, DT):
        return getattr(L, a)
    return a


def np_value(a):
    if is_ts_list(a):
        return [np_value(x) for x in a]
    if isinstance(a, tuple) and any(isinstance(x, TS) for x in a):  # index keys / index_put's indices
        return tuple(np_value(x) for x in a)
    return a.values if isinstance(a, TS) else a


def materialize(L, sample, layout):
    """Tensors for the sample's arguments, and their NumPy values (before tiling)."""
    args = [lib_value(L, a, layout, sample.tile) for a in sample.args]
    kwargs = {k: lib_value(L, v, layout) for k, v in sample.kwargs.items()}
    values = [np_value(a) for a in sample.args]
    return args, kwargs, values


def expected_of(op, sample, values):
    expect, dt = op.expected(sample, values)
    return (np.tile(expect, sample.tile) if sample.tile > 1 else expect), dt


def to_np(t):
    t = t.detach()
    if dtype_name(t) == "bfloat16":  # NumPy has no bfloat16: widen the bits
        L = ember if isinstance(t, ember.Tensor) else _torch
        return (t.view(L.int16).numpy().view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    return t.numpy()


def dtype_name(t):
    return str(t.dtype).split(".")[-1]


def check(L, actual, expected, dt, values=True, tol=None, scaled=False):
    """actual (a tensor, or a tuple of them) against NumPy `expected` in dtype
    dt (for tuples: one dtype for all, or a tuple of dtypes)."""
    if isinstance(expected, tuple):
        assert isinstance(actual, (tuple, list)), f"expected a tuple, got {type(actual).__name__}"
        assert len(actual) == len(expected), f"{len(actual)} results, expected {len(expected)}"
        dts = dt if isinstance(dt, tuple) else (dt,) * len(expected)
        for a, e, d in zip(actual, expected, dts):
            check(L, a, e, d, values, tol, scaled)
        return
    assert isinstance(actual, L.Tensor), f"expected a Tensor, got {type(actual).__name__}"
    assert dtype_name(actual) == dt, f"dtype {dtype_name(actual)}, expected {dt}"
    assert tuple(actual.shape) == tuple(expected.shape), f"shape {tuple(actual.shape)}, expected {expected.shape}"
    if not values:
        return
    a = to_np(actual)
    if is_complex(dt):
        rtol, atol = (tol or TOL).get(dt, TOL[dt])
        np.testing.assert_allclose(a.astype(np.complex128), quantize(expected, dt), rtol=rtol, atol=atol,
                                   equal_nan=True)
    elif is_float(dt):
        rtol, atol = (tol or TOL).get(dt, TOL[dt])
        if scaled and dt in ("float16", "bfloat16"):  # intermediate roundings: an ulp of the operands' scale
            finite = np.abs(expected[np.isfinite(expected)])
            atol *= max(1.0, finite.max() if finite.size else 1.0)
        np.testing.assert_allclose(a.astype(np.float64), quantize(expected, dt), rtol=rtol, atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(a, quantize(expected, dt))


@contextmanager
def about(sample, layout="", what=""):
    """Name the sample in any failure."""
    try:
        yield
    except BaseException as e:  # also pytest's "DID NOT RAISE"
        if not isinstance(e, KeyboardInterrupt):
            e.add_note(f"[{what} {layout}] {sample!r}")
        raise


class Failures:
    """Run many cases in one test and report every failing one (not just the first)."""

    def __init__(self):
        self.msgs = []

    @contextmanager
    def case(self, sample, layout="", what=""):
        try:
            with about(sample, layout, what):
                yield
        except (Exception, pytest.fail.Exception) as e:
            notes = " ".join(getattr(e, "__notes__", []))
            self.msgs.append(f"{type(e).__name__}: {str(e).strip()[:800]}\n    {notes}")

    def check(self):
        if self.msgs:
            pytest.fail(f"{len(self.msgs)} failing case(s):\n" + "\n".join(self.msgs), pytrace=False)


def call(L, op, variant, args, kwargs, out=None):
    if op.call:  # internal ops (x[key], x.to(dtype)) reached through their Python syntax
        return op.call(L, *args, **kwargs)
    fn = op.fn(L) if op.fn else getattr(L, op.name, None)
    if variant == "F":
        return fn(*args, **kwargs)
    if variant == "O":
        return fn(*args, out=out, **kwargs)
    if variant == "M":
        i = op.method_self
        return getattr(args[i], op.name)(*args[:i], *args[i + 1:], **kwargs)
    return getattr(args[0], op.name + "_")(*args[1:], **kwargs)


def is_tensor_arg(a):
    return isinstance(a, TS)


# ---------------------------------------------------------------------------
# views: what should alias what
def new_shape(op, sample):
    rest = [a.values if isinstance(a, TS) else a for a in sample.args[1:]]
    return list(np.shape(op.ref(np.zeros(sample.args[0].shape), *rest, **sample.kwargs)))


def alias_expectation(op, sample, layout):
    """True: result must share storage, False: must not, 'error': view() must raise."""
    if op.view in (True, False):
        return op.view
    x = sample.args[0]
    shape = list(x.shape)
    strides = layout_strides(shape, layout if x.lay else "contig")
    if op.name == "contiguous":
        return all(st == cs for st, cs, n in zip(strides, contiguous_strides(shape), shape) if n != 1) or 0 in shape
    if op.name == "view" and isinstance(sample.args[1], DT):
        return True
    possible = torch_view_strides(shape, strides, new_shape(op, sample)) is not None
    return possible if possible or op.name not in ("view", "view_as") else "error"


def check_alias(L, op, sample, layout, x, xv, result, alias, rest):
    outs = result if isinstance(result, (tuple, list)) else (result,)
    if x.numel() == 0 or not outs:
        return
    ptr = x.untyped_storage().data_ptr()
    for o in outs:
        if o.numel():
            shares = o.untyped_storage().data_ptr() == ptr
            assert shares == alias, "result shares the input's storage" if shares else "result is not a view"
    if layout == "expand" or op.name in ("expand", "expand_as", "as_strided", "broadcast_to") or not op.ref or \
            (op.name == "view" and isinstance(sample.args[1], DT)):
        return
    # write through the result; exactly the covered elements of x change
    marker = True if x.dtype == L.bool else 7
    for o in outs:
        o.fill_(marker)
    expect = np.array(xv, copy=True)
    if alias:
        idx = op.ref(np.arange(xv.size).reshape(xv.shape), *rest, **sample.kwargs)
        idx = idx if isinstance(idx, tuple) else (idx,)
        expect.flat[np.concatenate([np.ravel(i) for i in idx]).astype(np.int64)] = marker
    check(L, x, expect, sample.args[0].dtype)


# ---------------------------------------------------------------------------
# parametrization
def params():
    return [pytest.param(op.name, d, lay, id=f"{op.name}-{d}-{lay}") for op in OPS if op.kind != "random"
            for d in op.dtypes for lay in op.layouts]


def dtype_params(pred):
    return [pytest.param(op.name, d, id=f"{op.name}-{d}") for op in OPS if op.kind != "random" and pred(op)
            for d in op.dtypes]


# the complex-number rows (views and constructors of complex tensors): tests/test_complex.py
# checks them against NumPy and gradcheck; the elementwise entries' complex dtypes are swept
# by test_complex_sweep
COMPLEX_ROWS = {"angle", "complex", "conj", "conj_physical", "imag", "polar", "real", "view_as_complex",
                "view_as_real"}
# rows whose dtype sweeps are still to write in op_db: covered by tests/test_fft.py (the FFT
# primitives, against NumPy's FFT) and tests/test_special_rows.py (the special functions)
# multi-output and complex rows: their checks are in test_fft.py and test_special_rows.py
NO_OPINFO_YET = {"_fft_c2c", "_fft_c2r", "_fft_r2c", "frexp"}


def complex_params():
    return [pytest.param(op.name, d, id=f"{op.name}-{d}") for op in OPS for d in op.complex_dtypes]


@pytest.mark.parametrize("name,dtype", complex_params())
def test_complex_sweep(name, dtype):
    """The entries' complex dtypes against their NumPy references: the function form in every
    layout, the method, in-place and out= forms on contiguous input."""
    op, fails, n = OPS_BY_NAME[name], Failures(), 0
    for layout in op.layouts:
        for s in op.get_samples(dtype, layout):
            s = prepare(s, layout)
            n += 1
            with fails.case(s, layout, "F"):
                run_sample(ember, op, s, layout, "F")
            if layout != "contig" or s.tile > 1 or not is_tensor_arg(s.args[0]):
                continue
            if "M" in op.variants:
                with fails.case(s, layout, "M"):
                    run_sample(ember, op, s, layout, "M")
            if "I" in op.variants:
                with fails.case(s, layout, "I"):
                    args, kwargs, values = materialize(ember, s, layout)
                    exp = inplace_expectation(op, s, *op.expected(s, values), layout)
                    if isinstance(exp, Raises):
                        with pytest.raises(exp.exc, match=exp or None):
                            call(ember, op, "I", args, kwargs)
                    else:
                        res = call(ember, op, "I", args, kwargs)
                        assert res is args[0], f"{name}_ must return self"
                        check(ember, res, *exp, tol=op.tol)
            if "O" in op.variants and out_ok(op, s):
                with fails.case(s, layout, "out="):
                    args, kwargs, values = materialize(ember, s, layout)
                    expect, dt = expected_of(op, s, values)
                    out = ember.empty(0, dtype=getattr(ember, dt))
                    assert call(ember, op, "O", args, kwargs, out=out) is out
                    check(ember, out, expect, dt, tol=op.tol)
    assert n
    fails.check()


def test_every_op_has_an_entry():
    names = set(ember._C._op_names())
    missing = sorted(names - set(OPS_BY_NAME) - COMPLEX_ROWS - NO_OPINFO_YET)
    assert not missing, f"ops without an entry in tests/op_db.py: {missing}"
    stale = sorted(set(OPS_BY_NAME) - names)
    assert not stale, f"entries for ops ember's table does not have: {stale}"


def run_sample(L, op, sample, layout, variant):
    """Run one sample (function or method form) and compare; view checks too."""
    args, kwargs, values = materialize(L, sample, layout)
    expect, dt = expected_of(op, sample, values)
    alias = alias_expectation(op, sample, layout) if op.kind == "view" else None
    if alias == "error":
        with pytest.raises(RuntimeError):
            call(L, op, variant, args, kwargs)
        return
    res = call(L, op, variant, args, kwargs)
    if op.kind == "fill":
        assert res is args[0], f"{op.name} must return self"
    check(L, res, expect, dt, op.check_values, op.tol, op.scaled_atol)
    if op.kind == "view":
        check_alias(L, op, sample, layout, args[0], values[0], res, alias, values[1:])


@pytest.mark.parametrize("name,dtype,layout", params())
def test_op(name, dtype, layout):
    op = OPS_BY_NAME[name]
    samples = op.get_samples(dtype, layout)
    assert samples
    for s in samples:
        s = prepare(s, layout)
        variant = "F" if "F" in op.variants and s.desc != "varargs" else "M"  # torch.permute(x, 1, 0) is an error
        with about(s, layout, variant):
            run_sample(ember, op, s, layout, variant)


@pytest.mark.parametrize("name,dtype", dtype_params(lambda op: "M" in op.variants and "F" in op.variants))
def test_method(name, dtype):
    """Tensor.op(...) (test_op runs ember.op(...), or the method where torch has only that)."""
    op, fails, n = OPS_BY_NAME[name], Failures(), 0
    for s in op.get_samples(dtype, "contig"):
        if is_tensor_arg(s.args[op.method_self]) and s.tile == 1:
            n += 1
            with fails.case(s, "contig", "M"):
                run_sample(ember, op, s, "contig", "M")
    assert n
    fails.check()


def is_view(ts, layout):
    """Does realize() give a view of another tensor?"""
    nd = ts.values.ndim
    return ts.lay and nd > 0 and (layout == "slice" or layout == "T" and nd >= 2 or
                                  layout == "expand" and ts.shape[0] > 1)


class Raises(str):
    """inplace_expectation's answer when torch raises (the str: a message regex; .exc the type)."""
    exc = RuntimeError


def raises(regex, exc):
    r = Raises(regex)
    r.exc = exc
    return r


def inplace_expectation(op, sample, expect, dt, layout="contig"):
    """Raises(regex) if torch raises RuntimeError, else (self's values afterwards, dtype)."""
    self_ = sample.args[0]
    exc = op.inplace_raises and op.inplace_raises(self_.dtype, sample.kwargs, self_.shape)
    if exc:
        return raises("", exc)
    if op.kind == "view":
        # "Can't detach views in-place"
        return Raises("") if op.name == "detach" and is_view(self_, layout) else (expect, dt)
    if op.kind == "mm" and np.shape(expect) != self_.shape:  # "Bad in-place call": self is not broadcast
        return Raises("")
    if op.kind == "ew":
        if np.shape(expect) != self_.shape or op.inplace_exact and dt != self_.dtype:
            return Raises("")
        if not can_cast(dt, self_.dtype):  # "result type Float can't be cast to the desired output type Long"
            return Raises("can't be cast")
    expect = np.tile(expect, sample.tile) if sample.tile > 1 else expect
    return quantize(expect, self_.dtype), self_.dtype


@pytest.mark.parametrize("name,dtype", dtype_params(lambda op: "I" in op.variants))
def test_inplace(name, dtype):
    """t.op_(...) in every layout but the expanded one (torch refuses to write there)."""
    op, fails, n = OPS_BY_NAME[name], Failures(), 0
    for layout in op.layouts:
        if layout == "expand":
            continue
        for s in op.get_samples(dtype, layout):
            if not is_tensor_arg(s.args[0]) or s.tile > 1 and layout == "contig":  # big: test_op covers it
                continue
            n += 1
            with fails.case(s, layout, "I"):
                args, kwargs, values = materialize(ember, s, layout)
                exp = inplace_expectation(op, s, *op.expected(s, values), layout)
                if op.kind == "view" and alias_expectation(op, s, layout) == "error":
                    exp = Raises("")
                if isinstance(exp, Raises):
                    with pytest.raises(exp.exc, match=exp or None):
                        call(ember, op, "I", args, kwargs)
                    continue
                res = call(ember, op, "I", args, kwargs)
                assert res is args[0], f"{name}_ must return self"
                check(ember, res, *exp, tol=op.tol, scaled=op.scaled_atol)
    assert n
    fails.check()


@pytest.mark.parametrize("name,dtype", dtype_params(lambda op: "O" in op.variants))
def test_out(name, dtype):
    """op(..., out=o) returns o, resizing an empty o, and writes through a transposed o."""
    op, fails, n = OPS_BY_NAME[name], Failures(), 0
    for layout in ("contig", "T"):
        samples = [s for s in op.get_samples(dtype, layout) if out_ok(op, s) and s.tile == 1]
        for i, s in enumerate(samples):
            n += 1
            with fails.case(s, layout, "out="):
                args, kwargs, values = materialize(ember, s, layout)
                expect, dt = expected_of(op, s, values)
                shape, edt = np.shape(expect), getattr(ember, dt)
                if layout == "T" and len(shape) == 2:  # a transposed out tensor
                    out = ember.empty(shape[::-1], dtype=edt).t()
                else:  # the first: an empty out tensor is resized
                    out = ember.empty(0 if i == 0 else shape, dtype=edt)
                res = call(ember, op, "O", args, kwargs, out=out)
                assert res is out, "out= must return the out tensor"
                check(ember, out, expect, dt, tol=op.tol, scaled=op.scaled_atol)
    assert n
    fails.check()


def out_ok(op, s):
    """torch's out= overloads take a tensor (or a list of them) first (where:
    only tensors; nonzero: not as_tuple; sum: only with dim)."""
    first = s.args[0]
    return (is_tensor_arg(first) or is_ts_list(first)) and \
        (op.name != "where" or all(map(is_tensor_arg, s.args))) and not s.kwargs.get("as_tuple") and \
        (op.out_ok is None or op.out_ok(s))


def unsupported_params():
    return [pytest.param(op.name, d, id=f"{op.name}-{d}") for op in OPS for d in DTYPES
            if d not in op.dtypes and op.unsupported is not None]  # None: internal ops torch lacks


def unsupported_call(L, op, dtype):
    if op.kind == "random":
        case = RANDOM[op.name][2][0]
        return lambda: case.call(L, L.ones(10, dtype=getattr(L, dtype)), None)
    s = op.get_samples(dtype, "contig")[0]
    args, kwargs, _ = materialize(L, s, "contig")
    return lambda: call(L, op, "F" if "F" in op.variants else "M", args, kwargs)


@pytest.mark.parametrize("name,dtype", unsupported_params())
def test_unsupported_dtype(name, dtype):
    op = OPS_BY_NAME[name]
    with pytest.raises(op.unsupported):
        unsupported_call(ember, op, dtype)()


# ---------------------------------------------------------------------------
# type promotion: tensors of two dtypes, 0-d tensors, Python scalars
PROMO_OPS = ("add", "mul", "div", "remainder", "eq", "maximum", "atan2", "bitwise_xor", "where")


def promo_sample(op, d1, d2, shapes=((3, 4), (3, 4))):
    rng = rng_for("promo", op.name, d1, d2, shapes)
    doms = op.doms(d1) if callable(op.doms) else op.doms or [(-5, 5)] * 2
    a = TS(gen_values(rng, d1, shapes[0], doms[0]), d1, False)
    b = TS(gen_values(rng, d2, shapes[1], doms[-1]), d2, False)
    if op.name == "where":
        return Sample((TS(rng.random(shapes[0]) < 0.5, "bool", False), a, b))
    return Sample((a, b))


def run_promo(L, name, d1, shapes=((3, 4), (3, 4))):
    """op(d1 tensor, d2 tensor) for every d2: result dtype and values (or torch's error)."""
    op, fails = OPS_BY_NAME[name], Failures()
    for d2 in DTYPES:
        s = promo_sample(op, d1, d2, shapes)
        with fails.case(s, "", "promotion"):
            args, kwargs, values = materialize(L, s, "contig")
            if result_type(*[a for a in s.args if isinstance(a, TS)][-2:]) not in op.dtypes:
                with pytest.raises(op.unsupported):
                    call(L, op, "F", args, kwargs)
                continue
            expect, dt = op.expected(s, values)
            check(L, call(L, op, "F", args, kwargs), expect, dt, scaled=op.scaled_atol)
    fails.check()


@pytest.mark.parametrize("name", PROMO_OPS)
@pytest.mark.parametrize("d1", DTYPES)
def test_promotion(name, d1):
    run_promo(ember, name, d1)


@pytest.mark.parametrize("shapes", [((5,), ()), ((), (5,))], ids=["dim-0d", "0d-dim"])
@pytest.mark.parametrize("d1", DTYPES)
def test_promotion_0d(d1, shapes):
    run_promo(ember, "add", d1, shapes)


def test_result_type_functions():
    """ember.result_type / promote_types / can_cast against the rules above."""
    for d1 in DTYPES:
        for d2 in DTYPES:
            e1, e2 = getattr(ember, d1), getattr(ember, d2)
            assert ember.promote_types(e1, e2) == getattr(ember, promote_types(d1, d2)), (d1, d2)
            assert ember.can_cast(e1, e2) == can_cast(d1, d2), (d1, d2)
            t1, t2 = ember.ones(2, dtype=e1), ember.ones((), dtype=e2)
            assert ember.result_type(t1, t2) == getattr(ember, result_type((d1, 1), (d2, 0))), (d1, d2)
        for s in (2, 2.5, True):
            assert ember.result_type(ember.ones(2, dtype=getattr(ember, d1)), s) == \
                getattr(ember, result_type((d1, 1), s)), (d1, s)


# ---------------------------------------------------------------------------
# Python operators, scalars on either side, in-place operators
BINOPS = [("+", operator.add, "add"), ("-", operator.sub, "sub"), ("*", operator.mul, "mul"),
          ("/", operator.truediv, "true_divide"), ("//", operator.floordiv, "floor_divide"),
          ("%", operator.mod, "remainder"), ("**", operator.pow, "pow"), ("&", operator.and_, "bitwise_and"),
          ("|", operator.or_, "bitwise_or"), ("^", operator.xor, "bitwise_xor"),
          ("<<", operator.lshift, "bitwise_left_shift"), (">>", operator.rshift, "bitwise_right_shift"),
          ("==", operator.eq, "eq"), ("!=", operator.ne, "ne"), ("<", operator.lt, "lt"), ("<=", operator.le, "le"),
          (">", operator.gt, "gt"), (">=", operator.ge, "ge")]
REFLECTED = {"<": "gt", "<=": "ge", ">": "lt", ">=": "le", "==": "eq", "!=": "ne"}  # s < t  is  t > s
IOPS = {"+": operator.iadd, "-": operator.isub, "*": operator.imul, "/": operator.itruediv,
        "//": operator.ifloordiv, "%": operator.imod, "**": operator.ipow, "&": operator.iand, "|": operator.ior,
        "^": operator.ixor, "<<": operator.ilshift, ">>": operator.irshift}
UNOPS = [("neg", operator.neg, "neg", None), ("abs", abs, "abs", None),
         ("~", operator.invert, "bitwise_not", TypeError),  # torch: TypeError for ~ on floats
         ("pos", operator.pos, "positive", None)]


def operator_samples(op, dtype, reflected):
    rng = rng_for("operator", op.name, dtype, reflected)
    doms = op.doms(dtype) if callable(op.doms) else op.doms or [(-5, 5)] * 2
    t = lambda d: TS(gen_values(rng, dtype, (3, 4), d), dtype, False)  # noqa: E731
    if reflected:
        scal = op.rscalars or (SCALARS_FOR_COMPARE if op.rule == "bool" else ())
        return [Sample((s, t(doms[-1]))) for s in scal]
    return [Sample((t(doms[0]), s)) for s in op.scalars] + [Sample((t(doms[0]), t(doms[-1])))]


SCALARS_FOR_COMPARE = (2, 2.5)


@pytest.mark.parametrize("sym,fn,name", BINOPS, ids=[b[0] for b in BINOPS])
@pytest.mark.parametrize("dtype", DTYPES)
def test_binary_operator(sym, fn, name, dtype):
    op = OPS_BY_NAME[name]
    if dtype not in op.dtypes:
        with pytest.raises(op.unsupported):
            fn(raw(ember, np.ones(3), dtype), raw(ember, np.ones(3), dtype))
        return
    for reflected in (False, True):
        for s in operator_samples(op, dtype, reflected):
            with about(s, "", f"operator {sym} reflected={reflected}"):
                args, kwargs, values = materialize(ember, s, "contig")
                if reflected and sym in REFLECTED:  # 2 < t  ->  t > 2
                    ref_op = OPS_BY_NAME[REFLECTED[sym]]
                    expect, dt = ref_op.expected(Sample(s.args[::-1]), values[::-1])
                else:
                    expect, dt = op.expected(s, values)
                check(ember, fn(*args), expect, dt, scaled=op.scaled_atol)


@pytest.mark.parametrize("sym", list(IOPS))
@pytest.mark.parametrize("dtype", DTYPES)
def test_inplace_operator(sym, dtype):
    name = dict((b[0], b[2]) for b in BINOPS)[sym]
    op = OPS_BY_NAME[name]
    if dtype not in op.dtypes:
        with pytest.raises(op.unsupported):
            IOPS[sym](raw(ember, np.ones(3), dtype), raw(ember, np.ones(3), dtype))
        return
    for s in operator_samples(op, dtype, False):
        with about(s, "", f"operator {sym}="):
            args, _, values = materialize(ember, s, "contig")
            expect, dt = op.expected(s, values)
            exp = inplace_expectation(op, s, expect, dt)
            if isinstance(exp, Raises):
                with pytest.raises(RuntimeError, match=exp or None):
                    IOPS[sym](args[0], args[1])
                continue
            x = args[0]
            res = IOPS[sym](x, args[1])
            assert res is x
            check(ember, x, *exp, tol=op.tol, scaled=op.scaled_atol)


def run_unary_operator(L, fn, name, exc, dtype):
    op = OPS_BY_NAME[name]
    x = TS(gen_values(rng_for(name, dtype), dtype, (3, 4)), dtype, False)
    t = raw(L, x.values, dtype)
    if dtype not in op.dtypes:
        with pytest.raises(exc or op.unsupported):
            fn(t)
        return
    check(L, fn(t), *op.expected(Sample((x,)), [x.values]))


@pytest.mark.parametrize("sym,fn,name,exc", UNOPS, ids=[u[0] for u in UNOPS])
@pytest.mark.parametrize("dtype", DTYPES)
def test_unary_operator(sym, fn, name, exc, dtype):
    run_unary_operator(ember, fn, name, exc, dtype)


LIBS = [pytest.param(ember, id="ember"), pytest.param(_torch, id="torch", marks=needs_torch)]


@pytest.mark.parametrize("L", LIBS)
def test_weak_scalars(L):
    """The examples torch's docs give for Python scalars (weak types)."""
    assert (L.ones(2, dtype=L.int64) * 2.5).dtype == L.float32
    assert (L.ones(2, dtype=L.float16) * 2.0).dtype == L.float16
    u = L.tensor([1, 200], dtype=L.uint8) + 300
    assert u.dtype == L.uint8 and u.tolist() == [45, 244]
    assert (L.tensor([True]) + 1).dtype == L.int64
    assert (L.tensor([1, 2]) / 2).dtype == L.float32
    assert (2 ** L.tensor([1, 2])).tolist() == [2, 4] and (2 ** L.tensor([1, 2])).dtype == L.int64
    assert (1 / L.tensor([1, 2])).tolist() == [1.0, 0.5]
    assert (2 - L.tensor([1, 2], dtype=L.int8)).dtype == L.int8
    assert (L.ones(2, dtype=L.int32) + L.tensor(2.5, dtype=L.float64)).dtype == L.float64
    assert (L.ones(2, dtype=L.float16) + L.tensor(2.5, dtype=L.float64)).dtype == L.float16


# ---------------------------------------------------------------------------
# the layouts themselves, and views beyond the table's samples
@pytest.mark.parametrize("L", LIBS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_layout_strides(L, layout):
    """The harness's layouts have the strides op_db assumes (t(), [:, ::2], expand)."""
    for shape in ((3, 4), (2, 3, 4)):
        t = realize(L, TS(np.zeros(shape), "float32"), layout)
        assert tuple(t.shape) == shape
        assert list(t.stride()) == layout_strides(list(shape), layout), (layout, shape, t.stride())


@pytest.mark.parametrize("L", LIBS)
def test_view_shares_storage(L):
    base = L.from_numpy(np.arange(12.0).reshape(3, 4))
    v = base.view(4, 3)
    assert v.data_ptr() == base.data_ptr()
    v[0, 0] = 100.0
    assert base[0, 0].item() == 100.0
    tr = base.t()
    assert tr.data_ptr() == base.data_ptr() and not tr.is_contiguous()
    with pytest.raises(RuntimeError):
        tr.view(12)
    r = tr.reshape(12)
    assert r.data_ptr() != base.data_ptr()
    np.testing.assert_array_equal(r.numpy(), np.array(base.numpy().T).ravel())
    assert base.narrow(1, 1, 2).data_ptr() == base.data_ptr() + 1 * base.element_size()
    assert base.select(0, 2).storage_offset() == 8


# ---------------------------------------------------------------------------
# random ops: statistics on N draws, ranges, dtypes, determinism
N_RANDOM = 100_000


def random_params():
    return [pytest.param(n, d, i, id=f"{n}-{d}-{c.desc}") for n, (dts, _, cases) in RANDOM.items()
            for d in dts for i, c in enumerate(cases) if d in c.dtypes]


def _val(v, dtype):
    return v(dtype) if callable(v) else v


@pytest.mark.parametrize("L", LIBS)
@pytest.mark.parametrize("name,dtype,i", random_params())
def test_random(L, name, dtype, i):
    case = RANDOM[name][2][i]
    ldt = getattr(L, dtype)
    draw = lambda g: case.call(L, L.empty(N_RANDOM, dtype=ldt), g)  # noqa: E731
    t = L.empty(N_RANDOM, dtype=ldt)
    r = case.call(L, t, L.Generator().manual_seed(1234))
    if case.inplace:
        assert r is t
    assert dtype_name(r) == (case.out_dtype or dtype)
    v = to_np(r).astype(np.float64)
    assert np.all(np.isfinite(v))
    lo, hi = _val(case.lo, dtype), _val(case.hi, dtype)
    assert v.min() >= lo and v.max() <= hi, (v.min(), v.max())
    if case.integral:
        assert np.all(v == np.round(v))
        if hi - lo < 20 and v.size >= 1000:
            assert set(np.unique(v)) == set(range(int(lo), int(hi) + 1)), "not every value drawn"
    mean, var = _val(case.mean, dtype), _val(case.var, dtype)
    if mean is not None:
        half = dtype in ("float16", "bfloat16")
        slack = 0.01 * (abs(mean) + var ** 0.5) if half else 0
        assert abs(v.mean() - mean) <= 6 * (var / v.size) ** 0.5 + slack, (v.mean(), mean)
        assert abs(v.var() / var - 1) < 0.05 + (0.02 if half else 0), (v.var(), var)
    # determinism: same seed, same numbers; another seed, others; the global seed too
    np.testing.assert_array_equal(to_np(draw(L.Generator().manual_seed(1234))), to_np(r))
    assert not np.array_equal(to_np(draw(L.Generator().manual_seed(99))), to_np(r))
    L.manual_seed(7)
    a = to_np(draw(None))
    L.manual_seed(7)
    np.testing.assert_array_equal(to_np(draw(None)), a)


@pytest.mark.parametrize("L", LIBS)
@pytest.mark.parametrize("dtype", FLOATS)
def test_multinomial(L, dtype):
    ldt = getattr(L, dtype)
    p = L.tensor([0.1, 0.2, 0.3, 0.4], dtype=ldt)
    g = L.Generator().manual_seed(5)
    s = L.multinomial(p, 40_000, True, generator=g)
    assert s.dtype == L.int64 and tuple(s.shape) == (40_000,)
    freq = np.bincount(s.numpy(), minlength=4) / 40_000
    np.testing.assert_allclose(freq, [0.1, 0.2, 0.3, 0.4], atol=0.015)
    probs = [[1, 0, 2, 3, 4], [5, 1, 1, 1, 0], [1, 1, 1, 1, 1]]
    rows = L.tensor(probs, dtype=ldt)
    for _ in range(20):  # without replacement: distinct, never a zero-probability category
        s = rows.multinomial(4, generator=g).numpy()
        assert s.shape == (3, 4)
        for row, pr in zip(s, probs):
            assert len(set(row)) == 4 and all(pr[j] > 0 for j in row), row
    a = p.multinomial(50, True, generator=L.Generator().manual_seed(3)).numpy()
    b = p.multinomial(50, True, generator=L.Generator().manual_seed(3)).numpy()
    np.testing.assert_array_equal(a, b)
    out = L.empty(0, dtype=L.int64)
    assert L.multinomial(p, 3, out=out) is out and tuple(out.shape) == (3,)


# ---------------------------------------------------------------------------
# error inputs
@pytest.mark.parametrize("fn,exc,match", [pytest.param(*e[1:], id=e[0]) for e in ERRORS])
def test_error(fn, exc, match):
    with pytest.raises(exc, match=match):
        fn(ember)


# ---------------------------------------------------------------------------
# the table itself, checked against PyTorch (skips without torch)
@needs_torch
@pytest.mark.parametrize("fn,exc,match", [pytest.param(*e[1:], id=e[0]) for e in ERRORS])
def test_error_torch(fn, exc, match):
    """torch raises the table's exception type; ember raises the same type."""
    with pytest.raises(Exception) as info:
        fn(_torch)
    assert isinstance(info.value, exc), f"torch raised {type(info.value).__name__}: {info.value}"
    with pytest.raises(type(info.value)):
        fn(ember)


@needs_torch
@pytest.mark.parametrize("name,dtype", unsupported_params())
def test_unsupported_dtype_torch(name, dtype):
    op = OPS_BY_NAME[name]
    with pytest.raises(Exception) as info:
        unsupported_call(_torch, op, dtype)()
    assert isinstance(info.value, op.unsupported), f"torch raised {type(info.value).__name__}: {info.value}"
    with pytest.raises(type(info.value)):
        unsupported_call(ember, op, dtype)()


@needs_torch
@pytest.mark.parametrize("name,dtype", dtype_params(lambda op: True))
def test_reference_torch(name, dtype):
    """torch agrees with the NumPy references, in every variant the table claims."""
    op, fails = OPS_BY_NAME[name], Failures()
    for layout in [l for l in op.layouts if op.kind == "view" or l in ("contig", "0d")]:
        for s in op.get_samples(dtype, layout):
            if s.tile > 1 or s.desc == "big":  # nothing the small samples don't show
                continue
            s = prepare(s, layout)
            for v in op.variants:
                if v == "M" and not is_tensor_arg(s.args[op.method_self]) or \
                        v == "I" and (not is_tensor_arg(s.args[0]) or layout == "expand") \
                        or v == "O" and not out_ok(op, s) or v == "F" and s.desc == "varargs":
                    continue
                with fails.case(s, layout, f"torch {v}"):
                    reference_torch_case(op, s, layout, v)
    fails.check()


def reference_torch_case(op, s, layout, v):
    if v not in "IO":
        return run_sample(_torch, op, s, layout, v)
    args, kwargs, values = materialize(_torch, s, layout)
    expect, dt = op.expected(s, values)
    if v == "I":
        exp = inplace_expectation(op, s, expect, dt, layout)
        if isinstance(exp, Raises):
            with pytest.raises(exp.exc, match=exp or None):
                call(_torch, op, "I", args, kwargs)
            return
        assert call(_torch, op, "I", args, kwargs) is args[0]
        check(_torch, args[0], *exp, tol=op.tol, scaled=op.scaled_atol)
    else:
        out = _torch.empty(0, dtype=getattr(_torch, dt))
        assert call(_torch, op, "O", args, kwargs, out=out) is out
        check(_torch, out, expect, dt, tol=op.tol, scaled=op.scaled_atol)


@needs_torch
@pytest.mark.parametrize("name", PROMO_OPS)
def test_promotion_torch(name):
    for d1 in DTYPES:
        run_promo(_torch, name, d1)
        run_promo(_torch, "add", d1, ((5,), ()))


@needs_torch
def test_result_type_torch():
    """The promotion rules written in op_db agree with torch.result_type."""
    T = _torch
    for d1 in DTYPES:
        for d2 in DTYPES:
            assert T.promote_types(getattr(T, d1), getattr(T, d2)) == getattr(T, promote_types(d1, d2))
            assert T.can_cast(getattr(T, d1), getattr(T, d2)) == can_cast(d1, d2)
            for n1, n2 in ((1, 1), (1, 0), (0, 1), (0, 0)):
                a, b = T.ones([2] * n1, dtype=getattr(T, d1)), T.ones([2] * n2, dtype=getattr(T, d2))
                assert T.result_type(a, b) == getattr(T, result_type((d1, n1), (d2, n2))), (d1, n1, d2, n2)
        for s in (2, 2.5, True, 300):
            for n in (0, 1):
                assert T.result_type(T.ones([2] * n, dtype=getattr(T, d1)), s) == \
                    getattr(T, result_type((d1, n), s)), (d1, n, s)


@needs_torch
@pytest.mark.parametrize("sym,fn,name,exc", UNOPS, ids=[u[0] for u in UNOPS])
def test_unary_operator_torch(sym, fn, name, exc):
    for dtype in DTYPES:
        run_unary_operator(_torch, fn, name, exc, dtype)


@needs_torch
@pytest.mark.parametrize("sym,fn,name", BINOPS, ids=[b[0] for b in BINOPS])
def test_binary_operator_torch(sym, fn, name):
    op = OPS_BY_NAME[name]
    for dtype in op.dtypes:
        for reflected in (False, True):
            for s in operator_samples(op, dtype, reflected):
                with about(s, "", f"torch operator {sym}"):
                    args, _, values = materialize(_torch, s, "contig")
                    if reflected and sym in REFLECTED:
                        expect, dt = OPS_BY_NAME[REFLECTED[sym]].expected(Sample(s.args[::-1]), values[::-1])
                    else:
                        expect, dt = op.expected(s, values)
                    check(_torch, fn(*args), expect, dt, scaled=op.scaled_atol)
