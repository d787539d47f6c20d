"""Gradcheck cases for the backward formulas of csrc/autograd/derivatives_act.c
(nn activations), merged into tests/test_autograd_ops.py's tables. op_db's
float64 samples give the out-of-place cases; the in-place forms (F.elu_,
inplace=True) are the ops' `_`-named Tensor methods, which torch spells
differently, so they are called through nn.functional here."""
from autograd_common import GC, X34, _ts, _vals  # noqa: F401

DB_KINDS = set()
EXTRA = {}
INPLACE_VIEW_EXTRA = []
GG = []

_X = _ts(_vals(("act",), (3, 4), -4.0, 4.0))


def _inplace(op, fn):
    """fn(F, t) runs the in-place form on a non-leaf copy of the leaf."""
    return [GC(op, (_X,), {}, lay, "call", lambda L, x: fn(L.nn.functional, x * 1.0), "inplace")
            for lay in ("contig", "T")]


INPLACE = {
    "_silu": _inplace("_silu", lambda F, x: F.silu(x, inplace=True)),
    "_mish": _inplace("_mish", lambda F, x: F.mish(x, inplace=True)),
    "_elu": _inplace("_elu", lambda F, x: F.elu_(x, 0.7)),
    "selu": _inplace("selu", lambda F, x: F.selu_(x)),
    "celu": _inplace("celu", lambda F, x: F.celu_(x, 1.5)),
    "_leaky_relu": _inplace("_leaky_relu", lambda F, x: F.leaky_relu_(x, 0.2)),
    "_hardtanh": _inplace("_hardtanh", lambda F, x: F.hardtanh_(x, -1.5, 2.5)),
    "_hardswish": _inplace("_hardswish", lambda F, x: F.hardswish(x, inplace=True)),
    "_hardsigmoid": _inplace("_hardsigmoid", lambda F, x: F.hardsigmoid(x, inplace=True)),
    "threshold": _inplace("threshold", lambda F, x: F.threshold_(x, 0.3, -1.0)),
}
