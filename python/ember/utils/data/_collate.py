"""Collation (torch.utils.data._utils.collate): turning a list of samples
into one batch.

`default_collate` works on the structure of the first sample and recurses:
tensors are stacked along a new dim 0, NumPy arrays and scalars become
tensors, Python ints/floats/bools become int64/float64/bool tensors,
strings and bytes stay a list, and dicts, namedtuples and sequences are
rebuilt with each field collated across the batch (tuples come back as
lists, as in PyTorch). `default_convert` (used when batching is off) only
converts NumPy data to tensors, recursively.

`collate(batch, collate_fn_map=...)` is the engine: the map sends a type
(or a tuple of types) to the function that batches it, so users can extend
`default_collate_fn_map` for their own types.
"""
import collections.abc
import copy
import re

from ..._lazy import numpy as np

import ember

# NumPy dtype kinds that have no tensor equivalent: bytes, unicode, object.
_STRING_OR_OBJECT_DTYPE = re.compile(r"[SaUO]")

_COLLATE_TYPE_ERROR = ("default_collate: batch must contain tensors, numpy arrays, numbers, "
                       "dicts or lists; found {}")


def _is_numpy_non_string(data):
    t = type(data)
    return t.__module__ == "numpy" and t.__name__ not in ("str_", "bytes_", "string_")


def _rebuild_mapping(elem, items):
    """A mapping like `elem` holding `items`: a copy of a mutable mapping keeps
    its type and attributes (OrderedDict, defaultdict, ...), else the type is
    called, else a plain dict."""
    try:
        if isinstance(elem, collections.abc.MutableMapping):
            clone = copy.copy(elem)
            clone.update(items)
            return clone
        return type(elem)(items)
    except TypeError:
        return dict(items)


def _rebuild_sequence(elem, values):
    try:
        if isinstance(elem, collections.abc.MutableSequence):
            clone = copy.copy(elem)
            for i, v in enumerate(values):
                clone[i] = v
            return clone
        return type(elem)(values)
    except TypeError:
        return list(values)


def default_convert(data):
    """NumPy arrays/scalars -> tensors, recursing into containers; all else as is."""
    if isinstance(data, ember.Tensor):
        return data
    if _is_numpy_non_string(data):
        if isinstance(data, np.ndarray) and _STRING_OR_OBJECT_DTYPE.search(data.dtype.str):
            return data
        return ember.as_tensor(data)
    if isinstance(data, collections.abc.Mapping):
        return _rebuild_mapping(data, {k: default_convert(data[k]) for k in data})
    if isinstance(data, tuple) and hasattr(data, "_fields"):  # namedtuple
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        return _rebuild_sequence(data, [default_convert(d) for d in data])
    return data


def collate(batch, *, collate_fn_map=None):
    """Batch `batch` (a list of samples) using `collate_fn_map` for leaf types
    and recursing through mappings, namedtuples and sequences."""
    elem = batch[0]
    elem_type = type(elem)
    if collate_fn_map is not None:
        if elem_type in collate_fn_map:
            return collate_fn_map[elem_type](batch, collate_fn_map=collate_fn_map)
        for collate_type, fn in collate_fn_map.items():
            if isinstance(elem, collate_type):
                return fn(batch, collate_fn_map=collate_fn_map)

    def recurse(samples):
        return collate(samples, collate_fn_map=collate_fn_map)

    if isinstance(elem, collections.abc.Mapping):
        return _rebuild_mapping(elem, {k: recurse([d[k] for d in batch]) for k in elem})
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # namedtuple
        return elem_type(*(recurse(field) for field in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        sizes = [len(s) for s in batch]
        if any(n != sizes[0] for n in sizes):
            raise RuntimeError(f"each element in list of batch should be of equal size "
                               f"(got sizes {sizes})")
        fields = [recurse(field) for field in zip(*batch)]  # fields are tuples: strings stay so
        if isinstance(elem, tuple):
            return fields  # a list, as PyTorch returns for tuples
        return _rebuild_sequence(elem, fields)
    raise TypeError(_COLLATE_TYPE_ERROR.format(elem_type))


def collate_tensor_fn(batch, *, collate_fn_map=None):
    # Worker processes send batches back by pickling, so no shared-memory
    # output is needed here (PyTorch preallocates one).
    return ember.stack(batch, 0)


def collate_numpy_array_fn(batch, *, collate_fn_map=None):
    elem = batch[0]
    if _STRING_OR_OBJECT_DTYPE.search(elem.dtype.str):
        raise TypeError(_COLLATE_TYPE_ERROR.format(elem.dtype))
    return collate([ember.as_tensor(b) for b in batch], collate_fn_map=collate_fn_map)


def collate_numpy_scalar_fn(batch, *, collate_fn_map=None):
    return ember.as_tensor(batch)


def collate_float_fn(batch, *, collate_fn_map=None):
    return ember.tensor(batch, dtype=ember.float64)


def collate_int_fn(batch, *, collate_fn_map=None):
    return ember.tensor(batch)  # int64, or bool when the samples are bools


def collate_str_fn(batch, *, collate_fn_map=None):
    return batch


default_collate_fn_map = {
    ember.Tensor: collate_tensor_fn,
    np.ndarray: collate_numpy_array_fn,
    (np.bool_, np.number, np.object_): collate_numpy_scalar_fn,
    float: collate_float_fn,
    int: collate_int_fn,
    str: collate_str_fn,
    bytes: collate_str_fn,
}


def default_collate(batch):
    """Collate a list of samples into a batch (see the module docstring)."""
    return collate(batch, collate_fn_map=default_collate_fn_map)
