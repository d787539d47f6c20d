"""The autograd engine with torch's semantics: accumulation, retain_graph,
version counters, in-place rules, backward/grad arguments, grad modes,
hooks, autograd.Function, double backward, and no leaks over a long
training loop.

Most tests take the library as the fixture `L` (tests/conftest.py) and run on ember and, when
it is installed, on torch too: the expected values are computed by hand (or
by finite differences), and the torch run shows the expectations are
torch's. Error messages are matched on the words torch and ember share.
"""
import gc
import resource
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import ember

try:
    import torch as _torch
except ImportError:
    _torch = None


@pytest.fixture(autouse=True)
def _grad_mode_enabled_after_each_test():
    """A failing test must not leave grad mode off for the next ones."""
    yield
    for lib in (ember, _torch):
        if lib is not None and not lib.is_grad_enabled():
            lib.set_grad_enabled(True)
            pytest.fail(f"{lib.__name__}: grad mode left disabled")


def T(L, v, grad=True):
    return L.tensor(v, dtype=L.float64, requires_grad=grad)


def C(L, v):
    return L.tensor(v, dtype=L.float64)


def lst(t):
    return t.detach().tolist()


def close(a, b, rtol=1e-12, atol=1e-12):
    np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64), rtol=rtol, atol=atol)


SECOND_TIME = "backward through the graph a second time"
MODIFIED = "modified by an inplace operation"


# ---------------------------------------------------------------------------
# accumulation, retain_graph, freeing saved tensors
def test_grad_accumulates_across_backward_calls(L):
    x = T(L, [1.0, 2.0, 3.0])
    for _ in range(3):
        (x * x).backward(C(L, [1.0, 1.0, 1.0]))
    assert lst(x.grad) == [6.0, 12.0, 18.0]
    x.grad = None
    (x * 3).backward(C(L, [1.0, 2.0, 3.0]))
    assert lst(x.grad) == [3.0, 6.0, 9.0]
    x.grad.zero_()
    (x * 3).backward(C(L, [1.0, 1.0, 1.0]))
    assert lst(x.grad) == [3.0, 3.0, 3.0]


def test_retain_graph_then_second_backward_raises(L):
    x = T(L, [0.5, -1.0])
    y = x.exp()
    g = C(L, [1.0, 2.0])
    y.backward(g, retain_graph=True)
    y.backward(g)
    close(lst(x.grad), 2 * np.exp([0.5, -1.0]) * [1.0, 2.0])
    with pytest.raises(RuntimeError, match=SECOND_TIME):
        y.backward(g)
    z = (x * x).sin()
    L.autograd.grad(z, x, g)
    with pytest.raises(RuntimeError, match=SECOND_TIME):
        L.autograd.grad(z, x, g)


def test_second_backward_without_saved_tensors_is_allowed(L):
    """torch only complains when a freed saved tensor is needed: add saves nothing."""
    x = T(L, [1.0, 2.0])
    y = x + 1
    y.backward(C(L, [1.0, 1.0]))
    y.backward(C(L, [1.0, 1.0]))
    assert lst(x.grad) == [2.0, 2.0]


def test_fan_out_and_diamond(L):
    """y = x^2 + x feeds two branches of z = sin(y) * y: dz/dx = (cos y * y + sin y)(2x + 1)."""
    xv = np.array([0.3, -1.2, 2.0])
    x = T(L, xv.tolist())
    y = x * x + x
    z = y.sin() * y
    z.backward(C(L, [1.0, 1.0, 1.0]))
    yv = xv * xv + xv
    close(lst(x.grad), (np.cos(yv) * yv + np.sin(yv)) * (2 * xv + 1))


def test_broadcast_gradients_are_summed_to_the_input_shape(L):
    a = T(L, [[1.0], [2.0], [3.0]])       # (3, 1)
    b = T(L, [10.0, 20.0, 30.0, 40.0])    # (4,)
    c = a * b + b                          # (3, 4)
    c.backward(L.ones(3, 4, dtype=L.float64))
    assert lst(a.grad) == [[100.0], [100.0], [100.0]]
    assert lst(b.grad) == [9.0, 9.0, 9.0, 9.0]           # sum(a) + 3


def test_grad_dtype_follows_the_leaf(L):
    x = L.tensor([1.0, 2.0], dtype=L.float32, requires_grad=True)
    w = T(L, [3.0, 4.0])
    y = x.double() * 2 + x * w             # float64 result
    y.backward(C(L, [1.0, 1.0]))
    assert x.grad.dtype == L.float32 and w.grad.dtype == L.float64
    assert lst(x.grad) == [5.0, 6.0] and lst(w.grad) == [1.0, 2.0]


def test_grad_does_not_alias_the_callers_gradient(L):
    x = T(L, [1.0, 2.0])
    g = C(L, [1.0, 1.0])
    x.clone().backward(g)
    g.add_(5)
    assert lst(x.grad) == [1.0, 1.0]
    x.grad.mul_(3)  # and the grad is the user's to modify
    assert lst(g) == [6.0, 6.0]


def test_multiple_roots(L):
    x = T(L, [1.0, 2.0])
    y1, y2 = x * 2, x * x
    L.autograd.backward([y1, y2], [C(L, [1.0, 1.0]), C(L, [10.0, 100.0])])
    assert lst(x.grad) == [22.0, 402.0]


