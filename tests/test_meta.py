"""The meta device (Note [meta device] in csrc/ember.h): tensors with shapes,
dtypes and strides but no data, as torch's 'meta' device.

- creation: device('meta'), factories with device='meta', `with
  ember.device('meta'):` and set_default_device, `.to('meta')`;
- reading data raises torch's errors, repr is torch's `tensor(..., ...)`;
- the op table on meta inputs: every op either returns meta tensors with the
  shape and dtype the same call gives on the CPU (whose values
  tests/test_ops.py checks against NumPy) or raises NotImplementedError
  naming the op and 'Meta'; the rows marked `meta` are the ones that run;
- modules: a large model builds under the meta context without memory,
  `to_empty` + `load_state_dict` from a real checkpoint gives the outputs of
  a model built normally, and `load_state_dict(assign=True)` onto a meta
  module takes the checkpoint's tensors.
Expected strings and behaviours were read from torch 2.15.
"""
import resource
import time

import numpy as np
import pytest

import ember
from ember import _C
from op_db import OPS_BY_NAME
from test_ops import call, materialize, prepare

META = ember.device("meta")


def test_device_object():
    d = ember.device("meta")
    assert d.type == "meta" and d.index is None
    assert str(d) == "meta" and repr(d) == "device(type='meta')"
    assert d == ember.device("meta") and d != ember.device("cpu")


def test_factories_and_properties():
    x = ember.empty(2, 3, device="meta")
    assert x.is_meta and not x.is_cuda and x.device == META
    assert tuple(x.shape) == (2, 3) and x.stride() == (3, 1) and x.dtype == ember.float32
    assert x.data_ptr() == 0
    for f in (lambda: ember.zeros(4, 5, device="meta", dtype=ember.float64),
              lambda: ember.ones(4, 5, device="meta"), lambda: ember.full((4, 5), 2.0, device="meta"),
              lambda: ember.rand(4, 5, device="meta"), lambda: ember.randn(4, 5, device="meta"),
              lambda: ember.randint(0, 9, (4, 5), device="meta"),
              lambda: ember.empty_strided((4, 5), (1, 4), device="meta")):
        t = f()
        assert t.is_meta and tuple(t.shape) == (4, 5)
    assert ember.empty_strided((4, 5), (1, 4), device="meta").stride() == (1, 4)
    assert tuple(ember.arange(10, device="meta").shape) == (10,)
    assert ember.arange(10, device="meta").dtype == ember.int64
    assert tuple(ember.linspace(0, 1, 7, device="meta").shape) == (7,)
    assert tuple(ember.eye(3, 4, device="meta").shape) == (3, 4)
    assert tuple(ember.randperm(6, device="meta").shape) == (6,)
    assert tuple(ember.tril_indices(4, 4, device="meta").shape) == (2, 10)
    assert ember.tensor([1, 2, 3], device="meta").is_meta
    assert ember.scalar_tensor(3.0, device="meta").shape == ()
    like = ember.zeros_like(ember.ones(2, 2), device="meta")
    assert like.is_meta and tuple(like.shape) == (2, 2)
    assert ember.ones(3).to("meta").is_meta


def test_reading_data_raises_torchs_errors():
    x = ember.empty(3, device="meta")
    with pytest.raises(RuntimeError, match="a Tensor with 3 elements cannot be converted to Scalar"):
        x.item()
    with pytest.raises(RuntimeError, match="Tensor.item\\(\\) cannot be called on meta tensors"):
        x.sum().item()
    with pytest.raises(RuntimeError, match="Tensor.item\\(\\) cannot be called on meta tensors"):
        float(x[0])
    with pytest.raises(NotImplementedError, match="Cannot copy out of meta tensor; no data!"):
        x.tolist()
    with pytest.raises(NotImplementedError, match="Cannot copy out of meta tensor; no data!"):
        x.cpu()
    with pytest.raises(TypeError, match="can't convert meta device type tensor to numpy"):
        x.numpy()
    c = ember.ones(3)
    with pytest.raises(NotImplementedError, match="Cannot copy out of meta tensor; no data!"):
        c.copy_(x)
    assert x.copy_(c) is x  # into meta: shapes checked, nothing written
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        x.copy_(ember.ones(2, 3))


def test_repr_is_torchs():
    assert repr(ember.empty(2, 3, device="meta")) == "tensor(..., device='meta', size=(2, 3))"
    assert repr(ember.empty(2, 3, device="meta", dtype=ember.int64)) == \
        "tensor(..., device='meta', size=(2, 3), dtype=ember.int64)"
    assert repr(ember.empty(0, device="meta")) == "tensor(..., device='meta', size=(0,))"
    assert repr(ember.empty(3, device="meta", requires_grad=True)) == \
        "tensor(..., device='meta', size=(3,), requires_grad=True)"


