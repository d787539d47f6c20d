"""The indexing ops' native GPU paths (Note [CUDA indexing], csrc/cuda/index.h):
index_select, gather, scatter (src / value / reduce=), scatter_add,
scatter_reduce, index_add / index_copy / index_fill, advanced indexing and
index_put (accumulate or not), masked_fill / masked_select / masked_scatter,
take, take_along_dim, nonzero / argwhere, one_hot. On a real GPU when
present, else on Note [fake CUDA] (host memory behind the CUDA interface,
cpu/index.c's loops behind the indexing entries, launches counted).

Each case runs the same function on CPU tensors and on their 'cuda' copies
and compares bit for bit (the CPU is the reference the issue allows; a few
cases also check NumPy), checks that no indexing op took Note [CUDA
fallback] (`_C._cuda_fallback_counts`), and that out-of-range indices raise
the CPU's exception and message without writing anything."""

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember import _C, _cuda_fake

pytestmark = pytest.mark.filterwarnings("ignore:The reduce argument of ember.scatter")

INDEX_OPS = {"index_select", "gather", "scatter", "scatter_add", "scatter_reduce", "index_add", "index_copy",
             "index_fill", "_index", "index_put", "_index_put_", "masked_fill", "masked_select", "masked_scatter",
             "take", "take_along_dim", "nonzero", "argwhere", "_one_hot"}

FLOATS = [ember.float32, ember.float64, ember.float16, ember.bfloat16]
DTYPES = FLOATS + [ember.int64, ember.int32, ember.int16, ember.int8, ember.uint8, ember.bool]


def data(shape, dtype, seed=0, lo=-4, hi=5):
    """Small integer values (exact in every dtype, so sums in any order agree)."""
    a = np.random.default_rng(seed).integers(lo, hi, size=shape)
    if dtype == ember.bool:
        return ember.tensor(a > 0)
    if dtype == ember.uint8:
        a = np.abs(a)
    return ember.tensor(a).to(dtype)


def to_dev(v):
    if isinstance(v, ember.Tensor):
        return v.cuda()
    if isinstance(v, (list, tuple)):
        return type(v)(to_dev(x) for x in v)
    return v


def host(r):
    if isinstance(r, ember.Tensor):
        assert r.device.type == "cuda", f"result on {r.device}"
        return r.cpu()
    if isinstance(r, (list, tuple)):
        return tuple(host(x) for x in r)
    return r


def same(a, b):
    if isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            same(x, y)
        return
    if not isinstance(a, ember.Tensor):
        assert a == b
        return
    assert a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape), (a.dtype, b.dtype, a.shape, b.shape)
    x, y = a.detach(), b.detach()
    if x.dtype in (ember.float16, ember.bfloat16):
        x, y = x.float(), y.float()
    np.testing.assert_array_equal(x.numpy(), y.numpy())


def both(fn, *args, on_gpu=to_dev):
    """fn on CPU args and on their device copies: equal results, no fallback."""
    gargs = [on_gpu(a) for a in args]  # before fn may write into args
    want = fn(*args)
    _C._cuda_fallback_counts(True)
    got = fn(*gargs)
    fell = set(_C._cuda_fallback_counts(True)) & INDEX_OPS
    assert not fell, f"took the CPU fallback: {fell}"
    same(want, host(got))
    return want, got, gargs


def both_raise(fn, *args, on_gpu=to_dev):
    """fn raises the same exception and message on both devices; the GPU args are unchanged."""
    gargs = [on_gpu(a) for a in args]
    with pytest.raises(Exception) as cpu_err:
        fn(*args)
    before = [a.cpu().clone() if isinstance(a, ember.Tensor) else a for a in gargs]
    with pytest.raises(type(cpu_err.value)) as gpu_err:
        fn(*gargs)
    assert str(gpu_err.value) == str(cpu_err.value)
    for b, a in zip(before, gargs):
        if isinstance(a, ember.Tensor):
            same(b, a.cpu())  # nothing half-written
    return str(cpu_err.value)


@pytest.fixture(autouse=True)
def _device(cuda):
    yield cuda


# ------------------------------------------------------------ index_select

@pytest.mark.parametrize("dtype", DTYPES)
def test_index_select_dtypes(dtype):
    x = data((4, 5, 3), dtype)
    for dim in (0, 1, -1):
        idx = ember.tensor([2, 0, 2, 1])
        both(lambda x, i: ember.index_select(x, dim, i), x, idx)


