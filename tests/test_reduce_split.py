"""Whole-tensor reductions split into pieces across threads (Note [reduce
split] in csrc/core/reduce.c): each piece folds into its own accumulators,
combined in piece order — so ties keep the first index, every element is
counted once (the pieces' edges and the last, shorter piece), and the
result does not depend on which thread ran which piece. References are
NumPy in float64 and hand-computed values."""
import math

import numpy as np
import pytest

import ember


@pytest.fixture(params=[1, 2, 3, 8])
def nt(request):
    before = ember.get_num_threads()
    ember.set_num_threads(request.param)
    yield request.param
    ember.set_num_threads(before)


SIZES = [2 * 32768, 1_000_003, 4 * 2 ** 20 + 17]  # just at the split threshold, odd, a few MiB + a tail


@pytest.mark.parametrize("n", SIZES)
def test_sum_and_mean_match_float64(nt, n):
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    exact = math.fsum(x.astype(np.float64))
    t = ember.from_numpy(x)
    # float32 result: within a few float32 roundings of the exact sum
    assert abs(t.sum().item() - exact) <= 4 * np.spacing(np.float32(np.abs(x).sum()))
    assert abs(t.mean().item() - exact / n) <= 4 * np.spacing(np.float32(np.abs(x).mean()))


@pytest.mark.parametrize("n", SIZES)
def test_every_element_counted_once(nt, n):
    x = ember.ones(n)
    assert x.sum().item() == n
    assert x.count_nonzero().item() == n
    idx = np.arange(n, dtype=np.float64)
    assert ember.from_numpy(idx).sum().item() == n * (n - 1) / 2  # exact in double


def test_ties_keep_the_first_index_across_pieces(nt):
    n = 1_000_003
    x = ember.zeros(n)
    for i in (n - 1, 700_000, 400_001, 123_457):  # the maximum in several pieces
        x[i] = 7.0
    assert x.argmax().item() == 123_457
    assert x.max().item() == 7.0
    y = -x
    assert y.argmin().item() == 123_457
    x[999_999] = float("nan")  # a NaN wins over any number, wherever it is
    assert x.argmax().item() == 999_999 and math.isnan(x.amax().item())


def test_result_is_the_same_on_every_run():
    """Which thread runs a piece must not change the sum's rounding."""
    before = ember.get_num_threads()
    try:
        ember.set_num_threads(2)
        x = ember.from_numpy(np.random.default_rng(5).random(3_000_001, dtype=np.float32) * 1e3)
        first = x.sum().item()
        assert all(x.sum().item() == first for _ in range(20))
    finally:
        ember.set_num_threads(before)


def test_norm_and_var_of_a_split_reduction(nt):
    x = np.random.default_rng(9).standard_normal(2_000_000).astype(np.float32) + 3
    t = ember.from_numpy(x)
    x64 = x.astype(np.float64)
    assert abs(t.norm().item() / np.sqrt((x64 * x64).sum()) - 1) < 1e-6
    assert abs(t.var().item() / x64.var(ddof=1) - 1) < 1e-5


def test_short_reductions_over_many_outputs(nt):
    """Few reduced elements per output, every output in one tile: the split
    still covers every element (pieces shorter than a vector block)."""
    x = np.random.default_rng(3).standard_normal((100, 1000)).astype(np.float32)
    t = ember.from_numpy(x)
    np.testing.assert_allclose(t.sum(0).numpy(), x.astype(np.float64).sum(0), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(t.argmax(0).numpy(), x.argmax(0))
    np.testing.assert_allclose(t.amax(0).numpy(), x.max(0))


# Fewer tiles than threads but many outputs: the threads split the outputs
# (smaller tiles), each output folds all its elements in order, so every
# thread count gives the one-thread bits; the row-blocked fold (four rows per
# pass over the accumulators) keeps each output's element order.
@pytest.mark.parametrize("shape,dim", [((512, 1024), 0), ((513, 768), 0), ((7, 300), 0), ((1024, 500), 1),
                                       ((6, 512, 130), (0, 2)), ((3, 2050), 0)])
def test_outputs_split_between_threads_match_one_thread(nt, shape, dim):
    x = np.random.default_rng(len(shape) + shape[-1]).standard_normal(shape).astype(np.float32)
    t = ember.from_numpy(x)
    got = {name: getattr(t, name)(dim).numpy() for name in ("sum", "mean", "amax", "var")}
    got["argmax"] = t.argmax(dim if isinstance(dim, int) else 0).numpy()
    before = ember.get_num_threads()
    try:
        ember.set_num_threads(1)
        one = {name: getattr(t, name)(dim).numpy() for name in ("sum", "mean", "amax", "var")}
        one["argmax"] = t.argmax(dim if isinstance(dim, int) else 0).numpy()
    finally:
        ember.set_num_threads(before)
    for name in got:
        np.testing.assert_array_equal(got[name], one[name], err_msg=name)
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(got["sum"], x64.sum(dim), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(got["var"], x64.var(dim, ddof=1), rtol=1e-5)
    np.testing.assert_array_equal(got["amax"], x.max(dim))
    np.testing.assert_array_equal(got["argmax"], x.argmax(dim if isinstance(dim, int) else 0))


def test_column_argmax_ties_keep_the_first_row(nt):
    x = np.zeros((301, 700), np.float32)
    x[[5, 6, 7, 8, 300], 3] = 2.0  # ties inside one block of four rows and across blocks
    x[[2, 3], 699] = np.nan        # the first NaN wins
    x[4, 699] = 5.0
    t = ember.from_numpy(x)
    am = t.argmax(0).numpy()
    assert am[3] == 5 and am[699] == 2 and am[0] == 0
    assert np.isnan(t.amax(0).numpy()[699])
