"""Python protocols on tensors (bool/int/float/index/len/iter/contains/hash/format),
item()/tolist(), repr/str exactly as torch prints, ember.Size and ember.device."""
import numpy as np
import pytest

import ember

F64 = ember.float64


# ---- scalar conversions ---------------------------------------------------------

@pytest.mark.parametrize("t,b,i,f", [(ember.tensor(2), True, 2, 2.0), (ember.tensor([0.]), False, 0, 0.0),
                                     (ember.tensor(2.7), True, 2, 2.700000047683716),
                                     (ember.tensor([-2.7], dtype=F64), True, -2, -2.7),
                                     (ember.tensor([[3]]), True, 3, 3.0), (ember.tensor(True), True, 1, 1.0),
                                     (ember.tensor(0, dtype=ember.uint8), False, 0, 0.0),
                                     (ember.tensor(-0.0), False, 0, -0.0),
                                     (ember.tensor(float("nan")), True, None, None)])
def test_scalar_conversions(t, b, i, f):
    assert bool(t) is b
    if i is not None:
        assert int(t) == i and type(int(t)) is int
        assert float(t) == f and type(float(t)) is float
    else:
        assert np.isnan(float(t))
        with pytest.raises(ValueError):
            int(t)


@pytest.mark.parametrize("t", [ember.tensor([1, 2]), ember.tensor([]), ember.zeros(2, 2)])
def test_multi_element_conversions_raise(t):
    with pytest.raises(RuntimeError):
        bool(t)
    with pytest.raises(ValueError):
        int(t)
    with pytest.raises(ValueError):
        float(t)
    with pytest.raises(RuntimeError):
        ember.is_nonzero(t)


def test_index():
    assert [10, 20, 30][ember.tensor(1)] == 20
    assert [10, 20, 30][ember.tensor([2], dtype=ember.int8)] == 30
    assert ember.tensor(True).__index__() == 1
    assert range(10)[ember.tensor(-1)] == 9
    assert bin(ember.tensor(5)) == "0b101"
    for bad in (ember.tensor(2.0), ember.tensor([1, 2]), ember.tensor([1.0])):
        with pytest.raises(TypeError):
            bad.__index__()
    with pytest.raises(TypeError):
        [1, 2][ember.tensor(1.)]


def test_len_iter_reversed():
    assert len(ember.zeros(4, 2)) == 4 and len(ember.zeros(0, 2)) == 0
    with pytest.raises(TypeError):
        len(ember.tensor(3))
    with pytest.raises(TypeError):
        iter(ember.tensor(3))
    rows = list(ember.arange(6).view(2, 3))
    assert [r.tolist() for r in rows] == [[0, 1, 2], [3, 4, 5]]
    assert all(isinstance(r, ember.Tensor) and tuple(r.shape) == (3,) for r in rows)
    rows[0][0] = 9  # iteration yields views
    items = list(ember.tensor([1.5, 2.5]))
    assert all(x.dim() == 0 for x in items) and [x.item() for x in items] == [1.5, 2.5]
    assert [x.item() for x in reversed(ember.tensor([1, 2, 3]))] == [3, 2, 1]
    assert list(ember.zeros(0)) == []


def test_contains():
    t = ember.tensor([[1., 2.], [3., 4.]])
    assert 2 in t and 2.0 in t and 5 not in t
    assert ember.tensor(3) in t and ember.tensor([1., 2.]) in t
    assert True in ember.tensor([0, 1]) and False not in ember.tensor([1, 2])
    assert float("nan") not in ember.tensor([float("nan")])
    with pytest.raises(RuntimeError):
        "a" in t  # noqa: B015


def test_hash_is_identity():
    a, b = ember.tensor(1), ember.tensor(1)
    assert hash(a) == hash(a) and hash(a) != hash(b)
    a.add_(1)
    assert hash(a) == hash(a)
    d = {a: "a", b: "b"}
    assert d[a] == "a" and d[b] == "b" and len({a, b, a}) == 2


def test_format():
    assert "{:.2f}".format(ember.tensor(3.14159)) == "3.14"
    assert f"{ember.tensor(7):>4}" == "   7"
    assert f"{ember.tensor(7)}" == "7"
    assert f"{ember.tensor(0.5, dtype=F64):.3e}" == "5.000e-01"
    assert "{}".format(ember.tensor([1, 2])) == "tensor([1, 2])"
    with pytest.raises(TypeError):
        "{:.2f}".format(ember.tensor([3.14159]))


