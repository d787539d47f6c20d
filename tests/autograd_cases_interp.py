"""Gradcheck cases for the backward formulas of csrc/autograd/derivatives_interp.c
(the upsampling ops behind F.interpolate), merged into tests/test_autograd_ops.py's
tables. op_db's float64 samples give every op (forward and `_backward`) its
direct cases; here F.interpolate reaches them as users do (L is ember or torch),
and gradgradcheck runs each forward op's double backward, which goes through
its `_backward` op and back."""
from autograd_common import GC, _ts, _vals

DB_KINDS = set()
EXTRA = {}
INPLACE_VIEW_EXTRA = []
GG = []

X3 = _ts(_vals(("interp", 3), (2, 3, 5)))
X4 = _ts(_vals(("interp", 4), (2, 2, 4, 5)))


def _interp(**kw):
    return lambda L, x: L.nn.functional.interpolate(x, **kw)


def _cases(op, x, calls):
    return [GC(op, (x,), {}, lay, "call", _interp(**kw), desc=str(kw)) for kw in calls for lay in ("contig", "T")]


EXTRA["_upsample_nearest1d"] = _cases("_upsample_nearest1d", X3, [dict(size=8), dict(scale_factor=0.6)])
EXTRA["_upsample_nearest2d"] = _cases("_upsample_nearest2d", X4, [dict(size=(7, 3)), dict(scale_factor=(1.5, 2.0))])
EXTRA["_upsample_nearest_exact1d"] = _cases("_upsample_nearest_exact1d", X3,
                                            [dict(size=8, mode="nearest-exact"),
                                             dict(scale_factor=1.1, mode="nearest-exact")])
EXTRA["_upsample_nearest_exact2d"] = _cases("_upsample_nearest_exact2d", X4,
                                            [dict(size=(7, 3), mode="nearest-exact")])
EXTRA["_upsample_linear1d"] = _cases("_upsample_linear1d", X3,
                                     [dict(size=8, mode="linear"), dict(size=3, mode="linear", align_corners=True),
                                      dict(scale_factor=1.7, mode="linear")])
EXTRA["_upsample_bilinear2d"] = _cases("_upsample_bilinear2d", X4,
                                       [dict(size=(7, 3), mode="bilinear"),
                                        dict(scale_factor=(2.3, 0.7), mode="bilinear", align_corners=True)])
EXTRA["_upsample_bicubic2d"] = _cases("_upsample_bicubic2d", X4,
                                      [dict(size=(7, 3), mode="bicubic"),
                                       dict(size=(5, 9), mode="bicubic", align_corners=True)])


def _gg(name, shape, **kw):
    def fn(a):
        import ember
        return ember.nn.functional.interpolate(a.reshape(shape), **kw)
    return (name, fn, 1)


GG += [
    _gg("interpolate nearest 1d", (1, 2, 3), size=5),
    _gg("interpolate nearest 2d", (1, 1, 2, 3), size=(3, 5)),
    _gg("interpolate nearest-exact 1d", (1, 2, 3), size=5, mode="nearest-exact"),
    _gg("interpolate nearest-exact 2d", (1, 1, 2, 3), size=(3, 5), mode="nearest-exact"),
    _gg("interpolate linear", (1, 2, 3), size=5, mode="linear"),
    _gg("interpolate bilinear", (1, 1, 2, 3), scale_factor=1.7, mode="bilinear", align_corners=True),
    _gg("interpolate bicubic", (1, 1, 2, 3), size=(4, 4), mode="bicubic"),
]
