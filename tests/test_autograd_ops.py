"""Backward formulas (csrc/autograd/derivatives*.c) checked against finite
differences: ember.autograd.gradcheck in float64 for every op of the
BACKWARD_LIST table, reusing tests/op_db.py's samples (contiguous,
transposed, sliced, expanded, 0-d inputs, broadcasting, Python numbers),
the in-place forms on non-leaf tensors, in-place writes into views of
non-leaves (Note [in-place on views] in record.c), and gradgradcheck for the
common ops. Samples sit away from kinks and poles; what each op does exactly
at a kink is checked against hand values and, when PyTorch is installed,
against torch (also the grad_fn names and the gradients themselves).

References never come from ember: finite differences of the forward (whose
values tests/test_ops.py checks against NumPy), hand math, or torch.
"""
import pathlib
from contextlib import contextmanager
from dataclasses import replace

import numpy as np
import pytest

import ember
from ember.autograd import gradcheck, gradgradcheck
import autograd_cases_act
import autograd_cases_conv
import autograd_cases_attn
import autograd_cases_complex
import autograd_cases_index
import autograd_cases_interp
import autograd_cases_join
import autograd_cases_loss
import autograd_cases_nn
import autograd_cases_poolnorm
import autograd_cases_reduce
import autograd_cases_spectral
from autograd_common import (ALL4, GC, S0, V4, X34, Y34, _calls, _ts, _vals, build)
from op_db import DT, OPS_BY_NAME, TS, is_float, rng_for
from test_ops import alias_expectation

try:
    import torch as _torch
except ImportError:
    _torch = None
needs_torch = pytest.mark.skipif(_torch is None, reason="torch not installed")

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _backward_list():
    """{op: node name} of every op with a backward formula (csrc/autograd/derivatives*.c)."""
    rows = ember._C._differentiable_ops()
    assert len(rows) > 50, "could not read the formula table"
    return rows


BACKWARD = _backward_list()


# ---------------------------------------------------------------------------
# the cases: op_db's samples where they fit gradcheck, plus custom ones
GC_LAYOUTS = ("contig", "T", "slice", "expand", "0d")


def _finite(s):
    vals = [a.values for a in s.args if isinstance(a, TS)]
    vals += [v for v in list(s.args) + list(s.kwargs.values()) if isinstance(v, float)]
    return all(np.all(np.isfinite(np.asarray(v, np.float64))) for v in vals)


def _usable(op, s, layout):
    if s.tile != 1 or s.desc in ("specials", "edge", "bigger") or not _finite(s):
        return False  # big inputs (slow), nan/inf grids and edge values sit on kinks or poles
    if any(isinstance(a, TS) and np.size(a.values) > 1000 for a in s.args):
        return False  # big samples (the reductions' threaded paths): a dense Jacobian is too slow
    if any(isinstance(a, DT) for a in list(s.args) + list(s.kwargs.values())):
        return False  # view(dtype), to(dtype): other cases
    if not any(isinstance(a, TS) and is_float(a.dtype) for a in s.args):
        return False
    if not all(m.usable(op, s, layout) for m in AREAS if hasattr(m, "usable")):
        return False  # an area's own veto (ties that make its op discontinuous, ...)
    if op.name == "narrow" and s.args[-1] == 0:
        return False  # an empty result: see test_gradcheck_empty_output
    if op.kind == "view" and alias_expectation(op, s, "contig" if layout == "0d" else layout) == "error":
        return False  # view() of a layout it can't view: an error, not a gradient
    # an area's own filter (tests/autograd_cases_<area>.py usable(op, sample, layout)): ties, duplicates
    return all(m.usable(op, s, layout) for m in AREAS if hasattr(m, "usable"))


def _result_shape(op, s):
    """The result's shape: broadcast for elementwise ops, the NumPy reference's otherwise."""
    if op.kind == "ew":
        return np.broadcast_shapes(*[a.shape for a in s.args if isinstance(a, TS)])
    def val(a):
        if isinstance(a, (list, tuple)):  # index_put's indices
            return type(a)(val(x) for x in a)
        return a.values if isinstance(a, TS) else a
    vals = [val(a) for a in s.args]
    r = op.ref(*vals, **s.kwargs)
    return np.shape(r[0] if isinstance(r, tuple) else r)


