"""Property-based indexing: random shapes and random keys mixing ints,
slices (any start/stop/step > 0), None, `...`, bool masks, int lists and
int64 tensors, for x[key] and x[key] = v, against NumPy; and random bad keys,
which must raise torch's exception type and never crash.

NumPy is the reference except for one documented difference: torch applies
integer keys first (as select) and only then the advanced ones, so an int
never counts as an advanced index when torch decides where the indexed dims
go (x[0, :, [1, 2]] is (3, 2) in torch, (2, 3) in NumPy). The reference
therefore indexes in two steps: the ints (a basic index), then the rest."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ember

try:
    import torch as _torch
except ImportError:
    _torch = None

SETTINGS = settings(max_examples=400, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow])


# ---------------------------------------------------------------------------
# keys: a list of components, each ("int", i) | ("slice", s) | ("none",) |
# ("ellipsis",) | ("mask", bool array) | ("list", ints) | ("tensor", ints)
@st.composite
def shape_and_key(draw):
    ndim = draw(st.integers(0, 4))
    shape = tuple(draw(st.lists(st.integers(0, 4), min_size=ndim, max_size=ndim)))
    ell = draw(st.booleans())
    ell_start = draw(st.integers(0, ndim)) if ell else None
    ell_len = draw(st.integers(0, ndim - ell_start)) if ell else 0
    end = ndim if ell else draw(st.integers(0, ndim))  # without `...`, the key may stop early
    comps, i = [], 0
    adv_len = draw(st.integers(0, 3))  # index lists share a length (or 1) so that they broadcast
    while True:
        if draw(st.integers(0, 5)) == 0:
            comps.append(("none",))
        if ell and i == ell_start:
            comps.append(("ellipsis",))
            i += ell_len
            ell = False
            continue
        if i >= end:
            break
        size = shape[i]
        kind = draw(st.sampled_from(["int", "slice", "slice", "mask", "list", "tensor"]))
        if kind == "int" and size == 0:
            kind = "slice"
        if kind == "int":
            comps.append(("int", draw(st.integers(-size, size - 1))))
        elif kind == "slice":
            bound = st.none() | st.integers(-6, 6)
            comps.append(("slice", slice(draw(bound), draw(bound), draw(st.none() | st.integers(1, 3)))))
        elif kind == "mask":
            stop = ell_start if ell and ell_start > i else end  # a mask must not span the `...`
            k = draw(st.integers(1, max(1, min(2, stop - i))))
            k = min(k, stop - i) if stop > i else 1
            mshape = shape[i:i + k]
            bits = draw(st.lists(st.booleans(), min_size=int(np.prod(mshape)), max_size=int(np.prod(mshape))))
            comps.append(("mask", np.array(bits, bool).reshape(mshape)))
            i += k
            continue
        else:
            n = draw(st.sampled_from([adv_len, 1])) if size else 0
            idx = draw(st.lists(st.integers(-size, size - 1), min_size=n, max_size=n)) if size else []
            comps.append((kind, idx))
        i += 1
    return shape, comps


def key_for(lib, comps):
    """The key as ember, torch or NumPy (lib=np) spells it."""
    out = []
    for c in comps:
        kind = c[0]
        if kind == "int":
            out.append(c[1])
        elif kind == "slice":
            out.append(c[1])
        elif kind == "none":
            out.append(None)
        elif kind == "ellipsis":
            out.append(Ellipsis)
        elif kind == "mask":
            out.append(c[1] if lib is np else lib.from_numpy(c[1].copy()))
        elif kind == "list":
            out.append(np.array(c[1], np.int64) if lib is np else list(c[1]))
        else:
            out.append(np.array(c[1], np.int64) if lib is np else lib.tensor(c[1], dtype=lib.int64))
    return tuple(out)


def np_reference_key(comps, ndim):
    """(first, second): torch's order -- the ints as a basic key, then the rest.
    A second difference: a `...` that stands for no dims leaves no gap between
    the advanced keys around it in torch (it does in NumPy), so it is dropped."""
    first, second = [], []
    for c in comps:
        if c[0] == "int":
            first.append(c[1])
            continue
        second.append(c)
        if c[0] == "ellipsis":
            first.append(Ellipsis)
        elif c[0] == "mask":
            first += [slice(None)] * c[1].ndim
        elif c[0] != "none":
            first.append(slice(None))
    ndim_after_ints = ndim - sum(c[0] == "int" for c in comps)
    consumed = sum(c[1].ndim if c[0] == "mask" else c[0] != "none" for c in second if c[0] != "ellipsis")
    if consumed == ndim_after_ints:
        second = [c for c in second if c[0] != "ellipsis"]
    if Ellipsis not in first:
        first.append(Ellipsis)  # so that a[first] is an array (a view), even 0-d
    return tuple(first), key_for(np, second)


def np_get(a, comps):
    first, second = np_reference_key(comps, a.ndim)
    return np.asarray(a[first][second])


def operand(shape, dtype, transposed):
    """x (ember) and its values (NumPy), contiguous or as a transposed view."""
    rng = np.random.default_rng(abs(hash(shape)) % 1000)
    v = rng.integers(-50, 50, shape).astype(dtype)
    if transposed and len(shape) >= 2:
        x = ember.from_numpy(np.ascontiguousarray(v.T).copy()).permute(*reversed(range(len(shape))))
    else:
        x = ember.from_numpy(v.copy())
    return x, v


@SETTINGS
@given(shape_and_key(), st.sampled_from([np.float32, np.int64]), st.booleans())
def test_getitem_matches_numpy(sk, dtype, transposed):
    shape, comps = sk
    x, v = operand(shape, dtype, transposed)
    try:
        want = np_get(v, comps)
    except IndexError:  # index arrays (or masks' nonzero counts) that don't broadcast
        with pytest.raises(IndexError):
            x[key_for(ember, comps)]
        return
    got = x[key_for(ember, comps)]
    assert tuple(got.shape) == want.shape, (shape, comps)
    np.testing.assert_array_equal(got.numpy(), want)
    assert got.dtype == x.dtype
    if _torch is not None:  # the reference's two adjustments, checked against torch itself
        assert tuple(_torch.from_numpy(v.copy())[key_for(_torch, comps)].shape) == want.shape


@SETTINGS
@given(shape_and_key(), st.booleans(), st.booleans(), st.data())
def test_setitem_matches_numpy(sk, transposed, scalar_value, data):
    shape, comps = sk
    x, v = operand(shape, np.float32, transposed)
    first, second = np_reference_key(comps, v.ndim)
    try:
        ids = np.arange(v.size).reshape(v.shape)[first][second]
    except IndexError:
        with pytest.raises(IndexError):
            x[key_for(ember, comps)] = 1.0
        return
    # duplicate positions with a tensor value: which write wins is unspecified in torch
    if scalar_value or np.unique(ids).size < ids.size:
        val_np = np.float32(data.draw(st.integers(-9, 9)))
        val = float(val_np)
    else:
        # the value's shape: the target's, or a suffix of it (broadcast)
        vshape = ids.shape[data.draw(st.integers(0, ids.ndim)):]
        val_np = np.asarray(np.arange(np.prod(vshape), dtype=np.float32).reshape(vshape) + 100)
        val = ember.from_numpy(val_np.copy())
    want = v.copy()
    want[first][second] = val_np
    x[key_for(ember, comps)] = val
    np.testing.assert_array_equal(x.numpy(), want)


def selects_elements(shape, comps):
    try:
        return np_get(np.zeros(shape), comps).size > 0
    except IndexError:
        return False


# ---------------------------------------------------------------------------
# bad keys: each kind of mistake raises torch's exception type
@st.composite
def shape_and_bad_key(draw):
    shape, comps = draw(shape_and_key())
    dims = [j for j, c in enumerate(comps) if c[0] in ("int", "list", "tensor")]
    kind = draw(st.sampled_from(["too_many", "out_of_range", "float", "neg_step", "mask_shape"]))
    if kind == "too_many":
        return shape, comps + [("int", 0)] * (len(shape) + 1), IndexError
    # (torch checks no bounds when the result is empty: only keys that select elements)
    if kind == "out_of_range" and dims and selects_elements(shape, comps):
        j = draw(st.sampled_from(dims))
        c = comps[j]
        consumed = sum(1 if d[0] in ("int", "slice", "list", "tensor") else d[1].ndim if d[0] == "mask" else 0
                       for d in comps[:j])
        if "ellipsis" in [d[0] for d in comps[:j]]:
            consumed = len(shape) - sum(1 if d[0] in ("int", "slice", "list", "tensor")
                                        else d[1].ndim if d[0] == "mask" else 0 for d in comps[j:])
        size = shape[consumed]
        bad = draw(st.sampled_from([size, size + 3, -size - 1, -size - 5]))
        comps = list(comps)
        comps[j] = ("int", bad) if c[0] == "int" else (c[0], list(c[1]) + [bad])
        return shape, comps, IndexError
    if kind == "neg_step" and len(shape) >= 1:
        return shape, [("slice", slice(None, None, -draw(st.integers(1, 3))))], ValueError
    if kind == "mask_shape" and len(shape) >= 1:
        m = np.ones((shape[0] + draw(st.integers(1, 3)),), bool)
        return shape, [("mask", m)], IndexError
    return shape, comps + [("float", 1.5)], IndexError


def bad_key_for(comps):
    return tuple(1.5 if c[0] == "float" else key_for(ember, [c])[0] for c in comps)


@SETTINGS
@given(shape_and_bad_key(), st.booleans())
def test_bad_keys_raise_torchs_error(skb, setting):
    shape, comps, exc = skb
    x, v = operand(shape, np.float32, False)
    before = x.numpy().copy()
    with pytest.raises(exc):
        if setting:
            x[bad_key_for(comps)] = 1.0
        else:
            x[bad_key_for(comps)]
    np.testing.assert_array_equal(x.numpy(), before)  # a failed write changes nothing


@SETTINGS
@given(st.lists(st.integers(0, 4), min_size=0, max_size=3),
       st.lists(st.one_of(st.integers(-10, 10), st.floats(allow_nan=True), st.text(max_size=2), st.none(),
                          st.just(Ellipsis), st.booleans(), st.lists(st.integers(-10, 10), max_size=3),
                          st.lists(st.booleans(), max_size=3), st.just(()), st.just({})), max_size=4))
def test_junk_keys_never_crash(shape, key):
    x = ember.zeros(tuple(shape))
    for k in (tuple(key), key[0] if key else ()):
        try:
            x[k]
        except (IndexError, TypeError, ValueError, RuntimeError):
            pass
        try:
            x[k] = 2.0
        except (IndexError, TypeError, ValueError, RuntimeError):
            pass
