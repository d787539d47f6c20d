"""The elementwise special functions, angle conversion, gcd / lcm, frexp / ldexp,
logaddexp2 and xlogy as op-table rows (CPU kernels, meta, formulas). op_db.py
runs the plain ones over every dtype and layout; this file checks the special
values, the ops with an integer parameter, frexp's pair, and the gradients.
References: Python's math module, NumPy, and values printed by PyTorch 2.15
(float64) where neither has the function."""
import math

import numpy as np
import pytest

import ember
from ember import _C

INF, NAN = math.inf, math.nan
ROWS = ("lgamma", "digamma", "polygamma", "mvlgamma", "i0", "_special_i1", "rad2deg", "deg2rad", "frexp",
        "ldexp", "logaddexp2", "xlogy", "heaviside", "gcd", "lcm")


def f64(v):
    return ember.tensor(v, dtype=ember.float64)


def close(got, want, rtol=1e-12, atol=0.0):
    np.testing.assert_allclose(np.asarray(got.tolist(), dtype=np.float64), np.asarray(want, dtype=np.float64),
                               rtol=rtol, atol=atol, equal_nan=True)


@pytest.mark.parametrize("name", ROWS)
def test_each_is_a_row_that_runs_on_meta(name):
    assert name in _C._op_names()
    assert "meta" in _C._op_info(name)["devices"]


def test_the_functions_are_the_rows():
    for name in ("lgamma", "digamma", "polygamma", "mvlgamma", "i0", "rad2deg", "deg2rad", "frexp", "ldexp",
                 "logaddexp2", "xlogy", "heaviside", "gcd", "lcm"):
        assert getattr(ember, name) is getattr(_C, name), name
    assert ember.special.gammaln is _C.lgamma and ember.special.psi is _C.digamma
    assert ember.special.i1 is _C._special_i1 and ember.special.polygamma is _C.polygamma


# ------------------------------------------------------------------ gamma family
def test_lgamma_special_values_and_negatives():
    got = ember.lgamma(f64([0.0, -0.0, -1.0, -7.0, -INF, INF, NAN]))
    close(got, [INF, INF, INF, INF, INF, INF, NAN])
    xs = [-0.5, -1.75, -3.25, -10.1, 0.001, 1.0, 2.0, 1e5, 171.5]
    close(ember.lgamma(f64(xs)), [math.lgamma(v) for v in xs], rtol=1e-14)
    assert ember.lgamma(ember.tensor([1, 2, 3])).dtype == ember.float32
    assert ember.lgamma(ember.tensor([True])).tolist() == [0.0]
    b = ember.tensor([2.5], dtype=ember.bfloat16).lgamma()
    assert b.dtype == ember.bfloat16 and abs(b.item() - math.lgamma(2.5)) < 4e-3


def test_digamma_special_values():
    close(ember.digamma(f64([0.0, -0.0, -1.0, -3.0, -INF, INF, NAN])), [-INF, INF, NAN, NAN, NAN, INF, NAN])
    close(ember.digamma(f64([1.0])), [-0.5772156649015329], rtol=1e-15)
    # PyTorch's float64 values (reflection below 0, recurrence near 0)
    close(ember.digamma(f64([1e-8, -1e-8, -2.5, 1e6])),
          [-100000000.57721567, 99999999.42278433, 1.1031566406452432, 13.815510057964275], rtol=1e-9)


def test_digamma_and_lgamma_in_float32_round_the_float64_value():
    x = np.linspace(0.05, 20, 101)
    for name in ("lgamma", "digamma"):
        got = getattr(ember, name)(ember.tensor(x, dtype=ember.float32)).numpy()
        want = getattr(ember, name)(f64(x.astype(np.float32).astype(np.float64))).numpy().astype(np.float32)
        np.testing.assert_array_equal(got, want)