def test_index_select_layouts_and_numpy():
    base = data((6, 5), ember.float32, 1)
    idx = ember.tensor([4, 4, 0, 3, 1, 2])
    _, got, _ = both(lambda b, i: b.t().index_select(1, i[::2]), base, idx)  # non-contiguous self and index
    np.testing.assert_array_equal(got.cpu().numpy(), base.numpy().T[:, [4, 0, 1]])
    both(lambda b, i: b.index_select(0, i.int()), base, idx)  # int32 index
    both(lambda b, i: b.index_select(0, i[:0]), base, idx)  # empty index
    both(lambda b, i: b[0, 0].index_select(0, i[:1] * 0), base, idx)  # 0-d self


def test_index_select_out_of_range():
    x = data((5, 3), ember.float32)
    assert both_raise(lambda x, i: x.index_select(0, i), x, ember.tensor([1, 7])) == "index out of range in self"
    msg = both_raise(lambda x, i: x.index_select(1, i), x, ember.tensor([-1]))
    assert "out of DATA bounds" in msg


def test_index_select_cpu_index_is_rejected_like_the_cpu_op_on_cpu():
    # a CPU index tensor of a GPU tensor: only indexing/index_put allow it (ops/dispatch_device.c)
    g = ember.arange(6.0).cuda()
    with pytest.raises(RuntimeError, match="same device"):
        g.index_select(0, ember.tensor([1]))


# ------------------------------------------------------------------ gather

@pytest.mark.parametrize("dtype", DTYPES)
def test_gather_dtypes(dtype):
    x = data((4, 5), dtype)
    idx = ember.tensor(np.random.default_rng(2).integers(0, 4, (3, 5)))
    both(lambda x, i: ember.gather(x, 0, i), x, idx)
    idx1 = ember.tensor(np.random.default_rng(3).integers(0, 5, (4, 7)))
    both(lambda x, i: x.gather(1, i), x, idx1)


def test_gather_layouts_and_numpy():
    base = data((5, 6, 3), ember.float64, 4)
    idx = ember.tensor(np.random.default_rng(5).integers(0, 5, (6, 5, 3)))
    _, got, _ = both(lambda b, i: b.transpose(0, 1).gather(1, i.transpose(0, 1)[:4]), base, idx)
    ref = np.take_along_axis(base.numpy().transpose(1, 0, 2)[:4], idx.numpy().transpose(1, 0, 2)[:4], 1)
    np.testing.assert_array_equal(got.cpu().numpy(), ref)
    both(lambda b, i: b.gather(0, i[:0]), base, idx)  # empty
    both(lambda b, i: b.gather(-1, i.int()[:5, :6] % 3), base, idx)  # int32, negative dim


def test_gather_out_of_range():
    x = data((3, 5), ember.float32)
    msg = both_raise(lambda x, i: x.gather(1, i), x, ember.tensor([[0, 7], [1, 2]]))
    assert msg == "index 7 is out of bounds for dimension 1 with size 5"
    both_raise(lambda x, i: x.gather(0, i), x, ember.tensor([[0, -1]]))


# ----------------------------------------------------------------- scatter

@pytest.mark.parametrize("dtype", DTYPES)
def test_scatter_src_value_and_reduce(dtype):
    x = data((4, 5), dtype)
    src = data((3, 5), dtype, 7, 1, 4)
    idx = ember.tensor([[0, 1, 2, 3, 0], [1, 2, 3, 0, 1], [3, 3, 1, 1, 2]])  # distinct per column
    both(lambda x, i, s: x.scatter(0, i, s), x, idx, src)
    both(lambda x, i: x.scatter(1, i[:, :3] % 5, 2), x, idx)
    dup = ember.tensor([[0, 0, 1, 1, 1], [0, 0, 1, 1, 1], [3, 3, 3, 3, 3]])
    for red in ("add", "multiply"):
        if dtype == ember.bool and red == "multiply":
            continue
        both(lambda x, i, s: x.scatter(0, i, s, reduce=red), x, dup, src)
        both(lambda x, i: x.scatter(0, i, 3, reduce=red), x, dup)


