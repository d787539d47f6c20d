"""nn.Module backward hooks: register_full_backward_hook,
register_full_backward_pre_hook, the legacy register_backward_hook and the
global register_module_full_backward_(pre_)hook. Every test runs the same
code on ember and on torch (the `L` fixture; torch's run is skipped without
it) and checks the tuples the hooks receive and the resulting gradients
against values worked out by hand (NumPy), so torch's run vouches for the
expectations. Also: in-place writes into a hooked module's inputs/outputs
raise, as in torch."""
import warnings

import numpy as np
import pytest


def arr(t):
    return None if t is None else t.detach().numpy()


def shapes(ts):
    return [None if t is None else tuple(t.shape) for t in ts]


def linear(L, w, b):
    m = L.nn.Linear(w.shape[1], w.shape[0])
    with L.no_grad():
        m.weight.copy_(L.tensor(w))
        m.bias.copy_(L.tensor(b))
    return m


W = np.array([[1.0, -2.0, 0.5], [3.0, 0.0, -1.0]], dtype=np.float32)
B = np.array([0.1, -0.2], dtype=np.float32)
X = np.array([[1.0, 2.0, 3.0], [-1.0, 0.5, 2.0]], dtype=np.float32)
C = np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32)  # d loss / d output for loss = sum(out * C)


def test_hook_receives_grad_input_and_grad_output(L):
    m = linear(L, W, B)
    seen = []
    m.register_full_backward_hook(lambda mod, gi, go: seen.append((mod, gi, go)))
    x = L.tensor(X, requires_grad=True)
    (m(x) * L.tensor(C)).sum().backward()
    assert len(seen) == 1
    mod, gi, go = seen[0]
    assert mod is m and isinstance(gi, tuple) and isinstance(go, tuple)
    assert shapes(gi) == [(2, 3)] and shapes(go) == [(2, 2)]
    np.testing.assert_allclose(arr(go[0]), C)
    np.testing.assert_allclose(arr(gi[0]), C @ W, rtol=1e-6)
    np.testing.assert_allclose(arr(x.grad), C @ W, rtol=1e-6)
    np.testing.assert_allclose(arr(m.weight.grad), C.T @ X, rtol=1e-6)


def test_replacing_grad_input(L):
    m = linear(L, W, B)
    m.register_full_backward_hook(lambda mod, gi, go: (gi[0] * 10,))
    x = L.tensor(X, requires_grad=True)
    (m(x) * L.tensor(C)).sum().backward()
    np.testing.assert_allclose(arr(x.grad), 10 * C @ W, rtol=1e-6)
    np.testing.assert_allclose(arr(m.weight.grad), C.T @ X, rtol=1e-6)  # parameters are not inputs


def test_hooks_chain_in_order_and_prepend(L):
    m = linear(L, W, B)
    order = []

    def make(name, factor):
        def hook(mod, gi, go):
            order.append((name, float(gi[0].sum())))
            return (gi[0] * factor,)
        return hook
    m.register_full_backward_hook(make("a", 2.0))
    m.register_full_backward_hook(make("b", 3.0))
    m.register_full_backward_hook(make("first", 1.0), prepend=True)
    x = L.tensor(X, requires_grad=True)
    (m(x) * L.tensor(C)).sum().backward()
    s = float((C @ W).sum())
    assert [o[0] for o in order] == ["first", "a", "b"]
    np.testing.assert_allclose([o[1] for o in order], [s, s, 2 * s], rtol=1e-5)
    np.testing.assert_allclose(arr(x.grad), 6 * C @ W, rtol=1e-6)


def test_pre_hook_replaces_grad_output(L):
    m = linear(L, W, B)
    seen = []
    m.register_full_backward_pre_hook(lambda mod, go: (go[0] * 2,))
    m.register_full_backward_pre_hook(lambda mod, go: seen.append(("pre", arr(go[0]))))
    m.register_full_backward_hook(lambda mod, gi, go: seen.append(("full", arr(go[0]))))
    x = L.tensor(X, requires_grad=True)
    (m(x) * L.tensor(C)).sum().backward()
    assert [s[0] for s in seen] == ["pre", "full"]
    np.testing.assert_allclose(seen[0][1], 2 * C)  # the second pre-hook sees the first's replacement
    np.testing.assert_allclose(seen[1][1], 2 * C)
    np.testing.assert_allclose(arr(x.grad), 2 * C @ W, rtol=1e-6)
    np.testing.assert_allclose(arr(m.weight.grad), 2 * C.T @ X, rtol=1e-6)
    np.testing.assert_allclose(arr(m.bias.grad), 2 * C.sum(0), rtol=1e-6)


