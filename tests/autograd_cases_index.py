"""Gradcheck cases for the backward formulas of csrc/autograd/derivatives_index.c,
merged into tests/test_autograd_ops.py's tables: op_db's "index" samples
(minus those gradcheck can't judge, see usable()), x[key] and x[key] = v with
many kinds of keys, and second derivatives."""
import numpy as np

from autograd_common import ALL4, GC, S0, V4, X34, Y34, _calls, _ts, _vals  # noqa: F401
from op_db import TS

DB_KINDS = {"index"}     # op_db kinds whose float64 samples become gradcheck cases


def _np(a):
    return np.asarray(a.values) if isinstance(a, TS) else a


def _scatter_targets(shape, dim, index):
    """The self positions a scatter along dim writes, one per index element."""
    idx = np.asarray(index)
    out = []
    for pos in np.ndindex(idx.shape):
        p = list(pos)
        if p:
            p[dim % idx.ndim] = int(idx[pos])
        out.append(tuple(p) if len(shape) else ())
    return out


def _dups(xs):
    return len(xs) != len(set(xs))


def usable(op, s, layout):
    """False for samples where gradcheck (or torch) has no single answer:
    scatter's reduce= forms (torch has no derivative), a src larger than its
    index (torch rejects its own gradient: cases below, torch_ref=False),
    duplicate writes (the last one wins, but torch gives every duplicate the
    gradient), amax/amin ties (self counts even with include_self=False, as
    in torch), setitem on a leaf (cases below use x * 1), and a flattened
    take_along_dim of a transposed input (torch's forward views it: an error)."""
    n, a = op.name, s.args
    if n == "_index_put_":
        return False
    if n == "take_along_dim" and s.desc == "flattened" and layout == "T":
        return False
    if n == "scatter" and s.kwargs.get("reduce"):
        return False
    if s.desc in ("src larger than index", "0-d value, negative index"):
        return False  # torch's own backward fails on these: cases below with torch_ref=False
    if n == "scatter" and "value" not in s.kwargs and len(a) > 3 and isinstance(a[3], TS):
        return not _dups(_scatter_targets(np.shape(_np(a[0])), a[1], _np(a[2])))
    if n == "index_copy":
        return not _dups(np.asarray(_np(a[2])).reshape(-1).tolist())
    if n == "index_put" and not (len(a) > 3 and a[3]):
        idx = [np.asarray(_np(i)) for i in a[1]]
        if any(i.dtype == bool for i in idx):
            return True
        shape = np.shape(_np(a[0]))
        flat = list(zip(*[(b % shape[d]).reshape(-1).tolist() for d, b in enumerate(np.broadcast_arrays(*idx))]))
        return not _dups(flat)
    if n == "scatter_reduce" and a[4] in ("amax", "amin"):
        x, dim, idx, src = (np.asarray(_np(v)) for v in (a[0], a[1], a[2], a[3]))
        groups = {}
        for pos in np.ndindex(idx.shape):
            t = list(pos)
            if t:
                t[int(dim) % idx.ndim] = int(idx[pos])
            t = tuple(t) if x.ndim else ()
            groups.setdefault(t, []).append(float(src[pos] if src.ndim else src))
        for t in groups:
            groups[t].append(float(x[t]))
        return not any(_dups(g) for g in groups.values())
    return True


I6 = lambda v: TS(np.array(v, np.int64), "int64", False)  # noqa: E731
MASK34 = TS(np.array([[1, 0, 1, 1], [0, 0, 1, 0], [1, 1, 0, 1]], bool), "bool", False)
IDX = I6([[0, 3], [1, 1], [2, 0]])  # a duplicate along dim 1 in row 1
BIG = _ts(_vals(("big",), (4, 5)), lay=False)


def _getitem(key):
    return lambda L, x: x[key]


class K:
    """A key item to become a tensor of the library under test: indices or a mask."""
    def __init__(self, v, mask=False):
        self.v, self.mask = v, mask

    def __repr__(self):
        return f"K({self.v!r})"