@pytest.mark.parametrize("dtype,value,pytype,expected", [
    (ember.int64, 7, int, 7), (ember.int8, -7, int, -7), (ember.uint8, 200, int, 200),
    (ember.bool, True, bool, True), (ember.float32, 0.1, float, 0.10000000149011612),
    (ember.float64, 0.1, float, 0.1), (ember.float16, 7.1, float, 7.1015625),
    (ember.bfloat16, 7.1, float, 7.09375), (ember.int32, 2 ** 31 - 1, int, 2 ** 31 - 1),
    (ember.int64, -2 ** 63, int, -2 ** 63)])
def test_item_and_tolist_types(dtype, value, pytype, expected):
    t = ember.tensor(value, dtype=dtype)
    assert type(t.item()) is pytype and t.item() == expected
    assert type(t.tolist()) is pytype and t.tolist() == expected
    lst = ember.tensor([[value]], dtype=dtype).tolist()
    assert type(lst) is list and type(lst[0][0]) is pytype and lst == [[expected]]


def test_item_errors_and_tolist_shapes():
    with pytest.raises(RuntimeError):
        ember.tensor([1, 2]).item()
    with pytest.raises(RuntimeError):
        ember.tensor([]).item()
    assert ember.tensor([[1.5]]).item() == 1.5
    assert ember.zeros(2, 0).tolist() == [[], []]
    assert ember.arange(6).view(2, 3).t().tolist() == [[0, 3], [1, 4], [2, 5]]


# ---- repr / str -----------------------------------------------------------------

