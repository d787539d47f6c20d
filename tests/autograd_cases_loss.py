"""Gradcheck cases for the backward formulas of csrc/autograd/derivatives_loss.c
(softmax family, nll_loss, the pointwise losses), merged into
tests/test_autograd_ops.py's tables. Calls go through nn.functional so that
the same case runs on torch (L is ember or torch)."""
import numpy as np

from autograd_common import GC, X34, _ts, _vals
from op_db import TS

DB_KINDS = set()
EXTRA = {}
INPLACE_VIEW_EXTRA = []
GG = []

Y34 = _ts(_vals(("loss_y",), (3, 4)))
P34 = _ts(_vals(("loss_p",), (3, 4), 0.05, 0.95))  # probabilities for binary_cross_entropy
IDX3 = TS(np.array([1, 3, 0]), "int64", lay=False, exact=True)
IDX_IGN = TS(np.array([1, -100, 2]), "int64", lay=False, exact=True)
W4 = [0.5, 1.0, 2.0, 1.5]  # class weights: a constant (torch has no gradient for them)


def _f(L):
    return L.nn.functional


def _cases(op, fns, args):
    return [GC(op, args, {}, layout, "call", fn, desc=desc) for desc, fn in fns for layout in ("contig", "T")]


EXTRA["softmax"] = _cases("softmax", [
    ("dim 1", lambda L, x: _f(L).softmax(x, 1)),
    ("dim 0", lambda L, x: x.softmax(0)),
    ("softmin", lambda L, x: _f(L).softmin(x, -1)),
], (X34,))
EXTRA["log_softmax"] = _cases("log_softmax", [
    ("dim 1", lambda L, x: _f(L).log_softmax(x, 1)),
    ("dim 0", lambda L, x: x.log_softmax(0)),
], (X34,))
EXTRA["_nll_loss"] = _cases("_nll_loss", [
    ("mean", lambda L, x, t: _f(L).nll_loss(x, t)),
    ("cross_entropy sum", lambda L, x, t: _f(L).cross_entropy(x, t, reduction="sum")),
    ("none", lambda L, x, t: _f(L).nll_loss(x, t, reduction="none")),
], (X34, IDX3)) + _cases("_nll_loss", [
    ("weight, ignore_index", lambda L, x, t: _f(L).nll_loss(x, t, weight=L.tensor(W4, dtype=L.float64))),
], (X34, IDX_IGN))
EXTRA["_pointwise_loss"] = _cases("_pointwise_loss", [
    ("mse", lambda L, x, y: _f(L).mse_loss(x, y)),
    ("mse none", lambda L, x, y: _f(L).mse_loss(x, y, reduction="none")),
    ("smooth_l1", lambda L, x, y: _f(L).smooth_l1_loss(x, y, beta=0.5, reduction="sum")),
    ("huber", lambda L, x, y: _f(L).huber_loss(x, y, delta=0.7)),
    ("bce with logits", lambda L, x, y: _f(L).binary_cross_entropy_with_logits(x, y.sigmoid())),
], (X34, Y34)) + _cases("_pointwise_loss", [
    ("bce", lambda L, p, y: _f(L).binary_cross_entropy(p, y.sigmoid())),
], (P34, Y34))

GG += [
    ("mse_loss", lambda a, b: __import__("ember").nn.functional.mse_loss(a, b, reduction="none"), 2),
    ("huber_loss", lambda a, b: __import__("ember").nn.functional.huber_loss(a, b, reduction="none"), 2),
    ("bce_with_logits", lambda a, b: __import__("ember").nn.functional.binary_cross_entropy_with_logits(
        a, b / 3, reduction="none"), 2),
]
