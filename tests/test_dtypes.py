"""dtype objects, limits, the default dtype and torch's type-promotion lattice.

Expected values are written by hand from PyTorch's documented behaviour."""
import pickle

import pytest

import ember

NAMES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]
D = {n: getattr(ember, n) for n in NAMES}
ITEMSIZE = dict(zip(NAMES, [1, 1, 1, 2, 4, 8, 2, 2, 4, 8]))
FLOATS = {"float16", "bfloat16", "float32", "float64"}
UNSIGNED = {"bool", "uint8"}


@pytest.fixture
def restore_default():
    yield
    ember.set_default_dtype(ember.float32)


@pytest.mark.parametrize("alias,name", [("float", "float32"), ("double", "float64"), ("half", "float16"),
                                        ("long", "int64"), ("int", "int32"), ("short", "int16")])
def test_aliases(alias, name):
    assert getattr(ember, alias) is getattr(ember, name)
    assert repr(getattr(ember, alias)) == f"ember.{name}"


@pytest.mark.parametrize("name", NAMES)
def test_dtype_traits(name):
    d = D[name]
    assert repr(d) == str(d) == f"ember.{name}"
    assert isinstance(d, ember.dtype)
    assert d.itemsize == ITEMSIZE[name]
    assert d.is_floating_point is (name in FLOATS)
    assert d.is_signed is (name not in UNSIGNED)
    assert d.is_complex is False
    assert d == D[name] and all(d != D[o] for o in NAMES if o != name)
    assert hash(d) == hash(D[name])
    assert pickle.loads(pickle.dumps(d)) is d
    t = ember.zeros(3, dtype=d)
    assert t.dtype is d and t.element_size() == t.itemsize == ITEMSIZE[name]
    assert t.nbytes == 3 * ITEMSIZE[name]
    assert t.is_floating_point() is ember.is_floating_point(t) is (name in FLOATS)
    assert t.is_signed() is (name not in UNSIGNED)


def test_dtype_not_constructible():
    with pytest.raises(TypeError):
        ember.dtype()


# (bits, eps, max, tiny, resolution)
FINFO = {
    "float16": (16, 0.0009765625, 65504.0, 6.103515625e-05, 0.001),
    "bfloat16": (16, 0.0078125, 3.3895313892515355e38, 1.1754943508222875e-38, 0.01),
    "float32": (32, 1.1920928955078125e-07, 3.4028234663852886e38, 1.1754943508222875e-38, 1e-06),
    "float64": (64, 2.220446049250313e-16, 1.7976931348623157e308, 2.2250738585072014e-308, 1e-15),
}
IINFO = {"uint8": (8, 0, 255), "int8": (8, -128, 127), "int16": (16, -32768, 32767),
         "int32": (32, -2147483648, 2147483647),
         "int64": (64, -9223372036854775808, 9223372036854775807)}


@pytest.mark.parametrize("name", sorted(FINFO))
def test_finfo(name):
    fi = ember.finfo(D[name])
    bits, eps, mx, tiny, res = FINFO[name]
    assert (fi.bits, fi.eps, fi.max, fi.min, fi.tiny, fi.smallest_normal, fi.resolution) == \
        (bits, eps, mx, -mx, tiny, tiny, res)
    assert fi.dtype == name


@pytest.mark.parametrize("name", sorted(IINFO))
def test_iinfo(name):
    ii = ember.iinfo(D[name])
    assert (ii.bits, ii.min, ii.max) == IINFO[name]
    assert ii.dtype == name


@pytest.mark.parametrize("name", ["bool"] + sorted(IINFO))
def test_finfo_rejects_integers(name):
    with pytest.raises(TypeError):
        ember.finfo(D[name])


@pytest.mark.parametrize("name", ["bool"] + sorted(FINFO))
def test_iinfo_rejects_floats_and_bool(name):
    with pytest.raises(TypeError):  # torch: "torch.bool is not supported by torch.iinfo"
        ember.iinfo(D[name])


def test_finfo_default(restore_default):
    assert ember.finfo().dtype == "float32"
    ember.set_default_dtype(ember.float64)
    assert ember.finfo().eps == 2.0 ** -52


def test_default_dtype(restore_default):
    assert ember.get_default_dtype() is ember.float32
    assert ember.tensor([1.5]).dtype is ember.float32
    ember.set_default_dtype(ember.float64)
    assert ember.get_default_dtype() is ember.float64
    checks = [ember.tensor([1.5]), ember.tensor(1.5), ember.arange(3.), ember.tensor([1, 2]) / 2,
              ember.tensor([1, 2]) / ember.tensor([2, 2]), ember.zeros(2), ember.ones(2), ember.empty(2),
              ember.full((2,), 1.5), ember.linspace(0, 1, 3), ember.rand(2), ember.randn(2),
              ember.tensor([1, 2]).exp()]
    assert [t.dtype for t in checks] == [ember.float64] * len(checks)
    assert ember.result_type(ember.tensor([1]), 1.5) is ember.float64
    assert ember.tensor([1, 2]).dtype is ember.int64 and ember.full((2,), 1).dtype is ember.int64
    ember.set_default_dtype(ember.float16)
    assert ember.tensor([1.5]).dtype is ember.float16
    ember.set_default_dtype(ember.bfloat16)
    assert ember.arange(2.).dtype is ember.bfloat16
    ember.set_default_dtype(ember.float32)
    assert ember.tensor([1.5]).dtype is ember.float32


