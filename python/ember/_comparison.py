"""torch's tensor comparisons composed from ember ops: equal, isclose,
allclose and isin (none of them differentiable, as in torch)."""
import builtins

from . import _C
from ._checks import _NoGrad, _dt, _require_tensor, _to_float, _type_name

_py_bool = builtins.bool


def equal(input, other):
    """True if both tensors have the same size and elements (dtypes may differ)."""
    _require_tensor("equal", input)
    _require_tensor("equal", other, "other", 2)
    if tuple(input.shape) != tuple(other.shape):
        return False
    return _py_bool(_C.eq(input, other).all().item())


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """|input - other| <= atol + rtol * |other|, elementwise (a bool tensor)."""
    _require_tensor("isclose", input)
    _require_tensor("isclose", other, "other", 2)
    if input.dtype != other.dtype:
        raise RuntimeError(f"{_type_name(input.dtype)} did not match {_type_name(other.dtype)}")
    if rtol < 0:
        raise RuntimeError(f"rtol must be greater than or equal to zero, but got {rtol}")
    if atol < 0:
        raise RuntimeError(f"atol must be greater than or equal to zero, but got {atol}")
    with _NoGrad():
        close = _C.eq(input, other)
        if equal_nan and input.dtype.is_floating_point:
            close = close | (_C.isnan(input) & _C.isnan(other))
        if rtol == 0 and atol == 0:
            return close
        # Integer (and bool) inputs are compared in the default float dtype, like torch.
        a, b = _to_float(input), _to_float(other)
        allowed = atol + _C.abs(rtol * b)
        actual = _C.abs(a - b)
        return close | (_C.isfinite(actual) & (actual <= allowed))


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """isclose(...).all() as a Python bool."""
    return _py_bool(isclose(input, other, rtol, atol, equal_nan).all().item())


def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """For each element of `elements`, whether it occurs in `test_elements`."""
    if not isinstance(elements, _C.Tensor) and not isinstance(test_elements, _C.Tensor):
        raise TypeError("isin() received an invalid combination of arguments - "
                        "at least one of 'elements' and 'test_elements' must be a Tensor")
    if not isinstance(elements, _C.Tensor):
        elements = _C.tensor(elements, dtype=_C.result_type(test_elements, elements), device=test_elements.device)
    if not isinstance(test_elements, _C.Tensor):
        test_elements = _C.tensor([test_elements], dtype=_C.result_type(elements, test_elements),
                                  device=elements.device)
    with _NoGrad():
        flat, tests = elements.reshape(-1), test_elements.reshape(-1)
        if flat.numel() * tests.numel() <= (1 << 22):
            found = _C.eq(flat.unsqueeze(1), tests.unsqueeze(0)).any(1) if tests.numel() else \
                _C.zeros(flat.shape, dtype=_dt("bool"), device=flat.device)
        else:  # big inputs: sort the test set and binary-search it
            common = _C.promote_types(flat.dtype, tests.dtype)
            sorted_tests = _C.sort(tests.to(common)).values
            values = flat.to(common)
            pos = _C.searchsorted(sorted_tests, values).clamp_max(sorted_tests.numel() - 1)
            found = _C.eq(sorted_tests[pos], values)
        if invert:
            found = ~found
        return found.reshape(elements.shape)


__all__ = ["equal", "allclose", "isclose", "isin"]