REPRS = [
    (lambda: ember.tensor([1, 2, 3]), "tensor([1, 2, 3])"),
    (lambda: ember.tensor([1.5, 2.25, -3.125]), "tensor([ 1.5000,  2.2500, -3.1250])"),
    (lambda: ember.tensor([1., 2.]), "tensor([1., 2.])"),
    (lambda: ember.tensor([1e-5, 1., 1e5]), "tensor([1.0000e-05, 1.0000e+00, 1.0000e+05])"),
    (lambda: ember.tensor([float("nan"), 1., float("inf")]), "tensor([nan, 1., inf])"),
    (lambda: ember.tensor([float("nan"), 1.5, float("-inf")]), "tensor([   nan, 1.5000,   -inf])"),
    (lambda: ember.tensor([float("inf"), -float("inf")]), "tensor([inf, -inf])"),
    (lambda: ember.tensor([-1., 10., -100.]), "tensor([  -1.,   10., -100.])"),
    (lambda: ember.tensor([-1.5, 10.25, -100.125]), "tensor([  -1.5000,   10.2500, -100.1250])"),
    (lambda: ember.tensor([1, -1000000]), "tensor([       1, -1000000])"),
    (lambda: ember.tensor([[1, -2], [30, 4]]), "tensor([[ 1, -2],\n        [30,  4]])"),
    (lambda: ember.arange(24).view(2, 3, 4),
     "tensor([[[ 0,  1,  2,  3],\n         [ 4,  5,  6,  7],\n         [ 8,  9, 10, 11]],\n\n"
     "        [[12, 13, 14, 15],\n         [16, 17, 18, 19],\n         [20, 21, 22, 23]]])"),
    (lambda: ember.zeros(3, 1, 2), "tensor([[[0., 0.]],\n\n        [[0., 0.]],\n\n        [[0., 0.]]])"),
    (lambda: ember.ones(1, 1, 1, 1), "tensor([[[[1.]]]])"),
    (lambda: ember.arange(10).view(2, 5).t(),
     "tensor([[0, 5],\n        [1, 6],\n        [2, 7],\n        [3, 8],\n        [4, 9]])"),
    (lambda: ember.tensor(3.5), "tensor(3.5000)"),
    (lambda: ember.tensor(3), "tensor(3)"),
    (lambda: ember.tensor(-0.), "tensor(-0.)"),
    (lambda: ember.tensor(1e-8), "tensor(1.0000e-08)"),
    (lambda: ember.tensor(1e10), "tensor(1.0000e+10)"),
    (lambda: ember.tensor(True), "tensor(True)"),
    (lambda: ember.tensor([True, False]), "tensor([ True, False])"),
    (lambda: ember.tensor([]), "tensor([])"),
    (lambda: ember.zeros(0, 3), "tensor([], size=(0, 3))"),
    (lambda: ember.zeros(2, 0, dtype=ember.int64), "tensor([], size=(2, 0), dtype=ember.int64)"),
    (lambda: ember.zeros(0, dtype=ember.int32), "tensor([], dtype=ember.int32)"),
    (lambda: ember.tensor([1., 2.], dtype=ember.float16), "tensor([1., 2.], dtype=ember.float16)"),
    (lambda: ember.tensor([1.5, 2.], dtype=ember.bfloat16), "tensor([1.5000, 2.0000], dtype=ember.bfloat16)"),
    (lambda: ember.tensor([1, 2], dtype=ember.int32), "tensor([1, 2], dtype=ember.int32)"),
    (lambda: ember.tensor([1, 2], dtype=ember.uint8), "tensor([1, 2], dtype=ember.uint8)"),
    (lambda: ember.tensor(2., dtype=F64), "tensor(2., dtype=ember.float64)"),
    (lambda: ember.tensor([1 / 3], dtype=F64), "tensor([0.3333], dtype=ember.float64)"),
    (lambda: ember.tensor([123456789.]), "tensor([1.2346e+08])"),
    (lambda: ember.tensor([0.0001, 0.001]), "tensor([1.0000e-04, 1.0000e-03])"),
    (lambda: ember.tensor([1000.5, 1.]), "tensor([1.0005e+03, 1.0000e+00])"),
    (lambda: ember.tensor([0., 1e-5]), "tensor([0.0000e+00, 1.0000e-05])"),
    (lambda: ember.tensor([-0., 1.5]), "tensor([-0.0000, 1.5000])"),
    (lambda: ember.tensor([12345.678]), "tensor([12345.6777])"),
    (lambda: ember.tensor([1e-40, 1.]), "tensor([9.9999e-41, 1.0000e+00])"),
    (lambda: ember.tensor([2 ** 62, -2 ** 62]), "tensor([ 4611686018427387904, -4611686018427387904])"),
    (lambda: ember.tensor([1e-5, 1e5], dtype=ember.float16), "tensor([1.0014e-05,        inf], dtype=ember.float16)"),
    (lambda: ember.arange(2000), "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])"),
    (lambda: ember.arange(1001.), "tensor([   0.,    1.,    2.,  ...,  998.,  999., 1000.])"),
    (lambda: ember.arange(2000.) / 3,
     "tensor([0.0000e+00, 3.3333e-01, 6.6667e-01,  ..., 6.6567e+02, 6.6600e+02,\n        6.6633e+02])"),
    (lambda: ember.arange(3000).view(30, 100),
     "tensor([[   0,    1,    2,  ...,   97,   98,   99],\n"
     "        [ 100,  101,  102,  ...,  197,  198,  199],\n"
     "        [ 200,  201,  202,  ...,  297,  298,  299],\n"
     "        ...,\n"
     "        [2700, 2701, 2702,  ..., 2797, 2798, 2799],\n"
     "        [2800, 2801, 2802,  ..., 2897, 2898, 2899],\n"
     "        [2900, 2901, 2902,  ..., 2997, 2998, 2999]])"),
    (lambda: ember.arange(1100).view(1100, 1),
     "tensor([[   0],\n        [   1],\n        [   2],\n        ...,\n"
     "        [1097],\n        [1098],\n        [1099]])"),
    (lambda: ember.ones(2, requires_grad=True), "tensor([1., 1.], requires_grad=True)"),
    (lambda: ember.ones(2, 2, dtype=F64, requires_grad=True),
     "tensor([[1., 1.],\n        [1., 1.]], dtype=ember.float64, requires_grad=True)"),
    (lambda: ember.arange(30.) / 7,
     "tensor([0.0000, 0.1429, 0.2857, 0.4286, 0.5714, 0.7143, 0.8571, 1.0000, 1.1429,\n"
     "        1.2857, 1.4286, 1.5714, 1.7143, 1.8571, 2.0000, 2.1429, 2.2857, 2.4286,\n"
     "        2.5714, 2.7143, 2.8571, 3.0000, 3.1429, 3.2857, 3.4286, 3.5714, 3.7143,\n"
     "        3.8571, 4.0000, 4.1429])"),
    (lambda: ember.arange(60),
     "tensor([ 0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11, 12, 13, 14, 15, 16, 17,\n"
     "        18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35,\n"
     "        36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53,\n"
     "        54, 55, 56, 57, 58, 59])"),
    (lambda: ember.tensor([True] * 14),
     "tensor([True, True, True, True, True, True, True, True, True, True, True, True,\n        True, True])"),
    (lambda: ember.arange(8.).view(2, 4) * 12345.678,
     "tensor([[    0.0000, 12345.6777, 24691.3555, 37037.0312],\n"
     "        [49382.7109, 61728.3906, 74074.0625, 86419.7422]])"),
    (lambda: ember.arange(2000.).view(2, 1000),
     "tensor([[0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 9.9700e+02, 9.9800e+02,\n"
     "         9.9900e+02],\n"
     "        [1.0000e+03, 1.0010e+03, 1.0020e+03,  ..., 1.9970e+03, 1.9980e+03,\n"
     "         1.9990e+03]])"),
    (lambda: ember.ones(2, dtype=ember.int16, requires_grad=False)[None], "tensor([[1, 1]], dtype=ember.int16)"),
]