POLYGAMMA_X = [0.25, 1.0, 2.5, 7.75, 31.0, -0.5, -1.75, -3.25, 100.0]
POLYGAMMA_TORCH = {  # torch.polygamma(n, x) in float64
    1: [17.19732915341456, 1.6449340676383375, 0.4903577562398206, 0.13771379144953064, 0.03278394924662909,
        8.934802200117687, 19.301637544422068, 19.474085068056, 0.010050166663333571],
    2: [-129.32773993753688, -2.404113806319188, -0.23620405164172736, -0.01893546667267095,
        -0.0010746911296545256, -0.82879664423432, -124.21382135423059, 123.95521103942201, -0.00010100499983335001],
    3: [1538.782144009189, 6.493939402266829, 0.2239058488172521, 0.005199152294702223, 7.045262923995388e-05,
        193.40909103400242, 1558.3848404165503, 1558.508802818279, 2.030199990001333e-06],
    5: [491552.51376768114, 122.08116743813383, 0.5785691785671833, 0.0011705313492977652, 9.0809044011822e-07,
        15371.113548602436, 492230.9303018741, 492231.2373357212, 2.4605999440119957e-09],
}


@pytest.mark.parametrize("n", sorted(POLYGAMMA_TORCH))
def test_polygamma_matches_torch(n):
    # torch's trigamma (n == 1) is its own shorter series, good to ~5e-10; ours is the
    # Hurwitz zeta for every n, checked against closed forms below
    close(ember.polygamma(n, f64(POLYGAMMA_X)), POLYGAMMA_TORCH[n], rtol=1e-9 if n == 1 else 1e-11)


def test_trigamma_closed_forms():
    catalan = 0.915965594177219015054603514932
    close(ember.polygamma(1, f64([1.0, 0.5, 0.25, 2.0])),
          [math.pi ** 2 / 6, math.pi ** 2 / 2, math.pi ** 2 + 8 * catalan, math.pi ** 2 / 6 - 1], rtol=1e-14)
    # polygamma(2, 1) = -2 zeta(3)
    close(ember.polygamma(2, f64([1.0])), [-2 * 1.2020569031595942853997], rtol=1e-14)


def test_polygamma_edges_and_forms():
    x = f64([0.3, 2.0, -1.5])
    close(ember.polygamma(0, x), ember.digamma(x).tolist(), rtol=0)
    assert ember.polygamma(1, f64([1.0])).item() == pytest.approx(math.pi ** 2 / 6, rel=1e-14)
    close(ember.polygamma(2, f64([0.0, -1.0])), [-INF, -INF])
    close(ember.polygamma(3, f64([0.0, -2.0, -INF, INF])), [INF, INF, INF, NAN])
    close(ember.polygamma(1, f64([INF, NAN])), [0.0, NAN])
    with pytest.raises(RuntimeError, match="does not support negative n"):
        ember.polygamma(-1, x)
    assert ember.polygamma(1, ember.tensor([1, 2])).dtype == ember.float32
    t = ember.tensor([1.5])
    assert t.polygamma(1).item() == pytest.approx(0.9348022005446793, rel=1e-6)
    t.polygamma_(1)
    assert t.item() == pytest.approx(0.9348022005446793, rel=1e-6)
    with pytest.raises(RuntimeError, match="can't be cast"):
        ember.tensor([1]).polygamma_(1)
    out = ember.empty(0, dtype=ember.float64)
    ember.polygamma(1, f64([1.0, 2.0]), out=out)
    close(out, [math.pi ** 2 / 6, math.pi ** 2 / 6 - 1], rtol=1e-13)


def test_mvlgamma():
    x = [2.5, 3.0, 10.25]
    close(ember.mvlgamma(f64(x), 4), [3.5980902903858745, 4.29123747094582, 50.26096962870796], rtol=1e-13)
    want = [math.log(math.pi) / 2 + math.lgamma(v) + math.lgamma(v - 0.5) for v in x]
    close(f64(x).mvlgamma(2), want, rtol=1e-13)
    assert ember.mvlgamma(ember.tensor([3]), 2).dtype == ember.float32
    with pytest.raises(RuntimeError, match="p has to be greater than or equal to 1"):
        ember.mvlgamma(f64(x), 0)
    with pytest.raises(TypeError):
        ember.mvlgamma(f64(x), 1.5)
    with pytest.raises(RuntimeError, match="The input tensor may not be a boolean tensor."):  # torch's check
        ember.mvlgamma(ember.tensor([True]), 1)


