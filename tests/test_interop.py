"""NumPy interop (numpy(), __array__, __array_interface__, ufuncs), DLPack, pickling, copying."""
import copy
import gc
import pickle

import numpy as np
import pytest

import ember

NP = {"bool": np.bool_, "uint8": np.uint8, "int8": np.int8, "int16": np.int16, "int32": np.int32,
      "int64": np.int64, "float16": np.float16, "float32": np.float32, "float64": np.float64}
ALL = list(NP) + ["bfloat16"]


def _sample(name, shape=(2, 3)):
    vals = np.arange(int(np.prod(shape))).reshape(shape) % 5 - 2  # small ints: exact in every dtype
    return ember.tensor(vals.tolist(), dtype=getattr(ember, name)), vals


@pytest.mark.parametrize("name", list(NP))
def test_numpy_shares_memory(name):
    t, vals = _sample(name)
    a = t.numpy()
    assert a.dtype == NP[name] and a.shape == (2, 3) and a.flags.writeable
    np.testing.assert_array_equal(a, vals.astype(NP[name]))
    assert a.ctypes.data == t.data_ptr()
    a[1, 2] = 1
    assert t[1, 2].item() == 1
    t[0, 0] = 0
    assert a[0, 0] == 0


@pytest.mark.parametrize("make,strides", [(lambda: ember.arange(6).view(2, 3).t(), (8, 24)),
                                          (lambda: ember.arange(12.)[::3], (12,)),
                                          (lambda: ember.ones(2).expand(3, 2), (0, 4)),
                                          (lambda: ember.arange(24.).view(2, 3, 4)[:, 1:, ::2], (48, 16, 8)),
                                          (lambda: ember.tensor(3.5), ())])
def test_numpy_views_keep_strides(make, strides):
    t = make()
    a = t.numpy()
    assert a.strides == strides and a.shape == tuple(t.shape)
    assert a.tolist() == t.tolist()


def test_numpy_keeps_storage_alive():
    a = ember.arange(1000.).numpy()
    gc.collect()
    assert a[999] == 999.0


def test_numpy_errors():
    with pytest.raises(TypeError):
        ember.ones(2, dtype=ember.bfloat16).numpy()
    with pytest.raises(RuntimeError):
        ember.ones(2, requires_grad=True).numpy()
    assert ember.ones(2, requires_grad=True).numpy(force=True).tolist() == [1.0, 1.0]
    assert ember.ones(2, requires_grad=True).detach().numpy().tolist() == [1.0, 1.0]


def test_np_asarray_and_array_dtype():
    t = ember.arange(6).view(2, 3)
    a = np.asarray(t)
    assert a.dtype == np.int64 and a.ctypes.data == t.data_ptr()
    a[0, 0] = 42
    assert t[0, 0].item() == 42
    f = np.asarray(t, dtype=np.float32)
    assert f.dtype == np.float32 and f.tolist() == [[42., 1., 2.], [3., 4., 5.]]
    assert t.__array__(np.float64).dtype == np.float64
    assert np.array(t).ctypes.data != t.data_ptr()  # np.array copies by default
    with pytest.raises(RuntimeError):
        np.asarray(ember.ones(2, requires_grad=True))
    with pytest.raises(TypeError):
        np.asarray(ember.ones(2, dtype=ember.bfloat16))


@pytest.mark.parametrize("name,typestr", [("bool", "|b1"), ("uint8", "|u1"), ("int8", "|i1"), ("int16", "<i2"),
                                          ("int32", "<i4"), ("int64", "<i8"), ("float16", "<f2"),
                                          ("float32", "<f4"), ("float64", "<f8")])
def test_array_interface(name, typestr):
    t = ember.zeros(4, 6, dtype=getattr(ember, name))[1:, ::2]
    ai = t.__array_interface__
    isz = np.dtype(NP[name]).itemsize
    assert ai["typestr"] == typestr and ai["shape"] == (3, 3) and ai["version"] == 3
    assert ai["strides"] == (6 * isz, 2 * isz)
    assert ai["data"] == (t.data_ptr(), False)
    assert ember.tensor(1.).__array_interface__["shape"] == ()


def test_ufuncs_return_tensors():
    x = ember.arange(4.)
    for r, ref in [(np.sin(x), np.sin(np.arange(4.))), (np.add(x, 1), np.arange(4.) + 1),
                   (np.multiply(x, x), np.arange(4.) ** 2), (np.sqrt(x), np.sqrt(np.arange(4.)))]:
        assert isinstance(r, ember.Tensor)
        np.testing.assert_allclose(r.numpy(), ref, rtol=1e-6)
    assert np.sin(x).dtype is ember.float32
    assert isinstance(np.sum(x.numpy()), np.floating)


@pytest.mark.parametrize("name", list(NP))
def test_dlpack_to_numpy_and_back(name):
    t, vals = _sample(name)
    assert t.__dlpack_device__() == (1, 0)
    a = np.from_dlpack(t)
    assert a.dtype == NP[name] and a.shape == (2, 3)
    np.testing.assert_array_equal(a, vals.astype(NP[name]))
    t[0, 1] = 1
    assert a[0, 1] == 1  # shared memory
    b = np.arange(6).reshape(2, 3).astype(NP[name])
    e = ember.from_dlpack(b)
    assert e.dtype is getattr(ember, name) and e.tolist() == b.tolist()
    b[1, 1] = 0
    assert e[1, 1].item() == 0
    e[0, 0] = 1
    assert b[0, 0] == 1


