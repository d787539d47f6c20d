"""Tensor creation: tensor() inference, NumPy sharing, factories and ranges.

References: hand-written expectations (checked against PyTorch) and NumPy."""
import numpy as np
import pytest

import ember

F32, F64, I64 = ember.float32, ember.float64, ember.int64

INFER = [  # data, dtype, shape
    ([[1, 2], [3, 4]], I64, (2, 2)),
    ([True, False], ember.bool, (2,)),
    ([True, 1], I64, (2,)),
    ([1, 2.5], F32, (2,)),
    ([True, 2.5], F32, (2,)),
    ([[1, 2], [3, 4.5]], F32, (2, 2)),
    ([], F32, (0,)),
    ([[]], F32, (1, 0)),
    ((1, 2, 3), I64, (3,)),
    (range(3), I64, (3,)),
    (5, I64, ()),
    (2.5, F32, ()),
    (True, ember.bool, ()),
    ([-2 ** 63, 2 ** 63 - 1], I64, (2,)),
    (np.array([1, 2], dtype=np.int32), ember.int32, (2,)),
    (np.array([1.5], dtype=np.float16), ember.float16, (1,)),
    (np.array([True]), ember.bool, (1,)),
    (np.array([1, 2], dtype=np.uint8), ember.uint8, (2,)),
    (np.zeros((2, 0, 3)), F64, (2, 0, 3)),
    (np.float64(1.5), F64, ()),
    (np.float32(1.5), F32, ()),
    (np.int16(3), ember.int16, ()),
    (np.bool_(True), ember.bool, ()),
    ([np.float64(1.5), 2], F64, (2,)),
    ([np.int32(1), 2], I64, (2,)),
    ([np.array([1, 2]), np.array([3, 4])], I64, (2, 2)),
    (np.arange(6).reshape(2, 3)[:, ::2], I64, (2, 2)),
]


@pytest.mark.parametrize("i", range(len(INFER)))
def test_tensor_dtype_inference(i):
    data, dtype, shape = INFER[i]
    t = ember.tensor(data)
    assert t.dtype is dtype and tuple(t.shape) == shape
    expected = np.asarray(data if not isinstance(data, range) else list(data)).tolist()
    assert t.tolist() == expected


def test_tensor_with_0d_tensors_inside():
    assert ember.tensor([ember.tensor(1.5), ember.tensor(2.)]).tolist() == [1.5, 2.0]
    assert ember.tensor([ember.tensor(1.5), ember.tensor(2.)]).dtype is F32
    # 0-d tensors inside lists behave like Python scalars of their category
    assert ember.tensor([ember.tensor(1, dtype=ember.int8), 2]).dtype is I64
    t = ember.tensor([ember.tensor(1.5, dtype=F64), 2])
    assert t.dtype is F64 and t.tolist() == [1.5, 2.0]
    assert ember.tensor([[ember.tensor(7)]]).tolist() == [[7]]


@pytest.mark.parametrize("data,dtype,expected", [
    ([1.7, -1.7], ember.int32, [1, -1]),
    ([1.5, 2.5], F64, [1.5, 2.5]),
    ([1, 0, 2], ember.bool, [True, False, True]),
    ([[1, 2]], ember.float16, [[1.0, 2.0]]),
    (np.arange(3.), ember.int8, [0, 1, 2]),
    (1e300, F32, float("inf")),
])
def test_tensor_explicit_dtype(data, dtype, expected):
    t = ember.tensor(data, dtype=dtype)
    assert t.dtype is dtype and t.tolist() == expected


def test_tensor_copies_numpy():
    a = np.arange(3.)
    t = ember.tensor(a)
    a[0] = 99
    assert t.tolist() == [0.0, 1.0, 2.0]


@pytest.mark.parametrize("data", [[[1, 2], [3]], [[1], [2, 3]], [[[1, 2]], [[3]]]])
def test_ragged_raises_value_error(data):
    with pytest.raises(ValueError):
        ember.tensor(data)


