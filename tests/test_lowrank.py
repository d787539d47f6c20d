"""svd_lowrank / pca_lowrank (randomized truncated SVD) against NumPy's full SVD."""
import numpy as np
import pytest

import ember


def _low_rank(m, n, r, seed=0):
    rs = np.random.RandomState(seed)
    return (rs.randn(m, r) @ rs.randn(r, n)).astype(np.float32)


@pytest.mark.parametrize("shape", [(20, 12), (12, 20)])
def test_svd_lowrank_recovers_a_low_rank_matrix(shape):
    a = _low_rank(*shape, r=4)
    U, S, V = ember.svd_lowrank(ember.tensor(a), q=4)
    assert tuple(U.shape) == (shape[0], 4) and tuple(S.shape) == (4,) and tuple(V.shape) == (shape[1], 4)
    np.testing.assert_allclose(S.numpy(), np.linalg.svd(a, compute_uv=False)[:4], rtol=1e-4)
    np.testing.assert_allclose((U @ ember.diag(S) @ V.T).numpy(), a, atol=1e-4)
    np.testing.assert_allclose((U.T @ U).numpy(), np.eye(4), atol=1e-5)


def test_svd_lowrank_batched_and_with_M():
    a = np.stack([_low_rank(9, 7, 3, seed=s) for s in range(2)])
    M = np.random.RandomState(5).randn(9, 7).astype(np.float32)
    U, S, V = ember.svd_lowrank(ember.tensor(a + M), q=3, M=ember.tensor(M))
    np.testing.assert_allclose((U @ ember.diag_embed(S) @ V.mT).numpy(), a, atol=1e-4)


def test_pca_lowrank_centres_the_columns():
    a = _low_rank(30, 8, 3) + 5.0
    U, S, V = ember.pca_lowrank(ember.tensor(a), q=3)
    np.testing.assert_allclose(S.numpy(), np.linalg.svd(a - a.mean(0), compute_uv=False)[:3], rtol=1e-4)
    assert tuple(V.shape) == (8, 3)


def test_lowrank_bad_input():
    with pytest.raises(RuntimeError, match=r"\(5,\)"):
        ember.svd_lowrank(ember.ones(5))
    with pytest.raises(ValueError, match="q=9"):
        ember.svd_lowrank(ember.ones(4, 5), q=9)


def test_lowrank_junk_raises_type_errors():
    with pytest.raises(TypeError, match="Tensor"):
        ember.svd_lowrank(0)
    with pytest.raises(TypeError, match="'q'"):
        ember.pca_lowrank(ember.ones(3, 3), q=1.5)
    with pytest.raises(RuntimeError, match="int64"):
        ember.svd_lowrank(ember.ones(3, 3, dtype=ember.int64))
