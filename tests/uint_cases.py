"""Calls on uint16 / uint32 / uint64 tensors, written once for ember and torch
(`L` is the library). tests/data/make_uint_reference.py runs them on torch and
stores what each returns or raises; test_uint_dtypes.py checks ember against
that record (and against torch itself when it is installed).

Torch 2.x has these as "barebones" unsigned types: storage, casts, creation and
a few kernels. Most arithmetic raises NotImplementedError, and they promote
only with themselves and floating types: the cases record those refusals too."""
import io

import numpy as np

UNSIGNED = ["uint16", "uint32", "uint64"]
BITS = {"uint16": 16, "uint32": 32, "uint64": 64}


def _small(L, d):
    return L.tensor([3, 1, 2], dtype=getattr(L, d))


def _big(L, d):
    m = 2 ** BITS[d] - 1
    return L.tensor([m, m - 5, 0], dtype=getattr(L, d))


def _mask(L):
    return L.tensor([True, False, True])


def _save_load(L, t):
    buf = io.BytesIO()
    L.save({"t": t, "v": t[1:]}, buf)
    buf.seek(0)
    out = L.load(buf)
    return out["t"], out["v"]


# name -> fn(L, dtype name); each returns a tensor, a tuple of them, or a Python value
UNARY_CASES = {
    # creation and conversion
    "tensor_big": lambda L, d: _big(L, d),
    "tensor_max_list": lambda L, d: L.tensor([[2 ** BITS[d] - 1], [0]], dtype=getattr(L, d)),
    "tensor_over": lambda L, d: L.tensor([2 ** BITS[d]], dtype=getattr(L, d)),
    "tensor_neg": lambda L, d: L.tensor([-1], dtype=getattr(L, d)),
    "tensor_int_past_int64": lambda L, d: L.tensor([2 ** 63]),
    "tensor_big_int_as_float": lambda L, d: L.tensor([2 ** 64], dtype=L.float32),
    "tensor_0d_max": lambda L, d: L.tensor(2 ** BITS[d] - 1, dtype=getattr(L, d)),
    "zeros": lambda L, d: L.zeros(2, 3, dtype=getattr(L, d)),
    "ones": lambda L, d: L.ones(3, dtype=getattr(L, d)),
    "full_max": lambda L, d: L.full((2,), 2 ** BITS[d] - 1, dtype=getattr(L, d)),
    "full_neg1": lambda L, d: L.full((2,), -1, dtype=getattr(L, d)),
    "empty_shape": lambda L, d: L.empty(2, 2, dtype=getattr(L, d)).shape,
    "zeros_like": lambda L, d: L.zeros_like(_big(L, d)),
    "ones_like": lambda L, d: L.ones_like(_big(L, d)),
    "new_full": lambda L, d: _small(L, d).new_full((2,), 4),
    "new_tensor": lambda L, d: _small(L, d).new_tensor([4, 5]),
    "fill_max": lambda L, d: _small(L, d).fill_(2 ** BITS[d] - 1),
    "fill_over": lambda L, d: _small(L, d).fill_(2 ** BITS[d]),
    "zero_": lambda L, d: _big(L, d).zero_(),
    "to_int64": lambda L, d: _big(L, d).to(L.int64),
    "to_int32": lambda L, d: _big(L, d).to(L.int32),
    "to_uint8": lambda L, d: _big(L, d).to(L.uint8),
    "to_bool": lambda L, d: _big(L, d).to(L.bool),
    "to_float64": lambda L, d: _big(L, d).to(L.float64),
    "to_float32": lambda L, d: _big(L, d).to(L.float32),
    "to_float16": lambda L, d: _big(L, d).to(L.float16),
    "to_bfloat16": lambda L, d: _big(L, d).to(L.bfloat16),
    "to_complex64": lambda L, d: _small(L, d).to(L.complex64),
    "from_float32": lambda L, d: L.tensor([1e20, -3.5, 7.9, 2.0 ** 63, 0.5]).to(getattr(L, d)),
    "from_float64": lambda L, d: L.tensor([1e20, -3.5, 7.9, 2.0 ** 63, 2.0 ** 64 - 2048],
                                          dtype=L.float64).to(getattr(L, d)),
    "from_float16": lambda L, d: L.tensor([65504.0, -2.0, 3.5], dtype=L.float16).to(getattr(L, d)),
    "from_bfloat16": lambda L, d: L.tensor([-2.0, 3.5, 256.0], dtype=L.bfloat16).to(getattr(L, d)),
    "from_int64": lambda L, d: L.tensor([-1, 70000, 2 ** 40, -(2 ** 63)]).to(getattr(L, d)),
    "from_int8": lambda L, d: L.tensor([-1, 5], dtype=L.int8).to(getattr(L, d)),
    "from_bool": lambda L, d: L.tensor([True, False]).to(getattr(L, d)),
    "from_complex": lambda L, d: L.tensor([3.5 + 1j, 4.0]).to(getattr(L, d)),
    "between_unsigned": lambda L, d: tuple(_big(L, d).to(getattr(L, e)) for e in UNSIGNED),
    "copy_from_int": lambda L, d: _small(L, d).copy_(L.tensor([-1, 2, 3])),
    "copy_from_float": lambda L, d: _small(L, d).copy_(L.tensor([1.5, 2.5, 3.5])),
    "view_signed": lambda L, d: _big(L, d).view({"uint16": L.int16, "uint32": L.int32, "uint64": L.int64}[d]),
    "view_from_signed": lambda L, d: L.tensor([-1, 2], dtype={"uint16": L.int16, "uint32": L.int32,
                                                               "uint64": L.int64}[d]).view(getattr(L, d)),
    "view_bytes": lambda L, d: _small(L, d).view(L.uint8),
    "clone": lambda L, d: _big(L, d).clone(),
    "contiguous": lambda L, d: _big(L, d).reshape(3, 1).t().contiguous(),
    "strided": lambda L, d: _big(L, d)[::2].contiguous(),
    # Python values out
    "tolist": lambda L, d: _big(L, d).tolist(),
    "item": lambda L, d: _big(L, d)[0].item(),
    "int": lambda L, d: int(_big(L, d)[1]),
    "float": lambda L, d: float(_big(L, d)[0]),
    "bool": lambda L, d: bool(_big(L, d)[2]),
    "repr": lambda L, d: repr(_big(L, d)).replace("torch.", "ember."),
    "repr_2d": lambda L, d: repr(_big(L, d).reshape(3, 1)).replace("torch.", "ember."),
    "repr_0d": lambda L, d: repr(_big(L, d)[0]).replace("torch.", "ember."),
    "type": lambda L, d: _small(L, d).type().split(".")[-1],
    "is_signed": lambda L, d: _small(L, d).is_signed(),
    "is_floating_point": lambda L, d: _small(L, d).is_floating_point(),
    "element_size": lambda L, d: _small(L, d).element_size(),
    "dtype_traits": lambda L, d: (getattr(L, d).is_signed, getattr(L, d).is_floating_point,
                                  getattr(L, d).itemsize, getattr(L, d).is_complex),
    "iinfo": lambda L, d: (L.iinfo(getattr(L, d)).min, L.iinfo(getattr(L, d)).max, L.iinfo(getattr(L, d)).bits),
    # arithmetic torch has kernels for
    "mul": lambda L, d: _big(L, d) * _small(L, d),
    "mul_int": lambda L, d: _big(L, d) * 2,
    "rmul_int": lambda L, d: 3 * _small(L, d),
    "mul_bool_scalar": lambda L, d: _small(L, d) * True,
    "mul_float": lambda L, d: _small(L, d) * 2.5,
    "mul_0d_int64": lambda L, d: _small(L, d) * L.tensor(2),
    "mul_0d_float64": lambda L, d: _small(L, d) * L.tensor(2.0, dtype=L.float64),
    "mul_complex_scalar": lambda L, d: _small(L, d) * (1 + 2j),
    "mul_neg_scalar": lambda L, d: _small(L, d) * -1,
    "div": lambda L, d: _small(L, d) / 2,
    "true_divide": lambda L, d: L.true_divide(_small(L, d), _small(L, d)),
    "div_f32": lambda L, d: _big(L, d) / L.tensor([2.0, 2.0, 2.0]),
    "eq": lambda L, d: _big(L, d) == _small(L, d),
    "ne": lambda L, d: _big(L, d) != _small(L, d),
    "eq_int": lambda L, d: _small(L, d) == 1,
    "eq_max": lambda L, d: _big(L, d) == 2 ** BITS[d] - 1,
    "eq_float": lambda L, d: _small(L, d) == 1.0,
    "eq_0d_uint8": lambda L, d: _small(L, d) == L.tensor(2, dtype=L.uint8),
    "and": lambda L, d: _big(L, d) & _small(L, d),
    "or": lambda L, d: _big(L, d) | _small(L, d),
    "xor": lambda L, d: _big(L, d) ^ _small(L, d),
    "and_int": lambda L, d: _big(L, d) & 1,
    "or_bool": lambda L, d: _small(L, d) | True,
    "maximum": lambda L, d: L.maximum(_big(L, d), _small(L, d)),
    "minimum": lambda L, d: L.minimum(_big(L, d), _small(L, d)),
    "clamp": lambda L, d: _big(L, d).clamp(1, 2),
    "clamp_min": lambda L, d: _small(L, d).clamp(min=2),
    "clamp_neg_min": lambda L, d: _small(L, d).clamp(-1, 2),
    "clamp_tensors": lambda L, d: L.clamp(_big(L, d), _small(L, d), _small(L, d)),
    "where": lambda L, d: L.where(_mask(L), _big(L, d), _small(L, d)),
    "where_scalar": lambda L, d: L.where(_mask(L), _big(L, d), 0),
    "sqrt": lambda L, d: _small(L, d).sqrt(),
    "exp": lambda L, d: _small(L, d).exp(),
    "sigmoid": lambda L, d: L.sigmoid(_small(L, d)),
    "atan2": lambda L, d: L.atan2(_small(L, d), _small(L, d)),
    "floor": lambda L, d: _big(L, d).floor(),
    "round": lambda L, d: _big(L, d).round(),
    "relu": lambda L, d: L.relu(_big(L, d)),
    "isnan": lambda L, d: L.isnan(_big(L, d)),
    "isfinite": lambda L, d: L.isfinite(_big(L, d)),
    "signbit": lambda L, d: L.signbit(_big(L, d)),
    # reductions and scans
    "sum": lambda L, d: _big(L, d).sum(),
    "sum_dim": lambda L, d: _big(L, d).reshape(1, 3).sum(1),
    "sum_of_max": lambda L, d: L.tensor([2 ** 15, 2 ** 15], dtype=getattr(L, d)).sum(),
    "prod": lambda L, d: _small(L, d).prod(),
    "nansum": lambda L, d: L.nansum(_small(L, d)),
    "cumsum": lambda L, d: _small(L, d).cumsum(0),
    "cumprod": lambda L, d: _small(L, d).cumprod(0),
    "any": lambda L, d: _big(L, d).any(),
    "all": lambda L, d: _big(L, d).all(),
    "any_dim": lambda L, d: _big(L, d).reshape(3, 1).any(1),
    "logsumexp": lambda L, d: L.logsumexp(_small(L, d), 0),
    # sorting
    "sort": lambda L, d: L.sort(_big(L, d)).values,
    "sort_desc": lambda L, d: L.sort(_big(L, d), descending=True).values,
    "sort_stable": lambda L, d: L.sort(L.tensor([5, 1, 5, 0], dtype=getattr(L, d)), stable=True).indices,
    "argsort": lambda L, d: L.argsort(_big(L, d)),
    "msort": lambda L, d: L.msort(_big(L, d)),
    "unique": lambda L, d: L.unique(L.tensor([5, 1, 5, 0], dtype=getattr(L, d))),
    "unique_counts": lambda L, d: L.unique(L.tensor([5, 1, 5, 0], dtype=getattr(L, d)), return_counts=True)[1],
    # moving data
    "cat": lambda L, d: L.cat([_big(L, d), _small(L, d)]),
    "stack": lambda L, d: L.stack([_big(L, d), _small(L, d)]),
    "index": lambda L, d: _big(L, d)[L.tensor([0, 2])],
    "mask_index": lambda L, d: _big(L, d)[_mask(L)],
    "index_select": lambda L, d: L.index_select(_big(L, d), 0, L.tensor([2, 0])),
    "gather": lambda L, d: _big(L, d).gather(0, L.tensor([0, 0, 1])),
    "scatter": lambda L, d: _small(L, d).scatter(0, L.tensor([0]), _big(L, d)[:1]),
    "setitem": lambda L, d: (lambda t: (t.__setitem__(0, 2 ** BITS[d] - 1), t)[1])(_small(L, d)),
    "setitem_slice": lambda L, d: (lambda t: (t.__setitem__(slice(0, 2), _big(L, d)[:2]), t)[1])(_small(L, d)),
    "flip": lambda L, d: L.flip(_big(L, d), (0,)),
    "roll": lambda L, d: L.roll(_big(L, d), 1),
    "repeat": lambda L, d: _big(L, d).repeat(2),
    "expand": lambda L, d: _big(L, d)[None].expand(2, 3).contiguous(),
    "chunk": lambda L, d: L.chunk(_big(L, d), 3)[1],
    "pad": lambda L, d: L.nn.functional.pad(_small(L, d), (1, 1)),
    "outer": lambda L, d: L.outer(_small(L, d), _small(L, d)),
    "equal": lambda L, d: L.equal(_big(L, d), _big(L, d).clone()),
    "allclose": lambda L, d: L.allclose(_small(L, d), _small(L, d)),
    "isclose": lambda L, d: L.isclose(_big(L, d), _small(L, d)),
    # interop
    "numpy": lambda L, d: (str(_big(L, d).numpy().dtype), _big(L, d).numpy().tolist()),
    "from_numpy": lambda L, d: L.from_numpy(np.array([2 ** BITS[d] - 1, 7], dtype=d)),
    "tensor_of_ndarray": lambda L, d: L.tensor(np.array([2 ** BITS[d] - 1, 7], dtype=d)),
    "as_tensor_ndarray": lambda L, d: L.as_tensor(np.array([[1, 2]], dtype=d)),
    "dlpack_numpy": lambda L, d: L.from_dlpack(np.array([2 ** BITS[d] - 1, 3], dtype=d)),
    "to_dlpack_numpy": lambda L, d: np.from_dlpack(_big(L, d)).tolist(),
    "save_load": lambda L, d: _save_load(L, _big(L, d)),
    # what torch refuses: not implemented ...
    "add": lambda L, d: _small(L, d) + _small(L, d),
    "add_scalar": lambda L, d: _small(L, d) + 1,
    "sub": lambda L, d: _small(L, d) - _small(L, d),
    "neg": lambda L, d: -_small(L, d),
    "abs": lambda L, d: _small(L, d).abs(),
    "invert": lambda L, d: ~_small(L, d),
    "lt": lambda L, d: _small(L, d) < _small(L, d),
    "ge_scalar": lambda L, d: _small(L, d) >= 2,
    "floor_divide": lambda L, d: _small(L, d) // _small(L, d),
    "remainder": lambda L, d: _small(L, d) % 2,
    "pow": lambda L, d: _small(L, d) ** 2,
    "lshift": lambda L, d: _small(L, d) << 1,
    "max": lambda L, d: _small(L, d).max(),
    "amax": lambda L, d: _small(L, d).amax(),
    "argmax": lambda L, d: _small(L, d).argmax(),
    "mean": lambda L, d: _small(L, d).mean(),
    "std": lambda L, d: _small(L, d).std(),
    "topk": lambda L, d: L.topk(_small(L, d), 1).values,
    "matmul": lambda L, d: _small(L, d).reshape(3, 1) @ _small(L, d).reshape(1, 3),
    "dot": lambda L, d: L.dot(_small(L, d), _small(L, d)),
    "arange": lambda L, d: L.arange(3, dtype=getattr(L, d)),
    "masked_fill": lambda L, d: _small(L, d).masked_fill(_mask(L), 7),
    "index_put": lambda L, d: _small(L, d).index_put_((L.tensor([0]),), _big(L, d)[:1]),
    "norm": lambda L, d: _small(L, d).norm(),
    # ... and promotion with other integer types or bool
    "add_int64": lambda L, d: _small(L, d) * L.tensor([1, 1, 1]),
    "mul_uint8": lambda L, d: _small(L, d) * L.tensor([1, 1, 1], dtype=L.uint8),
    "mul_bool_tensor": lambda L, d: _small(L, d) * L.tensor([True, True, True]),
    "eq_int64": lambda L, d: _small(L, d) == L.tensor([3, 1, 2]),
    "cat_int64": lambda L, d: L.cat([_small(L, d), L.tensor([1])]),
}

