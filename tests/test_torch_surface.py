"""The torch surface transformers, accelerate and peft touch at import and in
forward passes: compiler/jit/_dynamo answers, version, accelerator, cuda graphs,
typed tensor classes, layout, memory_format, dtypes without tensors, the
extra-state key and ember.ops / library.custom_op. Checked against hand values
and torch's documented semantics (torch itself when installed)."""
import collections
import pickle

import numpy as np
import pytest

import ember


# -- "not compiling" answers and identity decorators ---------------------------------
def test_compiler_jit_dynamo_answers():
    import ember.compiler
    import ember.jit
    import ember._dynamo
    from ember._dynamo._trace_wrapped_higher_order_op import TransformGetItemToIndex

    def f(x):
        return x + 1

    assert ember.compiler.is_compiling() is False and ember.compiler.is_dynamo_compiling() is False
    assert ember.jit.is_tracing() is False and ember.jit.is_scripting() is False
    assert ember._dynamo.is_compiling() is False
    for deco in (ember.compiler.disable, ember.compiler.allow_in_graph, ember._dynamo.allow_in_graph,
                 ember._dynamo.assume_constant_result, ember.jit.ignore, ember.jit.unused, ember.jit.script):
        assert deco(f) is f
    assert ember.compiler.disable(recursive=False)(f) is f
    assert ember.jit.annotate(int, 3) == 3
    m = ember.nn.Linear(2, 2)
    assert not isinstance(m, ember._dynamo.eval_frame.OptimizedModule)
    assert not isinstance(ember.compile(m), ember._dynamo.eval_frame.OptimizedModule)
    with pytest.raises(RuntimeError):
        ember._dynamo.eval_frame.OptimizedModule(m)
    ember._dynamo.config.capture_scalar_outputs = True  # a setting scripts write: kept, no effect
    assert ember._dynamo.config.capture_scalar_outputs is True
    ember._dynamo.config.capture_scalar_outputs = False
    x = ember.arange(6).view(2, 3)
    with TransformGetItemToIndex():
        got = ember.func.vmap(lambda i: x[i, 1])(ember.tensor([1, 0]))
    assert got.tolist() == [4, 1]


def test_version_and_accelerator_answers():
    import ember.version
    assert ember.version.hip is None
    assert ember.version.__version__ == ember.__version__
    cuda = ember.version.cuda
    assert cuda is None or (isinstance(cuda, str) and cuda.count(".") == 1)
    if not ember.cuda.is_available():
        assert ember.accelerator.current_accelerator() is None
        assert ember.accelerator.is_available() is False and ember.accelerator.device_count() == 0
        with pytest.raises(RuntimeError):
            ember.accelerator.current_device_index()
    else:
        assert ember.accelerator.current_accelerator() == ember.device("cuda")


def test_cuda_graphs_have_no_instances():
    assert ember.cuda.is_current_stream_capturing() is False
    assert not isinstance(ember.zeros(1), ember.cuda.CUDAGraph)
    with pytest.raises(RuntimeError, match="CUDA graphs"):
        ember.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="CUDA graphs"):
        ember.cuda.graph(None)


# -- legacy typed tensors -------------------------------------------------------------
def test_typed_tensor_classes():
    assert isinstance(ember.zeros(2), ember.FloatTensor)
    assert not isinstance(ember.zeros(2), ember.LongTensor)
    assert isinstance(ember.zeros(2, dtype=ember.int64), ember.LongTensor)
    assert isinstance(ember.tensor([True]), ember.BoolTensor)
    assert not isinstance(ember.zeros(2), ember.cuda.FloatTensor)  # a CPU tensor
    assert not isinstance(3, ember.FloatTensor)
    assert ember.LongTensor.dtype is ember.int64 and ember.ByteTensor.dtype is ember.uint8
    assert ember.LongTensor([1, 2]).tolist() == [1, 2] and ember.LongTensor([1, 2]).dtype is ember.int64
    assert ember.LongTensor([1.7]).tolist() == [1]  # truncated, as torch's legacy constructor does
    assert ember.FloatTensor(2, 3).shape == (2, 3) and ember.FloatTensor(2, 3).dtype is ember.float32
    assert ember.IntTensor().shape == (0,)
    assert ember.DoubleTensor(ember.Size([4])).shape == (4,)
    t = ember.ones(3)
    alias = ember.FloatTensor(t)
    alias[0] = 5
    assert t[0].item() == 5  # the same data
    with pytest.raises(TypeError):
        ember.FloatTensor(ember.zeros(2, dtype=ember.int64))
    assert ember.zeros(2).type(ember.LongTensor).dtype is ember.int64
    assert ember.zeros(2).type(ember.HalfTensor).dtype is ember.float16
    assert ember.zeros(2).type("torch.IntTensor").dtype is ember.int32


