"""Gradcheck cases for the backward formulas of csrc/autograd/derivatives_reduce.c,
merged into tests/test_autograd_ops.py's tables."""
import numpy as np

import ember
from autograd_common import ALL4, GC, S0, V4, X34, Y34, _calls, _ts, _vals  # noqa: F401
from op_db import DT, TS

DB_KINDS = {"reduce", "sort"}  # op_db kinds whose float64 samples become gradcheck cases


def usable(op, s, layout):
    """Veto op_db samples where finite differences can't work for these ops."""
    if op.kind not in DB_KINDS:
        return True
    if op.name == "mode":
        return False  # mode's samples are full of ties (its point): see the distinct EXTRA cases
    vals = [a.values if isinstance(a, TS) else a for a in s.args]
    try:
        with np.errstate(all="ignore"):
            r = op.ref(*vals, **s.kwargs)
    except Exception:
        return True
    r = r if isinstance(r, tuple) else (r,)
    # a NaN result (var of one element): nothing finite to compare
    return all(np.all(np.isfinite(np.asarray(v, np.float64))) for v in r)


D34 = _ts(np.random.default_rng(5).permutation(12).reshape(3, 4) / 4.0 - 1.4)  # distinct values
Z1 = _ts([[0.5, 0.0, 1.5, -1.2], [1.1, 0.7, -0.9, 1.3], [0.0, 2.0, 0.0, 0.8]])  # one / two zeros per row
Z34 = _ts([[0.0, 0.5, 1.5, 0.0], [1.1, 0.0, -0.9, 1.3], [0.4, 2.0, 0.6, 0.0]])
P34 = _ts(_vals(("p",), (3, 4), 0.5, 1.5))
F32 = dict(eps=1e-2, atol=1e-3, rtol=1e-2)  # finite differences through float32

EXTRA = {  # op -> [GC]: cases op_db's samples don't give
    "sum": _calls("sum", lambda L, x: x.sum(), X34, layouts=ALL4, desc="x.sum()") +
    _calls("sum", lambda L, x: x.sum((), keepdim=True), X34, desc="dim=()") +
    _calls("sum", lambda L, x: x.sum([-1, 0]), X34, desc="dim list") +
    _calls("sum", lambda L, x: x.sum(0, dtype=L.float64), X34, desc="dtype=float64") +
    _calls("sum", lambda L, x: x.float().sum(1, dtype=L.float64), X34, tol=F32, desc="float32 dtype=float64"),
    "mean": _calls("mean", lambda L, x: x.mean(), X34, layouts=ALL4, desc="x.mean()") +
    _calls("mean", lambda L, x: x.mean((-2, -1), keepdim=True), X34, desc="dims keepdim"),
    "nansum": _calls("nansum", lambda L, x: L.nansum(x, 1), X34, desc="dim"),
    "nanmean": _calls("nanmean", lambda L, x: L.nanmean(x, (0, 1), keepdim=True), X34, desc="dims keepdim"),
    "prod": _calls("prod", lambda L, x: x.prod(), Z1, desc="zeros, all") +
    _calls("prod", lambda L, x: x.prod(1), Z1, desc="one and two zeros per row") +
    _calls("prod", lambda L, x: x.prod(0, keepdim=True), Z34, desc="zeros, dim 0") +
    _calls("prod", lambda L, x: x.prod(), _ts([[0.5, 0.0], [1.5, 2.0]]), desc="one zero, all") +
    _calls("prod", lambda L, x: x.prod(-1), P34, layouts=ALL4, desc="dim -1"),
    "cumprod": _calls("cumprod", lambda L, x: x.cumprod(1), Z1, desc="zeros") +
    _calls("cumprod", lambda L, x: x.cumprod(0), Z34, desc="zeros dim 0") +
    _calls("cumprod", lambda L, x: (x * 1).cumprod_(1), Z1, desc="zeros in place"),
    "cumsum": _calls("cumsum", lambda L, x: x.float().cumsum(1, dtype=L.float64), X34, tol=F32,
                     desc="float32 dtype=float64"),
    "amax": _calls("amax", lambda L, x: x.amax((0, 1)), X34, desc="dims"),
    "max": _calls("max", lambda L, a, b: L.max(a, b), X34, Y34, layouts=ALL4, desc="max(a, b)") +
    _calls("max", lambda L, a, b: L.max(a, other=b), X34, Y34, desc="other=") +
    _calls("max", lambda L, a, b: a.max(b), X34, Y34, desc="method") +
    _calls("max", lambda L, x: x.max(-1, keepdim=True)[0], X34, desc="values, keepdim"),
    "min": _calls("min", lambda L, a, b: L.min(a, b), X34, Y34, layouts=ALL4, desc="min(a, b)"),
    "mode": _calls("mode", lambda L, x: L.mode(x), D34, layouts=ALL4, desc="distinct") +
    _calls("mode", lambda L, x: x.mode(0, keepdim=True), D34, desc="dim 0"),
    "median": _calls("median", lambda L, x: x.median(), D34, layouts=ALL4, desc="all") +
    _calls("median", lambda L, x: x.median(-1, True), D34, desc="dim keepdim"),
    "nanmedian": _calls("nanmedian", lambda L, x: x.nanmedian(0), D34, desc="dim"),
    "var": _calls("var", lambda L, x: x.var((0, 1), correction=0), X34, desc="dims correction=0") +
    _calls("var", lambda L, x: x.var(1, unbiased=False, keepdim=True), X34, desc="unbiased=False"),
    "std": _calls("std", lambda L, x: x.std(-1, correction=2), X34, desc="correction=2"),
    "var_mean": _calls("var_mean", lambda L, x: L.var_mean(x, 1, keepdim=True), X34, desc="dim keepdim") +
    _calls("var_mean", lambda L, x: L.var_mean(x, 0)[1], X34, desc="mean only"),
    "std_mean": _calls("std_mean", lambda L, x: L.std_mean(x, (0, 1), correction=0), X34, desc="dims") +
    _calls("std_mean", lambda L, x: L.std_mean(x, 1)[0], X34, desc="std only"),
    "norm": _calls("norm", lambda L, x: x.norm("fro", dim=(0, 1)), X34, desc="fro dims") +
    _calls("norm", lambda L, x: x.norm(-2.5, dim=0), X34, desc="p=-2.5") +
    _calls("norm", lambda L, x: x.norm(1.5), X34, desc="p=1.5") +
    _calls("norm", lambda L, x: x.norm(-float("inf"), dim=1, keepdim=True), X34, desc="-inf dim") +
    _calls("norm", lambda L, x: x.float().norm(dtype=L.float64), X34, tol=F32, desc="float32 dtype=float64",
           torch_ref=False),  # float32 rounding: tests/test_autograd_reduce.py compares it with a float32 tolerance
    "_linalg_vector_norm": _calls("_linalg_vector_norm", lambda L, x: L.linalg.vector_norm(x, 4, (0, 1)), X34,
                                  desc="ord 4 dims"),
    "logsumexp": _calls("logsumexp", lambda L, x: x.logsumexp((0, 1), keepdim=True), X34, desc="dims keepdim"),
    "sort": _calls("sort", lambda L, x: x.sort(0, descending=True), X34, layouts=ALL4, desc="descending") +
    _calls("sort", lambda L, x: x.sort(stable=True), X34, desc="stable"),
    "msort": _calls("msort", lambda L, x: x.msort(), X34, layouts=ALL4) +
    _calls("msort", lambda L, x: L.msort(x[0]), X34, desc="1-d"),
    "topk": _calls("topk", lambda L, x: x.topk(2, 0, largest=False), X34, desc="smallest dim 0"),
    "kthvalue": _calls("kthvalue", lambda L, x: x.kthvalue(3, 0, keepdim=True), X34, desc="dim 0 keepdim"),
    "aminmax": _calls("aminmax", lambda L, x: L.aminmax(x, dim=-1)[1], X34, desc="max only"),
    "cummin": _calls("cummin", lambda L, x: x.cummin(-1), X34, layouts=ALL4),
}

