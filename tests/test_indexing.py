"""Basic indexing and __setitem__, against NumPy; views share storage; version counter."""
import numpy as np
import pytest

import ember

SHAPE = (2, 3, 4, 5)
T0 = ember.tensor(0)

INDICES = [
    0, -1, 1, -2, (1, 2), (0, -1, 3, -5), (1, 2, 3, 4),
    slice(None), slice(1, None), slice(None, 1), slice(-1, None), slice(0, 2, 1),
    (slice(None), slice(None, None, 2)), (Ellipsis, slice(1, 4, 2)), (slice(None), 1, slice(None, None, 3)),
    (slice(-100, 100), slice(2, 1)), (slice(5, 10),), (Ellipsis, 0), (0, Ellipsis), (0, Ellipsis, 0),
    Ellipsis, (Ellipsis,), None, (None, 0), (0, None, Ellipsis, None), (Ellipsis, None),
    (slice(None), None, 1, None, slice(1, 3)), True, False, (True, 0), (0, False), (None, True, Ellipsis),
    (1, 2, 3, 4, None), (slice(None, None, 3), slice(None, None, 2), slice(1, None, 3), slice(None, None, 4)),
    np.int64(1), (np.int32(-1), np.int8(2)), (slice(np.int64(1), np.int64(3)),),
    (Ellipsis, slice(None, None, 7)), (),
]


@pytest.mark.parametrize("k", range(len(INDICES)))
def test_getitem_matches_numpy(k):
    idx = INDICES[k]
    ref = np.arange(120).reshape(SHAPE)
    base = ember.arange(120).view(*SHAPE)
    got = base[idx]
    expected = ref[idx]
    assert isinstance(got, ember.Tensor)
    assert tuple(got.shape) == np.shape(expected)
    assert got.tolist() == np.asarray(expected).tolist()
    if any(isinstance(i, bool) for i in (idx if isinstance(idx, tuple) else (idx,))):
        return  # torch treats bool indices as advanced indexing (a copy), so only values are checked
    # a view: writing through it writes the base
    got.fill_(-1)
    ref[idx] = -1
    assert base.tolist() == ref.tolist()


@pytest.mark.parametrize("idx", [(ember.tensor(1),), (ember.tensor(-1), ember.tensor(2, dtype=ember.int32)),
                                 (slice(ember.tensor(1), None),), (slice(None, ember.tensor(3)), ember.tensor(0)),
                                 (ember.tensor(1, dtype=ember.int16),)])
def test_getitem_tensor_scalars(idx):
    ref = np.arange(120).reshape(SHAPE)
    np_idx = tuple(slice(*(None if v is None else int(v) for v in (i.start, i.stop, i.step)))
                   if isinstance(i, slice) else int(i) for i in idx)
    got = ember.arange(120).view(*SHAPE)[idx]
    assert got.tolist() == ref[np_idx].tolist()


def test_views_share_storage_and_strides():
    base = ember.arange(24.).view(2, 3, 4)
    v = base[:, None, 1:, ::2]
    assert tuple(v.shape) == (2, 1, 2, 2) and v.stride() == (12, 12, 4, 2)
    assert v.storage_offset() == 4 and v._base is base._base
    assert base[1].is_contiguous() and base[:, 1].stride() == (12, 1)
    assert base[1, 2, 3].storage_offset() == 23 and base[1, 2, 3].dim() == 0
    assert base[...].data_ptr() == base.data_ptr()
    base[1, 2, 3].fill_(100)
    assert base.numpy()[1, 2, 3] == 100
    x = ember.tensor(5)
    assert x[...].tolist() == 5 and tuple(x[None].shape) == (1,) and tuple(x[None, None].shape) == (1, 1)
    assert x[()].tolist() == 5


@pytest.mark.parametrize("idx", [10, -11, (0, 3), (0, 0, 4), (Ellipsis, 5), (1, -4), 2 ** 40, -2 ** 63,
                                 ember.tensor(10), np.int64(-11)])
def test_out_of_range_raises_index_error(idx):
    with pytest.raises(IndexError):
        ember.zeros(10, 3, 4)[idx] if not isinstance(idx, tuple) or len(idx) < 3 else ember.zeros(2, 3, 4)[idx]