@pytest.mark.parametrize("data", [[[1, 2], 3], [[[1]], [2]]])
def test_sequence_mismatch_raises_type_error(data):
    with pytest.raises(TypeError):
        ember.tensor(data)


@pytest.mark.parametrize("data,exc", [("abc", TypeError), (["a"], (TypeError, ValueError)),
                                      ([1, "a"], (TypeError, ValueError)), (np.array(["a"]), TypeError),
                                      (np.zeros(2, dtype=object), TypeError),
                                      (np.zeros(2, dtype=np.clongdouble), TypeError),
                                      ({1: 2}, (RuntimeError, TypeError)), (object(), (RuntimeError, TypeError))])
def test_bad_data_raises(data, exc):
    with pytest.raises(exc):
        ember.tensor(data)


@pytest.mark.parametrize("data", [None, [None]])
def test_tensor_none_raises_runtime_error(data):
    with pytest.raises(RuntimeError):  # torch: "Could not infer dtype of NoneType"
        ember.tensor(data)


@pytest.mark.parametrize("data", [2 ** 63, [2 ** 64], [-2 ** 63 - 1]])
def test_int_overflow_raises(data):
    with pytest.raises((ValueError, OverflowError, RuntimeError)):
        ember.tensor(data)


@pytest.mark.parametrize("data,dtype", [([300], ember.uint8), ([200], ember.int8),
                                        ([2 ** 40], ember.int32)])
def test_out_of_range_for_dtype_raises(data, dtype):
    with pytest.raises(RuntimeError):  # torch: "value cannot be converted to type uint8 without overflow"
        ember.tensor(data, dtype=dtype)


# ---- sharing memory with NumPy ----------------------------------------------

@pytest.mark.parametrize("np_dtype", [np.float32, np.float64, np.float16, np.int64, np.int32, np.int16,
                                      np.int8, np.uint8, np.bool_])
def test_from_numpy_shares_memory(np_dtype):
    a = np.zeros((2, 3), dtype=np_dtype)
    t = ember.from_numpy(a)
    assert tuple(t.shape) == (2, 3) and t.stride() == (3, 1)
    assert t.data_ptr() == a.ctypes.data
    a[1, 2] = 1
    assert t[1, 2].item() == 1
    t[0, 0] = 1
    assert a[0, 0] == 1
    u = ember.as_tensor(a)
    assert u.data_ptr() == a.ctypes.data


def test_from_numpy_noncontiguous_and_special_layouts():
    a = np.arange(12.).reshape(3, 4)
    for view, strides in [(a[:, ::2], (4, 2)), (a.T, (1, 4)), (a[1:, 1:3], (4, 1)),
                          (np.asfortranarray(a), (1, 3)), (a[::2], (8, 1))]:
        t = ember.from_numpy(view)
        assert t.stride() == strides and t.tolist() == view.tolist()
        t.fill_(-1)
        assert (view == -1).all()
        a[:] = np.arange(12.).reshape(3, 4)
    assert tuple(ember.from_numpy(np.array(3.0)).shape) == ()
    assert tuple(ember.from_numpy(np.zeros((0, 3))).shape) == (0, 3)


def test_from_numpy_keeps_array_alive():
    t = ember.from_numpy(np.arange(1000.))
    import gc
    gc.collect()
    assert t[999].item() == 999.0


@pytest.mark.parametrize("arr", [np.arange(6.)[::-1], np.arange(6.).reshape(2, 3)[:, ::-1]])
def test_negative_strides_raise(arr):
    with pytest.raises(ValueError):
        ember.from_numpy(arr)
    with pytest.raises(ValueError):
        ember.as_tensor(arr)


@pytest.mark.parametrize("arr", [np.zeros(3, dtype=np.clongdouble), np.zeros(3, dtype=object),
                                 np.zeros(3, dtype="U1"), np.zeros(3, dtype="m8[s]")])
def test_from_numpy_unsupported_dtype(arr):
    with pytest.raises(TypeError):
        ember.from_numpy(arr)


