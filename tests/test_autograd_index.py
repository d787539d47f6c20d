"""Gradients of indexing where gradcheck can't be the judge: duplicate
indices (x[[0, 0]] reads x[0] twice; x[[0, 0]] = v writes it twice),
scatter_reduce's ties (amax/amin) and zeros (prod), scatter's reduce= forms
(no derivative in torch), node names of x[key] and x[key] = v. Hand-computed
values always run; the same calls are compared with torch when it is
installed. The gradcheck cases live in tests/autograd_cases_index.py."""
import numpy as np
import pytest

import ember
from ember.autograd import gradgradcheck

try:
    import torch as _torch
except ImportError:
    _torch = None
needs_torch = pytest.mark.skipif(_torch is None, reason="torch not installed")

X = [[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0], [9.0, 10.0, 11.0, 12.0]]


def _leaf(L, v):
    return L.tensor(v, dtype=L.float64, requires_grad=True)


def _grads(L, f, *vals, upstream=None):
    """Leaf gradients of f(L, *leaves) for an upstream gradient of ones
    (or `upstream`, a list of lists)."""
    xs = [_leaf(L, v) for v in vals]
    y = f(L, *xs)
    g = L.ones_like(y) if upstream is None else L.tensor(upstream, dtype=L.float64)
    y.backward(g)
    return [None if x.grad is None else np.array(x.grad.tolist()) for x in xs]


def _setitem(key, make_v=None):
    def f(L, x, v):
        y = x * 1
        y[key(L) if callable(key) else key] = v if make_v is None else make_v(v)
        return y
    return f