@pytest.mark.parametrize("t,idx", [(ember.zeros(2, 3), (0, 0, 0)), (ember.tensor(5), 0),
                                   (ember.zeros(2), (0, None, 0)), (ember.zeros(2, 3), (Ellipsis, 0, 0, 0))])
def test_too_many_indices(t, idx):
    with pytest.raises(IndexError):
        t[idx]


def test_two_ellipses_raise():
    with pytest.raises(IndexError):  # NumPy and torch: an index can only have a single ellipsis
        ember.zeros(2, 3)[..., ..., 0]


@pytest.mark.parametrize("idx", [slice(None, None, -1), slice(5, 1, -2), (slice(None), slice(None, None, -1))])
def test_negative_step_raises(idx):
    with pytest.raises(ValueError):
        ember.zeros(4, 4)[idx]


def test_zero_step_and_bad_index_types():
    with pytest.raises(ValueError):
        ember.zeros(4)[::0]
    for bad in (1.5, "a", ember.tensor(1.)):
        with pytest.raises((IndexError, TypeError)):
            ember.zeros(4)[bad]


# ---- __setitem__ ------------------------------------------------------------------

SETS = [  # index, value, (shape, dtype of target)
    (0, 5, ((2, 3), "float32")),
    ((slice(None), 1), ember.tensor([7., 8.]), ((2, 3), "float32")),
    (Ellipsis, ember.tensor([1, 2, 3]), ((2, 3), "float32")),  # broadcast + dtype cast
    (0, ember.ones(1, 1, 3), ((2, 3), "float32")),  # extra leading 1-dims
    (slice(None), ember.ones(1, 1, 1, 3) * 4, ((2, 3), "float32")),
    (0, 2.7, ((2, 3), "int64")),
    (0, ember.tensor([2.7, -1.5, 3.9]), ((2, 3), "int32")),
    (0, True, ((2, 3), "float32")),
    (None, 1., ((2,), "float32")),
    (slice(None, None, 2), 1., ((5,), "float32")),
    ((slice(1, None), slice(None, None, 2)), -3, ((4, 5), "int16")),
    (0, np.float64(2.5), ((2,), "float32")),
    (Ellipsis, 1, ((), "float64")),
    (slice(0, 0), 1, ((2,), "float32")),
    (0, ember.tensor(3.5, dtype=ember.float64), ((2,), "float32")),
    (0, [1, 2, 3], ((2, 3), "float32")),
    (1, [[4, 5, 6]], ((2, 3), "int64")),
    ((Ellipsis, 1), [10, 20], ((2, 3), "float64")),
    ((0, 1), ember.tensor([[[9]]]), ((2, 3), "uint8")),
    (1, ember.tensor([True, False, True]), ((2, 3), "float32")),
    (0, ember.tensor([1.5, 2.5], dtype=ember.float16), ((2, 2), "bfloat16")),
    ((1, None), ember.tensor([[1, 2]]), ((2, 2), "int8")),
    (True, 7, ((2,), "int32")),
    (0, 1, ((2, 3), "bool")),
    (ember.tensor(1), 9, ((3,), "int64")),
    (np.int64(-1), 9, ((3,), "int64")),
]
NPD = {"float32": np.float32, "float64": np.float64, "int64": np.int64, "int32": np.int32, "int16": np.int16,
       "int8": np.int8, "uint8": np.uint8, "bool": np.bool_, "bfloat16": np.float32, "float16": np.float16}


def _np_value(v):
    if isinstance(v, ember.Tensor):
        return np.asarray(v.tolist())
    return np.asarray(v)


def _np_index(idx):
    if isinstance(idx, ember.Tensor):
        return int(idx)
    return idx


@pytest.mark.parametrize("k", range(len(SETS)))
def test_setitem_matches_numpy(k):
    idx, value, (shape, dname) = SETS[k]
    n = int(np.prod(shape))
    ref = (np.arange(n) % 3).reshape(shape).astype(NPD[dname])
    t = ember.tensor(ref.tolist(), dtype=getattr(ember, dname))
    ptr = t.data_ptr()
    v = _np_value(value)
    while v.ndim > np.ndim(ref[_np_index(idx)]) and v.shape[0] == 1:
        v = v[0]  # NumPy refuses extra leading 1-dims; torch drops them
    ref[_np_index(idx)] = v
    t[idx] = value
    assert t.data_ptr() == ptr  # in place
    assert t.tolist() == ref.tolist()


