"""The op test table (DESIGN.md §9): one OpInfo per op of csrc/ops/ops.def.

Each entry names the op, a reference written with NumPy/math (never ember),
the dtypes torch supports for it (and what torch raises for the others), a
sample-input generator, the variants torch has (F: torch.op, M: Tensor.op,
I: Tensor.op_, O: out=) and, for the elementwise ops, the result-dtype rule.
Error inputs with the exception torch raises are at the bottom (ERRORS).

Inputs are described without ember: a sample holds `TS` (tensor spec: NumPy
values already rounded to the dtype, plus the dtype name) and Python values.
tests/test_ops.py turns them into ember tensors in a given memory layout
(and into torch tensors, when torch is installed, to check this table).
This file imports NumPy only.
"""
import math
import operator
import zlib
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import numpy as np

# ---------------------------------------------------------------------------
# dtypes
DTYPES = ("bool", "uint8", "int8", "int16", "int32", "int64",
          "float16", "bfloat16", "float32", "float64")
INTS = DTYPES[1:6]
FLOATS = DTYPES[6:]
NUMERIC = DTYPES[1:]
INT_BOOL = DTYPES[:6]
# complex dtypes are swept separately (OpInfo.complex_dtypes, test_ops.test_complex_sweep):
# DTYPES, the real ones, is what every other sweep and the unsupported-dtype checks walk
COMPLEX = ("complex64", "complex128")
NP = {"bool": np.bool_, "uint8": np.uint8, "int8": np.int8, "int16": np.int16,
      "int32": np.int32, "int64": np.int64, "float16": np.float16, "float32": np.float32,
      "float64": np.float64, "complex64": np.complex64,
      "complex128": np.complex128}  # bfloat16 values live in float64 arrays (see quantize)