def _inplace_ok(name, s):
    """Can args[0].op_(...) hold the result (no broadcasting of self, self a float tensor)?
    In-place view ops (unsqueeze_, t_, as_strided_) restride self: any shape goes."""
    a0, op = s.args[0], OPS_BY_NAME[name]
    return (hasattr(ember.Tensor, name + "_") and isinstance(a0, TS) and is_float(a0.dtype)
            and (op.kind == "view" or a0.shape == _result_shape(op, s)))


def _db_cases(name):
    """Out-of-place, in-place and in-place-on-view cases from op_db's float64 samples."""
    op = OPS_BY_NAME.get(name)
    out = {"": [], "inplace": [], "inplace_view": []}
    if op is None or op.kind not in DB_KINDS or "float64" not in op.dtypes:
        return out
    for layout in GC_LAYOUTS:
        if layout not in op.layouts:
            continue
        for s in op.get_samples("float64", layout):
            if not _usable(op, s, layout):
                continue
            call = op.call or (op.fn and (lambda L, *a, _f=op.fn, **k: _f(L)(*a, **k)))  # linalg.vector_norm
            form = "call" if call else "F" if "F" in op.variants and s.desc != "varargs" else "M"
            # torch has no formula for remainder(Scalar, Tensor): gradcheck is the only reference
            c = GC(name, s.args, s.kwargs, layout, form, call, s.desc,
                   torch_ref=not (name == "remainder" and s.desc == "rscalar"))
            out[""].append(c)
            if "I" in op.variants and _inplace_ok(name, s):
                out["inplace"].append(replace(c, form="I"))
                if op.kind == "ew" and layout == "contig" and s.desc == "main" and s.args[0].values.ndim >= 2:
                    out["inplace_view"] += [replace(c, form="IV-T"), replace(c, form="IV-S")]
    return out


def _gen(L):
    return L.Generator().manual_seed(7)


def _random_inplace(method, *a, **k):
    """y = x*1 overwritten by a seeded draw: (y, (y + x) * 2) -- no gradient through y."""
    def call(L, x):
        y = getattr(x * 1, method)(*a, generator=_gen(L), **k)
        return y, (y + x) * 2
    return call


def _iop(method):
    """x = a * 1; x op= b (Python's in-place operators on a non-leaf)."""
    def call(L, a, b):
        x = a * 1
        r = getattr(x, method)(b)
        assert r is x
        return x
    return call


