"""float32 vector math against NumPy's float64 results, in ulps of the
float32 answer: exp (csrc/cpu/fast_exp.h's exp_f32, vectorized in
csrc/cpu/unary.c) is within 1 ulp over its whole finite range, subnormal
results included."""
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