# (id, f(L, *leaves), leaf values, hand-computed gradients (upstream ones))
CASES = [
    ("x[[0, 0]]", lambda L, x: x[[0, 0]], [[1.0, 2.0, 3.0]], [[2.0, 0.0, 0.0]]),
    ("x[[2, 0, 2, 2]]", lambda L, x: x[[2, 0, 2, 2]], [[1.0, 2.0, 3.0]], [[1.0, 0.0, 3.0]]),
    ("x[t([-1, 2])]", lambda L, x: x[L.tensor([-1, 2])], [[1.0, 2.0, 3.0]], [[0.0, 0.0, 2.0]]),
    ("x[[1, 1], [2, 2]]", lambda L, x: x[[1, 1], [2, 2]], [X],
     [[[0, 0, 0, 0], [0, 0, 2, 0], [0, 0, 0, 0]]]),
    ("x[1:, [0, 0, 3]]", lambda L, x: x[1:, [0, 0, 3]], [X],
     [[[0, 0, 0, 0], [2, 0, 0, 1], [2, 0, 0, 1]]]),
    ("x[[0, 0], 1:]", lambda L, x: x[[0, 0], 1:], [X], [[[0, 2, 2, 2], [0, 0, 0, 0], [0, 0, 0, 0]]]),
    ("x[mask]", lambda L, x: x[L.tensor([[True, False, False, True], [False] * 4, [True] * 4])], [X],
     [[[1, 0, 0, 1], [0, 0, 0, 0], [1, 1, 1, 1]]]),
    ("x[None, [1, 1]]", lambda L, x: x[None, [1, 1]], [X], [[[0] * 4, [2] * 4, [0] * 4]]),
    ("x[[0, 0]][:, [3, 3]]", lambda L, x: x[[0, 0]][:, [3, 3]], [X], [[[0, 0, 0, 4], [0] * 4, [0] * 4]]),
    ("x[1, ::2] basic", lambda L, x: x[1, ::2], [X], [[[0] * 4, [1, 0, 1, 0], [0] * 4]]),
    # x[key] = v: x's gradient is 0 where overwritten; v's gathers (every duplicate gets one)
    ("y[[0, 2]] = v (4,)", _setitem([0, 2]), [X, [1.0, 2.0, 3.0, 4.0]],
     [[[0] * 4, [1] * 4, [0] * 4], [2.0] * 4]),
    ("y[[0, 0]] = v (2, 4)", _setitem([0, 0]), [X, [[1.0] * 4, [2.0] * 4]],
     [[[0] * 4, [1] * 4, [1] * 4], [[1.0] * 4] * 2]),
    ("y[[1, 1], [3, 3]] = v ()", _setitem(([1, 1], [3, 3])), [X, 5.0],
     [[[1] * 4, [1, 1, 1, 0], [1] * 4], 2.0]),
    ("y[1:, [0, 2]] = v (2,)", _setitem((slice(1, None), [0, 2])), [X, [1.0, 2.0]],
     [[[1] * 4, [0, 1, 0, 1], [0, 1, 0, 1]], [2.0, 2.0]]),
    ("y[mask] = v ()", _setitem(lambda L: L.tensor([[True, False, False, True], [False] * 4, [True] * 4])),
     [X, 5.0], [[[0, 1, 1, 0], [1] * 4, [0] * 4], 6.0]),
    ("y[[0]] = v (1, 1, 4)", _setitem([0]), [X, [[[1.0, 2.0, 3.0, 4.0]]]],
     [[[0] * 4, [1] * 4, [1] * 4], [[[1.0] * 4]]]),
    ("plain y[1:, [0, 2]] = v", lambda L, v: (y := L.zeros(3, 4, dtype=L.float64),
                                              y.__setitem__((slice(1, None), [0, 2]), v), y)[-1],
     [[1.0, 2.0]], [[2.0, 2.0]]),
    ("index_put accumulate dup", lambda L, x, v: x.index_put((L.tensor([0, 0]),), v, accumulate=True),
     [[1.0, 2.0], [3.0, 4.0]], [[1.0, 1.0], [1.0, 1.0]]),
    ("index_put dup", lambda L, x, v: x.index_put((L.tensor([0, 0]),), v), [[1.0, 2.0], [3.0, 4.0]],
     [[0.0, 1.0], [1.0, 1.0]]),
    # scatter: every duplicate src gets the gradient (torch), self none where written
    ("scatter dup", lambda L, x, s: x.scatter(0, L.tensor([1, 1]), s), [[1.0, 2.0, 3.0], [4.0, 5.0]],
     [[1.0, 0.0, 1.0], [1.0, 1.0]]),
    ("gather dup", lambda L, x: x.gather(0, L.tensor([2, 2, 0])), [[1.0, 2.0, 3.0]], [[1.0, 0.0, 2.0]]),
    ("index_select dup", lambda L, x: x.index_select(0, L.tensor([1, 1, 1])), [[1.0, 2.0]], [[0.0, 3.0]]),
    ("take dup", lambda L, x: x.take(L.tensor([3, -1, 0])), [[[1.0, 2.0], [3.0, 4.0]]], [[[1.0, 0.0], [0.0, 2.0]]]),
    ("index_add dup alpha", lambda L, x, s: x.index_add(0, L.tensor([1, 1]), s, alpha=3),
     [[1.0, 2.0], [5.0, 6.0]], [[1.0, 1.0], [3.0, 3.0]]),
    # a 0-d tensor value gets the gradient of every place it filled, once
    ("masked_fill tensor value", lambda L, x, v: x.masked_fill(L.tensor([True, False, True]), v),
     [[1.0, 2.0, 3.0], 7.0], [[0.0, 1.0, 0.0], 2.0]),
    ("index_fill tensor value dup", lambda L, x, v: x.index_fill(0, L.tensor([2, 2, 0]), v),
     [[1.0, 2.0, 3.0], 7.0], [[0.0, 1.0, 0.0], 2.0]),
    ("masked_scatter", lambda L, x, s: x.masked_scatter(L.tensor([False, True, True]), s),
     [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0]], [[1.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0]]),
    ("masked_select broadcast", lambda L, x: x.masked_select(L.tensor([[True, False], [True, True]])),
     [[1.0, 2.0]], [[2.0, 1.0]]),
    # scatter_reduce: amax/amin split among every tie (self's included), prod with zeros
    ("amax ties", lambda L, x, s: x.scatter_reduce(0, L.tensor([0, 0, 1]), s, "amax"),
     [[1.0, 0.0], [1.0, 1.0, 3.0]], [[1 / 3, 0.0], [1 / 3, 1 / 3, 1.0]]),
    ("amin ties, include_self=False", lambda L, x, s: x.scatter_reduce(0, L.tensor([0, 0, 1]), s, "amin",
                                                                      include_self=False),
     [[1.0, 5.0, 2.0], [1.0, 1.0, 3.0]], [[0.0, 0.0, 1.0], [1 / 3, 1 / 3, 1.0]]),
    ("prod zeros", lambda L, x, s: x.scatter_reduce(0, L.tensor([0, 0, 1, 1]), s, "prod"),
     [[2.0, 3.0], [0.0, 5.0, 0.0, 0.0]], [[0.0, 0.0], [10.0, 0.0, 0.0, 0.0]]),
    ("prod zero in self", lambda L, x, s: x.scatter_reduce(0, L.tensor([0, 0]), s, "prod"),
     [[0.0, 3.0], [4.0, 5.0]], [[20.0, 1.0], [0.0, 0.0]]),
    ("prod include_self=False", lambda L, x, s: x.scatter_reduce(0, L.tensor([0, 0]), s, "prod",
                                                                include_self=False),
     [[2.0, 3.0], [4.0, 5.0]], [[0.0, 1.0], [5.0, 4.0]]),
    ("mean", lambda L, x, s: x.scatter_reduce(0, L.tensor([0, 0]), s, "mean"),
     [[1.0, 2.0], [3.0, 5.0]], [[1 / 3, 1.0], [1 / 3, 1 / 3]]),
    ("mean include_self=False", lambda L, x, s: x.scatter_reduce(0, L.tensor([0, 0]), s, "mean",
                                                                include_self=False),
     [[1.0, 2.0], [3.0, 5.0]], [[0.0, 1.0], [0.5, 0.5]]),
    ("sum include_self=False", lambda L, x, s: x.scatter_reduce(0, L.tensor([1, 1]), s, "sum",
                                                               include_self=False),
     [[1.0, 2.0], [3.0, 5.0]], [[1.0, 0.0], [1.0, 1.0]]),
]


