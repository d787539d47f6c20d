"""Gradcheck cases for the complex-number formulas of csrc/autograd/derivatives.c
(view_as_real/complex, real, imag, conj, angle, complex, polar), merged into
tests/test_autograd_ops.py's tables. The leaves are float64 (a trailing dim of
2 read as complex through view_as_complex), and the calls return real tensors,
so the check runs on real numbers; tests/test_complex.py checks complex leaves
directly."""
from autograd_common import GC, _calls, _ts, _vals

DB_KINDS = set()
INPLACE_VIEW_EXTRA = []
GG = []

_P = _ts(_vals(("cplx",), (3, 2), 0.5, 2.0))   # pairs: (re, im) with |z| away from 0
_R = _ts(_vals(("cplx_r",), (3,), 0.5, 2.0))
_T = _ts(_vals(("cplx_t",), (3,), -3.0, 3.0))


def _z(L, x):
    return L.view_as_complex(x * 1)


EXTRA = {
    "view_as_complex": _calls("view_as_complex", lambda L, x: L.view_as_real(L.view_as_complex(x) * (1 + 2j)),
                              _P, desc="scaled"),
    "view_as_real": _calls("view_as_real", lambda L, x: L.view_as_real(_z(L, x).exp()), _P, desc="exp"),
    "real": _calls("real", lambda L, x: (_z(L, x) ** 2).real, _P, desc="z^2"),
    "imag": _calls("imag", lambda L, x: (_z(L, x) ** 2).imag, _P, desc="z^2"),
    "conj": _calls("conj", lambda L, x: L.view_as_real(_z(L, x).conj() * _z(L, x).exp()), _P, desc="conj*exp"),
    "conj_physical": _calls("conj_physical", lambda L, x: L.view_as_real(L.conj_physical(_z(L, x)) ** 2), _P,
                            desc="conj^2"),
    "angle": _calls("angle", lambda L, x: L.angle(_z(L, x)), _P, desc="complex") +
             _calls("angle", lambda L, x: L.angle(x) + x, _R, desc="real"),
    "complex": _calls("complex", lambda L, a, b: L.view_as_real(L.complex(a, b) ** 2), _R, _T, desc="square"),
    "polar": _calls("polar", lambda L, a, b: L.view_as_real(L.polar(a, b)), _R, _T, desc="parts"),
}

INPLACE = {  # conj_physical_ on a non-leaf complex copy
    "conj_physical": [GC("conj_physical", (_P,), {}, "contig", "call",
                         lambda L, x: L.view_as_real((_z(L, x) * 1).conj_physical_() * (2 - 1j)), "inplace")],
}