EXTRA = {  # op -> [GC]: what op_db's samples don't cover
    # Python operators (and their reflected forms) reach the same formulas
    "add": _calls("add", lambda L, a, b: a + b, X34, Y34, desc="a + b") +
    _calls("add", lambda L, a: 2.5 + a, X34, desc="2.5 + a") +
    _calls("add", lambda L, a, b: a + b, _ts(_vals(("c",), (3, 1)), False), V4, desc="(3,1) + (4,)"),
    "sub": _calls("sub", lambda L, a, b: a - b, X34, Y34, desc="a - b") +
    _calls("sub", lambda L, a: 2 - a, X34, desc="2 - a"),
    "mul": _calls("mul", lambda L, a, b: a * b, X34, Y34, layouts=ALL4, desc="a * b") +
    _calls("mul", lambda L, a: 3 * a, X34, desc="3 * a") +
    _calls("mul", lambda L, a, b: a * b, X34, S0, desc="(3,4) * 0-d"),
    "div": _calls("div", lambda L, a, b: a / b, X34, _ts(_vals(("d",), (3, 4), 0.5, 2)), desc="a / b") +
    _calls("div", lambda L, b: 2 / b, _ts(_vals(("d",), (3, 4), 0.5, 2)), desc="2 / b"),
    "pow": _calls("pow", lambda L, a, b: a ** b, _ts(_vals(("p",), (3, 4), 0.3, 2)), Y34, desc="a ** b") +
    _calls("pow", lambda L, a: a ** 2, X34, desc="a ** 2") + _calls("pow", lambda L, a: a ** 0, X34, desc="a ** 0") +
    _calls("pow", lambda L, a: a ** -1.5, _ts(_vals(("p",), (3, 4), 0.3, 2)), desc="a ** -1.5") +
    _calls("pow", lambda L, b: 2 ** b, Y34, desc="2 ** b") +
    _calls("pow", lambda L, a, b: a ** b, _ts(_vals(("p",), (3, 1), 0.3, 2), False), V4, desc="(3,1) ** (4,)"),
    "neg": _calls("neg", lambda L, a: -a, X34, desc="-a"),
    "abs": _calls("abs", lambda L, a: abs(a), X34, desc="abs(a)"),
    "remainder": _calls("remainder", lambda L, a, b: a % b, X34, _ts(_vals(("r",), (3, 4), 0.7, 2)), desc="a % b"),
    "mm": _calls("mm", lambda L, a, b: a @ b, _ts(_vals(("m",), (2, 3))), _ts(_vals(("n",), (3, 4))), desc="a @ b") +
    _calls("mm", lambda L, a, b: L.mm(a, b), _ts(_vals(("m",), (2, 3))), _ts(_vals(("n",), (3, 4))),
       layouts=ALL4, desc="mm"),
    "square": _calls("square", lambda L, a: L.square(a), X34, layouts=ALL4),
    # writes into self: self's old value gets no gradient, the source does
    "copy_": _calls("copy_", lambda L, x, s: (x * 1).copy_(s), X34, Y34, layouts=ALL4) +
    _calls("copy_", lambda L, x, s: (x * 1).copy_(s), X34, V4, desc="broadcast src") +
    _calls("copy_", lambda L, s: L.zeros(3, 4, dtype=L.float64).copy_(s), Y34, desc="into a plain tensor") +
    _calls("copy_", lambda L, x, s: ((x * 1).copy_(s) * x), X34, Y34, desc="then * x"),
    "fill_": _calls("fill_", lambda L, x: (x * 1).fill_(2.5), X34, layouts=ALL4, desc="number") +
    _calls("fill_", lambda L, x, v: (x * 1).fill_(v), X34, S0, desc="0-d tensor value") +
    _calls("fill_", lambda L, v: L.zeros(3, 4, dtype=L.float64).fill_(v), S0, desc="into a plain tensor"),
    "zero_": _calls("zero_", lambda L, x: (x * 1).zero_(), X34, layouts=ALL4) +
    _calls("zero_", lambda L, x: ((y := x * 1).zero_(), y + x)[1], X34, desc="then + x"),
    "uniform_": _calls("uniform_", _random_inplace("uniform_", -1, 2), X34),
    "normal_": _calls("normal_", _random_inplace("normal_", 1, 2), X34),
    "bernoulli_": _calls("bernoulli_", _random_inplace("bernoulli_", 0.3), X34),
    # bernoulli(p): a seeded draw, constant in p (gradient zero, as torch's BernoulliBackward0)
    "bernoulli": _calls("bernoulli", lambda L, p: (L.bernoulli(p.clamp(0.1, 0.9), generator=_gen(L)) + p) * 2,
                        X34, torch_ref=False)
    + _calls("bernoulli", lambda L, p: (b := L.bernoulli(p * 0), b + p)[-1], X34, desc="p = 0"),
    "random_": _calls("random_", _random_inplace("random_", 0, 10), X34),
    "exponential_": _calls("exponential_", _random_inplace("exponential_", 2.0), X34),
    # casts: finite differences through the narrower dtype need a wider step
    "_to_copy": _calls("_to_copy", lambda L, x: x.to(L.float32), X34, layouts=ALL4, tol=dict(eps=1e-2)) +
    _calls("_to_copy", lambda L, x: x.float() * 3, X34, tol=dict(eps=1e-2), desc="float()") +
    _calls("_to_copy", lambda L, x: x.to(L.float16), X34, tol=dict(eps=0.5, atol=1e-2, rtol=1e-2), desc="float16"),
    # x.to(device, dtype): the copy across devices (here the host to the host, as a copy)
    "_to_device": _calls("_to_device", lambda L, x: L._C._to_device(x, "cpu", L.float32) if hasattr(L._C, "_to_device")
                         else x.to("cpu", L.float32, copy=True), X34, layouts=ALL4, tol=dict(eps=1e-2)) +
    _calls("_to_device", lambda L, x: L._C._to_device(x, "cpu") * 2, X34, torch_ref=False, desc="same dtype"),
    "contiguous": _calls("contiguous", lambda L, x: x.contiguous(), X34, layouts=ALL4),
    "clone": _calls("clone", lambda L, x: x.clone(), X34, layouts=ALL4),
    # views of views, and overlapping as_strided windows
    "_index": _calls("_index", lambda L, x: x[1:, ::2][0], X34, layouts=ALL4, desc="view of a view"),
    "as_strided": _calls("as_strided", lambda L, x: x.as_strided((3, 3), (1, 1)), X34, desc="overlapping") +
    _calls("as_strided", lambda L, x: x.as_strided((2, 2), (4, 1), 5), X34, desc="offset"),
    "expand": _calls("expand", lambda L, x: x.expand(2, 3, 4), X34, layouts=ALL4),
    "sum_to_size": _calls("sum_to_size", lambda L, x: x.sum_to_size(1, 4), X34, layouts=ALL4),
    "select": _calls("select", lambda L, x: x.select(1, 2), X34, layouts=ALL4),
    "narrow": _calls("narrow", lambda L, x: x.narrow(1, 1, 2), X34, layouts=ALL4),
    "diagonal": _calls("diagonal", lambda L, x: x.diagonal(1), X34, layouts=ALL4),
    "split": _calls("split", lambda L, x: x.split(3, 1), X34, layouts=ALL4),
}
for _op, _m in (("add", "__iadd__"), ("sub", "__isub__"), ("mul", "__imul__"), ("div", "__itruediv__")):
    EXTRA[_op] += _calls(_op, _iop(_m), X34, _ts(_vals(("d",), (3, 4), 0.5, 2)), layouts=ALL4, desc=_m)