# -- layout and memory_format -----------------------------------------------------------
def test_layout():
    assert ember.zeros(2).layout is ember.strided
    assert ember.zeros(2, 3).t().layout is ember.strided
    assert repr(ember.strided) == "ember.strided"
    assert pickle.loads(pickle.dumps(ember.strided)) is ember.strided
    assert ember.zeros(2, layout=ember.strided).shape == (2,)


def _np_strides(a):
    return tuple(s // a.itemsize for s in a.strides)


def test_clone_and_contiguous_honour_memory_format():
    x = ember.randn(4, 3).t()  # strides (1, 3)
    assert x.clone().stride() == (1, 3)  # preserve_format keeps a dense input's strides
    assert x.clone(memory_format=ember.preserve_format).stride() == (1, 3)
    c = x.clone(memory_format=ember.contiguous_format)
    assert c.stride() == (4, 1) and c.is_contiguous()
    np.testing.assert_array_equal(c.numpy(), x.numpy())
    assert ember.empty_like(x, memory_format=ember.contiguous_format).stride() == (4, 1)
    assert ember.zeros_like(x).stride() == (1, 3)
    # channels_last: NHWC order in memory, as NumPy's transpose of an NHWC array gives
    n = ember.randn(2, 3, 4, 5)
    want = _np_strides(np.ascontiguousarray(n.numpy().transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2))
    assert want == (60, 1, 15, 3)
    cl = n.contiguous(memory_format=ember.channels_last)
    assert cl.stride() == want and cl.is_contiguous(memory_format=ember.channels_last)
    assert not cl.is_contiguous() and n.is_contiguous() and not n.is_contiguous(memory_format=ember.channels_last)
    np.testing.assert_array_equal(cl.numpy(), n.numpy())
    assert cl.contiguous(memory_format=ember.channels_last) is cl
    back = cl.contiguous()
    assert back.stride() == (60, 20, 5, 1)
    np.testing.assert_array_equal(back.numpy(), n.numpy())
    assert n.clone(memory_format=ember.channels_last).stride() == want
    assert ember.empty(2, 3, 4, 5, memory_format=ember.channels_last).stride() == want
    assert ember.empty_like(n, memory_format=ember.channels_last).stride() == want
    v = ember.randn(2, 3, 4, 5, 6)
    assert v.contiguous(memory_format=ember.channels_last_3d).stride() == (360, 1, 90, 18, 3)
    with pytest.raises(RuntimeError, match="rank 4"):
        ember.randn(2, 3).contiguous(memory_format=ember.channels_last)
    with pytest.raises(RuntimeError, match="preserve"):
        n.contiguous(memory_format=ember.preserve_format)
    with pytest.raises(TypeError, match="memory_format"):
        n.clone(memory_format="channels_last")
    assert repr(ember.contiguous_format) == "ember.contiguous_format"
    assert pickle.loads(pickle.dumps(ember.channels_last)) is ember.channels_last


def test_clone_memory_format_gradient():
    x = ember.randn(3, 4, dtype=ember.float64).t().requires_grad_()
    y = x.clone(memory_format=ember.contiguous_format)
    (y * ember.arange(12, dtype=ember.float64).view(4, 3)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.arange(12.0).reshape(4, 3))


# -- dtypes without tensors -----------------------------------------------------------------
def test_dtypes_without_tensors_have_traits_and_limits():
    f8 = ember.finfo(ember.float8_e4m3fn)
    # e4m3fn: 3 mantissa bits (eps 2^-3), max (1 + 6/8) * 2^8 = 448, smallest normal 2^-6
    assert (f8.bits, f8.eps, f8.max, f8.min, f8.tiny) == (8, 0.125, 448.0, -448.0, 2.0 ** -6)
    f5 = ember.finfo(ember.float8_e5m2)
    # e5m2: 2 mantissa bits, max (1 + 3/4) * 2^15 = 57344, smallest normal 2^-14
    assert (f5.eps, f5.max, f5.tiny) == (0.25, 57344.0, 2.0 ** -14)
    assert ember.iinfo(ember.uint16).max == 2 ** 16 - 1 and ember.iinfo(ember.uint16).min == 0
    assert ember.iinfo(ember.uint32).max == 2 ** 32 - 1 and ember.iinfo(ember.uint64).max == 2 ** 64 - 1
    assert ember.finfo(ember.complex64).eps == np.finfo(np.float32).eps
    assert ember.float8_e4m3fn.itemsize == 1 and ember.float8_e4m3fn.is_floating_point
    assert not ember.uint16.is_signed and ember.uint16.itemsize == 2 and not ember.uint16.is_floating_point
    assert ember.complex64.is_complex and not ember.float32.is_complex and ember.complex128.itemsize == 16
    assert ember.cfloat is ember.complex64 and ember.cdouble is ember.complex128
    assert repr(ember.float8_e5m2) == "ember.float8_e5m2"
    assert pickle.loads(pickle.dumps(ember.uint32)) is ember.uint32
    assert {ember.uint16: "U16"}[ember.uint16] == "U16"  # usable as dict keys (dtype tables)


@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e5m2", "complex32"])
def test_tensors_of_dtypes_without_tensors_raise(name):
    d = getattr(ember, name)
    for make in (lambda: ember.zeros(2, dtype=d), lambda: ember.ones(2).to(d), lambda: ember.tensor([1], dtype=d),
                 lambda: ember.ones(4).view(d), lambda: ember.empty(3, dtype=d)):
        with pytest.raises(RuntimeError, match=name):
            make()


# -- nn.Module extra state key -------------------------------------------------------------
def test_extra_state_key_suffix():
    from ember.nn.modules.module import _EXTRA_STATE_KEY_SUFFIX
    assert _EXTRA_STATE_KEY_SUFFIX == "_extra_state"

    class M(ember.nn.Module):
        def __init__(self):
            super().__init__()
            self.value = 1

        def get_extra_state(self):
            return {"value": self.value}

        def set_extra_state(self, state):
            self.value = state["value"]

    outer = ember.nn.Sequential(M())
    sd = outer.state_dict()
    assert list(sd) == ["0." + _EXTRA_STATE_KEY_SUFFIX]
    other = ember.nn.Sequential(M())
    other.load_state_dict({"0._extra_state": {"value": 7}})
    assert other[0].value == 7


# -- library.custom_op -------------------------------------------------------------------------
def test_custom_op_forward_backward_and_ops_namespace():
    import ember.library as lib

    def scaled(x, w, k):
        return x * w * 3.0

    op = lib.custom_op("embertest::scaled", scaled, mutates_args=(),
                       schema="(Tensor x, Tensor w, Tensor k) -> Tensor")
    calls = []

    def setup_context(ctx, inputs, output):
        x, w, k = inputs
        ctx.save_for_backward(x, w)

    def backward(ctx, g):
        calls.append(1)
        x, w = ctx.saved_tensors
        return g * w * 3.0, g * x * 3.0, None

    lib.register_fake("embertest::scaled", lambda x, w, k: ember.empty_like(x))
    lib.register_autograd("embertest::scaled", backward, setup_context=setup_context)
    assert ember.ops.embertest.scaled is op
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    w = ember.tensor([3.0, 5.0], requires_grad=True)
    k = ember.zeros(1)
    y = ember.ops.embertest.scaled(x, w, k)
    assert y.tolist() == [9.0, 30.0]
    y.sum().backward()
    assert calls == [1]
    assert x.grad.tolist() == [9.0, 15.0] and w.grad.tolist() == [3.0, 6.0]
    with ember.no_grad():
        assert op(x, w, k).requires_grad is False
    with pytest.raises(AttributeError):
        ember.ops.embertest.missing


def test_custom_op_without_autograd_raises_on_backward():
    import ember.library as lib

    @lib.custom_op("embertest::double", mutates_args=())
    def double(x):
        return x * 2

    x = ember.ones(2, requires_grad=True)
    y = double(x)
    assert y.tolist() == [2.0, 2.0]
    with pytest.raises(RuntimeError, match="autograd"):
        y.sum().backward()


def test_custom_op_kernels_by_device_and_errors():
    import ember.library as lib
    op = lib.custom_op("embertest::neg", lambda x: -x, mutates_args=())
    op.register_kernel("cpu", lambda x: x * -10)
    assert op(ember.ones(1)).tolist() == [-10.0]
    with pytest.raises(ValueError):
        lib.custom_op("no_namespace", lambda x: x, mutates_args=())
    with pytest.raises(ValueError):
        lib.custom_op("embertest::bad", lambda x: x, mutates_args=None)
    # a fake for an op not defined yet is kept for it (torch raises; torchvision registers fakes for
    # its compiled ops at import, and those cannot load on ember) ...
    def later_fake(x):
        return ember.empty(3, device="meta")
    assert lib.register_fake("embertest::defined_later", later_fake) is later_fake
    with pytest.raises(RuntimeError, match="does not exist"):
        lib.register_autograd("embertest::never_defined", lambda ctx, g: g)
    # ... and runs for meta inputs once the op exists
    late = lib.custom_op("embertest::defined_later", lambda x: x.clone(), mutates_args=())
    assert late(ember.empty(1, device="meta")).shape == (3,)


# -- pytree ----------------------------------------------------------------------------------------
def test_pytree_flatten_map_and_registration():
    import ember.utils._pytree as P
    NT = collections.namedtuple("NT", "a b")
    tree = {"x": [1, (2, 3)], "y": NT(4, None), "z": collections.OrderedDict(q=5)}
    leaves, spec = P.tree_flatten(tree)
    assert leaves == [1, 2, 3, 4, None, 5] and spec.num_leaves == 6  # None is a leaf, as in torch
    rebuilt = P.tree_unflatten([None if v is None else v * 10 for v in leaves], spec)
    assert rebuilt == {"x": [10, (20, 30)], "y": NT(40, None), "z": collections.OrderedDict(q=50)}
    assert type(rebuilt["z"]) is collections.OrderedDict and type(rebuilt["y"]) is NT
    assert P.tree_map(lambda a, b: a + b, [1, (2,)], [10, (20,)]) == [11, (22,)]
    assert P.tree_map_only(int, str, [1.5, 2]) == [1.5, "2"]
    paths = [P.keystr(p) for p, _ in P.tree_flatten_with_path(tree)[0]]
    assert paths == ["['x'][0]", "['x'][1][0]", "['x'][1][1]", "['y'].a", "['y'].b", "['z']['q']"]

    class Pt:
        def __init__(self, a, b):
            self.a, self.b = a, b

    P.register_pytree_node(Pt, lambda p: ([p.a, p.b], None), lambda v, c: Pt(*v), serialized_type_name="Pt")
    try:
        out = P.tree_map(lambda v: v * 2, [Pt(1, 2), 3])
        assert (out[0].a, out[0].b, out[1]) == (2, 4, 6)
        with pytest.raises(ValueError):
            P.register_pytree_node(Pt, None, None)
    finally:
        P._deregister_pytree_node(Pt)
    assert P.tree_leaves([Pt(1, 2)])[0].a == 1  # deregistered: a leaf again
    assert P.tree_structure([1, (2,)]) == P.tree_structure([5, (6,)])
    assert P.tree_structure([1, (2,)]) != P.tree_structure([5, [6]])
    with pytest.raises(ValueError):
        P.tree_unflatten([1], spec)


def test_pytree_matches_torch(torch):
    import ember.utils._pytree as P
    import torch.utils._pytree as TP
    tree = {"b": [1, {"c": (2, 3)}], "a": collections.deque([4, 5], maxlen=3), "d": None}
    el, es = P.tree_flatten(tree)
    tl, ts = TP.tree_flatten(tree)
    assert el == tl and es.num_leaves == ts.num_leaves
    assert P.tree_unflatten(el, es) == TP.tree_unflatten(tl, ts)


# -- serialization allowlist -------------------------------------------------------------------------
def test_safe_globals_rebuild_allowlisted_classes(tmp_path):
    import random
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "cpu": ember.random.get_rng_state()}
    path = tmp_path / "rng_state.pth"
    ember.save(state, path)
    import pickle as _pickle
    with pytest.raises(_pickle.UnpicklingError, match="numpy"):
        ember.load(path, weights_only=True)
    allow = [np._core.multiarray._reconstruct, np.ndarray, np.dtype, type(np.dtype(np.uint32))]
    with ember.serialization.safe_globals(allow):
        assert len(ember.serialization.get_safe_globals()) == 4
        loaded = ember.load(path, weights_only=True)
    assert ember.serialization.get_safe_globals() == []
    assert loaded["numpy"][0] == "MT19937"
    np.testing.assert_array_equal(loaded["numpy"][1], state["numpy"][1])
    assert loaded["numpy"][2:] == state["numpy"][2:]
    assert loaded["python"] == state["python"]
    assert ember.equal(loaded["cpu"], state["cpu"])