def test_mixing_meta_and_cpu_is_a_device_error():
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        ember.empty(3, device="meta") + ember.ones(3)
    # a 0-d CPU tensor is a scalar, as on a GPU
    assert (ember.empty(3, device="meta") + ember.tensor(2.0)).is_meta


def test_device_context_and_default_device():
    with ember.device("meta"):
        a = ember.zeros(2)
        b = ember.tensor([1.0, 2.0])
        c = ember.zeros_like(ember.ones(2, device="cpu"))  # *_like follow their input
        with ember.device("cpu"):
            d = ember.ones(2)
        e = ember.ones(2)
    assert a.is_meta and b.is_meta and not c.is_meta and not d.is_meta and e.is_meta
    assert not ember.zeros(2).is_meta
    ember.set_default_device("meta")
    try:
        assert ember.get_default_device() == META
        assert ember.empty(5).is_meta
        assert not ember.empty(5, device="cpu").is_meta
    finally:
        ember.set_default_device(None)
    assert ember.get_default_device() == ember.device("cpu")
    assert not ember.empty(5).is_meta


# ------------------------------------------------------------------ the op table
def float32_sample(op):
    try:
        samples = op.get_samples("float32", "contig")
    except Exception:
        return None
    s = next((x for x in samples if getattr(x, "tile", None) == 1), None)
    return prepare(s, "contig") if s is not None else None


def to_meta(a):
    if isinstance(a, ember.Tensor):
        return a.to("meta")
    if isinstance(a, (list, tuple)) and a and all(isinstance(t, ember.Tensor) for t in a):
        return type(a)(t.to("meta") for t in a)
    return a


def same_structure(meta, cpu, name):
    if isinstance(cpu, ember.Tensor):
        assert isinstance(meta, ember.Tensor) and meta.is_meta, f"{name}: not a meta tensor"
        assert tuple(meta.shape) == tuple(cpu.shape), f"{name}: shape {tuple(meta.shape)} vs {tuple(cpu.shape)}"
        assert meta.dtype == cpu.dtype, f"{name}: dtype {meta.dtype} vs {cpu.dtype}"
        # the layout the CPU front-end picks: what is built on meta is laid out as it will be on the CPU
        assert cpu.numel() <= 1 or meta.stride() == cpu.stride(), f"{name}: strides {meta.stride()} vs {cpu.stride()}"
    elif isinstance(cpu, (tuple, list)):
        assert len(meta) == len(cpu), name
        for m, c in zip(meta, cpu):
            same_structure(m, c, name)


OP_NAMES = sorted(n for n in _C._op_names() if n in OPS_BY_NAME)


@pytest.mark.parametrize("name", OP_NAMES)
def test_op_on_meta_inputs(name):
    op = OPS_BY_NAME[name]
    sample = float32_sample(op)
    if sample is None:
        pytest.skip(f"{name}: no float32 sample in op_db")
    args, kwargs, _ = materialize(ember, sample, "contig")
    variant = "F" if "F" in op.variants and sample.desc != "varargs" else "M"
    try:
        expected = call(ember, op, variant, args, kwargs)
    except Exception:
        pytest.skip(f"{name}: the sample raises on the CPU")
    margs = [to_meta(a) for a in args]
    mkwargs = {k: to_meta(v) for k, v in kwargs.items()}
    info = _C._op_info(name)
    runs = "meta" in info["devices"] or "any" in info["devices"]
    if not any(isinstance(a, ember.Tensor) and a.is_meta or
               isinstance(a, (list, tuple)) and any(isinstance(t, ember.Tensor) for t in a) for a in margs):
        pytest.skip(f"{name}: the sample has no tensor argument")
    try:
        got = call(ember, op, variant, margs, mkwargs)
    except NotImplementedError as e:
        if "Cannot copy out of meta tensor; no data!" in str(e):
            return  # torch's answer when an op moves meta data to a real device
        # (nonzero's meta rule is torch's: a refusal, its output size being data-dependent)
        assert not runs or "register_meta function for torch.nonzero()" in str(e), \
            f"{name} is marked to run on meta but raised {e}"
        # the op, or the first op it is composed of (op_db calls some through nn.functional)
        assert "attempted to run this operator with Meta tensors" in str(e) or "torch.nonzero()" in str(e), e
        return
    # (an op without a meta column can still get here when the sample's Python
    # path never reaches it, e.g. dropout with p=0)
    same_structure(got, expected, name)


def test_the_meta_rows_are_the_elementwise_reductions_views_and_random_fills():
    meta = {n for n in _C._op_names() if "meta" in _C._op_info(n)["devices"]}
    assert {"add", "mul", "exp", "where", "sum", "mean", "amax", "var", "uniform_", "normal_"} <= meta
    for n in _C._op_names():
        if "pointwise" in _C._op_info(n)["tags"]:
            assert n in meta, n