EXTRA["remainder"] += _calls("remainder", lambda L, b: L.remainder(7, b), _ts(_vals(("r",), (3, 4), 0.7, 2)),
                         desc="7 % b", torch_ref=False)  # torch has no formula for remainder(Scalar, Tensor)

# in-place writes into views of non-leaf tensors (and of plain tensors), beyond op_db's IV forms
INPLACE_VIEW_EXTRA = [
    GC("mul", (X34, _ts(_vals(("y",), (4,)), False)), {}, "contig", "call",
       lambda L, x, b: ((base := x * 1)[1].mul_(b), base)[1], desc="base[1].mul_(b)"),
    GC("add", (X34, _ts(_vals(("y",), (3, 2)), False)), {}, "contig", "call",
       lambda L, x, b: ((base := x * 1)[:, 1:3].add_(b, alpha=2), base)[1], desc="base[:, 1:3].add_(b)"),
    GC("exp", (X34,), {}, "contig", "call",
       lambda L, x: ((base := x * 1).narrow(0, 1, 2).exp_(), base)[1], desc="narrow.exp_"),
    GC("sin", (X34,), {}, "contig", "call",
       lambda L, x: ((base := x * 1).diagonal().sin_(), base)[1], desc="diagonal.sin_"),
    GC("copy_", (X34, _ts(_vals(("y",), (4,)), False)), {}, "contig", "call",
       lambda L, x, s: ((base := x * 1)[0].copy_(s), base)[1], desc="base[0].copy_(s)"),
    GC("copy_", (_ts(_vals(("y",), (4,)), False),), {}, "contig", "call",
       lambda L, s: ((base := L.zeros(3, 4, dtype=L.float64))[2].copy_(s), base)[1],
       desc="plain base[2].copy_(s)"),
    GC("mul", (X34,), {}, "contig", "call",
       lambda L, x: ((base := x * 1), (v := base[:, 1]), v.mul_(3), base * v.unsqueeze(1))[-1],
       desc="base and view both used after the write"),
    GC("mul", (X34, _ts(_vals(("y",), (2,)), False)), {}, "contig", "call",
       lambda L, x, b: ((base := x * 1), base[0][1:3].mul_(b), base)[-1], desc="view of a view"),
    GC("mul", (X34, _ts(_vals(("y",), (3,)), False)), {}, "contig", "call",
       lambda L, x, b: ((base := x * 1), (v := base[:, 0]), v.mul_(b), v.mul_(b), base)[-1],
       desc="two writes through one view"),
    GC("tanh", (X34,), {}, "contig", "call",
       lambda L, x: ((base := x * 1), (v := base[1]), v.tanh_(), (base, v * 2))[-1], desc="view used after"),
]

# the areas' cases (tests/autograd_cases_*.py): op_db kinds whose samples are
# used, extra cases, second-derivative checks
AREAS = (autograd_cases_reduce, autograd_cases_join, autograd_cases_index, autograd_cases_nn,
         autograd_cases_loss, autograd_cases_act)
