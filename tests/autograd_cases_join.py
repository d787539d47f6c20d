"""Gradcheck cases for the backward formulas of csrc/autograd/derivatives_join.c,
merged into tests/test_autograd_ops.py's tables.

op_db's "rearrange" samples (repeat, tile, repeat_interleave, flip*, roll, rot90,
diff) and its "view" samples of tensor_split / movedim / moveaxis / broadcast_to
and "join" ones of broadcast_tensors / meshgrid become cases by themselves; the
samples of cat and the stacks take a list of tensors, which the automatic cases
skip, so they are written out here."""
import numpy as np

from autograd_common import ALL4, GC, S0, V4, X34, Y34, _calls, _ts, _vals  # noqa: F401
from op_db import OPS_BY_NAME, TS, is_float

# op_db kinds whose float64 samples become gradcheck cases. Not "rearrange": its
# "big" samples (40 x 997) would make a 40k x 40k Jacobian; they are added below
# without those.
DB_KINDS = {"join"}

Z34 = _ts(_vals(("z",), (3, 4)))  # (expanded leaves of one TS would share memory: distinct TS per case)
X32 = _ts(_vals(("x32",), (3, 2)))
R24 = _ts(_vals(("r24",), (2, 4)))
W3 = _ts(_vals(("w",), (3,)), lay=False)
U3 = _ts(_vals(("u",), (3,)), lay=False)
T0 = _ts(_vals(("t",), ()), lay=False)
EMPTY = _ts(np.zeros(0), lay=False)          # the legacy empty 1-D tensor cat skips
E04 = _ts(np.zeros((0, 4)), lay=False)
INTS = TS(np.array([[1, -2, 3, 0]]), "int64", False)  # a part that needs no gradient


def _join(op, *args, layouts=ALL4, **kw):
    """GC cases calling L.<op>(*args, **kw) directly (lists of leaves included)."""
    return [GC(op, tuple(args), kw, lay, "F", desc=repr(kw) if kw else "") for lay in layouts]


_C = ("contig",)
EXTRA = {op: _join(op, [X34, Y34]) + _join(op, [X34, Y34, Z34], 0) + _join(op, [X34, X32], **{kw: 1}) +
         _join(op, [X34, X32], **{kw: -1}) + _join(op, [X34], layouts=_C) +
         _join(op, [EMPTY, X34, EMPTY], layouts=_C) + _join(op, [E04, X34, R24], layouts=_C) +
         _join(op, [X34, INTS], layouts=_C)
         for op, kw in (("cat", "dim"), ("concat", "dim"), ("concatenate", "axis"))}
EXTRA["cat"] += _join("cat", [EMPTY, EMPTY], layouts=_C) + _join("cat", [V4, EMPTY, V4], layouts=_C)
EXTRA["stack"] = (_join("stack", [X34, Y34]) + _join("stack", [X34, Y34, Z34], -1) +
                  _join("stack", [X34, Y34], 1) + _join("stack", [T0, S0], layouts=_C) +
                  _join("stack", [V4], dim=1, layouts=_C))
for _op in ("hstack", "vstack", "row_stack", "dstack", "column_stack"):
    EXTRA[_op] = _join(_op, [X34, Y34]) + _join(_op, [W3, U3], layouts=_C) + _join(_op, [T0, S0], layouts=_C)
EXTRA["hstack"] += (_join("hstack", [X32, X34], layouts=_C) + _join("hstack", [EMPTY, W3], layouts=_C) +
                    _join("hstack", [W3, T0, U3], layouts=_C))
EXTRA["column_stack"] += (_join("column_stack", [X32, X34], layouts=_C) +
                          _join("column_stack", [W3, X34], layouts=_C))
EXTRA["vstack"] += _join("vstack", [R24, V4], layouts=_C)
EXTRA["row_stack"] += _join("row_stack", [R24, V4], layouts=_C)

def _small_db_cases(name):
    """op_db's float64 samples of a "rearrange" op as GC cases, less the big ones."""
    op, out = OPS_BY_NAME[name], []
    for layout in op.layouts:
        for s in op.get_samples("float64", layout):
            tss = [a for a in s.args if isinstance(a, TS)]
            if s.desc == "big" or s.tile != 1 or not any(is_float(a.dtype) for a in tss):
                continue
            if not all(np.all(np.isfinite(np.asarray(a.values, np.float64))) for a in tss):
                continue
            form = "F" if "F" in op.variants else "M"
            out.append(GC(name, s.args, s.kwargs, layout, form, desc=s.desc))
    return out


REARRANGE = ("repeat", "tile", "repeat_interleave", "flip", "fliplr", "flipud", "roll", "rot90", "diff")
for _op in REARRANGE:
    EXTRA[_op] = _small_db_cases(_op)

# calls op_db's samples don't make
for _op in ("tensor_split", "meshgrid", "broadcast_tensors", "movedim", "broadcast_to"):
    EXTRA[_op] = []