def test_scatter_inplace_noncontiguous_numpy():
    base = ember.zeros(6, 4)
    src = data((4, 3), ember.float32, 8)
    idx = ember.tensor([[5, 0, 2], [1, 3, 4], [0, 5, 1], [2, 2, 3]])

    def fn(b, i, s):
        v = b.t()  # [4, 6], non-contiguous
        v.scatter_(1, i, s)
        return b

    _, got, _ = both(fn, base, idx, src)
    ref = np.zeros((4, 6), np.float32)
    for r in range(4):
        for k in range(3):
            ref[r, idx.numpy()[r, k]] = src.numpy()[r, k]
    np.testing.assert_array_equal(got.cpu().numpy(), ref.T)


@pytest.mark.parametrize("dtype", DTYPES)
def test_scatter_add_duplicates(dtype):
    x = data((3, 4), dtype)
    src = data((6, 4), dtype, 9, 0, 3)
    idx = ember.tensor(np.random.default_rng(10).integers(0, 3, (6, 4)))
    both(lambda x, i, s: ember.scatter_add(x, 0, i, s), x, idx, src)
    both(lambda x, i, s: x.scatter_add(1, i[:3] % 4, s[:3]), x, idx, src)


def test_scatter_empty_and_out_of_range():
    x = data((3, 4), ember.float32)
    both(lambda x, i, s: x.scatter(0, i, s), x, ember.zeros(0, 4, dtype=ember.int64), ember.ones(0, 4))
    msg = both_raise(lambda x, i, s: x.scatter_(0, i, s), x, ember.tensor([[0, 3]]), ember.ones(1, 2))
    assert msg == "index 3 is out of bounds for dimension 0 with size 3"
    both_raise(lambda x, i: x.scatter_add_(1, i, i.float()), x, ember.tensor([[0, -1]]))


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.float16, ember.bfloat16, ember.int64,
                                   ember.int32, ember.int8, ember.uint8])
def test_scatter_reduce(reduce, include_self, dtype):
    x = data((4, 3), dtype, 11, 1, 4)
    src = data((8, 3), dtype, 12, 1, 4)
    idx = ember.tensor(np.random.default_rng(13).integers(0, 3, (8, 3)))  # row 3 never hit
    both(lambda x, i, s: x.scatter_reduce(0, i, s, reduce, include_self=include_self), x, idx, src)


def test_scatter_reduce_nan_and_bool():
    x = ember.tensor([[1.0, 2.0], [3.0, float("nan")]])
    src = ember.tensor([[float("nan"), 5.0], [0.5, 1.0], [7.0, 0.0]])
    idx = ember.tensor([[0, 1], [0, 1], [1, 0]])
    for red in ("amax", "amin", "sum", "prod"):
        for inc in (True, False):
            both(lambda x, i, s: x.scatter_reduce(0, i, s, red, include_self=inc), x, idx, src)
    b = data((3, 4), ember.bool)
    bs = data((3, 4), ember.bool, 3)
    bi = ember.tensor(np.random.default_rng(14).integers(0, 3, (3, 4)))
    for red in ("sum", "prod", "amax", "amin"):
        both(lambda x, i, s: x.scatter_reduce(0, i, s, red), b, bi, bs)


# ------------------------------------------------------- index_add / copy / fill

@pytest.mark.parametrize("dtype", DTYPES)
def test_index_add_copy_fill(dtype):
    x = data((5, 4), dtype)
    src = data((6, 4), dtype, 15, 0, 3)
    dup = ember.tensor([4, 0, 4, 2, 0, 4])
    both(lambda x, i, s: x.index_add(0, i, s), x, dup, src)
    both(lambda x, i, s: x.index_add(1, i[:3] % 4, s[:5, :3].t().t()), x, dup, src[:5])
    if dtype not in (ember.bool,):
        both(lambda x, i, s: x.index_add(0, i, s, alpha=2), x, dup, src)
    both(lambda x, i, s: x.index_copy(0, i, s), x, ember.tensor([3, 1, 0]), src[:3])
    both(lambda x, i: x.index_fill(1, i, 1), x, ember.tensor([-1, 0]))
    both(lambda x, i: x.index_fill(0, i, 0), x, ember.tensor([], dtype=ember.int64))


def test_index_add_noncontiguous_inplace_and_numpy():
    base = ember.zeros(4, 6, dtype=ember.float64)
    src = data((4, 5), ember.float64, 16)
    idx = ember.tensor([5, 0, 5, 3, 5])

    def fn(b, i, s):
        b.t().index_add_(0, i, s.t())  # self and source non-contiguous
        return b

    _, got, _ = both(fn, base, idx, src)
    ref = np.zeros((6, 4))
    np.add.at(ref, idx.numpy(), src.numpy().T)
    np.testing.assert_array_equal(got.cpu().numpy(), ref.T)