@pytest.mark.parametrize("obj", [[1, 2], np.float64(3.0), 3, None])
def test_from_numpy_requires_ndarray(obj):
    with pytest.raises(TypeError):
        ember.from_numpy(obj)


def test_from_numpy_byte_order():
    with pytest.raises(ValueError):
        ember.from_numpy(np.zeros(3, dtype=">f4"))


def test_as_tensor():
    a = np.arange(3.)
    assert ember.as_tensor(a, dtype=F32).dtype is F32
    b = ember.as_tensor(a, dtype=F32)
    a[0] = 5  # dtype conversion copies
    assert b[0].item() == 0
    t = ember.tensor([1, 2])
    assert ember.as_tensor(t) is t
    assert ember.as_tensor(t, dtype=F32).tolist() == [1.0, 2.0]
    assert ember.as_tensor([1, 2]).dtype is I64


# ---- factories ----------------------------------------------------------------

SIZES = [((2, 3), (2, 3)), (((2, 3),), (2, 3)), (([2, 3],), (2, 3)), ((ember.Size([2, 3]),), (2, 3)),
         (((),), ()), (([],), ()), ((0,), (0,)), ((4,), (4,)), ((1, 0, 2), (1, 0, 2)),
         ((np.int64(2), 3), (2, 3))]
FACTORIES = [("zeros", 0), ("ones", 1), ("empty", None)]


@pytest.mark.parametrize("fn,fill", FACTORIES)
@pytest.mark.parametrize("args,shape", SIZES)
def test_factory_sizes(fn, fill, args, shape):
    t = getattr(ember, fn)(*args)
    assert isinstance(t.shape, ember.Size) and tuple(t.shape) == shape and t.dtype is F32
    assert t.is_contiguous() and t.device == ember.device("cpu")
    if fill is not None:
        assert (np.asarray(t.tolist()) == fill).all()
    f = ember.full(shape, 7)
    assert tuple(f.shape) == shape and f.dtype is I64 and (np.asarray(f.tolist()) == 7).all()


@pytest.mark.parametrize("name", ["bool", "uint8", "int8", "int16", "int32", "int64", "float16",
                                  "bfloat16", "float32", "float64"])
def test_factory_dtypes(name):
    d = getattr(ember, name)
    for t, val in [(ember.zeros(2, 2, dtype=d), 0), (ember.ones((3,), dtype=d), 1),
                   (ember.full((2,), 1, dtype=d), 1), (ember.empty(2, dtype=d), None),
                   (ember.eye(2, dtype=d), None)]:
        assert t.dtype is d
        if val is not None:
            assert (t.double().numpy() == val).all()
    assert ember.eye(3, dtype=d).double().numpy().tolist() == np.eye(3).tolist()


@pytest.mark.parametrize("value,dtype", [(3, I64), (True, ember.bool), (2.5, F32), (float("nan"), F32),
                                         (-1, I64)])
def test_full_infers_dtype(value, dtype):
    t = ember.full((2, 2), value)
    assert t.dtype is dtype
    np.testing.assert_array_equal(t.numpy(), np.full((2, 2), value))


def test_full_with_dtype_casts():
    assert ember.full((2,), 1.5, dtype=I64).tolist() == [1, 1]
    assert ember.full((), 3).tolist() == 3


@pytest.mark.parametrize("fn", ["zeros", "ones", "empty", "rand", "randn"])
def test_requires_grad_floats_only(fn):
    f = getattr(ember, fn)
    assert f(2, requires_grad=True).requires_grad
    assert f(2, dtype=F64, requires_grad=True).is_leaf
    if fn in ("zeros", "ones", "empty"):
        for d in (I64, ember.bool, ember.uint8):
            with pytest.raises(RuntimeError):
                f(2, dtype=d, requires_grad=True)
    with pytest.raises(RuntimeError):
        ember.full((2,), 1, requires_grad=True)
    with pytest.raises(RuntimeError):
        ember.tensor([1], requires_grad=True)
    assert ember.tensor([1.0], requires_grad=True).requires_grad


