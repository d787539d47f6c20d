"""Gradcheck cases for the pools' and batch / group norm's formulas
(csrc/autograd/derivatives_poolnorm.c), merged into tests/test_autograd_ops.py's
tables: the 1-d pools and instance_norm (which reach the same C ops through
nn.functional), modules, and second derivatives. op_db's samples (kind
"plain") cover the 2-d calls and the backward ops."""
import numpy as np

from autograd_common import GC, _ts, _vals

DB_KINDS = set()
INPLACE_VIEW_EXTRA = []


def _f(L):
    return L.nn.functional


def _distinct(key, shape):
    """values 0.1 apart in a random order: no ties inside a max-pool window"""
    rng = np.random.default_rng(abs(hash(key)) % 2**32)
    return _ts(rng.permutation(int(np.prod(shape))).reshape(shape) * 0.1 - 1)


X239 = _distinct("pn_x239", (2, 3, 9))
X3456 = _distinct("pn_x3456", (2, 3, 5, 6))
N234 = _ts(_vals(("pn_n",), (2, 3, 4)))
N2345 = _ts(_vals(("pn_n4",), (2, 3, 4, 5)))
W3 = _ts(_vals(("pn_w",), (3,), 0.5, 2), lay=False)
B3 = _ts(_vals(("pn_b",), (3,)), lay=False)


def _c(op, fn, *args, layouts=("contig", "T"), desc="", **kw):
    return [GC(op, args, {}, lay, "call", fn, desc, **kw) for lay in layouts]


EXTRA = {
    "_max_pool2d_with_indices":
        _c("_max_pool2d_with_indices", lambda L, x: _f(L).max_pool1d(x, 3, 2, 1, ceil_mode=True), X239,
           desc="max_pool1d")
        + _c("_max_pool2d_with_indices", lambda L, x: _f(L).max_pool1d(x, 2, dilation=2, return_indices=True)[0],
             X239, desc="max_pool1d indices")
        + _c("_max_pool2d_with_indices", lambda L, x: L.nn.MaxPool2d(3, 2, 1)(x), X3456, desc="MaxPool2d"),
    "_avg_pool2d":
        _c("_avg_pool2d", lambda L, x: _f(L).avg_pool1d(x, 3, 2, 1, count_include_pad=False), X239,
           desc="avg_pool1d")
        + _c("_avg_pool2d", lambda L, x: L.nn.AvgPool2d(2, ceil_mode=True)(x), X3456, desc="AvgPool2d"),
    "_adaptive_avg_pool2d":
        _c("_adaptive_avg_pool2d", lambda L, x: _f(L).adaptive_avg_pool1d(x, 4), X239, desc="adaptive_avg_pool1d")
        + _c("_adaptive_avg_pool2d", lambda L, x: L.nn.AdaptiveAvgPool2d((2, None))(x), X3456, desc="(2, None)"),
    "_native_batch_norm":
        _c("_native_batch_norm", lambda L, x, w, b: _f(L).instance_norm(x, weight=w, bias=b), N234, W3, B3,
           desc="instance_norm")
        + _c("_native_batch_norm", lambda L, x: _f(L).instance_norm(x, eps=0.1), N2345, desc="instance_norm 2d")
        + _c("_native_batch_norm",
             lambda L, x: _f(L).instance_norm(x, L.zeros(3, dtype=L.float64), L.ones(3, dtype=L.float64)), N234,
             desc="instance_norm, running stats")
        + _c("_native_batch_norm", lambda L, x, w, b: _f(L).batch_norm(x, None, None, w, b, True), N2345, W3, B3,
             desc="4-d, training"),
    "_native_group_norm":
        _c("_native_group_norm", lambda L, x, w, b: _f(L).group_norm(x, 3, w, b), N2345, W3, B3, desc="4-d")
        + _c("_native_group_norm", lambda L, x, w: _f(L).group_norm(x, 1, w), N234, W3, desc="one group"),
}



def usable(op, s, layout):
    """Veto op_db's batch_norm samples with running statistics: they would become
    leaves requiring grad, which torch refuses (not differentiable)."""
    return not (op.name == "_native_batch_norm" and s.args[3] is not None)


_E = __import__("ember")
_FE = _E.nn.functional
GG = [  # second derivatives (inputs (2, 3) in [0.5, 2]): through the formulas and the backward ops
    ("max_pool2d", lambda a: _FE.max_pool2d((a * a).view(1, 1, 2, 3), 2, 1, ceil_mode=True), 1),
    ("max_pool1d", lambda a: _FE.max_pool1d((a * a).view(1, 2, 3), 2, 1, padding=1), 1),
    ("avg_pool2d", lambda a: _FE.avg_pool2d((a * a).view(1, 2, 3), 2, 1, 1, count_include_pad=False), 1),
    ("adaptive_avg_pool2d", lambda a: _FE.adaptive_avg_pool2d((a * a).view(1, 1, 2, 3), (2, 2)), 1),
    ("batch_norm", lambda a, w: _FE.batch_norm(a.view(2, 3, 1), None, None, w[0], w[1], True), 2),
    ("batch_norm eval", lambda a, w: _FE.batch_norm(a * a, _E.tensor([0.1, -0.2, 0.3], dtype=_E.float64),
                                                    _E.tensor([0.5, 1.0, 2.0], dtype=_E.float64), w[0], w[1]), 2),
    ("group_norm", lambda a, w: _FE.group_norm(a.view(1, 6, 1), 2, w.reshape(6), w.reshape(6) * 2), 2),
    ("instance_norm", lambda a: _FE.instance_norm(a.view(1, 2, 3)), 1),
]