def test_i0_and_i1():
    x = [0.0, 0.5, -2.0, 7.5, 14.9, 15.1, 40.0, -60.0]
    close(ember.i0(f64(x)), [1.0, 1.0634833707413236, 2.279585302336067, 268.1613115151893, 308375.5786874392,
                              374103.411190409, 1.48947747934199e+16, 5.8940770556098e+24], rtol=1e-13)
    close(ember.i0(f64(x)), np.i0(np.array(x)), rtol=1e-13)
    close(ember.special.i1(f64(x)), [0.0, 0.25789430539089636, -1.5906368546373295, 249.58436542268808,
                                     297840.6947795743, 361495.56618540164, 1.4707396163259354e+16,
                                     -5.844751588390468e+24], rtol=1e-13)
    close(ember.i0(f64([INF, -INF, NAN])), [NAN, NAN, NAN])
    assert ember.i0(ember.tensor([1, 2])).dtype == ember.float32


# ------------------------------------------------------------------ angles, powers of two
def test_rad2deg_deg2rad():
    close(ember.rad2deg(ember.tensor([1, 2, 3])), np.rad2deg([1, 2, 3]), rtol=1e-6)
    assert ember.rad2deg(ember.tensor([1, 2])).dtype == ember.float32
    close(ember.deg2rad(f64([180.0, -90.0, INF])), [math.pi, -math.pi / 2, INF], rtol=1e-15)


def test_ldexp_and_logaddexp2():
    close(ember.ldexp(ember.tensor([1, 2, 3]), ember.tensor([1, 2, 3])), [2.0, 8.0, 24.0], rtol=0)
    h = ember.ldexp(ember.tensor([1.0], dtype=ember.float16), ember.tensor([3]))
    assert h.dtype == ember.float16 and h.item() == 8.0
    close(ember.ldexp(f64([1.0]), f64([1.5])), [2 ** 1.5], rtol=1e-15)
    a = np.array([0.0, 3.0, -INF, INF, -INF, 1000.0, -2.0])
    b = np.array([0.0, -1.0, -INF, INF, 5.0, 999.0, NAN])
    close(ember.logaddexp2(f64(a), f64(b)), np.logaddexp2(a, b), rtol=1e-15)
    with pytest.raises(NotImplementedError, match="logaddexp2"):
        ember.logaddexp2(ember.tensor([1]), ember.tensor([1]))
    assert ember.logaddexp2(ember.tensor([1.0]), f64([1.0])).dtype == ember.float64


def test_xlogy():
    close(ember.xlogy(ember.tensor([0.0, 0, 1]), ember.tensor([NAN, 0, 0])), [NAN, 0.0, -INF])
    close(ember.xlogy(2, ember.tensor([3])), [2 * math.log(3)], rtol=1e-6)
    close(ember.special.xlogy(f64([3.0]), 2.0), [3 * math.log(2)], rtol=1e-15)


# ------------------------------------------------------------------ integers, steps
def test_gcd_lcm_edges_as_torch():
    lo = -2 ** 63
    assert ember.gcd(ember.tensor([lo, lo, 0]), ember.tensor([0, -1, -6])).tolist() == [lo, 1, 6]
    i32 = ember.int32
    assert ember.lcm(ember.tensor([-2 ** 31 + 1, 6], dtype=i32), ember.tensor([2, -4], dtype=i32)).tolist() == [2, 12]
    i8 = ember.int8
    assert ember.lcm(ember.tensor([100], dtype=i8), ember.tensor([3], dtype=i8)).tolist() == [44]
    assert ember.gcd(ember.tensor([-128], dtype=i8), ember.tensor([0], dtype=i8)).tolist() == [-128]
    assert ember.gcd(ember.tensor([200], dtype=ember.uint8), ember.tensor([150], dtype=ember.uint8)).tolist() == [50]
    r = ember.gcd(ember.tensor([12, 9], dtype=i8), ember.tensor([[18], [6]]))
    assert r.dtype == ember.int64 and r.tolist() == [[6, 9], [6, 3]]
    for bad in (ember.tensor([1.0]), ember.tensor([True])):
        with pytest.raises(NotImplementedError, match="gcd"):
            ember.gcd(bad, bad)
    t = ember.tensor([4, 6])
    t.lcm_(ember.tensor([6, 4]))
    assert t.tolist() == [12, 12]