def _key(L, k):
    def one(i):
        return L.tensor(i.v, dtype=L.bool if i.mask else L.int64) if isinstance(i, K) else i
    return tuple(one(i) for i in k) if isinstance(k, tuple) else one(k)


GETITEM_KEYS = [  # (desc, key): advanced, mixed and basic keys
    ("[[0, 0]] duplicates", [0, 0]),
    ("[[2, 0, 2]]", [2, 0, 2]),
    ("[t([1, -1])]", K([1, -1])),
    ("[1:, [0, 2]]", (slice(1, None), [0, 2])),
    ("[[0, 2], 1:]", ([0, 2], slice(1, None))),
    ("[[0, 2], 1]", ([0, 2], 1)),
    ("[[0, 1, 1], [3, 3, 0]] pairs", ([0, 1, 1], [3, 3, 0])),
    ("[[[0], [2]], [1, 3]] broadcast", ([[0], [2]], [1, 3])),
    ("[:, [1, 1]]", (slice(None), [1, 1])),
    ("[..., [3, 0, 3]]", (Ellipsis, [3, 0, 3])),
    ("[None, [0, 0]]", (None, [0, 0])),
    ("[mask]", K(MASK34.values.tolist(), True)),
    ("[row mask]", K([True, False, True], True)),
    ("[[0, 2], ::2]", ([0, 2], slice(None, None, 2))),
    ("[True]", True),
    ("[1, ::2] basic", (1, slice(None, None, 2))),
    ("[None, ..., -1] basic", (None, Ellipsis, -1)),
]


def _getitem_case(desc, key):
    return _calls("_index", lambda L, x, k=key: x[_key(L, k)], X34, layouts=ALL4, desc=desc)


def _setitem(key, inplace_view=False):
    def call(L, x, v):
        y = x * 1
        target = y[:, ::2] if inplace_view else y
        target[_key(L, key)] = v
        return y
    return call


SETITEM = [  # (desc, key, value shape): x[key] = v with both requiring grad
    ("[[0, 2]] = (4,)", [0, 2], (4,)),
    ("[[0, 2]] = (2, 4)", [0, 2], (2, 4)),
    ("[mask] = ()", K(MASK34.values.tolist(), True), ()),
    ("[mask] = (7,)", K(MASK34.values.tolist(), True), (7,)),
    ("[1:, [0, 2]] = (2,)", (slice(1, None), [0, 2]), (2,)),
    ("[[0, 2], 1:] = (1, 3)", ([0, 2], slice(1, None)), (1, 3)),
    ("[:, [1, 3]] = (3, 1)", (slice(None), [1, 3]), (3, 1)),
    ("[..., [3]] = (3, 1)", (Ellipsis, [3]), (3, 1)),
    ("[[0, 1], [3, 3]] = (2,)", ([0, 1], [3, 3]), (2,)),
    ("[1] = (4,) basic", 1, (4,)),
    ("[:, 1:3] = (3, 2) basic", (slice(None), slice(1, 3)), (3, 2)),
    ("[1, 2] = () basic", (1, 2), ()),
]