def _same(got, want):
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, np.array(w, np.float64), rtol=1e-12, atol=0)


@pytest.mark.parametrize("name,f,vals,want", [pytest.param(*c, id=c[0]) for c in CASES])
def test_by_hand(name, f, vals, want):
    _same(_grads(ember, f, *vals), want)


@needs_torch
@pytest.mark.parametrize("name,f,vals,want", [pytest.param(*c, id=c[0]) for c in CASES])
def test_matches_torch(name, f, vals, want):
    _same(_grads(ember, f, *vals), _grads(_torch, f, *vals))


# node names: type(y.grad_fn).__name__ as torch gives it
NAMES = [
    ("x[[0, 0]]", lambda L, x: x[[0, 0]], "IndexBackward0"),
    ("x[1:, [0, 2]]", lambda L, x: x[1:, [0, 2]], "IndexBackward0"),
    ("x[[0, 2], 1]", lambda L, x: x[[0, 2], 1], "IndexBackward0"),
    ("x[mask]", lambda L, x: x[x > 5], "IndexBackward0"),
    ("x[True]", lambda L, x: x[True], "IndexBackward0"),
    ("x[None, [0]]", lambda L, x: x[None, [0]], "IndexBackward0"),
    ("x[t(1)]", lambda L, x: x[L.tensor(1)], "SelectBackward0"),
    ("x[1, ::2]", lambda L, x: x[1, ::2], "SliceBackward0"),
    ("x[:, 1]", lambda L, x: x[:, 1], "SelectBackward0"),
    ("x[None]", lambda L, x: x[None], "UnsqueezeBackward0"),
    ("x[...]", lambda L, x: x[...], "AliasBackward0"),
    ("y[[0, 2]] = v", _setitem([0, 2]), "IndexPutBackward0"),
    ("y[mask] = v", _setitem(lambda L: L.tensor([[True, False] * 2] * 3)), "IndexPutBackward0"),
    ("y[..., [0]] = v", _setitem((Ellipsis, [0])), "IndexPutBackward0"),
    ("y[:, [1, 2]] = v", _setitem((slice(None), [1, 2])), "IndexPutBackward0"),
    ("y[1:, [0, 2]] = v", _setitem((slice(1, None), [0, 2])), "CopySlices"),
    ("y[[0, 2], 1] = v", _setitem(([0, 2], 1)), "CopySlices"),
    ("y[1] = v", _setitem(1), "CopySlices"),
    ("y[1:] = v", _setitem(slice(1, None)), "CopySlices"),
    ("scatter src", lambda L, x: x.scatter(1, L.tensor([[0], [1], [2]]), x), "ScatterBackward0"),
    ("scatter value", lambda L, x: x.scatter(1, L.tensor([[0], [1], [2]]), 2.0), "ScatterBackward1"),
    ("masked_fill number", lambda L, x: x.masked_fill(x > 5, 2.0), "MaskedFillBackward0"),
    ("masked_fill 0-d tensor", lambda L, x: x.masked_fill(x > 5, L.tensor(2.0)), "MaskedFillBackward1"),
    ("index_fill number", lambda L, x: x.index_fill(0, L.tensor([1]), 2.0), "IndexFillBackward0"),
    ("index_fill 0-d tensor", lambda L, x: x.index_fill(0, L.tensor([1]), L.tensor(2.0)), "IndexFillBackward1"),
    ("take_along_dim", lambda L, x: L.take_along_dim(x, L.tensor([[1]]), 1), "GatherBackward0"),
]