def test_heaviside():
    got = ember.heaviside(ember.tensor([-1.0, -0.0, 0.0, 2.0, NAN, -INF]), ember.tensor([5.0]))
    assert got.tolist()[:4] == [0.0, 5.0, 5.0, 1.0] and got.tolist()[4:] == [0.0, 0.0]
    assert ember.heaviside(ember.tensor([-3, 0, 3]), ember.tensor([7])).tolist() == [0, 7, 1]
    assert ember.heaviside(ember.tensor([True, False]), ember.tensor([True])).tolist() == [True, True]
    with pytest.raises(RuntimeError, match="different dtypes"):
        ember.heaviside(ember.tensor([1]), ember.tensor([2.0]))
    x = ember.tensor([1.0, -1.0], requires_grad=True)
    y = ember.heaviside(x, x)
    with pytest.raises(RuntimeError, match="derivative for aten::heaviside is not implemented"):
        y.sum().backward()


# ------------------------------------------------------------------ frexp
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_frexp_matches_numpy(dtype):
    v = np.array([0.0, -0.0, 3.0, -0.5, 1e-30, 7.5e30, 1.0, -1234.5678, 2.0 ** -20])
    t = ember.tensor(v, dtype=ember.float64).to(getattr(ember, dtype))
    m, e = ember.frexp(t)
    assert m.dtype == t.dtype and e.dtype == ember.int32
    wm, we = np.frexp(t.double().numpy())
    np.testing.assert_array_equal(m.double().numpy(), wm)
    np.testing.assert_array_equal(e.numpy(), we)


def test_frexp_specials_out_and_errors():
    r = ember.frexp(ember.tensor([INF, -INF, NAN, 8.0]))
    assert type(r).__name__ == "frexp" and r.exponent.tolist() == [0, 0, 0, 4]
    assert r.mantissa.tolist()[:2] == [INF, -INF] and math.isnan(r.mantissa.tolist()[2])
    assert r.mantissa.tolist()[3] == 0.5
    m, e = ember.empty(0), ember.empty(0, dtype=ember.int32)
    got = ember.frexp(ember.tensor([[6.0, 0.25]]), out=(m, e))
    assert got.mantissa is m and got.exponent is e
    assert m.shape == (1, 2) and m.tolist() == [[0.75, 0.5]] and e.tolist() == [[3, -1]]
    with pytest.raises(RuntimeError, match="exponent to have int dtype"):
        ember.frexp(ember.tensor([1.0]), out=(ember.empty(0), ember.empty(0)))
    with pytest.raises(RuntimeError, match="mantissa to have dtype"):
        ember.frexp(ember.tensor([1.0]), out=(f64([0.0]), ember.empty(0, dtype=ember.int32)))
    with pytest.raises(RuntimeError, match="only supports floating-point dtypes"):
        ember.frexp(ember.tensor([1, 2]))
    m, e = ember.tensor([3.0]).frexp()
    assert m.item() == 0.75 and e.item() == 2


# ------------------------------------------------------------------ meta
def test_meta_shapes_and_dtypes():
    a = ember.empty(2, 1, 3, device="meta")
    b = ember.empty(4, 1, device="meta")
    i = ember.empty(3, dtype=ember.int64, device="meta")
    for fn in (ember.lgamma, ember.digamma, ember.i0, ember.rad2deg, ember.deg2rad,
               lambda x: ember.polygamma(2, x), lambda x: ember.mvlgamma(x, 3)):
        r = fn(a)
        assert r.is_meta and r.shape == (2, 1, 3) and r.dtype == ember.float32
        assert fn(i).dtype == ember.float32
    for fn in (ember.ldexp, ember.logaddexp2, ember.xlogy, ember.heaviside):
        r = fn(a, b)
        assert r.is_meta and r.shape == (2, 4, 3) and r.dtype == ember.float32
    r = ember.gcd(i, ember.empty(2, 1, dtype=ember.int64, device="meta"))
    assert r.is_meta and r.shape == (2, 3) and r.dtype == ember.int64
    m, e = ember.frexp(a)
    assert m.is_meta and e.is_meta and m.shape == e.shape == (2, 1, 3) and e.dtype == ember.int32