def test_setitem_writes_through_views():
    base = ember.zeros(3, 4)
    v = base[1:, ::2]
    v[0] = 5
    v[:, 1] = ember.tensor([7., 8.])
    assert base.tolist() == [[0, 0, 0, 0], [5, 0, 7, 0], [0, 0, 8, 0]]
    a = np.zeros((2, 2))
    t = ember.from_numpy(a)
    t[1] = 3
    assert a.tolist() == [[0, 0], [3, 3]]


def test_setitem_from_overlapping_self():
    t = ember.arange(6.)
    t[1:] = t[:-1].clone()
    assert t.tolist() == [0., 0., 1., 2., 3., 4.]
    u = ember.arange(4.)
    u[...] = u  # self-assignment is a no-op
    assert u.tolist() == [0., 1., 2., 3.]


@pytest.mark.parametrize("shape,idx,value,exc", [
    ((2, 3), (slice(None), 1), ember.tensor([7., 8., 9.]), RuntimeError),
    ((2, 3), 0, ember.ones(2, 3), RuntimeError),
    ((2, 3), 0, [1, 2], (RuntimeError, TypeError)),
    ((2,), 5, 1., IndexError),
    ((2,), 0, "a", TypeError),
    ((2,), 0, None, TypeError),
    ((2,), 0, object(), TypeError),
])
def test_setitem_errors(shape, idx, value, exc):
    t = ember.zeros(*shape)
    with pytest.raises(exc):
        t[idx] = value
    assert (t.numpy() == 0).all()


@pytest.mark.parametrize("dname,value", [("uint8", 300), ("uint8", 256), ("int8", 128), ("int64", float("nan")),
                                         ("int32", 2 ** 40), ("int64", float("inf"))])
def test_setitem_value_out_of_range(dname, value):
    t = ember.zeros(2, dtype=getattr(ember, dname))
    with pytest.raises(RuntimeError):  # torch: "value cannot be converted to type uint8_t without overflow"
        t[0] = value


def test_delitem():
    with pytest.raises(TypeError):
        del ember.zeros(2)[0]


# ---- version counter ---------------------------------------------------------------

def test_version_counter_increments_on_inplace_writes():
    x = ember.empty(3)
    v0 = x._version
    x.add_(1)
    assert x._version == v0 + 1
    x[0] = 1
    assert x._version == v0 + 2
    view = x[1:]
    assert view._version == x._version  # views share the counter
    view.fill_(2)
    assert x._version == v0 + 3 and view._version == v0 + 3
    x.zero_()
    x.mul_(2)
    x.copy_(ember.ones(3))
    assert x._version == v0 + 6
    y = x + 1  # out-of-place: no bump
    assert x._version == v0 + 6 and y._version == 0
    x.detach().add_(1)  # detach shares the counter
    assert x._version == v0 + 7
    x.uniform_()
    assert x._version == v0 + 8
    ember.add(ember.ones(3), 1, out=x)
    assert x._version == v0 + 9


FRESH = {"zeros": lambda: ember.zeros(2), "ones": lambda: ember.ones(2), "empty": lambda: ember.empty(2),
         "full": lambda: ember.full((2,), 1.), "tensor": lambda: ember.tensor([1.]), "arange": lambda: ember.arange(3),
         "rand": lambda: ember.rand(2), "randn": lambda: ember.randn(2), "eye": lambda: ember.eye(2),
         "zeros_like": lambda: ember.zeros_like(ember.ones(2)), "clone": lambda: ember.ones(2).clone(),
         "randperm": lambda: ember.randperm(3), "new_zeros": lambda: ember.ones(2).new_zeros(2),
         "add": lambda: ember.ones(2) + 1, "linspace": lambda: ember.linspace(0, 1, 3)}


def test_fresh_tensors_start_at_version_zero():
    # as in torch: filling a brand-new tensor is not a user-visible in-place write
    nonzero = {name: make()._version for name, make in FRESH.items() if make()._version != 0}
    assert not nonzero, f"fresh tensors with _version != 0: {nonzero}"
