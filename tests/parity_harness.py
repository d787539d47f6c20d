"""Differential parity harness: run one call on ember and on torch, report every difference.

Not collected by pytest (no test_ prefix). Two uses:
- `diff(fn, *specs)` / `assert_parity(torch, fn, *specs)` from tests: each spec
  (`T(values, dtype, layout)`, or a plain Python value) is built the same way
  in both libraries, `fn(lib, *args)` runs on both, and the results must agree
  in type, dtype, shape and values (NaN-aware), or both must raise the same
  exception class.
- `python tests/parity_harness.py [sweep ...]` (with torch installed) runs the
  sweeps below over dtypes, 0-d / empty / non-contiguous inputs, scalars,
  dims and keyword variants, and prints one line per mismatch.
"""
import math
import sys
import warnings

import numpy as np

import ember

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64",
          "float16", "bfloat16", "float32", "float64"]
FLOATS = ["float16", "bfloat16", "float32", "float64"]
INTS = ["uint8", "int8", "int16", "int32", "int64"]


class T:
    """A tensor spec: values (anything np.asarray takes), dtype name, layout.

    layout: "c" contiguous, "t" transposed view of the transposed data (same
    values, non-contiguous), "s" every other element of a doubled last dim.
    """

    def __init__(self, values, dtype="float32", layout="c", requires_grad=False):
        self.values = np.asarray(values)
        self.dtype, self.layout, self.requires_grad = dtype, layout, requires_grad

    def build(self, lib):
        v = self.values
        if self.layout == "t" and v.ndim >= 2:
            base = lib.tensor(np.ascontiguousarray(np.swapaxes(v, -1, -2)).astype(np.float64))
            t = base.to(getattr(lib, self.dtype)).transpose(-1, -2)
        elif self.layout == "s" and v.ndim >= 1:
            doubled = np.repeat(v.astype(np.float64), 2, axis=-1)
            t = lib.tensor(doubled).to(getattr(lib, self.dtype))[..., ::2]
        else:
            t = lib.tensor(v.astype(np.float64)).to(getattr(lib, self.dtype))
        if self.requires_grad:
            t.requires_grad_(True)
        return t

    def __repr__(self):
        lay = "" if self.layout == "c" else f",{self.layout}"
        return f"T{tuple(self.values.shape)}:{self.dtype}{lay}"


class DT:
    """A dtype argument: the same name in both libraries."""

    def __init__(self, name):
        self.name = name

    def build(self, lib):
        return getattr(lib, self.name)

    def __repr__(self):
        return self.name


def build(lib, spec):
    if isinstance(spec, (T, DT)):
        return spec.build(lib)
    if isinstance(spec, list):
        return [build(lib, s) for s in spec]
    if isinstance(spec, tuple):
        return tuple(build(lib, s) for s in spec)
    if isinstance(spec, dict):
        return {k: build(lib, v) for k, v in spec.items()}
    return spec


def _name(dtype):
    return str(dtype).split(".")[-1]


def _np(t):
    t = t.detach()
    if _name(t.dtype) in ("float16", "bfloat16"):
        t = t.double()
    return t.cpu().numpy()


def compare(got, want, atol=1e-5, rtol=1e-4, where="result"):
    """None when `got` (ember) matches `want` (torch), else a one-line reason."""
    if type(want).__name__ in ("Tensor", "Parameter") or (
            hasattr(want, "dtype") and hasattr(want, "shape") and not isinstance(want, np.ndarray)):
        if not isinstance(got, ember.Tensor):
            return f"{where}: got {type(got).__name__}, torch gives a tensor"
        if _name(got.dtype) != _name(want.dtype):
            return f"{where}: dtype {_name(got.dtype)} vs torch {_name(want.dtype)}"
        if tuple(got.shape) != tuple(want.shape):
            return f"{where}: shape {tuple(got.shape)} vs torch {tuple(want.shape)}"
        g, w = _np(got), _np(want)
        if _name(want.dtype) in ("float16", "bfloat16"):
            atol, rtol = max(atol, 1e-2), max(rtol, 1e-2)
        if g.dtype.kind in "biu":
            if not np.array_equal(g, w):
                return f"{where}: values differ {g.ravel()[:6]} vs torch {w.ravel()[:6]}"
        elif not np.allclose(g, w, atol=atol, rtol=rtol, equal_nan=True):
            return f"{where}: values differ {g.ravel()[:6]} vs torch {w.ravel()[:6]}"
        return None
    if isinstance(want, (tuple, list)):
        if not isinstance(got, (tuple, list)):
            return f"{where}: got {type(got).__name__}, torch gives {type(want).__name__}"
        if len(got) != len(want):
            return f"{where}: {len(got)} items vs torch {len(want)}"
        if type(want).__name__ == "Size" and type(got).__name__ != "Size":
            return f"{where}: got {type(got).__name__}, torch gives Size"
        for i, (g, w) in enumerate(zip(got, want)):
            r = compare(g, w, atol, rtol, f"{where}[{i}]")
            if r:
                return r
        return None
    if isinstance(want, dict):
        if not isinstance(got, dict) or list(got) != list(want):
            return f"{where}: {type(got).__name__} keys {list(got)[:6] if isinstance(got, dict) else ''} " \
                   f"vs torch dict keys {list(want)[:6]}"
        for k in want:
            r = compare(got[k], want[k], atol, rtol, f"{where}[{k!r}]")
            if r:
                return r
        return None
    if type(want).__name__ == "dtype":
        return None if _name(got) == _name(want) else f"{where}: {got} vs torch {want}"
    if type(got) is not type(want):
        return f"{where}: {type(got).__name__} {got!r} vs torch {type(want).__name__} {want!r}"
    if isinstance(want, float) and math.isnan(want):
        return None if math.isnan(got) else f"{where}: {got!r} vs torch nan"
    if isinstance(want, float):
        return None if math.isclose(got, want, rel_tol=rtol, abs_tol=atol) else \
            f"{where}: {got!r} vs torch {want!r}"
    return None if got == want else f"{where}: {got!r} vs torch {want!r}"


def _run(lib, fn, specs, kwargs):
    args = build(lib, specs)
    kw = build(lib, kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(lib, *args, **kw)


def diff(torch, fn, *specs, atol=1e-5, rtol=1e-4, **kwargs):
    """None when ember agrees with torch on fn(lib, *specs, **kwargs), else the reason."""
    try:
        want = _run(torch, fn, specs, kwargs)
    except Exception as exc:  # noqa: BLE001  (ember must raise the same class)
        try:
            _run(ember, fn, specs, kwargs)
        except Exception as mine:  # noqa: BLE001
            if type(mine) is type(exc) or (type(exc).__name__ == type(mine).__name__):
                return None
            return f"raises {type(mine).__name__}({str(mine)[:80]}) vs torch " \
                   f"{type(exc).__name__}({str(exc)[:80]})"
        return f"returns, torch raises {type(exc).__name__}({str(exc)[:100]})"
    try:
        got = _run(ember, fn, specs, kwargs)
    except Exception as mine:  # noqa: BLE001
        return f"raises {type(mine).__name__}({str(mine)[:120]}), torch returns"
    try:
        return compare(got, want, atol, rtol)
    except Exception as exc:  # noqa: BLE001  (a result the comparison can't read is a mismatch too)
        return f"results not comparable: {type(exc).__name__}({exc})"


def assert_parity(torch, fn, *specs, **kwargs):
    reason = diff(torch, fn, *specs, **kwargs)
    assert reason is None, f"{specs}: {reason}"


# -- sweeps --------------------------------------------------------------------------

def _values(shape, dtype, rng, positive=False):
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype in INTS:
        lo = 0 if (dtype == "uint8" or positive) else -5
        return rng.integers(lo, 6, shape)
    v = rng.standard_normal(shape) * 2
    return np.abs(v) + 0.1 if positive else v


def tensors(rng, dtypes=DTYPES, shapes=((2, 3), (), (0, 3), (3, 1)), layouts=True, positive=False):
    """Specs over dtypes x shapes (+ transposed and stepped layouts for 2-d)."""
    out = []
    for dt in dtypes:
        for shape in shapes:
            out.append(T(_values(shape, dt, rng, positive), dt))
        if layouts:
            out.append(T(_values((3, 4), dt, rng, positive), dt, "t"))
            out.append(T(_values((2, 3), dt, rng, positive), dt, "s"))
    return out


UNARY = ["abs", "neg", "sign", "sgn", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p",
         "sqrt", "rsqrt", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh",
         "asinh", "acosh", "atanh", "sigmoid", "erf", "erfc", "erfinv", "floor", "ceil", "round",
         "trunc", "frac", "reciprocal", "square", "logical_not", "bitwise_not", "isnan", "isinf",
         "isfinite", "signbit", "positive", "relu", "lgamma", "digamma", "nan_to_num", "isneginf",
         "isposinf", "i0", "sinc", "fix", "deg2rad", "rad2deg", "logit", "angle", "isreal"]
BINARY = ["add", "sub", "mul", "div", "true_divide", "floor_divide", "remainder", "fmod", "pow",
          "atan2", "maximum", "minimum", "fmax", "fmin", "eq", "ne", "lt", "le", "gt", "ge",
          "logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor",
          "bitwise_left_shift", "bitwise_right_shift", "hypot", "copysign", "nextafter", "xlogy",
          "logaddexp", "logaddexp2", "float_power", "heaviside", "gcd", "lcm", "ldexp", "isclose"]
OPERATORS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
             "/": lambda a, b: a / b, "//": lambda a, b: a // b, "%": lambda a, b: a % b,
             "**": lambda a, b: a ** b, "&": lambda a, b: a & b, "|": lambda a, b: a | b,
             "^": lambda a, b: a ^ b, "<<": lambda a, b: a << b, ">>": lambda a, b: a >> b,
             "<": lambda a, b: a < b, "==": lambda a, b: a == b}


def sweep_unary(torch, rng):
    for name in UNARY:
        for x in tensors(rng):
            yield f"{name}({x})", diff(torch, lambda L, a, n=name: getattr(L, n)(a), x)


def sweep_binary(torch, rng):
    scalars = [2, 2.5, True, -1]
    for name in BINARY:
        for dt in DTYPES:
            a = T(_values((2, 3), dt, rng), dt)
            for dt2 in DTYPES:
                b = T(_values((3,), dt2, rng), dt2)
                yield f"{name}({a},{b})", diff(torch, lambda L, x, y, n=name: getattr(L, n)(x, y), a, b)
            for s in scalars:
                yield f"{name}({a},{s!r})", diff(torch, lambda L, x, y, n=name: getattr(L, n)(x, y), a, s)
            z = T(_values((), dt, rng), dt)
            yield f"{name}({z},{a})", diff(torch, lambda L, x, y, n=name: getattr(L, n)(x, y), z, a)
    for op, f in OPERATORS.items():
        for dt in DTYPES:
            a = T(_values((2, 3), dt, rng), dt, "t" if dt != "bool" else "c")
            for s in [2, 2.5, True, -1]:
                yield f"{a} {op} {s!r}", diff(torch, lambda L, x, y, f=f: f(x, y), a, s)
                yield f"{s!r} {op} {a}", diff(torch, lambda L, x, y, f=f: f(y, x), a, s)


REDUCE = ["sum", "mean", "prod", "std", "var", "amax", "amin", "logsumexp", "nansum", "nanmean",
          "all", "any", "count_nonzero", "argmax", "argmin", "max", "min", "median", "nanmedian",
          "cumsum", "cumprod", "cummax", "cummin", "logcumsumexp", "norm", "mode", "std_mean",
          "var_mean", "aminmax"]


def sweep_reduce(torch, rng):
    for name in REDUCE:
        for x in tensors(rng, shapes=((2, 3), (), (0, 3), (2, 0))):
            yield f"{name}({x})", diff(torch, lambda L, a, n=name: getattr(L, n)(a), x)
            for dim in (0, -1, 2, -3, (0, 1)):
                yield f"{name}({x},{dim})", diff(
                    torch, lambda L, a, d=dim, n=name: getattr(L, n)(a, d), x)
                yield f"{name}({x},dim={dim},keepdim)", diff(
                    torch, lambda L, a, d=dim, n=name: getattr(L, n)(a, dim=d, keepdim=True), x)
            if name in ("sum", "mean", "prod", "cumsum", "cumprod", "nansum", "nanmean", "logsumexp"):
                for dt in ("float64", "int64", "float16", "int32"):
                    if name in ("cumsum", "cumprod", "logsumexp"):
                        g = lambda L, a, d=dt, n=name: getattr(L, n)(a, 0, dtype=getattr(L, d)) \
                            if n != "logsumexp" else getattr(L, n)(a, 0)
                    else:
                        g = lambda L, a, d=dt, n=name: getattr(L, n)(a, dtype=getattr(L, d))
                    yield f"{name}({x},dtype={dt})", diff(torch, g, x)
    for x in tensors(rng, dtypes=FLOATS + ["int64"], shapes=((2, 3),), layouts=False):
        for p in (1, 2, 0, float("inf"), -float("inf"), 3, "fro", "nuc"):
            yield f"norm({x},p={p})", diff(torch, lambda L, a, p=p: L.norm(a, p=p), x)
        for corr in (0, 1, 2):
            yield f"std({x},correction={corr})", diff(
                torch, lambda L, a, c=corr: L.std(a, dim=1, correction=c), x)
            yield f"var({x},unbiased)", diff(torch, lambda L, a: L.var(a, 1, False), x)