AREAS += (autograd_cases_poolnorm, autograd_cases_interp, autograd_cases_conv, autograd_cases_attn,
          autograd_cases_complex, autograd_cases_spectral)
DB_KINDS = {"ew", "view", "plain", "mm"}.union(*(m.DB_KINDS for m in AREAS))
for _m in AREAS:
    for _op, _cs in _m.EXTRA.items():
        EXTRA.setdefault(_op, []).extend(_cs)
    INPLACE_VIEW_EXTRA += _m.INPLACE_VIEW_EXTRA

# which cases cover which BACKWARD_LIST row: op_db's + the extras
CASES = {}
for _name in BACKWARD:
    _c = _db_cases(_name)
    CASES[(_name, "")] = _c[""] + EXTRA.get(_name, [])
    CASES[(_name, "inplace")] = _c["inplace"] + [c for m in AREAS for c in getattr(m, "INPLACE", {}).get(_name, [])]
    CASES[(_name, "inplace_view")] = _c["inplace_view"]


def test_every_backward_op_is_gradchecked():
    missing = sorted(n for n in BACKWARD if not CASES[(n, "")])
    assert not missing, f"ops with a backward formula but no gradcheck case: {missing}"
    # and every op that has an in-place method is checked in place too
    no_inplace = sorted(n for n in BACKWARD if hasattr(ember.Tensor, n + "_") and not n.endswith("_")
                        and not CASES[(n, "inplace")]
                        and not (n + "_" in BACKWARD and CASES[(n + "_", "")]))  # its own row (bernoulli_)
    assert not no_inplace, f"in-place methods without an in-place gradcheck: {no_inplace}"


# ---------------------------------------------------------------------------
# running many cases in one test, reporting every failure
class Failures:
    def __init__(self):
        self.msgs = []

    @contextmanager
    def case(self, c):
        try:
            yield
        except Exception as e:
            msg = str(e).strip().split("\nnumerical:")[0]  # gradcheck's matrices: too long to list
            self.msgs.append(f"{c!r}\n    {type(e).__name__}: {msg[:500]}")

    def check(self):
        if self.msgs:
            pytest.fail(f"{len(self.msgs)} failing case(s):\n" + "\n".join(self.msgs), pytrace=False)


def gradcheck_case(c):
    leaves, fn = build(ember, c)
    assert gradcheck(fn, tuple(leaves), **c.tol)


def _params(kind):
    return [pytest.param(n, id=n) for n in sorted(BACKWARD) if CASES[(n, kind)]]


@pytest.mark.parametrize("name", _params(""))
def test_gradcheck(name):
    """Out-of-place: every sample, every layout (contiguous, transposed, sliced, expanded, 0-d)."""
    fails = Failures()
    for c in CASES[(name, "")]:
        with fails.case(c):
            gradcheck_case(c)
    fails.check()


@pytest.mark.parametrize("name", _params("inplace"))
def test_gradcheck_inplace(name):
    """x = a * 1; x.op_(...): gradients through an in-place op on a non-leaf."""
    fails = Failures()
    for c in CASES[(name, "inplace")]:
        with fails.case(c):
            gradcheck_case(c)
    fails.check()


@pytest.mark.parametrize("name", _params("inplace_view"))
def test_gradcheck_inplace_view(name):
    """base = a * 1; base.t().op_(...) / base[..., ::2].op_(...): the base's history is rewritten."""
    fails = Failures()
    for c in CASES[(name, "inplace_view")]:
        with fails.case(c):
            gradcheck_case(c)
    fails.check()


def test_gradcheck_empty_output():
    """An op whose result has no elements: gradcheck has nothing to compare and must pass."""
    x = ember.from_numpy(_vals(("e",), (3, 4))).requires_grad_()
    assert gradcheck(lambda x: x.narrow(1, 0, 0), (x,))
    assert gradcheck(lambda x: x[:, 2:2] * 2, (x,))


@pytest.mark.parametrize("c", [pytest.param(c, id=c.desc) for c in INPLACE_VIEW_EXTRA])
def test_gradcheck_inplace_view_extra(c):
    gradcheck_case(c)