EXTRA = {  # op -> [GC]: cases op_db's samples don't give
    "_index": [c for d, k in GETITEM_KEYS for c in _getitem_case(d, k)] +
    _calls("_index", lambda L, x: x[[0, 0]][:, [1, 1]], X34, desc="advanced twice") +
    _calls("_index", lambda L, x: (x * 2)[[1, 1, 2]] * x[[0, 0, 1]], X34, desc="advanced of non-leaves"),
    "_index_put_": [c for d, k, sh in SETITEM
                    for c in _calls("_index_put_", _setitem(k), X34, _ts(_vals(("sv", d), sh), False), desc=d)] +
    _calls("_index_put_", _setitem(([0, 2], [1, 0]), inplace_view=True), X34,
           _ts(_vals(("sv",), (2,)), False), desc="into a view y[:, ::2][[0, 2], [1, 0]]") +
    _calls("_index_put_", lambda L, v: (y := L.zeros(3, 4, dtype=L.float64), y.__setitem__([2, 0], v), y)[-1],
           _ts(_vals(("sv",), (2, 4)), False), desc="into a plain tensor"),
    "index_put": _calls("index_put", lambda L, x, v: x.index_put((L.tensor([0, 2]), L.tensor([1, 1])), v, True),
                        X34, _ts(_vals(("ip",), (2,)), False), desc="accumulate") +
    _calls("index_put", lambda L, x, v: (x * 1).index_put_((L.tensor([0, 0]),), v, accumulate=True),
           X34, V4, desc="index_put_ duplicates, accumulate"),
    # a src larger than its index: only its first part is read (torch rejects its own gradient)
    "scatter": _calls("scatter", lambda L, x, s: x.scatter(1, L.tensor([[0, 3], [1, 2]]), s), X34, Y34,
                      desc="src larger than index", torch_ref=False) +
    _calls("scatter", lambda L, x, v: x.scatter(1, L.tensor([[0, 3], [1, 2]]), value=2.0) * v, X34, Y34,
           desc="value"),
    "scatter_add": _calls("scatter_add", lambda L, x, s: x.scatter_add(0, L.tensor([[0, 0, 2, 1]]), s), X34, Y34,
                          desc="src larger than index", torch_ref=False),
    "scatter_reduce": [
        c for r in ("sum", "prod", "mean", "amax", "amin") for inc in (True, False)
        for c in _calls("scatter_reduce", lambda L, x, s, r=r, inc=inc:
                        x.scatter_reduce(1, L.tensor([[0, 0, 3], [2, 2, 2], [1, 0, 1]]), s[:, :3], r,
                                         include_self=inc), X34, Y34, desc=f"{r} include_self={inc}")] +
    _calls("scatter_reduce", lambda L, x, s: x.scatter_reduce(1, L.tensor([[0, 3], [1, 2]]), s, "prod"),
           X34, Y34, desc="src larger than index", torch_ref=False),
    "masked_fill": _calls("masked_fill", lambda L, x, v: x.masked_fill(L.tensor(MASK34.values), v), X34, S0,
                          layouts=ALL4, desc="0-d tensor value") +
    _calls("masked_fill", lambda L, x, v: (x * 1).masked_fill_(L.tensor(MASK34.values), v), X34, S0,
           desc="masked_fill_ 0-d tensor value"),
    "index_fill": _calls("index_fill", lambda L, x, v: x.index_fill(1, L.tensor([0, 2, 2]), v), X34, S0,
                         desc="0-d tensor value") +
    _calls("index_fill", lambda L, x, v: x.index_fill(-1, L.tensor([-1, 0]), v), X34, S0, layouts=ALL4,
           desc="negative index", torch_ref=False),
    "take": _calls("take", lambda L, x: x.take(L.tensor([[0, -1, 5], [5, 5, 11]])), X34, layouts=ALL4,
                   desc="duplicates, negative"),
    "take_along_dim": _calls("take_along_dim", lambda L, x: L.take_along_dim(x, L.tensor([[-1], [0], [0]]), 1),
                             X34, layouts=ALL4, desc="negative, duplicates"),
    "gather": _calls("gather", lambda L, x: x.gather(1, L.tensor(IDX.values)), X34, layouts=ALL4, desc="dups"),
    "index_select": _calls("index_select", lambda L, x: x.index_select(0, L.tensor([2, 2, 0])), X34, layouts=ALL4,
                           desc="dups"),
}

# in-place writes into views of non-leaf tensors
_M = MASK34.values


