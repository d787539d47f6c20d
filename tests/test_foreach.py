"""torch's list ops _foreach_norm / _foreach_mul_ (csrc/ops/foreach.c) and
the gradient clipping that runs on them: values against NumPy (float64
references), against torch when it is installed, the fast path's answers
independent of the thread count, and the per-tensor path for everything the
fast path does not take."""
import math

import numpy as np
import pytest

import ember

# sizes around the 8192-element chunks the parallel pass cuts
SIZES = [(0,), (1,), (7,), (8192,), (8193,), (3, 5000), (40000,), (2, 3, 4)]


def _np64(t):
    return t.to(ember.float64).numpy()


def _make(seed, dtype=ember.float32):
    g = np.random.default_rng(seed)
    return [ember.from_numpy(g.standard_normal(s).astype(np.float64)).to(dtype) for s in SIZES]


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64])
@pytest.mark.parametrize("ember_threads", [1, 2], indirect=True)
def test_norm2_matches_numpy(dtype, ember_threads):
    ts = _make(0, dtype)
    got = ember._foreach_norm(ts)
    assert isinstance(got, list) and len(got) == len(ts)
    for t, n in zip(ts, got):
        assert n.shape == () and n.dtype == dtype
        ref = np.sqrt(np.sum(_np64(t) ** 2))
        np.testing.assert_allclose(n.item(), ref, rtol=1e-6 if dtype == ember.float32 else 1e-13)


def test_norm_same_bits_for_one_and_two_threads():
    ts = _make(1)
    before = ember.get_num_threads()
    try:
        ember.set_num_threads(1)
        one = [n.item() for n in ember._foreach_norm(ts)]
        ember.set_num_threads(2)
        two = [n.item() for n in ember._foreach_norm(ts)]
    finally:
        ember.set_num_threads(before)
    assert one == two


@pytest.mark.parametrize("ord", [1.0, math.inf, -math.inf, 3.0, 0.0])
def test_other_orders_take_the_per_tensor_norm(ord):
    ts = [t for t in _make(2) if t.numel() > 0]
    for t, n in zip(ts, ember._foreach_norm(ts, ord)):
        np.testing.assert_allclose(n.item(), np.linalg.norm(_np64(t).ravel(), ord), rtol=1e-5)


def test_mixed_list_strided_half_and_dtype_argument():
    g = np.random.default_rng(3)
    a = g.standard_normal((6, 5))
    ts = [ember.from_numpy(a).to(ember.float32).t(),          # strided
          ember.from_numpy(a[0]).to(ember.float16),            # a half type
          ember.from_numpy(a[1]),                              # float64
          ember.from_numpy(a[2]).to(ember.float32)]
    got = ember._foreach_norm(ts)
    assert [n.dtype for n in got] == [ember.float32, ember.float16, ember.float64, ember.float32]
    refs = [np.linalg.norm(a), np.linalg.norm(a[0]), np.linalg.norm(a[1]), np.linalg.norm(a[2])]
    for n, r in zip(got, refs):
        np.testing.assert_allclose(n.item(), r, rtol=2e-3 if n.dtype == ember.float16 else 1e-6)
    wide = ember._foreach_norm(ts, 2, dtype=ember.float64)
    assert all(n.dtype == ember.float64 for n in wide)
    np.testing.assert_allclose([n.item() for n in wide[2:]], refs[2:], rtol=1e-6)


def test_norm_of_nonfinite_values():
    ts = [ember.tensor([1.0, float("inf")]), ember.tensor([float("nan"), 1.0]), ember.zeros(10000)]
    got = [n.item() for n in ember._foreach_norm(ts)]
    assert got[0] == math.inf and math.isnan(got[1]) and got[2] == 0.0


def test_bad_lists_raise_type_error():
    assert ember._foreach_norm([]) == []
    with pytest.raises(TypeError, match="Tensors"):
        ember._foreach_norm([ember.ones(2), 3.0])
    with pytest.raises(TypeError, match="Tensors"):
        ember._foreach_mul_([[1.0]], 2.0)
    with pytest.raises(RuntimeError, match="inf"):  # max of nothing: no identity
        ember._foreach_norm([ember.ones(2), ember.zeros(0)], math.inf)


