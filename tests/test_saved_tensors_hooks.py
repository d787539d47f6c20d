"""autograd.graph.saved_tensors_hooks / save_on_cpu / disable_saved_tensors_hooks:
the engine stores what pack_hook makes of each saved tensor and backward reads
unpack_hook's result. Gradients are checked against hand-derived values."""
import numpy as np
import pytest

import ember
from ember.autograd.graph import disable_saved_tensors_hooks, save_on_cpu, saved_tensors_hooks


def test_pack_and_unpack_run_for_every_saved_tensor():
    packed, unpacked = [], []

    def pack(t):
        packed.append(tuple(t.shape))
        return ("box", t.clone())

    def unpack(p):
        unpacked.append(p[0])
        return p[1]

    x = ember.tensor([1.0, 2.0, 3.0], requires_grad=True)
    w = ember.tensor([4.0, 5.0, 6.0], requires_grad=True)
    with saved_tensors_hooks(pack, unpack):
        y = (x * w).exp()  # mul saves x and w, exp saves its output
    assert len(packed) == 3
    y.sum().backward()
    assert len(unpacked) == 3
    e = np.exp(np.array([4.0, 10.0, 18.0]))
    np.testing.assert_allclose(x.grad.numpy(), e * np.array([4.0, 5.0, 6.0]), rtol=1e-6)
    np.testing.assert_allclose(w.grad.numpy(), e * np.array([1.0, 2.0, 3.0]), rtol=1e-6)


def test_unpacked_value_is_what_backward_uses():
    # an unpack that doubles the saved tensor doubles the gradient d(x*x)/dx = 2x -> 4x... (both factors)
    x = ember.tensor([1.0, 3.0], requires_grad=True)
    with saved_tensors_hooks(lambda t: t.detach().clone(), lambda t: t * 2):
        y = x * x
    y.sum().backward()
    assert x.grad.tolist() == [4.0, 12.0]  # g*(2x) + g*(2x), each factor read as 2x


def test_no_version_check_under_hooks_and_hooks_outside_block_inactive():
    x = ember.ones(2, requires_grad=True)
    a = x * 1
    with saved_tensors_hooks(lambda t: t.clone(), lambda t: t):
        y = a * a  # saves copies
    a.add_(1)  # would make a plain save fail the version check
    y.sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]
    calls = []
    with saved_tensors_hooks(lambda t: calls.append(1) or t, lambda t: t):
        pass
    z = x * x
    z.sum().backward()
    assert calls == []


def test_innermost_hooks_apply_and_unpack_must_return_tensor():
    seen = []
    x = ember.ones(2, requires_grad=True)
    with saved_tensors_hooks(lambda t: seen.append("outer") or t, lambda t: t):
        with saved_tensors_hooks(lambda t: seen.append("inner") or t, lambda t: t):
            (x * x).sum()
    assert set(seen) == {"inner"}
    with saved_tensors_hooks(lambda t: t, lambda t: "not a tensor"):
        y = x * x
    with pytest.raises(TypeError, match="unpack_hook"):
        y.sum().backward()


def test_python_function_saves_through_hooks():
    class Square(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    packs = []
    x = ember.tensor([3.0], requires_grad=True)
    with saved_tensors_hooks(lambda t: packs.append(1) or t.clone(), lambda t: t):
        y = Square.apply(x)
    y.backward()
    assert packs and x.grad.tolist() == [6.0]


def test_save_on_cpu_gives_the_same_gradients():
    ember.manual_seed(0)
    lin = ember.nn.Linear(4, 3)
    x = ember.randn(5, 4)
    lin(x).tanh().sum().backward()
    want = [p.grad.clone() for p in lin.parameters()]
    lin.zero_grad()
    with save_on_cpu(pin_memory=False):
        out = lin(x).tanh().sum()
    out.backward()
    for p, g in zip(lin.parameters(), want):
        np.testing.assert_allclose(p.grad.numpy(), g.numpy(), rtol=1e-6)


def test_disable_saved_tensors_hooks():
    with disable_saved_tensors_hooks("hooks are off here"):
        with pytest.raises(RuntimeError, match="hooks are off here"):
            with saved_tensors_hooks(lambda t: t, lambda t: t):
                pass
    with saved_tensors_hooks(lambda t: t, lambda t: t):
        pass  # enabled again after the block
    x = ember.ones(1, requires_grad=True)
    with saved_tensors_hooks(lambda t: t, lambda t: t):
        with disable_saved_tensors_hooks("no saving under hooks"):
            with pytest.raises(RuntimeError, match="no saving under hooks"):
                x * x


def test_retain_graph_and_second_backward_error_with_hooks():
    x = ember.tensor([2.0], requires_grad=True)
    with saved_tensors_hooks(lambda t: t.clone(), lambda t: t):
        y = x * x
    y.backward(retain_graph=True)
    y.backward()
    assert x.grad.tolist() == [8.0]
    with pytest.raises(RuntimeError, match="second time"):
        y.backward()


def test_a_packed_non_leaf_is_not_kept_alive():
    # what pack_hook returns is all the graph keeps (as torch): a tensor the hooks replace by a
    # description can be freed, and unpack rebuilds it for backward (FSDP frees gathered weights so)
    import gc
    import weakref
    x = ember.tensor([1.0, 2.0, 3.0], requires_grad=True)
    h = x * 2  # a non-leaf
    alive = weakref.ref(h)
    with saved_tensors_hooks(lambda t: ("recompute", t.shape) if t is h else t,
                             lambda p: x.detach() * 2 if isinstance(p, tuple) else p):
        y = (h * ember.tensor([4.0, 5.0, 6.0], requires_grad=True)).sum()
    del h
    gc.collect()
    assert alive() is None
    y.backward()
    assert x.grad.tolist() == [8.0, 10.0, 12.0]  # d/dx sum(2x * w) = 2w