def test_pre_hook_alone_and_zeroing(L):
    m = linear(L, W, B)
    m.register_full_backward_pre_hook(lambda mod, go: (go[0] * 0,))
    x = L.tensor(X, requires_grad=True)
    (m(x) * L.tensor(C)).sum().backward()
    assert not arr(x.grad).any() and not arr(m.weight.grad).any()


def test_remove(L):
    m = linear(L, W, B)
    calls = []
    h1 = m.register_full_backward_hook(lambda mod, gi, go: calls.append("full"))
    h2 = m.register_full_backward_pre_hook(lambda mod, go: calls.append("pre"))
    x = L.tensor(X, requires_grad=True)
    m(x).sum().backward()
    assert calls == ["pre", "full"]
    h1.remove()
    m(x).sum().backward()
    assert calls == ["pre", "full", "pre"]
    h2.remove()
    h2.remove()  # twice is fine
    m(x).sum().backward()
    assert calls == ["pre", "full", "pre"]
    with m.register_full_backward_hook(lambda mod, gi, go: calls.append("ctx")):
        m(x).sum().backward()
    m(x).sum().backward()
    assert calls[3:] == ["ctx"]


def two_module(L):
    """forward(a, b, k, c=None) -> (2a + kb, 3 a.detach()): mixed inputs and outputs."""
    class TwoM(L.nn.Module):
        def forward(self, a, b, k=3, c=None):
            return a * 2 + b * k, a.detach() * 3
    return TwoM()


def test_mixed_inputs_and_outputs(L):
    """Positional inputs only; a tensor not needing grad gets zeros, a non-tensor
    None; an output not needing grad gets None."""
    m = two_module(L)
    seen = []
    m.register_full_backward_hook(lambda mod, gi, go: seen.append((gi, go)))
    a = L.tensor([1.0, 2.0], requires_grad=True)
    b = L.tensor([3.0, 4.0])
    o1, o2 = m(a, b, 5, c=L.ones(2, requires_grad=True))
    assert o2.grad_fn is None and not o2.requires_grad
    (o1 * L.tensor([1.0, -1.0])).sum().backward()
    gi, go = seen[0]
    assert len(gi) == 3 and len(go) == 2
    np.testing.assert_allclose(arr(gi[0]), [2.0, -2.0])
    np.testing.assert_allclose(arr(gi[1]), [0.0, 0.0])
    assert gi[2] is None and go[1] is None
    np.testing.assert_allclose(arr(go[0]), [1.0, -1.0])


def test_some_inputs_need_no_grad_and_replacement_keeps_them_out(L):
    m = two_module(L)
    m.register_full_backward_hook(lambda mod, gi, go: (gi[0] * 10, L.ones(2) * 5, None))
    a = L.tensor([1.0, 2.0], requires_grad=True)
    b = L.tensor([3.0, 4.0])
    m(a, b, 1)[0].sum().backward()
    np.testing.assert_allclose(arr(a.grad), [20.0, 20.0])
    assert b.grad is None


def test_unused_input_and_unused_outputs(L):
    class U(L.nn.Module):
        def forward(self, a, b):
            return a * 2, a * 3, 7
    m = U()
    seen = []
    m.register_full_backward_hook(lambda mod, gi, go: seen.append((gi, go)))
    a, b = L.ones(2, requires_grad=True), L.ones(3, requires_grad=True)
    out = m(a, b)
    assert out[2] == 7
    out[0].sum().backward()
    gi, go = seen[0]
    assert shapes(gi) == [(2,), (3,)] and shapes(go) == [(2,), None, None]
    np.testing.assert_allclose(arr(gi[0]), [2.0, 2.0])
    assert not arr(gi[1]).any()  # b was not used: zeros
    assert b.grad is None or not arr(b.grad).any()


def test_same_tensor_twice_and_two_calls(L):
    class S(L.nn.Module):
        def forward(self, a, b):
            return a * b
    m = S()
    seen = []
    m.register_full_backward_hook(lambda mod, gi, go: seen.append([arr(g) for g in gi]))
    x = L.tensor([1.0, 2.0], requires_grad=True)
    m(x, x).sum().backward()
    np.testing.assert_allclose(seen[0], [[1.0, 2.0], [1.0, 2.0]])
    np.testing.assert_allclose(arr(x.grad), [2.0, 4.0])
    seen.clear()
    (m(x, L.tensor([1.0, 1.0])) + m(x, L.tensor([2.0, 2.0]))).sum().backward()
    assert len(seen) == 2
    assert sorted(float(s[0].sum()) for s in seen) == [2.0, 4.0]


