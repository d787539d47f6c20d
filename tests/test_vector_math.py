"""float32 vector math against NumPy's float64 results, in ulps of the
float32 answer: exp (csrc/cpu/fast_exp.h's exp_f32, vectorized in
csrc/cpu/unary.c) is within 1 ulp over its whole finite range, subnormal
results included; tanh and sigmoid (csrc/cpu/vec_math.h) within 2 ulp;
GELU and its backward (csrc/cpu/act_math.h) within 5."""
import math

import numpy as np

import ember


def ulps(got, x64):
    want = np.exp(x64)
    return np.abs(got.astype(np.float64) - want) / np.spacing(want.astype(np.float32)).astype(np.float64)


def test_exp_float32_within_one_ulp():
    rng = np.random.default_rng(0)
    x = np.concatenate([np.linspace(-103.9, 88.72, 1_000_001, dtype=np.float32),
                        (rng.standard_normal(200_000) * 20).astype(np.float32)])
    x = x[x <= 88.72]
    got = ember.exp(ember.from_numpy(x)).numpy()
    assert ulps(got, x.astype(np.float64)).max() <= 1.0


def test_exp_float32_edges():
    x = np.array([-np.inf, -200, -104, -103.9, -88, 0, -0.0, 1, 88.72, 88.73, 200, np.inf, np.nan], np.float32)
    got = ember.exp(ember.from_numpy(x)).numpy()
    assert got[0] == 0 and got[1] == 0 and got[2] == 0
    assert got[3] == np.float32(1.4e-45)  # the smallest subnormal
    assert 0 < got[4] < np.finfo(np.float32).tiny  # subnormal, not flushed
    assert got[5] == 1 and got[6] == 1
    assert abs(got[7] - np.float32(np.e)) <= np.spacing(np.float32(np.e))
    assert np.isfinite(got[8]) and got[9] == np.inf and got[10] == np.inf and got[11] == np.inf
    assert np.isnan(got[12])


def test_exp_float32_strided_and_odd_lengths():
    # every tail length of the vector loop, and the strided path
    for n in range(1, 40):
        x = np.linspace(-5, 5, n, dtype=np.float32)
        np.testing.assert_allclose(ember.exp(ember.from_numpy(x)).numpy(), np.exp(x), rtol=2e-7)
    x = np.linspace(-5, 5, 200, dtype=np.float32).reshape(20, 10)
    np.testing.assert_allclose(ember.exp(ember.from_numpy(x).t()).numpy(), np.exp(x.T), rtol=2e-7)


# tanh and sigmoid (csrc/cpu/vec_math.h, Note [vector math accuracy]): float32
# within 2 ulp of NumPy's float64 answer

def ulp_error(got, want):
    """|got - want| in ulps of the float32 nearest to want"""
    spacing = np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
    return np.abs(got.astype(np.float64) - want) / spacing


def dense_and_tiny(hi, n=2_000_001):
    """a dense grid over [-hi, hi] and |x| from the smallest subnormal up to 1, both signs"""
    tiny = np.logspace(-45, 0, 200_001).astype(np.float32)
    return np.concatenate([np.linspace(-hi, hi, n, dtype=np.float32), tiny, -tiny])


def test_tanh_float32_within_two_ulp():
    rng = np.random.default_rng(1)
    x = np.concatenate([dense_and_tiny(10.0), (rng.standard_normal(200_000) * 3).astype(np.float32)])
    got = ember.tanh(ember.from_numpy(x)).numpy()
    assert ulp_error(got, np.tanh(x.astype(np.float64))).max() <= 2.0


def test_tanh_float32_edges():
    tiny = np.float32(1e-40)  # subnormal: tanh(x) = x, within one subnormal step
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, tiny, -tiny, 9.1, -9.5, 20, -1e30, 3e38], np.float32)
    got = ember.tanh(ember.from_numpy(x)).numpy()
    assert got[0] == 0 and not np.signbit(got[0]) and got[1] == 0 and np.signbit(got[1])
    assert got[2] == 1 and got[3] == -1 and np.isnan(got[4])
    step = np.float32(1.4e-45)
    assert abs(got[5] - tiny) <= step and abs(got[6] + tiny) <= step and np.signbit(got[6])
    np.testing.assert_array_equal(got[7:], [1, -1, 1, -1, 1])  # saturated, never past ±1


def test_tanh_float32_layouts_and_tails():
    # every tail length of the vector loops, and the strided loop: the same numbers
    for n in range(1, 70):
        x = np.linspace(-3, 3, n, dtype=np.float32)
        got = ember.tanh(ember.from_numpy(x)).numpy()
        assert ulp_error(got, np.tanh(x.astype(np.float64))).max() <= 2.0
    x = np.linspace(-5, 5, 600, dtype=np.float32).reshape(30, 20)
    contiguous = ember.tanh(ember.from_numpy(np.ascontiguousarray(x.T))).numpy()
    np.testing.assert_array_equal(ember.tanh(ember.from_numpy(x).t()).numpy(), contiguous)


