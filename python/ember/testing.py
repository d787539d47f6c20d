"""ember.testing.assert_close: compare tensors (or numbers) within tolerances,
with torch's default tolerances per dtype."""
from ._lazy import numpy as np

from . import _C

_DEFAULT_TOL = {  # dtype name: (rtol, atol)
    "float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5), "float32": (1.3e-6, 1e-5),
    "float64": (1e-7, 1e-7), "complex64": (1.3e-6, 1e-5), "complex128": (1e-7, 1e-7),
}


def _as_array(x):
    if isinstance(x, _C.Tensor):
        t = x.detach()
        if t.dtype == _C._dtypes["bfloat16"] or t.dtype == _C._dtypes["float16"]:
            t = t.float()
        return t.numpy(), repr(x.dtype).split(".")[-1]
    return np.asarray(x), None


def assert_close(actual, expected, *, rtol=None, atol=None, equal_nan=False, check_dtype=True,
                 msg=None):
    a, adt = _as_array(actual)
    e, edt = _as_array(expected)
    if check_dtype and adt and edt and adt != edt:
        raise AssertionError(f"The values for attribute 'dtype' do not match: {adt} != {edt}.")
    if a.shape != e.shape:
        raise AssertionError(f"The values for attribute 'shape' do not match: {a.shape} != {e.shape}.")
    if (rtol is None) != (atol is None):
        raise ValueError("Both 'rtol' and 'atol' must be either specified or omitted")
    if rtol is None:
        rtol, atol = _DEFAULT_TOL.get(adt or "", (0.0, 0.0)) if a.dtype.kind == "f" else (0.0, 0.0)
    if a.dtype.kind == "b" or e.dtype.kind == "b":
        ok = np.array_equal(a, e)
    else:
        ok = np.allclose(a.astype(np.float64), e.astype(np.float64), rtol=rtol, atol=atol,
                         equal_nan=equal_nan)
    if not ok:
        diff = np.abs(a.astype(np.float64) - e.astype(np.float64))
        raise AssertionError(msg or f"Tensor-likes are not close!\n\nGreatest absolute difference: "
                             f"{np.nanmax(diff) if diff.size else 0} (up to {atol} allowed)\n"
                             f"rtol={rtol}")