ITEMSIZE = {"bool": 1, "uint8": 1, "int8": 1, "int16": 2, "int32": 4, "int64": 8,
            "float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "complex64": 8, "complex128": 16}
BF16_MAX = 3.3895313892515355e38
LAYOUTS = ("contig", "T", "slice", "expand", "0d", "empty")


def is_float(d):
    return d in FLOATS


def is_complex(d):
    return d in COMPLEX


def category(d):
    return 0 if d == "bool" else 3 if is_complex(d) else 2 if is_float(d) else 1


def _complex_promote(a, b):
    """torch: a complex dtype with any other takes the wider of the float precisions
    (complex64 with float64 is complex128; integers and half types do not widen it)."""
    prec = {"complex128": 8, "float64": 8}
    return "complex128" if max(prec.get(a, 4), prec.get(b, 4)) == 8 else "complex64"


def finfo_max(d):
    return BF16_MAX if d == "bfloat16" else float(np.finfo(NP[d]).max)


# ---------------------------------------------------------------------------
# torch's type promotion, written from its documented rules
def promote_types(a, b):
    if a == b:
        return a
    if a == "bool" or b == "bool":
        return b if a == "bool" else a
    ca, cb = category(a), category(b)
    if ca == 3 or cb == 3:
        return _complex_promote(a, b)
    if ca != cb:
        return a if ca > cb else b
    if ca == 2:  # float16 + bfloat16 -> float32; else the wider
        if {a, b} == {"float16", "bfloat16"}:
            return "float32"
        return max(a, b, key=ITEMSIZE.get)
    if "uint8" in (a, b):  # uint8 with a signed int: int16 at least
        other = b if a == "uint8" else a
        return "int16" if other == "int8" else other
    return max(a, b, key=ITEMSIZE.get)


def _scalar_dtype(x):
    if isinstance(x, (bool, np.bool_)):
        return "bool"
    if isinstance(x, (int, np.integer)):
        return "int64"
    if isinstance(x, complex):
        return "complex128"
    return "float64"


def _combine(higher, lower):
    """torch's combine_categories (None: no operand of that kind)."""
    if higher is not None and lower is not None and category(lower) == 3 > category(higher):
        return promote_types(higher, lower)  # a complex 0-d tensor or scalar makes real tensors complex
    if higher is not None and (is_float(higher) or is_complex(higher)):
        return higher
    if lower is not None and (higher == "bool" or is_float(lower)):
        return lower if higher is None else promote_types(higher, lower)
    return higher if higher is not None else lower


def result_type(*operands):
    """Operands: TS, (dtype, ndim) pairs or Python numbers (None is ignored).
    Tensors with dims decide; 0-d tensors and Python scalars (weak: a float
    scalar counts as the default float32) only matter when of a higher
    category."""
    dim = zero = wrapped = None
    for o in operands:
        if o is None:
            continue
        if isinstance(o, TS):
            o = (o.dtype, o.values.ndim)
        if isinstance(o, tuple):
            if o[1] > 0:
                dim = o[0] if dim is None else promote_types(dim, o[0])
            else:
                zero = o[0] if zero is None else promote_types(zero, o[0])
        else:
            d = _scalar_dtype(o)
            d = {"float64": "float32", "complex128": "complex64"}.get(d, d)  # weak: the default precision
            wrapped = d if wrapped is None else promote_types(wrapped, d)
    return _combine(dim, _combine(zero, wrapped))


def can_cast(frm, to):
    """torch.can_cast: no float -> integral, no non-bool -> bool."""
    return not (category(frm) > category(to) or (frm != "bool" and to == "bool"))


# ---------------------------------------------------------------------------
# values
def bf16_round(x):
    """Round to the nearest bfloat16 (ties to even), returned as float64."""
    f = np.asarray(x, np.float64).astype(np.float32)
    u = f.view(np.uint32).astype(np.uint64)
    u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    r = u.astype(np.uint32).view(np.float32).astype(np.float64)
    return np.where(np.isnan(f), np.nan, r)


def quantize(x, dtype):
    """Values as `dtype` holds them: ints wrap and truncate, floats round.
    Floats come back as float64 (exact), others in their NumPy dtype."""
    x = np.asarray(x)
    with np.errstate(all="ignore"):
        if dtype == "bfloat16":
            return bf16_round(x)
        if is_complex(dtype):
            return x.astype(NP[dtype]).astype(np.complex128)
        if is_float(dtype):
            return x.astype(NP[dtype]).astype(np.float64)
        if dtype == "bool":
            return x.astype(bool)
        if x.dtype.kind == "f":
            x = np.trunc(x)
            x = np.where(np.isfinite(x), x, 0).astype(np.int64)
        return x.astype(NP[dtype])


class TS:
    """A tensor spec: values (rounded to dtype) and the dtype's name.
    `lay`: the test may give it the layout under test."""

    def __init__(self, values, dtype, lay=True, exact=False):
        self.values = np.asarray(values) if exact else quantize(values, dtype)
        self.dtype = dtype
        self.lay = lay

    @property
    def shape(self):
        return self.values.shape

    def __repr__(self):
        return f"TS({self.dtype}{list(self.shape)})"


class DT(str):
    """A dtype argument (becomes ember.<name> / torch.<name>)."""


@dataclass
class Sample:
    args: tuple
    kwargs: dict = field(default_factory=dict)
    desc: str = ""
    tile: int = 1  # tensors repeat their values this many times (big inputs, cheap references)

    def __repr__(self):
        return f"Sample{self.args!r} {self.kwargs!r} {self.desc}"


def rng_for(*key):
    """A generator seeded by the key: every sample is the same in every run."""
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def int_range(dtype):
    if dtype == "bool":
        return 0, 1
    i = np.iinfo(NP[dtype])
    return int(i.min), int(i.max)


def gen_values(rng, dtype, shape, dom=(-5, 5)):
    """Random values in dom = (lo, hi[, 'nz']) ('nz': away from zero)."""
    lo, hi = dom[0], dom[1]
    nz = "nz" in dom
    if dtype == "bool":
        return np.ones(shape, bool) if (nz or lo > 0) else rng.random(shape) < 0.5
    if is_complex(dtype):  # both parts in dom; 'nz': |z| >= 0.5
        v = rng.uniform(lo, hi, shape) + 1j * rng.uniform(lo, hi, shape)
        if nz:
            v = np.where(np.abs(v) < 0.5, v + 0.5 * np.exp(1j * np.angle(v)), v)
        return quantize(v, dtype)
    if not is_float(dtype):
        tmin, tmax = int_range(dtype)
        ilo, ihi = max(math.ceil(lo), tmin, -9), min(math.floor(hi), tmax, 9)
        v = rng.integers(ilo, ihi + 1, shape)
        if nz:
            v = np.where(v == 0, 1 if ihi >= 1 else -1, v)
        return quantize(v, dtype)
    v = rng.uniform(lo, hi, shape)
    if nz:
        v = np.where(np.abs(v) < 0.5, np.copysign(0.5, v) + v, v)
    return quantize(v, dtype)


SPECIALS = [np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 1.0, -1.0, 3.75, -7.25]
SIGNED_SPECIALS = SPECIALS[1:]  # a NaN's sign bit is not portable (conversions may set it)


def layout_shape(layout, base=(3, 4)):
    return {"0d": (), "empty": (0,) + tuple(base[1:])}.get(layout, tuple(base))


# ---------------------------------------------------------------------------
# the OpInfo
@dataclass
class OpInfo:
    name: str
    ref: Callable                     # NumPy reference
    dtypes: tuple = DTYPES            # real dtypes torch supports
    complex_dtypes: tuple = ()        # complex ones (test_ops.test_complex_sweep; NumPy's complex reference)
    unsupported: type = NotImplementedError  # what torch raises for the others
    variants: str = "FMIO"            # F torch.op, M Tensor.op, I Tensor.op_, O out=
    kind: str = "ew"                  # ew | view | fill | new | mm | random | reduce
    layouts: tuple = LAYOUTS
    samples: Callable = None          # (op, dtype, layout) -> [Sample]
    # elementwise
    rule: Any = "same"                # same | float | bool | logical | f64 | callable(kwargs)
    doms: Any = None                  # per tensor argument domains, or callable(dtype)
    nargs: int = 1                    # tensor arguments of the main sample
    scalars: tuple = ()               # Python scalars allowed as the last argument
    rscalars: tuple = ()              # ... as the first argument
    kwargs: Callable = None           # dtype -> [kwargs dicts]
    promote: tuple = None             # argument positions taking part in promotion
    extra: tuple = ()                 # implicit operands of the promotion (square: 2)
    specials: Any = True              # add nan/inf/0 grids for float dtypes (or: the values to use)
    edges: Callable = None            # dtype -> [Sample]
    inplace_exact: bool = False       # in-place needs result dtype == self dtype
    method_self: int = 0              # which argument is self in the method form
    # views / others
    view: Any = None                  # True: result aliases input; None: don't check
    tol: dict = None                  # dtype -> (rtol, atol), overrides test_ops.TOL
    scaled_atol: bool = False         # half types round operands on the way (a +- alpha*b): atol x |result|max
    check_values: bool = True
    expect: Callable = None           # (op, sample, values) -> (expected, dtype), replaces the default
    call: Callable = None             # (L, *args, **kw) -> result: how an internal op is reached
    fn: Callable = None               # lib -> the function, where it is not lib.<name> (nn.functional)
    out_ok: Callable = None           # sample -> whether torch has out= for it (sum: only with dim)
    inplace_raises: Callable = None   # (dtype, kwargs, shape) -> the exception torch's in-place form raises

    def rule_for(self, kwargs):
        return self.rule(kwargs) if callable(self.rule) else self.rule

    def get_samples(self, dtype, layout):
        return self.samples(self, dtype, layout)

    def expected(self, sample, values):
        """(expected values, expected dtype name) from the NumPy reference;
        `values` are the NumPy values of the sample's arguments (TS already
        replaced by their arrays)."""
        if self.expect:
            return self.expect(self, sample, values)
        if self.kind == "ew":
            return ew_expected(self, sample, values)
        out = self.ref(*values, **{k: (str(v) if isinstance(v, DT) else v)
                                   for k, v in sample.kwargs.items()})
        first = next(a for a in sample.args if isinstance(a, TS))
        dt = sample.kwargs.get("dtype") or first.dtype
        if isinstance(out, (list, tuple)):
            return tuple(quantize(o, dt) for o in out), dt
        return quantize(out, dt), dt


def ew_expected(op, sample, values):
    kw = sample.kwargs
    rule = op.rule_for(kw)
    pos = op.promote if op.promote is not None else range(len(sample.args))
    common = result_type(*[sample.args[i] for i in pos if i < len(sample.args)], *op.extra)
    compute = {"float": "float32" if not (is_float(common) or is_complex(common)) else common,
               "f64": "float64"}.get(rule, common)
    args = [quantize(v, compute) if (i in pos and v is not None and rule != "logical") else v
            for i, v in enumerate(values)]
    with np.errstate(all="ignore"):
        out = op.ref(*args, **kw)
    out_dt = "bool" if rule in ("bool", "logical") else compute
    return quantize(out, out_dt), out_dt


# ---------------------------------------------------------------------------
# sample generators
def _doms(op, dtype):
    d = op.doms(dtype) if callable(op.doms) else op.doms
    return list(d) if d else [(-5, 5)] * op.nargs


def ew_samples(op, dtype, layout):
    rng = rng_for(op.name, dtype, layout)
    shape = layout_shape(layout)
    doms = _doms(op, dtype)
    kws = op.kwargs(dtype) if op.kwargs else [{}]
    main = tuple(TS(gen_values(rng, dtype, shape, d), dtype) for d in doms)
    out = [Sample(main, kw, "main") for kw in kws]
    if layout in ("contig", "slice"):  # 70787 elements: the vectorized loops and the OpenMP split
        big = tuple(TS(gen_values(rng, dtype, (997,), d), dtype) for d in doms)
        out.append(Sample(big, kws[-1], "big", tile=71))
    if layout != "contig":
        return out
    n = len(doms)
    if n >= 2:  # broadcasting (3,1) op (4,)
        shapes = [(3, 1), (4,)] + [(1, 4)] * (n - 2)
        out.append(Sample(tuple(TS(gen_values(rng, dtype, s, d), dtype, False)
                                for s, d in zip(shapes, doms)), kws[-1], "broadcast"))
    t0 = TS(gen_values(rng, dtype, (5,), doms[0]), dtype, False)
    for s in op.scalars:
        rest = tuple(TS(gen_values(rng, dtype, (5,), d), dtype, False) for d in doms[1:-1])
        out.append(Sample((t0,) + rest + (s,), kws[0], "scalar"))
    for s in op.rscalars:
        out.append(Sample((s, TS(gen_values(rng, dtype, (5,), doms[-1]), dtype, False)), kws[0], "rscalar"))
    if op.specials is not False and is_float(dtype) and n <= 2:
        sp = np.array(SPECIALS if op.specials is True else op.specials)
        grid = (sp,) if n == 1 else (sp[:, None], sp[None, :])
        out += [Sample(tuple(TS(g, dtype, False) for g in grid), kw, "specials") for kw in kws]
    if op.edges:
        out += [replace(s, desc=s.desc or "edge") for s in op.edges(dtype)]
    return out


def _T(v, dtype):
    """A tensor that stays contiguous whatever the layout under test."""
    return TS(np.array(v), dtype, False)


def _fixed(ts):
    return TS(ts.values, ts.dtype, False, exact=True)


# ---------------------------------------------------------------------------
# references where NumPy differs from torch
def _sign(x):
    return x if x.dtype == bool else np.where(np.isnan(x), 0, np.sign(x)).astype(x.dtype)


def _floor_div(a, b):
    if a.dtype.kind != "f":
        return a // b
    # c10's div_floor_floating
    mod = np.fmod(a, b)
    div = (a - mod) / b
    div = np.where((mod != 0) & ((b < 0) != (mod < 0)), div - 1, div)
    fl = np.floor(div)
    fl = np.where(div - fl > 0.5, fl + 1, fl)
    res = np.where(div != 0, fl, np.copysign(0.0, a / b))
    return np.where(b == 0, a / b, res)


def _remainder(a, b):
    if a.dtype.kind != "f":
        return np.mod(a, b)
    mod = np.fmod(a, b)
    return np.where((mod != 0) & ((b < 0) != (mod < 0)), mod + b, mod)


def _trunc_div(a, b):
    if a.dtype.kind != "f":
        q = np.abs(a.astype(np.int64)) // np.abs(b.astype(np.int64))
        return (np.sign(a.astype(np.int64)) * np.sign(b.astype(np.int64)) * q).astype(a.dtype)
    return np.trunc(a / b)


def _div(a, b, rounding_mode=None):
    return {None: lambda: a / b, "trunc": lambda: _trunc_div(a, b),
            "floor": lambda: _floor_div(a, b)}[rounding_mode]()


def _pow(a, b):
    if a.dtype.kind == "f":
        return np.power(a, b)
    b = np.asarray(b)
    r = np.power(a, np.where(b < 0, 0, b).astype(a.dtype))
    one = np.ones_like(r)
    neg = np.where(a == 1, one, np.where(a == -1, np.where(b % 2 == 0, one, -one), 0 * one))
    return np.where(b < 0, neg, r)


def _shift(a, b, left):
    bits = a.dtype.itemsize * 8
    bad = (b < 0) | (b >= bits)
    bb = np.where(bad, 0, b).astype(a.dtype)
    r = np.left_shift(a, bb) if left else np.right_shift(a, bb)
    return np.where(bad, 0 if left else np.where(a < 0, -1, 0), r).astype(a.dtype)


_erf = np.vectorize(math.erf, otypes=[float])
_erfc = np.vectorize(math.erfc, otypes=[float])


def _erfinv(y):
    """Newton on math.erf, from a good start (scipy-free)."""
    y = np.asarray(y, float)
    inside = np.abs(y) < 1
    yy = np.where(inside, y, 0.0)
    a = 0.147
    ln = np.log(1 - yy * yy)
    t = 2 / (np.pi * a) + ln / 2
    x = np.sign(yy) * np.sqrt(np.sqrt(t * t - ln / a) - t)
    for _ in range(6):
        x = x - (_erf(x) - yy) / (2 / math.sqrt(math.pi) * np.exp(-x * x))
    return np.where(inside, x, np.where(np.abs(y) == 1, np.sign(y) * np.inf, np.nan))


def _nan_to_num(x, nan=0.0, posinf=None, neginf=None, *, _dt):
    if x.dtype.kind != "f":
        return x
    big = finfo_max(_dt)
    r = np.where(np.isnan(x), nan, x)
    r = np.where(np.isposinf(x), big if posinf is None else posinf, r)
    return np.where(np.isneginf(x), -big if neginf is None else neginf, r)


def _clamp(x, lo=None, hi=None):
    if lo is not None:
        x = np.maximum(x, lo)
    if hi is not None:
        x = np.minimum(x, hi)
    return x


def _lerp(a, b, w):
    return np.where(np.abs(w) < 0.5, a + w * (b - a), b - (b - a) * (1 - w))


def _cast(v, like):
    return np.asarray(v).astype(like.dtype)


def _f(fn):  # float-valued predicate on any input
    return lambda x: fn(np.asarray(x, np.float64))


# ---------------------------------------------------------------------------
# elementwise entries
def EW(name, ref, **kw):
    kw.setdefault("samples", ew_samples)
    return OpInfo(name, ref, **kw)


def _alpha(dtype):
    return [{}] if dtype == "bool" else [{}, {"alpha": 2}] + ([{"alpha": -1.5}] if is_float(dtype) else [])


NZ = (-5, 5, "nz")
SCAL = (2, 2.5, True)


def _pow_doms(dtype):
    return [(-3, 3), (0, 4)] if not is_float(dtype) else [(0.1, 3), (-2, 2)]


def _pow_edges(dtype):
    if dtype in ("int8", "int16", "int32", "int64"):
        return [Sample((_T([-2, 1, -1, 2, 3, -1, 5], dtype), _T([-1, -2, -3, -2, 0, -4, -1], dtype)))]
    return []


def _shift_edges(dtype):
    bits = ITEMSIZE[dtype] * 8
    a = [1, 3, 5, 7, 2]
    b = [bits - 1, bits, bits + 3, 0, 1]
    out = [Sample((_T(a, dtype), _T(b, dtype)))]
    if dtype != "uint8":
        out.append(Sample((_T([-1, -8, -5, 6], dtype), _T([1, bits, bits + 1, -1], dtype))))
    return out


def _div_kwargs(dtype):
    return [{}] if dtype == "bool" else [{}, {"rounding_mode": "trunc"}, {"rounding_mode": "floor"}]


def _round_kwargs(dtype):
    return [{}, {"decimals": 1}, {"decimals": -1}] if is_float(dtype) else [{}]


def _round_edges(dtype):
    if not is_float(dtype):
        return []
    v = _T(np.arange(-24, 25) / 8.0, dtype)  # ties at 1 decimal are exact
    return [Sample((v,), {"decimals": 1}), Sample((_T([15., 25., 35., -25., 5.], dtype),), {"decimals": -1})]


def _clamp_edges(dtype):
    out = [Sample((_T([0, 1, 3, 5, 7, 9], dtype), 1, 5)), Sample((_T([0, 1, 5, 9], dtype), 5, 1), desc="min>max"),
           Sample((_T([0, 1, 5, 9], dtype), None, 5)), Sample((_T([0, 1, 5, 9], dtype), 3, None)),
           Sample((_T([0, 1, 5, 9], dtype), _T(2, dtype), _T([3, 4, 4, 4], dtype)))]
    if is_float(dtype):
        sp = _T(SPECIALS, dtype)
        out += [Sample((sp, -1.5, 2.5)), Sample((_T([0.5, 1, 5], dtype), float("nan"), 2.0)),
                Sample((_T([0.5, 1, 5], dtype), 0.0, float("nan"))), Sample((_T([1, 2, 3], "int64"), 1.5, None))]
    return out


def _lerp_samples(op, dtype, layout):
    rng = rng_for(op.name, dtype, layout)
    sh = layout_shape(layout)
    a, b, w = (TS(gen_values(rng, dtype, sh, d), dtype) for d in [(-5, 5), (-5, 5), (-0.5, 1.5)])
    out = [Sample((a, b, 0.25)), Sample((a, b, 0.75)), Sample((a, b, w))]
    if layout == "contig":
        out.append(Sample((_fixed(a), _T(gen_values(rng, dtype, (4,)), dtype), 0.5), desc="broadcast"))
    return out


def _nan_to_num_expected(op, sample, values):  # the defaults depend on the dtype
    dt = sample.args[0].dtype
    return quantize(_nan_to_num(values[0], **sample.kwargs, _dt=dt), dt), dt


def _nan_to_num_kwargs(dtype):
    return [{}, {"nan": 1.5, "posinf": 100.0, "neginf": -100.0}, {"posinf": 1e10}]


def _where_samples(op, dtype, layout):
    rng = rng_for(op.name, dtype, layout)
    sh = layout_shape(layout)
    c = TS(rng.random(sh) < 0.5, "bool")
    x, y = (TS(gen_values(rng, dtype, sh), dtype) for _ in range(2))
    out = [Sample((c, x, y))]
    if layout == "contig":
        c, x, y = _fixed(c), _fixed(x), _fixed(y)
        bcast = (_T(rng.random((3, 1)) < 0.5, "bool"), _T(gen_values(rng, dtype, (4,)), dtype), _T(y.values[:1], dtype))
        out += [Sample(bcast, desc="broadcast"),
                Sample((c, x, 2.5)), Sample((c, 2, y)), Sample((c, x, _T(3, "float64")), desc="0-d other")]
    return out


def _addc_kwargs(dtype):
    return [{}, {"value": 2}] + ([{"value": -0.5}] if is_float(dtype) else [])


UNARY_FLOAT = {  # name: (reference, domain)
    "exp": (np.exp, (-5, 5)), "exp2": (np.exp2, (-5, 5)), "expm1": (np.expm1, (-5, 5)),
    "log": (np.log, (0.1, 5)), "log2": (np.log2, (0.1, 5)), "log10": (np.log10, (0.1, 5)),
    "log1p": (np.log1p, (-0.9, 5)), "sqrt": (np.sqrt, (0, 5)), "rsqrt": (lambda x: 1 / np.sqrt(x), (0.1, 5)),
    "sin": (np.sin, (-5, 5)), "cos": (np.cos, (-5, 5)), "tan": (np.tan, (-1.4, 1.4)),
    "asin": (np.arcsin, (-0.95, 0.95)), "acos": (np.arccos, (-0.95, 0.95)), "atan": (np.arctan, (-5, 5)),
    "sinh": (np.sinh, (-5, 5)), "cosh": (np.cosh, (-5, 5)), "tanh": (np.tanh, (-5, 5)),
    "asinh": (np.arcsinh, (-5, 5)), "acosh": (np.arccosh, (1.05, 5)), "atanh": (np.arctanh, (-0.95, 0.95)),
    "sigmoid": (lambda x: 1 / (1 + np.exp(-x)), (-5, 5)), "erf": (_erf, (-3, 3)), "erfc": (_erfc, (-3, 3)),
    "erfinv": (_erfinv, (-0.95, 0.95)), "reciprocal": (lambda x: 1 / x, NZ),
}

UNARY_SAME = {  # name: (reference, dtypes)
    "neg": (np.negative, NUMERIC), "negative": (np.negative, NUMERIC),
    "abs": (np.abs, NUMERIC), "absolute": (np.abs, NUMERIC),
    "sign": (_sign, DTYPES), "sgn": (_sign, DTYPES),
    "floor": (np.floor, NUMERIC), "ceil": (np.ceil, NUMERIC), "trunc": (np.trunc, NUMERIC),
    "fix": (np.trunc, NUMERIC), "frac": (lambda x: x - np.trunc(x), FLOATS),
    "relu": (lambda x: np.maximum(x, _cast(0, x)), NUMERIC),
    "bitwise_not": (np.invert, INT_BOOL), "logical_not": (np.logical_not, DTYPES),
}

UNARY_BOOL = {"isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite, "isposinf": np.isposinf,
              "isneginf": np.isneginf, "signbit": np.signbit}

OPS = []
OPS += [EW(n, r, dtypes=d, rule="logical" if n == "logical_not" else "same",
           variants="FMI" if n == "relu" else "FMIO") for n, (r, d) in UNARY_SAME.items()]
OPS += [
    EW("square", lambda x: x * x, extra=(2,)),
    EW("round", lambda x, decimals=0: np.round(x, decimals), dtypes=NUMERIC, kwargs=_round_kwargs,
       edges=_round_edges),
    EW("positive", lambda x: x, dtypes=NUMERIC, variants="FM"),
]
OPS += [EW(n, r, rule="float", doms=[d]) for n, (r, d) in UNARY_FLOAT.items()]
OPS += [EW(n, _f(r), rule="bool", variants="FM" + ("O" if n in ("isposinf", "isneginf", "signbit") else ""),
           specials=SIGNED_SPECIALS if n == "signbit" else True)
        for n, r in UNARY_BOOL.items()]

OPS += [
    # (no True with sub/rsub: torch refuses bool operands to subtraction)
    EW("add", lambda a, b, alpha=1: a + b * _cast(alpha, b), nargs=2, kwargs=_alpha, scaled_atol=True,
       scalars=SCAL + (300,), rscalars=(2, 2.5)),
    EW("sub", lambda a, b, alpha=1: a - b * _cast(alpha, b), nargs=2, dtypes=NUMERIC, kwargs=_alpha, scaled_atol=True,
       scalars=(2, 2.5, 300), rscalars=(2, 2.5)),
    EW("rsub", lambda a, b, alpha=1: b - a * _cast(alpha, a), nargs=2, dtypes=NUMERIC, kwargs=_alpha, scaled_atol=True,
       scalars=(2, 2.5), variants="F"),
    EW("mul", operator.mul, nargs=2, scalars=SCAL + (300,), rscalars=(2, 2.5)),
    EW("div", _div, nargs=2, doms=[(-5, 5), NZ], rule=lambda kw: "same" if kw.get("rounding_mode") else "float",
       kwargs=_div_kwargs, scalars=SCAL, rscalars=(2, 2.5)),
    EW("true_divide", operator.truediv, nargs=2, doms=[(-5, 5), NZ], rule="float", scalars=SCAL, rscalars=(2, 2.5)),
    EW("floor_divide", _floor_div, nargs=2, dtypes=NUMERIC, doms=[(-5, 5), NZ], scalars=(2, 2.5), rscalars=(7, 2.5)),
    EW("remainder", _remainder, nargs=2, dtypes=NUMERIC, doms=[(-5, 5), NZ], scalars=(2, -2, 2.5),
       rscalars=(7, -2.5)),
    EW("fmod", np.fmod, nargs=2, dtypes=NUMERIC, doms=[(-5, 5), NZ], scalars=(2, -2, 2.5)),
    EW("pow", _pow, nargs=2, dtypes=NUMERIC, doms=_pow_doms, scalars=(2, 0.5, 2.5), rscalars=(2, 2.5),
       edges=_pow_edges),
    EW("float_power", _pow, nargs=2, rule="f64", doms=_pow_doms, scalars=(2, 0.5), rscalars=(2, 1.5),
       edges=_pow_edges, inplace_exact=True),
    EW("atan2", np.arctan2, nargs=2, rule="float"),
    EW("hypot", np.hypot, nargs=2, dtypes=FLOATS),
    EW("copysign", np.copysign, nargs=2, rule="float", scalars=(2, -1.5), specials=SIGNED_SPECIALS),
    EW("logaddexp", np.logaddexp, nargs=2, dtypes=FLOATS, variants="FMO"),
    EW("maximum", np.maximum, nargs=2, variants="FMO"),
    EW("minimum", np.minimum, nargs=2, variants="FMO"),
    EW("fmax", np.fmax, nargs=2, variants="FMO"),
    EW("fmin", np.fmin, nargs=2, variants="FMO"),
]
OPS += [EW(n, getattr(operator, n), nargs=2, rule="bool", scalars=SCAL)
        for n in ("eq", "ne", "lt", "le", "gt", "ge")]
OPS += [EW(f"bitwise_{n}", getattr(np, f"bitwise_{n}"), nargs=2, dtypes=INT_BOOL, scalars=(2, True), rscalars=(6,))
        for n in ("and", "or", "xor")]
OPS += [EW(f"bitwise_{d}_shift", (lambda a, b, _l=d == "left": _shift(a, b, _l)), nargs=2, dtypes=INTS,
           doms=[(-9, 9), (0, 3)], scalars=(2,), rscalars=(3,), edges=_shift_edges) for d in ("left", "right")]
OPS += [EW(f"logical_{n}", getattr(np, f"logical_{n}"), nargs=2, rule="logical") for n in ("and", "or", "xor")]
OPS += [
    EW("nan_to_num", _nan_to_num, kwargs=_nan_to_num_kwargs, expect=_nan_to_num_expected),
    EW("clamp", _clamp, nargs=3, dtypes=NUMERIC, doms=[(-5, 5), (-3, 0), (0, 3)], edges=_clamp_edges, specials=False),
    EW("clip", _clamp, nargs=3, dtypes=NUMERIC, doms=[(-5, 5), (-3, 0), (0, 3)], edges=_clamp_edges, specials=False),
    EW("clamp_min", lambda x, lo: np.maximum(x, lo), nargs=2, scalars=(3, 1.5), variants="FMI"),
    EW("clamp_max", lambda x, hi: np.minimum(x, hi), nargs=2, scalars=(3, 1.5), variants="FMI"),
    EW("where", np.where, samples=_where_samples, promote=(1, 2), variants="FMO", method_self=1),
    EW("lerp", _lerp, dtypes=FLOATS, samples=_lerp_samples, scaled_atol=True),
    EW("addcmul", lambda a, b, c, value=1: a + _cast(value, a) * b * c, nargs=3, dtypes=NUMERIC, kwargs=_addc_kwargs,
       specials=False, scaled_atol=True),
    EW("addcdiv", lambda a, b, c, value=1: a + _cast(value, a) * (b / c), nargs=3, dtypes=FLOATS,
       doms=[(-5, 5), (-5, 5), NZ], kwargs=_addc_kwargs, unsupported=RuntimeError, specials=False, scaled_atol=True),
]


# special functions, angles, gcd / lcm, powers of two: references from Python's
# math module and NumPy (no SciPy here). digamma: central differences of
# math.lgamma, Richardson-extrapolated, after shifting x up past 5.
def _lgamma1(v):
    if math.isnan(v):
        return v
    if math.isinf(v) or (v <= 0 and v == math.floor(v)):
        return math.inf
    return math.lgamma(v)


def _digamma1(v):
    if math.isnan(v) or v == math.inf:
        return v
    if v == 0:
        return math.copysign(math.inf, -v)
    if v < 0:
        if math.isinf(v) or v == math.floor(v):
            return math.nan
        return _digamma1(1 - v) - math.pi / math.tan(math.pi * v)
    acc = 0.0
    while v < 5:
        acc -= 1 / v
        v += 1

    def d(h):
        return (math.lgamma(v + h) - math.lgamma(v - h)) / (2 * h)
    d1, d2, d3 = d(0.2), d(0.1), d(0.05)
    r1, r2 = (4 * d2 - d1) / 3, (4 * d3 - d2) / 3
    return acc + (16 * r2 - r1) / 15


_lgamma = np.vectorize(_lgamma1, otypes=[float])
_digamma = np.vectorize(_digamma1, otypes=[float])


def _xlogy(a, b):
    with np.errstate(all="ignore"):
        return np.where((a == 0) & ~np.isnan(b), 0 * a, a * np.log(b))


def _heaviside(a, v):
    return np.where(a == 0, v, (a > 0).astype(v.dtype))


def _i1_1(v):
    """I1(v) = sum_k (v/2)^(2k+1) / (k! (k+1)!), for the |v| <= 5 the samples use."""
    if math.isnan(v):
        return v
    term = total = v / 2
    for k in range(1, 60):
        term *= (v / 2) ** 2 / (k * (k + 1))
        total += term
    return total


def _hurwitz_zeta1(s, q):
    """zeta(s, q) by Euler-Maclaurin: 20 direct terms, the integral tail and three Bernoulli corrections."""
    n = 20
    total = sum((q + k) ** -s for k in range(n))
    a = q + n
    total += a ** (1 - s) / (s - 1) + a ** -s / 2
    rising, bern = s, (1 / 6, -1 / 30, 1 / 42, -1 / 30)
    fact = 2.0
    for j, b in enumerate(bern, 1):
        total += b / fact * rising * a ** (-s - 2 * j + 1)
        rising *= (s + 2 * j - 1) * (s + 2 * j)
        fact *= (2 * j + 1) * (2 * j + 2)
    return total


def _polygamma(x, n):
    x = np.asarray(x, np.float64)
    if n == 0:
        return _digamma(x)
    return np.vectorize(lambda v: (-1) ** (n + 1) * math.factorial(n) * _hurwitz_zeta1(n + 1, v), otypes=[float])(x)


def _mvlgamma(x, p):
    x = np.asarray(x, np.float64)
    return p * (p - 1) / 4 * math.log(math.pi) + sum(_lgamma(x - i / 2) for i in range(p))


OPS += [
    EW("_special_i1", lambda x: np.vectorize(_i1_1, otypes=[float])(np.asarray(x, np.float64)), rule="float",
       doms=[(-5, 5)], specials=False, variants="FO", tol={"float32": (1e-5, 1e-5)}, fn=lambda L: L.special.i1),
    EW("mvlgamma", lambda x, p: _mvlgamma(x, p), rule="float", doms=[(1.6, 6)], specials=False,
       dtypes=tuple(d for d in DTYPES if d != "bool"), unsupported=RuntimeError, kwargs=lambda dt: [{"p": 1}, {"p": 3}],
       tol={"float32": (1e-5, 1e-5), "float64": (1e-10, 1e-10)}),
    EW("polygamma", lambda x, n: _polygamma(x, n), rule="float", doms=[(0.5, 5)], specials=False, variants="FO",
       kwargs=lambda dt: [{"n": 0}, {"n": 1}, {"n": 3}], fn=lambda L: lambda x, n, **kw: L.polygamma(n, x, **kw),
       tol={"float32": (1e-4, 1e-4), "float64": (1e-9, 1e-9)}),
    EW("lgamma", lambda x: _lgamma(np.asarray(x, np.float64)), rule="float", doms=[(0.1, 6)],
       tol={"float32": (1e-5, 1e-5)}),
    EW("digamma", lambda x: _digamma(np.asarray(x, np.float64)), rule="float", doms=[(0.1, 6)],
       tol={"float32": (1e-5, 1e-5), "float64": (1e-10, 1e-10)}),
    EW("i0", lambda x: np.i0(np.asarray(x, np.float64)), rule="float", doms=[(-5, 5)], specials=False),
    EW("rad2deg", np.rad2deg, rule="float"),
    EW("deg2rad", np.deg2rad, rule="float"),
    EW("ldexp", lambda a, b: a * np.exp2(b), nargs=2, rule="float", doms=[(-5, 5), (-3, 3)], specials=False),
    EW("logaddexp2", np.logaddexp2, nargs=2, dtypes=FLOATS, variants="FMO"),
    EW("xlogy", _xlogy, nargs=2, rule="float", doms=[(-5, 5), (0.1, 5)]),
    EW("heaviside", _heaviside, nargs=2),
    EW("gcd", np.gcd, nargs=2, dtypes=INTS, doms=[(-60, 60), (-60, 60)]),
    EW("lcm", np.lcm, nargs=2, dtypes=INTS, doms=[(-10, 10), (-10, 10)]),
]


# ---------------------------------------------------------------------------
# copy_ / fill_ / zero_ (write into self, return self)
def _fill_samples(op, dtype, layout):
    rng = rng_for(op.name, dtype, layout)
    self_ = TS(gen_values(rng, dtype, layout_shape(layout)), dtype)
    if op.name == "zero_":
        return [Sample((self_,))]
    if op.name == "fill_":
        vals = [2, True, -1] + ([2.5, -1.5] if is_float(dtype) else [2.7])
        return [Sample((self_, v)) for v in vals] + [Sample((self_, _T(3.5, "float64")), desc="0-d value")]
    out = [Sample((self_, TS(gen_values(rng, d, self_.shape, (0, 9)), d, self_.lay)), desc=f"from {d}")
           for d in DTYPES]
    if layout == "contig":
        out += [Sample((self_, _T(gen_values(rng, d, (4,), (0, 9)), d)), desc="broadcast") for d in ("float32", "int8")]
        out.append(Sample((self_, _T(7, dtype)), desc="0-d src"))
    return out


def _fill_ref(self_, value=None):
    return np.broadcast_to(np.zeros_like(self_) if value is None else value, self_.shape)


OPS += [OpInfo(n, _fill_ref, kind="fill", variants="M", samples=_fill_samples,
               layouts=("contig", "T", "slice", "0d", "empty")) for n in ("copy_", "fill_", "zero_")]


# ---------------------------------------------------------------------------
# views and shape ops
def torch_view_strides(oldshape, oldstride, newshape):
    """ATen's computeStride: strides for viewing (oldshape, oldstride) as
    newshape, or None when no view is possible (then view() raises)."""
    newshape = infer_size(newshape, int(np.prod(oldshape)))
    if not oldshape:
        return [1] * len(newshape)
    numel = int(np.prod(oldshape))
    if numel == 0 and tuple(oldshape) == tuple(newshape):
        return list(oldstride)
    newstride = [0] * len(newshape)
    if numel == 0:
        for d in range(len(newshape) - 1, -1, -1):
            newstride[d] = 1 if d == len(newshape) - 1 else max(newshape[d + 1], 1) * newstride[d + 1]
        return newstride
    view_d = len(newshape) - 1
    chunk_base_stride = oldstride[-1]
    tensor_numel = view_numel = 1
    for tensor_d in range(len(oldshape) - 1, -1, -1):
        tensor_numel *= oldshape[tensor_d]
        if tensor_d == 0 or (oldshape[tensor_d - 1] != 1 and
                             oldstride[tensor_d - 1] != tensor_numel * chunk_base_stride):
            while view_d >= 0 and (view_numel < tensor_numel or newshape[view_d] == 1):
                newstride[view_d] = view_numel * chunk_base_stride
                view_numel *= newshape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if tensor_d > 0:
                chunk_base_stride = oldstride[tensor_d - 1]
                tensor_numel = view_numel = 1
    return None if view_d != -1 else newstride


def infer_size(shape, numel):
    shape = list(shape)
    if -1 in shape:
        i = shape.index(-1)
        rest = int(np.prod([s for j, s in enumerate(shape) if j != i]))
        shape[i] = numel // rest if rest else 0
    return shape


def contiguous_strides(shape):
    st, acc = [], 1
    for s in reversed(shape):
        st.insert(0, acc)
        acc *= max(s, 1)
    return st


def layout_strides(shape, layout):
    """The strides tests/test_ops.py's layouts give a tensor of this shape."""
    nd = len(shape)
    if layout == "T" and nd >= 2:
        base = list(shape[:-2]) + [shape[-1], shape[-2]]
        st = contiguous_strides(base)
        return st[:-2] + [st[-1], st[-2]]
    if layout == "slice" and nd >= 1:
        st = contiguous_strides(list(shape[:-1]) + [2 * shape[-1]])
        return st[:-1] + [2]
    if layout == "expand" and nd >= 1 and shape[0] > 1:
        return [0] + contiguous_strides([1] + list(shape[1:]))[1:]
    return contiguous_strides(shape)


def _split_ref(x, split_size_or_sections, dim=0):
    n = x.shape[dim]
    if isinstance(split_size_or_sections, int):
        s = split_size_or_sections
        sizes = [min(s, n - i) for i in range(0, n, s)] if n else [0]
    else:
        sizes = list(split_size_or_sections)
        if sum(sizes) != n:
            raise ValueError("sections must add up to the size")
    return tuple(np.split(x, np.cumsum(sizes)[:-1], axis=dim))


def _chunk_ref(x, chunks, dim=0):
    n = x.shape[dim]
    return _split_ref(x, max(-(-n // chunks), 1) if n else 1, dim) if n else (x,) * chunks


def _squeeze_ref(x, dim=None):
    if dim is None:
        return np.squeeze(x)
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    dims = tuple(d % max(x.ndim, 1) for d in dims)
    return np.squeeze(x, tuple(d for d in dims if x.ndim and x.shape[d] == 1))


def _unflatten_ref(x, dim, sizes):
    dim %= x.ndim
    return x.reshape(x.shape[:dim] + tuple(sizes) + x.shape[dim + 1:])


def _flatten_ref(x, start_dim=0, end_dim=-1):
    if x.ndim == 0:
        return x.reshape(1)
    s, e = start_dim % x.ndim, end_dim % x.ndim
    return x.reshape(x.shape[:s] + (-1,) + x.shape[e + 1:]) if x.size else \
        x.reshape(x.shape[:s] + (int(np.prod(x.shape[s:e + 1])),) + x.shape[e + 1:])


def _narrow_ref(x, dim, start, length):
    start += x.shape[dim] if start < 0 else 0
    return np.take(x, range(start, start + length), axis=dim)


def _reshape_ref(x, *shape):
    shape = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
    return x.reshape(infer_size(shape, x.size))


def _swap_ref(x, d0, d1):
    return np.swapaxes(x, d0, d1) if x.ndim else x


def _expand_ref(x, *size):
    size = list(size[0] if len(size) == 1 and isinstance(size[0], (tuple, list)) else size)
    old = (1,) * (len(size) - x.ndim) + x.shape
    return np.broadcast_to(x, tuple(o if s == -1 else s for s, o in zip(size, old)))


def _nonempty(sh, sets, empty_sets):
    return empty_sets if 0 in sh else sets


def A(*args, **kwargs):
    return args, kwargs


NO_0D = LAYOUTS[:4] + ("empty",)  # for ops where 0-d inputs are errors (see ERRORS)
VIEW_ARGS = {  # name: (input shape, shape -> [A(args...)]): the 0-d and empty layouts change the shape
    "transpose": ((3, 4), lambda sh: [A(0, 1), A(-1, 0), A(0, 0)] if sh else [A(0, 0), A(-1, -1)]),
    "swapaxes": ((3, 4), lambda sh: [A(0, 1), A(1, -2)] if sh else [A(0, 0)]),
    "swapdims": ((3, 4), lambda sh: [A(0, 1), A(-1, 0)] if sh else [A(0, 0)]),
    "t": ((3, 4), lambda sh: [A()]),
    "permute": ((2, 3, 4), lambda sh: [A((2, 0, 1)), A(1, 0, 2), A((-1, -3, 1))] if sh else [A(())]),
    "squeeze": ((1, 3, 1, 4), lambda sh: [A(), A(0), A(1), A(-2), A((0, 2))] if sh else [A(), A(0)]),
    "unsqueeze": ((3, 4), lambda sh: [A(0), A(len(sh)), A(-1)]),
    "flatten": ((2, 3, 4), lambda sh: [A(), A(1), A(0, 1), A(-2, -1), A(1, 1)] if sh else [A()]),
    "unflatten": ((3, 4), lambda sh: _nonempty(sh, [A(1, (2, 2)), A(0, (3, 1)), A(-1, (-1, 2))],
                                               [A(1, (0, 5)), A(0, (1, 3))])),
    "expand": ((3, 1), lambda sh: _nonempty(sh, [A(3, 4), A((2, 3, 5)), A(-1, 2)], [A(0, 4), A((2, 0, 3))])
               if sh else [A(2, 3)]),
    "narrow": ((3, 4), lambda sh: _nonempty(sh, [A(0, 1, 2), A(1, -3, 2), A(1, 0, 0)], [A(0, 1, 2)])),
    "select": ((3, 4), lambda sh: _nonempty(sh, [A(1, 2), A(1, -1), A(-1, 0)], [A(0, 1)])),
    "unbind": ((3, 4), lambda sh: [A(), A(1), A(-1)]),
    "split": ((4, 6), lambda sh: _nonempty(sh, [A(2), A(4, 1), A([2, 4], 1), A(3, dim=1)],
                                           [A(2), A(4, 1), A([1, 3])])),
    "chunk": ((4, 6), lambda sh: [A(2), A(4, 1), A(5, 1), A(3, dim=1)]),
    "diagonal": ((3, 4), lambda sh: [A(), A(1), A(-1), A(0, 1, 0), A(offset=2, dim1=-1, dim2=0)]),
    "as_strided": ((3, 4), lambda sh: [A((2, 2), (1, 2)), A((3,), (2,), 1)] if sh else [A((1,), (1,))]),
    "view": ((3, 4), lambda sh: _nonempty(sh, [A((3, 2, 2)), A(1, 3, 4), A((12,)), A(-1), A(4, 3)],
                                          [A((0, 2, 2)), A(-1), A(4, 0)]) if sh else
             [A((1,)), A(-1), A(()), A(1, 1)]),
    "reshape": ((3, 4), lambda sh: _nonempty(sh, [A((3, 2, 2)), A((12,)), A((-1,)), A((4, -1)), A(2, 6)],
                                             [A((0, 2, 2)), A((-1,)), A(4, 0)]) if sh else
                [A((1,)), A(()), A(1, 1)]),
    "clone": ((3, 4), lambda sh: [A()]),
    "contiguous": ((3, 4), lambda sh: [A()]),
    "detach": ((3, 4), lambda sh: [A()]),
    "tril": ((3, 4), lambda sh: [A(), A(1), A(-1), A(diagonal=5)]),
    "triu": ((3, 4), lambda sh: [A(), A(1), A(-1), A(diagonal=-5)]),
}
VIEW_REFS = {
    "transpose": _swap_ref, "swapaxes": _swap_ref, "swapdims": _swap_ref,
    "t": lambda x: x.T, "permute": lambda x, *d: np.transpose(x, d[0] if len(d) == 1 and isinstance(d[0], tuple)
                                                              else d),
    "squeeze": _squeeze_ref, "unsqueeze": lambda x, d: np.expand_dims(x, d),
    "flatten": _flatten_ref, "unflatten": _unflatten_ref,
    "expand": _expand_ref,
    "narrow": _narrow_ref, "select": lambda x, d, i: np.take(x, i, axis=d),
    "unbind": lambda x, dim=0: tuple(np.moveaxis(x, dim, 0)), "split": _split_ref, "chunk": _chunk_ref,
    "diagonal": lambda x, offset=0, dim1=0, dim2=1: np.diagonal(x, offset, dim1, dim2),
    "as_strided": None, "view": _reshape_ref, "reshape": _reshape_ref,
    "clone": lambda x: x.copy(), "contiguous": lambda x: x, "detach": lambda x: x,
    "tril": lambda x, diagonal=0: np.tril(x, diagonal), "triu": lambda x, diagonal=0: np.triu(x, diagonal),
}
VIEW_VARIANTS = {"transpose": "FMI", "swapaxes": "FMI", "swapdims": "FMI", "t": "FMI", "permute": "FM",
                 "squeeze": "FMI", "unsqueeze": "FMI", "flatten": "FM", "unflatten": "FM", "expand": "M",
                 "narrow": "FM", "select": "FM", "unbind": "FM", "split": "FM", "chunk": "FM",
                 "diagonal": "FM", "as_strided": "FMI", "view": "M", "reshape": "FM", "clone": "FM",
                 "contiguous": "M", "detach": "FMI", "tril": "FMIO", "triu": "FMIO"}
# does the result alias the input? True / False / "maybe" (view/reshape: by torch_view_strides)
VIEW_ALIAS = dict.fromkeys(VIEW_REFS, True) | {"clone": False, "tril": False, "triu": False, "view": "maybe",
                                               "reshape": "maybe", "flatten": "maybe", "contiguous": "maybe"}
VIEW_LAYOUTS = dict.fromkeys(("narrow", "select", "unbind", "split", "chunk", "diagonal", "unflatten", "tril", "triu"),
                             NO_0D) | {"as_strided": ("contig", "0d")}  # as_strided: storage = the values


def _as_strided_ref(x, size, stride, storage_offset=0):
    """Only for contiguous inputs: their storage is x.ravel()."""
    flat = np.ascontiguousarray(x).ravel()
    return np.lib.stride_tricks.as_strided(flat[storage_offset:], size, [s * flat.itemsize for s in stride]).copy()


VIEW_REFS["as_strided"] = _as_strided_ref


def view_samples(op, dtype, layout):
    rng = rng_for(op.name, dtype, layout)
    base = VIEW_ARGS[op.name][0]
    shape = layout_shape(layout, base)
    if layout == "empty" and op.name in ("split", "unflatten", "narrow", "select"):
        shape = (base[0], 0) + tuple(base[2:])  # keep dim 0 for the dim-0 argsets
    x = TS(gen_values(rng, dtype, shape), dtype)
    out = [Sample((x,) + a, k, "varargs" if op.name in ("permute", "reshape") and len(a) > 1 and
                  all(isinstance(i, int) for i in a) else "") for a, k in VIEW_ARGS[op.name][1](shape)]
    if op.name in ("tril", "triu") and layout == "contig":
        out += [Sample((TS(gen_values(rng, dtype, (2, 3, 4)), dtype, False), 1), desc="batched")]
    if op.name == "view" and layout == "contig" and dtype != "bfloat16":
        for other in DTYPES:
            if other not in ("bfloat16", "bool") and (ITEMSIZE[other] == ITEMSIZE[dtype] or dtype == "float32"):
                out.append(Sample((x, DT(other)), desc="view(dtype)"))
    return out


def view_expected(op, sample, values):
    if op.name == "view" and isinstance(sample.args[1], DT):  # reinterpret the bytes
        to = str(sample.args[1])
        a = np.ascontiguousarray(values[0].astype(NP[sample.args[0].dtype]))
        r = a.view(NP[to])
        return (r.astype(np.float64) if is_float(to) else r), to
    return OpInfo.expected(replace(op, kind="plain", expect=None), sample, values)


OPS += [OpInfo(n, VIEW_REFS[n], kind="view", variants=VIEW_VARIANTS[n], samples=view_samples,
               layouts=VIEW_LAYOUTS.get(n, LAYOUTS), view=VIEW_ALIAS[n], expect=view_expected) for n in VIEW_REFS]


def _as_samples(op, dtype, layout):
    rng = rng_for(op.name, dtype, layout)
    x = TS(gen_values(rng, dtype, layout_shape(layout)), dtype)
    if layout == "0d":
        return [Sample((x, TS(np.zeros((1, 1)), "float32", False)))]
    if op.name == "expand_as":
        x = TS(gen_values(rng, dtype, layout_shape(layout, (1, 4))), dtype)
        shapes = [(3, 4), (2, 3, 4)] if layout != "empty" else [(0, 4), (2, 0, 4)]
    else:
        shapes = [(2, 6), (4, 3), (12,)] if layout != "empty" else [(4, 0), (0,), (2, 0, 1)]
    return [Sample((x, TS(np.zeros(s), other, False))) for s, other in zip(shapes, ("float32", "int64", dtype))]


OPS += [
    OpInfo("view_as", lambda x, o: _reshape_ref(x, o.shape), kind="view", variants="M", samples=_as_samples,
           view="maybe"),
    OpInfo("reshape_as", lambda x, o: _reshape_ref(x, o.shape), kind="view", variants="M", samples=_as_samples,
           view="maybe"),
    OpInfo("expand_as", lambda x, o: np.broadcast_to(x, o.shape), kind="view", variants="M", samples=_as_samples,
           view=True),
]


# ---------------------------------------------------------------------------
# internal ops of the pipeline: x[key] (_index), x.to(dtype) (_to_copy), and
# sum_to_size, the reduction autograd uses to undo broadcasting
def _index_samples(op, dtype, layout):
    x = TS(gen_values(rng_for(op.name, dtype, layout), dtype, layout_shape(layout, (3, 4))), dtype)
    if layout == "0d":
        return [Sample((x, ())), Sample((x, None)), Sample((x, Ellipsis))]
    keys = [(1,), (slice(None), 2), (Ellipsis, slice(1, None, 2)), (None, -1), (slice(None, None, 2), None, 0),
            (slice(-2, None), Ellipsis)]
    if layout == "empty":
        keys = [(slice(None), 0), (Ellipsis, None)]
    return [Sample((x, k)) for k in keys]


def _setitem_samples(op, dtype, layout):
    """x[key] = values with advanced keys (__setitem__ -> _index_put_)."""
    rng = rng_for(op.name, dtype, layout)
    x = TS(gen_values(rng, dtype, (3, 4)), dtype, False)
    rows = TS(np.array([2, 0]), "int64", False)
    mask = TS(gen_values(rng, "bool", (3, 4)), "bool", False)
    return [Sample((x, (rows,), TS(gen_values(rng, dtype, (2, 4)), dtype, False))),
            Sample((x, (slice(None), rows), TS(gen_values(rng, dtype, (3, 2)), dtype, False))),
            Sample((x, (mask,), TS(gen_values(rng, dtype, (int(mask.values.sum()),)), dtype, False)))]


def _setitem_ref(x, key, v):
    r = np.array(x, copy=True)
    r[key] = v
    return r


def _setitem_call(L, x, key, v):
    x[key] = v
    return x


def _to_copy_samples(op, dtype, layout):
    x = TS(gen_values(rng_for(op.name, dtype, layout), dtype, layout_shape(layout)), dtype)
    return [Sample((x, DT(t))) for t in ("float64", "float32", "float16", "int64", "int8", "bool")
            if t != dtype]


def _sum_to_samples(op, dtype, layout):
    x = TS(gen_values(rng_for(op.name, dtype, layout), dtype, layout_shape(layout, (3, 4))), dtype)
    shp = layout_shape(layout, (3, 4))
    if len(shp) < 2:
        return [Sample((x, shp)), Sample((x, ()))] if layout != "empty" else [Sample((x, shp))]
    return [Sample((x, (1, shp[1]))), Sample((x, (shp[1],))), Sample((x, (shp[0], 1))), Sample((x, ())),
            Sample((x, shp))]


def _sum_to_ref(x, size):
    size = tuple(size)
    lead = x.ndim - len(size)
    r = x.astype(np.float64 if x.dtype.kind == "f" else np.int64).sum(axis=tuple(range(lead))) if lead else x
    dims = tuple(i for i, s in enumerate(size) if s == 1 and r.shape[i] != 1)
    return r.sum(axis=dims, keepdims=True) if dims else r


def _sum_to_expect(op, sample, values):
    x, size = sample.args
    same = tuple(np.shape(values[0])) == tuple(size)
    dt = x.dtype if same or is_float(x.dtype) else "int64"  # integer sums promote to int64
    return quantize(_sum_to_ref(values[0], size), dt), dt


OPS += [
    OpInfo("_index", lambda x, k: x[k], kind="view", variants="F", samples=_index_samples, view=True,
           layouts=("contig", "T", "slice", "0d", "empty"), call=lambda L, x, k: x[k]),
    OpInfo("_index_put_", _setitem_ref, kind="plain", variants="F", samples=_setitem_samples,
           layouts=("contig",), call=_setitem_call),
    OpInfo("_to_copy", lambda x, d: x, kind="plain", variants="F", samples=_to_copy_samples,
           layouts=("contig", "T", "0d"), call=lambda L, x, d: x.to(d),
           expect=lambda op, s, v: (quantize(v[0], str(s.args[1])), str(s.args[1]))),
    OpInfo("_to_device", lambda x, dev, d: x, kind="plain", variants="F",
           samples=lambda op, dtype, layout: [Sample((s.args[0], "cpu", s.args[1])) for s in _to_copy_samples(op, dtype, layout)],
           layouts=("contig", "T", "0d"), call=lambda L, x, dev, d: L._C._to_device(x, dev, d) if hasattr(L._C, "_to_device")
           else x.to(dev, d, copy=True),
           expect=lambda op, s, v: (quantize(v[0], str(s.args[2])), str(s.args[2]))),
    OpInfo("sum_to_size", _sum_to_ref, kind="plain", variants="M", samples=_sum_to_samples,
           layouts=("contig", "T", "slice", "empty"), expect=_sum_to_expect,
           tol={"float16": (1e-2, 1e-2), "bfloat16": (5e-2, 5e-2)}),
]


# ---------------------------------------------------------------------------
# new_* (result: self's dtype unless dtype= is given)
def _new_samples(op, dtype, layout):
    x = TS(gen_values(rng_for(op.name, dtype, layout), dtype, layout_shape(layout)), dtype)
    if op.name == "new_tensor":
        return [Sample((x, [[1.5, 2], [3, 4]])), Sample((x, [[1, 0]]), {"dtype": DT("float64")}),
                Sample((x, 7))]
    fill = () if op.name != "new_full" else ((2.5 if is_float(dtype) else True if dtype == "bool" else 3),)
    return [Sample((x, (2, 3)) + fill), Sample((x, (0, 2)) + fill), Sample((x, ()) + fill),
            Sample((x, (2,)) + fill, {"dtype": DT("int16")}), Sample((x, [4, 1]) + fill, {"dtype": DT("float64")})]


NEW_REFS = {"new_zeros": lambda x, s, **k: np.zeros(s), "new_ones": lambda x, s, **k: np.ones(s),
            "new_empty": lambda x, s, **k: np.zeros(s), "new_full": lambda x, s, v, **k: np.full(s, v),
            "new_tensor": lambda x, data, **k: np.array(data)}
OPS += [OpInfo(n, r, kind="new", variants="M", samples=_new_samples, layouts=("contig", "0d"),
               check_values=n != "new_empty") for n, r in NEW_REFS.items()]


# ---------------------------------------------------------------------------
# linear algebra: products (csrc/ops/linalg.c) and einsum (csrc/ops/einsum.c).
# References compute in float64 / int64 and round to the result dtype once, as
# ember's kernels do (integer products wrap; half types accumulate in float32).
def _wide(x):
    x = np.asarray(x)
    return x.astype(np.float64) if x.dtype.kind == "f" else x.astype(np.int64)


def _wide_ref(fn):
    return lambda *a, **k: fn(*[_wide(v) if isinstance(v, np.ndarray) else v for v in a], **k)


def _shape_samples(main, more=(), empty=(), kws=None):
    """Samples from shapes: `main` in the layout under test, `more` contiguous
    (contig layout only), `empty` for the empty layout; each with every kwargs
    dict of kws(dtype). A shape entry may be a str (einsum's equation)."""
    def samples(op, dtype, layout):
        rng = rng_for(op.name, dtype, layout)

        def ts(s, lay):
            return s if isinstance(s, str) else TS(gen_values(rng, dtype, s, (-3, 3)), dtype, lay)
        kwl = kws(dtype) if kws else [{}]
        if layout == "empty":
            return [Sample(tuple(ts(s, True) for s in ss), kw, "empty") for ss in empty for kw in kwl]
        out = [Sample(tuple(ts(s, True) for s in ss), kw) for ss in main for kw in kwl]
        if layout == "contig":
            out += [Sample(tuple(ts(s, False) for s in ss), kw, "more") for ss in more for kw in kwl]
        return out
    return samples


def _coef_kwargs(dtype):
    if dtype == "bool":
        return [{}, {"beta": False}, {"alpha": False}, {"beta": False, "alpha": True}]
    out = [{}, {"beta": 0}, {"beta": 2, "alpha": 3}, {"beta": -1, "alpha": 0}]
    return out + ([{"beta": 0.5, "alpha": -1.5}] if is_float(dtype) else [])


def _add(prod):
    """beta * input + alpha * prod(...); beta == 0 ignores input (NaN included)."""
    def ref(s, *mats, beta=1, alpha=1):
        p = prod(*mats)
        if s.dtype == bool:
            return (bool(beta) & s) | (bool(alpha) & p)
        return alpha * p if beta == 0 else beta * s + alpha * p
    return _wide_ref(ref)


def _bool_outer(a, b):
    return np.multiply.outer(a, b) if a.dtype != bool else np.logical_and.outer(a, b)


def _trace_expect(op, sample, values):
    dt = sample.args[0].dtype
    return quantize(np.trace(_wide(values[0])), dt), (dt if is_float(dt) else "int64")


_EINSUM_SUMS = {"ii", "ij->j", "ij->", "ii->", "ij->i"}  # one operand, summed: int64 for integers


def _einsum_expect(op, sample, values):
    eq, dt = sample.args[0], sample.args[1].dtype
    out_dt = "int64" if eq in _EINSUM_SUMS and not is_float(dt) else dt
    return quantize(np.einsum(eq, *[_wide(v) for v in values[1:]]), out_dt), out_dt


def _kron(a, b):
    return np.kron(a.astype(np.int64), b.astype(np.int64)).astype(bool) if a.dtype == bool else np.kron(a, b)


LIN_TOL = {"float32": (1e-5, 1e-4), "float64": (1e-10, 1e-10)}  # sums of up to 33 products


def LIN(name, ref, samples, **kw):
    kw.setdefault("dtypes", NUMERIC)
    kw.setdefault("variants", "FMO")
    kw.setdefault("tol", LIN_TOL)
    return OpInfo(name, ref, kind="mm", samples=samples, layouts=NO_0D, scaled_atol=True, **kw)


_MATMUL = _wide_ref(np.matmul)
OPS += [
    LIN("mm", _MATMUL, _shape_samples([((3, 4), (4, 5))], [((1, 7), (7, 1)), ((17, 33), (33, 9))],
                                      [((0, 4), (4, 5)), ((3, 0), (0, 5)), ((3, 4), (4, 0))])),
    LIN("bmm", _MATMUL, _shape_samples([((2, 3, 4), (2, 4, 5))], [((3, 17, 33), (3, 33, 9)), ((1, 1, 7), (1, 7, 1))],
                                       [((0, 3, 4), (0, 4, 5)), ((2, 3, 0), (2, 0, 5)), ((2, 0, 4), (2, 4, 5))])),
    LIN("matmul", _MATMUL, _shape_samples(
        [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((2, 3, 4), (2, 4, 5)), ((4,), (4, 5)), ((3, 4), (4,)), ((4,), (4,))],
        [((2, 3, 4), (4,)), ((4,), (2, 4, 5)), ((3, 4), (2, 4, 5)), ((2, 1, 3, 4), (5, 4, 2)), ((17, 33), (33, 9)),
         ((1, 2, 3), (3, 1, 3, 4))],
        [((0, 4), (4, 5)), ((3, 0), (0, 5)), ((2, 0, 4), (4, 5)), ((0,), (0,)), ((2, 3, 0), (2, 0, 4)),
         ((0, 3, 4), (4,))])),
    LIN("mv", _MATMUL, _shape_samples([((3, 4), (4,))], [((17, 33), (33,))], [((0, 4), (4,)), ((3, 0), (0,))])),
    LIN("dot", _MATMUL, _shape_samples([((5,), (5,))], [((997,), (997,))], [((0,), (0,))])),
    LIN("vdot", _MATMUL, _shape_samples([((5,), (5,))], [((997,), (997,))], [((0,), (0,))])),
    LIN("inner", _wide_ref(np.inner), _shape_samples([((3, 4), (5, 4)), ((4,), (4,))],
                                                     [((2, 3, 4), (4,)), ((4,), (2, 4)), ((), (3, 2)), ((2, 3), ())],
                                                     [((0, 4), (5, 4)), ((3, 0), (5, 0))])),
    LIN("outer", _bool_outer, _shape_samples([((3,), (4,))], [((1,), (7,))], [((0,), (4,))]), dtypes=DTYPES),
    LIN("ger", _bool_outer, _shape_samples([((3,), (4,))], [((1,), (7,))], [((0,), (4,))]), dtypes=DTYPES),
    LIN("kron", _wide_ref(_kron), _shape_samples([((2, 3), (3, 2))], [((2,), (2, 3)), ((2, 2, 1), (3,)), ((), (2,))],
                                                 [((0, 3), (2, 2))]), dtypes=DTYPES),
    LIN("trace", None, _shape_samples([((3, 4),), ((4, 3),)], [((1, 1),), ((5, 5),)], [((0, 3),)]),
        expect=_trace_expect, variants="FM"),
    LIN("addmm", _add(np.matmul), _shape_samples([((3, 5), (3, 4), (4, 5))], [((5,), (3, 4), (4, 5)), ((1, 1), (1, 7), (7, 1))],
                                                 [((3, 5), (3, 0), (0, 5)), ((5,), (0, 4), (4, 5))], _coef_kwargs),
        variants="FMIO"),
    LIN("addmv", _add(np.matmul), _shape_samples([((3,), (3, 4), (4,))], [((1,), (3, 4), (4,)), ((), (17, 33), (33,))],
                                                 [((3,), (3, 0), (0,)), ((0,), (0, 4), (4,))], _coef_kwargs),
        variants="FMIO"),
    LIN("addr", _add(_bool_outer), _shape_samples([((3, 5), (3,), (5,))], [((5,), (3,), (5,)), ((), (2,), (3,))],
                                                  [((3, 0), (3,), (0,))], _coef_kwargs), dtypes=DTYPES, variants="FMIO"),
    LIN("baddbmm", _add(np.matmul), _shape_samples([((2, 3, 5), (2, 3, 4), (2, 4, 5))],
                                                   [((3, 5), (2, 3, 4), (2, 4, 5)), ((1, 1, 5), (2, 3, 4), (2, 4, 5))],
                                                   [((2, 3, 5), (2, 3, 0), (2, 0, 5))], _coef_kwargs), variants="FMIO"),
    LIN("addbmm", _add(lambda a, b: np.matmul(a, b).sum(0)), _shape_samples(
        [((3, 5), (2, 3, 4), (2, 4, 5))], [((3, 2), (5, 3, 17), (5, 17, 2))],
        [((3, 5), (0, 3, 4), (0, 4, 5)), ((3, 5), (2, 3, 0), (2, 0, 5))], _coef_kwargs), variants="FMIO"),
    LIN("einsum", None, _shape_samples(
        [("ij,jk->ik", (3, 4), (4, 5)), ("bij,bjk->bik", (2, 3, 4), (2, 4, 5)), ("ii->i", (4, 4)), ("ij->ji", (3, 4)),
         ("ij,ij->ij", (3, 4), (3, 4)), ("...ij,...jk", (2, 3, 4), (4, 5)), ("ii", (4, 4)), ("ij->j", (3, 4)),
         ("bhqd,bhkd->bhqk", (2, 2, 3, 4), (2, 2, 5, 4)), ("ij,kj->ik", (3, 4), (5, 4))],
        [("i,j->ij", (3,), (4,)), ("i,i->", (5,), (5,)), ("ij->", (3, 4)), ("ijk,jk->i", (2, 3, 4), (3, 4)),
         ("ij,jk,kl->il", (2, 3), (3, 4), (4, 2)), ("ijj,jk->ik", (2, 3, 3), (3, 4)), ("b...,b...", (3, 2, 1), (3, 1, 4))],
        [("ij,jk->ik", (3, 0), (0, 5)), ("ii->", (0, 0)), ("ij->i", (3, 0)), ("ij,jk->ik", (0, 4), (4, 5))]),
        expect=_einsum_expect, variants="F",
        tol={**LIN_TOL, "float16": (4e-3, 2e-3), "bfloat16": (3e-2, 2e-2)}),
]


# ---------------------------------------------------------------------------
# indexing: gather/scatter, index_*, masked_*, take, nonzero (csrc/ops/index_advanced.c,
# csrc/ops/scatter_gather.c). References loop over the index in row-major order, which
# is also the order torch's CPU kernels write in (duplicates: the last write wins).
def _exact_vals(rng, dtype, shape):
    """Values whose sums and small products are exact in every dtype (quarters for floats)."""
    if is_float(dtype):
        return rng.integers(-8, 9, shape) / 4
    return gen_values(rng, dtype, shape, (0, 5) if dtype == "uint8" else (-4, 4))


def _I(v, dtype="int64", lay=False):
    return TS(np.array(v, dtype=np.int64).reshape(np.shape(v)), dtype, lay)


def _scalar_for(dtype):
    return True if dtype == "bool" else 2.5 if is_float(dtype) else 3


def _slice_upto(x, index, dim):
    """x cut to index's sizes in the dims other than dim (gather/scatter only touch those)."""
    return tuple(slice(None) if d == dim else slice(0, index.shape[d]) for d in range(x.ndim))


def _gather_ref(x, dim, index, sparse_grad=False):
    if x.ndim == 0:
        return np.full(index.shape, x)
    return np.take_along_axis(x[_slice_upto(x, index, dim)], index, dim % x.ndim)


_COMBINE = {None: lambda a, b: b, "add": lambda a, b: a + b, "multiply": lambda a, b: a * b}


def _scatter_ref(x, dim, index, src=None, value=None, reduce=None):
    out = np.array(x, copy=True)
    if src is None and not isinstance(value, np.ndarray):
        value = np.asarray(value).astype(out.dtype)
    for p in np.ndindex(index.shape):
        t = list(p) if out.ndim else []
        if out.ndim:
            t[dim % out.ndim] = index[p]
        t = tuple(t)
        v = src[p] if src is not None and np.ndim(src) else (src if src is not None else value)
        with np.errstate(all="ignore"):
            out[t] = _COMBINE[reduce](out[t], v)
    return out


def _scatter_add_ref(x, dim, index, src):
    return _scatter_ref(x, dim, index, src, reduce="add")


def _groups(x, dim, index, src):
    g = {}
    for p in np.ndindex(index.shape):
        t = list(p) if x.ndim else []
        if x.ndim:
            t[dim % x.ndim] = index[p]
        g.setdefault(tuple(t), []).append(src[p] if np.ndim(src) else src)
    return g


def _scatter_reduce_ref(x, dim, index, src, reduce, include_self=True):
    out = np.array(x, copy=True)
    flt = out.dtype.kind == "f"
    for t, vals in _groups(x, dim, index, src).items():
        vs = ([x[t]] if include_self else []) + vals
        vs = [float(v) if flt else int(v) for v in vs]
        if reduce == "sum":
            r = sum(vs)
        elif reduce == "prod":
            r = math.prod(vs)
        elif reduce == "mean":
            r = sum(vs) / len(vs) if flt else sum(vs) // len(vs)
        else:
            nan = [v for v in vs if v != v]
            r = nan[0] if nan else (max(vs) if reduce == "amax" else min(vs))
        with np.errstate(all="ignore"):
            out[t] = np.array(r).astype(out.dtype) if out.dtype.kind != "f" else r
    return out


def _along(x, dim, i):
    return (slice(None),) * (dim % x.ndim) + (i,) if x.ndim else ()


def _index_select_ref(x, dim, index):
    return np.take(x, index.reshape(-1), axis=dim) if x.ndim else x.copy()


def _index_add_ref(x, dim, index, source, alpha=1):
    out = np.array(x, copy=True)
    with np.errstate(all="ignore"):
        src = source * np.asarray(alpha).astype(x.dtype) if alpha != 1 else source
        for k, i in enumerate(index.reshape(-1)):
            s = src[_along(src, dim, k)] if src.ndim else src
            out[_along(out, dim, int(i))] = out[_along(out, dim, int(i))] + s
    return out


def _index_copy_ref(x, dim, index, source):
    out = np.array(x, copy=True)
    for k, i in enumerate(index.reshape(-1)):
        out[_along(out, dim, int(i))] = source[_along(source, dim, k)] if source.ndim else source
    return out


def _index_fill_ref(x, dim, index, value):
    out = np.array(x, copy=True)
    for i in index.reshape(-1):
        out[_along(out, dim, int(i))] = np.asarray(value).astype(out.dtype)
    return out


def _index_put_ref(x, indices, values, accumulate=False):
    out = np.array(x, copy=True)
    with np.errstate(all="ignore"):
        if accumulate:
            np.add.at(out, tuple(indices), values.astype(out.dtype))
        else:
            out[tuple(indices)] = values
    return out


def _masked_fill_ref(x, mask, value):
    return np.where(mask, np.asarray(value).astype(x.dtype), x)


def _masked_select_ref(x, mask):
    xb, mb = np.broadcast_arrays(x, mask)
    return xb[mb]


def _masked_scatter_ref(x, mask, source):
    xb, mb = np.broadcast_arrays(x, mask)
    out = np.array(xb, copy=True)
    out[mb] = source.reshape(-1)[:int(mb.sum())]
    return out


def _take_along_dim_ref(x, indices, dim=None):
    if dim is None:
        return np.take(x.reshape(-1), indices.reshape(-1))
    return np.take_along_axis(x, indices, dim)


def _nonzero_expected(op, sample, values):
    x = values[0]
    if sample.kwargs.get("as_tuple"):
        return tuple(np.nonzero(x.reshape(-1) if x.ndim == 0 else x)), "int64"
    return np.argwhere(x), "int64"


def _index_samples(op, dtype, layout):
    """Samples for the indexing ops: self (laid out), indices, values. Each op's
    cases use dims and index values that fit self's shape in this layout."""
    rng = rng_for(op.name, dtype, layout)
    sh = layout_shape(layout)  # (3, 4), () or (0, 4)
    x = TS(_exact_vals(rng, dtype, sh), dtype)
    v = lambda shape, lay=False: TS(_exact_vals(rng, dtype, shape), dtype, lay)  # noqa: E731
    n = op.name
    if n == "index_select":
        if sh == ():
            return [Sample((x, 0, _I([0]))), Sample((x, 0, _I(0))), Sample((x, -1, _I([0], "int32")))]
        out = [Sample((x, 1, _I([3, 0, 3], lay=True))), Sample((x, 1, _I([], lay=True)), desc="empty index"),
               Sample((x, -1, _I(2)), desc="0-d index")]
        if sh[0]:
            out += [Sample((x, 0, _I([2, 0, 2, 1], lay=True))), Sample((x, 0, _I([1, 2], "int32", lay=True)))]
        return out
    if n in ("gather", "take_along_dim"):
        if sh == ():
            if n == "take_along_dim":
                return [Sample((x, _I([0, 0]))), Sample((x, _I(0)))]
            return [Sample((x, 0, _I(0))), Sample((x, 0, _I([0, 0]))), Sample((x, -1, _I([0], "int32")))]
        if n == "take_along_dim":
            out = [Sample((x, _I(rng.integers(-4, 4, (sh[0], 2)), lay=True), 1)),
                   Sample((x, _I(rng.integers(-4, 4, (1, 5))), -1), desc="broadcast"),
                   Sample((x, _I(rng.integers(0, max(x.values.size, 1), (5,)) if x.values.size else []), None),
                          desc="flattened")]
            if sh[0]:
                out.append(Sample((x, _I(rng.integers(-3, 3, (2, 1))), 0), desc="broadcast"))
            return out
        out = [Sample((x, 1, _I(rng.integers(0, 4, (sh[0], 2)), lay=True))),
               Sample((x, -1, _I(rng.integers(0, 4, (min(sh[0], 2), 6)), "int32")), desc="wider, fewer rows"),
               Sample((x, 1, _I(np.zeros((0, 2)))), desc="empty index")]
        if sh[0]:
            out.append(Sample((x, 0, _I(rng.integers(0, 3, (2, 4)), lay=True))))
        return out
    if n in ("scatter", "scatter_add", "scatter_reduce"):
        if sh == ():
            base = [Sample((x, 0, _I(0), v(()))), Sample((x, -1, _I([0, 0]), v((2,))))]
        else:
            rows = sh[0]
            base = [Sample((x, 1, _I(rng.integers(0, 4, (rows, 3)), lay=True), v((rows, 3), True))),
                    Sample((x, -1, _I(rng.integers(0, 4, (min(rows, 2), 2)), "int32"), v((3, 4))),
                           desc="src larger than index"),
                    Sample((x, 0, _I(np.zeros((0, 4))), v((0, 4))), desc="empty index")]
            if rows:
                base.append(Sample((x, 0, _I(rng.integers(0, 3, (5, 4)), lay=True), v((5, 4), True)),
                                   desc="duplicates along dim 0"))
        if n == "scatter_add":
            return base
        if n == "scatter":
            out = list(base)
            out += [replace(s, kwargs={"reduce": r}) for s in base for r in ("add", "multiply")]
            out += [Sample(s.args[:3], {"value": _scalar_for(dtype)}, "value") for s in base[:2]]
            out += [Sample(s.args[:3], {"value": _scalar_for(dtype), "reduce": "add"}, "value") for s in base[:1]]
            return out
        reds = ("sum", "prod", "amax", "amin") + (() if dtype == "bool" else ("mean",))
        out = [Sample(s.args + (r,), {"include_self": inc}, s.desc) for s in base for r in reds
               for inc in (True, False)]
        if is_float(dtype) and sh:
            nan = TS(np.array([[np.nan, 1.0, 2.0], [3.0, -np.nan, 0.5], [1.0, 1.0, np.nan]])[:sh[0] or 0], dtype)
            out += [Sample((x, 1, _I(np.array([[0, 0, 1], [1, 2, 2], [3, 3, 3]])[:sh[0] or 0]), nan, r),
                           desc="nan") for r in ("amax", "amin")]
        return out
    if n in ("index_add", "index_copy", "index_fill"):
        if sh == ():
            if n == "index_fill":
                return [Sample((x, 0, _I([0]), _scalar_for(dtype))), Sample((x, -1, _I(0), _T(1.5, "float64")))]
            return [Sample((x, 0, _I([0]), v(()))), Sample((x, 0, _I(0), v(())))]
        dup = [3, 0, 3] if n == "index_add" else [3, 0, 1]
        i1 = _I(dup, lay=True)
        if n == "index_fill":
            out = [Sample((x, 1, i1, _scalar_for(dtype))), Sample((x, -1, _I([-1, 0]), _T(3.5, "float64")),
                                                                 desc="0-d value, negative index"),
                   Sample((x, 1, _I([]), 1), desc="empty index")]
            if sh[0]:
                out.append(Sample((x, 0, _I([2, 0]), _scalar_for(dtype))))
            return out
        out = [Sample((x, 1, i1, v((sh[0], 3), True))), Sample((x, -1, _I([]), v((sh[0], 0))), desc="empty index")]
        if sh[0]:
            out.append(Sample((x, 0, _I([2, 1] if n == "index_copy" else [2, 2], "int64" if n == "index_copy"
                                     else "int32"), v((2, 4)))))
        if n == "index_add" and dtype != "bool":
            out.append(Sample((x, 1, i1, v((sh[0], 3))), {"alpha": 2}, "alpha"))
            if is_float(dtype):
                out.append(Sample((x, 1, i1, v((sh[0], 3))), {"alpha": -0.5}, "alpha"))
        return out
    if n == "index_put":
        if sh == ():  # nothing in a 0-d tensor to index with a tensor: a 1-d one instead
            x3 = TS(_exact_vals(rng, dtype, (3,)), dtype)
            return [Sample((x3, (_I([1, 1, 0]),), v((3,)), acc)) for acc in (False, True)]
        r3 = [0, 2, 0] if sh[0] else []
        out = []
        for acc in (False, True):
            out += [Sample((x, (_I(r3),), v((4,)), acc), desc="rows, broadcast values"),
                    Sample((x, (_I(r3), _I([3, 1, -1][:len(r3)], "int32")), v((len(r3),)), acc)),
                    Sample((x, (_I(r3[:2]), _I([[1], [3]])), v((1,)), acc), desc="broadcast indices"),
                    Sample((x, (TS(rng.random(sh) < 0.5, "bool", False),), v(()), acc), desc="mask, 0-d value"),
                    Sample((x, (TS(np.arange(sh[0]) % 2 == 0, "bool", False),), v((4,)), acc), desc="row mask")]
        return out
    if n == "masked_fill":
        m = TS(rng.random(sh) < 0.5, "bool")
        out = [Sample((x, m, _scalar_for(dtype))), Sample((x, m, _T(3.5, "float64")), desc="0-d value")]
        if sh:
            out.append(Sample((x, TS(rng.random((4,)) < 0.5, "bool", False), -1 if dtype not in ("bool", "uint8")
                               else True), desc="broadcast mask"))
        return out
    if n == "masked_select":
        m = TS(rng.random(sh) < 0.5, "bool")
        out = [Sample((x, m))]
        if sh:
            out += [Sample((x, TS(rng.random((2,) + sh) < 0.5, "bool", False)), desc="mask broadcasts self"),
                    Sample((x, TS(rng.random((4,)) < 0.5, "bool", False)), desc="self broadcasts mask")]
        return out
    if n == "masked_scatter":
        m = TS(rng.random(sh) < 0.5, "bool")
        out = [Sample((x, m, v(sh)))]
        if sh:
            out += [Sample((x, TS(rng.random((4,)) < 0.5, "bool", False), v((5, 4))), desc="broadcast mask")]
        return out
    if n == "take":
        size = x.values.size
        if not size:
            return [Sample((x, _I(np.zeros((0, 3)))))]
        return [Sample((x, _I(rng.integers(-size, size, (2, 3)), lay=True))), Sample((x, _I(0)), desc="0-d index"),
                Sample((x, _I([])), desc="empty index")]
    # nonzero / argwhere
    vals = _exact_vals(rng, dtype, sh)
    vals = np.where(rng.random(sh) < 0.4, 0, vals).astype(vals.dtype)
    x = TS(vals, dtype, exact=True)
    out = [Sample((x,))]
    if n == "nonzero":
        out.append(Sample((x,), {"as_tuple": True}))
    if is_float(dtype) and layout == "contig":
        out.append(Sample((_T([0.0, -0.0, np.nan, 1.0, -np.inf, 0.0], dtype),), desc="-0.0 and nan"))
    return out


INDEX_REFS = {  # name: (reference, variants)
    "index_select": (_index_select_ref, "FMO"), "gather": (_gather_ref, "FMO"),
    "scatter": (_scatter_ref, "FMIO"), "scatter_add": (_scatter_add_ref, "FMIO"),
    "scatter_reduce": (_scatter_reduce_ref, "FMI"), "index_add": (_index_add_ref, "FMIO"),
    "index_copy": (_index_copy_ref, "FMIO"), "index_fill": (_index_fill_ref, "FMI"),
    "index_put": (_index_put_ref, "FMI"), "masked_fill": (_masked_fill_ref, "FMI"),
    "masked_select": (_masked_select_ref, "FMO"), "masked_scatter": (_masked_scatter_ref, "FMI"),
    "take": (lambda x, index: np.take(x.reshape(-1), index), "FMO"),
    "take_along_dim": (_take_along_dim_ref, "FMO"),
    "nonzero": (None, "FMO"), "argwhere": (None, "FM"),
}
OPS += [OpInfo(n, r, kind="index", variants=var, samples=_index_samples,
               expect=_nonzero_expected if n in ("nonzero", "argwhere") else None)
        for n, (r, var) in INDEX_REFS.items()]


# ---------------------------------------------------------------------------
# random ops: statistical checks on N draws. call(lib, t, generator) fills (or
# reads) t, an N-element tensor of the dtype under test; the distribution's
# mean, variance and range [lo, hi] (None: not checked; callables take the dtype).
@dataclass
class RandomCase:
    desc: str
    call: Callable
    mean: Any
    var: Any
    lo: float
    hi: Any
    integral: bool = False
    inplace: bool = True       # the result is t itself
    dtypes: tuple = DTYPES     # dtypes this case applies to
    out_dtype: str = None      # result dtype when not t's


def _random_hi(d):  # random_() draws integers in [0, hi]
    mantissa = {"float16": 11, "bfloat16": 8, "float32": 24, "float64": 53}
    return 2 ** mantissa[d] if d in mantissa else int_range(d)[1]


RANDOM = {
    "uniform_": (FLOATS, NotImplementedError, [
        RandomCase("(-2,3)", lambda L, t, g: t.uniform_(-2, 3, generator=g), 0.5, 25 / 12, -2, 3),
        RandomCase("default", lambda L, t, g: t.uniform_(generator=g), 0.5, 1 / 12, 0, 1)]),
    "normal_": (FLOATS, NotImplementedError, [
        RandomCase("(1,2)", lambda L, t, g: t.normal_(1, 2, generator=g), 1, 4, -np.inf, np.inf),
        RandomCase("default", lambda L, t, g: t.normal_(generator=g), 0, 1, -np.inf, np.inf)]),
    "exponential_": (FLOATS, RuntimeError, [
        RandomCase("lambd=2", lambda L, t, g: t.exponential_(2, generator=g), 0.5, 0.25, 0, np.inf),
        RandomCase("default", lambda L, t, g: t.exponential_(generator=g), 1, 1, 0, np.inf)]),
    "bernoulli_": (DTYPES, NotImplementedError, [
        RandomCase("p=0.3", lambda L, t, g: t.bernoulli_(0.3, generator=g), 0.3, 0.21, 0, 1, True),
        RandomCase("default", lambda L, t, g: t.bernoulli_(generator=g), 0.5, 0.25, 0, 1, True),
        RandomCase("p tensor", lambda L, t, g: t.bernoulli_(L.full(tuple(t.shape), 0.8, dtype=t.dtype), generator=g),
                   0.8, 0.16, 0, 1, True, dtypes=FLOATS)]),
    "random_": (DTYPES, RuntimeError, [
        RandomCase("(3,10)", lambda L, t, g: t.random_(3, 10, generator=g), 6, 4, 3, 9, True, dtypes=NUMERIC),
        RandomCase("(0,2)", lambda L, t, g: t.random_(0, 2, generator=g), 0.5, 0.25, 0, 1, True),
        RandomCase("to=10", lambda L, t, g: t.random_(10, generator=g), 4.5, 8.25, 0, 9, True, dtypes=NUMERIC),
        RandomCase("default", lambda L, t, g: t.random_(generator=g), lambda d: _random_hi(d) / 2,
                   lambda d: ((_random_hi(d) + 1) ** 2 - 1) / 12, 0, _random_hi, True)]),
    "bernoulli": (FLOATS, NotImplementedError, [
        RandomCase("p=input", lambda L, t, g: L.bernoulli(t.fill_(0.3), generator=g), 0.3, 0.21, 0, 1, True, False),
        RandomCase("method p=0.7", lambda L, t, g: t.bernoulli(0.7, generator=g), 0.7, 0.21, 0, 1, True, False)]),
    "multinomial": (FLOATS, RuntimeError, [  # more in tests/test_ops.py: test_multinomial
        RandomCase("uniform, 1000 draws", lambda L, t, g: L.multinomial(t.fill_(1)[:10], 1000, True, generator=g),
                   4.5, 8.25, 0, 9, True, False, out_dtype="int64")]),
}
for _n, (_d, _e, _cases) in RANDOM.items():
    OPS.append(OpInfo(_n, None, dtypes=_d, unsupported=_e, kind="random", variants="M" if _n.endswith("_") else "FM",
                      samples=lambda op, d, l, _c=_cases: [c for c in _c if d in c.dtypes]))

# ---------------------------------------------------------------------------
# joining, rearranging, sorting and searching (ops/join.c, ops/sort.c)
def _lst(*ts):
    return list(ts)


def _promote_all(*dts):
    r = dts[0]
    for d in dts[1:]:
        r = promote_types(r, d)
    return r


def _ts_dtypes(args):
    out = []
    for a in args:
        if isinstance(a, TS):
            out.append(a.dtype)
        elif isinstance(a, (list, tuple)):
            out += [x.dtype for x in a if isinstance(x, TS)]
    return out


def _join_expected(op, sample, values):
    """Result dtype: torch's promotion across every tensor argument."""
    out = op.ref(*values, **sample.kwargs)
    dt = _promote_all(*_ts_dtypes(sample.args))
    if isinstance(out, (list, tuple)):
        return tuple(quantize(o, dt) for o in out), dt
    return quantize(out, dt), dt


def _cat_ref(tensors, dim=0, axis=None):
    dim = axis if axis is not None else dim
    keep = [t for t in tensors if not (t.ndim == 1 and t.shape[0] == 0)]
    if not keep:
        return np.zeros((0,))
    dt = np.result_type(*[t.dtype for t in tensors])
    return np.concatenate([t.astype(dt) for t in keep], axis=dim)


def _stack_ref(tensors, dim=0):
    return np.stack(tensors, axis=dim)


def _join_samples(op, dtype, layout):
    rng = rng_for(op.name, dtype, layout)
    g = (lambda s, lay=True: TS(gen_values(rng, dtype, s), dtype, lay))
    sh = layout_shape(layout, (3, 4))
    name = op.name
    if name in ("cat", "concat", "concatenate"):
        kw = "axis" if name == "concatenate" else "dim"
        out = [Sample((_lst(g(sh), g(sh)),)), Sample((_lst(g(sh), g(sh), g(sh)), 0))]
        if len(sh) == 2:
            out.append(Sample((_lst(g(sh), g((sh[0], 2))),), {kw: 1}))
            out.append(Sample((_lst(g(sh), g((sh[0], 2))),), {kw: -1}))
        if layout == "contig":
            o = [d for d in DTYPES if d != dtype][len(dtype) % 9]
            out += [Sample((_lst(g((2, 3), False), TS(gen_values(rng, o, (1, 3)), o, False)),), desc="promote"),
                    Sample((_lst(TS(np.zeros(0), "float64", False), g((2, 3), False)),), desc="legacy empty"),
                    Sample((_lst(g((0, 3), False), g((2, 3), False)),), desc="empty part"),
                    Sample((_lst(g((997,), False), g((1000,), False)) * 36,), desc="big")]
        return out
    if name == "stack":
        out = [Sample((_lst(g(sh), g(sh)),)), Sample((_lst(g(sh), g(sh), g(sh)), -1))]
        if len(sh) == 2:
            out.append(Sample((_lst(g(sh), g(sh)), 1)))
        return out
    # hstack / vstack / row_stack / dstack / column_stack
    out = [Sample((_lst(g(sh), g(sh)),))]
    if layout == "contig":
        out += [Sample((_lst(g((3,), False), g((3,), False)),), desc="1-d"),
                Sample((_lst(TS(gen_values(rng, dtype, ()), dtype, False), g((), False)),), desc="0-d")]
        if name in ("hstack", "column_stack"):
            out.append(Sample((_lst(g((3, 2), False), g((3, 4), False)),), desc="ragged"))
        if name in ("vstack", "row_stack"):
            out.append(Sample((_lst(g((2, 4), False), g((4,), False)),), desc="ragged"))
    return out


def _dstack_ref(tensors):
    return np.dstack(tensors)


JOIN_REFS = {"cat": _cat_ref, "concat": _cat_ref, "concatenate": _cat_ref, "stack": _stack_ref,
             "hstack": lambda tensors: np.hstack(tensors), "vstack": lambda tensors: np.vstack(tensors),
             "row_stack": lambda tensors: np.vstack(tensors), "dstack": _dstack_ref,
             "column_stack": lambda tensors: np.column_stack(tensors)}
OPS += [OpInfo(n, r, kind="join", variants="FO", samples=_join_samples, expect=_join_expected,
               layouts=NO_0D if n in ("cat", "concat", "concatenate") else LAYOUTS) for n, r in JOIN_REFS.items()]


# views: tensor_split, movedim/moveaxis, broadcast_to
def _tensor_split_ref(x, indices_or_sections, dim=0):
    ios = indices_or_sections
    if isinstance(ios, np.ndarray):
        ios = int(ios) if ios.ndim == 0 else list(ios)
    if isinstance(ios, int):
        return tuple(np.array_split(x, ios, axis=dim))
    return tuple(np.split(x, list(ios), axis=dim))


def _view2_samples(op, dtype, layout):
    rng = rng_for(op.name, dtype, layout)
    name = op.name
    if name == "tensor_split":
        sh = (5, 6) if layout != "empty" else (5, 0)
        x = TS(gen_values(rng, dtype, sh), dtype)
        return [Sample((x, 3)), Sample((x, [1, 3])), Sample((x, (2,), 1)), Sample((x, [4, 1, -1, 9], 0)),
                Sample((x, 7, -1)), Sample((x, TS(np.array(2), "int64", False))),
                Sample((x, TS(np.array([1, 4]), "int64", False), 1)), Sample((x, []))]
    if name in ("movedim", "moveaxis"):
        if layout == "0d":
            x = TS(gen_values(rng, dtype, ()), dtype)
            return [Sample((x, 0, 0)), Sample((x, -1, 0))]
        x = TS(gen_values(rng, dtype, layout_shape(layout, (2, 3, 4))), dtype)
        return [Sample((x, 0, 2)), Sample((x, (0, 1), (2, 0))), Sample((x, -1, 0)), Sample((x, [], [])),
                Sample((x, [2, 0, 1], [0, 1, 2]))]
    # broadcast_to
    if layout == "0d":
        x = TS(gen_values(rng, dtype, ()), dtype)
        return [Sample((x, (2, 3))), Sample((x, ()))]
    sh = layout_shape(layout, (3, 1))
    x = TS(gen_values(rng, dtype, sh), dtype)
    return [Sample((x, (2,) + sh)), Sample((x, (sh[0], 4))), Sample((x, (-1, 4))), Sample((x, (2, 2, -1, 1)))]


def _bcast_to_ref(x, size):
    size = tuple(size)
    old = (1,) * (len(size) - x.ndim) + x.shape
    return np.broadcast_to(x, tuple(o if s == -1 else s for s, o in zip(size, old)))


def _movedim_ref(x, source, destination):
    return np.moveaxis(x, source, destination) if x.ndim else x


VIEW2 = {"tensor_split": (_tensor_split_ref, "FM"), "movedim": (_movedim_ref, "FM"), "moveaxis": (_movedim_ref, "FM"),
         "broadcast_to": (_bcast_to_ref, "FM")}
OPS += [OpInfo(n, r, kind="view", variants=v, samples=_view2_samples, view=True,
               layouts=NO_0D if n == "tensor_split" else LAYOUTS) for n, (r, v) in VIEW2.items()]


# copies that rearrange: repeat, tile, repeat_interleave, flip*, roll, rot90
def _rearrange_samples(op, dtype, layout):
    rng = rng_for(op.name, dtype, layout)
    name = op.name
    nd3 = name in ("roll", "flip")
    sh = layout_shape(layout, (2, 3, 4) if nd3 else (3, 4))
    x = TS(gen_values(rng, dtype, sh), dtype)
    big = TS(gen_values(rng, dtype, (40, 997)), dtype, False)
    if name == "repeat":
        if not sh:
            return [Sample((x, 2)), Sample((x, (2, 3))), Sample((x, ()))]
        return [Sample((x, 2, 1)), Sample((x, (1, 3))), Sample((x, (2, 1, 2))), Sample((x, [0, 2])),
                Sample((x, (2, 3, 1, 1)))] + ([Sample((big, 2, 3), desc="big")] if layout == "contig" else [])
    if name == "tile":
        return [Sample((x, (2,))), Sample((x, (2, 1, 2))), Sample((x, ())), Sample((x, (3, 2)))]
    if name == "repeat_interleave":
        out = [Sample((x, 2)), Sample((x, 0))]
        if sh:
            out += [Sample((x, 2), {"dim": 0}), Sample((x, 3), {"dim": -1})]
            n0 = sh[0]
            out += [Sample((x, TS(np.arange(n0) % 3, "int64", False)), {"dim": 0}),
                    Sample((x, TS(np.array([2]), "int64", False)), {"dim": 1}),
                    Sample((x, TS(np.array(3), "int32", False)), {"dim": 1})]
        if layout == "contig":
            out += [Sample((big, 3), {"dim": 1}, desc="big"),
                    Sample((x, TS(np.arange(int(np.prod(sh))) % 4, "int16", False)), desc="flat")]
        return out
    if name == "flip":
        if not sh:
            return [Sample((x, (0,))), Sample((x, ()))]
        return [Sample((x, (0,))), Sample((x, (-1,))), Sample((x, [0, 2])), Sample((x, (0, 1, 2))),
                Sample((x, ()))] + ([Sample((big, (1,)), desc="big")] if layout == "contig" else [])
    if name in ("fliplr", "flipud"):
        return [Sample((x,))]
    if name == "roll":
        out = [Sample((x, 1)), Sample((x, -7))]
        if sh:
            out += [Sample((x, 1, 1)), Sample((x, (1, -2), (0, 2))), Sample((x, (2, 1), (1, 1))),
                    Sample((x, 2 ** 40 + 1, -1))]
        if layout == "contig":
            out.append(Sample((big, 5, 1), desc="big"))
        return out
    # rot90
    if len(sh) < 2:
        return []
    return [Sample((x,)), Sample((x, 2)), Sample((x, -1)), Sample((x, 3, [1, 0])), Sample((x, 0)),
            Sample((x, 2 ** 62 + 1, (0, -1)))]


def _repeat_ref(x, *reps):
    reps = reps[0] if len(reps) == 1 and isinstance(reps[0], (tuple, list)) else reps
    return np.tile(x, tuple(reps))


def _tile_ref(x, dims):
    return np.tile(x, tuple(dims))


def _repeat_interleave_ref(x, repeats, dim=None):
    if isinstance(repeats, np.ndarray) and repeats.size == 1:
        repeats = int(repeats.reshape(()))
    return np.repeat(x, repeats, axis=dim)


def _flip_ref(x, *dims):
    dims = dims[0] if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else dims
    return np.flip(x, tuple(dims)) if x.ndim else x


def _roll_ref(x, shifts, dims=None):
    return np.roll(x, shifts, axis=dims)


def _rot90_ref(x, k=1, dims=(0, 1)):
    return np.rot90(x, k % 4, axes=tuple(dims))


REARRANGE = {"repeat": (_repeat_ref, "M", LAYOUTS), "tile": (_tile_ref, "FM", LAYOUTS),
             "repeat_interleave": (_repeat_interleave_ref, "FM", LAYOUTS),
             "flip": (_flip_ref, "FM", LAYOUTS), "fliplr": (np.fliplr, "FM", NO_0D[:2] + ("empty",)),
             "flipud": (np.flipud, "FM", NO_0D), "roll": (_roll_ref, "FM", LAYOUTS),
             "rot90": (_rot90_ref, "FM", NO_0D)}
OPS += [OpInfo(n, r, kind="rearrange", variants=v, samples=_rearrange_samples, layouts=lay)
        for n, (r, v, lay) in REARRANGE.items()]


# diff, broadcast_tensors, meshgrid, one_hot
def _diff_ref(x, n=1, dim=-1, prepend=None, append=None):
    kw = {}
    if prepend is not None:
        kw["prepend"] = prepend
    if append is not None:
        kw["append"] = append
    return np.diff(x, n, axis=dim, **kw)


def _diff_samples(op, dtype, layout):
    rng = rng_for(op.name, dtype, layout)
    sh = layout_shape(layout, (3, 5))
    if not sh:
        return []
    x = TS(gen_values(rng, dtype, sh), dtype)
    out = [Sample((x,)), Sample((x, 2)), Sample((x, 1, 0)), Sample((x, 3, -1)), Sample((x, 0)), Sample((x, 9))]
    if layout == "contig":
        o = "float32" if dtype != "float32" else "int16"
        out += [Sample((x,), {"prepend": TS(gen_values(rng, dtype, (3, 1)), dtype, False),
                              "append": TS(gen_values(rng, dtype, (3, 2)), dtype, False)}),
                Sample((x, 1, 0), {"append": TS(gen_values(rng, o, (1, 5)), o, False)}, desc="promote"),
                Sample((TS(gen_values(rng, dtype, (4, 997)), dtype, False), 1, 1), desc="big")]
    return out


def _kwvalues(sample):
    return {k: (v.values if isinstance(v, TS) else v) for k, v in sample.kwargs.items()}


def _diff_expected(op, sample, values):
    """np.diff one order at a time, each rounded to the result dtype (as torch
    computes it); bool: adjacent elements differ."""
    dt = _promote_all(*_ts_dtypes(list(sample.args) + list(sample.kwargs.values())))
    kw = _kwvalues(sample)
    x, n, dim = values[0], *(list(values[1:]) + [1, -1][len(values) - 1:])[:2]
    cast = (lambda a: np.asarray(a).astype(bool)) if dt == "bool" else (lambda a: quantize(a, dt))
    parts = [kw["prepend"]] if kw.get("prepend") is not None else []
    parts += [x] + ([kw["append"]] if kw.get("append") is not None else [])
    x = cast(np.concatenate([cast(p) for p in parts], axis=dim))
    with np.errstate(all="ignore"):
        for _ in range(n):
            if x.shape[dim] == 0:
                break
            x = cast(np.diff(x, 1, axis=dim))
    return x, dt


def _bt_samples(op, dtype, layout):
    rng = rng_for(op.name, dtype, layout)
    sh = layout_shape(layout, (3, 1))
    x = TS(gen_values(rng, dtype, sh), dtype)
    if op.name == "broadcast_tensors":
        y = TS(gen_values(rng, dtype, (4,)), dtype, False)
        return [Sample((x, y)), Sample((x,)), Sample((x, TS(gen_values(rng, "float64", (2, 1, 1)), "float64", False)))]
    a = TS(gen_values(rng, dtype, (3,)), dtype)
    b = TS(gen_values(rng, dtype, (4,)), dtype, False)
    c0 = TS(gen_values(rng, dtype, ()), dtype, False)
    return [Sample((a, b), {"indexing": "ij"}), Sample((a, b), {"indexing": "xy"}),
            Sample((a, c0, b), {"indexing": "xy"}), Sample((a,), {"indexing": "ij"}),
            Sample(([a, b],), {"indexing": "xy"})]


def _bt_expected(op, sample, values):
    if op.name == "broadcast_tensors":
        out = np.broadcast_arrays(*values)
        return tuple(quantize(o, s.dtype) for o, s in zip(out, sample.args)), tuple(s.dtype for s in sample.args)
    vals = values[0] if isinstance(values[0], list) else values
    specs = sample.args[0] if isinstance(sample.args[0], list) else sample.args
    out = np.meshgrid(*[np.atleast_1d(v) for v in vals], indexing=sample.kwargs["indexing"])
    return tuple(quantize(o, specs[0].dtype) for o in out), specs[0].dtype


OPS += [OpInfo("diff", _diff_ref, kind="rearrange", variants="FMO", samples=_diff_samples, expect=_diff_expected,
               layouts=NO_0D),
        OpInfo("broadcast_tensors", None, kind="join", variants="F", samples=_bt_samples, expect=_bt_expected),
        OpInfo("meshgrid", None, kind="join", variants="F", samples=_bt_samples, expect=_bt_expected,
               layouts=("contig", "T", "slice", "expand", "empty"))]


def _one_hot_samples(op, dtype, layout):
    rng = rng_for(op.name, dtype, layout)
    sh = layout_shape(layout, (3, 4))
    x = TS(rng.integers(0, 5 if dtype != "bool" else 2, sh), dtype)
    out = [Sample((x, 5)), Sample((x,), {"num_classes": 7})]
    if 0 not in sh:
        out.append(Sample((x,)))
    return out


def _one_hot_ref(x, num_classes=-1):
    n = num_classes if num_classes != -1 else int(x.max()) + 1
    return np.eye(n, dtype=np.int64)[x]


OPS.append(OpInfo("_one_hot", _one_hot_ref, kind="join", dtypes=("int64",), unsupported=RuntimeError, variants="F",
                  samples=_one_hot_samples, fn=lambda L: L.nn.functional.one_hot))


# sorting and searching
def _order_1d(v, descending):
    """torch's stable order of a 1-D array: NaN last (first when descending),
    equal elements in index order either way."""
    idx = np.arange(v.size)
    if not descending:
        return np.lexsort((idx, v))
    return np.lexsort((-idx, v))[::-1]


def _sort_ref(x, dim=-1, descending=False, stable=False):
    if x.ndim == 0:
        return x.copy(), np.zeros((), np.int64)
    xm = np.moveaxis(x, dim, -1)
    order = np.zeros(xm.shape, np.int64)
    for i in np.ndindex(*xm.shape[:-1]):
        order[i] = _order_1d(xm[i], descending)
    vals = np.take_along_axis(xm, order, -1)
    return np.moveaxis(vals, -1, dim), np.moveaxis(order, -1, dim)


def _sort_samples(op, dtype, layout):
    rng = rng_for(op.name, dtype, layout)
    sh = layout_shape(layout, (3, 7))
    name = op.name
    distinct = name in ("topk", "kthvalue")

    def vals(shape):
        n = int(np.prod(shape))
        if not distinct or not shape:
            v = gen_values(rng, dtype, shape, (-3, 3))  # many ties
            if is_float(dtype) and v.size:
                v.reshape(-1)[:: 5] = np.nan
                v.reshape(-1)[1:: 7] = -0.0
            return v
        # topk / kthvalue: distinct values (torch leaves the order of ties unspecified)
        lo = 0 if dtype == "uint8" else -n // 2
        v = (rng.permutation(n) + lo).astype(np.float64) / (4 if is_float(dtype) else 1)
        if is_float(dtype) and n:
            v[rng.integers(n)] = np.nan
        return quantize(v.reshape(shape), dtype)

    # long slices only where the dtype has that many distinct values
    wide = dtype in ("int16", "int32", "int64", "float16", "float32", "float64") or not distinct
    x = TS(vals(sh), dtype)
    if name in ("sort", "argsort"):
        out = [Sample((x,)), Sample((x,), {"descending": True}), Sample((x, 0)), Sample((x, 0, True)),
               Sample((x,), {"stable": True}), Sample((x,), {"dim": -1, "descending": True, "stable": True})]
        if layout == "contig":
            out += [Sample((TS(vals((5000,)), dtype, False),), {"stable": True}, desc="big radix"),
                    Sample((TS(vals((5000,)), dtype, False),), {"descending": True, "stable": True}, desc="big desc"),
                    Sample((TS(vals((300, 64)), dtype, False),), {"stable": True}, desc="many slices")]
        return out
    if name == "msort":
        return [Sample((x,))]
    if name == "topk":
        n = sh[-1] if sh else 1
        out = [Sample((x, min(3, n))), Sample((x, min(2, n)), {"largest": False}), Sample((x, n)), Sample((x, 0))]
        if sh:
            out.append(Sample((x, min(2, sh[0]), 0)))
        if layout == "contig" and wide:
            out += [Sample((TS(vals((3000,)), dtype, False), 5), desc="heap"),
                    Sample((TS(vals((3000,)), dtype, False), 200, 0, False), desc="select"),
                    Sample((TS(vals((3000,)), dtype, False), 2000), desc="sort")]
        return out
    # kthvalue
    n = sh[-1] if sh else 1
    if layout == "empty":
        return [Sample((x, 2)), Sample((x, 1, -1, True))]
    out = [Sample((x, 1)), Sample((x, n)), Sample((x, (n + 1) // 2, -1, True))]
    if sh:
        out.append(Sample((x, min(2, sh[0]), 0)))
    if layout == "contig" and wide:
        out.append(Sample((TS(vals((3000,)), dtype, False), 1234), desc="select"))
    return out


def _topk_ref(x, k, dim=-1, largest=True, sorted=True):
    v, i = _sort_ref(x, dim, largest)
    if x.ndim == 0:
        return v, i
    return np.take(v, range(k), axis=dim), np.take(i, range(k), axis=dim)


def _torch_select(vals, k):
    """The index torch's kthvalue returns for the k-th (0-based) smallest of a 1-d slice: its
    median-of-three quickselect on a copy (Numerical Recipes' `select`; NaN largest, -0.0 == 0.0),
    which decides which of several equal values is reported (Note [kthvalue ties])."""
    a = [float(v) for v in vals]
    ix = list(range(len(a)))

    def gt(p, q):
        return (p != p and q == q) or p > q

    def sw(p, q):
        a[p], a[q], ix[p], ix[q] = a[q], a[p], ix[q], ix[p]
    lo, hi = 0, len(a) - 1
    while hi > lo:
        if hi == lo + 1:
            if gt(a[lo], a[hi]):
                sw(lo, hi)
            break
        sw(lo + (hi - lo) // 2, lo + 1)
        for p, q in ((lo + 1, hi), (lo, hi), (lo + 1, lo)):
            if gt(a[p], a[q]):
                sw(p, q)
        i, j, piv = lo + 1, hi, a[lo]
        while True:
            i += 1
            while gt(piv, a[i]):
                i += 1
            j -= 1
            while gt(a[j], piv):
                j -= 1
            if j < i:
                break
            sw(i, j)
        sw(lo, j)
        if j <= k:
            lo = i
        if j >= k:
            hi = j - 1
    return ix[k]


def _kthvalue_ref(x, k, dim=-1, keepdim=False):
    v, i = _sort_ref(x, dim)
    if x.ndim == 0:
        return v, i
    xm = np.moveaxis(np.asarray(x), dim, -1)
    idx = np.array([_torch_select(r, k - 1) for r in xm.reshape(-1, xm.shape[-1])], np.int64).reshape(xm.shape[:-1])
    v = np.take_along_axis(xm, idx[..., None], -1)[..., 0]
    return (np.expand_dims(v, dim), np.expand_dims(idx, dim)) if keepdim else (v, idx)


def _sort_expected(op, sample, values):
    x = sample.args[0]
    out = op.ref(*values, **sample.kwargs)
    if op.name == "argsort":
        return out[1], "int64"
    if op.name == "msort":
        return quantize(out[0], x.dtype), x.dtype
    return (quantize(out[0], x.dtype), out[1]), (x.dtype, "int64")


SORTS = {"sort": (lambda x, dim=-1, descending=False, stable=False: _sort_ref(x, dim, descending), DTYPES),
         "argsort": (lambda x, dim=-1, descending=False, stable=False: _sort_ref(x, dim, descending), DTYPES),
         "msort": (lambda x: _sort_ref(x, 0), DTYPES),
         "topk": (_topk_ref, NUMERIC), "kthvalue": (_kthvalue_ref, NUMERIC)}
OPS += [OpInfo(n, r, dtypes=d, kind="sort", variants="FMO" if n == "msort" else "FM", samples=_sort_samples,
               expect=_sort_expected) for n, (r, d) in SORTS.items()]


def _search_samples(op, dtype, layout):
    rng = rng_for(op.name, dtype, layout)
    seq = np.sort(gen_values(rng, dtype, (9,), (-5, 5)))
    vals = gen_values(rng, dtype, layout_shape(layout, (3, 4)), (-6, 6))
    s, v = TS(seq, dtype, False), TS(vals, dtype)
    first = (lambda a, b: (a, b)) if op.name == "searchsorted" else (lambda a, b: (b, a))
    out = [Sample(first(s, v)), Sample(first(s, v), {"right": True}), Sample(first(s, v), {"out_int32": True})]
    if layout == "contig":
        x0 = vals.reshape(-1)[0].item()
        out += [Sample(first(s, x0 if dtype != "bool" else bool(x0)), desc="scalar")]
        if op.name == "searchsorted":
            rows = np.sort(gen_values(rng, dtype, (3, 6)), axis=-1)
            perm = rng.permutation(9)
            out += [Sample((TS(rows, dtype, False), TS(vals, dtype, False)), desc="batched"),
                    Sample((s, v), {"side": "right"}),
                    Sample((TS(seq[perm], dtype, False), v), {"sorter": TS(np.argsort(seq[perm], kind="stable"),
                                                                             "int64", False)}, desc="sorter"),
                    Sample((s, TS(gen_values(rng, dtype, (40, 997)), dtype, False)), desc="big")]
    return out


def _search_ref(seq, v, out_int32=False, right=False, side=None, sorter=None):
    side = side or ("right" if right else "left")
    if sorter is not None:
        seq = np.take_along_axis(seq, sorter, -1)
    v = np.asarray(v)
    if seq.ndim == 1:
        return np.searchsorted(seq, v, side=side)
    out = np.zeros(v.shape, np.int64)
    for i in np.ndindex(*v.shape[:-1]):
        out[i] = np.searchsorted(seq[i], v[i], side=side)
    return out


def _search_expected(op, sample, values):
    kw = _kwvalues(sample)
    a, b = values
    if op.name == "bucketize":
        a, b = b, a
    out = _search_ref(a, b, **kw)
    dt = "int32" if sample.kwargs.get("out_int32") else "int64"
    return out.astype(NP[dt]), dt


OPS += [OpInfo(n, None, dtypes=NUMERIC, kind="sort", variants="FO", samples=_search_samples, expect=_search_expected)
        for n in ("searchsorted", "bucketize")]


def _unique_samples(op, dtype, layout):
    rng = rng_for(op.name, dtype, layout)
    sh = layout_shape(layout, (4, 6))
    x = TS(gen_values(rng, dtype, sh, (-2, 2)), dtype)
    cons = op.name == "unique_consecutive"
    flags = [{}, {"return_inverse": True}, {"return_counts": True}, {"return_inverse": True, "return_counts": True}]
    out = [Sample((x,), f) for f in flags]
    if sh and 0 not in sh[1:]:
        out += [Sample((x,), dict(f, dim=0)) for f in flags[1:]]
    if len(sh) == 2 and 0 not in sh:
        out.append(Sample((x,), {"dim": 1, "return_inverse": True, "return_counts": True}))
    if layout == "contig":
        rows = np.repeat(gen_values(rng, dtype, (3, 4), (-2, 2)), [2, 1, 3], axis=0)
        out.append(Sample((TS(rows[rng.permutation(6)] if not cons else rows, dtype, False),),
                          {"dim": 0, "return_inverse": True, "return_counts": True}, desc="repeated rows"))
        big = TS(gen_values(rng, dtype, (5000,), (-9, 9)), dtype, False)
        out.append(Sample((big,), {"return_inverse": True, "return_counts": True}, desc="big"))
        if is_float(dtype):
            out.append(Sample((TS(np.array([1.0, np.nan, -0.0, np.nan, 0.0, 1.0]), dtype, False),),
                              {"return_inverse": True, "return_counts": True}, desc="nan"))
    return out


def _unique_ref(x, sorted=True, return_inverse=False, return_counts=False, dim=None, consecutive=False):
    if dim is None:
        flat = x.reshape(-1)
        if consecutive:
            new = np.ones(flat.size, bool)
            new[1:] = ~(flat[1:] == flat[:-1])
            gid = np.cumsum(new) - 1
            vals = flat[new]
            counts = np.bincount(gid, minlength=vals.size) if flat.size else np.zeros(0, np.int64)
            inv = gid.reshape(x.shape)
        else:
            vals, inv, counts = np.unique(flat, return_inverse=True, return_counts=True, equal_nan=False)
            inv = inv.reshape(x.shape)
    else:
        xm = np.moveaxis(x, dim, 0)
        m = xm.shape[0]
        rows = xm.reshape(m, int(np.prod(xm.shape[1:])))
        if consecutive:
            new = np.ones(m, bool)
            if m:
                new[1:] = ~np.all(rows[1:] == rows[:-1], axis=1)
            gid = np.cumsum(new) - 1
            vals = xm[new]
            counts = np.bincount(gid, minlength=int(new.sum())) if m else np.zeros(0, np.int64)
            inv = gid
        else:
            order = np.lexsort(rows.T[::-1]) if m else np.zeros(0, np.int64)
            srt = rows[order]
            new = np.ones(m, bool)
            if m:
                new[1:] = ~np.all(srt[1:] == srt[:-1], axis=1)
            gid = np.cumsum(new) - 1
            inv = np.zeros(m, np.int64)
            inv[order] = gid
            vals = xm[order][new]
            counts = np.bincount(gid, minlength=int(new.sum())) if m else np.zeros(0, np.int64)
        vals = np.moveaxis(vals, 0, dim)
    res = [vals]
    if return_inverse:
        res.append(np.asarray(inv, np.int64))
    if return_counts:
        res.append(np.asarray(counts, np.int64))
    return res


def _unique_expected(op, sample, values):
    x = sample.args[0]
    res = _unique_ref(values[0], **sample.kwargs, consecutive=op.name == "unique_consecutive")
    if len(res) == 1:
        return quantize(res[0], x.dtype), x.dtype
    return (quantize(res[0], x.dtype),) + tuple(res[1:]), (x.dtype,) + ("int64",) * (len(res) - 1)


OPS += [OpInfo(n, None, kind="sort", variants="FM", samples=_unique_samples, expect=_unique_expected)
        for n in ("unique", "unique_consecutive")]

# ---------------------------------------------------------------------------
# reductions, scans and selections (csrc/ops/reduce.c). A sample is
# (x, *positional) plus kwargs, the reference a NumPy function of the same
# arguments computed wide (int64 / float64); `result` gives the result dtype
# (a tuple for (values, indices) results) from the input dtype and kwargs.
def _np_axis(dim, ndim):
    """torch's dim (None / int / tuple; () is every dim) as a NumPy axis."""
    if dim is None or ndim == 0:
        return None
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    return None if not dims else tuple(d % ndim for d in dims)


def _split(dim=None, keepdim=False, **kw):
    return dim, keepdim, kw


def _kept(r, x, dim, keepdim):
    """Re-insert reduced dims of size 1 (keepdim), or give a 0-d result."""
    r = np.asarray(r)
    if keepdim:
        ax = _np_axis(dim, x.ndim)
        shape = [1 if ax is None or i in ax else n for i, n in enumerate(x.shape)]
        r = r.reshape(shape)
    return r


def _red(fn):
    """A reference fn(x (wide), axis) -> array, as f(x, dim=None, keepdim=False, **kw)."""
    def ref(x, dim=None, keepdim=False, dtype=None, **kw):
        xv = quantize(x, dtype) if dtype else x
        with np.errstate(all="ignore"):
            r = fn(_wide(xv), _np_axis(dim, x.ndim), **kw)
        return _kept(r, x, dim, keepdim)
    return ref


def _var_np(x, axis, correction=1, root=False):
    n = x.size if axis is None else int(np.prod([x.shape[a] for a in axis]))
    m = np.mean(x, axis=axis, keepdims=True) if n else np.full([1] * x.ndim, np.nan)
    s = np.sum((x - m) ** 2, axis=axis)
    r = s / max(0, n - correction)
    return np.sqrt(r) if root else r


def _var_ref(root, with_mean=False):
    def ref(x, dim=None, unbiased=None, keepdim=False, correction=None):
        if isinstance(dim, bool):
            dim, unbiased = None, dim
        c = correction if correction is not None else (0 if unbiased is False else 1)
        ax = _np_axis(dim, x.ndim)
        with np.errstate(all="ignore"):
            v = _kept(_var_np(_wide(x), ax, c, root), x, dim, keepdim)
            if not with_mean:
                return v
            return v, _kept(np.mean(_wide(x), axis=ax), x, dim, keepdim)
    return ref


def _vnorm(x, ord=2, dim=None, keepdim=False, dtype=None):
    a = np.abs(_wide(x))
    ax = _np_axis(dim, x.ndim)
    with np.errstate(all="ignore"):
        if ord == 0:
            r = np.sum(a != 0, axis=ax).astype(np.float64)
        elif ord == np.inf:
            r = np.max(a, axis=ax)
        elif ord == -np.inf:
            r = np.min(a, axis=ax)
        else:
            r = np.sum(a ** ord, axis=ax) ** (1.0 / ord)
    return _kept(r, x, dim, keepdim)


def _norm_ref(x, p="fro", dim=None, keepdim=False, dtype=None):
    return _vnorm(x, 2 if p in ("fro", None) else p, dim, keepdim)


def _lse(x, dim, keepdim=False):
    xv = _wide(x).astype(np.float64)
    ax = _np_axis(dim, x.ndim)
    with np.errstate(all="ignore"):
        m = np.max(xv, axis=ax, keepdims=True) if xv.size else np.full([1] * xv.ndim, -np.inf)
        m = np.where(np.isinf(m), 0, m)
        r = np.log(np.sum(np.exp(xv - m), axis=ax, keepdims=True)) + m
    r = r if keepdim else np.squeeze(r, axis=ax) if ax is not None else r.reshape(())
    return r


def _first_extreme(x, axis, largest):
    """(values, first index of the extreme or of the first NaN) along one axis."""
    xv = _wide(x)
    idx = np.argmax(xv, axis=axis) if largest else np.argmin(xv, axis=axis)
    if xv.dtype.kind == "f":
        nan = np.isnan(xv)
        idx = np.where(nan.any(axis=axis), np.argmax(nan, axis=axis), idx)
    return np.take_along_axis(xv, np.expand_dims(idx, axis), axis).squeeze(axis), idx


def _max_ref(largest):
    def ref(x, dim=None, keepdim=False):
        if dim is None:
            with np.errstate(all="ignore"):
                return (np.max if largest else np.min)(_wide(x))
        ax = dim % max(x.ndim, 1)
        if x.ndim == 0:
            return x, np.array(0)
        v, i = _first_extreme(x, ax, largest)
        return _kept(v, x, dim, keepdim), _kept(i, x, dim, keepdim)
    return ref


def _argmax_ref(largest):
    def ref(x, dim=None, keepdim=False):
        if dim is None:
            i = _first_extreme(x.reshape(-1), 0, largest)[1]
            return np.reshape(i, [1] * x.ndim) if keepdim else i
        if x.ndim == 0:
            return np.array(0)
        return _kept(_first_extreme(x, dim % x.ndim, largest)[1], x, dim, keepdim)
    return ref


def _minmax_ref(x, dim=None, keepdim=False):
    with np.errstate(all="ignore"):
        return _red(np.min)(x, dim, keepdim), _red(np.max)(x, dim, keepdim)


def _pairs_order(line):
    """Positions of a line sorted by (value, index), NaN above everything."""
    key = [(1, 0.0, i) if v != v else (0, v, i) for i, v in enumerate(line.tolist())]
    return [k[2] for k in sorted(key)]


def _select_line(line, kind):
    vals = line.tolist()
    nan = [i for i, v in enumerate(vals) if v != v]
    if kind == "median" and nan:
        return nan[0]
    keep = [i for i in _pairs_order(line) if kind == "mode" or vals[i] == vals[i]]
    if not keep:
        return 0
    if kind != "mode":
        return keep[(len(keep) - 1) // 2]
    best, best_at, run = 0, 0, 0
    for j, i in enumerate(keep):
        run += 1
        if j == len(keep) - 1 or not vals[keep[j + 1]] == vals[i]:
            if run > best:
                best, best_at = run, i
            run = 0
    return best_at


def _select_ref(kind):
    def lines_pick(lines):
        """The picked position of each row of a 2-D array (vectorized for the medians)."""
        if kind == "mode":
            return np.array([_select_line(l, kind) for l in lines], np.int64)
        n = lines.shape[-1]
        lv = lines.astype(np.float64)
        nan = np.isnan(lv)
        order = np.lexsort((np.broadcast_to(np.arange(n), lv.shape), np.where(nan, 0, lv), nan), axis=-1)
        cnt = n - nan.sum(-1) if kind == "nanmedian" else np.full(len(lines), n)
        k = np.maximum(cnt - 1, 0) // 2
        pick = np.take_along_axis(order, k[:, None], -1)[:, 0]
        if kind == "median":
            pick = np.where(nan.any(-1), np.argmax(nan, -1), pick)
        else:
            pick = np.where(cnt == 0, 0, pick)
        return pick.astype(np.int64)

    def ref(x, dim=None if kind != "mode" else -1, keepdim=False):
        if dim is None:
            if x.size == 0:
                return np.array(np.nan)
            flat = x.reshape(-1)
            return flat[lines_pick(flat[None, :])[0]]
        if x.ndim == 0:
            return x, np.array(0)
        ax = dim % x.ndim
        moved = np.moveaxis(x, ax, -1)
        idx = lines_pick(moved.reshape(-1, moved.shape[-1])).reshape(moved.shape[:-1])
        v = np.take_along_axis(moved, idx[..., None], -1)[..., 0]
        return _kept(v, x, dim, keepdim), _kept(idx, x, dim, keepdim)
    return ref


def _cum(fn):
    def ref(x, dim, dtype=None):
        xv = _wide(quantize(x, dtype) if dtype else x)
        if x.ndim == 0:
            return xv
        with np.errstate(all="ignore"):
            return fn(xv, axis=dim % x.ndim)
    return ref


def _cumext(largest):
    def ref(x, dim):
        if x.ndim == 0:
            return x, np.array(0)
        ax = dim % x.ndim
        moved = np.moveaxis(_wide(x), ax, -1)
        vals, idx = np.empty_like(moved), np.zeros(moved.shape, np.int64)
        for pos in np.ndindex(moved.shape[:-1]):
            best, bi = None, 0
            for i, v in enumerate(moved[pos]):
                if i == 0 or v != v or (best == best and (v >= best if largest else v <= best)):
                    best, bi = v, i
                vals[pos + (i,)], idx[pos + (i,)] = best, bi
        return np.moveaxis(vals, -1, ax), np.moveaxis(idx, -1, ax)
    return ref


def _sum_dt(d, kw):
    return str(kw["dtype"]) if kw.get("dtype") else ("int64" if not is_float(d) else d)


RED_RESULT = {  # op -> (input dtype, kwargs) -> result dtype
    "sum": _sum_dt, "nansum": _sum_dt, "prod": _sum_dt, "cumsum": _sum_dt, "cumprod": _sum_dt,
    "mean": lambda d, kw: str(kw.get("dtype") or d), "nanmean": lambda d, kw: str(kw.get("dtype") or d),
    "amax": lambda d, kw: d, "amin": lambda d, kw: d, "aminmax": lambda d, kw: (d, d),
    "argmax": lambda d, kw: "int64", "argmin": lambda d, kw: "int64",
    "var": lambda d, kw: d, "std": lambda d, kw: d, "var_mean": lambda d, kw: (d, d),
    "std_mean": lambda d, kw: (d, d), "norm": lambda d, kw: str(kw.get("dtype") or d),
    "_linalg_vector_norm": lambda d, kw: str(kw.get("dtype") or d),
    "logsumexp": lambda d, kw: d if is_float(d) else "float32",
    "all": lambda d, kw: "uint8" if d == "uint8" else "bool", "any": lambda d, kw: "uint8" if d == "uint8" else "bool",
    "count_nonzero": lambda d, kw: "int64",
    "cummax": lambda d, kw: (d, "int64"), "cummin": lambda d, kw: (d, "int64"),
}


def _red_expected(op, sample, values):
    x = sample.args[0]
    kw = {k: (str(v) if isinstance(v, DT) else v) for k, v in sample.kwargs.items()}
    out = op.ref(*values, **kw)
    if op.name in RED_RESULT:
        dt = RED_RESULT[op.name](x.dtype, kw)
    else:  # max/min/median/nanmedian/mode: (values, indices) with a dim, else the value
        with_dim = len(sample.args) > 1 or "dim" in kw or op.name == "mode"
        dt = (x.dtype, "int64") if with_dim else x.dtype
    if isinstance(dt, tuple):
        return tuple(quantize(np.asarray(o), d) for o, d in zip(out, dt)), dt
    return quantize(np.asarray(out), dt), dt


def _red_values(rng, dtype, shape, kind):
    if kind == "distinct" and dtype != "bool":  # no ties: indices are well defined
        n = int(np.prod(shape))
        v = rng.permutation(n).reshape(shape) - n // 2
        if dtype == "uint8":
            v = v + n // 2
        if is_float(dtype):
            v = v / 4.0
        return quantize(v, dtype)
    if kind == "near1":  # products stay finite
        return quantize(rng.uniform(0.5, 1.5, shape), dtype) if is_float(dtype) else \
            quantize(rng.integers(0, 3, shape) if dtype != "bool" else rng.random(shape) < 0.9, dtype)
    if kind == "few" and dtype != "bool":  # repeats (mode)
        return quantize(rng.integers(0, 4, shape), dtype)
    return gen_values(rng, dtype, shape)


# what each op takes after x: lists of (positional tuple, kwargs)
_DIMS = [((), {}), ((0,), {}), ((1,), {"keepdim": True}), ((-1,), {}), (((0, 1),), {}),
         ((), {"dim": (-1, 0), "keepdim": True})]
_DIMS_0D = [((), {}), ((0,), {}), ((-1,), {"keepdim": True})]
_ONE_DIM = [((0,), {}), ((1,), {"keepdim": True}), ((-1,), {})]
_ONE_DIM_0D = [((0,), {}), ((-1,), {"keepdim": True})]


def _red_args(op, dtype, layout):
    name, zero = op.name, layout == "0d"
    dims = _DIMS_0D if zero else _DIMS
    if name in ("sum", "nansum", "mean", "nanmean"):
        extra = [((0,), {"dtype": DT("float64")})] if is_float(dtype) or name in ("sum", "nansum") else []
        if name in ("sum", "nansum") and not zero:
            extra += [((1,), {"dtype": DT("int32")}), ((), {"dtype": DT("float32")})]
        return dims + extra
    if name == "prod":
        return [((), {}), ((0,), {})] + ([] if zero else [((1,), {"keepdim": True}), ((-1,), {"dtype": DT("float64")})])
    if name in ("amax", "amin", "all", "any", "count_nonzero", "logsumexp"):
        d = [a for a in dims if a != ((), {})] if name == "logsumexp" else dims
        if name == "count_nonzero":
            d = [(a, {}) for a, k in d if "keepdim" not in k]
        return d
    if name in ("max", "min", "median", "nanmedian"):
        return [((), {})] + (_ONE_DIM_0D if zero else _ONE_DIM)
    if name in ("argmax", "argmin"):
        return [((), {}), ((), {"keepdim": True})] + (_ONE_DIM_0D if zero else _ONE_DIM)
    if name == "aminmax":
        return [((), {})] + [((), {"dim": d[0][0], **d[1]}) for d in (_ONE_DIM_0D if zero else _ONE_DIM)]
    if name == "mode":
        return [((), {})] + (_ONE_DIM_0D if zero else _ONE_DIM)
    if name in ("var", "std", "var_mean", "std_mean"):
        out = [((), {}), ((0,), {}), ((False,), {}), ((), {"correction": 0})]
        if not zero:
            out += [((1, False, True), {}), (((0, 1),), {"keepdim": True}), ((), {"dim": -1, "correction": 2.5})]
        return out
    if name == "norm":
        return [((), {}), ((1,), {}), ((float("inf"),), {}), ((3.0,), {"dim": -1 if zero else 1, "keepdim": True}),
                ((0,), {}), ((-float("inf"),), {}), (("fro",), {"dim": 0}), ((), {"dtype": DT("float64")})]
    if name == "_linalg_vector_norm":
        return [((), {}), ((1,), {"dim": 0}), ((0.5,), {"dim": -1, "keepdim": True}), ((float("inf"),), {}),
                ((-1.5,), {}), ((0,), {}), ((2,), {"dtype": DT("float64")})]
    if name in ("cumsum", "cumprod"):
        return [((0,), {}), ((-1,), {})] + ([((-1,), {"dtype": DT("float64")})] if not zero else [])
    if name in ("cummax", "cummin"):
        return [((0,), {}), ((-1,), {})]
    raise KeyError(name)


def _red_nonempty_ok(op, args, kw, shape):
    """Drop samples that reduce over an empty dim where the op has no identity."""
    if op.name not in ("max", "min", "amax", "amin", "aminmax", "argmax", "argmin", "median", "nanmedian",
                       "mode") or 0 not in shape:
        if op.name in ("norm", "_linalg_vector_norm") and 0 in shape:
            p = args[0] if args else 2
            return not (isinstance(p, (int, float)) and (p < 0 or p == float("inf"))) or "dim" in kw
        return True
    dim = args[0] if args else kw.get("dim")
    if dim is None:
        return op.name in ("median", "nanmedian") and op.name != "mode"
    ax = _np_axis(dim, len(shape))
    return all(shape[a] != 0 for a in ax)


_RED_3D = {  # (positional, kwargs) after x for the 3-D sample: reduced dims that do not merge
    "prod": ((2,), {}), "aminmax": ((), {"dim": 1}), "norm": ((2,), {"dim": (0, 2)}),
    "_linalg_vector_norm": ((2,), {"dim": (0, 2)}),
    **{n: ((1,), {}) for n in ("max", "min", "argmax", "argmin", "median", "nanmedian", "mode", "cumsum",
                               "cumprod", "cummax", "cummin")}}
_SLOW_REFS = ("cummax", "cummin", "mode")  # Python-loop references: no big samples


def red_samples(op, dtype, layout):
    rng = rng_for(op.name, dtype, layout)
    kind = op.doms or "plain"
    shape = layout_shape(layout)
    x = TS(_red_values(rng, dtype, shape, kind), dtype)
    out = [Sample((x,) + a, dict(k)) for a, k in _red_args(op, dtype, layout) if _red_nonempty_ok(op, a, k, shape)]
    if op.name in ("median", "nanmedian") and 0 in shape and not is_float(dtype):
        out = [s for s in out if _has_dim(s)]  # torch's value for an empty integer median is a cast NaN
    if layout in ("contig", "T", "slice", "expand"):
        a3, k3 = _RED_3D.get(op.name, (((0, 2),), {}))
        out.append(Sample((TS(_red_values(rng, dtype, (2, 3, 4), kind), dtype),) + a3, dict(k3), "3-d"))
    if layout == "contig" and op.name not in _SLOW_REFS:  # 77100 elements: the threaded paths
        xb = TS(_red_values(rng, dtype, (257, 300), kind), dtype)
        out += [Sample((xb,) + a, dict(k), "big") for a, k in _red_args(op, dtype, "contig")[:2]]
    # NaN / inf (not var_mean: torch's Welford mean of [inf, x] is NaN, ember's inf)
    if is_float(dtype) and layout == "contig" and op.name not in ("mode", "var_mean", "std_mean"):
        sp = TS(np.array([SPECIALS[:7], SPECIALS[7:]]), dtype, False)
        out += [Sample((sp,) + a, dict(k), "specials") for a, k in _red_args(op, dtype, "contig")[:4]]
    if op.name == "mode" and layout == "contig":  # ties (torch's index is the last one for lines <= 16)
        out.append(Sample((TS(_red_values(rng, dtype, (3, 16), "few"), dtype, False), 1), {}, "ties"))
    return out


def RED(name, ref, dtypes=DTYPES, unsupported=NotImplementedError, variants="FMO", values=None, **kw):
    return OpInfo(name, ref, dtypes=dtypes, unsupported=unsupported, variants=variants, kind="reduce",
                  samples=red_samples, expect=_red_expected, doms=values, **kw)


def _has_dim(s):
    return len(s.args) > 1 or "dim" in s.kwargs


_REDUCE_TOL = {"float16": (4e-3, 2e-3), "bfloat16": (2e-2, 1e-2), "float32": (2e-5, 1e-5),
               "float64": (1e-10, 1e-12)}
# (torch multiplies half types in lower precision than the reference; ember in double)
_PROD_TOL = {**_REDUCE_TOL, "float16": (2e-2, 1e-2), "bfloat16": (6e-2, 2e-2)}


def _cum_inplace_raises(dtype, kw, shape):
    """x.cumsum_(dim, dtype=...) needs dtype == x's; bool has no kernel (but for 0-d / empty)."""
    if kw.get("dtype") and str(kw["dtype"]) != dtype:
        return RuntimeError
    return NotImplementedError if dtype == "bool" and shape and 0 not in shape else None


def _var_out_ok(s):
    """torch's var(x, unbiased) form has no out=."""
    return not any(isinstance(a, bool) for a in s.args[1:2])
OPS += [
    RED("sum", _red(lambda x, a: np.sum(x, axis=a)), out_ok=_has_dim, tol=_REDUCE_TOL),
    RED("nansum", _red(lambda x, a: np.nansum(x, axis=a)), out_ok=_has_dim, tol=_REDUCE_TOL),
    RED("mean", _red(lambda x, a: np.mean(x, axis=a)), dtypes=FLOATS, out_ok=_has_dim, tol=_REDUCE_TOL),
    RED("nanmean", _red(lambda x, a: np.nanmean(x, axis=a)), dtypes=FLOATS, out_ok=_has_dim, tol=_REDUCE_TOL),
    RED("prod", _red(lambda x, a: np.prod(x, axis=a)), values="near1", out_ok=_has_dim, tol=_PROD_TOL),
    RED("amax", _red(lambda x, a: np.max(x, axis=a)), unsupported=RuntimeError),
    RED("amin", _red(lambda x, a: np.min(x, axis=a)), unsupported=RuntimeError),
    RED("max", _max_ref(True), variants="FM", values="distinct"),
    RED("min", _max_ref(False), variants="FM", values="distinct"),
    RED("aminmax", _minmax_ref, variants="FM"),
    RED("argmax", _argmax_ref(True), dtypes=NUMERIC, values="distinct"),
    RED("argmin", _argmax_ref(False), dtypes=NUMERIC, values="distinct"),
    RED("var", _var_ref(False), dtypes=FLOATS, tol=_REDUCE_TOL, out_ok=_var_out_ok),
    RED("std", _var_ref(True), dtypes=FLOATS, tol=_REDUCE_TOL, out_ok=_var_out_ok),
    RED("var_mean", _var_ref(False, True), dtypes=FLOATS, variants="F", tol=_REDUCE_TOL),
    RED("std_mean", _var_ref(True, True), dtypes=FLOATS, variants="F", tol=_REDUCE_TOL),
    RED("norm", _norm_ref, dtypes=FLOATS, tol=_REDUCE_TOL),
    RED("_linalg_vector_norm", _vnorm, dtypes=FLOATS, variants="FO", tol=_REDUCE_TOL,
        fn=lambda L: L.linalg.vector_norm),
    RED("logsumexp", _lse, tol=_REDUCE_TOL),
    RED("all", _red(lambda x, a: np.all(x, axis=a))),
    RED("any", _red(lambda x, a: np.any(x, axis=a))),
    RED("count_nonzero", _red(lambda x, a: np.count_nonzero(x, axis=a)), variants="FM"),
    RED("cumsum", _cum(np.cumsum), variants="FMIO", tol=_REDUCE_TOL, inplace_raises=_cum_inplace_raises),
    RED("cumprod", _cum(np.cumprod), variants="FMIO", values="near1", tol=_PROD_TOL,
        inplace_raises=_cum_inplace_raises),
    RED("cummax", _cumext(True), variants="FM"),
    RED("cummin", _cumext(False), variants="FM"),
    RED("median", _select_ref("median"), dtypes=NUMERIC, variants="FM"),
    RED("nanmedian", _select_ref("nanmedian"), dtypes=NUMERIC, variants="FM"),
    RED("mode", _select_ref("mode"), variants="FM", values="few"),
]


# ---------------------------------------------------------------------------
# fused optimizer steps (csrc/ops/optim.c): torch's private _fused_adam_ and
# _fused_adamw_ on one parameter, against Adam's documented update in float64
def _fused_adam_samples(op, dtype, layout):
    rng = rng_for(op.name, dtype, layout)
    t = lambda dom=(-2, 2): TS(gen_values(rng, dtype, layout_shape(layout), dom), dtype)  # noqa: E731
    kw = dict(lr=0.1, beta1=0.9, beta2=0.99, weight_decay=0.05, eps=1e-8, maximize=False)
    return [Sample((t(), t(), t(), t((0, 2)), None, 3.0), kw),
            Sample((t(), t(), t(), t((0, 2)), t((0, 2)), 1.0), dict(kw, maximize=True, weight_decay=0.0)),
            Sample((t(), t(), t(), t((0, 2)), t((0, 2)), 7.0), dict(kw, beta1=0.3))]  # lerp's other form


def _fused_adam_ref(decoupled):
    def ref(p, g, m, v, vmax, step, lr, beta1, beta2, weight_decay, eps, maximize):
        p, g, m, v = (np.asarray(a, np.float64) for a in (p, g, m, v))
        g = -g if maximize else g
        if decoupled:
            p = p * (1 - lr * weight_decay)
        else:
            g = g + weight_decay * p
        m = m + (1 - beta1) * (g - m)
        v = beta2 * v + (1 - beta2) * g * g
        out = ()
        if vmax is not None:
            v_used = np.maximum(vmax, v)
            out = (v_used,)
        else:
            v_used = v
        denom = np.sqrt(v_used) / math.sqrt(1 - beta2 ** step) + eps
        return (p - lr / (1 - beta1 ** step) * m / denom, m, v) + out
    return ref


def _fused_adam_call(name):
    def call(L, p, g, m, v, vmax, step, **kw):
        fn = getattr(L._C if L.__name__ == "ember" else L, name)
        extra = {} if L.__name__ == "ember" else {"amsgrad": vmax is not None}
        fn([p], [g], [m], [v], [] if vmax is None else [vmax], [L.tensor(step)], **kw, **extra)
        return (p, m, v) + (() if vmax is None else (vmax,))
    return call


OPS += [OpInfo(n, _fused_adam_ref(n == "_fused_adamw_"), kind="plain", dtypes=FLOATS, variants="F",
               samples=_fused_adam_samples, layouts=("contig", "0d", "empty"), call=_fused_adam_call(n),
               tol={"float16": (5e-3, 2e-3), "bfloat16": (3e-2, 2e-2), "float32": (1e-5, 1e-6),
                    "float64": (1e-10, 1e-12)})
        for n in ("_fused_adam_", "_fused_adamw_")]


# lists of tensors (csrc/ops/foreach.c): torch's private _foreach_norm and
# _foreach_mul_ on a one-tensor list, every layout (the strided ones take the
# per-tensor path), against NumPy in float64
def _foreach_samples(op, dtype, layout):
    rng = rng_for(op.name, dtype, layout)
    x = TS(gen_values(rng, dtype, layout_shape(layout), (-3, 3)), dtype, layout)
    if op.name == "_foreach_norm":
        ords = (2.0, 1.0) if layout == "empty" else (2.0, 1.0, math.inf)  # inf of nothing raises
        return [Sample((x, o)) for o in ords]
    if dtype in INTS:  # in place: an integer tensor takes integer factors only
        return [Sample((x, 2)), Sample((x, -3))]
    return [Sample((x, 0.5)), Sample((x, -3))]


OPS += [OpInfo("_foreach_norm", lambda x, o: np.linalg.norm(np.asarray(x, np.float64).ravel(), o),
               kind="plain", dtypes=FLOATS, variants="F", samples=_foreach_samples, layouts=LAYOUTS,
               call=lambda L, x, o: L._foreach_norm([x], o)[0]),
        OpInfo("_foreach_mul_", lambda x, s: np.asarray(x, np.float64) * s, kind="plain", dtypes=INTS + FLOATS,
               variants="F", samples=_foreach_samples, layouts=("contig", "T", "slice", "0d", "empty"),
               call=lambda L, x, s: (L._foreach_mul_([x], s), x)[1], unsupported=RuntimeError)]

# ---------------------------------------------------------------------------
# nn functional ops in C (ops/norm.c, ops/nn.c), reached through nn.functional
def _norm_samples(op, dtype, layout):
    rng = rng_for(op.name, dtype, layout)
    shape = layout_shape(layout)
    t = lambda shp, lay=True: TS(gen_values(rng, dtype, shp, (-3, 3)), dtype, lay)  # noqa: E731
    if not shape:  # 0-d: normalize over nothing is an error; use a vector
        shape = (4,)
    last = shape[-1:]
    if op.name == "_rms_norm":
        return [Sample((t(shape), last, t(last, False)), {"eps": 1e-3}),
                Sample((t(shape), last), desc="default eps"), Sample((t(shape), shape), desc="all dims")]
    return [Sample((t(shape), last, t(last, False), t(last, False)), {"eps": 1e-3}),
            Sample((t(shape), last, None, None)), Sample((t(shape), shape, None, None), desc="all dims")]


def _np_norm(rms):
    def ref(x, ns, w=None, b=None, eps=None):  # (rms_norm has no b)
        k = len(ns)
        axes = tuple(range(x.ndim - k, x.ndim))
        x64 = np.asarray(x, np.float64)
        if eps is None:
            eps = 1e-5 if not rms else float(np.finfo(np.asarray(x).dtype).eps) if np.asarray(x).dtype.kind == "f" \
                else 1.1920928955078125e-07
        if rms:
            y = x64 / np.sqrt((x64 * x64).mean(axes, keepdims=True) + eps)
        else:
            y = (x64 - x64.mean(axes, keepdims=True)) / np.sqrt(x64.var(axes, keepdims=True) + eps)
        return y * (1 if w is None else w) + (0 if b is None else b)
    return ref


def _norm_call(rms):
    def call(L, x, ns, w=None, b=None, **kw):
        F = L.nn.functional
        return F.rms_norm(x, ns, w, **kw) if rms else F.layer_norm(x, ns, w, b, **kw)
    return call


def _embedding_samples(op, dtype, layout):
    rng = rng_for(op.name, dtype, layout)
    w = TS(gen_values(rng, dtype, (5, 3)), dtype, False)
    idx = TS(np.array([[0, 4, 4], [2, 0, 3]]), "int64", False, exact=True)
    return [Sample((w, idx)), Sample((w, TS(np.array(3), "int64", False, exact=True)), desc="0-d index"),
            Sample((w, TS(np.zeros((2, 0), np.int64), "int64", False, exact=True)), desc="no indices"),
            Sample((w, idx), {"padding_idx": 4})]


def _dropout_samples(op, dtype, layout):
    rng = rng_for(op.name, dtype, layout)
    x = TS(gen_values(rng, dtype, layout_shape(layout)), dtype)
    if dtype not in FLOATS:  # what torch rejects: a draw into an integer tensor
        return [Sample((x, 0.5, True))]
    return [Sample((x, 0.0, True), desc="p=0"), Sample((x, 1.0, True), desc="p=1"),
            Sample((x, 0.5, False), desc="eval")]


def _ln_backward_samples(op, dtype, layout):
    """grad_out, input, normalized_shape and input's own mean / rstd (eps 1e-5)."""
    rng = rng_for(op.name, dtype, layout)
    shape = layout_shape(layout) or (4,)
    out = []
    for k, with_w in ((1, True), (1, False), (len(shape), True)):
        x = TS(gen_values(rng, dtype, shape, (-3, 3)), dtype)
        axes = tuple(range(len(shape) - k, len(shape)))
        x64 = x.values.astype(np.float64)
        mean = x64.mean(axes, keepdims=True)
        rstd = 1 / np.sqrt(x64.var(axes, keepdims=True) + 1e-5)
        stat = lambda v: TS(np.broadcast_to(v, x64.shape[:len(shape) - k] + (1,) * k), dtype, False)  # noqa: E731
        w = TS(gen_values(rng, dtype, shape[-k:], (-2, 2)), dtype, False) if with_w else None
        out.append(Sample((TS(gen_values(rng, dtype, shape), dtype), x, tuple(shape[-k:]), stat(mean), stat(rstd), w),
                          desc=f"{k} dims" + ("" if with_w else ", no weight")))
    return out


def _ln_backward_call(L, g, x, ns, mean, rstd, w=None):
    if L.__name__ != "torch":
        return L._C._native_layer_norm_backward(g, x, ns, mean, rstd, w)
    # torch's op wants a weight for the weight/bias gradients; ones change nothing
    w = L.ones(ns, dtype=x.dtype) if w is None else w
    return L.ops.aten.native_layer_norm_backward(g, x, list(ns), mean, rstd, w, w, [True, True, True])


def _np_ln_backward(g, x, ns, mean, rstd, w=None):
    g, x = np.asarray(g, np.float64), np.asarray(x, np.float64)
    mean, rstd = np.asarray(mean, np.float64), np.asarray(rstd, np.float64)
    axes = tuple(range(x.ndim - len(ns), x.ndim))
    lead = tuple(range(x.ndim - len(ns)))
    xh = (x - mean) * rstd
    gw = g * (1 if w is None else np.asarray(w, np.float64))
    dx = rstd * (gw - gw.mean(axes, keepdims=True) - xh * (gw * xh).mean(axes, keepdims=True))
    return dx, (g * xh).sum(lead), g.sum(lead)


OPS += [
    OpInfo("_native_layer_norm", _np_norm(False), kind="plain", dtypes=FLOATS, unsupported=NotImplementedError,
           variants="F", samples=_norm_samples, layouts=("contig", "T", "slice", "expand", "0d", "empty"),
           call=_norm_call(False), tol={"float16": (1e-2, 1e-2), "bfloat16": (5e-2, 5e-2)}),
    OpInfo("_rms_norm", _np_norm(True), kind="plain", dtypes=FLOATS, unsupported=NotImplementedError,
           variants="F", samples=_norm_samples, layouts=("contig", "T", "slice", "expand", "0d", "empty"),
           call=_norm_call(True), tol={"float16": (1e-2, 1e-2), "bfloat16": (5e-2, 5e-2)}),
    OpInfo("_native_layer_norm_backward", _np_ln_backward, kind="plain", dtypes=FLOATS,
           unsupported=NotImplementedError, variants="F", samples=_ln_backward_samples,
           layouts=("contig", "T", "slice", "0d"), call=_ln_backward_call,
           tol={"float16": (3e-2, 3e-2), "bfloat16": (1e-1, 1e-1)}),
    OpInfo("embedding", lambda w, i, padding_idx=None: np.asarray(w)[np.asarray(i)], kind="plain",
           dtypes=DTYPES, variants="F", samples=_embedding_samples, layouts=("contig",),
           call=lambda L, w, i, **kw: L.nn.functional.embedding(i, w, **kw)),
    OpInfo("_native_dropout", lambda x, p, training: np.asarray(x) * (0.0 if training and p == 1 else 1.0),
           kind="plain", dtypes=FLOATS, unsupported=RuntimeError, variants="F", samples=_dropout_samples,
           layouts=("contig", "T", "0d", "empty"),
           call=lambda L, x, p, training: L.nn.functional.dropout(x, p, training)),
]
# nn: softmax family and losses (nnloss part; tests/test_nn_loss.py and
# tests/autograd_cases_loss.py test them further, against torch too)
def _np_softmax(x, dim, dtype=None, log=False):
    x = np.asarray(x, np.float64)
    if x.ndim == 0:
        return np.float64(0.0 if log else 1.0)
    m = x.max(axis=dim, keepdims=True) if x.size else x
    z = x - m
    lse = np.log(np.exp(z).sum(axis=dim, keepdims=True))
    return z - lse if log else np.exp(z - lse)


def _softmax_samples(op, dtype, layout):
    rng = rng_for(op.name, dtype, layout)
    sh = layout_shape(layout, (3, 4))
    x = TS(rng.uniform(-3, 3, sh), dtype)
    return [Sample((x, 0)), Sample((x, -1))] + ([Sample((x, 1))] if len(sh) == 2 else [])


def _softmax_bw_ref(g, y, dim, log):
    g, y = np.asarray(g, np.float64), np.asarray(y, np.float64)
    if log:
        return g - np.exp(y) * g.sum(axis=dim, keepdims=True)
    return y * (g - (g * y).sum(axis=dim, keepdims=True))


def _softmax_bw_samples(op, dtype, layout):
    rng = rng_for(op.name, dtype, layout)
    sh = layout_shape(layout, (3, 4))
    y = _np_softmax(rng.uniform(-2, 2, sh), -1)
    g = TS(rng.uniform(-1, 1, sh), dtype, False)
    return [Sample((g, TS(y, dtype), -1, False)), Sample((g, TS(np.log(y), dtype), -1, True))]


def _nll_ref(x, t, w=None, reduction=1, ignore_index=-100):
    x, t = np.asarray(x, np.float64), np.asarray(t)
    keep = t != ignore_index
    ts = np.where(keep, t, 0)
    ww = (np.ones(x.shape[1]) if w is None else np.asarray(w, np.float64))[ts] * keep
    terms = -ww * np.take_along_axis(x, ts[:, None], 1)[:, 0]
    return terms if reduction == 0 else terms.sum() if reduction == 2 else terms.sum() / ww.sum()


def _nll_bw_ref(g, x, t, w=None, reduction=1, ignore_index=-100):
    x, t = np.asarray(x, np.float64), np.asarray(t)
    keep = t != ignore_index
    ts = np.where(keep, t, 0)
    ww = (np.ones(x.shape[1]) if w is None else np.asarray(w, np.float64))[ts] * keep
    gi = np.zeros_like(x)
    scale = np.asarray(g, np.float64) * (1 / ww.sum() if reduction == 1 else 1)
    gi[np.arange(len(t)), ts] = -ww * scale
    return gi


def _nll_samples(op, dtype, layout):
    rng = rng_for(op.name, dtype, layout)
    x = TS(rng.uniform(-3, 0, (3, 4)), dtype)
    t = TS(np.array([1, 3, -100]), "int64", False)
    w = TS(rng.uniform(0.5, 2, 4), dtype, False)
    if op.name == "_nll_loss":
        return [Sample((x, t, None, r, -100)) for r in (0, 1, 2)] + [Sample((x, t, w, 1, -100))]
    g0, g1 = TS(rng.uniform(-1, 1, (3,)), dtype, False), TS(np.float64(0.7), dtype, False)
    return [Sample((g0, x, t, None, 0, -100)), Sample((g1, x, t, w, 1, -100)), Sample((g1, x, t, None, 2, -100))]


def _pointwise_ref(x, y, w, pw, kind, reduction, param):
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    d, ad = x - y, np.abs(x - y)
    loss = [d * d, np.where(ad < param, 0.5 * d * d / param, ad - 0.5 * param),
            np.where(ad < param, 0.5 * d * d, param * (ad - 0.5 * param)),
            -(y * np.maximum(np.log(x), -100) + (1 - y) * np.maximum(np.log(1 - x), -100)),
            (1 - y) * x + np.log1p(np.exp(-np.abs(x))) + np.maximum(-x, 0)][kind]
    return loss if reduction == 0 else loss.mean() if reduction == 1 else loss.sum()


def _pointwise_samples(op, dtype, layout):
    rng = rng_for(op.name, dtype, layout)
    sh = layout_shape(layout, (3, 4))
    x, y = TS(rng.uniform(-2, 2, sh), dtype), TS(rng.uniform(-2, 2, sh), dtype)
    p, q = TS(rng.uniform(0.05, 0.95, sh), dtype), TS(rng.uniform(0, 1, sh), dtype)
    return ([Sample((x, y, None, None, k, r, 0.8)) for k in (0, 1, 2, 4) for r in (0, 1, 2)] +
            [Sample((p, q, None, None, 3, r, 1.0)) for r in (0, 1, 2)])


def _torch_pointwise(T):
    nn_ = T._C._nn
    kinds = [lambda x, y, w, pw, r, p: nn_.mse_loss(x, y, r), lambda x, y, w, pw, r, p: nn_.smooth_l1_loss(x, y, r, p),
             lambda x, y, w, pw, r, p: nn_.huber_loss(x, y, r, p),
             lambda x, y, w, pw, r, p: nn_.binary_cross_entropy(x, y, w, r),
             lambda x, y, w, pw, r, p: T.binary_cross_entropy_with_logits(x, y, w, pw, r)]
    return lambda x, y, w, pw, kind, r, p: kinds[kind](x, y, w, pw, r, p)


# the internal ops: ember's _C functions, and torch's own internals doing the same
_NN_INTERNAL = {
    "_softmax_backward_data": lambda T: lambda g, y, d, log: (
        T._log_softmax_backward_data if log else T._softmax_backward_data)(g, y, d, y.dtype),
    "_nll_loss": lambda T: T._C._nn.nll_loss,
    "_nll_loss_backward": lambda T: lambda g, x, t, w, r, i: T.ops.aten.nll_loss_backward(
        g, x, t, w, r, i, T.ops.aten.nll_loss_forward(x, t, w, r, i)[1]),
    "_pointwise_loss": _torch_pointwise,
}


def _nn_fn(name):
    return lambda L: getattr(L._C, name) if hasattr(L._C, name) else _NN_INTERNAL[name](L)


_NN_TOL = {"float16": (2e-2, 2e-2), "bfloat16": (5e-2, 5e-2)}
OPS += [OpInfo("softmax", _np_softmax, dtypes=FLOATS, variants="FM", kind="nn", samples=_softmax_samples,
               tol=_NN_TOL),
        OpInfo("log_softmax", lambda x, d: _np_softmax(x, d, log=True), dtypes=FLOATS, variants="FM", kind="nn",
               samples=_softmax_samples, tol=_NN_TOL),
        OpInfo("_softmax_backward_data", fn=_nn_fn("_softmax_backward_data"), ref=_softmax_bw_ref, dtypes=FLOATS, unsupported=None, variants="F",
               kind="nn", samples=_softmax_bw_samples, layouts=("contig", "T", "slice"), tol=_NN_TOL),
        OpInfo("_nll_loss", fn=_nn_fn("_nll_loss"), ref=_nll_ref, dtypes=FLOATS, unsupported=None, variants="F", kind="nn",
               samples=_nll_samples, layouts=("contig", "T", "slice"), tol=_NN_TOL),
        OpInfo("_nll_loss_backward", fn=_nn_fn("_nll_loss_backward"), ref=_nll_bw_ref, dtypes=FLOATS, unsupported=None, variants="F", kind="nn",
               samples=_nll_samples, layouts=("contig", "T", "slice"), tol=_NN_TOL),
        OpInfo("_pointwise_loss", fn=_nn_fn("_pointwise_loss"), ref=_pointwise_ref, dtypes=FLOATS, unsupported=None, variants="F", kind="nn",
               samples=_pointwise_samples, layouts=("contig", "T", "slice", "empty"), tol=_NN_TOL)]

# the fused cross-entropy (xent): _cross_entropy's loss (output 0) through F.cross_entropy in both
# libraries, and its backward from the lse of ember's forward / torch's autograd; references in float64
def _xent_ref_terms(x, t, w, ignore_index, ls):
    x, t = np.asarray(x, np.float64), np.asarray(t)
    C = x.shape[1]
    lp = x - np.log(np.exp(x - x.max(1, keepdims=True)).sum(1, keepdims=True)) - x.max(1, keepdims=True)
    keep = t != ignore_index
    ts = np.where(keep, t, 0)
    wv = np.ones(C) if w is None else np.asarray(w, np.float64)
    wt = wv[ts] * keep
    nll = -wt * np.take_along_axis(lp, ts[:, None], 1)[:, 0]
    smooth = -(lp * wv).sum(1) * keep
    return lp, keep, ts, wv, wt, (1 - ls) * nll + ls / C * smooth


def _xent_ref(x, t, w=None, reduction=1, ignore_index=-100, ls=0.0):
    *_, wt, terms = _xent_ref_terms(x, t, w, ignore_index, ls)
    return terms if reduction == 0 else terms.sum() if reduction == 2 else terms.sum() / wt.sum()


def _xent_bw_ref(g, x, t, w=None, reduction=1, ignore_index=-100, ls=0.0):
    lp, keep, ts, wv, wt, _ = _xent_ref_terms(x, t, w, ignore_index, ls)
    C = lp.shape[1]
    s = np.asarray(g, np.float64) * keep / (wt.sum() if reduction == 1 else 1)
    onehot = np.eye(C)[ts]
    glp = -s[:, None] * ((1 - ls) * wt[:, None] * onehot + ls / C * wv)
    return glp - np.exp(lp) * glp.sum(1, keepdims=True)


def _xent_samples(op, dtype, layout):
    rng = rng_for(op.name, dtype, layout)
    x = TS(rng.uniform(-3, 3, (3, 4)), dtype)
    t, t3 = TS(np.array([1, 3, -100]), "int64", False), TS(np.array([1, 3, 0]), "int64", False)
    w = TS(rng.uniform(0.5, 2, 4), dtype, False)
    cases = [(t, None, r, -100, 0.0) for r in (0, 1, 2)] + [(t, w, 1, -100, 0.3), (t3, w, 0, 3, 0.1),
                                                           (t, None, 2, -100, 1.0)]
    if op.name == "_cross_entropy":
        return [Sample((x,) + c) for c in cases]
    g0, g1 = TS(rng.uniform(-1, 1, (3,)), dtype, False), TS(np.float64(0.7), dtype, False)
    return [Sample((g0 if c[2] == 0 else g1, x) + c) for c in cases]


def _xent_fn(L):
    reds = ("none", "mean", "sum")
    return lambda x, t, w, r, i, ls: L.nn.functional.cross_entropy(x, t, weight=w, reduction=reds[r], ignore_index=i,
                                                                    label_smoothing=ls)


def _xent_bw_fn(L):
    if L.__name__ == "ember":
        return lambda g, x, t, w, r, i, ls: L._C._cross_entropy_backward(
            g, x, t, w, L._C._cross_entropy(x, t, w, r, i, ls)[1], r, i, ls)

    def torch_bw(g, x, t, w, r, i, ls):
        x = x.detach().requires_grad_()
        return L.autograd.grad(_xent_fn(L)(x, t, w, r, i, ls), x, g)[0]
    return torch_bw


OPS += [OpInfo("_cross_entropy", fn=_xent_fn, ref=_xent_ref, dtypes=FLOATS, unsupported=None, variants="F", kind="nn",
               samples=_xent_samples, layouts=("contig", "T", "slice"), tol=_NN_TOL),
        OpInfo("_cross_entropy_backward", fn=_xent_bw_fn, ref=_xent_bw_ref, dtypes=FLOATS, unsupported=None,
               variants="F", kind="nn", samples=_xent_samples, layouts=("contig", "T", "slice"), tol=_NN_TOL)]


# nn activations (nnact): ember's `_` rows are reached through nn.functional;
# the fused backward ops through torch.ops.aten. References in float64.
def _act_ref_gelu(x, approximate="none"):
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    return x * 0.5 * (1 + _erf(x / math.sqrt(2)))


def _act_gelu_grad(x, approximate="none"):
    if approximate == "tanh":
        k, kappa = math.sqrt(2 / math.pi), 0.044715
        t = np.tanh(k * (x + kappa * x ** 3))
        return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * kappa * x * x)
    return 0.5 * (1 + _erf(x / math.sqrt(2))) + x * np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)


def _act_sigmoid(x):
    return 1 / (1 + np.exp(-x))


_SELU_ALPHA, _SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def _act_elu(x, alpha=1.0, scale=1.0, input_scale=1.0):
    return np.where(x <= 0, np.expm1(np.minimum(x, 0) * input_scale) * alpha * scale, x * scale)


def _act_clamp(x, lo, hi):
    """min then max: the lower bound wins when lo > hi (as torch's clamp)"""
    if x.dtype.kind in "iu":  # integer bounds, saturated to the dtype's range
        info = np.iinfo(x.dtype)
        lo, hi = np.clip(int(lo), info.min, info.max), np.clip(int(hi), info.min, info.max)
    return np.maximum(np.minimum(x, _cast(hi, x)), _cast(lo, x)).astype(x.dtype)


def _act_fn(name):
    """nn.functional's function, reached as an internal op (the `call` form)"""
    return lambda L, *args, **kw: getattr(L.nn.functional, name)(*args, **kw)


def _act_aten(name, ember_name):
    def call(L, *args, **kw):
        if L.__name__ == "torch":
            return getattr(L.ops.aten, name)(*args, **kw)
        return getattr(L._C, ember_name)(*args, **kw)
    return call


def _glu_samples(op, dtype, layout):
    rng = rng_for(op.name, dtype, layout)
    x = TS(gen_values(rng, dtype, layout_shape(layout, (3, 4)), (-3, 3)), dtype)
    return [Sample((x,)), Sample((x, 1)), Sample((x,), {"dim": -1})]


def _glu_ref(x, dim=-1):
    a, b = np.split(x, 2, axis=dim)
    return a * _act_sigmoid(b)


_ACT_F = dict(variants="F", dtypes=FLOATS)
OPS += [
    # torch's float32 gelu(+inf) is nan (its vectorized erf); ember's is inf: left out
    EW("_gelu", _act_ref_gelu, call=_act_fn("gelu"), specials=[v for v in SPECIALS if v != np.inf], kwargs=lambda d: [{}, {"approximate": "tanh"}], **_ACT_F),
    EW("_gelu_backward", lambda g, x, approximate="none": g * _act_gelu_grad(x, approximate), nargs=2,
       doms=[(-3, 3), (-5, 5)], call=_act_aten("gelu_backward", "_gelu_backward"), specials=False,
       kwargs=lambda d: [{}, {"approximate": "tanh"}], **_ACT_F),
    EW("_silu", lambda x: x * _act_sigmoid(x), call=_act_fn("silu"), **_ACT_F),
    EW("_silu_backward", lambda g, x: g * _act_sigmoid(x) * (1 + x * (1 - _act_sigmoid(x))), nargs=2,
       doms=[(-3, 3), (-5, 5)], call=_act_aten("silu_backward", "_silu_backward"), specials=False, **_ACT_F),
    EW("_mish", lambda x: x * np.tanh(np.log1p(np.exp(x))), call=_act_fn("mish"), **_ACT_F),
    EW("_softplus", lambda x, beta=1.0, threshold=20.0: np.where(x * beta > threshold, x,
                                                                np.log1p(np.exp(x * beta)) / beta),
       call=_act_fn("softplus"), kwargs=lambda d: [{}, {"beta": 2.0, "threshold": 3.0}], **_ACT_F),
    EW("_elu", _act_elu, call=_act_fn("elu"), kwargs=lambda d: [{}, {"alpha": 0.5}], **_ACT_F),
    EW("selu", lambda x: _act_elu(x, _SELU_ALPHA, _SELU_SCALE), **_ACT_F),
    EW("celu", lambda x, alpha=1.0: _act_elu(x, alpha, 1.0, 1 / alpha), kwargs=lambda d: [{}, {"alpha": 2.0}],
       **_ACT_F),
    EW("_leaky_relu", lambda x, negative_slope=0.01: np.where(x > 0, x, x * negative_slope),
       call=_act_fn("leaky_relu"), kwargs=lambda d: [{}, {"negative_slope": 0.2}], **_ACT_F),
    EW("_hardtanh", lambda x, min_val=-1.0, max_val=1.0: _act_clamp(x, min_val, max_val),
       call=_act_fn("hardtanh"), variants="F", dtypes=NUMERIC,
       kwargs=lambda d: [{}, {"min_val": -2.0, "max_val": 3.0} if is_float(d) else {"min_val": -2, "max_val": 3}]),
    EW("_hardswish", lambda x: x * _act_clamp(x + 3, 0, 6) / 6, call=_act_fn("hardswish"), **_ACT_F),
    EW("_hardsigmoid", lambda x: _act_clamp(x + 3, 0, 6) / 6, call=_act_fn("hardsigmoid"), **_ACT_F),
    EW("_log_sigmoid", lambda x: np.minimum(x, 0) - np.log1p(np.exp(-np.abs(x))), call=_act_fn("logsigmoid"),
       **_ACT_F),
    EW("threshold", lambda x, threshold, value: np.where(x <= threshold, _cast(value, x), x).astype(x.dtype),
       variants="F", dtypes=NUMERIC,
       kwargs=lambda d: [{"threshold": 0.5, "value": -2.0}] if is_float(d) else [{"threshold": 1, "value": -2}]),
    OpInfo("_glu", _glu_ref, kind="plain", variants="F", dtypes=FLOATS, samples=_glu_samples,
           call=_act_fn("glu"), layouts=("contig", "T", "slice", "empty")),
]

# ---------------------------------------------------------------------------
# 2-d pools and batch / group norm (ops/poolnorm.c). Reached
# through nn.functional; the fused backward ops through ember._C and
# torch.ops.aten. References: loops over the windows in float64.
# tests/test_nn_pool.py, test_nn_batchnorm.py and autograd_cases_poolnorm.py
# test them further.
def _pn_out(n, k, s, p, d, ceil):
    span = n + 2 * p - d * (k - 1) - 1
    out = (-(-span // s) if ceil else span // s) + 1
    return out - 1 if ceil and (out - 1) * s >= n + p else out


def _pn_taps(o, n, k, s, p, d):
    return [t for t in (o * s - p + i * d for i in range(k)) if 0 <= t < n]


def _np_max_pool(x, k, s, p, d, ceil):
    """(values, flat indices): the first maximum of each window, in row-major order."""
    x = np.asarray(x)
    (H, W), lead = x.shape[-2:], x.shape[:-2]
    OH, OW = _pn_out(H, k[0], s[0], p[0], d[0], ceil), _pn_out(W, k[1], s[1], p[1], d[1], ceil)
    out, idx = np.zeros(lead + (OH, OW), np.float64), np.zeros(lead + (OH, OW), np.int64)
    for oh in range(OH):
        for ow in range(OW):
            pos = [h * W + w for h in _pn_taps(oh, H, k[0], s[0], p[0], d[0])
                   for w in _pn_taps(ow, W, k[1], s[1], p[1], d[1])]
            vals = x.reshape(lead + (H * W,))[..., pos].astype(np.float64)
            best = np.argmax(vals, axis=-1)
            idx[..., oh, ow] = np.asarray(pos)[best]
            out[..., oh, ow] = np.take_along_axis(vals, best[..., None], -1)[..., 0]
    return out, idx


def _np_avg_windows(H, W, k, s, p, ceil, cip, div):
    """[(oh, ow, rows, cols, divisor)] of avg_pool2d."""
    OH, OW = _pn_out(H, k[0], s[0], p[0], 1, ceil), _pn_out(W, k[1], s[1], p[1], 1, ceil)
    wins = []
    for oh in range(OH):
        for ow in range(OW):
            h0, w0 = oh * s[0] - p[0], ow * s[1] - p[1]
            h1, w1 = min(h0 + k[0], H + p[0]), min(w0 + k[1], W + p[1])
            rows, cols = range(max(h0, 0), min(h1, H)), range(max(w0, 0), min(w1, W))
            n = div or ((h1 - h0) * (w1 - w0) if cip else len(rows) * len(cols))
            wins.append((oh, ow, rows, cols, n))
    return wins, OH, OW


def _np_adaptive_windows(H, W, OH, OW):
    return [(oh, ow, range(oh * H // OH, -(-(oh + 1) * H // OH)), range(ow * W // OW, -(-(ow + 1) * W // OW)),
             None) for oh in range(OH) for ow in range(OW)]


def _np_pool_apply(x, wins, OH, OW):
    x = np.asarray(x, np.float64)
    out = np.zeros(x.shape[:-2] + (OH, OW))
    for oh, ow, rows, cols, n in wins:
        out[..., oh, ow] = x[..., rows.start:rows.stop, cols.start:cols.stop].sum((-1, -2)) / (n or len(rows) * len(cols))
    return out


def _np_pool_spread(g, size, wins):
    g, gi = np.asarray(g, np.float64), np.zeros(tuple(size))
    for oh, ow, rows, cols, n in wins:
        gi[..., rows.start:rows.stop, cols.start:cols.stop] += (g[..., oh, ow] / (n or len(rows) * len(cols)))[..., None, None]
    return gi


def _np_avg_pool(x, k, s, p, ceil=False, cip=True, div=None):
    x = np.asarray(x)
    wins, OH, OW = _np_avg_windows(*x.shape[-2:], k, s, p, ceil, cip, div)
    out = _np_pool_apply(x, wins, OH, OW)
    return np.trunc(out) if x.dtype.kind in "iu" else out  # integer pools divide as C does


def _pn_values(rng, dtype, shape):
    if is_float(dtype):  # distinct values: no ties for the maximum
        return rng.permutation(np.prod(shape)).reshape(shape) / 4 - 5
    return gen_values(rng, dtype, shape)


def _pool_samples(op, dtype, layout):
    rng = rng_for(op.name, dtype, layout)
    t = lambda *shape: TS(_pn_values(rng, dtype, shape), dtype)  # noqa: E731
    if op.name == "_max_pool2d_with_indices":
        return [Sample((t(2, 3, 6, 7), (2, 2), (2, 2), (0, 0), (1, 1), False)),
                Sample((t(3, 7, 6), (3, 3), (2, 2), (1, 1), (1, 1), True), desc="unbatched, ceil_mode"),
                Sample((t(2, 2, 7, 8), (2, 3), (1, 2), (1, 1), (2, 1), False), desc="dilation")]
    if op.name == "_avg_pool2d":
        return [Sample((t(2, 3, 6, 7), (2, 2), (2, 2), (0, 0))),
                Sample((t(3, 7, 6), (3, 3), (2, 2), (1, 1), True, False), desc="unbatched, ceil_mode, no pad count"),
                Sample((t(2, 2, 5, 8), (2, 3), (1, 2), (1, 1), False, True, 5), desc="divisor_override")]
    return [Sample((t(2, 3, 7, 8), (3, 5))), Sample((t(3, 6, 4), (4, 4)), desc="unbatched, upsampling"),
            Sample((t(2, 3, 7, 8), (1, 1)), desc="one window")]


def _pool_expect(op, sample, values):
    out, idx = _np_max_pool(*values)
    dt = sample.args[0].dtype
    return (quantize(out, dt), idx), (dt, "int64")


def _pool_bw_samples(op, dtype, layout):
    rng = rng_for(op.name, dtype, layout)
    t = lambda *shape: TS(_pn_values(rng, dtype, shape), dtype)  # noqa: E731
    if op.name == "_max_pool2d_backward":  # (x, g, k, s, p, d, ceil): the forward's indices, then the scatter
        return [Sample((t(2, 3, 6, 7), t(2, 3, 3, 3), (2, 2), (2, 2), (0, 0), (1, 1), False)),
                Sample((t(3, 5, 6), t(3, 4, 5), (2, 2), (1, 1), (0, 0), (1, 1), False), desc="overlapping")]
    if op.name == "_avg_pool2d_backward":  # (g, input_size, k, s, p, ceil, cip, div)
        return [Sample((t(2, 3, 3, 3), (2, 3, 6, 7), (2, 2), (2, 2), (0, 0), False, True, None)),
                Sample((t(3, 4, 4), (3, 7, 6), (3, 3), (2, 2), (1, 1), True, False, None), desc="ceil, no pad count"),
                Sample((t(2, 2, 6, 4), (2, 2, 5, 8), (2, 3), (1, 2), (1, 1), False, True, 5), desc="divisor")]
    return [Sample((t(2, 3, 3, 5), (2, 3, 7, 8))), Sample((t(3, 4, 4), (3, 6, 4)), desc="upsampling")]


def _max_pool_bw_call(L, x, g, k, s, p, d, ceil):
    _, idx = L.nn.functional.max_pool2d(x, k, s, p, d, ceil, return_indices=True)
    if L.__name__ == "ember":
        return L._C._max_pool2d_backward(g, idx, x.shape)
    return L.ops.aten.max_pool2d_with_indices_backward(g, x, k, s, p, d, ceil, idx)


def _np_max_pool_bw(x, g, k, s, p, d, ceil):
    _, idx = _np_max_pool(x, k, s, p, d, ceil)
    lead, plane = x.shape[:-2], x.shape[-2] * x.shape[-1]
    gi = np.zeros((int(np.prod(lead)), plane))
    gf, idf = np.asarray(g, np.float64).reshape(len(gi), -1), idx.reshape(len(gi), -1)
    for r in range(len(gi)):
        np.add.at(gi[r], idf[r], gf[r])
    return gi.reshape(x.shape)


def _avg_pool_bw_call(L, g, size, k, s, p, ceil, cip, div):
    if L.__name__ == "ember":
        return L._C._avg_pool2d_backward(g, size, k, s, p, ceil, cip, div)
    return L.ops.aten.avg_pool2d_backward(g, L.empty(size, dtype=g.dtype), k, s, p, ceil, cip, div)


def _adaptive_bw_call(L, g, size):
    if L.__name__ == "ember":
        return L._C._adaptive_avg_pool2d_backward(g, size)
    return L.ops.aten._adaptive_avg_pool2d_backward(g, L.empty(size, dtype=g.dtype))


def _np_adaptive(x, size):
    x = np.asarray(x)
    return _np_pool_apply(x, _np_adaptive_windows(*x.shape[-2:], *size), *size)


def _np_avg_pool_bw(g, size, k, s, p, ceil, cip, div):
    return _np_pool_spread(g, size, _np_avg_windows(*size[-2:], k, s, p, ceil, cip, div)[0])


def _np_adaptive_bw(g, size):
    return _np_pool_spread(g, size, _np_adaptive_windows(*size[-2:], *np.shape(g)[-2:]))


def _np_bn_stats(x, dims):
    x = np.asarray(x, np.float64)
    return x.mean(dims, keepdims=True), x.var(dims, keepdims=True)


def _np_batch_norm(x, w, b, rm, rv, training, momentum, eps):
    x = np.asarray(x, np.float64)
    dims = (0,) + tuple(range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    mean, var = _np_bn_stats(x, dims) if training else (np.reshape(rm, shape), np.reshape(rv, shape))
    y = (x - mean) / np.sqrt(var + eps)
    return y * (1 if w is None else np.reshape(w, shape)) + (0 if b is None else np.reshape(b, shape))


def _np_group_norm(x, w, b, groups, eps):
    x = np.asarray(x, np.float64)
    xg = x.reshape(x.shape[0], groups, -1)
    y = ((xg - xg.mean(-1, keepdims=True)) / np.sqrt(xg.var(-1, keepdims=True) + eps)).reshape(x.shape)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    return y * (1 if w is None else np.reshape(w, shape)) + (0 if b is None else np.reshape(b, shape))


def _norm_samples_pn(op, dtype, layout):
    rng = rng_for(op.name, dtype, layout)
    t = lambda *shape: TS(gen_values(rng, dtype, shape, (-3, 3)), dtype)  # noqa: E731
    v = lambda *shape: TS(gen_values(rng, dtype, shape, (0.5, 2)), dtype, False)  # noqa: E731
    if op.name == "_native_batch_norm":
        return [Sample((t(4, 3, 5), v(3), v(3), v(3), v(3), True, 0.1, 1e-5)),
                Sample((t(2, 3, 4, 5), None, None, v(3), v(3), False, 0.1, 1e-3), desc="evaluation"),
                Sample((t(6, 3), v(3), None, None, None, True, 0.1, 1e-5), desc="2-d, no running stats")]
    return [Sample((t(2, 6, 5), v(6), v(6), 3, 1e-5)), Sample((t(3, 4, 2, 3), None, None, 1, 1e-3), desc="one group"),
            Sample((t(2, 6), v(6), None, 2, 1e-5), desc="2-d")]


def _bn_call(L, x, w, b, rm, rv, training, momentum, eps):
    return L.nn.functional.batch_norm(x, rm, rv, w, b, training, momentum, eps)


def _norm_bw_samples(op, dtype, layout):
    rng = rng_for(op.name, dtype, layout)
    t = lambda *shape: TS(gen_values(rng, dtype, shape, (-3, 3)), dtype)  # noqa: E731
    v = lambda *shape: TS(gen_values(rng, dtype, shape, (0.5, 2)), dtype, False)  # noqa: E731
    if op.name == "_native_batch_norm_backward":  # (g, x, w, mean, invstd, train)
        return [Sample((t(4, 3, 5), t(4, 3, 5), v(3), v(3), v(3), True)),
                Sample((t(2, 3, 2, 2), t(2, 3, 2, 2), None, v(3), v(3), False), desc="evaluation, no weight")]
    return [Sample((t(2, 6, 5), t(2, 6, 5), v(2, 3), v(2, 3), v(6), 3)),  # (g, x, mean, rstd, w, group)
            Sample((t(3, 4), t(3, 4), v(3, 1), v(3, 1), None, 1), desc="2-d, one group, no weight")]


def _bn_bw_call(L, g, x, w, mean, invstd, train):
    if L.__name__ == "ember":
        return L._C._native_batch_norm_backward(g, x, w, mean, invstd, train)
    rv = 1 / (invstd.double() ** 2)  # evaluation reads the running statistics: var + eps = 1 / invstd^2
    return L.ops.aten.native_batch_norm_backward(g, x, w, mean, rv.to(mean.dtype), mean, invstd, train, 0.0,
                                                 [True, True, True])


def _np_bn_bw(g, x, w, mean, invstd, train):
    g, x = np.asarray(g, np.float64), np.asarray(x, np.float64)
    dims, shape = (0,) + tuple(range(2, x.ndim)), (1, -1) + (1,) * (x.ndim - 2)
    mean, inv = np.reshape(mean, shape).astype(np.float64), np.reshape(invstd, shape).astype(np.float64)
    wv = 1.0 if w is None else np.reshape(w, shape).astype(np.float64)
    xh = (x - mean) * inv
    gx = wv * inv * (g - g.mean(dims, keepdims=True) - xh * (g * xh).mean(dims, keepdims=True)) if train \
        else wv * inv * g
    return gx, (g * xh).sum(dims), g.sum(dims)


def _gn_bw_call(L, g, x, mean, rstd, w, group):
    if L.__name__ == "ember":
        return L._C._native_group_norm_backward(g, x, mean, rstd, w, group)
    N, C = x.shape[:2]
    return L.ops.aten.native_group_norm_backward(g, x, mean, rstd, w, N, C, x.numel() // max(N * C, 1), group,
                                                 [True, True, True])


def _np_gn_bw(g, x, mean, rstd, w, group):
    g, x = np.asarray(g, np.float64), np.asarray(x, np.float64)
    N, C = x.shape[:2]
    shape, dims = (1, -1) + (1,) * (x.ndim - 2), (0,) + tuple(range(2, x.ndim))
    wv = 1.0 if w is None else np.reshape(w, shape).astype(np.float64)
    m3, r3 = np.reshape(mean, (N, group, 1)), np.reshape(rstd, (N, group, 1))
    xh = ((x.reshape(N, group, -1) - m3) * r3).reshape(x.shape)
    gw3, xh3 = (g * wv).reshape(N, group, -1), xh.reshape(N, group, -1)
    gx = r3 * (gw3 - gw3.mean(-1, keepdims=True) - xh3 * (gw3 * xh3).mean(-1, keepdims=True))
    return gx.reshape(x.shape), (g * xh).sum(dims), g.sum(dims)


_PN_TOL = {"float16": (2e-2, 2e-2), "bfloat16": (6e-2, 6e-2)}
_PN_LAYOUTS = ("contig", "T", "slice")
_PN = dict(kind="plain", variants="F", layouts=_PN_LAYOUTS, tol=_PN_TOL)
OPS += [
    OpInfo("_max_pool2d_with_indices", _np_max_pool, dtypes=DTYPES[1:], samples=_pool_samples, expect=_pool_expect,
           call=lambda L, x, *a: L.nn.functional.max_pool2d(x, *a, return_indices=True), **_PN),
    OpInfo("_max_pool2d_backward", _np_max_pool_bw, dtypes=FLOATS, unsupported=None, samples=_pool_bw_samples,
           call=_max_pool_bw_call, **_PN),
    OpInfo("_avg_pool2d", _np_avg_pool, dtypes=FLOATS + ("int64",), samples=_pool_samples,
           call=lambda L, x, *a: L.nn.functional.avg_pool2d(x, *a), **_PN),
    OpInfo("_avg_pool2d_backward", _np_avg_pool_bw, dtypes=FLOATS, unsupported=None, samples=_pool_bw_samples,
           call=_avg_pool_bw_call, **_PN),
    OpInfo("_adaptive_avg_pool2d", _np_adaptive, dtypes=FLOATS, samples=_pool_samples,
           call=lambda L, x, size: L.nn.functional.adaptive_avg_pool2d(x, size), **_PN),
    OpInfo("_adaptive_avg_pool2d_backward", _np_adaptive_bw, dtypes=FLOATS, unsupported=None,
           samples=_pool_bw_samples, call=_adaptive_bw_call, **_PN),
    OpInfo("_native_batch_norm", _np_batch_norm, dtypes=FLOATS, samples=_norm_samples_pn, call=_bn_call, **_PN),
    OpInfo("_native_batch_norm_backward", _np_bn_bw, dtypes=FLOATS, unsupported=None, samples=_norm_bw_samples,
           call=_bn_bw_call, **_PN),
    OpInfo("_native_group_norm", _np_group_norm, dtypes=FLOATS, samples=_norm_samples_pn,
           call=lambda L, x, w, b, groups, eps: L.nn.functional.group_norm(x, groups, w, b, eps), **_PN),
    OpInfo("_native_group_norm_backward", _np_gn_bw, dtypes=FLOATS, unsupported=None, samples=_norm_bw_samples,
           call=_gn_bw_call, **_PN),
]
# upsampling (csrc/ops/interp.c): the ops behind F.interpolate,
# reached as ember._C._upsample_* and torch._C._nn.upsample_* /
# torch.ops.aten.*_backward. The reference builds each axis's (out, in)
# weight matrix from the documented rules; the 2-d result is Ah @ x @ Aw^T
# per plane and the backward op's is Ah^T @ g @ Aw.
def interp_matrix(mode, n_in, n_out, align_corners=False, scale=None, shortcut=False):
    """(n_out, n_in) float64 weights of one axis. mode: nearest | nearest-exact |
    linear | cubic. Nearest works with a float32 scale (1/scale or in/out), as
    torch; shortcut: upsample_nearest2d's copy (out == in) and o // 2 (out == 2 in)."""
    A = np.zeros((n_out, n_in))
    given = scale is not None and scale > 0
    o = np.arange(n_out)
    if mode in ("nearest", "nearest-exact"):
        s = np.float32(1.0 / scale) if given else np.float32(n_in) / np.float32(n_out)
        if shortcut and n_out in (n_in, 2 * n_in):
            src = o // (n_out // n_in)
        elif mode == "nearest":
            src = np.floor(o.astype(np.float32) * s)
        else:
            src = np.floor(((o + 0.5) * np.float64(s)).astype(np.float32))
        A[o, np.minimum(src.astype(np.int64), n_in - 1)] = 1
        return A
    if align_corners:
        s = (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    else:
        s = 1.0 / scale if given else n_in / n_out

    def keys(x, a=-0.75):  # Keys' cubic convolution kernel
        x = abs(x)
        return ((a + 2) * x - (a + 3)) * x * x + 1 if x <= 1 else ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    for j in range(n_out):
        r = s * j if align_corners else s * (j + 0.5) - 0.5
        if mode == "linear":
            if n_in == n_out:
                A[j, j] = 1
                continue
            r = max(r, 0.0)
        i0 = min(math.floor(r), n_in - 1)
        t = min(max(r - i0, 0.0), 1.0)
        if mode == "linear":
            A[j, i0] += 1 - t
            A[j, min(i0 + 1, n_in - 1)] += t
        else:
            for k, w in enumerate((keys(t + 1), keys(t), keys(1 - t), keys(2 - t))):
                A[j, min(max(i0 - 1 + k, 0), n_in - 1)] += w
    return A


_INTERP_OPS = {  # ember row: (torch name, mode, spatial dims, has align_corners)
    "_upsample_nearest1d": ("upsample_nearest1d", "nearest", 1, False),
    "_upsample_nearest2d": ("upsample_nearest2d", "nearest", 2, False),
    "_upsample_nearest_exact1d": ("_upsample_nearest_exact1d", "nearest-exact", 1, False),
    "_upsample_nearest_exact2d": ("_upsample_nearest_exact2d", "nearest-exact", 2, False),
    "_upsample_linear1d": ("upsample_linear1d", "linear", 1, True),
    "_upsample_bilinear2d": ("upsample_bilinear2d", "linear", 2, True),
    "_upsample_bicubic2d": ("upsample_bicubic2d", "cubic", 2, True),
}


def interp_ref(name, x, output_size, *rest, backward_to=None):
    """The forward op's result (backward_to None) or, with backward_to the input
    size, the backward op's result for gradient x."""
    _, mode, spatial, has_ac = _INTERP_OPS[name]
    ac = bool(rest[0]) if has_ac else False
    scales = list(rest[1:] if has_ac else rest) + [None] * spatial
    in_sp = list(backward_to[2:]) if backward_to is not None else list(np.shape(x)[2:])
    mats = [interp_matrix(mode, i, o, ac, s, shortcut=spatial == 2)
            for i, o, s in zip(in_sp, output_size, scales)]
    x = np.asarray(x, np.float64)
    if spatial == 1:
        return np.einsum("ncw,wv->ncv", x, mats[0] if backward_to is not None else mats[0].T)
    if backward_to is not None:
        return np.einsum("nchw,hH,wW->ncHW", x, mats[0], mats[1])
    return np.einsum("ncHW,hH,wW->nchw", x, mats[0], mats[1])


def _interp_fn(name, backward):
    tname = _INTERP_OPS[name][0] + ("_backward" if backward else "")
    ename = name + ("_backward" if backward else "")

    def fn(L):
        if L.__name__ == "torch":
            return getattr(L.ops.aten, tname) if backward else getattr(L._C._nn, tname)
        return getattr(L._C, ename)
    return fn


def _interp_samples(name, backward):
    _, mode, spatial, has_ac = _INTERP_OPS[name]
    # (output size, align_corners, scales): up, down, odd and non-integer scales
    cfgs2 = [((7, 3), False, ()), ((8, 10), True, (2.0, 2.0)), ((9, 6), False, (2.3, 1.3)), ((2, 3), True, ()),
             ((1, 1), True, ()), ((3, 2), False, (0.7, 0.45))]
    cfgs = cfgs2 if spatial == 2 else [((o[1],), ac, s[1:]) for o, ac, s in cfgs2]
    if mode == "cubic" or (mode == "nearest" and spatial == 1):
        # torch's backward of these copies (out == in) or halves (out == 2 in) whatever the
        # scale, unlike its forward: those cases are in tests/test_nn_interpolate.py
        cfgs = [c for c in cfgs if not c[2] or all(o not in (i, 2 * i) for o, i in zip(c[0], (4, 5)[-spatial:]))]

    def samples(op, dtype, layout):
        rng = rng_for(op.name, dtype, layout)
        base = (2, 3, 4, 5)[-(spatial + 2):]
        if layout == "empty":
            base = (0,) + base[1:]
        out = []
        for osz, ac, sc in cfgs:
            rest = ((ac,) if has_ac else ()) + tuple(sc)
            if backward:
                g = TS(gen_values(rng, dtype, base[:2] + osz, (-3, 3)), dtype)
                out.append(Sample((g, list(osz), list(base)) + rest))
            else:
                out.append(Sample((TS(gen_values(rng, dtype, base, (0, 9) if dtype == "uint8" else (-3, 3)), dtype),
                                   list(osz)) + rest))
        return out
    return samples


def _interp_bw_ref(name):
    return lambda g, osz, isz, *rest: interp_ref(name, g, osz, *rest, backward_to=isz)


_INTERP_TOL = {"float32": (2e-5, 2e-5)}  # the kernels' float32 weights (as torch's), against float64 ones
for _n, (_t, _m, _sp, _ac) in _INTERP_OPS.items():
    _nearest = _m.startswith("nearest")
    OPS += [
        # uint8: torch's nearest copies bytes; its uint8 bilinear/bicubic (a fixed-point
        # kernel) ember lacks, so those rows claim floats only and skip the dtype sweep
        OpInfo(_n, (lambda x, *a, _n=_n: interp_ref(_n, x, *a)), kind="plain", variants="F",
               dtypes=FLOATS + ("uint8",) if _nearest else FLOATS,
               unsupported=None if _m in ("linear", "cubic") and _sp == 2 else NotImplementedError,
               fn=_interp_fn(_n, False), samples=_interp_samples(_n, False),
               layouts=("contig", "T", "slice", "expand", "empty"), tol=_INTERP_TOL),
        OpInfo(_n + "_backward", _interp_bw_ref(_n), kind="plain", variants="F", dtypes=FLOATS,
               fn=_interp_fn(_n, True), samples=_interp_samples(_n, True), layouts=("contig", "T", "slice", "expand"),
               tol=_INTERP_TOL),
    ]
# fused CPU attention (csrc/ops/attention.c, csrc/cpu/attention.c):
# torch's _scaled_dot_product_flash_attention_for_cpu and its _backward
# (torch.ops.aten), against softmax attention in float64 NumPy
def np_attention(q, k, v, attn_mask=None, is_causal=False, scale=None, grad_out=None):
    """(out, lse) of softmax(scale q k^T + mask) v with grouped key/value
    heads, or with grad_out (dq, dk, dv). attn_mask: bool (True takes part)
    or additive, broadcast to (B, H, L, S); rows where nothing takes part
    give zeros and lse 0 (torch's CPU kernel)."""
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    B, H, L, D = q.shape
    Hk, S = k.shape[1], k.shape[2]
    g = H // Hk
    kr, vr = np.repeat(k, g, 1), np.repeat(v, g, 1)
    sc = 1 / np.sqrt(D) if scale is None else scale
    s = q @ np.swapaxes(kr, -1, -2) * sc
    allowed = np.ones(s.shape, bool)
    if attn_mask is not None:
        m = np.asarray(attn_mask)
        if m.dtype == bool:
            allowed &= np.broadcast_to(m, s.shape)
        else:
            s = s + m.astype(np.float64)
    if is_causal:
        allowed &= np.tril(np.ones((L, S), bool))
    s = np.where(allowed, s, -np.inf)
    mx = s.max(-1, keepdims=True)
    mx = np.where(np.isfinite(mx), mx, 0)
    e = np.exp(s - mx)
    den = e.sum(-1, keepdims=True)
    used = den > 0
    p = np.where(used, e / np.where(used, den, 1), 0)
    if grad_out is None:
        lse = np.where(used, mx + np.log(np.where(used, den, 1)), 0)[..., 0]
        return p @ vr, lse
    go = np.asarray(grad_out, np.float64)
    dv = np.swapaxes(p, -1, -2) @ go
    dp = go @ np.swapaxes(vr, -1, -2)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True))
    dq, dk = sc * ds @ kr, sc * np.swapaxes(ds, -1, -2) @ q
    fold = lambda t: t.reshape(B, Hk, g, S, t.shape[-1]).sum(2)  # noqa: E731  (grouped heads add up)
    return dq, fold(dk), fold(dv)


def _attn_samples(op, dtype, layout):
    rng = rng_for(op.name, dtype, layout)
    out = []
    for (B, H, Hk, L, S, D), causal, masked in (((2, 2, 2, 3, 5, 4), False, False), ((1, 4, 2, 5, 3, 4), True, False),
                                                ((2, 2, 1, 4, 6, 3), False, True)):
        q, k, v = (TS(rng.uniform(-1, 1, sh), dtype) for sh in ((B, H, L, D), (B, Hk, S, D), (B, Hk, S, D)))
        kw = {"attn_mask": TS(rng.uniform(-1, 1, (L, S)), dtype, False)} if masked else {}
        if op.name == "_scaled_dot_product_flash_attention_for_cpu":
            out.append(Sample((q, k, v, 0.0, causal), kw))
            continue
        o, lse = np_attention(q.values, k.values, v.values, kw.get("attn_mask") and kw["attn_mask"].values, causal)
        lse_dt = "float64" if dtype == "float64" else "float32"
        g = TS(rng.uniform(-1, 1, (B, H, L, D)), dtype)
        out.append(Sample((g, q, k, v, TS(o, dtype, False), TS(lse, lse_dt, False), 0.0, causal), kw))
    return out


def _attn_expect(op, sample, values):
    a, kw = list(values), {k: (v.values if isinstance(v, TS) else v) for k, v in sample.kwargs.items()}
    dt = sample.args[0].dtype
    if op.name == "_scaled_dot_product_flash_attention_for_cpu":
        o, lse = np_attention(a[0], a[1], a[2], kw.get("attn_mask"), a[4])
        return (quantize(o, dt), lse), (dt, "float64" if dt == "float64" else "float32")
    return tuple(quantize(r, dt) for r in np_attention(a[1], a[2], a[3], kw.get("attn_mask"), a[7],
                                                        grad_out=a[0])), dt


def _attn_fn(name):
    return lambda L: getattr(L._C, name) if hasattr(L, "_C") and hasattr(L._C, name) else getattr(L.ops.aten, name)


_ATTN_TOL = {"float16": (2e-2, 2e-2), "bfloat16": (5e-2, 5e-2), "float32": (1e-5, 1e-5)}
OPS += [OpInfo(n, None, kind="nn", dtypes=FLOATS, unsupported=None, variants="F", samples=_attn_samples,
               expect=_attn_expect, fn=_attn_fn(n), layouts=("contig", "T", "slice"), tol=_ATTN_TOL)
        for n in ("_scaled_dot_product_flash_attention_for_cpu",
                  "_scaled_dot_product_flash_attention_for_cpu_backward")]


# torch's CUDA flash op and its backward (csrc/ops/attention.c): on
# CPU tensors ember runs the CPU kernel (what Note [CUDA fallback] does on host
# twins), so the table checks that path; torch has no CPU kernel for these
# ops, so its side runs its CPU flash op on the same operands. The GPU kernels:
# tests/test_cuda_attention.py.
def _flash_samples(op, dtype, layout):
    rng = rng_for(op.name, dtype, layout)
    out = []
    for (B, H, Hk, L, S, D), causal in (((2, 2, 2, 3, 5, 8), False), ((1, 4, 2, 5, 3, 8), True)):
        q, k, v = (TS(rng.uniform(-1, 1, sh), dtype) for sh in ((B, H, L, D), (B, Hk, S, D), (B, Hk, S, D)))
        if op.name == "_scaled_dot_product_flash_attention":
            out.append(Sample((q, k, v, 0.0, causal)))
            continue
        o, lse = np_attention(q.values, k.values, v.values, None, causal)
        g = TS(rng.uniform(-1, 1, (B, H, L, D)), dtype)
        out.append(Sample((g, q, k, v, TS(o, dtype, False), TS(lse, "float32", False), None, None, L, S, 0.0,
                           causal, None, None)))
    return out


def _flash_expect(op, sample, values):
    a, dt = list(values), sample.args[0].dtype
    if op.name == "_scaled_dot_product_flash_attention":
        o, lse = np_attention(a[0], a[1], a[2], None, a[4])
        return (quantize(o, dt), lse), (dt, "float32")
    return tuple(quantize(r, dt) for r in np_attention(a[1], a[2], a[3], None, a[11], grad_out=a[0])), dt


def _flash_call(name):
    def run(L, *a):
        if L.__name__ == "ember":
            return getattr(L._C, name)(*a)[:2 if name == "_scaled_dot_product_flash_attention" else 3]
        if name == "_scaled_dot_product_flash_attention":
            return L.ops.aten._scaled_dot_product_flash_attention_for_cpu(*a[:5])
        return L.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward(*a[:6], a[10], a[11])
    return run


OPS += [OpInfo(n, None, kind="nn", dtypes=("float32", "float16", "bfloat16"), unsupported=None, variants="F",
               samples=_flash_samples, expect=_flash_expect, call=_flash_call(n), layouts=("contig", "T", "slice"),
               tol=_ATTN_TOL)
        for n in ("_scaled_dot_product_flash_attention", "_scaled_dot_product_flash_attention_backward")]


# torch's CUDA memory-efficient op and its backward (csrc/ops/attention.c): on CPU tensors
# ember runs the CPU kernel with the attn_bias (what Note [CUDA fallback] does on host twins); torch has
# no CPU kernel for these ops, so its side runs its CPU flash op with the mask. The GPU kernels:
# tests/test_cuda_attention_mem.py.
_EFF = "_scaled_dot_product_efficient_attention"


def _eff_samples(op, dtype, layout):
    rng = rng_for(op.name, dtype, layout)
    out = []
    for (B, H, Hk, L, S, D), causal, masked in (((2, 2, 2, 3, 5, 8), False, True), ((1, 4, 2, 5, 3, 8), True, False),
                                                ((1, 2, 2, 4, 4, 8), True, True)):
        q, k, v = (TS(rng.uniform(-1, 1, sh), dtype) for sh in ((B, H, L, D), (B, Hk, S, D), (B, Hk, S, D)))
        m = TS(rng.uniform(-1, 1, (L, S)), dtype, False) if masked else None
        if op.name == _EFF:
            out.append(Sample((q, k, v, m, True, 0.0, causal)))
            continue
        o, lse = np_attention(q.values, k.values, v.values, None if m is None else m.values, causal)
        g = TS(rng.uniform(-1, 1, (B, H, L, D)), dtype)
        out.append(Sample((g, q, k, v, m, TS(o, dtype, False), TS(lse, "float32", False), None, None, 0.0,
                           [True, True, True, False], causal)))
    return out


def _eff_expect(op, sample, values):
    a, dt = list(values), sample.args[0].dtype
    if op.name == _EFF:
        o, lse = np_attention(a[0], a[1], a[2], a[3], a[6])
        return (quantize(o, dt), lse), (dt, "float32")
    return tuple(quantize(r, dt) for r in np_attention(a[1], a[2], a[3], a[4], a[11], grad_out=a[0])), dt


def _eff_call(name):
    def run(L, *a):
        if L.__name__ == "ember":
            return getattr(L._C, name)(*a)[:2 if name == _EFF else 3]
        if name == _EFF:
            return L.ops.aten._scaled_dot_product_flash_attention_for_cpu(a[0], a[1], a[2], 0.0, a[6], attn_mask=a[3])
        return L.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward(*a[:4], a[5], a[6], 0.0, a[11],
                                                                               attn_mask=a[4])
    return run


OPS += [OpInfo(n, None, kind="nn", dtypes=("float32", "float16", "bfloat16"), unsupported=None, variants="F",
               samples=_eff_samples, expect=_eff_expect, call=_eff_call(n), layouts=("contig", "T", "slice"),
               tol=_ATTN_TOL)
        for n in (_EFF, _EFF + "_backward")]

OPS_BY_NAME = {op.name: op for op in OPS}


# ---------------------------------------------------------------------------
# error inputs: (id, call(lib), exception type torch raises, message regex or None).
# `lib` is ember or torch; the parity test checks torch raises the same type.
def _i(L, *v):
    return L.tensor(list(v))


ERRORS = [
    # bad dims / indices
    ("transpose-dim", lambda L: L.ones(3, 4).transpose(0, 2), IndexError, None),
    ("select-index", lambda L: L.ones(3, 4).select(0, 3), IndexError, None),
    ("select-dim", lambda L: L.ones(3, 4).select(2, 0), IndexError, None),
    ("select-0d", lambda L: L.tensor(5.0).select(0, 0), IndexError, None),
    ("unbind-0d", lambda L: L.tensor(5.0).unbind(), IndexError, None),
    ("narrow-dim", lambda L: L.ones(3, 4).narrow(2, 0, 1), IndexError, None),
    ("narrow-range", lambda L: L.ones(3, 4).narrow(1, 3, 2), RuntimeError, None),
    ("narrow-0d", lambda L: L.tensor(5.0).narrow(0, 0, 1), RuntimeError, None),
    ("permute-dim", lambda L: L.ones(3, 4).permute(0, 2), IndexError, None),
    ("permute-len", lambda L: L.ones(3, 4).permute(0), RuntimeError, None),
    ("permute-dup", lambda L: L.ones(3, 4).permute(0, 0), RuntimeError, None),
    ("squeeze-dim", lambda L: L.ones(3, 4).squeeze(3), IndexError, None),
    ("unsqueeze-dim", lambda L: L.ones(3, 4).unsqueeze(3), IndexError, None),
    ("unsqueeze-negdim", lambda L: L.ones(3, 4).unsqueeze(-4), IndexError, None),
    ("flatten-dim", lambda L: L.ones(3, 4).flatten(2), IndexError, None),
    ("flatten-order", lambda L: L.ones(3, 4).flatten(1, 0), RuntimeError, None),
    ("diagonal-dim", lambda L: L.ones(3, 4).diagonal(0, 0, 2), IndexError, None),
    ("diagonal-same", lambda L: L.ones(3, 4).diagonal(0, 0, 0), RuntimeError, None),
    ("diagonal-0d", lambda L: L.tensor(5.0).diagonal(), IndexError, None),
    ("unflatten-prod", lambda L: L.ones(3, 4).unflatten(1, (3, 2)), RuntimeError, None),
    ("split-0d", lambda L: L.tensor(5.0).split(1), RuntimeError, None),
    ("split-zero", lambda L: L.ones(3, 4).split(0), RuntimeError, None),
    ("split-sections", lambda L: L.ones(3, 4).split([1, 1]), RuntimeError, None),
    ("chunk-zero", lambda L: L.ones(3, 4).chunk(0), RuntimeError, None),
    ("chunk-0d", lambda L: L.tensor(5.0).chunk(1), RuntimeError, None),
    ("tril-1d", lambda L: L.ones(3).tril(), RuntimeError, None),
    ("triu-0d", lambda L: L.tensor(5.0).triu(), RuntimeError, None),
    # view / reshape / expand / as_strided
    ("view-strides", lambda L: L.ones(3, 4).t().view(12), RuntimeError, None),
    ("view-sliced", lambda L: L.ones(3, 8)[:, :4].view(-1), RuntimeError, None),
    ("view-numel", lambda L: L.ones(3, 4).view(5, -1), RuntimeError, None),
    ("view-two-infer", lambda L: L.ones(3, 4).view(-1, -1), RuntimeError, None),
    ("reshape-two-infer", lambda L: L.ones(3, 4).reshape(-1, -1), RuntimeError, None),
    ("reshape-numel", lambda L: L.ones(3, 4).reshape(5, 3), RuntimeError, None),
    ("expand-size", lambda L: L.ones(3, 4).expand(2, 4), RuntimeError, None),
    ("expand-ndim", lambda L: L.ones(3, 4).expand(4), RuntimeError, None),
    ("as_strided-oob", lambda L: L.ones(3, 4).as_strided((3, 4), (4, 2)), RuntimeError, None),
    ("as_strided-negoffset", lambda L: L.ones(3, 4).as_strided((2,), (1,), -1), RuntimeError, None),
    # shapes
    ("add-shape", lambda L: L.add(L.ones(2, 3), L.ones(4)), RuntimeError, None),
    ("eq-shape", lambda L: L.ones(2).eq(L.ones(3)), RuntimeError, None),
    ("where-shape", lambda L: L.where(_i(L, True, False), L.ones(2), L.ones(3)), RuntimeError, None),
    ("inplace-broadcast", lambda L: L.ones(2).add_(L.ones(2, 2)), RuntimeError, None),
    ("inplace-expanded", lambda L: L.ones(1, 3).expand(2, 3).add_(1), RuntimeError, None),
    ("copy-shape", lambda L: L.ones(2, 3).copy_(L.ones(3, 2)), RuntimeError, None),
    ("mm-shape", lambda L: L.mm(L.ones(2, 3), L.ones(2, 3)), RuntimeError, None),
    ("mm-1d", lambda L: L.mm(L.ones(3), L.ones(3, 2)), RuntimeError, None),
    ("mm-dtype", lambda L: L.mm(L.ones(2, 3), L.ones(3, 2, dtype=L.float64)), RuntimeError, None),
    ("fill-1d-value", lambda L: L.ones(2).fill_(L.ones(2)), RuntimeError, None),
    # linear algebra
    ("matmul-0d", lambda L: L.matmul(L.ones(()), L.ones(3)), RuntimeError, "at least 1D"),
    ("matmul-dot-size", lambda L: L.matmul(L.ones(3), L.ones(4)), RuntimeError, "inconsistent tensor size"),
    ("matmul-mv-size", lambda L: L.matmul(L.ones(4, 5), L.ones(3)), RuntimeError, r"size mismatch, got input \(4\)"),
    ("matmul-vm-size", lambda L: L.matmul(L.ones(3), L.ones(4, 5)), RuntimeError, r"\(1x3 and 4x5\)"),
    ("matmul-fold-size", lambda L: L.matmul(L.ones(2, 2, 3), L.ones(4, 5)), RuntimeError, r"\(4x3 and 4x5\)"),
    ("matmul-batch-size", lambda L: L.matmul(L.ones(2, 2, 3), L.ones(2, 4, 5)), RuntimeError,
     r"batch2 tensor to be: \[2, 3\] but got: \[2, 4\]"),
    ("matmul-broadcast", lambda L: L.matmul(L.ones(2, 2, 3), L.ones(3, 3, 4)), RuntimeError, "must match"),
    ("matmul-dtype", lambda L: L.matmul(L.ones(2, 3), L.ones(3, 2, dtype=L.float64)), RuntimeError,
     "expected m1 and m2 to have the same dtype, but got: float != double"),
    ("matmul-dtype-batched", lambda L: L.matmul(L.ones(2, 2, 3), L.ones(2, 3, 2, dtype=L.float64)), RuntimeError,
     "expected scalar type Float but found Double"),
    ("matmul-bool", lambda L: L.matmul(L.ones(2, 3, dtype=L.bool), L.ones(3, 2, dtype=L.bool)), NotImplementedError,
     "Bool"),
    ("matmul-out-dtype", lambda L: L.matmul(L.ones(2, 3), L.ones(3, 2), out=L.empty(2, 2, dtype=L.float64)),
     RuntimeError, "Expected out tensor to have dtype float, but got double instead"),
    ("matmul-operator-int", lambda L: L.ones(2, 2) @ 3, TypeError, None),
    ("bmm-2d", lambda L: L.bmm(L.ones(3, 4), L.ones(2, 4, 5)), RuntimeError, "batch1 must be a 3D tensor"),
    ("bmm-size", lambda L: L.bmm(L.ones(2, 3, 4), L.ones(3, 4, 5)), RuntimeError, "first two dimensions"),
    ("bmm-dtype", lambda L: L.bmm(L.ones(2, 3, 4), L.ones(2, 4, 5, dtype=L.float64)), RuntimeError,
     "expected scalar type Float but found Double"),
    ("mv-vec-2d", lambda L: L.mv(L.ones(3, 4), L.ones(4, 1)), RuntimeError, "vector \\+ matrix @ vector expected"),
    ("mv-0d", lambda L: L.mv(L.ones(()), L.ones(3)), IndexError, None),
    ("mv-size", lambda L: L.mv(L.ones(3, 4), L.ones(3)), RuntimeError, "size mismatch"),
    ("mv-bool", lambda L: L.mv(L.ones(3, 4, dtype=L.bool), L.ones(4, dtype=L.bool)), NotImplementedError, None),
    ("dot-2d", lambda L: L.dot(L.ones(3, 1), L.ones(3)), RuntimeError, "1D tensors expected, but got 2D and 1D"),
    ("dot-dtype", lambda L: L.dot(L.ones(3), L.ones(3, dtype=L.float64)), RuntimeError, "same dtype"),
    ("dot-bool", lambda L: L.dot(L.ones(3, dtype=L.bool), L.ones(3, dtype=L.bool)), NotImplementedError, None),
    ("dot-out-dtype", lambda L: L.dot(L.ones(3), L.ones(3), out=L.ones((), dtype=L.float64)), RuntimeError, None),
    ("vdot-size", lambda L: L.vdot(L.ones(3), L.ones(4)), RuntimeError, None),
    ("inner-size", lambda L: L.inner(L.ones(3), L.ones(4)), RuntimeError, "last dimension must match"),
    ("inner-dtype", lambda L: L.inner(L.ones(2, 3), L.ones(4, 3, dtype=L.float64)), RuntimeError, "same dtype"),
    ("inner-scalar", lambda L: L.inner(L.ones(2, 3), 2.5), TypeError, None),
    ("outer-2d", lambda L: L.outer(L.ones(3, 1), L.ones(4)), RuntimeError, "Expected 1-D argument self"),
    ("outer-out-cast", lambda L: L.outer(L.ones(2), L.ones(3), out=L.empty(2, 3, dtype=L.int64)), RuntimeError,
     "can't be cast"),
    ("ger-0d", lambda L: L.ger(L.ones(3), L.ones(())), RuntimeError, "Expected 1-D argument vec2"),
    ("addmm-shape", lambda L: L.addmm(L.ones(2, 3), L.ones(2, 3), L.ones(4, 3)), RuntimeError,
     r"addmm: mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x3\)"),
    ("addmm-1d", lambda L: L.addmm(L.ones(2, 2), L.ones(2), L.ones(2, 2)), RuntimeError, "must be a matrix"),
    ("addmm-self-dtype", lambda L: L.addmm(L.ones(3, dtype=L.float64), L.ones(2, 3), L.ones(3, 3)), RuntimeError,
     "self and mat2 must have the same dtype"),
    ("addmm-mat-dtype", lambda L: L.addmm(L.ones(2, 2), L.ones(2, 2, dtype=L.float64), L.ones(2, 2)), RuntimeError,
     "mat1 and mat2 must have the same dtype"),
    ("addmm-self-shape", lambda L: L.addmm(L.ones(3), L.ones(2, 3), L.ones(3, 2)), RuntimeError, None),
    ("addmm-inplace-shape", lambda L: L.ones(3).addmm_(L.ones(2, 3), L.ones(3, 3)), RuntimeError, "Bad in-place call"),
    ("addmm-bool", lambda L: L.addmm(L.ones(2, 2, dtype=L.bool), L.ones(2, 2, dtype=L.bool),
                                     L.ones(2, 2, dtype=L.bool)), NotImplementedError, None),
    ("addmm-out-dtype", lambda L: L.addmm(L.ones(2, 2), L.ones(2, 2), L.ones(2, 2), out=L.ones(2, 2, dtype=L.int64)),
     RuntimeError, "Expected out tensor to have dtype"),
    ("addmm-int-k0-float-beta", lambda L: L.addmm(L.ones(2, dtype=L.int64), L.ones(2, 0, dtype=L.int64),
                                                  L.ones(0, 2, dtype=L.int64), beta=0.5), RuntimeError, "can't be cast"),
    ("addmv-self-2d", lambda L: L.addmv(L.ones(2, 1), L.ones(2, 3), L.ones(3)), RuntimeError, "got 2, 2, 1"),
    ("addmv-size", lambda L: L.addmv(L.ones(4), L.ones(2, 3), L.ones(3)), RuntimeError, "size mismatch"),
    ("addmv-dtype", lambda L: L.addmv(L.ones(2, dtype=L.float64), L.ones(2, 3), L.ones(3)), RuntimeError,
     "addmv input tensors must have the same dtype, but got Double, Float, and Float"),
    ("addmv-inplace-shape", lambda L: L.ones(1).addmv_(L.ones(2, 3), L.ones(3)), RuntimeError, "Bad in-place call"),
    ("addr-vec-2d", lambda L: L.addr(L.ones(2, 3), L.ones(2, 1), L.ones(3)), RuntimeError, "Expected 1-D argument vec1"),
    ("addr-self-shape", lambda L: L.addr(L.ones(2, 3), L.ones(2), L.ones(2)), RuntimeError, None),
    ("addr-int-float-beta", lambda L: L.addr(_i(L, 1, 2).reshape(2, 1), _i(L, 1, 2), _i(L, 1), beta=0.5),
     RuntimeError, "argument beta must not be a floating point number"),
    ("addr-float-bool-alpha", lambda L: L.addr(L.ones(2, 2), L.ones(2), L.ones(2), alpha=True), RuntimeError,
     "Boolean alpha only supported for Boolean results"),
    ("addr-inplace-shape", lambda L: L.ones(1, 2).addr_(L.ones(2), L.ones(2)), RuntimeError, "size mismatch"),
    ("addr-inplace-cast", lambda L: L.ones(2, 2, dtype=L.int64).addr_(L.ones(2), L.ones(2)), RuntimeError,
     "can't be cast"),
    ("baddbmm-size", lambda L: L.baddbmm(L.ones(2, 3, 4), L.ones(2, 3, 5), L.ones(3, 5, 4)), RuntimeError,
     "first two dimensions"),
    ("baddbmm-dtype", lambda L: L.baddbmm(L.ones(2, 3, 4, dtype=L.float64), L.ones(2, 3, 5), L.ones(2, 5, 4)),
     RuntimeError, "Input dtypes must be the same, got: input double, batch1: float, batch2: float"),
    ("baddbmm-2d-batch2", lambda L: L.baddbmm(L.ones(2, 3, 4), L.ones(2, 3, 5), L.ones(5, 4)), IndexError, None),
    ("baddbmm-inplace-shape", lambda L: L.ones(3, 4).baddbmm_(L.ones(2, 3, 5), L.ones(2, 5, 4)), RuntimeError,
     "Bad in-place call"),
    ("baddbmm-bool", lambda L: L.baddbmm(L.ones(1, 2, 2, dtype=L.bool), L.ones(1, 2, 2, dtype=L.bool),
                                         L.ones(1, 2, 2, dtype=L.bool)), NotImplementedError, None),
    ("addbmm-batches", lambda L: L.addbmm(L.ones(3, 4), L.ones(2, 3, 5), L.ones(3, 5, 4)), RuntimeError,
     "same number of batches, got 2 and 3"),
    ("addbmm-size", lambda L: L.addbmm(L.ones(3, 4), L.ones(2, 3, 5), L.ones(2, 4, 4)), RuntimeError,
     r"Incompatible matrix sizes for bmm \(3x5 and 4x4\)"),
    ("addbmm-2d", lambda L: L.addbmm(L.ones(3, 4), L.ones(2, 3), L.ones(2, 4, 4)), RuntimeError, "3D tensor"),
    ("trace-1d", lambda L: L.trace(L.ones(3)), RuntimeError, "expected a matrix, but got tensor with dim 1"),
    ("trace-bool", lambda L: L.trace(L.ones(2, 2, dtype=L.bool)), NotImplementedError, None),
    ("trace-out", lambda L: L.trace(L.ones(2, 2), out=L.ones(())), TypeError, None),
    ("kron-out-cast", lambda L: L.kron(L.ones(2), L.ones(3), out=L.empty(6, dtype=L.int64)), RuntimeError,
     "can't be cast"),
    ("einsum-bad-subscript", lambda L: L.einsum("i1", L.ones(2, 3)), RuntimeError, "invalid subscript given at index 1"),
    ("einsum-more-operands", lambda L: L.einsum("ij", L.ones(2, 3), L.ones(2)), RuntimeError, "more operands"),
    ("einsum-fewer-operands", lambda L: L.einsum("ij,j", L.ones(2, 3)), RuntimeError, "fewer operands"),
    ("einsum-ndim", lambda L: L.einsum("ij", L.ones(2, 3, 4)), RuntimeError, "does not match the number of dimensions"),
    ("einsum-size", lambda L: L.einsum("ij,jk", L.ones(2, 3), L.ones(4, 4)), RuntimeError,
     "subscript j has size 4 for operand 1 which does not broadcast with previously seen size 3"),
    ("einsum-repeated-size", lambda L: L.einsum("ii", L.ones(2, 3)), RuntimeError, "repeated for operand 0"),
    ("einsum-output-twice", lambda L: L.einsum("ij->ii", L.ones(2, 3)), RuntimeError, "appears more than once"),
    ("einsum-output-unknown", lambda L: L.einsum("ij->k", L.ones(2, 3)), RuntimeError, "does not appear"),
    ("einsum-ellipsis-twice", lambda L: L.einsum("....", L.ones(2)), RuntimeError, "ellipsis was already found"),
    ("einsum-bad-ellipsis", lambda L: L.einsum("i..", L.ones(2)), RuntimeError, "not part of any ellipsis"),
    ("einsum-ellipsis-broadcast", lambda L: L.einsum("...ij,...jk", L.ones(2, 3, 2, 3), L.ones(4, 3, 4)),
     RuntimeError, "covered by ellipsis"),
    ("einsum-dtype", lambda L: L.einsum("ij,jk", L.ones(2, 3), L.ones(3, 4, dtype=L.float64)), RuntimeError,
     "expected scalar type Float but found Double"),
    ("einsum-bool", lambda L: L.einsum("ij,jk", L.ones(2, 3, dtype=L.bool), L.ones(3, 4, dtype=L.bool)),
     NotImplementedError, None),
    ("einsum-no-operands", lambda L: L.einsum("ij"), ValueError, "must specify the equation string"),
    ("einsum-not-tensor", lambda L: L.einsum("ab,bc", L.ones(2, 3), 5), TypeError, None),
    # dtypes
    ("out-cast", lambda L: L.add(L.ones(2), L.ones(2), out=L.empty(2, dtype=L.int64)), RuntimeError, "can't be cast"),
    ("inplace-cast-div", lambda L: _i(L, 1, 2).div_(2), RuntimeError, "can't be cast"),
    ("inplace-cast-sqrt", lambda L: _i(L, 1, 2).sqrt_(), RuntimeError, "can't be cast"),
    ("inplace-cast-scalar", lambda L: _i(L, 1, 2).add_(1.5), RuntimeError, "can't be cast"),
    ("inplace-cast-bool", lambda L: _i(L, True).square_(), RuntimeError, "can't be cast"),
    ("float_power_-float32", lambda L: L.ones(2).float_power_(2), RuntimeError, None),
    ("where-cond-dtype", lambda L: L.where(_i(L, 1, 0), L.ones(2), L.ones(2)), RuntimeError, None),
    ("lerp-dtype", lambda L: L.lerp(L.ones(1), L.ones(1, dtype=L.float64), 0.5), RuntimeError, None),
    ("lerp-weight-dtype", lambda L: L.lerp(L.ones(1), L.ones(1), L.ones(1, dtype=L.float64)), RuntimeError, None),
    ("add-int-alpha-float", lambda L: L.add(_i(L, 1), _i(L, 1), alpha=2.5), RuntimeError, None),
    ("pow-int-neg-scalar", lambda L: _i(L, 1, 2) ** -1, RuntimeError, None),
    ("bitwise-float-scalar", lambda L: L.bitwise_and(_i(L, 3), 1.5), NotImplementedError, None),
    ("round-int-decimals", lambda L: L.round(_i(L, 15, 25), decimals=1), NotImplementedError, None),
    ("neg-bool", lambda L: -_i(L, True), NotImplementedError, None),
    ("sub-bool", lambda L: _i(L, True) - _i(L, True), NotImplementedError, None),
    ("sub-bool-scalar", lambda L: _i(L, True) - 1, NotImplementedError, None),
    ("rsub-bool-scalar", lambda L: 1 - _i(L, True), NotImplementedError, None),
    ("pow-bool", lambda L: L.pow(_i(L, True), _i(L, True)), NotImplementedError, None),
    ("clamp-no-bounds", lambda L: L.clamp(_i(L, 1, 2)), RuntimeError, None),
    ("fill-overflow", lambda L: L.ones(2, dtype=L.uint8).fill_(300), RuntimeError, None),
    # integer division by zero
    ("floordiv-int-zero", lambda L: _i(L, 1, 2) // 0, RuntimeError, "ZeroDivisionError"),
    ("remainder-int-zero", lambda L: _i(L, 1, 2) % 0, RuntimeError, "ZeroDivisionError"),
    ("fmod-int-zero", lambda L: L.fmod(_i(L, 1, 2), 0), RuntimeError, "ZeroDivisionError"),
    ("div-floor-int-zero", lambda L: L.div(_i(L, 1, 2), 0, rounding_mode="floor"), RuntimeError, "ZeroDivisionError"),
    ("div-trunc-int-tensor-zero", lambda L: L.div(_i(L, 1, 2), _i(L, 0, 1), rounding_mode="trunc"), RuntimeError,
     "ZeroDivisionError"),
    ("floordiv-int8-zero", lambda L: L.floor_divide(L.ones(3, dtype=L.int8), L.zeros(3, dtype=L.int8)), RuntimeError,
     "ZeroDivisionError"),
    ("div-rounding-mode", lambda L: L.div(L.ones(1), 2, rounding_mode="bad"), RuntimeError, None),
    # argument types
    ("add-str", lambda L: L.add(L.ones(2), "a"), TypeError, None),
    ("add-None", lambda L: L.add(L.ones(2), None), TypeError, None),
    ("add-alpha-str", lambda L: L.add(L.ones(2), L.ones(2), alpha="x"), TypeError, None),
    ("exp-int", lambda L: L.exp(3), TypeError, None),
    ("exp-extra-positional", lambda L: L.exp(L.ones(2), 3), TypeError, None),
    ("exp-bad-kwarg", lambda L: L.exp(L.ones(2), foo=3), TypeError, None),
    ("transpose-missing", lambda L: L.transpose(L.ones(2, 2), 0), TypeError, None),
    ("transpose-float-dim", lambda L: L.ones(3, 4).transpose(0, 1.5), TypeError, None),
    ("hypot-scalar", lambda L: L.hypot(L.ones(1), 4), TypeError, None),
    ("maximum-scalar", lambda L: L.maximum(L.ones(1), 4), TypeError, None),
    ("eq-rscalar", lambda L: L.eq(2, L.ones(1)), TypeError, None),
    ("lerp-str", lambda L: L.lerp(L.ones(2), L.ones(2), "a"), TypeError, None),
    ("new_zeros-float-size", lambda L: L.ones(3).new_zeros(2.5), TypeError, None),
    ("new_zeros-negative", lambda L: L.ones(3).new_zeros((2, -1)), RuntimeError, None),
    ("new_full-str", lambda L: L.ones(3).new_full((2,), "a"), TypeError, None),
    # random
    ("uniform-range", lambda L: L.ones(3).uniform_(2, 1), RuntimeError, None),
    ("normal-std", lambda L: L.ones(3).normal_(0, -1), RuntimeError, None),
    ("bernoulli-p", lambda L: L.ones(3).bernoulli_(1.5), RuntimeError, None),
    ("bernoulli-negp", lambda L: L.ones(3).bernoulli_(-0.5), RuntimeError, None),
    ("bernoulli-input-p", lambda L: L.tensor([1.5, 0.5]).bernoulli(), RuntimeError, None),
    ("random-range", lambda L: L.ones(3).random_(5, 2), RuntimeError, None),
    ("random-empty-range", lambda L: L.ones(3).random_(5, 5), RuntimeError, None),
    ("exponential-lambda", lambda L: L.ones(3).exponential_(0), RuntimeError, None),
    ("multinomial-too-many", lambda L: L.tensor([1.0, 2.0]).multinomial(3), RuntimeError, None),
    ("multinomial-negative", lambda L: L.tensor([-1.0, 2.0]).multinomial(1), RuntimeError, None),
    ("multinomial-zero-sum", lambda L: L.tensor([0.0, 0.0]).multinomial(1), RuntimeError, None),
    ("multinomial-zero-samples", lambda L: L.tensor([1.0, 2.0]).multinomial(0), RuntimeError, None),
    ("multinomial-3d", lambda L: L.ones(2, 2, 2).multinomial(1), RuntimeError, None),
    # joining, rearranging
    ("cat-empty-list", lambda L: L.cat([]), ValueError, None),
    ("cat-not-tensor", lambda L: L.cat([L.ones(2), 3]), TypeError, None),
    ("cat-tensor-arg", lambda L: L.cat(L.ones(2, 2)), TypeError, None),
    ("cat-0d", lambda L: L.cat([L.ones(2), L.tensor(2.)]), RuntimeError, "zero-dimensional"),
    ("cat-ndim", lambda L: L.cat([L.ones(2, 3), L.ones(2, 3, 1)]), RuntimeError, None),
    ("cat-sizes", lambda L: L.cat([L.ones(2, 3), L.ones(2, 4)]), RuntimeError, "Sizes of tensors must match"),
    ("cat-sizes-empty", lambda L: L.cat([L.ones(0, 3), L.ones(2, 4)]), RuntimeError, None),
    ("cat-dim", lambda L: L.cat([L.ones(2, 3)], dim=2), IndexError, None),
    ("cat-float-dim", lambda L: L.cat([L.ones(2, 3)], 0.5), TypeError, None),
    ("cat-out-cast", lambda L: L.cat([L.ones(2)], out=L.empty(2, dtype=L.int64)), TypeError, None),
    ("cat-out-overlap", lambda L: (lambda x: L.cat([x[:2], x[2:]], out=x))(L.ones(4)), RuntimeError, None),
    ("stack-empty", lambda L: L.stack([]), RuntimeError, None),
    ("stack-sizes", lambda L: L.stack([L.ones(2, 3), L.ones(3, 2)]), RuntimeError, "equal size"),
    ("stack-dim", lambda L: L.stack([L.ones(2)], dim=2), IndexError, None),
    ("hstack-empty", lambda L: L.hstack([]), RuntimeError, None),
    ("vstack-not-tensor", lambda L: L.vstack([L.ones(2), 1]), TypeError, None),
    ("tensor_split-0d", lambda L: L.tensor_split(L.tensor(1.), 2), RuntimeError, None),
    ("tensor_split-zero", lambda L: L.tensor_split(L.ones(4), 0), RuntimeError, None),
    ("tensor_split-float-indices", lambda L: L.tensor_split(L.ones(4), L.tensor([1.0])), RuntimeError, None),
    ("tensor_split-2d-indices", lambda L: L.tensor_split(L.ones(4), L.tensor([[1]])), RuntimeError, None),
    ("tensor_split-float", lambda L: L.tensor_split(L.ones(4), 2.5), TypeError, None),
    ("tensor_split-dim", lambda L: L.tensor_split(L.ones(4), 2, 1), IndexError, None),
    ("repeat-fewer", lambda L: L.ones(2, 3).repeat(2), RuntimeError, None),
    ("repeat-negative", lambda L: L.ones(3).repeat(-1), RuntimeError, None),
    ("repeat-overflow", lambda L: L.ones(3).repeat(2 ** 40, 2 ** 40), RuntimeError, None),
    ("tile-negative", lambda L: L.ones(2, 3).tile((-1,)), RuntimeError, None),
    ("repeat_interleave-negative", lambda L: L.ones(3).repeat_interleave(-1), RuntimeError, None),
    ("repeat_interleave-negative-tensor", lambda L: L.ones(2).repeat_interleave(L.tensor([1, -1])), RuntimeError,
     None),
    ("repeat_interleave-float", lambda L: L.ones(2).repeat_interleave(L.tensor([1.0, 2.0])), NotImplementedError, None),
    ("repeat_interleave-bool", lambda L: L.ones(2).repeat_interleave(L.tensor([True, True])), NotImplementedError,
     None),
    ("repeat_interleave-size", lambda L: L.ones(2, 3).repeat_interleave(L.tensor([1, 2]), dim=1), RuntimeError, None),
    ("repeat_interleave-2d", lambda L: L.ones(2).repeat_interleave(L.tensor([[1, 2]]), dim=0), RuntimeError, None),
    ("repeat_interleave-output_size", lambda L: L.ones(3).repeat_interleave(2, output_size=5), RuntimeError, None),
    ("repeat_interleave-output_size-t", lambda L: L.ones(2).repeat_interleave(L.tensor([1, 2]), output_size=4),
     RuntimeError, None),
    ("repeat_interleave-dim", lambda L: L.ones(2, 3).repeat_interleave(2, dim=2), IndexError, None),
    ("repeat_interleave-0d-dim", lambda L: L.tensor(5).repeat_interleave(3, dim=0), IndexError, None),
    ("repeat_interleave-indices-2d", lambda L: L.repeat_interleave(L.tensor([[1, 2]])), RuntimeError, None),
    ("repeat_interleave-overflow", lambda L: L.ones(3).repeat_interleave(2 ** 62), RuntimeError, None),
    ("flip-dup", lambda L: L.ones(2, 3).flip(0, -2), RuntimeError, None),
    ("flip-dim", lambda L: L.ones(2, 3).flip(2), IndexError, None),
    ("fliplr-1d", lambda L: L.fliplr(L.ones(3)), RuntimeError, None),
    ("flipud-0d", lambda L: L.flipud(L.tensor(1.)), RuntimeError, None),
    ("roll-align", lambda L: L.roll(L.ones(2, 3), (1, 1)), RuntimeError, None),
    ("roll-align-dims", lambda L: L.roll(L.ones(2, 3), 1, (0, 1)), RuntimeError, None),
    ("roll-no-shifts", lambda L: L.roll(L.ones(2, 3), (), ()), RuntimeError, None),
    ("roll-dim", lambda L: L.roll(L.ones(2, 3), 1, 2), IndexError, None),
    ("roll-0d-dim", lambda L: L.roll(L.tensor(3.), 1, 0), IndexError, None),
    ("roll-float", lambda L: L.roll(L.ones(2, 3), 1.5), TypeError, None),
    ("rot90-ndims", lambda L: L.rot90(L.ones(2, 3), 1, (0,)), RuntimeError, None),
    ("rot90-same", lambda L: L.rot90(L.ones(2, 3), 1, (0, -2)), RuntimeError, None),
    ("rot90-1d", lambda L: L.rot90(L.ones(3)), RuntimeError, None),
    ("rot90-dim", lambda L: L.rot90(L.ones(2, 3), 1, (0, 2)), IndexError, None),
    ("movedim-len", lambda L: L.movedim(L.ones(2, 3), (0, 1), (1,)), RuntimeError, None),
    ("movedim-repeat-src", lambda L: L.movedim(L.ones(2, 3), (0, 0), (0, 1)), RuntimeError, None),
    ("movedim-repeat-dst", lambda L: L.movedim(L.ones(2, 3), (0, 1), (1, 1)), RuntimeError, None),
    ("movedim-dim", lambda L: L.movedim(L.ones(2, 3), 2, 0), IndexError, None),
    ("movedim-float", lambda L: L.movedim(L.ones(2, 3), 0.5, 0), TypeError, None),
    ("broadcast_to-size", lambda L: L.broadcast_to(L.ones(3), (2, 4)), RuntimeError, None),
    ("broadcast_to-lead", lambda L: L.broadcast_to(L.ones(3), (-1, 3)), RuntimeError, None),
    ("broadcast_tensors-shape", lambda L: L.broadcast_tensors(L.ones(3), L.ones(2)), RuntimeError, None),
    ("broadcast_tensors-int", lambda L: L.broadcast_tensors(L.ones(3), 2), TypeError, None),
    ("broadcast_shapes-mismatch", lambda L: L.broadcast_shapes((2,), (3,)), RuntimeError, None),
    ("broadcast_shapes-negative", lambda L: L.broadcast_shapes((-1,), (3,)), ValueError, None),
    ("broadcast_shapes-float", lambda L: L.broadcast_shapes((2,), 2.5), RuntimeError, None),
    ("meshgrid-dtype", lambda L: L.meshgrid(L.ones(2), L.ones(2, dtype=L.int64), indexing="ij"), RuntimeError, None),
    ("meshgrid-2d", lambda L: L.meshgrid(L.ones(2, 2), L.ones(2, 2), indexing="ij"), RuntimeError, None),
    ("meshgrid-indexing", lambda L: L.meshgrid(L.ones(2), indexing="foo"), RuntimeError, None),
    ("meshgrid-empty", lambda L: L.meshgrid(indexing="ij"), RuntimeError, None),
    ("diff-0d", lambda L: L.diff(L.tensor(1.)), RuntimeError, None),
    ("diff-order", lambda L: L.diff(L.ones(3), n=-1), RuntimeError, None),
    ("diff-dim", lambda L: L.diff(L.ones(3), dim=1), IndexError, None),
    ("diff-prepend-ndim", lambda L: L.diff(L.ones(2, 2), prepend=L.ones(2)), RuntimeError, None),
    ("diff-append-shape", lambda L: L.diff(L.ones(2, 3), dim=0, append=L.ones(2, 2)), RuntimeError, None),
    ("diff-prepend-int", lambda L: L.diff(L.ones(3), prepend=0), TypeError, None),
    ("diff-out-cast", lambda L: L.diff(L.tensor([1.5, 3.0]), out=L.empty(0, dtype=L.int64)), RuntimeError, None),
    ("one_hot-dtype", lambda L: L.nn.functional.one_hot(L.tensor([1, 2], dtype=L.int32)), RuntimeError, None),
    ("one_hot-negative", lambda L: L.nn.functional.one_hot(L.tensor([0, -2])), RuntimeError, None),
    ("one_hot-classes", lambda L: L.nn.functional.one_hot(L.tensor([0, 2]), 2), RuntimeError, None),
    ("one_hot-empty", lambda L: L.nn.functional.one_hot(L.zeros(0, dtype=L.int64)), RuntimeError, None),
    ("tril_indices-negative", lambda L: L.tril_indices(-1, 3), RuntimeError, None),
    ("triu_indices-dtype", lambda L: L.triu_indices(3, 3, dtype=L.float32), NotImplementedError, None),
    ("tril_indices-int8", lambda L: L.tril_indices(3, 3, dtype=L.int8), NotImplementedError, None),
    # sorting and searching
    ("sort-dim", lambda L: L.sort(L.ones(2, 3), dim=2), IndexError, None),
    ("sort-out-dtype", lambda L: L.sort(L.ones(3), out=(L.empty(0, dtype=L.float64), L.empty(0, dtype=L.int64))),
     RuntimeError, None),
    ("sort-out-index-dtype", lambda L: L.sort(L.ones(3), out=(L.empty(0), L.empty(0, dtype=L.int32))), RuntimeError,
     None),
    ("sort-out-tensor", lambda L: L.sort(L.ones(3), out=L.empty(0)), TypeError, None),
    ("sort-out-len", lambda L: L.sort(L.ones(3), out=(L.empty(0),)), TypeError, None),
    ("sort-out-element", lambda L: L.sort(L.ones(3), out=(L.empty(0), 3)), TypeError, None),
    ("argsort-positional-stable", lambda L: L.argsort(L.ones(3), 0, True, True), TypeError, None),
    ("topk-k", lambda L: L.topk(L.ones(3), 4), RuntimeError, None),
    ("topk-negative-k", lambda L: L.topk(L.ones(3), -1), RuntimeError, None),
    ("topk-0d-k", lambda L: L.topk(L.tensor(1.), 2), RuntimeError, None),
    ("topk-bool", lambda L: L.topk(L.tensor([True, False]), 1), NotImplementedError, None),
    ("kthvalue-k", lambda L: L.kthvalue(L.ones(3), 4), RuntimeError, None),
    ("kthvalue-zero", lambda L: L.kthvalue(L.ones(3), 0), RuntimeError, None),
    ("kthvalue-empty-dim", lambda L: L.kthvalue(L.ones(2, 0), 1), IndexError, None),
    ("kthvalue-bool", lambda L: L.kthvalue(L.tensor([True, False]), 1), NotImplementedError, None),
    ("searchsorted-0d", lambda L: L.searchsorted(L.tensor(3), L.tensor([3])), RuntimeError, None),
    ("searchsorted-shape", lambda L: L.searchsorted(L.ones(2, 4), L.ones(3, 3)), RuntimeError, None),
    ("searchsorted-scalar-2d", lambda L: L.searchsorted(L.ones(2, 4), 3), RuntimeError, None),
    ("searchsorted-side", lambda L: L.searchsorted(L.ones(4), L.ones(2), side="up"), RuntimeError, None),
    ("searchsorted-side-right", lambda L: L.searchsorted(L.ones(4), L.ones(2), side="left", right=True), RuntimeError,
     None),
    ("searchsorted-sorter-dtype", lambda L: L.searchsorted(L.ones(3), L.ones(2), sorter=L.tensor([0, 1, 2],
                                                                                                 dtype=L.int32)),
     RuntimeError, None),
    ("searchsorted-sorter-size", lambda L: L.searchsorted(L.ones(3), L.ones(2), sorter=L.tensor([0, 1])),
     RuntimeError, None),
    ("searchsorted-sorter-range", lambda L: L.searchsorted(L.ones(3), L.ones(2), sorter=L.tensor([0, 1, 3])),
     RuntimeError, None),
    ("searchsorted-out-dtype", lambda L: L.searchsorted(L.ones(3), L.ones(2), out=L.empty(0, dtype=L.int32)),
     RuntimeError, None),
    ("searchsorted-bool", lambda L: L.searchsorted(L.tensor([True]), L.tensor([False])), NotImplementedError, None),
    ("bucketize-2d", lambda L: L.bucketize(L.ones(2), L.ones(2, 2)), RuntimeError, None),
    ("unique-dim", lambda L: L.unique(L.ones(2, 3), dim=2), IndexError, None),
    ("unique-0d-dim", lambda L: L.unique(L.tensor(3), dim=0), IndexError, None),
    ("unique-zero-size", lambda L: L.unique(L.ones(2, 0), dim=0), RuntimeError, None),
    ("unique_consecutive-dim", lambda L: L.unique_consecutive(L.ones(2, 3), dim=-3), IndexError, None),
]

# indexing (csrc/ops/index*.c, csrc/ops/scatter_gather.c)
_LI = lambda L, *v: L.tensor(list(v), dtype=L.int64)  # noqa: E731
ERRORS += [
    ("getitem-oob", lambda L: L.ones(3, 4)[_LI(L, 0, 3)], IndexError, "out of bounds"),
    ("getitem-oob-neg", lambda L: L.ones(3, 4)[:, [-5]], IndexError, "out of bounds"),
    ("getitem-float-index", lambda L: L.ones(3)[L.tensor([0.0])], IndexError, None),
    ("getitem-int16-index", lambda L: L.ones(3)[L.tensor([0], dtype=L.int16)], IndexError, None),
    ("getitem-mask-shape", lambda L: L.ones(3, 4)[L.ones(4, dtype=L.bool)], IndexError, "shape of the mask"),
    ("getitem-broadcast", lambda L: L.ones(3, 4)[[0, 1], [0, 1, 2]], IndexError, "shape mismatch"),
    ("getitem-too-many", lambda L: L.ones(3, 4)[L.ones(3, 4, dtype=L.bool), 0], IndexError, None),
    ("getitem-np-bool", lambda L: L.ones(3)[np.bool_(True)], IndexError, None),
    ("setitem-oob", lambda L: L.ones(3).__setitem__([3], 1.0), IndexError, "out of bounds"),
    ("setitem-dtype", lambda L: L.ones(3).__setitem__([0], L.tensor([1.0], dtype=L.float64)), RuntimeError,
     "dtypes match"),
    ("setitem-shape", lambda L: L.ones(3, 4).__setitem__([0, 1], L.ones(3)), RuntimeError, "shape mismatch"),
    ("setitem-overlap", lambda L: (lambda t: t.__setitem__([0, 1], t[1:]))(L.zeros(3)), RuntimeError, None),
    ("index_select-oob", lambda L: L.ones(3).index_select(0, _LI(L, 3)), IndexError, None),
    ("index_select-neg", lambda L: L.ones(3).index_select(0, _LI(L, -1)), IndexError, None),
    ("index_select-2d-index", lambda L: L.ones(3).index_select(0, L.zeros(1, 1, dtype=L.int64)), IndexError, None),
    ("index_select-float-index", lambda L: L.ones(3).index_select(0, L.zeros(1)), RuntimeError, None),
    ("index_select-dim", lambda L: L.ones(3).index_select(1, _LI(L, 0)), IndexError, None),
    ("gather-oob", lambda L: L.ones(2, 3).gather(1, L.full((2, 1), 3, dtype=L.int64)), RuntimeError, "out of bounds"),
    ("gather-neg", lambda L: L.ones(2, 3).gather(1, L.full((2, 1), -1, dtype=L.int64)), RuntimeError, None),
    ("gather-ndim", lambda L: L.ones(2, 3).gather(1, _LI(L, 0)), RuntimeError, None),
    ("gather-size", lambda L: L.ones(2, 3).gather(1, L.zeros(3, 1, dtype=L.int64)), RuntimeError, None),
    ("gather-float-index", lambda L: L.ones(2, 3).gather(1, L.zeros(2, 1)), RuntimeError, None),
    ("scatter-oob", lambda L: L.ones(2, 3).scatter(0, L.full((1, 3), 2, dtype=L.int64), 1.0), RuntimeError, None),
    ("scatter-src-dtype", lambda L: L.ones(3).scatter(0, _LI(L, 0), L.ones(1, dtype=L.float64)), RuntimeError, None),
    ("scatter-src-size", lambda L: L.ones(2, 3).scatter(1, L.zeros(2, 2, dtype=L.int64), L.ones(2, 1)), RuntimeError,
     None),
    ("scatter-reduce-arg", lambda L: L.ones(3).scatter(0, _LI(L, 0), L.ones(1), reduce="max"), RuntimeError, None),
    ("scatter-expanded-self", lambda L: L.ones(1, 3).expand(2, 3).scatter_(1, L.zeros(2, 1, dtype=L.int64), 2.0),
     RuntimeError, None),
    ("scatter-value-overflow", lambda L: L.ones(3, dtype=L.uint8).scatter(0, _LI(L, 0), 300), RuntimeError, None),
    ("scatter_add-oob", lambda L: L.ones(3).scatter_add(0, _LI(L, 5), L.ones(1)), RuntimeError, None),
    ("scatter_reduce-bad", lambda L: L.ones(3).scatter_reduce(0, _LI(L, 0), L.ones(1), "foo"), RuntimeError, None),
    ("scatter_reduce-mean-bool", lambda L: L.ones(3, dtype=L.bool).scatter_reduce(
        0, _LI(L, 0), L.ones(1, dtype=L.bool), "mean"), NotImplementedError, None),
    ("index_add-oob", lambda L: L.ones(3).index_add(0, _LI(L, 3), L.ones(1)), IndexError, None),
    ("index_add-dtype", lambda L: L.ones(3).index_add(0, _LI(L, 0), L.ones(1, dtype=L.float64)), RuntimeError, None),
    ("index_add-count", lambda L: L.ones(3).index_add(0, _LI(L, 0), L.ones(2)), RuntimeError, None),
    ("index_add-shape", lambda L: L.ones(2, 3).index_add(0, _LI(L, 0), L.ones(1, 4)), RuntimeError, None),
    ("index_add-alpha-overflow", lambda L: L.ones(3, dtype=L.uint8).index_add(0, _LI(L, 0), L.ones(
        1, dtype=L.uint8), alpha=300), RuntimeError, None),
    ("index_copy-oob", lambda L: L.ones(3).index_copy(0, _LI(L, -1), L.ones(1)), IndexError, None),
    ("index_copy-int32", lambda L: L.ones(3).index_copy(0, L.zeros(1, dtype=L.int32), L.ones(1)), RuntimeError, None),
    ("index_copy-count", lambda L: L.ones(3).index_copy(0, _LI(L, 0), L.ones(2)), IndexError, None),
    ("index_fill-oob", lambda L: L.ones(3).index_fill(0, _LI(L, 3), 1.0), IndexError, None),
    ("index_fill-1d-value", lambda L: L.ones(3).index_fill(0, _LI(L, 0), L.ones(1)), RuntimeError, None),
    ("index_fill-int32", lambda L: L.ones(3).index_fill(0, L.zeros(1, dtype=L.int32), 1.0), IndexError, None),
    ("index_put-oob", lambda L: L.ones(3).index_put((_LI(L, 3),), L.ones(1)), IndexError, None),
    ("index_put-not-tuple", lambda L: L.ones(3).index_put(_LI(L, 0), L.ones(1)), TypeError, None),
    ("index_put-none", lambda L: L.ones(3).index_put((None,), L.ones(1)), TypeError, None),
    ("index_put-dtype", lambda L: L.ones(3).index_put((_LI(L, 0),), L.ones(1, dtype=L.float64), True), RuntimeError,
     None),
    ("index_put-too-many", lambda L: L.ones(3).index_put((_LI(L, 0), _LI(L, 0)), L.ones(1)), IndexError, None),
    ("masked_fill-mask-dtype", lambda L: L.ones(3).masked_fill(_LI(L, 1, 0, 1), 1.0), RuntimeError, None),
    ("masked_fill-1d-value", lambda L: L.ones(3).masked_fill(L.ones(3, dtype=L.bool), L.ones(1)), RuntimeError, None),
    ("masked_fill-overflow", lambda L: L.ones(3, dtype=L.uint8).masked_fill(L.ones(3, dtype=L.bool), 300),
     RuntimeError, None),
    ("masked_fill_-broadcast", lambda L: L.ones(3).masked_fill_(L.ones(2, 3, dtype=L.bool), 1.0), RuntimeError, None),
    ("masked_select-mask-dtype", lambda L: L.ones(3).masked_select(_LI(L, 1, 0, 1)), RuntimeError, None),
    ("masked_scatter-too-few", lambda L: L.ones(3).masked_scatter(L.ones(3, dtype=L.bool), L.ones(2)), RuntimeError,
     None),
    ("masked_scatter-dtype", lambda L: L.ones(3).masked_scatter(L.ones(3, dtype=L.bool), _LI(L, 1, 2, 3)),
     RuntimeError, None),
    ("take-oob", lambda L: L.ones(2, 2).take(_LI(L, 4)), IndexError, None),
    ("take-int32", lambda L: L.ones(2, 2).take(L.zeros(1, dtype=L.int32)), RuntimeError, None),
    ("take_along_dim-ndim", lambda L: L.ones(2, 3).take_along_dim(_LI(L, 0), 1), RuntimeError, None),
    ("take_along_dim-int32", lambda L: L.ones(2, 3).take_along_dim(L.zeros(2, 1, dtype=L.int32), 1), RuntimeError,
     None),
    ("take_along_dim-flat-oob", lambda L: L.ones(2, 3).take_along_dim(_LI(L, 6)), RuntimeError, None),
    ("nonzero-out-dtype", lambda L: L.nonzero(L.ones(3), out=L.empty(0)), RuntimeError, None),
    ("nonzero-out-tuple", lambda L: L.nonzero(L.ones(3), as_tuple=True, out=L.empty(0, dtype=L.int64)),
     RuntimeError, None),
    ("where-one-of-two", lambda L: L.where(L.ones(3, dtype=L.bool), L.ones(3)), TypeError, None),
    # reductions
    ("sum-dim", lambda L: L.ones(3, 4).sum(2), IndexError, "Dimension out of range"),
    ("sum-negdim", lambda L: L.ones(3, 4).sum(-3), IndexError, None),
    ("sum-dup-dims", lambda L: L.ones(3, 4).sum((0, -2)), RuntimeError, "appears multiple times"),
    ("sum-0d-dim", lambda L: L.tensor(1.0).sum(1), IndexError, None),
    ("sum-dim-float", lambda L: L.ones(3, 4).sum(1.5), TypeError, None),
    ("sum-out-dtype", lambda L: L.sum(L.ones(3), 0, dtype=L.float64, out=L.empty(0)), RuntimeError, None),
    ("mean-int", lambda L: L.ones(3, dtype=L.int64).mean(), NotImplementedError, None),
    ("mean-dtype-int", lambda L: L.ones(3).mean(dtype=L.int32), NotImplementedError, None),
    ("mean-out-cast", lambda L: L.mean(L.ones(3, 2), 0, out=L.empty(0, dtype=L.int64)), RuntimeError, "can't be cast"),
    ("nanmean-int", lambda L: L.ones(3, dtype=L.int32).nanmean(), NotImplementedError, None),
    ("prod-tuple-dim", lambda L: L.ones(3, 4).prod((0, 1)), TypeError, None),
    ("max-empty", lambda L: L.ones(0).max(), RuntimeError, "Expected reduction dim"),
    ("max-empty-dim", lambda L: L.ones(0, 3).max(0), IndexError, "non-zero size"),
    ("max-dim-float", lambda L: L.ones(3).max(1.5), TypeError, None),
    ("max-out-tensor", lambda L: L.max(L.ones(3, 2), 0, out=L.empty(0)), TypeError, None),
    ("max-out-dtype", lambda L: L.max(L.ones(3, 2), 0, out=(L.empty(0), L.empty(0))), RuntimeError, None),
    ("amax-empty", lambda L: L.ones(0, 3).amax(), RuntimeError, None),
    ("amax-empty-dim", lambda L: L.ones(0, 3).amax(0), IndexError, None),
    ("amax-out-dtype", lambda L: L.amax(L.ones(3, 2), 0, out=L.empty(0, dtype=L.float64)), RuntimeError, None),
    ("aminmax-empty", lambda L: L.ones(0).aminmax(), RuntimeError, None),
    ("aminmax-tuple-dim", lambda L: L.ones(3, 2).aminmax(dim=(0, 1)), TypeError, None),
    ("argmax-empty", lambda L: L.ones(0).argmax(), IndexError, None),
    ("argmax-empty-dim", lambda L: L.ones(0, 3).argmax(0), IndexError, None),
    ("argmax-bool", lambda L: L.ones(3, dtype=L.bool).argmax(), NotImplementedError, None),
    ("argmax-out-dtype", lambda L: L.argmax(L.ones(3, 2), 0, out=L.empty(0)), RuntimeError, None),
    ("var-int", lambda L: L.ones(3, dtype=L.int64).var(), NotImplementedError, None),
    ("var-unbiased-correction", lambda L: L.ones(3).var(0, True, correction=1), TypeError, None),
    ("std-dim", lambda L: L.ones(3).std(1), IndexError, None),
    ("norm-int", lambda L: L.ones(3, dtype=L.int64).norm(), NotImplementedError, None),
    ("norm-bad-str", lambda L: L.ones(3, 2).norm("bad"), RuntimeError, None),
    ("norm-fro-3-dims", lambda L: L.ones(2, 2, 2).norm("fro", dim=(0, 1, 2)), RuntimeError, None),
    ("vector_norm-narrowing", lambda L: L.linalg.vector_norm(L.ones(3), dtype=L.float16), RuntimeError, None),
    ("vector_norm-int-dtype", lambda L: L.linalg.vector_norm(L.ones(3), dtype=L.int64), RuntimeError, None),
    ("vector_norm-str-ord", lambda L: L.linalg.vector_norm(L.ones(3), "fro"), TypeError, None),
    ("vector_norm-empty-inf", lambda L: L.linalg.vector_norm(L.ones(0), float("inf")), RuntimeError, None),
    ("vector_norm-empty-neg", lambda L: L.linalg.vector_norm(L.ones(0), -1), RuntimeError, None),
    ("vector_norm-out-dtype", lambda L: L.linalg.vector_norm(L.ones(3), out=L.empty(0, dtype=L.float64)),
     RuntimeError, None),
    ("linalg.norm-3d-ord", lambda L: L.linalg.norm(L.ones(2, 2, 2), 1), RuntimeError, None),
    ("linalg.norm-order", lambda L: L.linalg.norm(L.ones(2, 2), 3), RuntimeError, None),
    ("matrix_norm-1d", lambda L: L.linalg.matrix_norm(L.ones(3)), RuntimeError, None),
    ("logsumexp-int-out", lambda L: L.logsumexp(L.ones(3, dtype=L.int64), 0, out=L.empty(0, dtype=L.int64)),
     RuntimeError, None),
    ("logsumexp-no-dim", lambda L: L.ones(3).logsumexp(), TypeError, None),
    ("all-out-float", lambda L: L.all(L.ones(3, 2), 0, out=L.empty(0)), RuntimeError, None),
    ("count_nonzero-dup", lambda L: L.ones(3, 2).count_nonzero((0, 0)), RuntimeError, None),
    ("count_nonzero-keepdim", lambda L: L.ones(3, 2).count_nonzero(0, keepdim=True), TypeError, None),
    ("cumsum-dim", lambda L: L.ones(3, 2).cumsum(2), IndexError, None),
    ("cumsum-no-dim", lambda L: L.ones(3, 2).cumsum(), TypeError, None),
    ("cumsum_-dtype", lambda L: L.ones(3, 2).cumsum_(0, dtype=L.float64), RuntimeError, "Bad in-place call"),
    ("cumsum_-bool", lambda L: L.ones(3, dtype=L.bool).cumsum_(0), NotImplementedError, None),
    ("cumsum-bool-dtype", lambda L: L.ones(3, 2).cumsum(0, dtype=L.bool), NotImplementedError, None),
    ("cumsum_-expanded", lambda L: L.ones(3).expand(2, 3).cumsum_(0), RuntimeError, None),
    ("cumsum-out-dtype", lambda L: L.cumsum(L.ones(3), 0, dtype=L.float64, out=L.empty(0)), RuntimeError, None),
    ("cummax-dim", lambda L: L.ones(3).cummax(1), IndexError, None),
    ("cummax-out-dtype", lambda L: L.cummax(L.ones(3), 0, out=(L.empty(0), L.empty(0))), RuntimeError, None),
    ("median-bool", lambda L: L.ones(3, dtype=L.bool).median(), NotImplementedError, None),
    ("median-empty-dim", lambda L: L.ones(0, 3).median(0), IndexError, None),
    ("median-out-no-dim", lambda L: L.median(L.ones(3), out=L.empty(0)), TypeError, None),
    ("mode-empty", lambda L: L.ones(0).mode(), IndexError, None),
]



# ---------------------------------------------------------------------------
# convolution and im2col / col2im (csrc/ops/conv.c). References:
# direct loops over window positions in float64; 1-d convolutions are 2-d
# ones of height 1. torch's own internals (aten im2col / col2im /
# convolution / convolution_backward) are the torch side.
def _np_window_geometry(H, W, k, d, p, s):
    oh = (H + 2 * p[0] - d[0] * (k[0] - 1) - 1) // s[0] + 1
    ow = (W + 2 * p[1] - d[1] * (k[1] - 1) - 1) // s[1] + 1
    return oh, ow


def np_im2col(x, k, d, p, s):
    """(N, C, H, W) or (C, H, W) -> (N, C*kh*kw, L): one loop per window element."""
    x = np.asarray(x, np.float64)
    batched = x.ndim == 4
    x = x if batched else x[None]
    N, C, H, W = x.shape
    oh, ow = _np_window_geometry(H, W, k, d, p, s)
    xp = np.pad(x, ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])))
    out = np.zeros((N, C * k[0] * k[1], oh * ow))
    for c in range(C):
        for ki in range(k[0]):
            for kj in range(k[1]):
                for oy in range(oh):
                    for ox in range(ow):
                        out[:, (c * k[0] + ki) * k[1] + kj, oy * ow + ox] = \
                            xp[:, c, oy * s[0] + ki * d[0], ox * s[1] + kj * d[1]]
    return out if batched else out[0]


def np_col2im(cols, size, k, d, p, s):
    """(N, C*kh*kw, L) -> (N, C, *size): every column element added where it came from."""
    cols = np.asarray(cols, np.float64)
    batched = cols.ndim == 3
    cols = cols if batched else cols[None]
    N, CK, L = cols.shape
    C = CK // (k[0] * k[1])
    oh, ow = _np_window_geometry(size[0], size[1], k, d, p, s)
    xp = np.zeros((N, C, size[0] + 2 * p[0], size[1] + 2 * p[1]))
    for c in range(C):
        for ki in range(k[0]):
            for kj in range(k[1]):
                for oy in range(oh):
                    for ox in range(ow):
                        xp[:, c, oy * s[0] + ki * d[0], ox * s[1] + kj * d[1]] += \
                            cols[:, (c * k[0] + ki) * k[1] + kj, oy * ow + ox]
    out = xp[:, :, p[0]:p[0] + size[0], p[1]:p[1] + size[1]]
    return out if batched else out[0]


def _np_conv_args(x, w, stride, padding, dilation):
    """as 2-d: x (N, C, H, W), w (O, Cg, kh, kw) and pairs; one: whether it was 1-d"""
    x, w = np.asarray(x, np.float64), np.asarray(w, np.float64)
    one = w.ndim == 3
    pair = lambda v, fill: ([fill] + list(v)) if one else list(v) * (2 if len(v) == 1 else 1)  # noqa: E731
    if one:
        x, w = x[:, :, None], w[:, :, None]
    return x, w, pair(stride, 1), pair(padding, 0), pair(dilation, 1), one


def np_conv(x, w, b, stride, padding, dilation, groups):
    x, w, s, p, d, one = _np_conv_args(x, w, stride, padding, dilation)
    N, C, H, W = x.shape
    O, Cg, kh, kw = w.shape
    oh, ow = _np_window_geometry(H, W, (kh, kw), d, p, s)
    xp = np.pad(x, ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])))
    out = np.zeros((N, O, oh, ow))
    Og = O // groups
    for o in range(O):
        g = o // Og
        for i in range(oh):
            for j in range(ow):
                patch = xp[:, g * Cg:(g + 1) * Cg, i * s[0]:i * s[0] + d[0] * (kh - 1) + 1:d[0],
                           j * s[1]:j * s[1] + d[1] * (kw - 1) + 1:d[1]]
                out[:, o, i, j] = (patch * w[o]).sum((1, 2, 3))
    if b is not None:
        out += np.asarray(b, np.float64).reshape(1, -1, 1, 1)
    return out[:, :, 0] if one else out


def np_conv_backward(gy, x, w, stride, padding, dilation, groups, mask=(1, 1, 1)):
    """(gx, gw, gb) of np_conv for the upstream gradient gy, by the same window loop."""
    x, w, s, p, d, one = _np_conv_args(x, w, stride, padding, dilation)
    gy = np.asarray(gy, np.float64)
    gy = gy[:, :, None] if one else gy
    N, C, H, W = x.shape
    O, Cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])))
    gxp, gw = np.zeros_like(xp), np.zeros_like(w)
    Og = O // groups
    for i in range(gy.shape[2]):
        for j in range(gy.shape[3]):
            rows = slice(i * s[0], i * s[0] + d[0] * (kh - 1) + 1, d[0])
            cols = slice(j * s[1], j * s[1] + d[1] * (kw - 1) + 1, d[1])
            for g in range(groups):
                chans, outs = slice(g * Cg, (g + 1) * Cg), slice(g * Og, (g + 1) * Og)
                gij = gy[:, outs, i, j]  # (N, Og)
                gw[outs] += np.einsum("no,nckl->ockl", gij, xp[:, chans, rows, cols])
                gxp[:, chans, rows, cols] += np.einsum("no,ockl->nckl", gij, w[outs])
    gx = gxp[:, :, p[0]:p[0] + H, p[1]:p[1] + W]
    gb = gy.sum((0, 2, 3))
    if one:
        gx, gw = gx[:, :, 0], gw[:, :, 0]
    empty = np.zeros(0)
    return tuple(v if m else empty for v, m in zip((gx, gw, gb), mask))


_CONV_TORCH = {
    "_im2col": lambda T: T._C._nn.im2col,
    "_col2im": lambda T: T._C._nn.col2im,
    "_convolution": lambda T: lambda x, w, b, s, p, d, g: T.convolution(x, w, b, s, p, d, False, [0] * len(s), g),
    "_convolution_backward": lambda T: lambda gy, x, w, s, p, d, g, m: T.ops.aten.convolution_backward(
        gy, x, w, [w.shape[0]], s, p, d, False, [0] * len(s), g, [bool(v) for v in m]),
}


def _conv_fn(name):
    return lambda L: getattr(L._C, name) if hasattr(L._C, name) else _CONV_TORCH[name](L)


# (input shape, weight shape, bias?, stride, padding, dilation, groups)
CONV_CASES = [((2, 4, 6, 5), (6, 2, 3, 2), True, [1, 1], [1, 0], [1, 1], 2),
              ((2, 3, 7, 6), (4, 3, 2, 3), False, [2, 1], [0, 2], [2, 1], 1),
              ((2, 4, 3, 3), (5, 4, 1, 1), True, [1, 1], [0, 0], [1, 1], 1),
              ((2, 4, 9), (4, 4, 3), True, [2], [1], [1], 1),
              ((1, 2, 6), (4, 1, 2), False, [1], [2], [3], 2)]
# (input shape, kernel, dilation, padding, stride)
WINDOW_CASES = [((2, 3, 5, 4), [2, 2], [1, 1], [1, 0], [1, 2]),
                ((3, 6, 7), [3, 2], [2, 1], [1, 1], [2, 1]),
                ((0, 2, 4, 4), [2, 2], [1, 1], [0, 0], [1, 1])]


def _conv_samples(op, dtype, layout):
    rng = rng_for(op.name, dtype, layout)
    t = lambda shape, lay=True: TS(gen_values(rng, dtype, shape, (-2, 2)), dtype, lay)  # noqa: E731
    out = []
    if op.name in ("_im2col", "_col2im"):
        for shape, k, d, p, s in WINDOW_CASES:
            if op.name == "_im2col":
                out.append(Sample((t(shape), k, d, p, s)))
                continue
            cols = np_im2col(np.zeros(shape), k, d, p, s)
            out.append(Sample((t(cols.shape), list(shape[-2:]), k, d, p, s)))
        return out
    for xs, ws, bias, s, p, d, g in CONV_CASES:
        if not is_float(dtype) and max(d) > 1:
            continue  # torch has no dilated integer convolution ("slow_conv_dilated<>" not implemented)
        x, w = t(xs), t(ws)
        if op.name == "_convolution":
            out.append(Sample((x, w, t(ws[:1], False) if bias else None, s, p, d, g)))
        else:
            ys = np_conv(np.zeros(xs), np.zeros(ws), None, s, p, d, g).shape
            out.append(Sample((t(ys), x, w, s, p, d, g, [1, 1, 1])))
    return out


_CONV_TOL = {"float16": (1e-2, 2e-2), "bfloat16": (5e-2, 1e-1)}
# torch's im2col / col2im take bool too (col2im's sum then is an `or`)
OPS += [OpInfo("_im2col", fn=_conv_fn("_im2col"), ref=np_im2col, dtypes=FLOATS + ("bool",), variants="F", kind="conv",
               samples=_conv_samples, layouts=("contig", "T", "slice"), tol=_CONV_TOL),
        OpInfo("_col2im", fn=_conv_fn("_col2im"), ref=np_col2im, dtypes=FLOATS + ("bool",), variants="F", kind="conv",
               samples=_conv_samples, layouts=("contig", "T", "slice"), tol=_CONV_TOL),
        # integer convolutions exist in torch (not bool); uint8/int8 wrap around: only int32/int64 here
        OpInfo("_convolution", fn=_conv_fn("_convolution"), ref=np_conv, dtypes=FLOATS + ("int32", "int64"),
               unsupported=None, variants="F", kind="conv", samples=_conv_samples,
               layouts=("contig", "T", "slice"), tol=_CONV_TOL),
        OpInfo("_convolution_backward", fn=_conv_fn("_convolution_backward"), ref=np_conv_backward,
               dtypes=FLOATS, unsupported=None, variants="F", kind="conv", samples=_conv_samples,
               layouts=("contig", "T", "slice"), tol=_CONV_TOL)]
OPS_BY_NAME.update({op.name: op for op in OPS[-4:]})


def np_conv_transpose(x, w, b, stride, padding, output_padding, dilation, groups):
    """y[n, g*Og + o, i*s - p + k*d] += x[n, g*Cg + c, i] * w[g*Cg + c, o, k], by loops over kernel taps"""
    import itertools
    n = x.ndim - 2
    s, p, op, d = ([v[0]] * n if len(v) == 1 else list(v) for v in (stride, padding, output_padding, dilation))
    Og, ks, Cg = w.shape[1], w.shape[2:], x.shape[1] // groups
    full = [(i - 1) * s[a] + d[a] * (ks[a] - 1) + 1 + op[a] for a, i in enumerate(x.shape[2:])]
    y = np.zeros((x.shape[0], Og * groups, *full), np.result_type(x, w))
    for g in range(groups):
        xg, wg = x[:, g * Cg:(g + 1) * Cg], w[g * Cg:(g + 1) * Cg]
        for tap in itertools.product(*[range(k) for k in ks]):
            sl = tuple(slice(t * d[a], t * d[a] + s[a] * (x.shape[2 + a] - 1) + 1, s[a]) for a, t in enumerate(tap))
            y[(slice(None), slice(g * Og, (g + 1) * Og)) + sl] += np.einsum("nc...,co->no...", xg,
                                                                              wg[(slice(None), slice(None)) + tap])
    y = y[(slice(None), slice(None)) + tuple(slice(p[a], full[a] - p[a]) for a in range(n))]
    return y + (0 if b is None else b.reshape((1, -1) + (1,) * n))


# (input shape, weight shape, bias?, stride, padding, output_padding, dilation, groups)
CONV_T_CASES = [((2, 4, 4, 3), (4, 3, 3, 2), True, [2, 1], [1, 0], [1, 0], [1, 1], 2),
                ((2, 3, 5), (3, 2, 3), False, [1], [1], [1], [2], 1),
                ((1, 2, 3, 2, 2), (2, 2, 2, 1, 2), True, [2], [0], [1], [1], 1)]


def _conv_t_samples(op, dtype, layout):
    rng = rng_for(op.name, dtype, layout)
    t = lambda shape, lay=True: TS(gen_values(rng, dtype, shape, (-2, 2)), dtype, lay)  # noqa: E731
    return [Sample((t(xs), t(ws), t((ws[1] * g,), False) if bias else None, s, p, op_, d, g))
            for xs, ws, bias, s, p, op_, d, g in CONV_T_CASES]


_CONV_TORCH["_convolution_transpose"] = lambda T: lambda x, w, b, s, p, op, d, g: T.convolution(
    x, w, b, s, p, d, True, op, g)
OPS += [OpInfo("_convolution_transpose", fn=_conv_fn("_convolution_transpose"), ref=np_conv_transpose,
               dtypes=FLOATS, unsupported=None, variants="F", kind="conv", samples=_conv_t_samples,
               layouts=("contig", "T", "slice"), tol=_CONV_TOL)]
OPS_BY_NAME[OPS[-1].name] = OPS[-1]


# ---------------------------------------------------------------------------
# complex dtypes: the elementwise entries torch supports complex64 / complex128 for. Their
# references are the entries' own NumPy functions, which take complex arrays (np.sign is
# z/|z| for complex input, torch's sgn); the random points have both parts in the entry's
# domain, off the branch cuts of the inverse functions. Left out: abs (a real result: its
# own test in test_complex.py), div (rounding_mode refuses complex), the orderings, and the
# predicates (their reference reads real parts; test_complex.py checks them on NaN / inf parts).
COMPLEX_EW = ("neg", "negative", "positive", "sgn", "square", "reciprocal", "exp", "exp2", "expm1", "log",
              "log2", "log10", "log1p", "sqrt", "rsqrt", "sin", "cos", "tan", "asin", "acos", "atan", "sinh",
              "cosh", "tanh", "asinh", "acosh", "atanh", "sigmoid", "add", "sub",
              "rsub", "mul", "true_divide", "eq", "ne")
for _n in COMPLEX_EW:
    OPS_BY_NAME[_n].complex_dtypes = COMPLEX