INPLACE_VIEW_EXTRA = [
    GC("masked_fill", (X34,), {}, "contig", "call",
       lambda L, x: ((b := x * 1).t().masked_fill_(L.tensor(_M.T.copy()), 1.5), b)[1], desc="t().masked_fill_"),
    GC("masked_fill", (X34, S0), {}, "contig", "call",
       lambda L, x, v: ((b := x * 1)[1:].masked_fill_(L.tensor(_M[1:].copy()), v), b)[1],
       desc="[1:].masked_fill_(0-d value)"),
    GC("scatter", (X34, Y34), {}, "contig", "call",
       lambda L, x, s: ((b := x * 1)[:, 1:].scatter_(1, L.tensor([[0, 2], [1, 0], [2, 1]]), s), b)[1],
       desc="[:, 1:].scatter_"),
    GC("scatter_add", (X34, Y34), {}, "contig", "call",
       lambda L, x, s: ((b := x * 1).t().scatter_add_(0, L.tensor([[0, 0, 2], [3, 1, 3]]), s[:2, :3]), b)[1],
       desc="t().scatter_add_"),
    GC("scatter_reduce", (X34, Y34), {}, "contig", "call",
       lambda L, x, s: ((b := x * 1)[1:].scatter_reduce_(1, L.tensor([[0, 0], [3, 1]]), s[:2, :2], "prod"),
                        b)[1], desc="[1:].scatter_reduce_ prod"),
    GC("index_add", (X34, Y34), {}, "contig", "call",
       lambda L, x, s: ((b := x * 1)[:, ::2].index_add_(0, L.tensor([2, 2]), s[:2, :2], alpha=3), b)[1],
       desc="[:, ::2].index_add_"),
    GC("index_copy", (X34, Y34), {}, "contig", "call",
       lambda L, x, s: ((b := x * 1).t().index_copy_(1, L.tensor([2, 0]), s[:2].t()), b)[1],
       desc="t().index_copy_"),
    GC("index_fill", (X34,), {}, "contig", "call",
       lambda L, x: ((b := x * 1)[1].index_fill_(0, L.tensor([0, 3]), -1.0), b)[1], desc="[1].index_fill_"),
    GC("index_put", (X34, V4), {}, "contig", "call",
       lambda L, x, v: ((b := x * 1)[1:].index_put_((L.tensor([1, 1]),), v, accumulate=True), b)[1],
       desc="[1:].index_put_ accumulate"),
    GC("masked_scatter", (X34, Y34), {}, "contig", "call",
       lambda L, x, s: ((b := x * 1).t().masked_scatter_(L.tensor(_M.T.copy()), s), b)[1],
       desc="t().masked_scatter_"),
]

GG = [  # (id, fn, number of (2, 3) float64 inputs): gradgradcheck
    ("gather", lambda a: (a * a).gather(1, _gg_idx(a, [[0, 2, 2], [1, 0, 0]])), 1),
    ("index_select", lambda a: (a * a).index_select(1, _gg_idx(a, [2, 0, 2])), 1),
    ("masked_fill", lambda a, b: (a * b).masked_fill(a > 1.2, 0.5), 2),
    ("getitem advanced", lambda a: (a * a)[[1, 1, 0]][:, [2, 2]], 1),
    ("getitem mask", lambda a: (a * a)[a > 1.0], 1),
    ("getitem mixed", lambda a: (a * a)[1:, [0, 2, 0]], 1),
    ("setitem", lambda a, b: _gg_set(a, b), 2),
    ("scatter_add", lambda a, b: (a * a).scatter_add(1, _gg_idx(a, [[0, 0], [2, 1]]), b * b), 2),
    ("scatter_reduce mean", lambda a, b: (a * a).scatter_reduce(1, _gg_idx(a, [[0, 0], [2, 1]]), b * b, "mean"), 2),
    ("index_add", lambda a, b: (a * a).index_add(1, _gg_idx(a, [0, 0, 2]), b * b, alpha=2), 2),
    ("take", lambda a: (a * a).take(_gg_idx(a, [0, 5, 5, -1])), 1),
    ("masked_select", lambda a: (a * a).masked_select(a > 1.0), 1),
]


def _gg_idx(a, v):
    return a.new_tensor(v).long()


def _gg_set(a, b):
    y = a * a
    y[[0, 1, 1], [2, 0, 0]] = (b * b)[0]
    return y