@pytest.mark.parametrize("i", range(len(REPRS)))
def test_repr(i):
    make, expected = REPRS[i]
    t = make()
    assert repr(t) == expected
    assert str(t) == expected


def test_repr_follows_default_dtype():
    try:
        ember.set_default_dtype(F64)
        assert repr(ember.tensor([1.5, 2.])) == "tensor([1.5000, 2.0000])"
        assert repr(ember.tensor([1.5], dtype=ember.float32)) == "tensor([1.5000], dtype=ember.float32)"
        assert repr(ember.zeros(0)) == "tensor([])"
    finally:
        ember.set_default_dtype(ember.float32)


def _random_cases(rng):
    """(dtype name, shape, float64 values) for a batch of tensors of many kinds."""
    shapes = [(), (1,), (5,), (3, 4), (2, 3, 4), (1001,), (40, 30), (2, 0), (0,), (3, 1, 2), (7, 200),
              (2, 2, 2, 2), (17,), (1, 9)]
    dtypes = ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool"]
    cases = []
    for k in range(120):
        shape = shapes[k % len(shapes)]
        dname = dtypes[k % len(dtypes)]
        n = int(np.prod(shape))
        kind = rng.integers(0, 6)
        if dname == "bool":
            v = rng.integers(0, 2, n).astype(np.float64)
        elif dname.startswith("int") or dname == "uint8":
            lim = {"int64": 10 ** int(rng.integers(1, 18)), "int32": 2 ** 31 - 1, "int16": 2 ** 15 - 1,
                   "int8": 127, "uint8": 255}[dname]
            lo = 0 if dname == "uint8" else -lim
            v = rng.integers(lo, lim, n).astype(np.float64) if dname != "int64" else rng.integers(lo, lim, n)
        else:
            scale = 10.0 ** rng.integers(-6, 9)
            v = rng.standard_normal(n) * scale
            if kind == 1:
                v = np.round(v)  # integer-valued floats
            elif kind == 2 and n:
                v[rng.integers(0, n, 3)] = [np.nan, np.inf, -np.inf]
            elif kind == 3:
                v = np.abs(v)
            elif kind == 4:
                v = v * 10.0 ** rng.integers(-3, 4, n)  # wide dynamic range
        cases.append((dname, shape, v.reshape(shape)))
    return cases


def test_repr_matches_torch(torch):
    rng = np.random.default_rng(1234)
    mismatches = []
    for dname, shape, v in _random_cases(rng):
        tt = torch.tensor(v.tolist(), dtype=getattr(torch, dname)).reshape(shape)
        et = ember.tensor(tt.tolist(), dtype=getattr(ember, dname)).reshape(shape)  # identical values
        expected = repr(tt).replace("torch.", "ember.")
        got = repr(et)
        if got != expected:
            mismatches.append(f"{dname}{shape}:\n{got}\n--- torch:\n{expected}")
        # non-contiguous views print the same
        if len(shape) >= 2:
            got_t = repr(et.transpose(0, 1))
            exp_t = repr(tt.transpose(0, 1)).replace("torch.", "ember.")
            if got_t != exp_t:
                mismatches.append(f"{dname}{shape}.T:\n{got_t}\n--- torch:\n{exp_t}")
    assert not mismatches, "\n\n".join(mismatches[:3])


def test_repr_with_grad_matches_torch(torch):
    for shape in [(3,), (2, 2), (40,), (1200,)]:
        tt = torch.linspace(-3, 3, int(np.prod(shape))).reshape(shape).requires_grad_(True)
        et = ember.tensor(tt.tolist()).reshape(shape).requires_grad_(True)
        assert repr(et) == repr(tt).replace("torch.", "ember.")


# ---- Size ------------------------------------------------------------------------

