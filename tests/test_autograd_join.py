"""Gradients of joins, splits and rearrangements (csrc/autograd/derivatives_join.c)
where gradcheck says little: zero-size gradients of the empty tensors cat
skips, overlapping tensor_split pieces, repeat counts per index, diff past
the end, huge roll shifts, every rot90 residue, broadcast_tensors handing
inputs back, node names that depend on the call. Hand-computed values always
run; the same calls against torch when it is installed. The gradcheck cases
themselves are in tests/autograd_cases_join.py."""
import numpy as np
import pytest

import ember

try:
    import torch as _torch
except ImportError:
    _torch = None
needs_torch = pytest.mark.skipif(_torch is None, reason="torch not installed")
LIBS = [pytest.param(ember, id="ember"), pytest.param(_torch, id="torch", marks=needs_torch)]


def _t(L, v, grad=True):
    return L.tensor(v, dtype=L.float64, requires_grad=grad)


def _backward(L, out, seed=0):
    """out.backward with upstream 1, 2, 3, ... (each output of a tuple its own range)."""
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    gos, k = [], seed
    for o in outs:
        n = int(np.prod(tuple(o.shape)))
        gos.append(L.tensor(np.arange(k + 1, k + n + 1, dtype=np.float64).reshape(tuple(o.shape))))
        k += n
    L.autograd.backward(outs, gos)


def _g(x):
    return None if x.grad is None else np.asarray(x.grad.tolist(), np.float64).reshape(tuple(x.grad.shape))


# ---------------------------------------------------------------- cat family
@pytest.mark.parametrize("L", LIBS)
def test_cat_skipped_empty_gets_zero_size_gradient(L):
    x, e = _t(L, [[1.0, 2.0], [3.0, 4.0]]), _t(L, [])
    y = L.cat([e, x, e, x], 1)
    assert type(y.grad_fn).__name__ == "CatBackward0"
    _backward(L, y)  # upstream [[1..4], [5..8]]
    assert tuple(e.grad.shape) == (0,)
    np.testing.assert_array_equal(_g(x), [[1 + 3, 2 + 4], [5 + 7, 6 + 8]])


@pytest.mark.parametrize("L", LIBS)
def test_cat_of_only_empties(L):
    e = _t(L, [])
    y = L.cat([e, e])
    y.backward(L.ones_like(y))
    assert tuple(e.grad.shape) == (0,)


@pytest.mark.parametrize("L", LIBS)
def test_cat_int_part_and_many_inputs(L):
    xs = [_t(L, [float(i)]) for i in range(100)]  # more inputs than a formula's scratch holds
    y = L.cat(xs + [L.tensor([7])])
    _backward(L, y)
    assert [x.grad.tolist() for x in xs] == [[float(i + 1)] for i in range(100)]


@pytest.mark.parametrize("L", LIBS)
def test_stacks_hand(L):
    s, t = _t(L, 1.0), _t(L, 2.0)
    for f in (L.stack, L.hstack, L.vstack, L.dstack, L.column_stack):
        s.grad = t.grad = None
        _backward(L, f([s, t]))
        assert (s.grad.item(), t.grad.item()) == (1.0, 2.0), f
    a, b = _t(L, [1.0, 2.0, 3.0]), _t(L, [[1.0], [2.0], [3.0]])
    _backward(L, L.column_stack([a, b]))  # (3, 2): a is column 0
    np.testing.assert_array_equal(_g(a), [1, 3, 5])
    np.testing.assert_array_equal(_g(b), [[2], [4], [6]])


# -------------------------------------------------------------- tensor_split
@pytest.mark.parametrize("L", LIBS)
def test_tensor_split_overlapping_pieces_add(L):
    x = _t(L, [10.0, 11.0, 12.0, 13.0, 14.0])
    parts = x.tensor_split([4, 1])  # [0, 4), [4, 1) empty, [1, 5)
    assert [tuple(p.shape) for p in parts] == [(4,), (0,), (4,)]
    assert all(type(p.grad_fn).__name__ == "SliceBackward0" for p in parts)
    _backward(L, parts)  # upstream 1..4 and 5..8
    np.testing.assert_array_equal(_g(x), [1, 2 + 5, 3 + 6, 4 + 7, 8])