def test_tanh_float64_and_half_types():
    x = np.linspace(-20, 20, 10_001)
    np.testing.assert_allclose(ember.tanh(ember.from_numpy(x)).numpy(), np.tanh(x), rtol=1e-15, atol=1e-300)
    # float16 / bfloat16 compute in float32 and round once
    h = np.linspace(-4, 4, 1001).astype(np.float16)
    got = ember.tanh(ember.from_numpy(h)).numpy()
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, np.tanh(h.astype(np.float64)).astype(np.float16))


def test_sigmoid_float32_within_two_ulp():
    x = dense_and_tiny(87.0)
    got = ember.sigmoid(ember.from_numpy(x)).numpy()
    want = 1 / (1 + np.exp(-x.astype(np.float64)))
    assert ulp_error(got, want).max() <= 2.0


def test_sigmoid_float32_edges():
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 20, 100, -87.25, -88, -200], np.float32)
    got = ember.sigmoid(ember.from_numpy(x)).numpy()
    assert got[0] == 0.5 and got[1] == 0.5 and got[2] == 1 and got[3] == 0 and np.isnan(got[4])
    assert got[5] == 1 and got[6] == 1
    assert abs(got[7] - np.exp(-87.25)) <= 1e-44  # the bottom of the normal range still comes out
    assert got[8] < np.finfo(np.float32).tiny and got[9] == 0  # below it: flushed, as documented


# GELU (csrc/cpu/act_math.h, Note [vector gelu]): float32 within 5 ulp of the
# float64 x·Φ(x) everywhere, the negative tail included (relative accuracy down
# to |gelu| = 1e-30); the backward Φ(x) + x·φ(x) within 5 ulp of the larger
# of its two terms (it crosses zero near x = -0.75, where only that holds)

def _gelu_refs(x):
    xd = x.astype(np.float64)
    phi = 0.5 * np.vectorize(math.erfc, otypes=[float])(-xd / math.sqrt(2))
    dens = np.exp(-xd * xd / 2) / math.sqrt(2 * math.pi)
    return xd * phi, phi + xd * dens, np.maximum(phi, np.abs(xd * dens))


def test_gelu_float32_within_five_ulp():
    x = np.linspace(-13.5, 13.5, 1_000_001).astype(np.float32)
    fwd, bwd, scale = _gelu_refs(x)
    got = ember.nn.functional.gelu(ember.from_numpy(x)).numpy()
    ok = np.abs(fwd) > 1e-30
    assert ulp_error(got[ok], fwd[ok]).max() <= 5.0
    assert np.all(np.abs(got[~ok]) <= 1e-30)
    grad = ember._C._gelu_backward(ember.ones(x.shape[0]), ember.from_numpy(x)).numpy()
    ok = scale > 1e-30
    err = np.abs(grad[ok].astype(np.float64) - bwd[ok]) / np.spacing(scale[ok].astype(np.float32))
    assert err.max() <= 5.0
    assert np.all(np.abs(grad[~ok]) <= 1e-30)


def test_gelu_float32_blocks_give_each_element_its_own_answer():
    # the contiguous kernels skip the tail form in blocks of inputs all below
    # 4 in size: an element's result must not depend on its neighbours
    x = np.linspace(-3.9, 3.9, 1000).astype(np.float32)
    mixed = x.copy()
    mixed[::37] = 50.0  # a large input in most blocks
    F = ember.nn.functional
    keep = np.ones(x.shape[0], bool)
    keep[::37] = False
    np.testing.assert_array_equal(F.gelu(ember.from_numpy(mixed)).numpy()[keep],
                                  F.gelu(ember.from_numpy(x)).numpy()[keep])
    g = ember.from_numpy(np.linspace(-2, 2, 1000).astype(np.float32))
    np.testing.assert_array_equal(ember._C._gelu_backward(g, ember.from_numpy(mixed)).numpy()[keep],
                                  ember._C._gelu_backward(g, ember.from_numpy(x)).numpy()[keep])
    # and the strided loop (no blocks) agrees with the blocked one
    pair = ember.from_numpy(np.stack([mixed, mixed], 1))[:, 1]
    np.testing.assert_array_equal(F.gelu(pair).numpy(), F.gelu(ember.from_numpy(mixed)).numpy())


def test_gelu_float32_tails_and_specials():
    F = ember.nn.functional
    for n in range(1, 140, 7):  # block and vector tails
        x = np.linspace(-6, 6, n).astype(np.float32)
        fwd, _, _ = _gelu_refs(x)
        got = F.gelu(ember.from_numpy(x)).numpy()
        ok = np.abs(fwd) > 1e-30
        assert ulp_error(got[ok], fwd[ok]).max() <= 5.0
    got = F.gelu(ember.from_numpy(np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -20, 20], np.float32))).numpy()
    assert got[0] == 0 and got[1] == 0 and got[2] == np.inf
    assert np.isnan(got[3]) and np.isnan(got[4])  # -inf·Φ(-inf) = -inf·0
    assert got[5] == 0 and got[6] == 20