def test_index_add_copy_fill_out_of_range():
    x = data((5, 4), ember.float32)
    s = ember.ones(2, 4)
    m = both_raise(lambda x, i, s: x.index_add_(0, i, s), x, ember.tensor([0, 5]), s)
    assert m == "index 5 is out of bounds for dimension 0 with size 5"
    both_raise(lambda x, i, s: x.index_add_(0, i, s, alpha=2), x, ember.tensor([0, 5]), s)
    m = both_raise(lambda x, i, s: x.index_copy_(0, i, s), x, ember.tensor([7, 0]), s)
    assert m == "index_copy_(): index 7 is out of bounds for dimension 0 with size 5"
    m = both_raise(lambda x, i: x.index_fill_(1, i, 0), x, ember.tensor([-5]))
    assert m == "index -5 is out of bounds for dimension 1 with size 4"


# ------------------------------------------------------- advanced indexing

@pytest.mark.parametrize("dtype", DTYPES)
def test_getitem_tensor_keys(dtype):
    x = data((4, 5, 6), dtype)
    i = ember.tensor([3, -1, 0, 3])
    j = ember.tensor([[1], [4]])
    m = data((4, 5), ember.bool, 17)
    both(lambda x, i: x[i], x, i)
    both(lambda x, i, j: x[i, j], x, i, j)  # broadcast to [2, 4]
    both(lambda x, i, j: x[:, j, i[:1] + 2], x, i, j)  # adjacent after a slice
    both(lambda x, i, j: x[i, :, j], x, i, j)  # non-adjacent: B moves first
    both(lambda x, m: x[m], x, m)  # a 2-d mask
    both(lambda x, m: x[:, m[0]], x, m)
    both(lambda x, m, i: x[m[:, 0], 1:, i[:1]], x, m, i)  # a mask with another index


def test_getitem_layouts_empty_and_numpy():
    base = data((6, 7), ember.float32, 18)
    i = ember.tensor([0, 5, 2, 2, -3])
    _, got, _ = both(lambda b, i: b.t()[1:, i[::2]], base, i)
    np.testing.assert_array_equal(got.cpu().numpy(), base.numpy().T[1:, i.numpy()[::2]])
    both(lambda b, i: b[i[:0]], base, i)
    both(lambda b, i: b[:0, i], base, i)
    both(lambda b: b[b > 100], base)  # an all-false mask
    both(lambda b: b[[0, 2], [1, 1]], base)  # lists


def test_getitem_cpu_index_of_a_gpu_tensor():
    x = data((5, 4), ember.float32, 19)
    i, m = ember.tensor([4, 0, -2]), data((5,), ember.bool, 20)
    both(lambda x: x[i], x)
    both(lambda x: x[m, i[1:]], x)


def test_getitem_out_of_range():
    x = data((5, 4), ember.float32)
    m = both_raise(lambda x, i: x[i], x, ember.tensor([1, 5]))
    assert m == "index 5 is out of bounds for dimension 0 with size 5"
    m = both_raise(lambda x, i: x[:, i], x, ember.tensor([[0], [-5]]))
    assert m == "index -5 is out of bounds for dimension 0 with size 4"
    both_raise(lambda x, m: x[m], x, ember.ones(4, dtype=ember.bool))  # mask shape


# ------------------------------------------------------------ index_put

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put(dtype, accumulate):
    x = data((5, 3), dtype)
    v = data((4, 3), dtype, 21, 0, 3)
    i = ember.tensor([4, 0, 2, -2]) if not accumulate else ember.tensor([4, 0, 4, -1])  # duplicates only accumulate
    both(lambda x, i, v: x.index_put((i,), v, accumulate=accumulate), x, i, v)
    both(lambda x, i, v: x.index_put_((i, i % 3), v[:, 0], accumulate=accumulate), x, i, v)
    both(lambda x, i, v: x.index_put((i,), v[0, 0], accumulate=accumulate), x, i, v)  # one value