@pytest.mark.parametrize("call", [lambda: ember.zeros(-1), lambda: ember.zeros(2, -1),
                                  lambda: ember.ones((3, -2)), lambda: ember.empty([-1]),
                                  lambda: ember.full((-1,), 2.0), lambda: ember.ones(2).new_zeros(-2),
                                  lambda: ember.ones(2).new_empty((2, -3)), lambda: ember.eye(-1),
                                  lambda: ember.eye(2, -1), lambda: ember.rand(-1), lambda: ember.randn(2, -2)])
def test_negative_sizes_raise(call):
    with pytest.raises(RuntimeError):
        call()


@pytest.mark.parametrize("call", [lambda: ember.empty(2 ** 62, 2 ** 62), lambda: ember.zeros(2 ** 40, 2 ** 40),
                                  lambda: ember.empty(2 ** 32, 2 ** 32, 2 ** 32),
                                  lambda: ember.ones(2 ** 31, 2 ** 31, 4), lambda: ember.empty(2 ** 61, 4)])
def test_size_overflow_raises(call):
    with pytest.raises((RuntimeError, MemoryError)):  # torch: "Storage size calculation overflowed"
        call()


@pytest.mark.parametrize("call", [lambda: ember.empty(2 ** 60, dtype=F64), lambda: ember.empty(2 ** 50),
                                  lambda: ember.zeros(2 ** 45, dtype=ember.uint8),
                                  lambda: ember.ones(2 ** 20, 2 ** 25)])
def test_impossible_allocation_raises(call):
    with pytest.raises((RuntimeError, MemoryError)):
        call()


def test_size_beyond_int64():
    with pytest.raises((TypeError, RuntimeError, OverflowError, ValueError)):
        ember.empty(2 ** 63)


@pytest.mark.parametrize("bad", [2.5, "a", None, (2, None), (2, 2.5), [[2]]])
def test_bad_size_types(bad):
    with pytest.raises(TypeError):
        ember.zeros(bad)


@pytest.mark.parametrize("bad", ["float", np.float32, 3])
def test_bad_dtype_kwarg(bad):
    with pytest.raises(TypeError):
        ember.zeros(2, dtype=bad)


def test_device_kwarg():
    for dev in ("cpu", ember.device("cpu")):
        assert ember.zeros(2, device=dev).device == ember.device("cpu")
    for fn in (ember.zeros, ember.ones, ember.empty, ember.rand):
        with pytest.raises(RuntimeError, match="cuda"):
            fn(2, device="cuda")
    with pytest.raises(RuntimeError):
        ember.tensor([1.0], device="cuda:0")
    with pytest.raises(RuntimeError):
        ember.zeros(2, device="gpu")


LIKE_SRC = [ember.ones(2, 3, dtype=ember.int8), ember.ones(2, 3, dtype=F64).t(), ember.ones(0, 2),
            ember.ones((), dtype=ember.bool)]


@pytest.mark.parametrize("i", range(len(LIKE_SRC)))
def test_like_factories(i):
    src = LIKE_SRC[i]
    shp = tuple(src.shape)
    for fn, val in [(ember.zeros_like, 0), (ember.ones_like, 1), (ember.empty_like, None),
                    (lambda x, **k: ember.full_like(x, 1, **k), 1)]:
        t = fn(src)
        assert tuple(t.shape) == shp and t.dtype is src.dtype
        if val is not None:
            assert (t.double().numpy() == val).all()
        t2 = fn(src, dtype=F64)
        assert t2.dtype is F64 and tuple(t2.shape) == shp
    assert ember.full_like(ember.ones(2, dtype=ember.int8), 7.9).tolist() == [7, 7]
    # like-factories preserve the dense layout of their input (torch's preserve_format)
    assert ember.zeros_like(ember.ones(2, 3).t()).stride() == (1, 3)
    assert ember.empty_like(ember.ones(2, 3).t()).stride() == (1, 3)


