"""select_scatter, slice_scatter, diagonal_scatter and as_strided_scatter
(_shape_functions.py): a new tensor equal to input with one view's elements
replaced by src — against NumPy's assignment into a copy, with torch's size
error, both gradients (src's: the view of the upstream gradient; input's:
the rest), and input's layout kept."""
import numpy as np
import pytest

import ember

RNG = np.random.default_rng(0)
A = RNG.standard_normal((3, 4, 5))


def _numpy_embed(view, src_shape):
    want, src = A.copy(), RNG.standard_normal(src_shape)
    view(want)[...] = src
    return want, src


CASES = {
    "select_scatter": (lambda a: a[:, 2], (3, 5), lambda x, s: ember.select_scatter(x, s, 1, 2)),
    "select_scatter negative": (lambda a: a[:, :, -1], (3, 4), lambda x, s: x.select_scatter(s, -1, -1)),
    "slice_scatter": (lambda a: a[:, 1:4:2], (3, 2, 5), lambda x, s: ember.slice_scatter(x, s, 1, 1, 4, 2)),
    "slice_scatter defaults": (lambda a: a[:], (3, 4, 5), lambda x, s: ember.slice_scatter(x, s)),
    "as_strided_scatter": (lambda a: np.lib.stride_tricks.as_strided(a.reshape(-1), (2, 3), (8 * 7, 8 * 2)),
                           (2, 3), lambda x, s: ember.as_strided_scatter(x, s, (2, 3), (7, 2), 0)),
}  # diagonal_scatter: test_diagonal_scatter (NumPy has no assignable diagonal view)


@pytest.mark.parametrize("name", sorted(CASES))
def test_values_as_numpy_assignment(name):
    view, src_shape, call = CASES[name]
    want, src = _numpy_embed(view, src_shape)
    x = ember.tensor(A)
    got = call(x, ember.tensor(src))
    np.testing.assert_array_equal(got.numpy(), want)
    np.testing.assert_array_equal(x.numpy(), A)  # input untouched


@pytest.mark.parametrize("offset", [-1, 0, 2])
def test_diagonal_scatter(offset):
    x = RNG.standard_normal((4, 5))
    n = len(np.diagonal(x, offset))
    src = RNG.standard_normal(n)
    want = x.copy()
    rows = np.arange(n) + max(-offset, 0)
    want[rows, rows + offset] = src
    np.testing.assert_array_equal(ember.diagonal_scatter(ember.tensor(x), ember.tensor(src), offset).numpy(), want)


def test_gradients_split_between_input_and_src():
    x = ember.tensor(A, requires_grad=True)
    s = ember.tensor(RNG.standard_normal((3, 5)), requires_grad=True)
    g = RNG.standard_normal((3, 4, 5))
    ember.select_scatter(x, s, 1, 2).backward(ember.tensor(g))
    want_x = g.copy()
    want_x[:, 2] = 0
    np.testing.assert_array_equal(x.grad.numpy(), want_x)
    np.testing.assert_array_equal(s.grad.numpy(), g[:, 2])


def test_size_error_and_layout():
    with pytest.raises(RuntimeError, match=r"expected src to have a size equal to the slice of self. "
                                           r"src size = \[3\], slice size = \[4\]"):
        ember.select_scatter(ember.zeros(3, 4), ember.ones(3), 0, 1)
    with pytest.raises(TypeError, match=r"argument 'src' \(position 2\) must be Tensor"):
        ember.slice_scatter(ember.zeros(3), 1.0)
    x = ember.zeros(2, 3, 4, 5).contiguous(memory_format=ember.channels_last)
    r = ember.select_scatter(x, ember.ones(2, 4, 5), 1, 0)
    assert r.is_contiguous(memory_format=ember.channels_last)
    assert r[:, 0].sum().item() == 40 and r[:, 1:].sum().item() == 0