def test_setitem_forms():
    base = data((4, 6), ember.float32, 22)
    i = ember.tensor([3, 0, 3])
    m = data((4, 6), ember.bool, 23)

    def put(b, i, m):
        b = b.clone()
        b[i] = 7.0
        b[m] = -1.0  # masked_fill path
        b[:, i[:2]] = ember.arange(8.0).view(4, 2).to(b.device)
        b[i[:2], 1:3] = ember.arange(4.0).view(2, 2).to(b.device).t()  # values with a non-packed layout
        b[m.t().t()] = ember.arange(float(m.sum())).to(b.device)
        return b

    both(put, base, i, m)


def test_setitem_cpu_index_and_values():
    x = ember.zeros(6)

    def fn(x):
        x[ember.tensor([1, 4])] = ember.tensor([2.0, 3.0])  # CPU index and values into a GPU tensor
        x[ember.tensor([True, False, False, False, False, True])] = 5.0
        return x

    both(fn, x)


def test_index_put_out_of_range_writes_nothing():
    x = data((5, 3), ember.float32)
    m = both_raise(lambda x, i, v: x.index_put_((i,), v, accumulate=True), x, ember.tensor([0, 9]), ember.ones(2, 3))
    assert m == "index 9 is out of bounds for dimension 0 with size 5"
    both_raise(lambda x, i, v: x.index_put_((i, i), v), x, ember.tensor([0, 3]), ember.ones(2))


# -------------------------------------------------------------- masked_*

@pytest.mark.parametrize("dtype", DTYPES)
def test_masked_ops(dtype):
    x = data((3, 4), dtype)
    m = data((3, 4), ember.bool, 24)
    src = data((12,), dtype, 25)
    both(lambda x, m: x.masked_fill(m, 1), x, m)
    both(lambda x, m: ember.masked_select(x, m), x, m)
    both(lambda x, m: x.masked_select(m[0]), x, m)  # broadcast mask
    both(lambda x, m, s: x.masked_scatter(m, s), x, m, src)
    both(lambda x, m, s: x.t().masked_scatter(m.t(), s), x, m, src)  # non-contiguous


def test_masked_ops_edge_cases():
    x = data((3, 4), ember.float32, 26)
    both(lambda x: x.masked_select(x > 100), x)
    both(lambda x: x[0, 0].masked_select(ember.tensor(True).to(x.device)), x)  # 0-d
    _, got, _ = both(lambda x: x.masked_select(x > 0), x)
    np.testing.assert_array_equal(got.cpu().numpy(), x.numpy()[x.numpy() > 0])
    both_raise(lambda x, s: x.masked_scatter(x > -100, s), x, ember.ones(3))


# ---------------------------------------------------------- take / take_along_dim

@pytest.mark.parametrize("dtype", DTYPES)
def test_take(dtype):
    base = data((4, 5), dtype)
    idx = ember.tensor([[0, -1, 19], [7, 7, -20]])
    both(lambda b, i: ember.take(b, i), base, idx)
    both(lambda b, i: b.t().take(i), base, idx)  # non-contiguous self
    both(lambda b, i: b.take(i[:, :0]), base, idx)


def test_take_numpy_and_out_of_range():
    base = data((4, 5), ember.float64, 27)
    idx = ember.tensor([3, -2, 0])
    _, got, _ = both(lambda b, i: b.t().take(i), base, idx)
    np.testing.assert_array_equal(got.cpu().numpy(), np.take(base.numpy().T, idx.numpy()))
    m = both_raise(lambda b, i: b.take(i), base, ember.tensor([20]))
    assert m == "out of range: tried to access index 20 on a tensor of 20 elements."


@pytest.mark.parametrize("dtype", [ember.float32, ember.bfloat16, ember.int64, ember.bool])
def test_take_along_dim(dtype):
    x = data((4, 5), dtype)
    idx = ember.tensor(np.random.default_rng(28).integers(-5, 5, (4, 3)))
    both(lambda x, i: ember.take_along_dim(x, i, 1), x, idx)
    both(lambda x, i: ember.take_along_dim(x, i[:2, :1], 0), x, idx)  # broadcast
    both(lambda x, i: ember.take_along_dim(x, i.abs()), x, idx)  # flattened


# ------------------------------------------------------ nonzero / argwhere

@pytest.mark.parametrize("dtype", DTYPES)
def test_nonzero(dtype):
    x = data((3, 4, 2), dtype, 29, -1, 2)
    both(lambda x: ember.nonzero(x), x)
    both(lambda x: x.nonzero(as_tuple=True), x)
    both(lambda x: ember.argwhere(x), x)
    both(lambda x: x.transpose(0, 2).nonzero(), x)  # non-contiguous: row-major in the view's order
    both(lambda x: x[0, 0, 0].nonzero(), x)  # 0-d
    both(lambda x: x[:0].nonzero(), x)  # empty