def test_new_factories():
    base = ember.ones(2, 3, dtype=ember.int16)
    cases = [(base.new_zeros(2), [0, 0], ember.int16), (base.new_zeros((2,)), [0, 0], ember.int16),
             (base.new_ones([2, 1]), [[1], [1]], ember.int16), (base.new_full((2,), 5), [5, 5], ember.int16),
             (base.new_tensor([1.5, 2.5]), [1, 2], ember.int16),
             (base.new_tensor([1.5, 2.5], dtype=F32), [1.5, 2.5], F32),
             (ember.ones(2, dtype=F64).new_tensor([1, 2]), [1.0, 2.0], F64),
             (base.new_ones(2, 2, dtype=ember.bool), [[True] * 2] * 2, ember.bool),
             (base.new_zeros(ember.Size([1])), [0], ember.int16)]
    for t, values, dtype in cases:
        assert t.tolist() == values and t.dtype is dtype
    e = base.new_empty(3)
    assert e.dtype is ember.int16 and tuple(e.shape) == (3,)
    assert base.new_empty(3, dtype=F64).dtype is F64
    g = ember.ones(2).new_zeros(2, requires_grad=True)
    assert g.requires_grad and g.is_leaf
    with pytest.raises(RuntimeError):
        base.new_zeros(2, requires_grad=True)
    src = ember.tensor([1.0, 2.0])
    n = src.new_tensor(src)
    src[0] = 5
    assert n.tolist() == [1.0, 2.0]  # new_tensor copies


def test_scalar_tensor():
    assert ember.scalar_tensor(3).tolist() == 3.0 and ember.scalar_tensor(3).dtype is F32
    assert ember.scalar_tensor(3, dtype=I64).dtype is I64


@pytest.mark.parametrize("n,m", [(3, None), (2, 3), (3, 1), (0, None), (1, 1), (4, 0)])
def test_eye(n, m):
    t = ember.eye(n) if m is None else ember.eye(n, m)
    np.testing.assert_array_equal(t.numpy(), np.eye(n, m, dtype=np.float32))
    assert t.dtype is F32


# ---- ranges ----------------------------------------------------------------------

ARANGE = [((5,), I64), ((5.,), F32), ((1, 4), I64), ((0, 1, 0.25), F32), ((10, 0, -3), I64),
          ((1., -1., -0.5), F32), ((0,), I64), ((5, 5), I64), ((0.5, 3), F32), ((1, 2.5, 0.5), F32),
          ((-7, 8, 4), I64), ((2 ** 53, 2 ** 53 + 3), I64), ((0, 1, 0.1), F32), ((-3.3, 7.1, 0.104), F32),
          ((0, 100, 7), I64), ((3, -3.5, -1.25), F32)]


@pytest.mark.parametrize("args,dtype", ARANGE)
def test_arange(args, dtype):
    t = ember.arange(*args)
    assert t.dtype is dtype
    ref = np.arange(*args, dtype=np.float64 if dtype is F32 else np.int64)
    assert tuple(t.shape) == ref.shape
    if dtype is I64:
        assert t.tolist() == ref.tolist()
    else:
        scale = max(abs(float(a)) for a in args)
        np.testing.assert_allclose(t.numpy(), ref, rtol=0, atol=2 * 2.0 ** -23 * scale)


@pytest.mark.parametrize("dtype,npd", [(F64, np.float64), (ember.int8, np.int8), (ember.float16, np.float16),
                                       (ember.int32, np.int32), (ember.bfloat16, None)])
def test_arange_dtype(dtype, npd):
    t = ember.arange(-5, 5, 3, dtype=dtype)
    assert t.dtype is dtype and t.double().numpy().tolist() == [-5.0, -2.0, 1.0, 4.0]
    assert ember.arange(0, 1, 0.1, dtype=F64).numpy().tolist() == (np.arange(10) * 0.1).tolist()


def test_arange_tensor_args():
    assert ember.arange(ember.tensor(3)).tolist() == [0, 1, 2]


@pytest.mark.parametrize("args", [(0, 10, -1), (10, 0, 1), (-1., 1., -0.5)])
def test_arange_inconsistent_sign(args):
    with pytest.raises(RuntimeError, match="inconsistent with step sign"):
        ember.arange(*args)