# ------------------------------------------------------------------ modules
class Block(ember.nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.norm = ember.nn.LayerNorm(d)
        self.q, self.k, self.v, self.o = (ember.nn.Linear(d, d, bias=False) for _ in range(4))
        self.up = ember.nn.Linear(d, h, bias=False)
        self.gate = ember.nn.Linear(d, h, bias=False)
        self.down = ember.nn.Linear(h, d, bias=False)
        self.register_buffer("scale", ember.ones(d))

    def forward(self, x):
        y = self.norm(x)
        att = ember.softmax(self.q(y) @ self.k(y).transpose(-1, -2) / y.shape[-1] ** 0.5, dim=-1)
        x = x + self.o(att @ self.v(y))
        y = self.norm(x)
        return x + self.down(ember.nn.functional.silu(self.gate(y)) * self.up(y)) * self.scale


class Model(ember.nn.Module):
    def __init__(self, vocab=64, d=16, h=40, layers=2):
        super().__init__()
        self.emb = ember.nn.Embedding(vocab, d)
        self.blocks = ember.nn.ModuleList(Block(d, h) for _ in range(layers))
        self.head = ember.nn.Linear(d, vocab)

    def forward(self, ids):
        x = self.emb(ids)
        for b in self.blocks:
            x = b(x)
        return self.head(x)


def test_a_7b_shaped_model_builds_on_meta_without_memory():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB
    t0 = time.perf_counter()
    with ember.device("meta"):
        m = Model(vocab=32000, d=4096, h=11008, layers=32)
    elapsed = time.perf_counter() - t0
    n = sum(p.numel() for p in m.parameters())
    assert 6.5e9 < n < 7.0e9  # a Llama-7B-shaped stack: 6.7 billion parameters
    assert all(p.is_meta for p in m.parameters())
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown < 200 * 1024, f"building on meta grew the process by {grown} KiB"
    assert elapsed < 10  # "well under a second" on a quiet machine; generous for shared CI


def test_to_empty_then_load_state_dict_gives_the_normal_models_outputs():
    ember.manual_seed(0)
    ref = Model()
    ids = ember.randint(0, 64, (2, 7))
    want = ref(ids).detach().numpy()
    state = ref.state_dict()
    with ember.device("meta"):
        m = Model()
    assert all(p.is_meta for p in m.parameters())
    m.to_empty(device="cpu")
    assert not any(p.is_meta for p in m.parameters())
    m.load_state_dict(state)
    np.testing.assert_array_equal(m(ids).detach().numpy(), want)


def test_load_state_dict_assign_onto_a_meta_module():
    ember.manual_seed(1)
    ref = Model()
    ids = ember.randint(0, 64, (3, 5))
    want = ref(ids).detach().numpy()
    with ember.device("meta"):
        m = Model()
    m.load_state_dict(ref.state_dict(), assign=True)
    assert not any(p.is_meta for p in m.parameters()) and not m.blocks[0].scale.is_meta
    assert all(isinstance(p, ember.nn.Parameter) for p in m.parameters())
    np.testing.assert_array_equal(m(ids).detach().numpy(), want)


def test_load_state_dict_into_meta_without_assign_warns_and_keeps_meta():
    ref = ember.nn.Linear(3, 2)
    with ember.device("meta"):
        m = ember.nn.Linear(3, 2)
    with pytest.warns(UserWarning, match="copying from a non-meta parameter in the checkpoint to a meta"):
        m.load_state_dict(ref.state_dict())
    assert m.weight.is_meta


def test_linear_layers_and_matrix_products_have_shape_rules():
    lin = ember.nn.Linear(4, 3, device="meta")
    y = lin(ember.empty(5, 2, 4, device="meta"))
    assert y.is_meta and tuple(y.shape) == (5, 2, 3)
    a, b = ember.empty(6, 2, 3, device="meta"), ember.empty(6, 3, 7, device="meta")
    assert tuple((a @ b).shape) == (6, 2, 7) and tuple(ember.bmm(a, b).shape) == (6, 2, 7)
    with pytest.raises(RuntimeError):
        ember.mm(ember.empty(2, 3, device="meta"), ember.empty(4, 5, device="meta"))
    mask = ember.tril(ember.ones(8, 8, dtype=ember.bool, device="meta"))  # GPT-2's causal mask buffer
    assert mask.is_meta and mask.dtype == ember.bool
    assert tuple(ember.cat([a, a], dim=1).shape) == (6, 4, 3)


def test_meta_parameters_train_shapes_through_autograd():
    with ember.device("meta"):
        w = ember.nn.Parameter(ember.empty(4, 3))
    y = (w * 2 + 1).sum()
    assert y.is_meta and y.requires_grad
    y.backward()
    assert w.grad is not None and w.grad.is_meta and tuple(w.grad.shape) == (4, 3)