def test_size():
    s = ember.Size([2, 3])
    assert isinstance(s, tuple) and s == (2, 3) and s == ember.Size((2, 3))
    assert repr(s) == str(s) == "ember.Size([2, 3])"
    assert repr(ember.Size([])) == "ember.Size([])"
    assert type(s[1:]) is ember.Size and s[1:] == (3,) and repr(s[:1]) == "ember.Size([2])"
    assert type(s[0]) is int and s[-1] == 3
    assert s.numel() == 6 and ember.Size([]).numel() == 1 and ember.Size([4, 0]).numel() == 0
    assert s + (4,) == (2, 3, 4) and hash(s) == hash((2, 3))
    assert ember.Size([ember.tensor(2), np.int64(3)]) == (2, 3)
    t = ember.zeros(2, 3)
    assert type(t.shape) is ember.Size and t.size() == s and t.size(1) == 3 and t.size(-1) == 3
    with pytest.raises(IndexError):
        t.size(2)
    for bad in ([2.5], ["a"], [None]):
        with pytest.raises(TypeError):
            ember.Size(bad)


# ---- device ------------------------------------------------------------------------

@pytest.mark.parametrize("spec,type_,index,rep,text", [
    (("cpu",), "cpu", None, "device(type='cpu')", "cpu"),
    (("cuda",), "cuda", None, "device(type='cuda')", "cuda"),
    (("cuda:1",), "cuda", 1, "device(type='cuda', index=1)", "cuda:1"),
    (("cuda", 2), "cuda", 2, "device(type='cuda', index=2)", "cuda:2"),
    (("cpu:0",), "cpu", 0, "device(type='cpu', index=0)", "cpu:0"),
    (("cpu", 0), "cpu", 0, "device(type='cpu', index=0)", "cpu:0"),
])
def test_device_parse(spec, type_, index, rep, text):
    d = ember.device(*spec)
    assert d.type == type_ and d.index == index
    assert repr(d) == rep and str(d) == text
    assert d == ember.device(*spec) and hash(d) == hash(ember.device(*spec))
    assert ember.device(d) == d


def test_device_eq_hash():
    assert ember.device("cpu") == ember.device("cpu")
    assert ember.device("cuda:0") != ember.device("cuda:1")
    assert ember.device("cuda:0") != ember.device("cuda")
    assert ember.device("cpu") != ember.device("cuda")
    assert {ember.device("cuda:1"): 1}[ember.device("cuda:1")] == 1
    assert len({ember.device("cpu"), ember.device("cpu"), ember.device("cuda:1")}) == 2


@pytest.mark.parametrize("bad", ["gpu", "cuda:-1", "cuda:x", "", "CUDA", "cuda:1:2", "cpu:", ":0"])
def test_device_bad_strings(bad):
    with pytest.raises(RuntimeError):
        ember.device(bad)


@pytest.mark.skipif(ember.cuda.is_available(), reason="a GPU is present: tests/test_cuda_runtime.py covers it")
def test_cuda_unavailable_is_clear():
    assert ember.cuda.is_available() is False and ember.cuda.device_count() == 0
    t = ember.ones(2)
    assert t.device == ember.device("cpu") and t.is_cuda is False and t.get_device() == -1
    assert t.cpu().device.type == "cpu"
    for call in (lambda: t.cuda(), lambda: t.to("cuda"), lambda: t.to("cuda:0"),
                 lambda: ember.ones(2, device="cuda"), lambda: ember.tensor([1.], device="cuda:1"),
                 lambda: ember.zeros(2, device=ember.device("cuda"))):
        with pytest.raises(RuntimeError, match="cuda|CUDA"):
            call()


def test_conjugate_transposes_are_transposes_for_real_dtypes():
    a = np.arange(6.0).reshape(2, 3)
    x = ember.from_numpy(a)
    np.testing.assert_array_equal(x.H.numpy(), a.T)
    np.testing.assert_array_equal(ember.from_numpy(np.arange(24.0).reshape(2, 3, 4)).mH.numpy(),
                                  np.swapaxes(np.arange(24.0).reshape(2, 3, 4), -1, -2))
    assert x.conj() is x and x.resolve_conj() is x and not x.is_conj()
    with pytest.raises(RuntimeError):
        ember.zeros(2, 3, 4).H


def test_random_module_seeds_the_default_generator():
    ember.random.manual_seed(7)
    a = ember.rand(3).tolist()
    ember.manual_seed(7)
    assert ember.rand(3).tolist() == a
    state = ember.random.get_rng_state()
    b = ember.rand(2).tolist()
    ember.random.set_rng_state(state)
    assert ember.rand(2).tolist() == b and ember.random.initial_seed() == 7