# ------------------------------------------------------------------ gradients
def _x(v):
    return f64(v).requires_grad_()


GRADCHECK = [
    ("lgamma", lambda x: ember.lgamma(x), [0.3, 2.5, -1.5, 7.0]),
    ("digamma", lambda x: ember.digamma(x), [0.3, 2.5, -1.5, 7.0]),
    ("polygamma2", lambda x: ember.polygamma(2, x), [0.3, 2.5, -1.5, 7.0]),
    ("mvlgamma", lambda x: ember.mvlgamma(x, 3), [1.3, 2.5, 7.0]),
    ("i0", lambda x: ember.i0(x), [0.3, -2.5, 16.0]),
    ("rad2deg", lambda x: ember.rad2deg(x), [0.3, -2.5]),
    ("deg2rad", lambda x: ember.deg2rad(x), [0.3, -2.5]),
    ("frexp", lambda x: ember.frexp(x).mantissa, [0.3, -2.5, 9.0]),
    ("ldexp", lambda x: ember.ldexp(x, x * 0.5), [0.3, -2.5, 2.0]),
    ("logaddexp2", lambda x: ember.logaddexp2(x, x.flip(0) * 2), [0.3, -2.5, 2.0]),
    ("xlogy", lambda x: ember.xlogy(x, x.abs() + 0.5), [0.3, -2.5, 2.0]),
]


@pytest.mark.parametrize("name,fn,v", GRADCHECK, ids=[g[0] for g in GRADCHECK])
def test_gradcheck(name, fn, v):
    assert ember.autograd.gradcheck(fn, (_x(v),))


def test_second_derivatives_of_the_gamma_family():
    assert ember.autograd.gradgradcheck(ember.lgamma, (_x([0.7, 3.5]),))
    assert ember.autograd.gradgradcheck(ember.digamma, (_x([0.7, 3.5]),))


def test_node_names_and_torchs_xlogy_gradient():
    x = _x([1.5, 2.5])
    names = {"lgamma": ember.lgamma(x), "digamma": ember.digamma(x), "polygamma": ember.polygamma(2, x),
             "mvlgamma": ember.mvlgamma(x, 2), "i0": ember.i0(x), "rad2deg": ember.rad2deg(x),
             "frexp": ember.frexp(x).mantissa, "ldexp": ember.ldexp(x, x), "logaddexp2": ember.logaddexp2(x, x)}
    want = {"lgamma": "LgammaBackward0", "digamma": "DigammaBackward0", "polygamma": "PolygammaBackward0",
            "mvlgamma": "MvlgammaBackward0", "i0": "I0Backward0", "rad2deg": "Rad2DegBackward0",
            "frexp": "FrexpBackward0", "ldexp": "LdexpBackward0", "logaddexp2": "Logaddexp2Backward0"}
    for k, r in names.items():
        assert r.grad_fn.name() == want[k], k
    assert ember.xlogy(x, x).grad_fn.name() == "XlogyBackward0"
    assert ember.xlogy(2.0, x).grad_fn.name() == "XlogyBackward1"
    assert ember.xlogy(x, 2.0).grad_fn.name() == "XlogyBackward2"
    a, b = _x([0.0, 1.0, -1.0]), _x([0.0, 2.0, 3.0])
    ember.xlogy(a, b).sum().backward()  # torch: 0 where a == 0 and b <= 0; b's gradient a / b
    close(a.grad, [0.0, math.log(2), math.log(3)], rtol=1e-15)
    close(b.grad, [NAN, 0.5, -1 / 3], rtol=1e-15)