@pytest.mark.parametrize("args", [(0, 10, 0), (0., 1., 0.)])
def test_arange_zero_step(args):
    with pytest.raises(RuntimeError, match="step must be nonzero"):
        ember.arange(*args)


@pytest.mark.parametrize("args", [(float("nan"),), (float("inf"),), (0, float("inf"), 1)])
def test_arange_non_finite(args):
    with pytest.raises(RuntimeError):
        ember.arange(*args)


def test_arange_too_large_and_bad_args():
    with pytest.raises((RuntimeError, MemoryError)):
        ember.arange(0, 2 ** 62, 1)
    with pytest.raises(RuntimeError):
        ember.arange(3, requires_grad=True)
    assert ember.arange(3., requires_grad=True).requires_grad


def test_arange_bool_rejected():
    with pytest.raises((RuntimeError, NotImplementedError, TypeError)):  # torch: not implemented for Bool
        ember.arange(0, 10, 2, dtype=ember.bool)


LINSPACE = [(0, 1, 7), (-3.3, 7.1, 100), (1e-3, 1e3, 33), (5, -5, 11), (0, 1, 1000), (-1, 1, 2),
            (0, 6e4, 17), (2, 2, 5), (1, 0, 4), (0, 1, 1), (-10, 10, 7)]
FLOAT_EPS = {"float32": (F32, 2.0 ** -23), "float64": (F64, 2.0 ** -52), "float16": (ember.float16, 2.0 ** -10),
             "bfloat16": (ember.bfloat16, 2.0 ** -7)}


@pytest.mark.parametrize("dname", sorted(FLOAT_EPS))
@pytest.mark.parametrize("a,b,n", LINSPACE)
def test_linspace(a, b, n, dname):
    dtype, eps = FLOAT_EPS[dname]
    t = ember.linspace(a, b, n, dtype=dtype)
    ref = np.linspace(a, b, n)
    assert t.dtype is dtype and tuple(t.shape) == (n,)
    got = t.double().numpy()
    scale = max(abs(a), abs(b))
    np.testing.assert_allclose(got, ref, rtol=0, atol=2 * eps * scale)
    # the endpoints are exact (rounded once to the dtype)
    assert got[0] == ember.tensor(float(a), dtype=dtype).double().item()
    if n > 1:
        assert got[-1] == ember.tensor(float(b), dtype=dtype).double().item()


@pytest.mark.parametrize("dname", ["float32", "float64"])
@pytest.mark.parametrize("a,b,n,base", [(0, 2, 3, 10.0), (0, 3, 4, 2.0), (-2, 2, 5, 10.0), (-1, 1, 50, 10.0),
                                        (0, 10, 11, 2.0), (3, -3, 13, 10.0), (0.5, 1.5, 1, 10.0),
                                        (-4, 4, 101, 3.0)])
def test_logspace(a, b, n, base, dname):
    dtype, eps = FLOAT_EPS[dname]
    t = ember.logspace(a, b, n, base=base, dtype=dtype)
    ref = np.logspace(a, b, n, base=base)
    assert t.dtype is dtype and tuple(t.shape) == (n,)
    np.testing.assert_allclose(t.double().numpy(), ref, rtol=8 * eps * max(1, abs(a), abs(b)), atol=0)
    assert t[0].item() == ember.tensor(base ** a, dtype=dtype).item()


def test_linspace_logspace_misc():
    assert ember.linspace(0, 1, 5).tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert ember.linspace(0, 1, 0).tolist() == [] and ember.logspace(0, 1, 0).tolist() == []
    assert ember.linspace(0, 10, 5, dtype=I64).tolist() == [0, 2, 5, 7, 10]
    assert ember.linspace(-10, 10, 7, dtype=ember.int32).tolist() == [-10, -6, -3, 0, 3, 6, 10]
    assert ember.logspace(0, 2, 3).tolist() == [1.0, 10.0, 100.0]
    assert ember.logspace(0, 2, 3, dtype=I64).tolist() == [1, 10, 100]
    assert ember.logspace(0, 3, 4, base=2).tolist() == [1.0, 2.0, 4.0, 8.0]
    assert ember.linspace(0, 1, 3, requires_grad=True).requires_grad
    with pytest.raises(RuntimeError):
        ember.linspace(0, 1, -1)
    with pytest.raises(RuntimeError):
        ember.logspace(0, 1, -1)
    with pytest.raises(TypeError):
        ember.linspace(0, 1, 2.5)