def sweep_shape(torch, rng):
    x = T(np.arange(24).reshape(2, 3, 4), "float32")
    xi = T(np.arange(24).reshape(2, 3, 4), "int64", "c")
    xt = T(np.arange(12).reshape(3, 4), "float32", "t")
    cases = [
        ("reshape", lambda L, a: a.reshape(4, -1)), ("reshape_bad", lambda L, a: a.reshape(5, -1)),
        ("reshape_two_neg", lambda L, a: a.reshape(-1, -1)), ("reshape_empty", lambda L, a: a.reshape(0, -1)),
        ("view_nc", lambda L, a: a.transpose(0, 1).view(-1)), ("view_dtype", lambda L, a: a.view(L.int32)),
        ("view_size", lambda L, a: a.view(L.Size([6, 4]))), ("view_bad", lambda L, a: a.view(7)),
        ("permute", lambda L, a: a.permute(2, 0, 1)), ("permute_neg", lambda L, a: a.permute(-1, 0, 1)),
        ("permute_dup", lambda L, a: a.permute(0, 0, 1)), ("permute_short", lambda L, a: a.permute(0, 1)),
        ("permute_oob", lambda L, a: a.permute(0, 1, 3)),
        ("expand", lambda L, a: a[:, :1].expand(2, 5, 4)), ("expand_neg", lambda L, a: a[:1].expand(-1, 3, 4)),
        ("expand_bad", lambda L, a: a.expand(3, 3, 4)), ("expand_fewer", lambda L, a: a.expand(3, 4)),
        ("expand_new", lambda L, a: a.expand(5, 2, 3, 4)), ("expand_as", lambda L, a: a[:1].expand_as(a)),
        ("squeeze", lambda L, a: a[:1].squeeze()), ("squeeze_d", lambda L, a: a[:1].squeeze(0)),
        ("squeeze_nd", lambda L, a: a.squeeze(1)), ("squeeze_oob", lambda L, a: a.squeeze(3)),
        ("squeeze_tuple", lambda L, a: a[:1, :1].squeeze((0, 1))),
        ("unsqueeze", lambda L, a: a.unsqueeze(-1)), ("unsqueeze3", lambda L, a: a.unsqueeze(3)),
        ("unsqueeze_oob", lambda L, a: a.unsqueeze(4)), ("unsqueeze_neg_oob", lambda L, a: a.unsqueeze(-5)),
        ("flatten", lambda L, a: a.flatten()), ("flatten_12", lambda L, a: a.flatten(1)),
        ("flatten_bad", lambda L, a: a.flatten(2, 1)), ("flatten_oob", lambda L, a: a.flatten(0, 3)),
        ("unflatten", lambda L, a: a.unflatten(2, (2, 2))), ("unflatten_neg", lambda L, a: a.unflatten(-1, (-1, 2))),
        ("unflatten_bad", lambda L, a: a.unflatten(2, (3, 2))),
        ("cat", lambda L, a: L.cat([a, a], 1)), ("cat_neg", lambda L, a: L.cat([a, a], -1)),
        ("cat_oob", lambda L, a: L.cat([a, a], 3)), ("cat_bad", lambda L, a: L.cat([a, a[:, :2]], 0)),
        ("cat_empty_list", lambda L, a: L.cat([])), ("cat_mixed", lambda L, a: L.cat([a, a.double()], 0)),
        ("cat_int_float", lambda L, a: L.cat([a.long(), a], 0)),
        ("cat_legacy_empty", lambda L, a: L.cat([a, L.tensor([])], 0)),
        ("cat_0d", lambda L, a: L.cat([a[0, 0, 0], a[0, 0, 0]])), ("cat_rank", lambda L, a: L.cat([a, a[0]])),
        ("stack", lambda L, a: L.stack([a, a], 3)), ("stack_oob", lambda L, a: L.stack([a, a], 4)),
        ("stack_neg", lambda L, a: L.stack([a, a], -1)), ("stack_bad", lambda L, a: L.stack([a, a[:1]])),
        ("stack_empty", lambda L, a: L.stack([])), ("stack_mixed", lambda L, a: L.stack([a.int(), a])),
        ("hstack", lambda L, a: L.hstack([a, a])), ("vstack", lambda L, a: L.vstack([a[0], a[0]])),
        ("dstack", lambda L, a: L.dstack([a[0], a[0]])),
        ("column_stack", lambda L, a: L.column_stack([a[0, 0], a[0, 0]])),
        ("split", lambda L, a: a.split(2, 2)), ("split_list", lambda L, a: a.split([1, 3], -1)),
        ("split_badlist", lambda L, a: a.split([1, 2], -1)), ("split_zero", lambda L, a: a.split(0, 2)),
        ("chunk", lambda L, a: a.chunk(3, 2)), ("chunk_zero", lambda L, a: a.chunk(0)),
        ("tensor_split", lambda L, a: L.tensor_split(a, 3, 2)),
        ("tensor_split_idx", lambda L, a: L.tensor_split(a, [1, 3], 2)),
        ("unbind", lambda L, a: a.unbind(1)), ("unbind_oob", lambda L, a: a.unbind(3)),
        ("narrow", lambda L, a: a.narrow(2, 1, 2)), ("narrow_bad", lambda L, a: a.narrow(2, 3, 2)),
        ("narrow_neg", lambda L, a: a.narrow(-1, -2, 2)),
        ("movedim", lambda L, a: a.movedim(0, -1)), ("moveaxis", lambda L, a: L.moveaxis(a, (0, 1), (1, 0))),
        ("transpose_oob", lambda L, a: a.transpose(0, 3)), ("t_3d", lambda L, a: a.t()),
        ("T_3d", lambda L, a: a.T), ("mT", lambda L, a: a.mT), ("swapaxes", lambda L, a: a.swapaxes(0, 2)),
        ("flip", lambda L, a: a.flip(0, 2)), ("flip_dup", lambda L, a: a.flip(0, 0)),
        ("roll", lambda L, a: a.roll(1, 2)), ("roll_flat", lambda L, a: a.roll(5)),
        ("roll_multi", lambda L, a: a.roll((1, 2), (0, 2))), ("rot90", lambda L, a: a.rot90(1, (1, 2))),
        ("repeat", lambda L, a: a.repeat(2, 1, 1)), ("repeat_more", lambda L, a: a.repeat(2, 1, 1, 2)),
        ("repeat_fewer", lambda L, a: a.repeat(2, 1)), ("repeat_interleave", lambda L, a: a.repeat_interleave(2, 1)),
        ("repeat_interleave_flat", lambda L, a: a.repeat_interleave(2)),
        ("tile", lambda L, a: a.tile(2)), ("tril", lambda L, a: a.tril(1)), ("triu", lambda L, a: a.triu(-1)),
        ("diagonal", lambda L, a: a.diagonal(0, 1, 2)), ("diagonal_off", lambda L, a: a.diagonal(1, -1, -2)),
        ("contiguous", lambda L, a: a.transpose(0, 2).contiguous().stride()),
        ("stride", lambda L, a: a.stride(1)),
        ("size_neg", lambda L, a: a.size(-1)),
        ("size_oob", lambda L, a: a.size(3)),
        ("shape", lambda L, a: a.shape), ("dim", lambda L, a: a.dim()), ("numel", lambda L, a: a.numel()),
        ("nelement", lambda L, a: a.nelement()), ("element_size", lambda L, a: a.element_size()),
        ("ravel_nc", lambda L, a: a.transpose(0, 1).ravel()), ("view_as", lambda L, a: a.view_as(a)),
        ("atleast_3d", lambda L, a: L.atleast_3d(a[0, 0])),
        ("broadcast_to", lambda L, a: L.broadcast_to(a[0, :1], (2, 3, 4))),
        ("broadcast_tensors", lambda L, a: L.broadcast_tensors(a, a[0])),
        ("broadcast_tensors_bad", lambda L, a: L.broadcast_tensors(a, a[0, :2])),
        ("broadcast_shapes", lambda L, a: L.broadcast_shapes((2, 1), (3,))),
        ("add_bcast_bad", lambda L, a: a + a[:, :2]), ("unfold", lambda L, a: a.unfold(2, 2, 1)),
        ("select", lambda L, a: a.select(1, -1)), ("select_oob", lambda L, a: a.select(1, 3)),
        ("index_select", lambda L, a: a.index_select(1, L.tensor([2, 0]))),
        ("index_select_oob", lambda L, a: a.index_select(1, L.tensor([3]))),
        ("index_select_int32", lambda L, a: a.index_select(1, L.tensor([1], dtype=L.int32))),
        ("index_select_float", lambda L, a: a.index_select(1, L.tensor([1.0]))),
        ("index_select_2d", lambda L, a: a.index_select(1, L.tensor([[1]]))),
        ("gather", lambda L, a: a.gather(2, L.tensor([[[0, 3]] * 3] * 2))),
        ("gather_oob", lambda L, a: a.gather(2, L.tensor([[[0, 4]] * 3] * 2))),
        ("gather_rank", lambda L, a: a.gather(2, L.tensor([0]))),
        ("gather_int32", lambda L, a: a.gather(2, L.tensor([[[0]]], dtype=L.int32))),
        ("scatter", lambda L, a: a.scatter(2, L.tensor([[[0, 3]] * 3] * 2), 9.0)),
        ("scatter_src", lambda L, a: a.scatter(1, L.tensor([[[0, 1, 2, 0]]]), a)),
        ("scatter_reduce", lambda L, a: a.scatter(1, L.tensor([[[0, 1, 2, 0]]]), a, reduce="add")),
        ("scatter_add", lambda L, a: a.scatter_add(1, L.tensor([[[0, 1, 2, 0]]]), a)),
        ("scatter_oob", lambda L, a: a.scatter(1, L.tensor([[[5]]]), 1.0)),
        ("scatter_dtype", lambda L, a: a.scatter(1, L.tensor([[[0]]]), a.double())),
        ("scatter_reduce_amax", lambda L, a: a.scatter_reduce(1, L.tensor([[[0, 1, 2, 0]]]), a, "amax")),
        ("scatter_reduce_mean", lambda L, a: a.scatter_reduce(1, L.tensor([[[0, 1, 2, 0]]]), a, "mean", include_self=False)),
        ("masked_fill", lambda L, a: a.masked_fill(a > 5, 0.5)),
        ("masked_fill_t", lambda L, a: a.masked_fill(a > 5, L.tensor(2.0))),
        ("masked_fill_nonbool", lambda L, a: a.masked_fill(a.long(), 0.5)),
        ("masked_fill_bcast", lambda L, a: a.masked_fill(L.tensor([True, False, True, False]), 1)),
        ("masked_fill_bad", lambda L, a: a.masked_fill(L.tensor([True, False]), 1)),
        ("masked_fill_1d_t", lambda L, a: a.masked_fill(a > 5, L.tensor([2.0]))),
        ("masked_select", lambda L, a: a.masked_select(a > 5)),
        ("masked_scatter", lambda L, a: a.masked_scatter(a > 20, a * 10)),
        ("where", lambda L, a: L.where(a > 5, a, 0)), ("where_int", lambda L, a: L.where(a > 5, 1, 0)),
        ("where_float_scalar", lambda L, a: L.where(a > 5, 1.5, 0)),
        ("where_mixed", lambda L, a: L.where(a > 5, a.long(), a.double())),
        ("where_int_fl", lambda L, a: L.where(a > 5, a.long(), 2.5)), ("where_one", lambda L, a: L.where(a > 20)),
        ("where_nonbool", lambda L, a: L.where(a, a, a)), ("where_bad", lambda L, a: L.where(a[:, :2] > 5, a, a)),
        ("take", lambda L, a: a.take(L.tensor([0, -1, 5]))), ("take_oob", lambda L, a: a.take(L.tensor([24]))),
        ("take_along_dim", lambda L, a: L.take_along_dim(a, L.tensor([[[0]]]), 2)),
        ("take_along_dim_flat", lambda L, a: L.take_along_dim(a, L.tensor([3, 1]))),
        ("nonzero", lambda L, a: (a > 20).nonzero()), ("nonzero_tuple", lambda L, a: (a > 20).nonzero(as_tuple=True)),
        ("argwhere", lambda L, a: L.argwhere(a > 20)),
        ("index_add", lambda L, a: a.index_add(1, L.tensor([0, 0]), a[:, :2])),
        ("index_fill", lambda L, a: a.index_fill(2, L.tensor([0, 1]), -1)),
        ("index_copy", lambda L, a: a.index_copy(1, L.tensor([2, 0]), a[:, :2])),
        ("index_put", lambda L, a: a.index_put((L.tensor([0]),), L.tensor(1.0))),
        ("index_put_acc", lambda L, a: a.index_put((L.tensor([0, 0]),), L.tensor(1.0), accumulate=True)),
        ("sort", lambda L, a: a.sort(1, descending=True)), ("argsort", lambda L, a: a.argsort(-1)),
        ("topk", lambda L, a: a.topk(2, 1)),
        ("topk_bad", lambda L, a: a.topk(5, 1)),
        ("kthvalue", lambda L, a: a.kthvalue(2, 1)),
        ("unique", lambda L, a: L.unique(a.long() % 3)),
        ("unique_inv", lambda L, a: L.unique(a.long() % 3, return_inverse=True, return_counts=True)),
        ("unique_consecutive", lambda L, a: L.unique_consecutive(a.long() // 5)),
        ("searchsorted", lambda L, a: L.searchsorted(a[0, 0], L.tensor([1.5, 9.0]))),
        ("bucketize", lambda L, a: L.bucketize(a, L.tensor([1.0, 10.0]))),
        ("clamp", lambda L, a: a.clamp(2, 5)), ("clamp_none", lambda L, a: a.clamp()),
        ("clamp_t", lambda L, a: a.clamp(min=L.tensor(2.0))), ("clamp_int", lambda L, a: a.long().clamp(2.5)),
        ("clamp_minmax", lambda L, a: a.clamp(5, 2)), ("clip", lambda L, a: a.clip(max=3)),
        ("lerp", lambda L, a: a.lerp(a * 2, 0.5)), ("addcmul", lambda L, a: a.addcmul(a, a, value=2)),
        ("addcdiv", lambda L, a: a.addcdiv(a, a + 1, value=2)),
        ("addcdiv_int", lambda L, a: a.long().addcdiv(a.long(), a.long())),
        ("diff", lambda L, a: a.diff(dim=1)), ("outer", lambda L, a: L.outer(a[0, 0], a[0, 1])),
        ("matmul_bad", lambda L, a: a @ a),
        ("mm_3d", lambda L, a: L.mm(a, a)),
        ("matmul", lambda L, a: a @ a.transpose(1, 2)),
        ("matmul_int_float", lambda L, a: a.long() @ a.transpose(1, 2)),
        ("bmm", lambda L, a: L.bmm(a, a.transpose(1, 2))),
        ("dot", lambda L, a: L.dot(a[0, 0], a[0, 1])), ("dot_mixed", lambda L, a: L.dot(a[0, 0], a[0, 1].double())),
        ("mv", lambda L, a: L.mv(a[0], a[0, 0])), ("einsum", lambda L, a: L.einsum("bij,bkj->bik", a, a)),
        ("tensordot", lambda L, a: L.tensordot(a, a, dims=([1, 2], [1, 2]))), ("kron", lambda L, a: L.kron(a[0], a[1])),
        ("trace", lambda L, a: a[0].trace()), ("cross", lambda L, a: L.cross(a[:, :, :3], a[:, :, 1:], dim=-1)),
        ("cdist", lambda L, a: L.cdist(a, a)), ("cumsum_noarg", lambda L, a: a.cumsum()),
    ]
    for name, f in cases:
        for spec in (x, xi):
            yield f"{name}({spec})", diff(torch, f, spec)
    yield "t_nc", diff(torch, lambda L, a: a.t().view(-1), xt)


def sweep_index(torch, rng):
    x = T(np.arange(24).reshape(2, 3, 4), "float32")
    keys = [0, -1, 2, -3, (0, 1), (0, 1, 2, 3), slice(None, None, 2), slice(5, 10), slice(None, None, -1),
            None, Ellipsis, (Ellipsis, 0), (Ellipsis, None), (0, Ellipsis, 0), (Ellipsis, Ellipsis),
            (None, 0, None), True, False, [0, 1], [[0, 1]], [True, False], [0, 5], (slice(None), [0, 2]),
            ([0, 1], [0, 2]), ([0, 1], slice(None), [0, 2]), ([0], [0, 1, 2]), ([0, 1], [0, 1, 2]),
            "idx_tensor", "bool_mask", "bool_mask_bad", "idx_float", "idx_0d", "idx_empty", "idx_int32",
            "idx_uint8", 2.0, (1, 1.0), "bool_0d", slice(0, 2, 0), (0, "idx_tensor", 0)]

    def key_for(L, k):
        table = {"idx_tensor": L.tensor([1, 0, 1]), "bool_mask": L.tensor([True, False]),
                 "bool_mask_bad": L.tensor([True, False, True]), "idx_float": L.tensor([0.0]),
                 "idx_0d": L.tensor(1), "idx_empty": L.tensor([], dtype=L.long), "idx_int32": L.tensor([1], dtype=L.int32),
                 "idx_uint8": L.tensor([1, 0], dtype=L.uint8), "bool_0d": L.tensor(True)}
        if isinstance(k, tuple):
            return tuple(key_for(L, i) for i in k)
        return table.get(k, k) if isinstance(k, str) else k

    for k in keys:
        yield f"x[{k!r}]", diff(torch, lambda L, a, k=k: a[key_for(L, k)], x)
        yield f"x[{k!r}] = 7", diff(torch, lambda L, a, k=k: a.__setitem__(key_for(L, k), 7) or a, x)
        yield f"x[{k!r}] = t", diff(torch, lambda L, a, k=k: a.__setitem__(key_for(L, k), L.tensor(7.0, dtype=L.float64)) or a, x)
    yield "setitem_shape_bad", diff(torch, lambda L, a: a.__setitem__(0, L.ones(4, 3)) or a, x)
    yield "setitem_bcast", diff(torch, lambda L, a: a.__setitem__(0, L.ones(4)) or a, x)
    yield "setitem_int_into_long", diff(torch, lambda L, a: a.long().__setitem__(0, 2.7), x)
    yield "0d[None]", diff(torch, lambda L, a: a[0, 0, 0][None], x)
    yield "0d[0]", diff(torch, lambda L, a: a[0, 0, 0][0], x)
    yield "0d[...]", diff(torch, lambda L, a: a[0, 0, 0][...], x)
    yield "0d[mask]", diff(torch, lambda L, a: a[0, 0, 0][L.tensor(True)], x)
    yield "item_multi", diff(torch, lambda L, a: a.item(), x)
    yield "int_multi", diff(torch, lambda L, a: int(a), x)
    yield "float_1elem", diff(torch, lambda L, a: float(a[0, 0, :1]), x)
    yield "bool_multi", diff(torch, lambda L, a: bool(a), x)
    yield "len_0d", diff(torch, lambda L, a: len(a[0, 0, 0]), x)
    yield "iter_0d", diff(torch, lambda L, a: list(a[0, 0, 0]), x)
    yield "index_int_float_tensor", diff(torch, lambda L, a: a[L.tensor(1.0)], x)
    yield "tolist", diff(torch, lambda L, a: a.tolist(), x)


def sweep_factory(torch, rng):
    cases = [
        ("tensor_int", lambda L: L.tensor([1, 2])), ("tensor_float", lambda L: L.tensor([1, 2.0])),
        ("tensor_bool", lambda L: L.tensor([True, False])), ("tensor_mixed_bool", lambda L: L.tensor([True, 2])),
        ("tensor_empty", lambda L: L.tensor([])), ("tensor_scalar", lambda L: L.tensor(3)),
        ("tensor_ragged", lambda L: L.tensor([[1, 2], [3]])), ("tensor_str", lambda L: L.tensor("a")),
        ("tensor_none", lambda L: L.tensor(None)), ("tensor_big", lambda L: L.tensor(2 ** 63)),
        ("tensor_np_f32", lambda L: L.tensor(np.float32(1.5))),
        ("tensor_np_i32", lambda L: L.tensor(np.array([1], np.int32))),
        ("tensor_np_u16", lambda L: L.tensor(np.array([1], np.uint16))),
        ("tensor_nested_t", lambda L: L.tensor([L.tensor(1), L.tensor(2)])),
        ("tensor_list_of_t", lambda L: L.tensor([L.tensor([1., 2.]), L.tensor([3., 4.])])),
        ("tensor_dtype", lambda L: L.tensor([1.7, -1.7], dtype=L.int64)),
        ("tensor_tuple", lambda L: L.tensor(((1,), (2,)))),
        ("as_tensor", lambda L: L.as_tensor([1, 2], dtype=L.float16)),
        ("from_numpy", lambda L: L.from_numpy(np.arange(3.0))),
        ("zeros", lambda L: L.zeros(2, 3)),
        ("zeros_tuple", lambda L: L.zeros((2, 3))),
        ("zeros_list", lambda L: L.zeros([2, 3])),
        ("zeros_neg", lambda L: L.zeros(-1)),
        ("zeros_float", lambda L: L.zeros(2.0)),
        ("zeros_empty", lambda L: L.zeros(())),
        ("zeros_dtype", lambda L: L.zeros(2, dtype=L.int8)), ("zeros_size", lambda L: L.zeros(L.Size([2]))),
        ("ones", lambda L: L.ones(2, 0)), ("empty", lambda L: L.empty(2, 3).shape), ("full", lambda L: L.full((2,), 3)),
        ("full_float", lambda L: L.full((2,), 3.5)), ("full_bool", lambda L: L.full((2,), True)),
        ("full_dtype", lambda L: L.full((2,), 3.7, dtype=L.int32)), ("full_int_shape", lambda L: L.full(2, 1.0)),
        ("full_tensor", lambda L: L.full((2,), L.tensor(3.0))),
        ("arange", lambda L: L.arange(5)),
        ("arange_f", lambda L: L.arange(0, 1, 0.25)),
        ("arange_f2", lambda L: L.arange(5.0)),
        ("arange_neg", lambda L: L.arange(5, 0, -2)), ("arange_zero_step", lambda L: L.arange(0, 5, 0)),
        ("arange_bad_dir", lambda L: L.arange(5, 0)), ("arange_dtype", lambda L: L.arange(5, dtype=L.float16)),
        ("arange_t", lambda L: L.arange(L.tensor(3))), ("arange_ft", lambda L: L.arange(L.tensor(3.5))),
        ("arange_empty", lambda L: L.arange(0)),
        ("arange_int_dtype_float", lambda L: L.arange(0, 1, 0.3, dtype=L.int64)),
        ("linspace", lambda L: L.linspace(0, 1, 5)), ("linspace_int", lambda L: L.linspace(0, 10, 5, dtype=L.int64)),
        ("linspace_1", lambda L: L.linspace(0, 1, 1)), ("linspace_0", lambda L: L.linspace(0, 1, 0)),
        ("linspace_neg", lambda L: L.linspace(0, 1, -1)), ("logspace", lambda L: L.logspace(0, 2, 3)),
        ("logspace_base", lambda L: L.logspace(0, 2, 3, base=2)),
        ("linspace_t", lambda L: L.linspace(L.tensor(0), L.tensor(1), 3)),
        ("eye", lambda L: L.eye(3)), ("eye_rect", lambda L: L.eye(2, 3)), ("eye_neg", lambda L: L.eye(-1)),
        ("eye_dtype", lambda L: L.eye(2, dtype=L.bool)), ("eye_0", lambda L: L.eye(0)),
        ("randint_dtype", lambda L: L.randint(0, 5, (3,)).dtype),
        ("randint_shape", lambda L: L.randint(5, (2, 3)).shape),
        ("randint_bad", lambda L: L.randint(5, 5, (2,))), ("randint_noshape", lambda L: L.randint(5, 3)),
        ("randint_d", lambda L: L.randint(0, 5, (3,), dtype=L.float32).dtype),
        ("randn_int", lambda L: L.randn(2, dtype=L.int64)),
        ("rand_shape", lambda L: L.rand(2, 3).shape), ("rand_tuple", lambda L: L.rand((2, 3)).shape),
        ("rand_neg", lambda L: L.rand(-2)),
        ("randperm", lambda L: L.randperm(5).dtype),
        ("randperm_neg", lambda L: L.randperm(-1)),
        ("normal_bad_std", lambda L: L.normal(0.0, -1.0, (2,))),
        ("normal_shape", lambda L: L.normal(L.zeros(3), 1.0).shape),
        ("zeros_like", lambda L: L.zeros_like(L.tensor([1, 2]))),
        ("ones_like_d", lambda L: L.ones_like(L.tensor([1, 2]), dtype=L.float16)),
        ("full_like", lambda L: L.full_like(L.tensor([1, 2]), 2.5)),
        ("full_like_bool", lambda L: L.full_like(L.tensor([True]), 2)),
        ("rand_like_int", lambda L: L.rand_like(L.tensor([1, 2]))),
        ("randn_like", lambda L: L.randn_like(L.zeros(2, 3)).shape),
        ("randint_like", lambda L: L.randint_like(L.zeros(2, 3), 5).dtype),
        ("empty_like", lambda L: L.empty_like(L.zeros(2, dtype=L.int8)).dtype),
        ("new_zeros", lambda L: L.tensor([1, 2]).new_zeros(3)),
        ("new_ones", lambda L: L.tensor([1.5]).new_ones((2, 1))),
        ("new_full", lambda L: L.tensor([1.5]).new_full((2,), 3)),
        ("new_tensor", lambda L: L.tensor([1.5]).new_tensor([1, 2])),
        ("new_empty", lambda L: L.tensor([1]).new_empty(2).dtype), ("tril_indices", lambda L: L.tril_indices(3, 3)),
        ("triu_indices", lambda L: L.triu_indices(3, 4, 1)),
        ("meshgrid", lambda L: L.meshgrid(L.arange(2), L.arange(3), indexing="ij")),
        ("meshgrid_xy", lambda L: L.meshgrid(L.arange(2), L.arange(3), indexing="xy")),
        ("complex_dtype", lambda L: L.get_default_dtype()), ("promote", lambda L: L.promote_types(L.uint8, L.int8)),
        ("promote_b", lambda L: L.promote_types(L.bfloat16, L.float16)),
        ("result_type", lambda L: L.result_type(L.tensor([1]), 1.0)),
        ("result_type2", lambda L: L.result_type(L.tensor(1, dtype=L.int8), L.tensor([1], dtype=L.uint8))),
        ("can_cast", lambda L: L.can_cast(L.float32, L.int32)),
        ("is_floating", lambda L: L.is_floating_point(L.tensor([1]))),
        ("is_tensor", lambda L: L.is_tensor([1])), ("numel", lambda L: L.numel(L.zeros(2, 3))),
        ("finfo", lambda L: L.finfo(L.bfloat16).eps), ("iinfo", lambda L: L.iinfo(L.int16).max),
        ("finfo_int", lambda L: L.finfo(L.int32)), ("iinfo_float", lambda L: L.iinfo(L.float32)),
        ("to_str", lambda L: L.tensor([1]).to("float64")),
        ("type_str", lambda L: L.tensor([1]).type("torch.FloatTensor")),
        ("type_noarg", lambda L: L.tensor([1.0]).type()), ("bad_dtype_arg", lambda L: L.zeros(2, dtype="float32")),
        ("polar", lambda L: L.heaviside(L.tensor([1]), L.tensor([1.0]))),
    ]
    for name, f in cases:
        yield name, diff(torch, f)


def sweep_nn(torch, rng):
    x = T(rng.standard_normal((2, 3, 4)), "float32")
    x4 = T(rng.standard_normal((2, 3, 4, 5)), "float32")
    xi = T(rng.integers(0, 3, (2, 3)), "int64")
    xb = T(rng.integers(0, 2, (2, 3)).astype(bool), "bool")
    xh = T(rng.standard_normal((2, 3, 4)), "bfloat16")
    acts = ["relu", "relu6", "elu", "selu", "celu", "gelu", "silu", "mish", "softplus", "softsign",
            "hardtanh", "hardswish", "hardsigmoid", "leaky_relu", "logsigmoid", "tanhshrink",
            "softshrink", "hardshrink", "sigmoid", "tanh", "glu", "normalize", "rrelu"]

    def fn(name, *a, **k):
        return lambda L, *t: getattr(L.nn.functional, name)(*t, *a, **k)
    for name in acts:
        for spec in (x, xi, xb, xh, T(np.float32(1.5), "float32")):
            yield f"F.{name}({spec})", diff(torch, fn(name) if name != "rrelu" else fn(name, training=False), spec)
    for name in ("softmax", "log_softmax", "softmin"):
        for spec in (x, xi, xh, T(np.float32(1.5), "float32"), T(np.zeros((0, 3)), "float32")):
            for d in (0, -1, 3):
                yield f"F.{name}({spec},{d})", diff(torch, fn(name, d), spec)
            yield f"F.{name}({spec},-1,dtype=f64)", diff(
                torch, lambda L, t, n=name: getattr(L.nn.functional, n)(t, -1, dtype=L.float64), spec)
        yield f"{name}_nodim", diff(torch, lambda L, t, n=name: getattr(L.nn.functional, n)(t), x)
    yield "gelu_tanh", diff(torch, fn("gelu", approximate="tanh"), x)
    yield "gelu_bad", diff(torch, fn("gelu", approximate="foo"), x)
    yield "glu_odd", diff(torch, fn("glu", 1), x)
    yield "glu_0d", diff(torch, fn("glu"), T(np.float32(1.5)))
    yield "leaky_inplace_int", diff(torch, fn("relu", inplace=True), xi)
    for name in ("dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout"):
        for spec in (T(np.ones(3), "float32"), T(np.ones((2, 3)), "float32"), x, x4,
                     T(np.ones((1, 2, 3, 4, 5)), "float32"), T(np.float32(1), "float32"), xi):
            yield f"F.{name}({spec})", diff(torch, lambda L, t, n=name: getattr(L.nn.functional, n)(t, 0.0).shape, spec)
            yield f"F.{name}({spec},p=1)", diff(torch, lambda L, t, n=name: getattr(L.nn.functional, n)(t, 1.0), spec)
        yield f"F.{name}(p=2)", diff(torch, lambda L, t, n=name: getattr(L.nn.functional, n)(t, 2.0), x4)
        yield f"F.{name}(eval)", diff(torch, lambda L, t, n=name: getattr(L.nn.functional, n)(t, 0.5, training=False), x4)
    # losses
    inp = T(rng.standard_normal((3, 5)), "float32")
    tgt = T(np.array([1, 0, 4]), "int64")
    prob = T(np.full((3, 5), 0.2), "float32")
    cases = [
        ("ce", lambda L, a, t: L.nn.functional.cross_entropy(a, t), inp, tgt),
        ("ce_prob", lambda L, a, t: L.nn.functional.cross_entropy(a, t), inp, prob),
        ("ce_ls", lambda L, a, t: L.nn.functional.cross_entropy(a, t, label_smoothing=0.1), inp, tgt),
        ("ce_ls_prob", lambda L, a, t: L.nn.functional.cross_entropy(a, t, label_smoothing=0.1), inp, prob),
        ("ce_ls_bad", lambda L, a, t: L.nn.functional.cross_entropy(a, t, label_smoothing=1.5), inp, tgt),
        ("ce_none", lambda L, a, t: L.nn.functional.cross_entropy(a, t, reduction="none"), inp, tgt),
        ("ce_sum", lambda L, a, t: L.nn.functional.cross_entropy(a, t, reduction="sum"), inp, tgt),
        ("ce_badred", lambda L, a, t: L.nn.functional.cross_entropy(a, t, reduction="avg"), inp, tgt),
        ("ce_ignore", lambda L, a, t: L.nn.functional.cross_entropy(a, t, ignore_index=0), inp, tgt),
        ("ce_all_ignored", lambda L, a, t: L.nn.functional.cross_entropy(a, t * 0, ignore_index=0), inp, tgt),
        ("ce_weight", lambda L, a, t: L.nn.functional.cross_entropy(a, t, weight=L.arange(5.0)), inp, tgt),
        ("ce_weight_ls", lambda L, a, t: L.nn.functional.cross_entropy(a, t, weight=L.arange(5.0), label_smoothing=0.2), inp, tgt),
        ("ce_weight_prob", lambda L, a, t: L.nn.functional.cross_entropy(a, t, weight=L.arange(5.0)), inp, prob),
        ("ce_oob", lambda L, a, t: L.nn.functional.cross_entropy(a, t + 5), inp, tgt),
        ("ce_neg", lambda L, a, t: L.nn.functional.cross_entropy(a, t - 5), inp, tgt),
        ("ce_int_target32", lambda L, a, t: L.nn.functional.cross_entropy(a, t.int()), inp, tgt),
        ("ce_float_target_1d", lambda L, a, t: L.nn.functional.cross_entropy(a, t.float()), inp, tgt),
        ("ce_shape_bad", lambda L, a, t: L.nn.functional.cross_entropy(a, t[:2]), inp, tgt),
        ("ce_1d", lambda L, a, t: L.nn.functional.cross_entropy(a[0], t[0]), inp, tgt),
        ("ce_int_input", lambda L, a, t: L.nn.functional.cross_entropy(a.long(), t), inp, tgt),
        ("ce_half", lambda L, a, t: L.nn.functional.cross_entropy(a.bfloat16(), t), inp, tgt),
        ("ce_3d", lambda L, a, t: L.nn.functional.cross_entropy(a.reshape(1, 5, 3), t.reshape(1, 3)), inp, tgt),
        ("ce_weight_bad", lambda L, a, t: L.nn.functional.cross_entropy(a, t, weight=L.ones(4)), inp, tgt),
        ("nll", lambda L, a, t: L.nn.functional.nll_loss(a, t), inp, tgt),
        ("nll_oob", lambda L, a, t: L.nn.functional.nll_loss(a, t + 5), inp, tgt),
        ("nll_prob", lambda L, a, t: L.nn.functional.nll_loss(a, t), inp, prob),
        ("mse", lambda L, a, t: L.nn.functional.mse_loss(a, t), inp, prob),
        ("mse_bcast", lambda L, a, t: L.nn.functional.mse_loss(a, t[0]), inp, prob),
        ("mse_int", lambda L, a, t: L.nn.functional.mse_loss(a, t), inp, tgt),
        ("mse_both_int", lambda L, a, t: L.nn.functional.mse_loss(t, t), inp, tgt),
        ("l1_int", lambda L, a, t: L.nn.functional.l1_loss(t, t), inp, tgt),
        ("l1_mixed", lambda L, a, t: L.nn.functional.l1_loss(a, a.double()), inp, tgt),
        ("smooth_l1", lambda L, a, t: L.nn.functional.smooth_l1_loss(a, t, beta=0.5), inp, prob),
        ("huber", lambda L, a, t: L.nn.functional.huber_loss(a, t, delta=0.5), inp, prob),
        ("bce", lambda L, a, t: L.nn.functional.binary_cross_entropy(a.sigmoid(), t), inp, prob),
        ("bce_out_of_range", lambda L, a, t: L.nn.functional.binary_cross_entropy(a, t), inp, prob),
        ("bce_shape", lambda L, a, t: L.nn.functional.binary_cross_entropy(a.sigmoid(), t[0]), inp, prob),
        ("bce_int_target", lambda L, a, t: L.nn.functional.binary_cross_entropy(a.sigmoid(), (t > 0.1).long()), inp, prob),
        ("bcel", lambda L, a, t: L.nn.functional.binary_cross_entropy_with_logits(a, t), inp, prob),
        ("bcel_pw", lambda L, a, t: L.nn.functional.binary_cross_entropy_with_logits(a, t, pos_weight=L.ones(5) * 2), inp, prob),
        ("bcel_shape", lambda L, a, t: L.nn.functional.binary_cross_entropy_with_logits(a, t[0]), inp, prob),
        ("bcel_bool_target", lambda L, a, t: L.nn.functional.binary_cross_entropy_with_logits(a, t > 0.1), inp, prob),
        ("bcel_int_target", lambda L, a, t: L.nn.functional.binary_cross_entropy_with_logits(a, (t > 0.1).long()), inp, prob),
        ("kl", lambda L, a, t: L.nn.functional.kl_div(a.log_softmax(-1), t, reduction="batchmean"), inp, prob),
        ("kl_logt", lambda L, a, t: L.nn.functional.kl_div(a, t.log(), log_target=True), inp, prob),
        ("soft_margin", lambda L, a, t: L.nn.functional.soft_margin_loss(a, t), inp, prob),
        ("poisson", lambda L, a, t: L.nn.functional.poisson_nll_loss(a, t), inp, prob),
        ("gaussian", lambda L, a, t: L.nn.functional.gaussian_nll_loss(a, t, t), inp, prob),
        ("cosine_emb", lambda L, a, t: L.nn.functional.cosine_embedding_loss(a, t, L.ones(3)), inp, prob),
        ("margin_rank", lambda L, a, t: L.nn.functional.margin_ranking_loss(a[0], t[0], L.ones(5)), inp, prob),
        ("multi_margin", lambda L, a, t: L.nn.functional.multi_margin_loss(a, t), inp, tgt),
        ("multilabel_soft", lambda L, a, t: L.nn.functional.multilabel_soft_margin_loss(a, t), inp, prob),
        ("hinge", lambda L, a, t: L.nn.functional.hinge_embedding_loss(a, t), inp, prob),
        ("triplet", lambda L, a, t: L.nn.functional.triplet_margin_loss(a, t, a), inp, prob),
        ("cos_sim", lambda L, a, t: L.nn.functional.cosine_similarity(a, t), inp, prob),
        ("cos_sim_bcast", lambda L, a, t: L.nn.functional.cosine_similarity(a, t[0], dim=-1), inp, prob),
        ("pdist", lambda L, a, t: L.nn.functional.pairwise_distance(a, t), inp, prob),
        ("one_hot", lambda L, a, t: L.nn.functional.one_hot(t), inp, tgt),
        ("one_hot_n", lambda L, a, t: L.nn.functional.one_hot(t, 6), inp, tgt),
        ("one_hot_small", lambda L, a, t: L.nn.functional.one_hot(t, 3), inp, tgt),
        ("one_hot_neg", lambda L, a, t: L.nn.functional.one_hot(t - 2), inp, tgt),
        ("one_hot_float", lambda L, a, t: L.nn.functional.one_hot(t.float()), inp, tgt),
        ("one_hot_int32", lambda L, a, t: L.nn.functional.one_hot(t.int()), inp, tgt),
        ("one_hot_empty", lambda L, a, t: L.nn.functional.one_hot(t[:0]), inp, tgt),
        ("one_hot_empty_n", lambda L, a, t: L.nn.functional.one_hot(t[:0], 4), inp, tgt),
        ("embedding", lambda L, a, t: L.nn.functional.embedding(t, a), inp, tgt),
        ("embedding_oob", lambda L, a, t: L.nn.functional.embedding(t + 3, a), inp, tgt),
        ("embedding_neg", lambda L, a, t: L.nn.functional.embedding(t - 3, a), inp, tgt),
        ("embedding_float", lambda L, a, t: L.nn.functional.embedding(t.float(), a), inp, tgt),
        ("embedding_int32", lambda L, a, t: L.nn.functional.embedding(t.int(), a), inp, tgt),
        ("embedding_pad", lambda L, a, t: L.nn.functional.embedding(t, a, padding_idx=1), inp, tgt),
        ("embedding_pad_oob", lambda L, a, t: L.nn.functional.embedding(t, a, padding_idx=5), inp, tgt),
        ("embedding_1d_w", lambda L, a, t: L.nn.functional.embedding(t, a[0]), inp, tgt),
        ("linear", lambda L, a, t: L.nn.functional.linear(a, t), inp, prob),
        ("linear_bad", lambda L, a, t: L.nn.functional.linear(a, t[:, :4]), inp, prob),
        ("linear_int", lambda L, a, t: L.nn.functional.linear(t.long(), t.long()), inp, prob),
        ("linear_mixed", lambda L, a, t: L.nn.functional.linear(a, t.double()), inp, prob),
        ("linear_bias_bad", lambda L, a, t: L.nn.functional.linear(a, t, L.ones(4)), inp, prob),
        ("bilinear", lambda L, a, t: L.nn.functional.bilinear(a, t, L.ones(2, 5, 5)), inp, prob),
    ]
    for name, f, *specs in cases:
        yield name, diff(torch, f, *specs)
    # normalization
    for name, f in [
        ("layer_norm", lambda L, a: L.nn.functional.layer_norm(a, (4,))),
        ("layer_norm_int", lambda L, a: L.nn.functional.layer_norm(a, 4)),
        ("layer_norm_bad", lambda L, a: L.nn.functional.layer_norm(a, (3,))),
        ("layer_norm_w_bad", lambda L, a: L.nn.functional.layer_norm(a, (4,), L.ones(3))),
        ("layer_norm_2", lambda L, a: L.nn.functional.layer_norm(a, (3, 4), L.ones(3, 4), L.zeros(3, 4))),
        ("layer_norm_toolong", lambda L, a: L.nn.functional.layer_norm(a, (1, 2, 3, 4))),
        ("layer_norm_longin", lambda L, a: L.nn.functional.layer_norm(a.long(), (4,))),
        ("layer_norm_half", lambda L, a: L.nn.functional.layer_norm(a.bfloat16(), (4,))),
        ("layer_norm_mixed", lambda L, a: L.nn.functional.layer_norm(a.bfloat16(), (4,), L.ones(4), L.zeros(4))),
        ("rms_norm", lambda L, a: L.nn.functional.rms_norm(a, (4,))),
        ("rms_norm_bad", lambda L, a: L.nn.functional.rms_norm(a, (3,))),
        ("group_norm", lambda L, a: L.nn.functional.group_norm(a, 3)),
        ("group_norm_bad", lambda L, a: L.nn.functional.group_norm(a, 2)),
        ("batch_norm", lambda L, a: L.nn.functional.batch_norm(a, L.zeros(3), L.ones(3))),
        ("batch_norm_train", lambda L, a: L.nn.functional.batch_norm(a, None, None, training=True)),
        ("batch_norm_bad", lambda L, a: L.nn.functional.batch_norm(a, L.zeros(4), L.ones(4))),
        ("batch_norm_w_bad", lambda L, a: L.nn.functional.batch_norm(a, L.zeros(3), L.ones(3), L.ones(4))),
        ("batch_norm_1", lambda L, a: L.nn.functional.batch_norm(a[:1, :, :1], None, None, training=True)),
        ("batch_norm_noeval_stats", lambda L, a: L.nn.functional.batch_norm(a, None, None, training=False)),
        ("instance_norm", lambda L, a: L.nn.functional.instance_norm(a)),
        ("local_response_norm", lambda L, a: L.nn.functional.local_response_norm(a, 2)),
        ("pad", lambda L, a: L.nn.functional.pad(a, (1, 2))), ("pad_neg", lambda L, a: L.nn.functional.pad(a, (-1, 1))),
        ("pad_odd", lambda L, a: L.nn.functional.pad(a, (1,))),
        ("pad_too_long", lambda L, a: L.nn.functional.pad(a, (1, 1) * 4)),
        ("pad_value", lambda L, a: L.nn.functional.pad(a, (1, 1, 1, 1), value=2.5)),
        ("pad_reflect", lambda L, a: L.nn.functional.pad(a, (1, 2), mode="reflect")),
        ("pad_reflect_big", lambda L, a: L.nn.functional.pad(a, (4, 0), mode="reflect")),
        ("pad_replicate", lambda L, a: L.nn.functional.pad(a, (1, 2, 2, 1), mode="replicate")),
        ("pad_circular", lambda L, a: L.nn.functional.pad(a, (1, 2), mode="circular")),
        ("pad_badmode", lambda L, a: L.nn.functional.pad(a, (1, 2), mode="wrap")),
        ("pad_reflect_2d_on_3d", lambda L, a: L.nn.functional.pad(a, (1, 1, 1, 1, 1, 1), mode="reflect")),
        ("pad_int", lambda L, a: L.nn.functional.pad(a.long(), (1, 1), value=1.5)),
        ("interp_near", lambda L, a: L.nn.functional.interpolate(a, scale_factor=2)),
        ("interp_lin", lambda L, a: L.nn.functional.interpolate(a, size=7, mode="linear")),
        ("interp_lin_ac", lambda L, a: L.nn.functional.interpolate(a, size=7, mode="linear", align_corners=True)),
        ("interp_bilinear_3d", lambda L, a: L.nn.functional.interpolate(a, size=7, mode="bilinear")),
        ("interp_both", lambda L, a: L.nn.functional.interpolate(a, size=7, scale_factor=2)),
        ("interp_none", lambda L, a: L.nn.functional.interpolate(a)),
        ("interp_badmode", lambda L, a: L.nn.functional.interpolate(a, size=7, mode="foo")),
        ("interp_ac_nearest", lambda L, a: L.nn.functional.interpolate(a, size=7, align_corners=True)),
        ("interp_size_list", lambda L, a: L.nn.functional.interpolate(a, size=[7])),
        ("interp_int", lambda L, a: L.nn.functional.interpolate(a.long(), size=7)),
        ("interp_2d", lambda L, a: L.nn.functional.interpolate(a[None], size=(5, 6), mode="bilinear")),
        ("interp_bicubic", lambda L, a: L.nn.functional.interpolate(a[None], scale_factor=1.5, mode="bicubic")),
        ("interp_ne", lambda L, a: L.nn.functional.interpolate(a, scale_factor=1.5, mode="nearest-exact")),
        ("interp_area", lambda L, a: L.nn.functional.interpolate(a, size=2, mode="area")),
        ("interp_2d_scale_tuple", lambda L, a: L.nn.functional.interpolate(a[None], scale_factor=(2, 1))),
        ("interp_rcs", lambda L, a: L.nn.functional.interpolate(a, scale_factor=1.7, mode="linear", recompute_scale_factor=True)),
        ("max_pool1d", lambda L, a: L.nn.functional.max_pool1d(a, 2)),
        ("max_pool1d_bad", lambda L, a: L.nn.functional.max_pool1d(a, 5)),
        ("max_pool2d_3d", lambda L, a: L.nn.functional.max_pool2d(a, 2)),
        ("avg_pool1d", lambda L, a: L.nn.functional.avg_pool1d(a, 3, 1, 1)),
        ("avg_pool1d_badpad", lambda L, a: L.nn.functional.avg_pool1d(a, 2, 1, 2)),
        ("max_pool1d_int", lambda L, a: L.nn.functional.max_pool1d(a.long(), 2)),
        ("adaptive_avg", lambda L, a: L.nn.functional.adaptive_avg_pool1d(a, 3)),
        ("adaptive_max", lambda L, a: L.nn.functional.adaptive_max_pool1d(a, 3, return_indices=True)),
        ("conv1d", lambda L, a: L.nn.functional.conv1d(a, L.ones(2, 3, 2))),
        ("conv1d_bad_ch", lambda L, a: L.nn.functional.conv1d(a, L.ones(2, 2, 2))),
        ("conv1d_big_k", lambda L, a: L.nn.functional.conv1d(a, L.ones(2, 3, 5))),
        ("conv1d_same", lambda L, a: L.nn.functional.conv1d(a, L.ones(2, 3, 2), padding="same")),
        ("conv1d_same_stride", lambda L, a: L.nn.functional.conv1d(a, L.ones(2, 3, 2), padding="same", stride=2)),
        ("conv1d_mixed", lambda L, a: L.nn.functional.conv1d(a, L.ones(2, 3, 2, dtype=L.float64))),
        ("conv1d_2d_in", lambda L, a: L.nn.functional.conv1d(a[0], L.ones(2, 3, 2))),
        ("conv2d_3d_in", lambda L, a: L.nn.functional.conv2d(a, L.ones(2, 3, 2, 2))),
        ("conv1d_groups_bad", lambda L, a: L.nn.functional.conv1d(a, L.ones(2, 3, 2), groups=2)),
        ("unfold", lambda L, a: L.nn.functional.unfold(a[None], 2)),
        ("pixel_shuffle", lambda L, a: L.nn.functional.pixel_shuffle(a.reshape(1, 4, 3, 2), 2)),
        ("pixel_shuffle_bad", lambda L, a: L.nn.functional.pixel_shuffle(a.reshape(1, 3, 4, 2), 2)),
        ("sdpa", lambda L, a: L.nn.functional.scaled_dot_product_attention(a, a, a)),
        ("sdpa_mask_bool", lambda L, a: L.nn.functional.scaled_dot_product_attention(a, a, a, attn_mask=L.ones(3, 3, dtype=L.bool).tril())),
        ("sdpa_causal", lambda L, a: L.nn.functional.scaled_dot_product_attention(a, a, a, is_causal=True)),
        ("sdpa_bad", lambda L, a: L.nn.functional.scaled_dot_product_attention(a, a[:, :, :3], a)),
    ]:
        for spec in (x, xh):
            yield f"{name}({spec})", diff(torch, f, spec)


def sweep_inplace(torch, rng):
    """In-place ops (result dtype must fit the self tensor) and out= (wrong dtype / shape)."""
    ops = [("add_", lambda a, b: a.add_(b)), ("mul_", lambda a, b: a.mul_(b)), ("div_", lambda a, b: a.div_(b)),
           ("sub_", lambda a, b: a.sub_(b)),
           ("iadd", lambda a, b: a.__iadd__(b)),
           ("itruediv", lambda a, b: a.__itruediv__(b)),
           ("pow_", lambda a, b: a.pow_(b)),
           ("clamp_", lambda a, b: a.clamp_(min=b)),
           ("copy_", lambda a, b: a.copy_(b)),
           ("masked_fill_", lambda a, b: a.masked_fill_(a > 0, b)), ("fill_", lambda a, b: a.fill_(b)),
           ("lerp_", lambda a, b: a.lerp_(b, 0.5)), ("floor_divide_", lambda a, b: a.floor_divide_(b)),
           ("exp_", lambda a, b: a.exp_()), ("sqrt_", lambda a, b: a.sqrt_()), ("zero_", lambda a, b: a.zero_()),
           ("addcmul_", lambda a, b: a.addcmul_(b, b)),
           ("index_fill_", lambda a, b: a.index_fill_(0, a.new_zeros(1).long(), b)),
           ("bcast_self", lambda a, b: a[:1].add_(a)), ("logical_and_", lambda a, b: a.logical_and_(b)),
           ("bitwise_and_", lambda a, b: a.bitwise_and_(b)), ("remainder_", lambda a, b: a.remainder_(b)),
           ("neg_", lambda a, b: a.neg_()), ("abs_", lambda a, b: a.abs_()), ("sigmoid_", lambda a, b: a.sigmoid_()),
           ("uniform_", lambda a, b: a.uniform_().shape), ("normal_", lambda a, b: a.normal_().shape),
           ("bernoulli_", lambda a, b: a.bernoulli_(0.5).shape), ("random_", lambda a, b: a.random_(0, 2).shape),
           ("exponential_", lambda a, b: a.exponential_().shape)]
    for dt in ["bool", "uint8", "int64", "float16", "float32"]:
        for dt2 in ["bool", "int64", "float32", "float64"]:
            for name, f in ops:
                a = T(_values((2, 3), dt, rng), dt)
                b = T(_values((2, 3), dt2, rng, positive=True), dt2)
                yield f"{name}({a},{b})", diff(torch, lambda L, x, y, f=f: f(x, y), a, b)
        for s in (2, 2.5, True):
            for name, f in ops:
                a = T(_values((2, 3), dt, rng), dt)
                yield f"{name}({a},{s!r})", diff(torch, lambda L, x, y, f=f: f(x, y), a, s)
    outs = [("add", lambda L, a, o: L.add(a, a, out=o)), ("mul", lambda L, a, o: L.mul(a, 2, out=o)),
            ("exp", lambda L, a, o: L.exp(a, out=o)), ("sum", lambda L, a, o: L.sum(a, 0, out=o)),
            ("matmul", lambda L, a, o: L.matmul(a, a.t(), out=o)), ("cat", lambda L, a, o: L.cat([a, a], out=o)),
            ("max", lambda L, a, o: L.maximum(a, a, out=o)), ("eq", lambda L, a, o: L.eq(a, a, out=o)),
            ("where", lambda L, a, o: L.where(a > 0, a, a, out=o)), ("div", lambda L, a, o: L.div(a, 2, out=o)),
            ("arange", lambda L, a, o: L.arange(6, out=o)), ("zeros", lambda L, a, o: L.zeros(2, 3, out=o)),
            ("clamp", lambda L, a, o: L.clamp(a, 0, out=o)), ("mean", lambda L, a, o: L.mean(a, 1, out=o)),
            ("cumsum", lambda L, a, o: L.cumsum(a, 1, out=o)), ("argmax", lambda L, a, o: L.argmax(a, 1, out=o)),
            ("stack", lambda L, a, o: L.stack([a, a], out=o)),
            ("index_select", lambda L, a, o: L.index_select(a, 0, L.tensor([0]), out=o)),
            ("sort", lambda L, a, o: L.sort(a, out=(o, o.long()))), ("neg", lambda L, a, o: L.neg(a, out=o))]
    for name, f in outs:
        for dt in ["float32", "int64"]:
            a = T(_values((2, 3), dt, rng), dt)
            for odt, oshape in (("float32", (2, 3)), ("float64", (2, 3)), ("int64", (2, 3)), ("bool", (2, 3)),
                                ("float32", (5,)), ("float32", (0,)), ("float16", (6,))):
                o = T(np.zeros(oshape), odt)
                yield f"{name}({a},out={o})", diff(torch, f, a, o)
            o = T(np.zeros((3, 2)), "float32", "t")
            yield f"{name}({a},out=noncontig)", diff(torch, lambda L, x, y, f=f: f(L, x, y).stride(), a, o)


def sweep_misc(torch, rng):
    """Python protocols, autograd errors, module calls with bad input."""
    cases = [
        ("int", lambda L: int(L.tensor([2.7]))),
        ("float_int", lambda L: float(L.tensor(3))),
        ("index", lambda L: [0, 1, 2][L.tensor(1)]),
        ("index_float", lambda L: [0, 1, 2][L.tensor(1.0)]), ("range", lambda L: list(range(L.tensor(3)))),
        ("floor", lambda L: math.floor(L.tensor(2.5))),
        ("round", lambda L: round(L.tensor(2.567), 1)),
        ("round0", lambda L: round(L.tensor(2.5))),
        ("contains", lambda L: 2 in L.tensor([1, 2])), ("contains_t", lambda L: L.tensor(2) in L.tensor([1, 2])),
        ("contains_str", lambda L: "a" in L.tensor([1, 2])), ("bool_empty", lambda L: bool(L.tensor([]))),
        ("bool_2", lambda L: bool(L.tensor([1, 2]))), ("eq_none", lambda L: L.tensor([1]) == None),  # noqa: E711
        ("eq_str", lambda L: L.tensor([1]) == "a"),
        ("add_str", lambda L: L.tensor([1]) + "a"),
        ("add_list", lambda L: L.tensor([1]) + [1]),
        ("add_none", lambda L: L.tensor([1]) + None),
        ("radd_list", lambda L: [1, 2] + L.tensor([1])),
        ("mul_tuple", lambda L: L.tensor([1]) * (2,)),
        ("neg_bool", lambda L: -L.tensor([True])),
        ("invert_float", lambda L: ~L.tensor([1.0])),
        ("abs_builtin", lambda L: abs(L.tensor([-1]))),
        ("pow_neg_int", lambda L: L.tensor([2]) ** -1),
        ("int_pow_neg_t", lambda L: 2 ** L.tensor([-1])),
        ("div0_int", lambda L: L.tensor([1]) // 0),
        ("mod0_int", lambda L: L.tensor([1]) % 0),
        ("div0", lambda L: L.tensor([1]) / 0),
        ("matmul_0d", lambda L: L.tensor(2.0) @ L.tensor(3.0)),
        ("matmul_1d", lambda L: L.tensor([1.0, 2.0]) @ L.tensor([3.0, 4.0])),
        ("matmul_int", lambda L: L.tensor([[1, 2]]) @ L.tensor([[3], [4]])),
        ("matmul_mixed", lambda L: L.tensor([[1, 2]]) @ L.tensor([[3.0], [4.0]])),
        ("matmul_bool", lambda L: L.tensor([[True]]) @ L.tensor([[True]])),
        ("matmul_half", lambda L: L.ones(2, 2, dtype=L.float16) @ L.ones(2, 2, dtype=L.float16)),
        ("matmul_bcast", lambda L: (L.ones(2, 1, 3, 4) @ L.ones(5, 4, 2)).shape),
        ("matmul_bad_bcast", lambda L: L.ones(2, 3, 4) @ L.ones(3, 4, 2)),
        ("backward_nonscalar", lambda L: L.ones(2, requires_grad=True).mul(2).backward()),
        ("backward_nograd", lambda L: L.ones(2).sum().backward()),
        ("numpy_grad", lambda L: L.ones(2, requires_grad=True).numpy()),
        ("int_requires_grad", lambda L: L.ones(2, dtype=L.long).requires_grad_()),
        ("int_rg_factory", lambda L: L.ones(2, dtype=L.long, requires_grad=True)),
        ("leaf_inplace", lambda L: L.ones(2, requires_grad=True).add_(1)),
        ("leaf_setitem", lambda L: L.ones(2, requires_grad=True).__setitem__(0, 1)),
        ("double_backward", lambda L: (lambda y: (y.backward(), y.backward()))((L.ones(2, requires_grad=True) * 2).pow(2).sum())),
        ("grad_none", lambda L: L.ones(2, requires_grad=True).grad),
        ("is_leaf", lambda L: (L.ones(2, requires_grad=True) * 2).is_leaf),
        ("grad_fn_name", lambda L: type((L.ones(2, requires_grad=True) * 2).grad_fn).__name__),
        ("grad_fn_sum", lambda L: type(L.ones(2, requires_grad=True).sum().grad_fn).__name__),
        ("grad_fn_mean", lambda L: type(L.ones(2, requires_grad=True).mean().grad_fn).__name__),
        ("grad_fn_mm", lambda L: type((L.ones(2, 2, requires_grad=True) @ L.ones(2, 2)).grad_fn).__name__),
        ("grad_fn_view", lambda L: type(L.ones(2, 2, requires_grad=True).view(4).grad_fn).__name__),
        ("grad_fn_idx", lambda L: type(L.ones(2, 2, requires_grad=True)[0].grad_fn).__name__),
        ("grad_fn_relu", lambda L: type(L.ones(2, requires_grad=True).relu().grad_fn).__name__),
        ("grad_fn_ce", lambda L: type(L.nn.functional.cross_entropy(L.ones(2, 3, requires_grad=True), L.tensor([0, 1])).grad_fn).__name__),
        ("grad_int", lambda L: L.autograd.grad(L.ones(2, requires_grad=True).sum(), L.ones(2, requires_grad=True))),
        ("detach_rg", lambda L: L.ones(2, requires_grad=True).detach().requires_grad),
        ("item_grad", lambda L: L.ones(1, requires_grad=True).item()),
        ("tolist_grad", lambda L: L.ones(1, requires_grad=True).tolist()),
        ("linear_bad", lambda L: L.nn.Linear(3, 4)(L.ones(2, 5))),
        ("linear_int", lambda L: L.nn.Linear(3, 4)(L.ones(2, 3, dtype=L.long))),
        ("linear_double", lambda L: L.nn.Linear(3, 4)(L.ones(2, 3, dtype=L.float64))),
        ("linear_0d", lambda L: L.nn.Linear(1, 4)(L.tensor(1.0))),
        ("embedding_oob", lambda L: L.nn.Embedding(5, 3)(L.tensor([5]))),
        ("embedding_float", lambda L: L.nn.Embedding(5, 3)(L.tensor([1.0]))),
        ("embedding_pad_neg", lambda L: L.nn.Embedding(5, 3, padding_idx=-1).padding_idx),
        ("embedding_pad_oob", lambda L: L.nn.Embedding(5, 3, padding_idx=5)),
        ("conv2d_3d", lambda L: L.nn.Conv2d(3, 4, 3)(L.ones(3, 5, 5)).shape),
        ("conv2d_badch", lambda L: L.nn.Conv2d(3, 4, 3)(L.ones(1, 2, 5, 5))),
        ("conv2d_small", lambda L: L.nn.Conv2d(3, 4, 3)(L.ones(1, 3, 2, 2))),
        ("conv2d_2d", lambda L: L.nn.Conv2d(3, 4, 3)(L.ones(3, 5))),
        ("conv_bad_groups", lambda L: L.nn.Conv2d(3, 4, 3, groups=2)),
        ("bn_bad", lambda L: L.nn.BatchNorm1d(3)(L.ones(2, 4))),
        ("bn_1", lambda L: L.nn.BatchNorm1d(3)(L.ones(1, 3))),
        ("bn2d_3d", lambda L: L.nn.BatchNorm2d(3)(L.ones(3, 4, 4))),
        ("ln_bad", lambda L: L.nn.LayerNorm(3)(L.ones(2, 4))), ("lstm_bad", lambda L: L.nn.LSTM(3, 4)(L.ones(2, 5, 2))),
        ("lstm_2d", lambda L: L.nn.LSTM(3, 4)(L.ones(5, 3))[0].shape),
        ("gru_4d", lambda L: L.nn.GRU(3, 4)(L.ones(1, 5, 3, 1))),
        ("mha_bad", lambda L: L.nn.MultiheadAttention(6, 4)), ("dropout_bad_p", lambda L: L.nn.Dropout(1.5)),
        ("seq_index", lambda L: type(L.nn.Sequential(L.nn.ReLU(), L.nn.Tanh())[1]).__name__),
        ("seq_slice", lambda L: len(L.nn.Sequential(L.nn.ReLU(), L.nn.Tanh())[1:])),
        ("seq_oob", lambda L: L.nn.Sequential(L.nn.ReLU())[3]),
        ("modlist_oob", lambda L: L.nn.ModuleList([L.nn.ReLU()])[3]),
        ("moddict_missing", lambda L: L.nn.ModuleDict({"a": L.nn.ReLU()})["b"]),
        ("getattr_missing", lambda L: L.nn.Linear(1, 1).foo),
        ("param_count", lambda L: sum(p.numel() for p in L.nn.LSTM(3, 4, 2).parameters())),
        ("state_keys", lambda L: list(L.nn.LSTM(3, 4, bidirectional=True).state_dict())),
        ("load_missing", lambda L: L.nn.Linear(2, 2).load_state_dict({})),
        ("load_shape", lambda L: L.nn.Linear(2, 2).load_state_dict({"weight": L.ones(3, 3), "bias": L.ones(2)})),
        ("load_result", lambda L: tuple(L.nn.Linear(2, 2).load_state_dict({"weight": L.ones(2, 2)}, strict=False))),
        ("register_buffer_bad", lambda L: L.nn.Module().register_buffer("a", 3)),
        ("register_param_bad", lambda L: L.nn.Module().register_parameter("a", L.ones(1))),
        ("setattr_param_none", lambda L: setattr(L.nn.Linear(1, 1), "weight", L.ones(1))),
        ("optim_bad_lr", lambda L: L.optim.SGD([L.ones(1, requires_grad=True)], lr=-1)),
        ("optim_empty", lambda L: L.optim.Adam([])),
        ("optim_tensor", lambda L: L.optim.Adam(L.ones(1, requires_grad=True))),
        ("optim_betas", lambda L: L.optim.Adam([L.ones(1, requires_grad=True)], betas=(1.0, 0.9))),
        ("clip_grad", lambda L: L.nn.utils.clip_grad_norm_([L.ones(1, requires_grad=True)], 1.0)),
        ("softmax_module_dim_none", lambda L: L.nn.Softmax()(L.ones(2, 3))),
        ("ce_module", lambda L: L.nn.CrossEntropyLoss()(L.ones(2, 3), L.tensor([0, 3]))),
        ("mse_size_warn", lambda L: L.nn.MSELoss()(L.ones(2, 3), L.ones(3))),
        ("tensor_repr", lambda L: repr(L.tensor([1.5, 2.0])).replace("ember", "torch")),
        ("tensor_repr_int", lambda L: repr(L.tensor([[1, 2]], dtype=L.int32)).replace("ember", "torch")),
        ("tensor_repr_grad", lambda L: repr(L.ones(2, requires_grad=True) * 2).replace("ember", "torch")),
        ("tensor_repr_bf16", lambda L: repr(L.ones(2, dtype=L.bfloat16)).replace("ember", "torch")),
        ("tensor_repr_empty", lambda L: repr(L.ones(0, 3)).replace("ember", "torch")),
        ("tensor_str_big", lambda L: str(L.arange(2000.0)).replace("ember", "torch")),
        ("tensor_repr_sci", lambda L: repr(L.tensor([1e-8, 1.0, 1e8])).replace("ember", "torch")),
        ("format", lambda L: f"{L.tensor(2.5):.2f}"), ("format_multi", lambda L: f"{L.tensor([2.5]):.2f}"),
        ("size_repr", lambda L: repr(L.ones(2, 3).shape).replace("ember", "torch")),
        ("dtype_repr", lambda L: repr(L.float32).replace("ember", "torch")),
        ("device_repr", lambda L: repr(L.ones(1).device)), ("device_str", lambda L: str(L.device("cpu"))),
        ("device_eq", lambda L: L.ones(1).device == L.device("cpu")), ("device_type", lambda L: L.ones(1).device.type),
        ("dtype_is_float", lambda L: L.float16.is_floating_point), ("dtype_itemsize", lambda L: L.bfloat16.itemsize),
        ("to_device_str", lambda L: L.ones(1).to("cpu").device.type), ("to_bad", lambda L: L.ones(1).to("foo")),
        ("to_kw", lambda L: L.ones(1).to(dtype=L.float64).dtype),
        ("to_other", lambda L: L.ones(1).to(L.ones(1, dtype=L.int8)).dtype),
        ("type_as", lambda L: L.ones(1).type_as(L.ones(1, dtype=L.int8)).dtype),
        ("half_int", lambda L: L.ones(1, dtype=L.long).half().dtype),
        ("sum_bool", lambda L: L.tensor([True, True]).sum()), ("mean_int", lambda L: L.tensor([1, 2]).mean()),
        ("mean_int_dtype", lambda L: L.tensor([1, 2]).mean(dtype=L.float32)), ("max_empty", lambda L: L.ones(0).max()),
        ("argmax_empty", lambda L: L.ones(0).argmax()), ("max_dim_empty", lambda L: L.ones(2, 0).max(1)),
        ("max_dim_empty_ok", lambda L: L.ones(0, 2).max(1)),
        ("sum_empty", lambda L: L.ones(0).sum()),
        ("prod_empty", lambda L: L.ones(0).prod()),
        ("std_1", lambda L: L.ones(1).std()),
        ("var_empty", lambda L: L.ones(0).var()),
        ("median_empty", lambda L: L.ones(0).median()),
        ("topk_k0", lambda L: L.ones(3).topk(0)), ("multinomial", lambda L: L.multinomial(L.tensor([0.0, 1.0]), 1)),
        ("multinomial_bad", lambda L: L.multinomial(L.tensor([-1.0, 1.0]), 1)),
        ("multinomial_norepl", lambda L: L.multinomial(L.tensor([0.0, 1.0]), 2)),
        ("multinomial_2d", lambda L: L.multinomial(L.tensor([[0.0, 1.0]]), 3, replacement=True)),
        ("bernoulli_bad", lambda L: L.bernoulli(L.tensor([1.5]))),
        ("manual_seed_type", lambda L: type(L.manual_seed(0)).__name__),
        ("no_grad_fn", lambda L: L.no_grad()(lambda: L.ones(1, requires_grad=True) * 2)().requires_grad),
        # (called as a function it switches grad mode off for good: switch it back on)
        ("set_grad_enabled", lambda L: (L.set_grad_enabled(False).__class__.__name__, L.set_grad_enabled(True))[0]),
        ("is_grad_enabled", lambda L: L.is_grad_enabled()),
        ("inference_mode", lambda L: L.inference_mode()(lambda: L.ones(1, requires_grad=True) * 2)().requires_grad),
        ("chunk_uneven", lambda L: [t.shape[0] for t in L.ones(5).chunk(3)]),
        ("chunk_more", lambda L: len(L.ones(2).chunk(5))),
        ("split_sizes", lambda L: [t.shape[0] for t in L.ones(5).split(2)]),
        ("allclose_shape", lambda L: L.allclose(L.ones(2), L.ones(3))),
        ("equal_dtype", lambda L: L.equal(L.ones(2), L.ones(2, dtype=L.long))),
        ("isin", lambda L: L.isin(L.tensor([1, 2, 3]), L.tensor([2]))),
        ("clone_memfmt", lambda L: L.ones(2, 3).clone(memory_format=L.contiguous_format).is_contiguous()),
        ("channels_last", lambda L: L.ones(1, 2, 3, 4).to(memory_format=L.channels_last).stride()),
        ("contig_cl", lambda L: L.ones(1, 2, 3, 4).contiguous(memory_format=L.channels_last).is_contiguous()),
    ]
    for name, f in cases:
        yield name, diff(torch, f)


def sweep_loss_dtypes(torch, rng):
    """Pointwise losses over (input dtype, target dtype) pairs, both orders of the float widths."""
    losses = ["binary_cross_entropy", "binary_cross_entropy_with_logits", "mse_loss", "l1_loss",
              "smooth_l1_loss", "huber_loss", "soft_margin_loss", "kl_div", "poisson_nll_loss",
              "multilabel_soft_margin_loss", "hinge_embedding_loss"]
    for name in losses:
        for dt in ("float32", "float64", "bfloat16"):
            x = T(rng.uniform(0.1, 0.9, (3, 4)), dt)
            for tdt in DTYPES:
                t = T(rng.integers(0, 2, (3, 4)), tdt)
                for red in ("mean", "none"):
                    yield f"{name}({x},{t},{red})", diff(
                        torch, lambda L, a, b, n=name, r=red: getattr(L.nn.functional, n)(a, b, reduction=r), x, t)


MODULES = [
    "Linear(3, 4)", "Linear(3, 4, bias=False)", "Bilinear(2, 3, 4)", "Conv1d(2, 4, 3, stride=2, padding=1)",
    "Conv2d(3, 8, (3, 5), padding='same', bias=False)", "Conv2d(3, 8, 3, dilation=2, groups=1, padding_mode='reflect')",
    "MaxPool2d(2)", "MaxPool2d(3, stride=1, padding=1, ceil_mode=True)", "AvgPool2d(2)", "AvgPool1d(3, 2)",
    "AdaptiveAvgPool2d((1, 1))", "AdaptiveAvgPool2d(7)", "AdaptiveMaxPool2d(2)", "BatchNorm1d(4)",
    "BatchNorm2d(4, momentum=None, affine=False)", "LayerNorm(4)", "LayerNorm((3, 4), elementwise_affine=False)",
    "GroupNorm(2, 4)", "InstanceNorm2d(3)", "Embedding(10, 3)", "Embedding(10, 3, padding_idx=0, max_norm=1.0)",
    "Dropout()", "Dropout(0.1, inplace=True)", "Dropout2d(0.2)", "ReLU()", "ReLU(inplace=True)", "LeakyReLU(0.2)",
    "GELU()", "GELU(approximate='tanh')", "SiLU()", "Tanh()", "Sigmoid()", "Softmax(dim=-1)", "LogSoftmax(1)",
    "ELU(alpha=0.5)", "Hardtanh(-2, 2)", "PReLU()", "Softplus(beta=2)", "Identity()", "Flatten()", "Unflatten(1, (2, 2))",
    "Sequential(Linear(2, 3), ReLU(), Linear(3, 1))", "ModuleList([Linear(2, 2), ReLU()])",
    "ModuleDict({'a': Linear(1, 1)})", "LSTM(3, 4)", "LSTM(3, 4, num_layers=2, batch_first=True, dropout=0.1)",
    "GRU(3, 4, bidirectional=True)", "RNN(3, 4, nonlinearity='relu')", "LSTMCell(3, 4)", "GRUCell(3, 4)",
    "MultiheadAttention(8, 2)", "MultiheadAttention(8, 2, batch_first=True, kdim=4, vdim=4)",
    "TransformerEncoderLayer(8, 2, 16)", "CrossEntropyLoss()", "CrossEntropyLoss(label_smoothing=0.1)",
    "CrossEntropyLoss(ignore_index=0, reduction='sum')", "MSELoss()", "L1Loss(reduction='none')", "BCELoss()",
    "BCEWithLogitsLoss(pos_weight=None)", "NLLLoss()", "SmoothL1Loss(beta=0.5)", "HuberLoss(delta=2.0)",
    "KLDivLoss(reduction='batchmean')", "Upsample(scale_factor=2)", "Upsample(size=4, mode='bilinear')",
    "PixelShuffle(2)", "ZeroPad2d(1)", "ConstantPad1d(2, 3.5)", "ReflectionPad2d((1, 1, 2, 0))", "CosineSimilarity()",
    "Softmax2d()", "Hardswish()", "Mish()", "Threshold(0.1, 20)", "CELU()", "SELU()", "GLU()", "LogSigmoid()",
    "Softsign()", "Tanhshrink()", "Softmin(1)", "Fold((4, 5), 2)", "Unfold(2)", "ChannelShuffle(2)",
    "EmbeddingBag(10, 3)", "TransformerDecoderLayer(8, 2, 16)", "ReplicationPad1d(2)", "LPPool2d(2, 3)",
    "MaxUnpool2d(2)", "Dropout1d()", "AlphaDropout(0.2)", "Hardsigmoid()", "RReLU()", "ReLU6()", "LocalResponseNorm(2)",
    "BatchNorm3d(3)", "SyncBatchNorm(3)", "CircularPad2d(1)", "TripletMarginLoss()", "MarginRankingLoss()",
    "MultiLabelSoftMarginLoss()", "CTCLoss()", "PoissonNLLLoss()", "GaussianNLLLoss()", "CosineEmbeddingLoss()",
]


def sweep_modules(torch, rng):
    """repr(module) (what notebooks print), parameter shapes and state_dict keys."""
    for src in MODULES:
        def mk(L, src=src):
            ns = {k: getattr(L.nn, k) for k in dir(L.nn) if not k.startswith("_")}
            return eval(src, ns)  # noqa: S307 (fixed strings above)
        yield f"repr {src}", diff(torch, lambda L, mk=mk: repr(mk(L)))
        yield f"state {src}", diff(torch, lambda L, mk=mk: [(k, tuple(v.shape), str(v.dtype).split(".")[-1])
                                                          for k, v in mk(L).state_dict().items()])


def sweep_methods(torch, rng):
    """Keyword spellings and overloads scripts use: axis=, keepdim=, unbiased=, out tuples' fields."""
    x = T(rng.standard_normal((3, 4)), "float32")
    cases = [
        ("sum_axis", lambda L, a: a.sum(axis=0)), ("sum_dim_list", lambda L, a: a.sum(dim=[0, 1])),
        ("sum_dim_none", lambda L, a: a.sum(dim=None)), ("mean_axis_kd", lambda L, a: L.mean(a, axis=1, keepdims=True)),
        ("max_dim_fields", lambda L, a: a.max(dim=1).indices), ("max_other", lambda L, a: L.max(a, a * 2)),
        ("max_keepdim", lambda L, a: a.max(1, keepdim=True)[0]), ("min_dim_values", lambda L, a: L.min(a, 0).values),
        ("std_unbiased", lambda L, a: a.std(unbiased=False)), ("std_dim_unbiased", lambda L, a: a.std(1, False)),
        ("std_dim_unbiased_kw", lambda L, a: a.std(dim=1, unbiased=True, keepdim=True)),
        ("var_correction0", lambda L, a: a.var(0, correction=0)),
        ("argmax_keepdim", lambda L, a: a.argmax(1, keepdim=True)),
        ("argmax_none_keepdim", lambda L, a: a.argmax(keepdim=True)),
        ("topk_fields", lambda L, a: a.topk(2, largest=False, sorted=True).indices),
        ("sort_stable", lambda L, a: a.sort(stable=True, dim=0).values), ("cumsum_axis", lambda L, a: a.cumsum(axis=1)),
        ("norm_dim", lambda L, a: a.norm(dim=1)),
        ("norm_p_dim", lambda L, a: a.norm(1, 1)),
        ("norm_keepdim", lambda L, a: a.norm(2, 1, True)),
        ("linalg_norm", lambda L, a: L.linalg.norm(a)),
        ("linalg_vnorm", lambda L, a: L.linalg.vector_norm(a, ord=3, dim=1)),
        ("linalg_mnorm", lambda L, a: L.linalg.matrix_norm(a)), ("dist", lambda L, a: L.dist(a, a * 2)),
        ("transpose_kw", lambda L, a: a.transpose(dim0=0, dim1=1)), ("permute_tuple", lambda L, a: a.permute((1, 0))),
        ("view_tuple", lambda L, a: a.view((2, 6))), ("reshape_list", lambda L, a: a.reshape([6, 2])),
        ("expand_list", lambda L, a: a[:1].expand([3, 4])), ("repeat_tuple", lambda L, a: a.repeat((2, 1))),
        ("flatten_kw", lambda L, a: a.flatten(start_dim=0, end_dim=-1)),
        ("squeeze_kw", lambda L, a: a[None].squeeze(dim=0)),
        ("unsqueeze_kw", lambda L, a: a.unsqueeze(dim=1)), ("split_kw", lambda L, a: a.split(split_size=2, dim=1)),
        ("chunk_kw", lambda L, a: a.chunk(chunks=2, dim=1)), ("cat_kw", lambda L, a: L.cat(tensors=(a, a), dim=1)),
        ("cat_axis", lambda L, a: L.cat((a, a), axis=1)), ("concat", lambda L, a: L.concat((a, a))),
        ("stack_kw", lambda L, a: L.stack(tensors=[a, a], dim=1)),
        ("where_kw", lambda L, a: L.where(condition=a > 0, input=a, other=a * 0)),
        ("clamp_kw", lambda L, a: a.clamp(min=-0.5, max=0.5)), ("clamp_min", lambda L, a: a.clamp_min(0)),
        ("softmax_method", lambda L, a: a.softmax(-1)),
        ("softmax_method_kw", lambda L, a: a.softmax(dim=0, dtype=L.float64)),
        ("log_softmax_method", lambda L, a: a.log_softmax(1)),
        ("masked_fill_kw", lambda L, a: a.masked_fill(mask=a > 0, value=1.0)),
        ("gather_kw", lambda L, a: a.gather(dim=1, index=L.tensor([[0], [1], [2]]))),
        ("index_select_kw", lambda L, a: a.index_select(dim=0, index=L.tensor([0]))),
        ("type_dtype", lambda L, a: a.type(L.float64)), ("to_copy", lambda L, a: a.to(L.float32, copy=True) is a),
        ("to_same", lambda L, a: a.to(L.float32) is a),
        ("float_same", lambda L, a: a.float() is a),
        ("contiguous_same", lambda L, a: a.contiguous() is a),
        ("new_tensor_grad", lambda L, a: a.new_tensor([1.0], requires_grad=True).requires_grad),
        ("mul_scalar_t", lambda L, a: a * L.tensor(2)),
        ("add_alpha", lambda L, a: a.add(a, alpha=2)),
        ("sub_alpha", lambda L, a: L.sub(a, 1, alpha=2)),
        ("add_alpha_float_int", lambda L, a: L.tensor([1, 2]).add(L.tensor([1, 2]), alpha=0.5)),
        ("div_mode", lambda L, a: a.div(0.3, rounding_mode="floor")),
        ("div_mode_trunc_int", lambda L, a: L.tensor([-7, 7]).div(2, rounding_mode="trunc")),
        ("div_mode_bad", lambda L, a: a.div(2, rounding_mode="round")), ("pow_tensor_exp", lambda L, a: L.pow(2, a)),
        ("round_decimals", lambda L, a: a.round(decimals=2)),
        ("nan_to_num_kw", lambda L, a: (a / 0).nan_to_num(posinf=1.0, neginf=-1.0)),
        ("einsum_list", lambda L, a: L.einsum("ij,ij->i", [a, a])),
        ("all_dim", lambda L, a: (a > 0).all(dim=1)),
        ("any_kd", lambda L, a: (a > 0).any(1, True)),
        ("all_float", lambda L, a: a.all()),
        ("any_int", lambda L, a: L.tensor([0, 2]).any()),
        ("all_uint8", lambda L, a: L.tensor([1, 2], dtype=L.uint8).all()),
        ("count_nonzero_dims", lambda L, a: L.count_nonzero(a > 0, dim=(0, 1))),
        ("unique_sorted_dim", lambda L, a: L.unique((a > 0).long(), dim=0)),
        ("histc", lambda L, a: L.histc(a, bins=4, min=-1, max=1)),
        ("bincount_w", lambda L, a: L.bincount(L.tensor([0, 1, 1]), weights=L.tensor([0.5, 1.0, 2.0]))),
        ("quantile", lambda L, a: L.quantile(a, 0.5, dim=1)),
        ("quantile_t", lambda L, a: L.quantile(a, L.tensor([0.25, 0.75]))),
        ("nanquantile", lambda L, a: L.nanquantile(a, 0.5)),
        ("median_dim", lambda L, a: a.median(1)),
        ("mode", lambda L, a: (a > 0).long().mode(0)),
        ("flip_list", lambda L, a: a.flip([0])),
        ("roll_kw", lambda L, a: a.roll(shifts=1, dims=0)),
        ("tril_kw", lambda L, a: a.tril(diagonal=-1)),
        ("masked_select_bcast", lambda L, a: a.masked_select(L.tensor([True, False, True, False]))),
        ("item_int", lambda L, a: L.tensor([3]).item()),
        ("item_bool", lambda L, a: L.tensor(True).item()),
        ("item_half", lambda L, a: L.tensor(1.5, dtype=L.float16).item()),
        ("tolist_0d", lambda L, a: L.tensor(2).tolist()),
        ("tolist_bf16", lambda L, a: L.tensor([1.5], dtype=L.bfloat16).tolist()),
        ("numpy_dtype", lambda L, a: str(L.tensor([1], dtype=L.int16).numpy().dtype)),
        ("numpy_bf16", lambda L, a: L.tensor([1.0], dtype=L.bfloat16).numpy()),
        ("data_ptr_eq", lambda L, a: a.data_ptr() == a[0].data_ptr()),
        ("storage_offset", lambda L, a: a[1:, 2:].storage_offset()),
        ("is_contiguous_t", lambda L, a: a.t().is_contiguous()),
        ("untyped_storage_nbytes", lambda L, a: a.untyped_storage().nbytes()),
        ("requires_grad_int_false", lambda L, a: L.tensor([1]).requires_grad_(False).requires_grad),
        ("retain_grad", lambda L, a: (lambda y: (y.retain_grad(), y.sum().backward(), y.grad)[2])(L.ones(2, requires_grad=True) * 2)),
        ("grad_nonleaf_warn", lambda L, a: (lambda y: (y.sum().backward(), y.grad)[1])(L.ones(2, requires_grad=True) * 2)),
        ("register_hook", lambda L, a: (lambda x: (x.register_hook(lambda g: g * 3), (x * 2).sum().backward(), x.grad)[2])(L.ones(2, requires_grad=True))),
        ("zero_grad_none", lambda L, a: (lambda m: (m(L.ones(1, 1)).sum().backward(), m.zero_grad(), m.weight.grad)[2])(L.nn.Linear(1, 1))),
        ("sgd_step", lambda L, a: (lambda p: (p.sum().backward(), L.optim.SGD([p], lr=0.1, momentum=0.9).step(), p.detach())[2])(L.ones(2, requires_grad=True))),
        ("adamw_defaults", lambda L, a: {k: v for k, v in L.optim.AdamW([L.ones(1, requires_grad=True)]).defaults.items() if isinstance(v, (int, float, bool, tuple))}),
        ("adam_defaults", lambda L, a: {k: v for k, v in L.optim.Adam([L.ones(1, requires_grad=True)]).defaults.items() if isinstance(v, (int, float, bool, tuple))}),
        ("sgd_defaults", lambda L, a: {k: v for k, v in L.optim.SGD([L.ones(1, requires_grad=True)], lr=0.1).defaults.items() if isinstance(v, (int, float, bool, tuple))}),
    ]
    for name, f in cases:
        yield name, diff(torch, f, x)


def sweep_utils(torch, rng):
    """nn.init on bad ranks, default_collate of mixed batches, clip/vector utilities."""
    cases = [
        ("xavier_1d", lambda L: L.nn.init.xavier_uniform_(L.ones(3))),
        ("kaiming_0d", lambda L: L.nn.init.kaiming_normal_(L.tensor(1.0))),
        ("kaiming_empty", lambda L: L.nn.init.kaiming_uniform_(L.ones(0, 3))),
        ("orthogonal_1d", lambda L: L.nn.init.orthogonal_(L.ones(3))),
        ("calc_gain", lambda L: L.nn.init.calculate_gain("leaky_relu", 0.2)),
        ("calc_gain_bad", lambda L: L.nn.init.calculate_gain("foo")),
        ("calc_gain_selu", lambda L: L.nn.init.calculate_gain("selu")),
        ("trunc_normal_shape", lambda L: L.nn.init.trunc_normal_(L.ones(3, 2)).shape),
        ("constant_", lambda L: L.nn.init.constant_(L.ones(2), 3)),
        ("eye_3d", lambda L: L.nn.init.eye_(L.ones(2, 2, 2))),
        ("dirac_2d", lambda L: L.nn.init.dirac_(L.ones(2, 2))),
        ("zeros_int", lambda L: L.nn.init.zeros_(L.ones(2, dtype=L.long))),
        ("uniform_int", lambda L: L.nn.init.uniform_(L.ones(2, dtype=L.long)).dtype),
        ("collate_ints", lambda L: L.utils.data.default_collate([1, 2, 3])),
        ("collate_floats", lambda L: L.utils.data.default_collate([1.0, 2.5])),
        ("collate_bools", lambda L: L.utils.data.default_collate([True, False])),
        ("collate_tuples", lambda L: L.utils.data.default_collate([(L.ones(2), 1), (L.zeros(2), 0)])),
        ("collate_dicts", lambda L: L.utils.data.default_collate([{"a": L.ones(1), "b": "x"}, {"a": L.ones(1), "b": "y"}])),
        ("collate_np", lambda L: L.utils.data.default_collate([np.ones(2, np.float32), np.zeros(2, np.float32)])),
        ("collate_np_scalar", lambda L: L.utils.data.default_collate([np.float64(1.5), np.float64(2.0)])),
        ("collate_ragged", lambda L: L.utils.data.default_collate([L.ones(2), L.ones(3)])),
        ("collate_strs", lambda L: L.utils.data.default_collate(["a", "b"])),
        ("collate_none", lambda L: L.utils.data.default_collate([None, None])),
        ("tensor_dataset_bad", lambda L: L.utils.data.TensorDataset(L.ones(2), L.ones(3))),
        ("tensor_dataset_item", lambda L: L.utils.data.TensorDataset(L.arange(3), L.arange(3.0))[1]),
        ("random_split", lambda L: [len(s) for s in L.utils.data.random_split(range(10), [0.3, 0.7])]),
        ("random_split_bad", lambda L: L.utils.data.random_split(range(10), [3, 3])),
        ("loader_len", lambda L: len(L.utils.data.DataLoader(range(10), batch_size=3))),
        ("loader_len_drop", lambda L: len(L.utils.data.DataLoader(range(10), batch_size=3, drop_last=True))),
        ("loader_first", lambda L: next(iter(L.utils.data.DataLoader(range(10), batch_size=4)))),
        ("loader_bad_bs", lambda L: L.utils.data.DataLoader(range(10), batch_size=0)),
        ("loader_shuffle_sampler", lambda L: L.utils.data.DataLoader(range(10), shuffle=True, sampler=[0, 1])),
        ("subset", lambda L: L.utils.data.Subset(range(10), [2, 5])[1]),
        ("concat_ds", lambda L: len(L.utils.data.ConcatDataset([range(3), range(4)]))),
        ("params_to_vector", lambda L: L.nn.utils.parameters_to_vector(L.nn.Linear(2, 2).parameters()).shape),
        ("clip_value", lambda L: (lambda p: (p.sum().mul(5).backward(), L.nn.utils.clip_grad_value_([p], 1.0), p.grad)[2])(L.ones(2, requires_grad=True))),
        ("clip_norm_ret", lambda L: (lambda p: (p.sum().mul(5).backward(), L.nn.utils.clip_grad_norm_([p], 1.0))[1])(L.ones(2, requires_grad=True))),
        ("clip_norm_inf", lambda L: (lambda p: (p.sum().mul(5).backward(), L.nn.utils.clip_grad_norm_([p], 1.0, norm_type="inf"))[1])(L.ones(2, requires_grad=True))),
        ("clip_norm_nograd", lambda L: L.nn.utils.clip_grad_norm_([L.ones(2, requires_grad=True)], 1.0)),
        ("pad_sequence", lambda L: L.nn.utils.rnn.pad_sequence([L.ones(2), L.ones(3)], batch_first=True)),
        ("pad_sequence_value", lambda L: L.nn.utils.rnn.pad_sequence([L.ones(2, 1), L.ones(3, 1)], padding_value=-1)),
        ("pack_unsorted", lambda L: L.nn.utils.rnn.pack_padded_sequence(L.ones(2, 3, 1), [2, 3], batch_first=True)),
        ("pack_sorted", lambda L: L.nn.utils.rnn.pack_padded_sequence(L.ones(2, 3, 1), [3, 2], batch_first=True).batch_sizes),
        ("sched_steplr", lambda L: (lambda o: [(o.step(), s.step(), s.get_last_lr())[2] for s in [L.optim.lr_scheduler.StepLR(o, 2, 0.5)] for _ in range(3)])(L.optim.SGD([L.ones(1, requires_grad=True)], lr=1.0))),
        ("sched_cos", lambda L: (lambda o: [round(v, 6) for s in [L.optim.lr_scheduler.CosineAnnealingLR(o, 4)] for _ in range(5) for v in (o.step(), s.step(), s.get_last_lr()[0])[2:]])(L.optim.SGD([L.ones(1, requires_grad=True)], lr=1.0))),
        ("sched_onecycle", lambda L: (lambda o: [round(v, 6) for s in [L.optim.lr_scheduler.OneCycleLR(o, 1.0, total_steps=5)] for _ in range(4) for v in (o.step(), s.step(), s.get_last_lr()[0])[2:]])(L.optim.SGD([L.ones(1, requires_grad=True)], lr=1.0))),
        ("optim_state_keys", lambda L: (lambda p: (lambda o: (p.sum().backward(), o.step(), sorted(o.state_dict()["state"][0]))[2])(L.optim.Adam([p])))(L.ones(1, requires_grad=True))),
        ("optim_pg_keys", lambda L: sorted(L.optim.AdamW([L.ones(1, requires_grad=True)]).state_dict()["param_groups"][0])),
        ("sgd_pg_keys", lambda L: sorted(L.optim.SGD([L.ones(1, requires_grad=True)], lr=0.1).state_dict()["param_groups"][0])),
    ]
    for name, f in cases:
        yield name, diff(torch, f)


SWEEPS = {
    "unary": sweep_unary,
    "binary": sweep_binary,
    "reduce": sweep_reduce,
    "shape": sweep_shape,
    "index": sweep_index,
    "factory": sweep_factory,
    "nn": sweep_nn,
    "inplace": sweep_inplace,
    "misc": sweep_misc,
    "loss_dtypes": sweep_loss_dtypes,
    "modules": sweep_modules,
    "methods": sweep_methods,
    "utils": sweep_utils,
}


def main(argv):
    import torch
    rng = np.random.default_rng(0)
    names = argv or list(SWEEPS)
    total = bad = 0
    for name in names:
        for label, reason in SWEEPS[name](torch, rng):
            total += 1
            if reason:
                bad += 1
                print(f"[{name}] {label}: {reason}", flush=True)
    print(f"{bad} mismatches in {total} calls", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