@pytest.mark.parametrize("L", LIBS)
def test_tensor_split_only_some_pieces_used(L):
    x = _t(L, [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    a, b, c = x.tensor_split(3, 1)
    (b * 2).backward(L.ones_like(b))
    np.testing.assert_array_equal(_g(x), [[0, 2, 0], [0, 2, 0]])


def test_tensor_split_tensor_indices_going_back_raises():
    """Indices given as a tensor are not kept by the node; pieces that overlap
    then can't be placed: a clear error (torch supports it), never a crash."""
    x = _t(ember, [1.0, 2.0, 3.0, 4.0])
    parts = x.tensor_split(ember.tensor([3, 1]))
    with pytest.raises(RuntimeError, match="increasing indices"):
        ember.autograd.backward(list(parts), [ember.ones_like(p) for p in parts])
    y = _t(ember, [1.0, 2.0, 3.0, 4.0])
    parts = y.tensor_split(ember.tensor([1, 3]))  # increasing: fine
    _backward(ember, parts)
    np.testing.assert_array_equal(_g(y), [1, 2, 3, 4])


# ------------------------------------------------------- repeat, interleave
@pytest.mark.parametrize("L", LIBS)
def test_repeat_and_tile_sum_the_copies(L):
    x = _t(L, [1.0, 2.0])
    y = x.repeat(2, 2)  # (2, 4): [[x, x], [x, x]]
    assert type(y.grad_fn).__name__ == "RepeatBackward0"
    _backward(L, y)  # [[1, 2, 3, 4], [5, 6, 7, 8]]
    np.testing.assert_array_equal(_g(x), [1 + 3 + 5 + 7, 2 + 4 + 6 + 8])
    z = _t(L, [[1.0], [2.0]])
    w = z.tile((3,))  # (2, 3)
    assert type(w.grad_fn).__name__ == "RepeatBackward0"
    _backward(L, w)
    np.testing.assert_array_equal(_g(z), [[6], [15]])
    x.grad = None
    y = x.repeat(0, 1)
    y.backward(L.ones_like(y))
    np.testing.assert_array_equal(_g(x), [0, 0])


@pytest.mark.parametrize("L", LIBS)
def test_repeat_interleave_counts_per_index(L):
    x = _t(L, [1.0, 2.0, 3.0])
    y = x.repeat_interleave(L.tensor([2, 0, 3]))
    assert type(y.grad_fn).__name__ == "IndexSelectBackward0"
    _backward(L, y)  # [1, 2 | | 3, 4, 5]
    np.testing.assert_array_equal(_g(x), [3, 0, 12])
    m = _t(L, [[1.0, 2.0], [3.0, 4.0]])
    y = m.repeat_interleave(L.tensor([1, 2, 1, 2], dtype=L.int16))  # dim None: flattened
    _backward(L, y)  # m.flatten() repeated 1, 2, 1, 2 times
    np.testing.assert_array_equal(_g(m), [[1, 2 + 3], [4, 5 + 6]])


@pytest.mark.parametrize("L", LIBS)
def test_repeat_interleave_one_count(L):
    m = _t(L, [[1.0, 2.0], [3.0, 4.0]])
    y = m.repeat_interleave(2, dim=1)
    assert type(y.grad_fn).__name__ == "ViewBackward0"
    _backward(L, y)  # [[1, 2, 3, 4], [5, 6, 7, 8]]
    np.testing.assert_array_equal(_g(m), [[3, 7], [11, 15]])
    m.grad = None
    y = m.repeat_interleave(L.tensor(3), dim=0)  # a one-element tensor: the same count for all
    assert type(y.grad_fn).__name__ == "IndexSelectBackward0"
    _backward(L, y)
    np.testing.assert_array_equal(_g(m), [[1 + 3 + 5, 2 + 4 + 6], [7 + 9 + 11, 8 + 10 + 12]])
    m.grad = None
    y = m.repeat_interleave(0)
    y.backward(L.ones_like(y))
    np.testing.assert_array_equal(_g(m), [[0, 0], [0, 0]])


# ----------------------------------------------------------------------- diff
@pytest.mark.parametrize("L", LIBS)
def test_diff_hand(L):
    x = _t(L, [1.0, 4.0, 9.0])
    y = x.diff()
    assert type(y.grad_fn).__name__ == "SubBackward0"
    y.backward(L.tensor([1.0, 10.0], dtype=L.float64))
    np.testing.assert_array_equal(_g(x), [-1, -9, 10])
    x.grad = None
    p, a = _t(L, [[0.5]]), _t(L, [[2.0, 3.0]])
    z = _t(L, [[1.0, 4.0]])
    y = L.diff(z, 2, 1, prepend=p, append=a)  # second differences of [.5, 1, 4, 2, 3]: length 3
    y.backward(L.tensor([[1.0, 10.0, 100.0]], dtype=L.float64))
    # adjoint (0, g) - (g, 0) twice: [1, 10, 100] -> [-1, -9, -90, 100] -> [1, 8, 81, -190, 100]
    np.testing.assert_array_equal(_g(p), [[1]])
    np.testing.assert_array_equal(_g(z), [[8, 81]])
    np.testing.assert_array_equal(_g(a), [[-190, 100]])


@pytest.mark.parametrize("L", LIBS)
def test_diff_past_the_end_and_order_zero(L):
    x, p = _t(L, [[1.0, 2.0, 3.0]]), _t(L, [[5.0]])
    y = x.diff(9, prepend=p)
    assert tuple(y.shape) == (1, 0)
    y.backward(L.ones_like(y))
    np.testing.assert_array_equal(_g(x), [[0, 0, 0]])
    np.testing.assert_array_equal(_g(p), [[0]])
    x.grad = p.grad = None
    y = L.diff(x, 0, prepend=p)  # a copy of x: prepend unused
    assert type(y.grad_fn).__name__ == "CopyBackwards"
    _backward(L, y)
    np.testing.assert_array_equal(_g(x), [[1, 2, 3]])
    assert p.grad is None


# -------------------------------------------------------- flip, roll, rot90
# torch's backward fails for shifts near the int64 limits (a SymInt it can't view)
@pytest.mark.parametrize("L,shift", [pytest.param(ember, s, id=f"ember{s}") for s in (1, -7, 2 ** 40 + 1, -(2 ** 63),
                                                                                   2 ** 63 - 1)] +
                         [pytest.param(_torch, s, id=f"torch{s}", marks=needs_torch) for s in (1, -7, 2 ** 40 + 1)])
def test_roll_huge_shifts(L, shift):
    x = _t(L, np.arange(10.0).reshape(2, 5).tolist())
    for dims in (None, 1):
        x.grad = None
        y = x.roll(shift) if dims is None else x.roll(shift, dims)
        assert type(y.grad_fn).__name__ == "RollBackward0"
        up = np.arange(10.0).reshape(2, 5) ** 2
        y.backward(L.tensor(up))
        if dims is None:
            want = np.roll(up.ravel(), -(shift % 10)).reshape(2, 5)
        else:
            want = np.roll(up, -(shift % 5), axis=1)
        np.testing.assert_array_equal(_g(x), want)


@pytest.mark.parametrize("L", LIBS)
def test_rot90_every_residue(L):
    up = np.arange(6.0).reshape(2, 3) * 1.5  # rot90(x, k) has shape (3, 2) for odd k
    for k in range(-6, 7):
        for dims in ((0, 1), (1, 0), (-1, -2)):
            x = _t(L, np.zeros((2, 3)).tolist())
            y = x.rot90(k, dims)
            assert type(y.grad_fn).__name__ == "Rot90Backward0"
            g = np.rot90(up, k, axes=dims) if k % 2 else up  # any upstream of y's shape
            y.backward(L.tensor(np.ascontiguousarray(g)))
            np.testing.assert_array_equal(_g(x), np.rot90(g, -k, axes=dims))


@pytest.mark.parametrize("L", LIBS)
def test_flips_and_moves_names(L):
    x = _t(L, [[1.0, 2.0], [3.0, 4.0]])
    for y in (x.flip(0), x.fliplr(), x.flipud(), x.flip(())):
        assert type(y.grad_fn).__name__ == "FlipBackward0"
    assert type(x.movedim(0, 1).grad_fn).__name__ == "PermuteBackward0"
    assert type(_t(L, 3.0).movedim(0, 0).grad_fn).__name__ == "AliasBackward0"
    y = x.unsqueeze(0).moveaxis((0, 1), (2, 0))
    _backward(L, y)
    np.testing.assert_array_equal(_g(x), np.moveaxis(np.arange(1.0, 5.0).reshape(tuple(y.shape)), (2, 0), (0, 1))[0])


# ---------------------------------------------------------- broadcasting
@pytest.mark.parametrize("L", LIBS)
def test_broadcast_tensors_hands_back_unchanged_inputs(L):
    x, v = _t(L, [[1.0], [2.0]]), _t(L, [1.0, 2.0, 3.0])
    a, b = L.broadcast_tensors(x, v)
    assert type(a.grad_fn).__name__ == type(b.grad_fn).__name__ == "ExpandBackward0"
    _backward(L, (a, b))  # [[1, 2, 3], [4, 5, 6]] and [[7, 8, 9], [10, 11, 12]]
    np.testing.assert_array_equal(_g(x), [[6], [15]])
    np.testing.assert_array_equal(_g(v), [17, 19, 21])
    y = x * 1
    (r,) = L.broadcast_tensors(y)
    assert r is y
    r2, r3 = L.broadcast_tensors(x, x)
    assert r2 is x and r3 is x and x.is_leaf and x.grad_fn is None


@pytest.mark.parametrize("L", LIBS)
@pytest.mark.parametrize("indexing", ["ij", "xy"])
def test_meshgrid_sums_over_the_copies(L, indexing):
    a, s, b = _t(L, [1.0, 2.0]), _t(L, 5.0), _t(L, [1.0, 2.0, 3.0])
    grids = L.meshgrid(a, s, b, indexing=indexing)
    assert all(type(g.grad_fn).__name__ == "ExpandBackward0" for g in grids)
    up = np.arange(1.0, 7.0)
    shape = tuple(grids[0].shape)  # ij: (2, 1, 3), xy: (1, 2, 3)
    L.autograd.backward(list(grids), [L.tensor(up.reshape(shape) * (i + 1)) for i in range(3)])
    u = up.reshape(2, 3)  # both layouts hold the (a, b) grid in the same element order
    np.testing.assert_array_equal(_g(a), u.sum(1))
    assert s.grad.item() == 2 * up.sum()
    np.testing.assert_array_equal(_g(b), 3 * u.sum(0))


# -------------------------------------------------------- second order
@pytest.mark.parametrize("L", LIBS)
def test_second_derivatives_hand(L):
    """d/dx of the gradient of sum(w * op(x * x)) is 2 w' where w' is w
    brought back by the op's adjoint: checks create_graph through the formulas."""
    x = _t(L, [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    w = np.arange(1.0, 100.0)
    ops = [lambda t: L.cat([t, t], 1), lambda t: L.stack([t, t * 0], 0), lambda t: t.repeat(2, 1),
           lambda t: t.flip(1), lambda t: t.roll(1, 1), lambda t: t.rot90(1), lambda t: t.tile((1, 2))]
    for op in ops:
        y = op(x * x)
        ww = L.tensor(w[:int(np.prod(tuple(y.shape)))].reshape(tuple(y.shape)))
        (g,) = L.autograd.grad(y, x, ww, create_graph=True)
        (h,) = L.autograd.grad(g, x, L.ones_like(g))
        np.testing.assert_allclose(h.detach().numpy(), (g / x).detach().numpy(), rtol=1e-12)


@needs_torch
def test_second_derivatives_match_torch():
    rng = np.random.default_rng(3)
    xv, uv = rng.uniform(-1, 1, (3, 4)), rng.uniform(-1, 1, (3, 4))
    fns = [lambda L, t: L.cat([t * t, t], 0), lambda L, t: L.hstack([t * t, t]),
           lambda L, t: (t * t).roll((1, 2), (0, 1)), lambda L, t: (t * t).repeat_interleave(3, dim=0),
           lambda L, t: L.diff(t * t, 2, prepend=t), lambda L, t: L.meshgrid((t * t)[0], t[1], indexing="xy")[0],
           lambda L, t: (t * t).tensor_split([3, 1], 1)[2]]
    for f in fns:
        res = []
        for L in (ember, _torch):
            x = L.tensor(xv, requires_grad=True)
            y = f(L, x)
            up = L.tensor(np.resize(uv, tuple(y.shape)))
            (g,) = L.autograd.grad(y, x, up, create_graph=True)
            (h,) = L.autograd.grad(g, x, L.tensor(uv))
            res.append((g.detach().numpy(), h.detach().numpy()))
        np.testing.assert_allclose(res[0][0], res[1][0], rtol=1e-12)
        np.testing.assert_allclose(res[0][1], res[1][1], rtol=1e-12)


# ------------------------------------------------------ split / chunk / unbind
@pytest.mark.parametrize("L", LIBS)
@pytest.mark.parametrize("how", ["split", "chunk", "unbind", "split_sizes"])
def test_every_piece_used_fills_the_whole_gradient(L, how):
    """With a gradient for every piece the input's gradient is assembled
    without zeroing first: every element must still come from a piece. A
    NaN-filled block is freed first so that a recycled buffer would show."""
    rng = np.random.default_rng(4)
    x_np = rng.standard_normal((6, 96))
    L.full((6, 96), float("nan"), dtype=L.float64).sum()  # a NaN block back in the cache
    x = L.tensor(x_np, requires_grad=True)
    pieces = {"split": lambda: x.split(32, 1), "chunk": lambda: x.chunk(3, 1),
              "unbind": lambda: x.unbind(0), "split_sizes": lambda: x.split([10, 50, 36], 1)}[how]()
    weights = [rng.standard_normal(tuple(p.shape)) for p in pieces]
    loss = sum((p * L.tensor(w)).sum() for p, w in zip(pieces, weights))
    loss.backward()
    ref = np.stack(weights, 0) if how == "unbind" else np.concatenate(weights, 1)
    np.testing.assert_array_equal(_g(x), ref)


@pytest.mark.parametrize("L", LIBS)
@pytest.mark.parametrize("how", ["split", "chunk", "unbind"])
@pytest.mark.parametrize("every", [True, False])
def test_many_pieces_backward(L, how, every):
    """Hundreds of pieces (a recurrent layer unbinds its sequence into steps):
    each piece's temporaries are released as the gradient is assembled, so the
    count is not limited; with every=False some pieces get no gradient (zeros)."""
    rng = np.random.default_rng(5)
    x_np = rng.standard_normal((300, 3))
    x = L.tensor(x_np, requires_grad=True)
    pieces = {"split": lambda: x.split(1, 0), "chunk": lambda: x.chunk(300, 0), "unbind": lambda: x.unbind(0)}[how]()
    assert len(pieces) == 300
    ref = np.zeros((300, 3))
    loss = 0
    for k, p in enumerate(pieces):
        if every or k % 3:
            loss = loss + (p * p).sum()
            ref[k] = 2 * x_np[k]
    (g,) = L.autograd.grad(loss, x, create_graph=True)
    np.testing.assert_allclose(_g_t(g), ref, rtol=1e-12)
    g.sum().backward()  # through the assembled gradient again (create_graph)
    np.testing.assert_allclose(_g(x), (ref != 0) * 2.0, rtol=1e-12)


def _g_t(t):
    return t.detach().numpy()