def test_add_safe_globals_persists_and_validates(tmp_path):
    class Point:
        def __init__(self, x):
            self.x = x

    Point.__module__, Point.__qualname__ = __name__, "Point"
    globals()["Point"] = Point
    try:
        path = tmp_path / "p.pt"
        ember.save({"p": Point(3)}, path)
        with pytest.raises(Exception):
            ember.load(path, weights_only=True)
        ember.serialization.add_safe_globals([Point])
        assert ember.load(path, weights_only=True)["p"].x == 3
        with pytest.raises(TypeError):
            ember.serialization.add_safe_globals(Point)
    finally:
        ember.serialization.clear_safe_globals()
        del globals()["Point"]


# -- torch._check family, is_complex, device module, deterministic debug mode ---------------------
def test_checks_raise_the_given_error_with_lazy_message():
    ember._check(True, lambda: 1 / 0)  # the message is only built on failure
    for fn, exc in ((ember._check, RuntimeError), (ember._check_index, IndexError),
                    (ember._check_value, ValueError), (ember._check_type, TypeError)):
        with pytest.raises(exc, match="size 3 is wrong"):
            fn(False, lambda: "size 3 is wrong")
    with pytest.raises(KeyError):
        ember._check_with(KeyError, False, lambda: "k")
    with pytest.raises(TypeError, match="bool"):
        ember._check(ember.tensor(True))
    ember._check_tensor_all(ember.tensor([True, True]))
    with pytest.raises(RuntimeError, match="not all"):
        ember._check_tensor_all(ember.tensor([True, False]), lambda: "not all")
    with pytest.raises(ValueError):
        ember._check_tensor_all_with(ValueError, ember.tensor([[False]]))


def test_is_complex_device_module_and_debug_mode():
    assert ember.is_complex(ember.zeros(2)) is False
    with pytest.raises(TypeError):
        ember.is_complex([1.0])
    assert ember.get_device_module("cuda") is ember.cuda
    with pytest.raises(RuntimeError):
        ember.get_device_module("xpu")
    assert ember.get_deterministic_debug_mode() == 0
    try:
        ember.set_deterministic_debug_mode("warn")
        assert ember.get_deterministic_debug_mode() == 1 and ember.is_deterministic_algorithms_warn_only_enabled()
        ember.set_deterministic_debug_mode(2)
        assert ember.get_deterministic_debug_mode() == 2 and ember.are_deterministic_algorithms_enabled()
        with pytest.raises(RuntimeError):
            ember.set_deterministic_debug_mode(3)
    finally:
        ember.set_deterministic_debug_mode(0)
    assert not ember.are_deterministic_algorithms_enabled()