def test_linspace_logspace_refuse_before_filling():
    # the fuzzer's hang: 2**31-1 bool steps with requires_grad filled for a
    # minute before failing; torch refuses Bool (NotImplementedError) and an
    # integer tensor that requires grad (RuntimeError), both before any work
    for f, name in ((ember.linspace, "linspace_cpu"), (ember.logspace, "logspace_cpu")):
        with pytest.raises(NotImplementedError, match=f'"{name}" not implemented for \'Bool\''):
            f(2, 3, 2**31 - 1, dtype=ember.bool, requires_grad=True)
        with pytest.raises(NotImplementedError, match=f'"{name}" not implemented for \'Bool\''):
            f(0, 1, 3, dtype=ember.bool)
        with pytest.raises(RuntimeError, match="Only Tensors of floating point and complex dtype can require gradients"):
            f(2, 3, 2**31 - 1, dtype=ember.int8, requires_grad=True)
    assert ember.logspace(0, 2, 3, dtype=ember.uint8).tolist() == [1, 10, 100]


def test_linspace_accepts_0d_tensors():
    # torch.linspace(Tensor start, Tensor end, int steps) is a documented overload
    t = ember.linspace(ember.tensor(0.), ember.tensor(1.), 3)
    assert t.tolist() == [0.0, 0.5, 1.0]


def test_empty_strided():
    t = ember.empty_strided((2, 3), (1, 2))
    assert t.shape == (2, 3) and t.stride() == (1, 2) and not t.is_contiguous()
    assert t.untyped_storage().nbytes() == 6 * 4  # exactly the addressed extent
    t.copy_(ember.from_numpy(np.arange(6.0, dtype=np.float32).reshape(2, 3)))
    np.testing.assert_array_equal(t.numpy(), np.arange(6.0).reshape(2, 3))
    assert ember.empty_strided((0, 3), (3, 1)).numel() == 0
    with pytest.raises(RuntimeError):
        ember.empty_strided((2, 3), (1,))
    with pytest.raises(RuntimeError):
        ember.empty_strided((2, 3), (-1, 1))


@pytest.mark.parametrize("fn", ["linspace", "logspace"])
def test_integer_endpoints_are_checked_as_torch(fn):
    # torch 2.15: start/end converted to the integer dtype with an overflow check, before any work
    f = getattr(ember, fn)
    for dtype, bad, good in [(ember.uint8, [-0.5, 256.0, float("-inf"), float("nan")], [255.9, -0.0]),
                             (ember.int8, [128.0, -128.5], [127.99, -128.0]),
                             (ember.int32, [2.0 ** 31, float("inf")], [-2.0 ** 31]),
                             (ember.int64, [9.3e18, -9.3e18], [9.2e18])]:
        name = {ember.uint8: "uint8_t", ember.int8: "int8_t", ember.int32: "int", ember.int64: "int64_t"}[dtype]
        for v in bad:
            with pytest.raises(RuntimeError, match=f"value cannot be converted to type {name} without overflow"):
                f(v, 1.0, 2 ** 31 - 1, dtype=dtype)  # refused before filling 2**31 elements
            with pytest.raises(RuntimeError, match="without overflow"):
                f(0.0, v, 3, dtype=dtype)
        for v in good:
            assert f(v, 1.0, 3, dtype=dtype).dtype == dtype
    assert ember.logspace(0.0, 3.0, 5, dtype=ember.uint8).tolist() == [1, 5, 31, 177, 232]  # torch's values
    assert ember.logspace(0.0, 3.0, 5, base=-2.0, dtype=ember.uint8).tolist() == [1, 0, 0, 0, 248]

