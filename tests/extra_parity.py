"""Run one function on ember and on torch with the same inputs; compare everything.

Inputs are NumPy arrays (converted for each library; `Grad(a)` marks a leaf
that requires grad); results are compared for type, dtype, shape, values
(NaN-aware), raised exception type, and gradients of a weighted sum.
"""
import numpy as np
import pytest

import ember


class Grad:
    """A float array that becomes a requires_grad leaf in both libraries."""

    def __init__(self, array):
        self.array = np.asarray(array)


def _dtype_name(dtype):
    return str(dtype).split(".")[-1]


def convert(lib, value, leaves):
    if isinstance(value, Grad):
        t = lib.tensor(value.array).requires_grad_(True)
        leaves.append(t)
        return t
    if isinstance(value, np.ndarray):
        return lib.tensor(value)
    if isinstance(value, list):
        return [convert(lib, v, leaves) for v in value]
    if isinstance(value, tuple):
        return tuple(convert(lib, v, leaves) for v in value)
    if isinstance(value, dict):
        return {k: convert(lib, v, leaves) for k, v in value.items()}
    return value


def to_numpy(t):
    return t.detach().cpu().numpy() if hasattr(t, "cpu") else t.detach().numpy()


def assert_same(got, want, atol, rtol, where="result"):
    if hasattr(want, "dtype") and hasattr(want, "shape") and not isinstance(want, np.ndarray):
        assert isinstance(got, ember.Tensor), f"{where}: expected a tensor, got {type(got)}"
        assert _dtype_name(got.dtype) == _dtype_name(want.dtype), \
            f"{where}: dtype {got.dtype} vs torch {want.dtype}"
        assert tuple(got.shape) == tuple(want.shape), f"{where}: shape {tuple(got.shape)} vs {tuple(want.shape)}"
        g = to_numpy(got.to(ember.float64) if got.dtype in (ember.bfloat16, ember.float16) else got)
        w = want.detach()
        w = (w.double() if _dtype_name(w.dtype) in ("float16", "bfloat16") else w).numpy()
        if g.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w, err_msg=where)
        else:
            np.testing.assert_allclose(g, w, atol=atol, rtol=rtol, equal_nan=True, err_msg=where)
    elif isinstance(want, (tuple, list)):
        assert len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want)):
            assert_same(g, w, atol, rtol, f"{where}[{i}]")
        if hasattr(want, "_fields"):
            assert tuple(got._fields) == tuple(want._fields)
    else:
        assert type(got) is type(want), f"{where}: {type(got)} vs torch {type(want)}"
        if isinstance(want, float) and np.isnan(want):
            assert np.isnan(got)
        else:
            assert got == want, f"{where}: {got!r} vs torch {want!r}"


def _outputs(result):
    if isinstance(result, (tuple, list)):
        return [r for r in result if hasattr(r, "requires_grad")]
    return [result]


def check(torch, fn, *args, atol=1e-6, rtol=1e-5, grad_atol=None, **kwargs):
    """fn(lib, *args, **kwargs) on both; torch's exception type if torch raises."""
    t_leaves, e_leaves = [], []
    t_args = convert(torch, args, t_leaves)
    t_kwargs = convert(torch, kwargs, t_leaves)
    e_args = convert(ember, args, e_leaves)
    e_kwargs = convert(ember, kwargs, e_leaves)
    try:
        want = fn(torch, *t_args, **t_kwargs)
    except Exception as exc:  # noqa: BLE001  (any torch error: ember must raise the same type)
        with pytest.raises(type(exc)):
            fn(ember, *e_args, **e_kwargs)
        return exc
    got = fn(ember, *e_args, **e_kwargs)
    assert_same(got, want, atol, rtol)
    if t_leaves:
        rng = np.random.default_rng(0)
        t_outs = [o for o in _outputs(want) if o.requires_grad]
        e_outs = [o for o in _outputs(got) if getattr(o, "requires_grad", False)]
        assert len(t_outs) == len(e_outs), "requires_grad of the outputs differs from torch"
        if t_outs:
            t_total, e_total = 0, 0
            for t_o, e_o in zip(t_outs, e_outs):
                w = rng.standard_normal(tuple(t_o.shape))
                t_total = t_total + (t_o * torch.tensor(w, dtype=t_o.dtype)).sum()
                e_total = e_total + (e_o * ember.tensor(w, dtype=e_o.dtype)).sum()
            t_grads = torch.autograd.grad(t_total, t_leaves, allow_unused=True)
            e_grads = ember.autograd.grad(e_total, e_leaves, allow_unused=True)
            for i, (g, w) in enumerate(zip(e_grads, t_grads)):
                if w is None:
                    assert g is None or not bool((g != 0).any()), f"grad {i}: torch has none"
                    continue
                assert_same(g, w, grad_atol or atol * 10, rtol * 10, f"grad of input {i}")
    return got
