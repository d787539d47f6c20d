"""Gradcheck cases for the FFT primitives (_fft_c2c, _fft_r2c, _fft_c2r,
reached through ember.fft's transforms) and the special-function rows whose
op_db samples do not reach gradcheck (frexp, mvlgamma, polygamma,
_special_i1), merged into tests/test_autograd_ops.py's tables. Leaves are
float64; complex values are built from pairs with view_as_complex, and the
calls return real tensors."""
from autograd_common import GC, _calls, _ts, _vals

DB_KINDS = set()
INPLACE_VIEW_EXTRA = []
GG = []

_X = _ts(_vals(("fft_x",), (3, 6)))
_P = _ts(_vals(("fft_pairs",), (3, 5, 2)))
_POS = _ts(_vals(("special_pos",), (3, 4), 0.7, 3.0))
_ANY = _ts(_vals(("special_any",), (3, 4), -3.0, 3.0))


def _z(L, x):
    return L.view_as_complex(x * 1)


EXTRA = {
    "_fft_c2c": _calls("_fft_c2c", lambda L, x: L.view_as_real(L.fft.fft(_z(L, x))), _P, desc="fft") +
                _calls("_fft_c2c", lambda L, x: L.view_as_real(L.fft.ifftn(_z(L, x), norm="ortho")), _P,
                       desc="ifftn ortho"),
    "_fft_r2c": _calls("_fft_r2c", lambda L, x: L.view_as_real(L.fft.rfft(x)), _X, desc="rfft") +
                _calls("_fft_r2c", lambda L, x: L.view_as_real(L.fft.rfft2(x, norm="forward")), _X, desc="rfft2"),
    "_fft_c2r": _calls("_fft_c2r", lambda L, x: L.fft.irfft(_z(L, x)), _P, desc="irfft") +
                _calls("_fft_c2r", lambda L, x: L.fft.irfft(_z(L, x), n=9), _P, desc="irfft odd n") +
                _calls("_fft_c2r", lambda L, x: L.fft.hfft(_z(L, x), n=8), _P, desc="hfft"),
    "frexp": _calls("frexp", lambda L, x: L.frexp(x)[0], _ANY, desc="mantissa"),
    "mvlgamma": _calls("mvlgamma", lambda L, x: L.mvlgamma(x, 2), _POS, desc="p=2"),
    "polygamma": _calls("polygamma", lambda L, x: L.polygamma(1, x), _POS, desc="n=1") +
                 _calls("polygamma", lambda L, x: L.polygamma(2, x), _POS, desc="n=2"),
    "_special_i1": _calls("_special_i1", lambda L, x: L.special.i1(x), _ANY, desc="i1"),
}

INPLACE = {  # x.op_() on a non-leaf copy
    "mvlgamma": [GC("mvlgamma", (_POS,), {}, "contig", "call", lambda L, x: (x * 1).mvlgamma_(2), "inplace")],
    "polygamma": [GC("polygamma", (_POS,), {}, "contig", "call", lambda L, x: (x * 1).polygamma_(1), "inplace")],
}
