"""What the gradcheck tests share (tests/test_autograd_ops.py and the
per-area case modules tests/autograd_cases_*.py): the GC case record, how a
case's leaves are laid out and its call is made, and small float64 inputs."""
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from op_db import DT, NP, TS, is_float, rng_for


# ---------------------------------------------------------------------------
# a gradcheck case: an op_db sample (or a custom call) in a layout and a form
@dataclass
class GC:
    op: str                   # the BACKWARD_LIST row it exercises
    args: tuple               # TS (float ones become leaves requiring grad), numbers, other values
    kwargs: dict = field(default_factory=dict)
    layout: str = "contig"    # contig | T | slice | expand | 0d: how the leaves are laid out
    form: str = "F"           # F: L.op(...)  M: arg0.op(...)  call: call(L, ...)
    #                           I: (arg0 * 1).op_(...)   IV-T / IV-S: op_ on a transposed / strided
    #                           view of a non-leaf; the base and the view are both outputs
    call: Callable = None
    desc: str = ""
    tol: dict = field(default_factory=dict)  # gradcheck's eps / atol / rtol
    torch_ref: bool = True    # torch has this call (and a formula for it)

    def __repr__(self):
        return f"<{self.op} {self.form} {self.layout} {self.desc} args={self.args!r} kw={self.kwargs!r}>"


def _leaf(L, v, layout):
    """A float64 leaf requiring grad that holds v in `layout`, and the function
    that turns it into the value the op sees (expanded inputs can't be
    gradcheck leaves: perturbing one element would move all its aliases)."""
    v = np.asarray(v, np.float64)
    if layout == "T" and v.ndim >= 2:
        t = L.from_numpy(np.ascontiguousarray(np.swapaxes(v, -1, -2))).transpose(-1, -2)
    elif layout == "slice" and v.ndim >= 1:
        big = np.full(v.shape[:-1] + (2 * v.shape[-1],), np.nan)  # NaN gaps: reading them shows
        big[..., ::2] = v
        t = L.from_numpy(big)[(slice(None),) * (v.ndim - 1) + (slice(None, None, 2),)]
    elif layout == "expand" and v.ndim >= 1 and v.shape[0] > 1:
        t = L.from_numpy(np.ascontiguousarray(v[:1]))
        return t.requires_grad_(), (lambda x, s=v.shape: x.expand(*s))
    else:
        t = L.from_numpy(v.copy())
    return t.requires_grad_(), (lambda x: x)


def _iv_leaf(L, v, form):
    """For IV forms: the leaf whose copy (a non-leaf) gets the view written into."""
    v = np.asarray(v, np.float64)
    if form == "IV-T":
        return L.from_numpy(np.ascontiguousarray(np.swapaxes(v, -1, -2))).requires_grad_()
    return L.from_numpy(np.repeat(v, 2, axis=-1)).requires_grad_()  # the view takes [..., ::2]


def run(L, case, args, kw):
    op, form = case.op, case.form
    if form == "F":
        return getattr(L, op)(*args, **kw)
    if form == "M":
        return getattr(args[0], op)(*args[1:], **kw)
    if form == "call":
        return case.call(L, *args, **kw)
    if form == "I":
        x = args[0] * 1
        r = getattr(x, op + "_")(*args[1:], **kw)
        assert r is x, f"{op}_ must return self"
        return x
    base = args[0] * 1
    view = base.transpose(-1, -2) if form == "IV-T" else base[..., ::2]
    r = getattr(view, op + "_")(*args[1:], **kw)
    assert r is view, f"{op}_ must return self"
    return base, view


def build(L, case):
    """(leaves, fn): gradcheck's inputs and the function of them. Float TS
    become leaves, also inside lists and tuples (cat's tensors, index keys);
    other TS (masks, indices) constants."""
    leaves = []

    def part(i, a):
        """a -> a function of gradcheck's inputs giving the op's argument."""
        if isinstance(a, (list, tuple)) and any(isinstance(x, TS) for x in a):
            fs = [part(None, x) for x in a]
            return lambda xs: type(a)(f(xs) for f in fs)
        if isinstance(a, TS) and is_float(a.dtype):
            if i == 0 and case.form.startswith("IV"):
                leaf, pre = _iv_leaf(L, a.values, case.form), (lambda x: x)
            else:
                leaf, pre = _leaf(L, a.values, case.layout if a.lay else "contig")
            k = len(leaves)
            leaves.append(leaf)
            return lambda xs: pre(xs[k])
        if isinstance(a, TS):  # masks and the like: constants
            const = L.from_numpy(np.array(a.values, NP[a.dtype]))
        else:
            const = getattr(L, a) if isinstance(a, DT) else a
        return lambda xs: const

    parts = [part(i, a) for i, a in enumerate(case.args)]
    kw_parts = {k: part(None, v) for k, v in case.kwargs.items()}

    def fn(*xs):
        return run(L, case, [p(xs) for p in parts], {k: p(xs) for k, p in kw_parts.items()})
    return leaves, fn


def _ts(v, lay=True):
    return TS(np.asarray(v, np.float64), "float64", lay, exact=True)


def _vals(key, shape, lo=-2.0, hi=2.0):
    return rng_for("autograd", *key).uniform(lo, hi, shape)


X34 = _ts(_vals(("x",), (3, 4)))
Y34 = _ts(_vals(("y",), (3, 4)))
V4 = _ts(_vals(("v",), (4,)), lay=False)
S0 = _ts(_vals(("s",), ()), lay=False)
ALL4 = ("contig", "T", "slice", "expand")


def _calls(op, call, *args, layouts=("contig",), desc="", **kw):
    return [GC(op, tuple(args), {}, lay, "call", call, desc, **kw) for lay in layouts]