DTYPE_NAMES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
               "float64", "complex64", "complex128", "uint16", "uint32", "uint64"]


def encode(r):
    """What a case gave, in plain Python: comparable across the libraries."""
    if hasattr(r, "dtype") and hasattr(r, "tolist") and not isinstance(r, np.ndarray):
        return {"dtype": str(r.dtype).split(".")[-1], "shape": list(r.shape), "values": _plain(r.tolist())}
    if isinstance(r, tuple) and not hasattr(r, "_fields") and type(r).__name__ not in ("Size", "torch.Size"):
        return {"tuple": [encode(x) for x in r]}
    if type(r).__name__ == "dtype":
        return {"dtype_object": str(r).split(".")[-1]}
    if type(r).__name__ == "Size":
        return {"size": list(r)}
    return {"value": _plain(r)}


def _plain(v):
    if isinstance(v, complex):
        return {"re": v.real, "im": v.imag}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if isinstance(v, tuple):
        return [_plain(x) for x in v]
    return v


def run(L, fn, *args):
    try:
        return encode(fn(L, *args))
    except Exception as e:  # noqa: BLE001  (the refusal is the result)
        return {"error": type(e).__name__, "message": str(e).splitlines()[0] if str(e) else ""}


def all_results(L):
    out = {}
    for name, fn in UNARY_CASES.items():
        for d in UNSIGNED:
            out[f"{name}[{d}]"] = run(L, fn, d)
    for a in DTYPE_NAMES:
        for b in DTYPE_NAMES:
            if a in UNSIGNED or b in UNSIGNED:
                out[f"promote_types[{a},{b}]"] = run(L, lambda L, a, b: L.promote_types(getattr(L, a), getattr(L, b)),
                                                     a, b)
    return out