def test_no_input_requires_grad(L):
    m = linear(L, W, B)
    seen = []
    m.register_full_backward_hook(lambda mod, gi, go: seen.append((gi, go)))
    with pytest.warns(UserWarning, match="no inputs require gradients"):
        (m(L.tensor(X)) * L.tensor(C)).sum().backward()
    gi, go = seen[0]
    assert gi == (None,)
    np.testing.assert_allclose(arr(go[0]), C)
    np.testing.assert_allclose(arr(m.weight.grad), C.T @ X, rtol=1e-6)
    m2 = linear(L, W, B)
    m2.register_full_backward_hook(lambda mod, gi, go: (L.zeros(2, 3),))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError, match="no input requires gradient should always return None"):
            m2(L.tensor(X)).sum().backward()
    m3 = linear(L, W, B)
    m3.register_full_backward_hook(lambda mod, gi, go: (None,))  # all None is allowed
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m3(L.tensor(X)).sum().backward()


def test_wrong_number_of_gradients(L):
    m = linear(L, W, B)
    m.register_full_backward_hook(lambda mod, gi, go: (gi[0], gi[0]))
    with pytest.raises(RuntimeError, match="Backward hook returned an invalid number of grad_input, got 2, "
                                           "but expected 1"):
        m(L.tensor(X, requires_grad=True)).sum().backward()
    m = linear(L, W, B)
    m.register_full_backward_pre_hook(lambda mod, go: (go[0], go[0]))
    with pytest.raises(RuntimeError, match="Backward pre hook returned an invalid number of grad_output, got 2, "
                                           "but expected 1"):
        m(L.tensor(X, requires_grad=True)).sum().backward()


def test_full_and_legacy_do_not_mix(L):
    m = linear(L, W, B)
    m.register_backward_hook(lambda *a: None)
    with pytest.raises(RuntimeError, match="Cannot use both regular backward hooks and full backward hooks"):
        m.register_full_backward_hook(lambda *a: None)
    m = linear(L, W, B)
    m.register_full_backward_hook(lambda *a: None)
    with pytest.raises(RuntimeError, match="Cannot use both regular backward hooks and full backward hooks"):
        m.register_backward_hook(lambda *a: None)
    m.register_full_backward_pre_hook(lambda *a: None)  # pre-hooks go with either


def test_legacy_hook_sees_the_output_node(L):
    """register_backward_hook: the grad_fn of the output, here one mul node."""
    class M(L.nn.Module):
        def forward(self, a, b):
            return a * b
    m = M()
    seen = []
    m.register_backward_hook(lambda mod, gi, go: seen.append((mod, gi, go)))
    a = L.tensor([1.0, 2.0], requires_grad=True)
    b = L.tensor([3.0, 5.0], requires_grad=True)
    (m(a, b) * L.tensor([1.0, 10.0])).sum().backward()
    mod, gi, go = seen[0]
    assert mod is m
    np.testing.assert_allclose([arr(g) for g in gi], [[3.0, 50.0], [1.0, 20.0]])
    np.testing.assert_allclose(arr(go[0]), [1.0, 10.0])
    m2 = M()
    m2.register_backward_hook(lambda mod, gi, go: (gi[0] * 0, gi[1]))
    a.grad = b.grad = None
    m2(a, b).sum().backward()
    assert not arr(a.grad).any()
    np.testing.assert_allclose(arr(b.grad), [1.0, 2.0])


def test_nested_modules_fire_from_the_output_back(L):
    s = L.nn.Sequential(L.nn.Linear(2, 3), L.nn.Tanh(), L.nn.Linear(3, 1))
    order = []
    for name, mod in s.named_modules():
        mod.register_full_backward_hook(lambda m, gi, go, name=name: order.append(name))
        mod.register_full_backward_pre_hook(lambda m, go, name=name: order.append("pre" + name))
    s(L.ones(4, 2, requires_grad=True)).sum().backward()
    assert order == ["pre", "pre2", "2", "pre1", "1", "pre0", "0", ""]


def test_global_hooks(L):
    mm = L.nn.modules.module
    calls = []
    h1 = mm.register_module_full_backward_hook(lambda m, gi, go: calls.append(type(m).__name__))
    h2 = mm.register_module_full_backward_pre_hook(lambda m, go: calls.append("pre" + type(m).__name__))
    try:
        s = L.nn.Sequential(L.nn.Linear(2, 2), L.nn.ReLU())
        s(L.ones(1, 2, requires_grad=True)).sum().backward()
        assert calls == ["preSequential", "preReLU", "ReLU", "preLinear", "Linear", "Sequential"]
    finally:
        h1.remove()
        h2.remove()
    calls.clear()
    s(L.ones(1, 2, requires_grad=True)).sum().backward()
    assert calls == []
    # once a global full hook was registered, legacy global ones are refused (the choice sticks)
    with pytest.raises(RuntimeError, match="Cannot use both regular backward hooks and full backward hooks as a "
                                           "global Module hook"):
        mm.register_module_backward_hook(lambda *a: None)