def test_inplace_view_values_by_hand():
    """base = a * 1; base[1].mul_(b): d base / d a is 1 off row 1 and b on it; d/db = a[1]."""
    a = ember.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=ember.float64, requires_grad=True)
    b = ember.tensor([5.0, 7.0], dtype=ember.float64, requires_grad=True)
    base = a * 1
    base[1].mul_(b)
    assert type(base.grad_fn).__name__ == "CopySlices"
    base.backward(ember.tensor([[1.0, 10.0], [100.0, 1000.0]], dtype=ember.float64))
    assert a.grad.tolist() == [[1.0, 10.0], [500.0, 7000.0]]
    assert b.grad.tolist() == [300.0, 4000.0]


# ---------------------------------------------------------------------------
# second derivatives
GG = [
    ("add", lambda a, b: ember.add(a, b, alpha=2) * a, 2),
    ("sub", lambda a, b: (a - b) * (a - 3), 2),
    ("mul", lambda a, b: a * b * a, 2),
    ("div", lambda a, b: a / b, 2),
    ("pow", lambda a, b: a ** b, 2),
    ("pow scalar", lambda a: a ** 3 + a ** 0.5, 1),
    ("rpow", lambda a: 2.0 ** a, 1),
    ("exp", lambda a: a.exp(), 1),
    ("log", lambda a: a.log(), 1),
    ("sin", lambda a: a.sin(), 1),
    ("cos", lambda a: a.cos(), 1),
    ("tanh", lambda a: a.tanh(), 1),
    ("sigmoid", lambda a: a.sigmoid(), 1),
    ("sqrt", lambda a: a.sqrt(), 1),
    ("where", lambda a, b: ember.where(a > 1, a * a, b * a), 2),
    ("clamp", lambda a: (a * a).clamp(0.5, 2.5), 1),
    ("clamp tensor", lambda a, b: ember.clamp(a * a, b, b + 1.5), 2),
    ("reshape", lambda a: (a * a).reshape(3, 2), 1),
    ("permute", lambda a: (a * a).unsqueeze(0).permute(2, 0, 1), 1),
    ("expand", lambda a: (a * a)[:1].expand(4, 3), 1),
    ("select", lambda a: (a * a).select(1, 2), 1),
    ("narrow", lambda a: (a * a).narrow(1, 1, 2), 1),
    ("index", lambda a: (a * a)[1, ::2], 1),
    ("transpose", lambda a: (a * a).t(), 1),
]


for _m in AREAS:
    GG += _m.GG


@pytest.mark.parametrize("name,fn,n", [pytest.param(*g, id=g[0]) for g in GG])
def test_gradgradcheck(name, fn, n):
    rng = rng_for("gg", name)
    xs = [ember.from_numpy(rng.uniform(0.5, 2.0, (2, 3))).requires_grad_() for _ in range(n)]
    assert gradgradcheck(fn, tuple(xs))


def test_gradgradcheck_mm():
    rng = rng_for("gg", "mm")
    a = ember.from_numpy(rng.uniform(-1, 1, (2, 3))).requires_grad_()
    b = ember.from_numpy(rng.uniform(-1, 1, (3, 2))).requires_grad_()
    assert gradgradcheck(lambda a, b: ember.mm(a, b).tanh(), (a, b))
    assert gradgradcheck(lambda a, b: ember.mm(a.t().t(), b * b), (a, b))


def test_second_derivative_by_hand():
    """d2/dx2 of x^3 sin(x) against the closed form."""
    x = ember.tensor([0.3, 1.1, -2.0], dtype=ember.float64, requires_grad=True)
    y = x ** 3 * x.sin()
    (g,) = ember.autograd.grad(y, x, ember.ones_like(y), create_graph=True)
    (h,) = ember.autograd.grad(g, x, ember.ones_like(g))
    xv = np.array([0.3, 1.1, -2.0])
    np.testing.assert_allclose(g.detach().numpy(), 3 * xv ** 2 * np.sin(xv) + xv ** 3 * np.cos(xv), rtol=1e-12)
    want = 6 * xv * np.sin(xv) + 6 * xv ** 2 * np.cos(xv) - xv ** 3 * np.sin(xv)
    np.testing.assert_allclose(h.numpy(), want, rtol=1e-12)


