"""Gradcheck cases for the backward formulas of csrc/autograd/derivatives_loss.c
(softmax family, nll_loss and its backward, the fused cross-entropy, the pointwise losses), merged into
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
X354 = _ts(_vals(("loss_x3",), (3, 5, 4)))
IDX34 = TS(np.array([[1, 0, 4, -100], [2, 2, 3, 0], [4, 1, -100, 3]]), "int64", lay=False, exact=True)
W5 = [0.5, 1.0, 2.0, 1.5, 0.7]
G3 = _ts(_vals(("loss_g",), (3,)), lay=False)
G0 = _ts(_vals(("loss_g0",), ()), lay=False)


def _ce(red, ls=0.0, weight=None):
    return lambda L, x, t: _f(L).cross_entropy(
        x, t, reduction=red, label_smoothing=ls, weight=None if weight is None else L.tensor(weight, dtype=L.float64))


# the fused cross-entropy (class-index targets): every reduction, weight, ignore_index, smoothing, a 3-d input
EXTRA["_cross_entropy"] = _cases("_cross_entropy", [
    ("mean", _ce("mean")),
    ("sum, smoothing", _ce("sum", 0.3)),
    ("none, weight, smoothing", _ce("none", 0.2, W4)),
], (X34, IDX3)) + _cases("_cross_entropy", [
    ("mean, weight, ignore_index, smoothing", _ce("mean", 0.4, W4)),
], (X34, IDX_IGN)) + _cases("_cross_entropy", [
    ("3-d mean, weight, smoothing", _ce("mean", 0.1, W5)),
    ("3-d none", _ce("none")),
], (X354, IDX34))


def _nll_grad(red, weight=None):
    """nll_loss's gradient as a function of (input, grad_output): exercises nll_loss_backward's own formula"""
    def f(L, x, g, t):
        w = None if weight is None else L.tensor(weight, dtype=L.float64)
        loss = _f(L).nll_loss(x, t, weight=w, reduction=red)
        return L.autograd.grad(loss, x, g.reshape(loss.shape), create_graph=True)[0]
    return f


EXTRA["_nll_loss_backward"] = [
    GC("_nll_loss_backward", (X34, G3, IDX_IGN), {}, "contig", "call", _nll_grad("none", W4), desc="none, weight"),
    GC("_nll_loss_backward", (X34, G0, IDX_IGN), {}, "contig", "call", _nll_grad("mean", W4), desc="mean, weight"),
    GC("_nll_loss_backward", (X34, G0, IDX3), {}, "contig", "call", _nll_grad("sum"), desc="sum"),
]
EXTRA["_pointwise_loss"] = _cases("_pointwise_loss", [
    ("mse", lambda L, x, y: _f(L).mse_loss(x, y)),
    ("mse none", lambda L, x, y: _f(L).mse_loss(x, y, reduction="none")),
    ("smooth_l1", lambda L, x, y: _f(L).smooth_l1_loss(x, y, beta=0.5, reduction="sum")),
    ("huber", lambda L, x, y: _f(L).huber_loss(x, y, delta=0.7)),
    ("bce with logits", lambda L, x, y: _f(L).binary_cross_entropy_with_logits(x, y.sigmoid())),
], (X34, Y34)) + _cases("_pointwise_loss", [
    ("bce", lambda L, p, y: _f(L).binary_cross_entropy(p, y.sigmoid())),
], (P34, Y34))

def _gg_ce(red, ls=0.0, weight=None, ignore=False):
    """cross_entropy / nll_loss of a (2, 3) input: second derivatives through the fused op's composed
    formula and nll_loss_backward's"""
    def f(a):
        import ember
        t = ember.tensor([2, -100] if ignore else [2, 0])
        w = None if weight is None else ember.tensor(weight, dtype=ember.float64)
        return ember.nn.functional.cross_entropy(a, t, weight=w, reduction=red, label_smoothing=ls)
    return f


def _gg_nll(red):
    def f(a):
        import ember
        return ember.nn.functional.nll_loss(a, ember.tensor([2, 0]), weight=ember.tensor([0.5, 2.0, 1.5],
                                            dtype=ember.float64), reduction=red)
    return f


GG += [
    ("cross_entropy mean", _gg_ce("mean"), 1),
    ("cross_entropy sum weight", _gg_ce("sum", weight=[0.5, 2.0, 1.5]), 1),
    ("cross_entropy none smoothing ignore_index", _gg_ce("none", 0.3, ignore=True), 1),
    ("cross_entropy mean weight smoothing", _gg_ce("mean", 0.2, [0.5, 2.0, 1.5], ignore=True), 1),
    ("cross_entropy probabilities", lambda a, b: __import__("ember").nn.functional.cross_entropy(
        a, b.softmax(1), label_smoothing=0.1), 2),
    ("nll_loss mean", _gg_nll("mean"), 1),
    ("nll_loss sum", _gg_nll("sum"), 1),
    ("nll_loss none", _gg_nll("none"), 1),
    ("log_softmax", lambda a: __import__("ember").nn.functional.log_softmax(a * a, 1), 1),
    ("softmax", lambda a: __import__("ember").nn.functional.softmax(a * a, 0), 1),
    ("mse_loss", lambda a, b: __import__("ember").nn.functional.mse_loss(a, b, reduction="none"), 2),
    ("huber_loss", lambda a, b: __import__("ember").nn.functional.huber_loss(a, b, reduction="none"), 2),
    ("bce_with_logits", lambda a, b: __import__("ember").nn.functional.binary_cross_entropy_with_logits(
        a, b / 3, reduction="none"), 2),
]