@pytest.mark.parametrize("name", ["bool", "uint8", "int32", "int64"])
def test_default_dtype_must_be_float(name, restore_default):
    with pytest.raises(TypeError):
        ember.set_default_dtype(D[name])
    assert ember.get_default_dtype() is ember.float32


# torch's promotion lattice; rows/cols in NAMES order.
_ABBR = {"b": "bool", "u8": "uint8", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
         "f16": "float16", "bf": "bfloat16", "f32": "float32", "f64": "float64"}
PROMOTE = """
b   u8  i8  i16 i32 i64 f16 bf  f32 f64
u8  u8  i16 i16 i32 i64 f16 bf  f32 f64
i8  i16 i8  i16 i32 i64 f16 bf  f32 f64
i16 i16 i16 i16 i32 i64 f16 bf  f32 f64
i32 i32 i32 i32 i32 i64 f16 bf  f32 f64
i64 i64 i64 i64 i64 i64 f16 bf  f32 f64
f16 f16 f16 f16 f16 f16 f16 f32 f32 f64
bf  bf  bf  bf  bf  bf  f32 bf  f32 f64
f32 f32 f32 f32 f32 f32 f32 f32 f32 f64
f64 f64 f64 f64 f64 f64 f64 f64 f64 f64
"""
PROMOTE_TABLE = [[_ABBR[c] for c in row.split()] for row in PROMOTE.strip().splitlines()]


@pytest.mark.parametrize("i", range(10))
def test_promote_types_table(i):
    got = [repr(ember.promote_types(D[NAMES[i]], D[b])).split(".")[-1] for b in NAMES]
    assert got == PROMOTE_TABLE[i]
    # the same rule through a real binary op between 1-d tensors
    a = ember.ones(2, dtype=D[NAMES[i]])
    got_ops = [repr(ember.result_type(a, ember.ones(2, dtype=D[b]))).split(".")[-1] for b in NAMES]
    assert got_ops == PROMOTE_TABLE[i]


def test_promote_table_is_symmetric_sanity():
    assert all(PROMOTE_TABLE[i][j] == PROMOTE_TABLE[j][i] for i in range(10) for j in range(10))


def _t(v, name, dim=1):
    return ember.tensor([v] if dim else v, dtype=D[name])


RESULT_TYPE = [
    # weak Python scalars
    (lambda: (_t(1, "int8"), 1), "int8"),
    (lambda: (_t(1, "int8"), 1.5), "float32"),
    (lambda: (_t(1, "uint8"), True), "uint8"),
    (lambda: (_t(1, "uint8"), -1), "uint8"),
    (lambda: (_t(True, "bool"), 1), "int64"),
    (lambda: (_t(True, "bool"), 1.5), "float32"),
    (lambda: (_t(True, "bool"), False), "bool"),
    (lambda: (_t(1, "float16"), 1.5), "float16"),
    (lambda: (_t(1, "bfloat16"), 2), "bfloat16"),
    (lambda: (_t(1, "int32"), 2 ** 40), "int32"),
    (lambda: (1, 2.0), "float32"),
    (lambda: (1, 2), "int64"),
    (lambda: (1, True), "int64"),
    (lambda: (True, False), "bool"),
    (lambda: (2.5, 1.5), "float32"),
    # 0-d tensors: weaker than dimensioned tensors of the same category
    (lambda: (_t(1, "int32"), _t(1, "int64", 0)), "int32"),
    (lambda: (_t(1, "int32"), _t(1.0, "float64", 0)), "float64"),
    (lambda: (_t(1, "float16"), _t(1.0, "float64", 0)), "float16"),
    (lambda: (_t(1, "uint8"), _t(1, "int8", 0)), "uint8"),
    (lambda: (_t(1, "int64"), _t(1.0, "float16", 0)), "float16"),
    (lambda: (_t(1, "bfloat16"), _t(1.0, "float16", 0)), "bfloat16"),
    (lambda: (_t(1, "int8", 0), _t(1, "int16", 0)), "int16"),
    (lambda: (_t(1, "bfloat16", 0), _t(1, "float16", 0)), "float32"),
    (lambda: (_t(1, "float16", 0), 1), "float16"),
    (lambda: (_t(True, "bool", 0), 1), "int64"),
    (lambda: (_t(1, "int16", 0), 1.0), "float32"),
]


@pytest.mark.parametrize("case", range(len(RESULT_TYPE)))
def test_result_type(case):
    make, expected = RESULT_TYPE[case]
    a, b = make()
    assert ember.result_type(a, b) is D[expected]


def test_result_type_follows_default_dtype(restore_default):
    ember.set_default_dtype(ember.float64)
    assert ember.result_type(_t(1, "int16"), 1.5) is ember.float64
    assert ember.result_type(1, 2.0) is ember.float64
    assert ember.result_type(_t(1, "float16"), 1.5) is ember.float16


CAN_CAST = [("float32", "int32", False), ("int32", "float32", True), ("int64", "int8", True),
            ("uint8", "int8", True), ("bool", "float16", True), ("bool", "uint8", True),
            ("int8", "bool", False), ("float32", "bool", False), ("float64", "float16", True),
            ("float16", "uint8", False), ("bfloat16", "float16", True), ("int64", "float64", True),
            ("bool", "bool", True), ("float64", "int64", False)]


@pytest.mark.parametrize("src,dst,ok", CAN_CAST)
def test_can_cast(src, dst, ok):
    assert ember.can_cast(D[src], D[dst]) is ok