# ---------------------------------------------------------------------------
# at kinks and poles: torch's conventions, by hand
def _grads(L, f, *vals):
    xs = [L.tensor(v, dtype=L.float64, requires_grad=True) for v in vals]
    y = f(L, *xs)
    y.backward(L.ones_like(y))
    return [x.grad.tolist() for x in xs]


INF, NAN = float("inf"), float("nan")
KINKS = [  # (id, f(L, *xs), inputs, hand-computed gradients or None: torch only)
    ("abs at 0", lambda L, x: x.abs(), [[0.0, -2.0, 3.0]], [[0.0, -1.0, 1.0]]),
    ("relu at 0", lambda L, x: x.relu(), [[0.0, -2.0, 3.0]], [[0.0, 0.0, 1.0]]),
    ("sign", lambda L, x: x.sign(), [[0.0, -2.0]], [[0.0, 0.0]]),
    ("floor", lambda L, x: x.floor() + x.ceil() + x.round() + x.trunc(), [[1.0, 1.5]], [[0.0, 0.0]]),
    ("maximum tie", lambda L, a, b: L.maximum(a, b), [[1.0, 2.0, 3.0], [1.0, 1.0, 4.0]],
     [[0.5, 1.0, 0.0], [0.5, 0.0, 1.0]]),
    ("minimum tie", lambda L, a, b: L.minimum(a, b), [[1.0, 2.0, 3.0], [1.0, 1.0, 4.0]],
     [[0.5, 0.0, 1.0], [0.5, 1.0, 0.0]]),
    ("sqrt at 0", lambda L, x: x.sqrt(), [[0.0, 4.0]], [[INF, 0.25]]),
    ("log at 0", lambda L, x: x.log(), [[0.0, 2.0]], [[INF, 0.5]]),
    ("nan_to_num", lambda L, x: x.nan_to_num(), [[NAN, INF, -INF, 1.0]], [[0.0, 0.0, 0.0, 1.0]]),
    ("pow x**0", lambda L, x: x ** 0, [[0.0, 2.0]], [[0.0, 0.0]]),
    ("pow 0**2", lambda L, x: x ** 2, [[0.0, -3.0]], [[0.0, -6.0]]),
    ("pow 0**0 tensors", lambda L, a, b: a ** b, [[0.0, 0.0, 2.0], [0.0, 2.0, 0.0]],
     [[0.0, 0.0, 0.0], [0.0, 0.0, 0.6931471805599453]]),
    ("rpow 2**b", lambda L, b: 2.0 ** b, [[0.0, 1.0]], [[0.6931471805599453, 1.3862943611198906]]),
    ("copysign at 0", lambda L, a, b: L.copysign(a, b), [[0.0, 2.0, -2.0], [-1.0, -1.0, 1.0]],
     [[0.0, -1.0, -1.0], [0.0, 0.0, 0.0]]),
    ("where: no gradient to the unselected branch", lambda L, a, b: L.where(a > 0, a, b),
     [[1.0, -1.0], [5.0, 6.0]], [[1.0, 0.0], [0.0, 1.0]]),
    ("fmax nan", lambda L, a, b: L.fmax(a, b), [[NAN, 2.0, 1.0], [1.0, NAN, 3.0]],
     [[0.0, 1.0, 0.0], [1.0, 0.0, 1.0]]),
    ("remainder", lambda L, a, b: L.remainder(a, b), [[5.5, -5.5], [2.0, 2.0]], [[1.0, 1.0], [-2.0, 3.0]]),
    ("fmod", lambda L, a, b: L.fmod(a, b), [[5.5, -5.5], [2.0, 2.0]], [[1.0, 1.0], [-2.0, 2.0]]),
    ("lerp", lambda L, a, b, w: L.lerp(a, b, w), [[1.0], [3.0], [0.25]], [[0.75], [0.25], [2.0]]),
    # conventions where torch is the only reference
    ("clamp at number bounds", lambda L, x: x.clamp(-1, 1), [[-1.0, 1.0, 0.0, 2.0]], None),
    ("clamp_min at bound", lambda L, x: x.clamp_min(-1), [[-1.0, 0.0]], None),
    ("clamp at tensor bounds", lambda L, x, lo, hi: x.clamp(lo, hi),
     [[-1.0, 1.0, 0.0, 2.0], [-1.0] * 4, [1.0] * 4], None),
    ("fmax tie", lambda L, a, b: L.fmax(a, b), [[1.0], [1.0]], None),
    ("fmin tie", lambda L, a, b: L.fmin(a, b), [[1.0], [1.0]], None),
    ("atan2 at (0,0)", lambda L, a, b: L.atan2(a, b), [[0.0], [0.0]], None),
    ("hypot at (0,0)", lambda L, a, b: L.hypot(a, b), [[0.0], [0.0]], None),
    ("asin at 1", lambda L, x: x.asin(), [[1.0]], None),
    ("x * log(x) at 0", lambda L, x: x * x.log(), [[0.0]], None),
]