def _name(L, f):
    x = _leaf(L, X)
    if f.__code__.co_argcount == 3:  # a setitem: the value
        return type(f(L, x, _leaf(L, 0.5)).grad_fn).__name__
    return type(f(L, x).grad_fn).__name__


@pytest.mark.parametrize("name,f,want", [pytest.param(*c, id=c[0]) for c in NAMES])
def test_node_name(name, f, want):
    assert _name(ember, f) == want


@needs_torch
@pytest.mark.parametrize("name,f,want", [pytest.param(*c, id=c[0]) for c in NAMES])
def test_node_name_matches_torch(name, f, want):
    assert _name(_torch, f) == want


def test_scatter_reduce_argument_has_no_derivative():
    """torch has no derivative for scatter(..., reduce=): the node says so and backward raises."""
    x = _leaf(ember, X)
    y = x.scatter(1, ember.tensor([[0], [1], [2]]), 2.0, reduce="add")
    assert type(y.grad_fn).__name__ == "NotImplemented"
    with pytest.raises(RuntimeError, match="derivative for aten::scatter is not implemented"):
        y.backward(ember.ones_like(y))


def test_setitem_value_needs_no_grad():
    """y[key] = plain tensor or number on a non-leaf: y's gradient is 0 where written."""
    x = _leaf(ember, [[1.0, 2.0], [3.0, 4.0]])
    y = x * 1
    y[[1, 1]] = ember.tensor([7.0, 8.0], dtype=ember.float64)
    y[0, [0]] = 3.0
    y.backward(ember.ones_like(y))
    assert x.grad.tolist() == [[0.0, 1.0], [0.0, 0.0]]


def test_setitem_on_leaf_raises():
    x = _leaf(ember, [1.0, 2.0])
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        x[[0]] = 3.0


def test_second_derivative_duplicates():
    """f = sum((x * x)[[0, 0]]) = 2 x0^2: df/dx0 = 4 x0, d2f/dx0^2 = 4."""
    x = _leaf(ember, [3.0, 5.0])
    y = (x * x)[[0, 0]]
    (g,) = ember.autograd.grad(y, x, ember.ones_like(y), create_graph=True)
    assert g.tolist() == [12.0, 0.0]
    (h,) = ember.autograd.grad(g, x, ember.ones_like(g))
    assert h.tolist() == [4.0, 0.0]


@pytest.mark.skipif("sum" not in ember._C._differentiable_ops(), reason="sum() has no formula yet")
def test_gradgradcheck_masked_fill_tensor_value():
    rng = np.random.default_rng(5)
    a, b = (ember.from_numpy(rng.uniform(0.5, 2.0, (2, 3))).requires_grad_() for _ in range(2))
    assert gradgradcheck(lambda a, b: (a * a).masked_fill(b > 1.2, (b * b)[0, 0]), (a, b))


def test_backward_repeats_no_warning():
    """The forward warns about a list read as a tuple and uint8 masks; its backward doesn't again."""
    import warnings
    x = _leaf(ember, X)
    with pytest.warns(UserWarning):
        y = x[[[0, 1], [2, 2]]]
        z = x[ember.tensor([1, 0, 1], dtype=ember.uint8)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ember.autograd.backward([y, z], [ember.ones_like(y), ember.ones_like(z)])
    assert x.grad.tolist() == [[1, 1, 2, 1], [0, 0, 1, 0], [1, 1, 1, 1]]