def test_dlpack_capsule_and_layouts():
    t = ember.arange(12.).view(3, 4)
    cap = t.__dlpack__()
    assert type(cap).__name__ == "PyCapsule"
    u = ember.from_dlpack(cap)
    assert u.tolist() == t.tolist() and u.data_ptr() == t.data_ptr()
    u[0, 0] = -1
    assert t[0, 0].item() == -1
    assert ember.from_dlpack(t.__dlpack__(stream=None)).tolist() == t.tolist()
    # ember -> ember keeps dtype and storage (bfloat16 too)
    bf = ember.tensor([1.5, -2.0], dtype=ember.bfloat16)
    v = ember.from_dlpack(bf)
    assert v.dtype is ember.bfloat16 and v.data_ptr() == bf.data_ptr()
    # strides survive both ways
    a = np.arange(12.).reshape(3, 4)
    assert ember.from_dlpack(a[:, ::2]).stride() == (4, 2)
    assert ember.from_dlpack(a.T).stride() == (1, 4)
    assert np.from_dlpack(ember.arange(6.).view(2, 3).t()).strides == (4, 12)
    assert tuple(ember.from_dlpack(np.array(3.)).shape) == ()
    assert tuple(ember.from_dlpack(np.zeros((2, 0))).shape) == (2, 0)
    assert ember.from_dlpack(np.ones(3, dtype=np.bool_)).dtype is ember.bool


def test_dlpack_keeps_producer_alive():
    t = ember.from_dlpack(np.arange(1000.))
    a = np.from_dlpack(ember.arange(1000.))
    gc.collect()
    assert t[999].item() == 999.0 and a[999] == 999.0


def test_dlpack_errors():
    with pytest.raises((RuntimeError, BufferError)):
        np.from_dlpack(ember.ones(2, requires_grad=True))
    with pytest.raises((TypeError, RuntimeError, BufferError)):
        ember.from_dlpack(np.zeros(3, dtype=np.clongdouble))
    with pytest.raises((TypeError, RuntimeError, AttributeError, BufferError)):
        ember.from_dlpack(3)
    cap = ember.arange(3.).__dlpack__()
    ember.from_dlpack(cap)
    with pytest.raises((RuntimeError, ValueError, BufferError)):  # a capsule is consumed once
        ember.from_dlpack(cap)


def test_dlpack_failed_export_sets_exception():
    # NumPy rejects bfloat16; the error must arrive as a normal exception, not a SystemError
    # ("returned NULL without setting an exception") from a capsule destructor eating it.
    try:
        np.from_dlpack(ember.ones(2, dtype=ember.bfloat16))
    except SystemError as e:  # pragma: no cover - this is the bug
        pytest.fail(f"SystemError: {e}")
    except (TypeError, RuntimeError, BufferError, ValueError):
        pass
    else:
        pytest.fail("np.from_dlpack accepted a bfloat16 tensor")


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("layout", ["contig", "transposed", "strided", "0d", "empty", "expanded"])
def test_pickle_round_trip(name, layout):
    d = getattr(ember, name)
    base = ember.tensor((np.arange(24).reshape(4, 6) % 7 - 3).tolist(), dtype=d)
    t = {"contig": base, "transposed": base.t(), "strided": base[1:, ::2], "0d": base[1, 2],
         "empty": base[:, :0], "expanded": base[0:1].expand(3, 6)}[layout]
    for proto in (2, pickle.HIGHEST_PROTOCOL):
        u = pickle.loads(pickle.dumps(t, protocol=proto))
        assert type(u) is ember.Tensor and u.dtype is d and tuple(u.shape) == tuple(t.shape)
        assert u.tolist() == t.tolist() and not u.requires_grad
        if t.numel():
            assert u.data_ptr() != t.data_ptr()


def test_pickle_special_values_and_grad():
    t = ember.tensor([float("nan"), float("inf"), -0.0, 1e-40, 3.4e38])
    u = pickle.loads(pickle.dumps(t))
    np.testing.assert_array_equal(u.numpy().view(np.uint32), t.numpy().view(np.uint32))  # bit-exact
    h = ember.tensor([65504.0, -0.0, 6e-8], dtype=ember.float16)
    assert pickle.loads(pickle.dumps(h)).numpy().view(np.uint16).tolist() == h.numpy().view(np.uint16).tolist()
    g = ember.ones(2, 2, dtype=ember.float64, requires_grad=True)
    v = pickle.loads(pickle.dumps(g))
    assert v.requires_grad and v.is_leaf and v.dtype is ember.float64
    big = ember.arange(2 ** 20)
    assert pickle.loads(pickle.dumps(big))[-1].item() == 2 ** 20 - 1
    lst = pickle.loads(pickle.dumps([g, g]))
    assert lst[0] is lst[1]
    for obj in (ember.float16, ember.Size([2, 3]), ember.device("cpu")):
        assert pickle.loads(pickle.dumps(obj)) == obj


def test_deepcopy_and_copy():
    t = ember.arange(6.).view(2, 3)
    c = copy.deepcopy(t)
    assert c.tolist() == t.tolist() and c.data_ptr() != t.data_ptr()
    c[0, 0] = 100
    assert t[0, 0].item() == 0
    g = ember.ones(2, requires_grad=True)
    gc_ = copy.deepcopy(g)
    assert gc_.requires_grad and gc_.is_leaf
    assert copy.deepcopy(t[:, ::2]).tolist() == [[0., 2.], [3., 5.]]
    t.extra = "attr"
    assert copy.deepcopy(t).extra == "attr"
    # a shared tensor stays shared inside one deepcopy
    pair = copy.deepcopy([t, t])
    assert pair[0] is pair[1]
    s = copy.copy(t)
    assert s.tolist() == t.tolist()
    for name in ALL:
        x = ember.ones(3, dtype=getattr(ember, name))
        y = copy.deepcopy(x)
        assert y.dtype is x.dtype and y.tolist() == x.tolist()