def _same(a, b):
    np.testing.assert_array_equal(np.array(a, np.float64), np.array(b, np.float64))


@pytest.mark.parametrize("name,f,vals,want", [pytest.param(*k, id=k[0]) for k in KINKS if k[3] is not None])
def test_kink_by_hand(name, f, vals, want):
    for got, w in zip(_grads(ember, f, *vals), want):
        _same(got, w)


@needs_torch
@pytest.mark.parametrize("name,f,vals,want", [pytest.param(*k, id=k[0]) for k in KINKS])
def test_kink_matches_torch(name, f, vals, want):
    for got, w in zip(_grads(ember, f, *vals), _grads(_torch, f, *vals)):
        _same(got, w)


# ---------------------------------------------------------------------------
# against torch: grad_fn names and the gradients themselves
def _torch_cases(name):
    return [c for kind in ("", "inplace", "inplace_view") for c in CASES[(name, kind)]
            if c.torch_ref and c.layout in ("contig", "T")]


# torch names a node for these in-place forms but has no formula ("derivative for 'inplace
# version of acosh' is not implemented"): only gradcheck checks ember's gradients there
TORCH_NO_INPLACE_GRAD = {"acosh", "asinh", "atanh"}
# ops torch has only for CUDA tensors: no torch case on the CPU; their grad_fn names and gradients are
# checked on the GPU (or the fake) by their own tests (tests/test_cuda_attention.py, test_cuda_attention_mem.py)
TORCH_CUDA_ONLY = {"_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention"}


def _np(L, g):
    g = g.detach().double()
    return g.numpy(force=True).copy() if L is _torch else g.numpy().copy()  # torch: maybe a ZeroTensor


def _outs(r):
    return list(r) if isinstance(r, (tuple, list)) else [r]


@needs_torch
@pytest.mark.parametrize("name", sorted(BACKWARD))
def test_grad_fn_name_matches_torch(name):
    """type(y.grad_fn).__name__ as torch names it, for every call form of the op."""
    fails, n = Failures(), 0
    for c in _torch_cases(name):
        with fails.case(c):
            e_leaves, e_fn = build(ember, c)
            t_leaves, t_fn = build(_torch, c)
            e_out, t_out = _outs(e_fn(*e_leaves)), _outs(t_fn(*t_leaves))
            n += 1
            for eo, to in zip(e_out, t_out):
                e_name, t_name = type(eo.grad_fn).__name__, type(to.grad_fn).__name__
                assert e_name == t_name, f"ember {e_name}, torch {t_name}"
    fails.check()
    assert n or not CASES[(name, "")] or name in TORCH_CUDA_ONLY


@needs_torch
@pytest.mark.parametrize("name", sorted(BACKWARD))
def test_gradients_match_torch(name):
    """The same calls, the same upstream gradient: the same leaf gradients as torch."""
    fails = Failures()
    for c in _torch_cases(name):
        if name in TORCH_NO_INPLACE_GRAD and c.form != "F":
            continue
        with fails.case(c):
            got, want = [], []
            for L, acc in ((ember, got), (_torch, want)):
                leaves, fn = build(L, c)
                outs = [o for o in _outs(fn(*leaves)) if o.requires_grad]
                rng = rng_for("upstream", name)
                gos = [L.from_numpy(rng.uniform(-1, 1, tuple(o.shape))).to(o.dtype) for o in outs]
                L.autograd.backward(outs, gos)
                acc += [None if x.grad is None else _np(L, x.grad) for x in leaves]
            for g, w in zip(got, want):
                if w is None or g is None:
                    assert g is None or not np.any(g), "ember has a gradient where torch has none"
                    continue
                np.testing.assert_allclose(g, w, rtol=1e-7, atol=1e-9, equal_nan=True)
    fails.check()