@pytest.mark.parametrize("ember_threads", [1, 2], indirect=True)
def test_mul_by_number_and_zero_dim_tensor(ember_threads):
    ts = _make(4)
    refs = [_np64(t) for t in ts]
    versions = [t._version for t in ts]
    ember._foreach_mul_(ts, 0.25)
    ember._foreach_mul_(ts, ember.tensor(3.0))
    for t, r, v in zip(ts, refs, versions):
        np.testing.assert_array_equal(t.numpy(), (r.astype(np.float32) * np.float32(0.25) * np.float32(3.0)))
        assert t._version == v + 2


def test_mul_by_lists_and_on_other_dtypes():
    a = [ember.tensor([1.0, 2.0]), ember.tensor([3, 4]), ember.tensor([0.5], dtype=ember.float64)]
    ember._foreach_mul_(a, [2.0, 3, 4.0])
    assert a[0].tolist() == [2.0, 4.0] and a[1].tolist() == [9, 12] and a[2].tolist() == [2.0]
    b = [ember.ones(3), ember.ones(2, 2)]
    ember._foreach_mul_(b, [ember.tensor([1.0, 2.0, 3.0]), ember.full((2, 2), 5.0)])
    assert b[0].tolist() == [1.0, 2.0, 3.0] and b[1].tolist() == [[5.0, 5.0], [5.0, 5.0]]
    with pytest.raises(RuntimeError, match="has 2 tensors but 'other' has 1"):
        ember._foreach_mul_(b, [1.0])
    s = ember.arange(12.0).view(3, 4).t()  # strided: the per-tensor op
    ember._foreach_mul_([s], 2.0)
    np.testing.assert_array_equal(s.numpy(), (np.arange(12.0).reshape(3, 4) * 2).T)


def test_mul_keeps_autograd_rules():
    w = ember.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        ember._foreach_mul_([w], 2.0)
    with ember.no_grad():
        ember._foreach_mul_([w], 2.0)
    assert w.tolist() == [2.0, 2.0, 2.0]
    # a non-leaf: the write is recorded, so gradients flow through it
    x = ember.ones(4, requires_grad=True)
    y = x * 1.0
    ember._foreach_mul_([y], 3.0)
    y.sum().backward()
    assert x.grad.tolist() == [3.0] * 4


def test_clip_grad_norm_against_numpy():
    g = np.random.default_rng(5)
    params = [ember.nn.Parameter(ember.zeros(*s)) for s in [(300, 100), (100,), (9000,), (1,)]]
    grads = [g.standard_normal(p.shape) for p in params]
    for p, gr in zip(params, grads):
        p.grad = ember.from_numpy(gr).to(ember.float32)
    total = ember.nn.utils.clip_grad_norm_(params, 1.5)
    ref = np.sqrt(sum(np.sum(gr.astype(np.float32).astype(np.float64) ** 2) for gr in grads))
    np.testing.assert_allclose(total.item(), ref, rtol=1e-6)
    coef = np.float32(1.5) / (np.float32(ref) + np.float32(1e-6))
    for p, gr in zip(params, grads):
        np.testing.assert_allclose(p.grad.numpy(), gr.astype(np.float32) * coef, rtol=1e-6)


def test_against_torch(torch):
    g = np.random.default_rng(6)
    arrays = [g.standard_normal(s).astype(np.float32) for s in [(50, 40), (3,), (20000,)]]
    e = [ember.from_numpy(a.copy()) for a in arrays]
    t = [torch.from_numpy(a.copy()) for a in arrays]
    for ord in (2.0, 1.0, math.inf):
        np.testing.assert_allclose([n.item() for n in ember._foreach_norm(e, ord)],
                                   [n.item() for n in torch._foreach_norm(t, ord)], rtol=1e-6)
    ember._foreach_mul_(e, ember.tensor(0.3))
    torch._foreach_mul_(t, torch.tensor(0.3))
    for a, b in zip(e, t):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize("ember_threads", [1, 2], indirect=True)
def test_mul_of_a_buffer_listed_twice_scales_it_twice(ember_threads):
    x = ember.ones(50000)
    ember._foreach_mul_([x, x, x[:10000]], 3.0)  # one storage three times: 9 everywhere, 27 at the front
    got = x.numpy()
    assert (got[:10000] == 27).all() and (got[10000:] == 9).all()
    b = [ember.ones(3), ember.ones(2)]
    ember._foreach_mul_(b, True)
    assert b[0].tolist() == [1.0] * 3
    ember._foreach_mul_(b, False)
    assert b[1].tolist() == [0.0, 0.0]