INPLACE_VIEW_EXTRA = [  # in-place writes into views of non-leaves
    GC("cumsum", (X34,), {}, "contig", "call",
       lambda L, x: ((base := x * 1)[:, 1:].cumsum_(1), base)[1], desc="base[:, 1:].cumsum_(1)"),
]

# (id, fn, number of (2, 3) float64 inputs in [0.5, 2]): gradgradcheck. Those
# whose first derivative runs ops of other areas (scatter, flip) are in
# tests/test_autograd_reduce.py.
GG = [
    ("sum", lambda a: (a * a).sum(), 1),
    ("sum dim", lambda a: (a * a).sum(0) * a.sum(1, keepdim=True).sum(), 1),
    ("nansum", lambda a: ember.nansum(a * a, 1), 1),
    ("mean", lambda a: (a * a).mean(1, keepdim=True) * a, 1),
    ("nanmean", lambda a: ember.nanmean(a * a, 0), 1),
    ("prod", lambda a: a.prod(), 1),
    ("prod dim", lambda a: a.prod(1), 1),
    ("amax", lambda a: (a * a).amax(1), 1),
    ("amin", lambda a: (a * a).amin((0, 1)), 1),
    ("max all", lambda a: (a * a).max(), 1),
    ("max(a, b)", lambda a, b: ember.max(a * a, b), 2),
    ("aminmax", lambda a: ember.aminmax(a * a, dim=0)[1], 1),
    ("var", lambda a: a.var(1), 1),
    ("var all", lambda a: a.var(correction=0), 1),
    ("std", lambda a: a.std(0), 1),
    ("var_mean", lambda a: ember.var_mean(a, 1), 1),
    ("std_mean", lambda a: ember.std_mean(a), 1),
    ("norm", lambda a: a.norm(), 1),
    ("norm p=3 dim", lambda a: a.norm(3, dim=1), 1),
    ("norm p=0.5", lambda a: ember.linalg.vector_norm(a, 0.5), 1),
    ("norm p=inf", lambda a: (a * a).norm(float("inf"), dim=0), 1),
    ("logsumexp", lambda a: a.logsumexp(1), 1),
    ("logsumexp all", lambda a: a.logsumexp((0, 1)), 1),
]