def test_nonzero_float_bits_and_numpy():
    x = ember.tensor([0.0, -0.0, float("nan"), 1e-30, -2.0, 0.0])
    _, got, _ = both(lambda x: x.nonzero(), x)
    np.testing.assert_array_equal(got.cpu().numpy().ravel(), [2, 3, 4])
    for dt in (ember.float16, ember.bfloat16, ember.float64):
        both(lambda x: x.nonzero(), x.to(dt))
    both(lambda x: ember.where(x != 0), x)


# -------------------------------------------------------------- one_hot

def test_one_hot():
    t = ember.tensor([[0, 3], [2, 2]])
    _, got, _ = both(lambda t: F.one_hot(t), t)
    np.testing.assert_array_equal(got.cpu().numpy(), np.eye(4, dtype=np.int64)[t.numpy()])
    both(lambda t: F.one_hot(t, 6), t)
    both(lambda t: F.one_hot(t[:0], 3), t)
    assert both_raise(lambda t: F.one_hot(t, 3), t) == "Class values must be smaller than num_classes."
    assert both_raise(lambda t: F.one_hot(t - 1, 5), t) == "Class values must be non-negative."
    both_raise(lambda t: F.one_hot(t[:0]), t)


# ------------------------------------------------------------- autograd

GRAD_CASES = [
    ("index_select", lambda x, i: x.index_select(1, i % 4)),
    ("gather", lambda x, i: x.gather(0, (i[:4] % 3).view(1, -1).expand(2, -1))),
    ("getitem", lambda x, i: x[i % 3, 1:]),
    ("getitem_mask", lambda x, i: x[x > 0]),
    ("take", lambda x, i: x.take(i)),
    ("take_along_dim", lambda x, i: ember.take_along_dim(x, (i % 4).view(1, -1), 1)),
    ("masked_select", lambda x, i: x.masked_select(x < 0.5)),
    ("masked_fill", lambda x, i: x.masked_fill(x > 0, 0.0)),
    ("index_put", lambda x, i: x.index_put((i % 3,), ember.ones(len(i), 4, dtype=x.dtype, device=x.device) * 2, accumulate=True)),
    ("scatter", lambda x, i: ember.zeros(3, 4, dtype=x.dtype, device=x.device).scatter(0, (i[:4] % 3).view(1, 4), x[:1])),
    ("scatter_add", lambda x, i: ember.zeros(3, 4, dtype=x.dtype, device=x.device).scatter_add(0, (i[:4] % 3).view(1, 4), x[:1])),
    ("index_add", lambda x, i: ember.zeros(5, 4, dtype=x.dtype, device=x.device).index_add(0, i % 5, x[i % 3])),
    ("scatter_reduce", lambda x, i: x.scatter_reduce(0, (i[:4] % 3).view(1, 4), x[1:2] * 3, "amax")),
]


@pytest.mark.parametrize("name,fn", GRAD_CASES, ids=[n for n, _ in GRAD_CASES])
def test_gradients_match_the_cpu(name, fn):
    a = np.random.default_rng(30).standard_normal((3, 4))
    i = ember.tensor([2, 0, 4, 2, 5, 1])
    grads = []
    for dev in ("cpu", "cuda"):
        x = ember.tensor(a, device=dev, requires_grad=True)
        _C._cuda_fallback_counts(True)
        y = fn(x, i.to(dev))
        w = ember.arange(float(y.numel()), device=dev).view(y.shape)
        (y * w).sum().backward()
        fell = set(_C._cuda_fallback_counts(True)) & INDEX_OPS
        assert not fell, f"took the CPU fallback: {fell}"
        assert x.grad.device.type == dev
        grads.append(x.grad.cpu().numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-12, atol=1e-12)


def test_launches_go_through_the_indexing_entries(_device):
    if _device != "fake":
        pytest.skip("the fake counts its launches")
    before = _cuda_fake.counters()["index"]
    x = ember.arange(12.0).view(3, 4).cuda()
    x[ember.tensor([0, 2]).cuda()]
    x.nonzero()
    x.gather(1, ember.zeros(3, 1, dtype=ember.int64).cuda())
    assert _cuda_fake.counters()["index"] >= before + 5