def test_no_grad_retain_graph_and_autograd_grad(L):
    m = linear(L, W, B)
    calls = []
    m.register_full_backward_hook(lambda mod, gi, go: calls.append(arr(gi[0])))
    with L.no_grad():
        y = m(L.tensor(X, requires_grad=True))
    assert y.grad_fn is None and calls == []
    x = L.tensor(X, requires_grad=True)
    loss = (m(x) * L.tensor(C)).sum()
    loss.backward(retain_graph=True)
    loss.backward()
    assert len(calls) == 2
    (g,) = L.autograd.grad((m(x) * L.tensor(C)).sum(), x)
    assert len(calls) == 3
    np.testing.assert_allclose(calls[2], C @ W, rtol=1e-6)
    np.testing.assert_allclose(arr(g), C @ W, rtol=1e-6)


def test_grad_fn_name(L):
    m = linear(L, W, B)
    m.register_full_backward_hook(lambda *a: None)
    y = m(L.tensor(X, requires_grad=True))
    assert type(y.grad_fn).__name__ == "BackwardHookFunctionBackward"


# ---------------------------------------------------------------------------
# in-place writes: torch forbids them on the hook's identity outputs
INPLACE_MSG = "Output 0 of BackwardHookFunction is a view and is being modified inplace"


def test_inplace_module_with_full_hook_raises(L):
    r = L.nn.ReLU(inplace=True)
    r.register_full_backward_hook(lambda *a: None)
    with pytest.raises(RuntimeError, match=INPLACE_MSG):
        r(L.ones(2, requires_grad=True) * 1)
    with L.no_grad():
        r(L.ones(2, requires_grad=True) * 1)  # nothing recorded, nothing to protect


def test_inplace_on_hooked_output_raises_and_clone_fixes_it(L):
    m = linear(L, W, B)
    m.register_full_backward_hook(lambda *a: None)
    x = L.tensor(X, requires_grad=True)
    with pytest.raises(RuntimeError, match=INPLACE_MSG):
        L.nn.functional.relu(m(x), inplace=True)
    with pytest.raises(RuntimeError, match=INPLACE_MSG):
        m(x).mul_(2)
    y = m(x).clone()
    y.mul_(2)
    (y * L.tensor(C)).sum().backward()
    np.testing.assert_allclose(arr(x.grad), 2 * C @ W, rtol=1e-6)
    # the result of an op on the output is a fresh tensor: writing into it is fine
    x.grad = None
    z = m(x) * 1
    L.nn.functional.relu(z, inplace=True)
    z.sum().backward()
    assert x.grad is not None


def test_custom_function_returning_input_as_is(L):
    """The same rule for any autograd.Function (the hooks rely on it)."""
    class Id(L.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            return a, b * 2

        @staticmethod
        def backward(ctx, ga, gb):
            return ga, gb * 2
    h = L.ones(2, requires_grad=True) * 1
    y, z = Id.apply(h, L.ones(2, requires_grad=True))
    with pytest.raises(RuntimeError, match="Output 0 of Id is a view and is being modified inplace"):
        y.add_(1)
    z.add_(1)  # a fresh output may be written
    with L.no_grad():
        y.add_(1)


def test_legacy_hook_warns_when_it_sees_part_of_forward(L):
    """FutureWarning when the one node the legacy hook sits on is not the whole forward."""
    class Mul(L.nn.Module):
        def forward(self, a, b):
            return a * b

    class Two(L.nn.Module):
        def forward(self, a):
            return (a * 2).sin()

    class Dict(L.nn.Module):
        def forward(self, a):
            return {"x": a * 2}

    class Pair(L.nn.Module):
        def forward(self, a):
            return a * 2, a * 3

    def messages(m, *args):
        m.register_backward_hook(lambda *a: None)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            m(*args)
        assert all(x.category is FutureWarning for x in w)
        return [str(x.message) for x in w]
    a = L.ones(2, requires_grad=True)
    assert messages(Mul(), a * 1, a * 2) == []  # one node fed by the inputs' own nodes
    assert "forward contains multiple autograd Nodes" in messages(Mul(), a, a)[0]  # leaves: AccumulateGrad
    assert "forward contains multiple autograd Nodes" in messages(Two(), a * 1)[0]
    assert "does not return a single Tensor or a tuple of Tensors" in messages(Dict(), a)[0]
    assert "outputs are generated by different autograd Nodes" in messages(Pair(), a)[0]
    assert "does not take as input a single Tensor or a tuple of Tensors" in messages(Mul(), a, 3.0)[0]