EXTRA["tensor_split"] += (
    _calls("tensor_split", lambda L, x: x.tensor_split([3, 1], 1), X34, layouts=ALL4, desc="indices go back") +
    _calls("tensor_split", lambda L, x: x.tensor_split(L.tensor([1, 3]), 1)[1:], X34, desc="tensor, some pieces"))
EXTRA["repeat_interleave"] += (
    _calls("repeat_interleave", lambda L, x: x.repeat_interleave(L.tensor([2, 0, 1]), dim=0), X34, layouts=ALL4,
           desc="per index") +
    _calls("repeat_interleave", lambda L, x: L.repeat_interleave(x, L.tensor([1, 3, 0, 2]), dim=1), X34,
           desc="per index, dim 1") +
    _calls("repeat_interleave", lambda L, x: x.repeat_interleave(2, dim=None, output_size=24), X34,
           desc="output_size"))
EXTRA["roll"] += _calls("roll", lambda L, x: x.roll((1, 2, -5), (0, 1, 0)), X34, layouts=ALL4,
                        desc="dim twice")
EXTRA["rot90"] += [c for k in range(-5, 6)
                  for c in _calls("rot90", lambda L, x, k=k: x.rot90(k, (1, 0)), X34, layouts=ALL4, desc=f"k={k}")]
EXTRA["diff"] += (
    _calls("diff", lambda L, x, p, a: L.diff(x, 2, 0, prepend=p, append=a), X34, R24, Y34, layouts=ALL4,
           desc="prepend and append, n=2") +
    _calls("diff", lambda L, x, a: x.diff(append=a), X34, X32, desc="append") +
    _calls("diff", lambda L, x, p: x.diff(7, prepend=p), X34, X32, desc="n beyond the length") +
    _calls("diff", lambda L, x, p: x.diff(0, prepend=p) * x, X34, X32, desc="n=0 ignores prepend"))
EXTRA["meshgrid"] += (
    _calls("meshgrid", lambda L, a, b: L.meshgrid([a, b], indexing="xy"), W3, V4, desc="list, xy") +
    _calls("meshgrid", lambda L, a, s, b: L.meshgrid(a, s, b, indexing="ij"), W3, S0, V4, desc="0-d, ij"))
EXTRA["broadcast_tensors"] += (
    _calls("broadcast_tensors", lambda L, x, v, s: L.broadcast_tensors(x, v, s), X34, V4, S0, layouts=ALL4) +
    _calls("broadcast_tensors", lambda L, x, y: L.broadcast_tensors(x, y), X34, Y34, desc="same shapes"))
EXTRA["movedim"] += _calls("movedim", lambda L, x: x.unsqueeze(1).movedim((0, 2), (2, 1)), X34, layouts=ALL4)
EXTRA["broadcast_to"] += _calls("broadcast_to", lambda L, x: x.broadcast_to((2, 3, 4)), X34, layouts=ALL4)

INPLACE_VIEW_EXTRA = []  # [GC]: in-place writes into views of non-leaves
GG = [  # (id, fn, number of (2, 3) float64 inputs): gradgradcheck
    ("cat", lambda a, b: _lib(a).cat([a * a, b, a * b], 1), 2),
    ("cat legacy empty", lambda a: _lib(a).cat([a.new_zeros(0), a * a]), 1),
    ("stack", lambda a, b: _lib(a).stack([a * b, b * b], -1), 2),
    ("hstack", lambda a, b: _lib(a).hstack([a * a, b]), 2),
    ("column_stack", lambda a: _lib(a).column_stack([(a * a)[0], a.t()]), 1),
    ("repeat", lambda a: (a * a).repeat(2, 1, 3), 1),
    ("tile", lambda a: (a * a).tile((2,)), 1),
    ("repeat_interleave", lambda a: (a * a).repeat_interleave(2, dim=1), 1),
    ("flip", lambda a: (a * a).flip(0, 1), 1),
    ("fliplr", lambda a: (a * a).fliplr(), 1),
    ("roll", lambda a: (a * a).roll((1, -1), (0, 1)), 1),
    ("roll flat", lambda a: (a * a).roll(4), 1),
    ("rot90", lambda a: (a * a).rot90(3), 1),
    ("tensor_split", lambda a: (a * a).tensor_split([2, 1], 1), 1),
    ("movedim", lambda a: (a * a).movedim(0, 1), 1),
    ("broadcast_to", lambda a: (a * a).broadcast_to((2, 2, 3)), 1),
    ("broadcast_tensors", lambda a, b: _lib(a).broadcast_tensors(a * b, (b * b)[:1]), 2),
    ("meshgrid", lambda a: _lib(a).meshgrid((a * a)[0], a[1], indexing="xy"), 1),
    ("diff", lambda a, b: (a * a).diff(2, prepend=b * b), 2),
]


def _lib(t):
    import ember
    return ember