def test_unused_outputs_of_multi_output_ops_get_zero_gradient(L):
    x = T(L, [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    a, b, c = x.unbind()
    (b * 3).backward(C(L, [1.0, 2.0]))
    assert lst(x.grad) == [[0.0, 0.0], [3.0, 6.0], [0.0, 0.0]]


def test_deep_graph_backward_and_free_do_not_crash():
    """300,000 chained nodes: the engine and the nodes' deallocation must not recurse on the C stack."""
    code = textwrap.dedent("""
        import ember
        x = ember.tensor([1.0], dtype=ember.float64, requires_grad=True)
        y = x
        for _ in range(300_000):
            y = y + 1
        y.backward()
        assert x.grad.tolist() == [1.0]
        del y
        y = x
        for _ in range(300_000):
            y = y * 1
        del y   # never run backward: the whole graph is freed at once
        print("ok")
    """)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "ok" in p.stdout, f"rc={p.returncode} {p.stderr[-500:]}"


# ---------------------------------------------------------------------------
# version counters
def test_inplace_after_save_raises(L):
    a = T(L, [1.0, 2.0])
    y = a * 1
    z = y.sin()          # saves y
    y.add_(1)
    with pytest.raises(RuntimeError, match=MODIFIED + r".*is at version 1; expected version 0"):
        z.backward(C(L, [1.0, 1.0]))


def test_inplace_on_saved_output_raises(L):
    a = T(L, [1.0, 2.0])
    z = a.exp()          # saves its output
    z.add_(1)
    with pytest.raises(RuntimeError, match=MODIFIED):
        z.backward(C(L, [1.0, 1.0]))


def test_inplace_through_a_view_or_detach_raises(L):
    a = T(L, [[1.0, 2.0], [3.0, 4.0]])
    y = a * 1
    z = y * y
    y[0].mul_(2)
    with pytest.raises(RuntimeError, match=MODIFIED):
        z.backward(L.ones(2, 2, dtype=L.float64))
    y = a * 1
    z = y.sin()          # saves y
    y.detach().zero_()   # detach() shares the version counter
    with pytest.raises(RuntimeError, match=MODIFIED):
        z.backward(L.ones(2, 2, dtype=L.float64))


def test_inplace_on_unsaved_tensor_is_fine(L):
    a = T(L, [1.0, 2.0])
    y = a * 2
    z = y + 1            # add saves nothing
    y.add_(1)
    z.backward(C(L, [1.0, 1.0]))
    assert lst(a.grad) == [2.0, 2.0]


def test_version_counter_is_shared_by_views(L):
    x = L.ones(2, 3)
    v = x[0]
    assert x._version == 0
    x.add_(1)
    assert (x._version, v._version) == (1, 1)
    v.mul_(2)
    assert (x._version, v._version) == (2, 2)
    x.detach().zero_()
    assert x._version == 3


# ---------------------------------------------------------------------------
# in-place rules
LEAF_INPLACE = "a leaf Variable that requires grad is being used in an in-place operation"


def test_inplace_on_leaf_requiring_grad_raises(L):
    a = T(L, [1.0, 2.0, 3.0])
    for f in (lambda: a.add_(1), lambda: a.sin_(), lambda: a.copy_(C(L, [0.0, 0.0, 0.0])),
              lambda: a.zero_()):
        with pytest.raises(RuntimeError, match=LEAF_INPLACE):
            f()
    with pytest.raises(RuntimeError, match="view of a leaf Variable that requires grad"):
        a[1:].mul_(2)
    assert lst(a) == [1.0, 2.0, 3.0] and a._version == 0


def test_inplace_on_leaf_is_allowed_under_no_grad(L):
    a = T(L, [1.0, 2.0, 3.0])
    with L.no_grad():
        a.mul_(2)
        a[0].add_(1)
    assert lst(a) == [3.0, 4.0, 6.0]
    assert a.is_leaf and a.requires_grad and a.grad_fn is None
    (a * a).backward(C(L, [1.0, 1.0, 1.0]))
    assert lst(a.grad) == [6.0, 8.0, 12.0]


def test_out_argument_with_grad_raises(L):
    a = T(L, [1.0, 2.0])
    with pytest.raises(RuntimeError, match="out=... arguments don't support automatic differentiation"):
        L.add(a, a, out=L.empty(2, dtype=L.float64))


def test_inplace_into_plain_tensor_joins_the_graph(L):
    a = T(L, [1.0, 2.0])
    z = L.zeros(2, dtype=L.float64)
    z.add_(a * a)
    assert z.requires_grad and not z.is_leaf and type(z.grad_fn).__name__ == "AddBackward0"
    (z * 3).backward(C(L, [1.0, 1.0]))
    assert lst(a.grad) == [6.0, 12.0]


def test_inplace_on_view_of_nonleaf_by_hand(L):
    """base = 2a; base[1] *= b: d base/da is 2 off row 1 and 2b on it; d/db = 2 a[1]."""
    a = T(L, [[1.0, 2.0], [3.0, 4.0]])
    b = T(L, [5.0, 7.0])
    base = a * 2
    v = base[1]
    v.mul_(b)
    assert lst(base) == [[2.0, 4.0], [30.0, 56.0]]
    assert type(base.grad_fn).__name__ == "CopySlices"
    assert type(v.grad_fn).__name__ == "AsStridedBackward0"
    base.backward(C(L, [[1.0, 10.0], [100.0, 1000.0]]))
    assert lst(a.grad) == [[2.0, 20.0], [1000.0, 14000.0]]
    assert lst(b.grad) == [600.0, 8000.0]


def test_inplace_on_view_then_use_the_view(L):
    """The view written in place carries the new history: v = base[:, 0] (after *= 3)."""
    a = T(L, [[1.0, 2.0], [3.0, 4.0]])
    base = a * 1
    v = base[:, 0]
    v.mul_(3)
    (v * v).backward(C(L, [1.0, 1.0]))   # d/da[i,0] (3 a[i,0])^2 = 18 a[i,0]
    assert lst(a.grad) == [[18.0, 0.0], [54.0, 0.0]]


def test_transposed_view_zeroed(L):
    a = T(L, [[1.0, 2.0], [3.0, 4.0]])
    base = a * 1
    base.t()[0].zero_()                   # column 0 of base
    base.backward(C(L, [[1.0, 1.0], [1.0, 1.0]]))
    assert lst(a.grad) == [[0.0, 1.0], [0.0, 1.0]]


def test_view_of_plain_tensor_written_from_grad_source(L):
    s = T(L, [1.0, 2.0, 3.0])
    base = L.zeros(2, 3, dtype=L.float64)
    base[1].copy_(s * 2)
    assert base.requires_grad and type(base.grad_fn).__name__ == "CopySlices"
    (base * C(L, [[1.0, 1.0, 1.0], [10.0, 20.0, 30.0]])).backward(L.ones(2, 3, dtype=L.float64))
    assert lst(s.grad) == [20.0, 40.0, 60.0]


def test_view_taken_before_base_is_modified_in_place(L):
    """torch regenerates a view's history after its base changes in place:
    v = base[0] then base *= 2 makes v's gradient 2 on row 0."""
    a = T(L, [[1.0, 2.0], [3.0, 4.0]])
    base = a * 1
    v = base[0]
    base.mul_(2)
    assert lst(v) == [2.0, 4.0]
    (v * 1).backward(C(L, [1.0, 1.0]))
    assert lst(a.grad) == [[2.0, 2.0], [0.0, 0.0]]


# ---------------------------------------------------------------------------
# backward() arguments
def test_nonscalar_backward_needs_gradient(L):
    x = T(L, [1.0, 2.0])
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs"):
        (x * 2).backward()
    (x[1:] * 3).backward()               # one element: implicit 1
    (x[0] * 2).backward()                # 0-d
    assert lst(x.grad) == [2.0, 3.0]


def test_gradient_shape_mismatch_raises(L):
    x = T(L, [1.0, 2.0, 3.0])
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        (x * 2).backward(C(L, [1.0, 1.0]))
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        L.autograd.grad(x * 2, x, L.ones(3, 1, dtype=L.float64))


def test_backward_of_tensor_without_grad_raises(L):
    with pytest.raises(RuntimeError, match="does not require grad and does not have a grad_fn"):
        L.ones(2).backward(L.ones(2))


def test_backward_inputs(L):
    x, y = T(L, [1.0, 2.0]), T(L, [3.0, 4.0])
    (x * y).backward(C(L, [1.0, 1.0]), inputs=[x])
    assert lst(x.grad) == [3.0, 4.0] and y.grad is None
    h = x * 2
    (h * y).backward(C(L, [1.0, 10.0]), inputs=[h])  # a non-leaf input gets its .grad
    assert lst(h.grad) == [3.0, 40.0]
    assert lst(x.grad) == [3.0, 4.0] and y.grad is None
    with pytest.raises(RuntimeError, match="cannot be empty"):
        (x * y).backward(C(L, [1.0, 1.0]), inputs=[])


# ---------------------------------------------------------------------------
# autograd.grad
def test_grad_returns_without_accumulating(L):
    x = T(L, [1.0, 2.0])
    h = x * x
    z = h * 3
    gx, gh = L.autograd.grad(z, [x, h], C(L, [1.0, 10.0]))
    assert lst(gx) == [6.0, 120.0] and lst(gh) == [3.0, 30.0]
    assert x.grad is None


def test_grad_allow_unused(L):
    x, y = T(L, [1.0]), T(L, [2.0])
    z = x * 2
    gx, gy = L.autograd.grad(z, [x, y], allow_unused=True, retain_graph=True)
    assert lst(gx) == [2.0] and gy is None
    gx, gy = L.autograd.grad(z, [x, y], materialize_grads=True, retain_graph=True)
    assert lst(gy) == [0.0]
    with pytest.raises(RuntimeError, match="appears to not have been used in the graph"):
        L.autograd.grad(z, [x, y])


def test_grad_of_input_without_grad_raises(L):
    x = T(L, [1.0])
    with pytest.raises(RuntimeError, match="does not require grad"):
        L.autograd.grad(x * 2, [L.ones(1, dtype=L.float64)])


def test_create_graph(L):
    xv = np.array([0.5, -1.5])
    x = T(L, xv.tolist())
    y = x ** 3
    (g,) = L.autograd.grad(y, x, C(L, [1.0, 1.0]), create_graph=True)
    assert g.requires_grad and g.grad_fn is not None
    close(lst(g), 3 * xv ** 2)
    (h,) = L.autograd.grad(g, x, C(L, [1.0, 1.0]))
    close(lst(h), 6 * xv)
    # backward(create_graph=True): .grad itself is differentiable
    x2 = T(L, xv.tolist())
    (x2 * x2 * x2.sin()).backward(C(L, [1.0, 1.0]), create_graph=True)
    assert x2.grad.requires_grad
    g2 = x2.grad
    x2.grad = None
    g2.backward(C(L, [1.0, 1.0]))       # d/dx (2x sin x + x^2 cos x)
    close(lst(x2.grad), 2 * np.sin(xv) + 4 * xv * np.cos(xv) - xv ** 2 * np.sin(xv))


# ---------------------------------------------------------------------------
# grad modes
def test_no_grad_context_and_decorators(L):
    x = T(L, [1.0])
    with L.no_grad():
        assert not L.is_grad_enabled()
        y = x * 2
    assert L.is_grad_enabled()
    assert not y.requires_grad and y.grad_fn is None and y.is_leaf

    @L.no_grad()
    def f(t):
        """doc"""
        return t * 2

    @L.no_grad
    def g(t):
        return t * 2
    assert not f(x).requires_grad and not g(x).requires_grad and f.__doc__ == "doc"
    assert (x * 2).requires_grad


def test_enable_grad_inside_no_grad(L):
    x = T(L, [1.0])

    @L.enable_grad()
    def f(t):
        return t * 2
    with L.no_grad():
        with L.enable_grad():
            assert L.is_grad_enabled()
            assert (x * 2).requires_grad
        assert not L.is_grad_enabled()
        assert f(x).requires_grad
        assert not L.is_grad_enabled()


def test_set_grad_enabled_call_context_decorator(L):
    x = T(L, [1.0])
    try:
        L.set_grad_enabled(False)      # a plain call takes effect at once
        assert not L.is_grad_enabled() and not (x * 2).requires_grad
    finally:
        L.set_grad_enabled(True)
    with L.set_grad_enabled(False):
        assert not (x * 2).requires_grad
        with L.set_grad_enabled(True):
            assert (x * 2).requires_grad
    assert L.is_grad_enabled()

    @L.set_grad_enabled(False)
    def f(t):
        return t * 2
    assert L.is_grad_enabled()          # decorating doesn't change the mode
    assert not f(x).requires_grad and L.is_grad_enabled()


def test_grad_mode_restored_after_exception(L):
    with pytest.raises(ValueError):
        with L.no_grad():
            raise ValueError
    assert L.is_grad_enabled()

    @L.no_grad()
    def boom():
        raise KeyError
    with pytest.raises(KeyError):
        boom()
    assert L.is_grad_enabled()


def test_no_grad_on_generator(L):
    x = T(L, [1.0])

    @L.no_grad()
    def gen():
        for _ in range(2):
            yield (x * 2).requires_grad, L.is_grad_enabled()
    it = gen()
    try:
        assert next(it) == (False, False)
        assert L.is_grad_enabled()            # the caller's mode between steps
        assert next(it) == (False, False)
    finally:
        it.close()


def test_no_grad_on_generator_methods_and_partials(L):
    """Decorated generator methods and partials of generators are generators
    too (each step under the mode); plain functions stay plain."""
    import functools

    class Box:
        @L.no_grad()
        def gen(self):
            yield L.is_grad_enabled()

    def g(a):
        yield a, L.is_grad_enabled()

    assert list(Box().gen()) == [False]
    assert list(L.no_grad()(functools.partial(g, 3))()) == [(3, False)]
    assert L.no_grad()(lambda: L.is_grad_enabled())() is False
    assert L.enable_grad()(Box().gen)  # a bound method is accepted


def test_inference_mode(L):
    x = T(L, [1.0, 2.0])
    with L.inference_mode():
        assert L.is_inference_mode_enabled() and not L.is_grad_enabled()
        t = L.ones(2, dtype=L.float64)
        y = x * 2
    assert not L.is_inference_mode_enabled() and L.is_grad_enabled()
    assert t.is_inference() and not t.requires_grad and not y.requires_grad
    assert not x.is_inference()

    @L.inference_mode()
    def f(u):
        return u * 2
    assert f(x).is_inference()
    with L.inference_mode(False):
        assert L.is_grad_enabled() and (x * 2).requires_grad


def test_inference_tensors_cannot_be_saved_for_backward(L):
    with L.inference_mode():
        t = L.ones(2, dtype=L.float64)
    x = T(L, [1.0, 2.0])
    with pytest.raises(RuntimeError, match="Inference tensors cannot be saved for backward"):
        x * t                              # mul saves t
    (x + t).backward(C(L, [1.0, 1.0]))    # add saves nothing
    assert lst(x.grad) == [1.0, 1.0]
    with pytest.raises(RuntimeError, match="Inplace update to inference tensor outside InferenceMode"):
        t.add_(1)


def test_inference_tensor_cannot_require_grad_outside_inference_mode(L):
    with L.inference_mode():
        t = L.ones(2, dtype=L.float64)
    with pytest.raises(RuntimeError, match="inference tensor outside InferenceMode"):
        t.requires_grad_()


def test_grad_mode_is_thread_local(L):
    seen = {}

    def worker(key):
        seen[key] = L.is_grad_enabled()
        with L.no_grad():
            seen[key + " inside"] = L.is_grad_enabled()

    with L.no_grad():
        th = threading.Thread(target=worker, args=("new thread",))
        th.start()
        th.join()
        assert not L.is_grad_enabled()     # the thread's no_grad didn't touch ours
    assert seen == {"new thread": True, "new thread inside": False}
    with L.inference_mode():
        th = threading.Thread(target=lambda: seen.setdefault("inf", L.is_inference_mode_enabled()))
        th.start()
        th.join()
    assert seen["inf"] is False


# ---------------------------------------------------------------------------
# leaves, requires_grad, the graph's structure
def test_requires_grad_and_is_leaf(L):
    x = L.zeros(2, dtype=L.float64, requires_grad=True)
    assert x.requires_grad and x.is_leaf
    plain = L.ones(2, dtype=L.float64)
    assert plain.is_leaf and not plain.requires_grad
    assert plain.requires_grad_() is plain and plain.requires_grad
    plain.requires_grad_(False)
    assert not plain.requires_grad
    y = x * 2
    assert not y.is_leaf and y.requires_grad
    assert (plain * 2).is_leaf                  # no grad: results are leaves
    y.requires_grad_(True)                      # no-op on a non-leaf requiring grad
    with pytest.raises(RuntimeError, match="only change requires_grad flags of leaf variables"):
        y.requires_grad_(False)
    with pytest.raises(RuntimeError, match="only Tensors of floating point"):
        L.ones(2, dtype=L.int64).requires_grad_()
    assert not (x > 0).requires_grad            # comparisons are not differentiable


def test_next_functions(L):
    a, b = T(L, [1.0]), T(L, [2.0])
    c = C(L, [3.0])
    z = a * b + c
    assert type(z.grad_fn).__name__ == "AddBackward0" and z.grad_fn.name() == "AddBackward0"
    (mul, k0), (none, k1) = z.grad_fn.next_functions
    assert type(mul).__name__ == "MulBackward0" and none is None and (k0, k1) == (0, 0)
    (acc_a, _), (acc_b, _) = mul.next_functions
    assert type(acc_a).__name__ == "AccumulateGrad" and acc_a.variable is a and acc_b.variable is b
    sq = a * a
    assert sq.grad_fn.next_functions[0][0] is sq.grad_fn.next_functions[1][0]  # one accumulator per leaf
    u = T(L, [[1.0, 2.0], [3.0, 4.0]]).unbind()
    s = u[0] + u[1]
    (n0, i0), (n1, i1) = s.grad_fn.next_functions
    assert n0 is n1 and type(n0).__name__ == "UnbindBackward0" and (i0, i1) == (0, 1)


def test_detach(L):
    x = T(L, [1.0, 2.0])
    y = x * 2
    d = y.detach()
    assert not d.requires_grad and d.grad_fn is None and d.is_leaf
    d[0] = 10.0                                  # shares memory
    assert lst(y) == [10.0, 4.0]


def test_detach_inplace(L):
    x = T(L, [1.0, 2.0])
    y = x * 2
    assert y.detach_() is y
    assert y.is_leaf and not y.requires_grad and y.grad_fn is None
    z = (x * 2)[:1]
    with pytest.raises(RuntimeError, match="Can't detach views in-place"):
        z.detach_()


def test_grad_setter(L):
    x = T(L, [1.0, 2.0])
    x.grad = C(L, [5.0, 6.0])
    (x * 1).backward(C(L, [1.0, 1.0]))
    assert lst(x.grad) == [6.0, 7.0]
    x.grad = None
    assert x.grad is None
    with pytest.raises(RuntimeError):
        x.grad = C(L, [1.0, 2.0, 3.0])


# ---------------------------------------------------------------------------
# retain_grad
def test_retain_grad(L):
    x = T(L, [1.0, 2.0])
    h = x * 3
    k = h * 2
    h.retain_grad()
    assert h.retains_grad and not x.retains_grad and not k.retains_grad
    (h * h).backward(C(L, [1.0, 10.0]), retain_graph=True)
    assert lst(h.grad) == [6.0, 120.0]
    assert k.grad is None
    (h * h).backward(C(L, [1.0, 10.0]))
    assert lst(h.grad) == [12.0, 240.0]          # accumulates like a leaf's
    x.retain_grad()                               # no-op on a leaf
    assert not x.retains_grad
    with pytest.raises(RuntimeError, match="retain_grad on Tensor that has requires_grad=False"):
        L.ones(2).retain_grad()


# ---------------------------------------------------------------------------
# hooks
def test_hook_on_leaf_modifies_grad_and_is_removable(L):
    x = T(L, [1.0, 2.0])
    seen = []
    h = x.register_hook(lambda g: seen.append(lst(g)) or g * 10)
    (x * x).backward(C(L, [1.0, 1.0]))
    assert seen == [[2.0, 4.0]] and lst(x.grad) == [20.0, 40.0]
    h.remove()
    x.grad = None
    (x * x).backward(C(L, [1.0, 1.0]))
    assert lst(x.grad) == [2.0, 4.0] and len(seen) == 1


def test_hook_on_nonleaf_changes_what_flows_upstream(L):
    x = T(L, [1.0, 2.0])
    h = x * x
    calls = []
    h.register_hook(lambda g: g + 1)
    h.register_hook(lambda g: calls.append(lst(g)) or g * 10)  # runs second: sees g + 1
    h.register_hook(lambda g: None)                             # None: unchanged
    (h * 3).backward(C(L, [1.0, 1.0]))
    assert calls == [[4.0, 4.0]]
    assert lst(x.grad) == [80.0, 160.0]           # 2x * (3 + 1) * 10


def test_hook_also_runs_for_autograd_grad(L):
    x = T(L, [1.0, 2.0])
    h = x * 2
    h.register_hook(lambda g: g * 0.5)
    (gx,) = L.autograd.grad(h * h, x, C(L, [1.0, 1.0]))
    assert lst(gx) == [4.0, 8.0]


def test_hook_errors(L):
    with pytest.raises(RuntimeError, match="cannot register a hook on a tensor that doesn't require gradient"):
        L.ones(2).register_hook(lambda g: g)
    x = T(L, [1.0, 2.0])
    x.register_hook(lambda g: 3)
    with pytest.raises(TypeError):
        (x * 2).backward(C(L, [1.0, 1.0]))
    y = T(L, [1.0, 2.0])
    y.register_hook(lambda g: L.ones(3, dtype=L.float64))
    with pytest.raises(RuntimeError):
        (y * 2).backward(C(L, [1.0, 1.0]))


def test_hook_exception_propagates(L):
    x = T(L, [1.0])

    def bad(g):
        raise ZeroDivisionError("from the hook")
    x.register_hook(bad)
    with pytest.raises(ZeroDivisionError, match="from the hook"):
        (x * 2).backward()


def test_post_accumulate_grad_hook(L):
    x = T(L, [1.0, 2.0])
    seen = []
    h = x.register_post_accumulate_grad_hook(lambda t: seen.append((t is x, lst(t.grad))))
    (x * 3).backward(C(L, [1.0, 1.0]))
    (x * 3).backward(C(L, [1.0, 1.0]))
    assert seen == [(True, [3.0, 3.0]), (True, [6.0, 6.0])]
    h.remove()
    (x * 3).backward(C(L, [1.0, 1.0]))
    assert len(seen) == 2
    with pytest.raises(RuntimeError, match="post accumulate grad hooks cannot be registered on non-leaf"):
        (x * 2).register_post_accumulate_grad_hook(lambda t: None)


def test_node_hooks_torch_api(L):
    """Node.register_prehook(fn(grad_outputs)) and Node.register_hook(fn(grad_inputs, grad_outputs))."""
    x = T(L, [1.0, 2.0])
    y = x * 3
    pre, post = [], []
    hp = y.grad_fn.register_prehook(lambda gout: pre.append(lst(gout[0])) or (gout[0] * 2,))
    y.grad_fn.register_hook(lambda gin, gout: post.append((lst(gin[0]), lst(gout[0]))))
    y.backward(C(L, [1.0, 1.0]), retain_graph=True)
    assert pre == [[1.0, 1.0]] and post == [([6.0, 6.0], [2.0, 2.0])]
    assert lst(x.grad) == [6.0, 6.0]
    hp.remove()
    y.backward(C(L, [1.0, 1.0]))
    assert lst(x.grad) == [9.0, 9.0]


def test_node_hook_dicts():
    """ember exposes a node's hooks as dicts: _pre_hooks {id: fn(grad_outputs)},
    _post_hooks {id: fn(grad_inputs, grad_outputs)}; a tuple return replaces."""
    x = T(ember, [1.0, 2.0])
    y = x * 3
    pre, post = [], []
    y.grad_fn._pre_hooks[0] = lambda gout: pre.append(lst(gout[0])) or (gout[0] * 2,)
    # x * 3 has two inputs (the number has no edge): gin is (grad_x, None)
    y.grad_fn._post_hooks[0] = lambda gin, gout: post.append((lst(gin[0]), lst(gout[0]))) or (gin[0] + 1, gin[1])
    y.backward(C(ember, [1.0, 1.0]), retain_graph=True)
    assert pre == [[1.0, 1.0]] and post == [([6.0, 6.0], [2.0, 2.0])]
    assert lst(x.grad) == [7.0, 7.0]
    del y.grad_fn._pre_hooks[0], y.grad_fn._post_hooks[0]
    y.backward(C(ember, [1.0, 1.0]))
    assert lst(x.grad) == [10.0, 10.0]


# ---------------------------------------------------------------------------
# autograd.Function
def _square_fn(L):
    class Square(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 2 * x
    return Square


def test_function_gradient(L):
    Square = _square_fn(L)
    x = T(L, [1.0, 2.0, -3.0])
    y = Square.apply(x)
    assert type(y.grad_fn).__name__ == "SquareBackward" and y.requires_grad
    y.backward(C(L, [1.0, 10.0, 100.0]))          # an upstream gradient that is not all ones
    assert lst(x.grad) == [2.0, 40.0, -600.0]
    x2 = L.tensor([[0.3, -0.7], [1.1, 2.0]], dtype=L.float64, requires_grad=True)
    assert L.autograd.gradcheck(Square.apply, (x2,))


def test_function_two_outputs(L):
    class SinCos(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.sin(), x.cos()

        @staticmethod
        def backward(ctx, gs, gc):
            (x,) = ctx.saved_tensors
            return gs * x.cos() - gc * x.sin()
    xv = np.array([0.2, 1.3])
    x = T(L, xv.tolist())
    s, c = SinCos.apply(x)
    (s * 3 + c * 5).backward(C(L, [1.0, 10.0]))
    close(lst(x.grad), (3 * np.cos(xv) - 5 * np.sin(xv)) * [1.0, 10.0])


def test_function_saved_tensor_version_check(L):
    Square = _square_fn(L)
    a = T(L, [1.0, 2.0])
    x = a * 1
    y = Square.apply(x)
    x.add_(1)
    with pytest.raises(RuntimeError, match=MODIFIED):
        y.backward(C(L, [1.0, 1.0]))


def test_function_needs_input_grad_and_non_tensor_args(L):
    seen = {}

    class Scale(L.autograd.Function):
        @staticmethod
        def forward(ctx, x, y, k):
            ctx.k = k
            seen["fwd"] = ctx.needs_input_grad
            return x * y * k

        @staticmethod
        def backward(ctx, g):
            seen["bwd"] = ctx.needs_input_grad
            return g * ctx.k, None, None
    x, y = T(L, [1.0, 2.0]), C(L, [3.0, 4.0])
    Scale.apply(x, y, 5.0).backward(C(L, [1.0, 10.0]))
    assert seen == {"fwd": (True, False, False), "bwd": (True, False, False)}
    assert lst(x.grad) == [5.0, 50.0]


def test_function_mark_non_differentiable(L):
    class WithMask(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            mask = (x > 1).to(x.dtype)
            ctx.mark_non_differentiable(mask)
            return x * 2, mask

        @staticmethod
        def backward(ctx, g, gmask):
            return g * 2
    x = T(L, [1.0, 2.0])
    y, mask = WithMask.apply(x)
    assert y.requires_grad and not mask.requires_grad and mask.grad_fn is None
    y.backward(C(L, [1.0, 10.0]))
    assert lst(x.grad) == [2.0, 20.0]


def test_function_materialize_grads(L):
    got = []

    def make(materialize):
        class Two(L.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.set_materialize_grads(materialize)
                return x * 2, x * 3

            @staticmethod
            def backward(ctx, g1, g2):
                got.append(None if g2 is None else lst(g2))
                return g1 * 2 if g2 is None else g1 * 2 + g2 * 3
        return Two
    for materialize in (True, False):
        x = T(L, [1.0, 2.0])
        a, _ = make(materialize).apply(x)
        a.backward(C(L, [1.0, 10.0]))             # only the first output is used
        assert lst(x.grad) == [2.0, 20.0]
    assert got == [[0.0, 0.0], None]


def test_function_setup_context_style(L):
    class Cube(L.autograd.Function):
        @staticmethod
        def forward(x, k):
            return x ** 3 * k

        @staticmethod
        def setup_context(ctx, inputs, output):
            x, k = inputs
            ctx.save_for_backward(x)
            ctx.k = k

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 3 * x * x * ctx.k, None
    x = T(L, [1.0, 2.0])
    Cube.apply(x, 2.0).backward(C(L, [1.0, 10.0]))
    assert lst(x.grad) == [6.0, 240.0]


def test_function_returning_its_input(L):
    class Ident(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 3
    x = T(L, [1.0, 2.0])
    y = Ident.apply(x)
    assert y is not x and x.is_leaf and x.grad_fn is None
    assert type(y.grad_fn).__name__ == "IdentBackward"
    y.backward(C(L, [1.0, 10.0]))
    assert lst(x.grad) == [3.0, 30.0]


def test_function_mark_dirty(L):
    class Double_(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.mul_(2)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 2
    a = T(L, [1.0, 2.0])
    x = a * 1
    y = Double_.apply(x)
    assert y is x and lst(x) == [2.0, 4.0] and type(x.grad_fn).__name__ == "Double_Backward"
    y.backward(C(L, [1.0, 10.0]))
    assert lst(a.grad) == [2.0, 20.0]


def test_function_wrong_number_of_gradients(L):
    class Bad(L.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            return x * y

        @staticmethod
        def backward(ctx, g):
            return g
    x = T(L, [1.0, 2.0])
    with pytest.raises(RuntimeError, match="incorrect number of gradients"):
        Bad.apply(x, x).backward(C(L, [1.0, 1.0]))


def test_function_wrong_gradient_shape(L):
    class Bad(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return L.ones(3, dtype=L.float64)
    with pytest.raises(RuntimeError, match="invalid gradient at index 0"):
        Bad.apply(T(L, [1.0, 2.0])).backward(C(L, [1.0, 1.0]))


def test_function_without_grad_inputs_or_under_no_grad(L):
    Square = _square_fn(L)
    assert not Square.apply(C(L, [1.0])).requires_grad
    x = T(L, [1.0])
    with L.no_grad():
        y = Square.apply(x)
    assert not y.requires_grad and y.grad_fn is None


def test_function_mixed_with_c_ops(L):
    """z = sin(Square(2x) + x): dz/dx = cos(4x^2 + x) (8x + 1)."""
    Square = _square_fn(L)
    xv = np.array([0.3, -0.8])
    x = T(L, xv.tolist())
    z = (Square.apply(x * 2) + x).sin()
    z.backward(C(L, [1.0, 10.0]))
    close(lst(x.grad), np.cos(4 * xv ** 2 + xv) * (8 * xv + 1) * [1.0, 10.0])
    x2 = L.tensor([[0.3, -0.7], [1.1, 0.2]], dtype=L.float64, requires_grad=True)
    assert L.autograd.gradcheck(lambda t: (Square.apply(t.t() * 2) + t).sin(), (x2,))


def test_function_double_backward(L):
    """backward written with differentiable ops: second derivatives flow (x^2 -> 2)."""
    Square = _square_fn(L)
    x = T(L, [1.0, -2.0])
    y = Square.apply(x)
    (g,) = L.autograd.grad(y, x, C(L, [1.0, 10.0]), create_graph=True)
    assert lst(g) == [2.0, -40.0]
    (h,) = L.autograd.grad(g, x, C(L, [1.0, 1.0]))
    assert lst(h) == [2.0, 20.0]
    x2 = L.tensor([0.3, -0.7], dtype=L.float64, requires_grad=True)
    assert L.autograd.gradgradcheck(lambda t: Square.apply(t).sin(), (x2,))


def test_function_once_differentiable(L):
    class Square(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        @L.autograd.function.once_differentiable
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 2 * x
    x = T(L, [1.0, 2.0])
    (g,) = L.autograd.grad(Square.apply(x), x, C(L, [1.0, 10.0]), create_graph=True)
    assert lst(g) == [2.0, 40.0]
    with pytest.raises(RuntimeError):
        L.autograd.grad(g, x, C(L, [1.0, 1.0]))


def test_function_reentrant_backward(L):
    """A backward that runs the engine itself (as checkpointing does)."""
    class Recompute(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.sin() * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            with L.enable_grad():
                xd = x.detach().requires_grad_()
                y = xd.sin() * xd
            (gx,) = L.autograd.grad(y, xd, g)
            return gx
    xv = np.array([0.4, 2.0])
    x = T(L, xv.tolist())
    (Recompute.apply(x * 1) * 2).backward(C(L, [1.0, 10.0]))
    close(lst(x.grad), 2 * (np.cos(xv) * xv + np.sin(xv)) * [1.0, 10.0])


# ---------------------------------------------------------------------------
# double backward on a small MLP: Hessian-vector products
def _mlp_setup(L):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 3))
    c = rng.standard_normal((5, 2))
    params = [rng.standard_normal((3, 4)) * 0.7, rng.standard_normal(4) * 0.3, rng.standard_normal((4, 2)) * 0.7]
    return x, c, params


def _mlp_grads(L, x, c, pv, create_graph=False):
    """loss = sum(c * (tanh(x W1 + b1) W2)); returns (params, grads)."""
    ps = [L.from_numpy(p.copy()).requires_grad_() for p in pv]
    W1, b1, W2 = ps
    out = (L.from_numpy(x).mm(W1) + b1).tanh().mm(W2)
    gs = L.autograd.grad(out, ps, L.from_numpy(c), create_graph=create_graph)
    return ps, gs


def test_mlp_hessian_vector_product(L):
    x, c, pv = _mlp_setup(L)
    rng = np.random.default_rng(4)
    v = [rng.standard_normal(p.shape) for p in pv]
    ps, gs = _mlp_grads(L, x, c, pv, create_graph=True)
    hv = L.autograd.grad(gs, ps, [L.from_numpy(vi) for vi in v])
    # finite differences of the gradient along v
    eps = 1e-6
    plus = _mlp_grads(L, x, c, [p + eps * vi for p, vi in zip(pv, v)])[1]
    minus = _mlp_grads(L, x, c, [p - eps * vi for p, vi in zip(pv, v)])[1]
    for h, gp, gm in zip(hv, plus, minus):
        np.testing.assert_allclose(h.detach().numpy(), (gp.numpy() - gm.numpy()) / (2 * eps), rtol=1e-6, atol=1e-8)


def test_mlp_hessian_vector_product_by_hand(L):
    """Direction only on W1: with z = x W1 + b1, h = tanh z, A = c W2^T, u = x V1,
    H v = (x^T [A h'' u], sum_n A h'' u, (h' u)^T c) with h' = 1 - h^2, h'' = -2 h h'."""
    x, c, pv = _mlp_setup(L)
    W1, b1, W2 = pv
    V1 = np.random.default_rng(5).standard_normal(W1.shape)
    ps, gs = _mlp_grads(L, x, c, pv, create_graph=True)
    hv = L.autograd.grad(gs, ps, [L.from_numpy(V1), L.zeros(4, dtype=L.float64), L.zeros(4, 2, dtype=L.float64)])
    h = np.tanh(x @ W1 + b1)
    h1, u, A = 1 - h * h, x @ V1, c @ W2.T
    h2 = -2 * h * h1
    want = [x.T @ (A * h2 * u), (A * h2 * u).sum(0), (h1 * u).T @ c]
    for got, w in zip(hv, want):
        np.testing.assert_allclose(got.detach().numpy(), w, rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------------------
# no leaks over a training loop
def _live_ember_objects():
    gc.collect()
    n = {"Tensor": 0, "Node": 0}
    for o in gc.get_objects():
        t = type(o)  # not isinstance: some modules' objects warn when asked for __class__
        if issubclass(t, ember.Tensor):
            n["Tensor"] += 1
        elif issubclass(t, ember.autograd.graph.Node):
            n["Node"] += 1
    return n


def _maxrss_kb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def test_training_loop_does_not_leak():
    rng = np.random.default_rng(0)
    X = ember.from_numpy(rng.standard_normal((16, 8)).astype(np.float32))
    Y = ember.from_numpy(rng.standard_normal((16, 4)).astype(np.float32))
    params = [ember.from_numpy((rng.standard_normal(s) * 0.3).astype(np.float32)).requires_grad_()
              for s in ((8, 32), (32,), (32, 4))]
    W1, b1, W2 = params

    def step(i):
        h = (X.mm(W1) + b1).tanh()
        err = h.mm(W2) * 0.5 - Y
        loss = (err * err).sum_to_size(())   # ember has no sum() yet
        loss.backward()
        with ember.no_grad():
            for p in params:
                p.sub_(p.grad * 0.01)
                if i % 2:
                    p.grad.zero_()
                else:
                    p.grad = None
        return loss.item()

    first = step(0)
    for i in range(1, 1000):
        step(i)
    before, rss_before = _live_ember_objects(), _maxrss_kb()
    for i in range(10_000):
        last = step(i)
    after, rss_after = _live_ember_objects(), _maxrss_kb()
    assert last < first                      # it trained
    assert after == before, f"live ember objects {before} -> {after}"
    assert rss_after - rss_before < 4096, f"max RSS grew by {rss_after - rss_before} KiB over 10,000 steps"

    # nothing is left for the cycle collector: every step is freed by reference counting
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        for i in range(300):
            step(i)
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        garbage = [type(o).__qualname__ for o in gc.garbage if type(o).__module__.startswith("ember")]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if was_enabled:
            gc.enable()
    assert not garbage, f"reference cycles left by training steps: {sorted(set(garbage))}"


def test_graph_freed_when_output_dropped():
    """A graph that is never run backward is freed with its output (saved tensors too)."""
    x = ember.ones(64, 64, requires_grad=True)
    before = _live_ember_objects()
    for _ in range(50):
        y = (x * 2).exp().tanh() * x
        del y
    assert _live_ember_objects() == before
    y = (x * 3).sin()
    h = y.grad_fn
    del y
    assert h.next_functions[0][0] is not None  # a node the user holds keeps its inputs' nodes
    del h
    assert _live_ember_objects() == before


@pytest.mark.parametrize("attr, node", [("T", "PermuteBackward0"), ("mT", "TransposeBackward0"),
                                        ("H", "TransposeBackward0"), ("mH", "TransposeBackward0")])
def test_transpose_properties_are_recorded(L, attr, node):
    """x @ w.T: the property is a recorded op, so w gets its gradient
    (g^T x, by hand) and the node is torch's."""
    rng = np.random.default_rng(12)
    x_np, w_np, g_np = rng.standard_normal((3, 4)), rng.standard_normal((5, 4)), rng.standard_normal((3, 5))
    x, w = L.tensor(x_np, requires_grad=True), L.tensor(w_np, requires_grad=True)
    wt = getattr(w, attr)
    assert type(wt.grad_fn).__name__ == node and wt.requires_grad
    (x @ wt).backward(L.tensor(g_np))
    np.testing.assert_allclose(w.grad.numpy(), g_np.T @ x_np, rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), g_np @ w_np, rtol=1e-12)


def test_T_of_3d_reverses_every_dim_with_grad(L):
    import warnings
    x = L.arange(24.0).reshape(2, 3, 4).requires_grad_()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecated beyond 2-d (warned once per process)
        y = x.T
    assert tuple(y.shape) == (4, 3, 2) and y[1, 2, 0].item() == x[0, 2, 1].item()
    (y * L.arange(24.0).reshape(4, 3, 2)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.arange(24.0).reshape(4, 3, 2).transpose(2, 1, 0))


def test_iterating_a_tensor_records_the_rows(L):
    """for row in x (and sum(x), which iterates) keeps the rows in the graph:
    torch iterates over unbind(0)."""
    x = L.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], requires_grad=True)
    rows = list(x)
    assert all(type(r.grad_fn).__name__ == "UnbindBackward0" for r in rows)
    (rows[0] * 2 + rows[2] * rows[2]).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[2, 2], [0, 0], [10, 12]])
    x.grad = None
    sum(x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.ones((3, 2)))
