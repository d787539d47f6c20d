"""ember.cuda and tensors on 'cuda' above the op table: devices, memory
statistics, streams and events, moving tensors (.to/.cuda/.cpu), what
Python reads from device tensors, autograd across devices, factories,
modules and optimizers training on the device (the same losses as on the
CPU), checkpoints of device tensors, the DataLoader. Runs on a real GPU when
there is one, else on the fake backend (Note [GPU tests] in
tests/cuda_common.py); tests/test_cuda_absent.py covers a machine with
neither.
"""
import gc
import io
import re

import numpy as np
import pytest

import ember
from cuda_common import OnDevice, real_gpu

pytestmark = pytest.mark.usefixtures("cuda_device")
DEV0, DEV1 = ember.device("cuda", 0), ember.device("cuda", 1)
# training runs: the fake runs the CPU kernels (the same numbers); a GPU sums in other orders
RTOL = 2e-4 if real_gpu() else 1e-5


def host(t):
    return t.detach().cpu().numpy()


def two_devices():
    if ember.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")


# ---------------------------------------------------------------------------
# devices
def test_device_queries():
    assert ember.cuda.is_available() and ember.cuda.is_initialized()
    n = ember.cuda.device_count()
    assert n >= 1 and ember.cuda.current_device() == 0
    for i in range(n):
        p = ember.cuda.get_device_properties(i)
        assert isinstance(p.name, str) and p.name and p.name == ember.cuda.get_device_name(i)
        assert p.total_memory > 0 and p.multi_processor_count >= 1 and p.warp_size == 32
        assert ember.cuda.get_device_capability(i) == (p.major, p.minor) and p.major >= 1
        assert "total_memory=" in repr(p)
    assert ember.cuda.get_device_name() == ember.cuda.get_device_name(0) == ember.cuda.get_device_name("cuda:0")
    assert isinstance(ember.cuda.is_bf16_supported(), bool)
    with pytest.raises(ValueError):
        ember.cuda.get_device_properties("cpu")
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        ember.cuda.get_device_properties(n + 3)


def test_set_device_and_device_context():
    two_devices()
    try:
        ember.cuda.set_device(1)
        assert ember.cuda.current_device() == 1
        assert ember.zeros(2, device="cuda").device == DEV1  # 'cuda' means the current device
        ember.cuda.set_device("cuda:0")
        assert ember.cuda.current_device() == 0
        with ember.cuda.device(1):
            assert ember.cuda.current_device() == 1
            assert ember.ones(1).cuda().device == DEV1
            with ember.cuda.device("cuda:0"):
                assert ember.cuda.current_device() == 0
            assert ember.cuda.current_device() == 1
        assert ember.cuda.current_device() == 0
        with ember.cuda.device(None):  # a no-op
            assert ember.cuda.current_device() == 0
        t = ember.ones(1, device="cuda:1")
        with ember.cuda.device_of(t):
            assert ember.cuda.current_device() == 1
        with ember.cuda.device_of(ember.ones(1)):  # a CPU tensor: no change
            assert ember.cuda.current_device() == 0
        with pytest.raises(RuntimeError):
            ember.cuda.set_device(ember.cuda.device_count() + 3)
        assert ember.cuda.current_device() == 0
    finally:
        ember.cuda.set_device(0)


def test_synchronize():
    ember.cuda.synchronize()
    ember.cuda.synchronize(0)
    ember.cuda.synchronize("cuda:0")
    ember.cuda.synchronize(ember.device("cuda", 0))


# ---------------------------------------------------------------------------
# memory statistics
def test_memory_statistics_follow_tensors():
    gc.collect()
    base = ember.cuda.memory_allocated()
    t = ember.empty(1000, device="cuda")  # 4000 bytes
    grown = ember.cuda.memory_allocated()
    assert grown >= base + 4000
    assert ember.cuda.max_memory_allocated() >= grown
    assert ember.cuda.memory_reserved() >= grown and ember.cuda.max_memory_reserved() >= grown
    stats = ember.cuda.memory_stats()
    assert stats["allocated_bytes.all.current"] == grown and stats["allocated_bytes.all.peak"] >= grown
    u = t.view(10, 100)  # a view: no new memory
    assert ember.cuda.memory_allocated() == grown
    del t, u
    gc.collect()
    assert ember.cuda.memory_allocated() == base
    assert ember.cuda.max_memory_allocated() >= grown  # the peak stays...
    ember.cuda.reset_peak_memory_stats()
    assert ember.cuda.max_memory_allocated() == base  # ...until reset
    ember.cuda.empty_cache()
    assert ember.cuda.memory_reserved() >= ember.cuda.memory_allocated() == base


def test_memory_statistics_per_device():
    two_devices()
    gc.collect()
    b0, b1 = ember.cuda.memory_allocated(0), ember.cuda.memory_allocated(1)
    t = ember.empty(500, dtype=ember.float64, device="cuda:1")
    assert ember.cuda.memory_allocated(0) == b0 and ember.cuda.memory_allocated(1) >= b1 + 4000
    assert ember.cuda.memory_allocated("cuda:1") == ember.cuda.memory_allocated(DEV1)
    del t
    gc.collect()
    assert ember.cuda.memory_allocated(1) == b1


def test_out_of_memory_is_a_runtime_error():
    total = ember.cuda.get_device_properties(0).total_memory
    with pytest.raises(RuntimeError, match="out of memory"):
        ember.empty(2 * total, dtype=ember.uint8, device="cuda")
    assert ember.ones(3, device="cuda").sum().item() == 3.0  # still usable


# ---------------------------------------------------------------------------
# streams and events
def test_streams():
    s = ember.cuda.Stream()
    default = ember.cuda.current_stream()
    assert default == ember.cuda.default_stream() and default.cuda_stream == 0
    assert s != default and s.device == DEV0 and "cuda:0" in repr(s)
    with ember.cuda.stream(s):
        assert ember.cuda.current_stream() == s
        x = ember.ones(100, device="cuda") * 2
    assert ember.cuda.current_stream() == default
    s.synchronize()
    assert s.query() is True
    assert host(x).sum() == 200.0
    other = ember.cuda.Stream()
    other.wait_stream(s)
    other.synchronize()
    with ember.cuda.stream(None):  # a no-op
        assert ember.cuda.current_stream() == default
    assert len({s, other, ember.cuda.current_stream()}) == 3 - (s == other)


def test_stream_on_another_device():
    two_devices()
    s = ember.cuda.Stream(device=1)
    assert s.device == DEV1 and s.device_index == 1
    with ember.cuda.stream(s):
        assert ember.cuda.current_stream(1) == s
    assert ember.cuda.current_stream(1) == ember.cuda.default_stream(1)


def test_events():
    start, end = ember.cuda.Event(enable_timing=True), ember.cuda.Event(enable_timing=True)
    assert start.query() is True  # never recorded: nothing to wait for
    start.record()
    y = ember.randn(64, 64, device="cuda") @ ember.randn(64, 64, device="cuda")
    end.record()
    end.synchronize()
    assert end.query() is True
    assert y.device == DEV0
    ms = start.elapsed_time(end)
    assert isinstance(ms, float) and ms >= 0.0
    s = ember.cuda.Stream()
    e = s.record_event()
    e.wait()  # the current stream waits for it
    e.synchronize()
    plain = ember.cuda.Event()
    plain.record()
    with pytest.raises(RuntimeError):
        plain.elapsed_time(end)  # not created with enable_timing
    with pytest.raises(RuntimeError, match="recorded"):
        ember.cuda.Event(enable_timing=True).elapsed_time(end)


# ---------------------------------------------------------------------------
# moving tensors
def test_to_cuda_and_back():
    v = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    x = ember.from_numpy(v)
    for g in (x.to("cuda"), x.cuda(), x.to(DEV0), x.to("cuda:0"), x.cuda(0), x.to(device="cuda"),
              x.to("cuda", non_blocking=True), x.cuda(non_blocking=True)):
        assert g.device == DEV0 and g.is_cuda and g.get_device() == 0
        assert g.dtype == ember.float32 and tuple(g.shape) == (3, 4) and not g.requires_grad
        np.testing.assert_array_equal(host(g), v)
        back = g.cpu()
        assert back.device == ember.device("cpu") and not back.is_cuda and back.get_device() == -1
        np.testing.assert_array_equal(back.numpy(), v)
    g = x.cuda()
    assert g.cuda() is g and g.to("cuda") is g and g.to("cuda:0") is g  # already there: itself
    assert x.cpu() is x and x.to("cpu") is x


def test_to_cuda_with_dtype():
    x = ember.from_numpy(np.array([1.5, -2.25, 3.0]))
    for g in (x.to("cuda", ember.float32), x.to("cuda", dtype=ember.float32),
              x.to(device="cuda", dtype=ember.float32), x.cuda().to(ember.float32),
              x.to(ember.ones(1, device="cuda"))):
        assert g.device == DEV0 and g.dtype == ember.float32
        np.testing.assert_array_equal(host(g), [1.5, -2.25, 3.0])
    i = x.to("cuda", ember.int64)
    assert i.dtype == ember.int64 and host(i).tolist() == [1, -2, 3]
    h = x.cuda().to("cpu", ember.float16)
    assert h.device == ember.device("cpu") and h.dtype == ember.float16


def test_layouts_survive_the_trip():
    """Transposed, sliced, expanded and offset tensors move with the right values;
    dense layouts keep their strides (as torch does)."""
    base = ember.from_numpy(np.arange(24.0).reshape(4, 6))
    for name, x in (("T", base.t()), ("slice", base[:, ::2]), ("expand", base[:1].expand(3, 6)),
                    ("offset", base[2:, 1:4]), ("0d", base[1, 2]), ("empty", base[:, :0])):
        g = x.cuda()
        assert tuple(g.shape) == tuple(x.shape), name
        np.testing.assert_array_equal(host(g), x.numpy(), err_msg=name)
    assert base.t().cuda().stride() == base.t().stride()


def test_cuda1_and_bad_ordinals():
    x = ember.arange(4.0)
    n = ember.cuda.device_count()
    for bad in (f"cuda:{n + 3}", ember.device("cuda", n + 3)):
        with pytest.raises(RuntimeError, match="invalid device ordinal"):
            x.to(bad)
        with pytest.raises(RuntimeError, match="invalid device ordinal"):
            ember.zeros(2, device=bad)
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        x.cuda(n + 3)
    two_devices()
    g1 = x.to("cuda:1")
    assert g1.device == DEV1 and g1.get_device() == 1
    g0 = g1.to("cuda:0")  # device to device
    assert g0.device == DEV0
    np.testing.assert_array_equal(host(g0), [0, 1, 2, 3])
    assert "device='cuda:1'" in repr(g1)


def test_copy_between_devices():
    """copy_ across devices: broadcasting, dtype casts, strided targets."""
    src = ember.from_numpy(np.arange(4.0))
    g = ember.zeros(3, 4, device="cuda")
    assert g.copy_(src) is g  # CPU -> device, broadcast, float64 -> float32
    np.testing.assert_array_equal(host(g), np.tile(np.arange(4.0), (3, 1)))
    h = ember.zeros(4, 3, dtype=ember.int64)
    h.t().copy_(g)  # device -> a transposed CPU target
    np.testing.assert_array_equal(h.numpy(), np.tile(np.arange(4), (3, 1)).T)
    g.t()[1].copy_(ember.tensor([7.0, 8.0, 9.0]))  # into a strided device view
    assert host(g)[:, 1].tolist() == [7.0, 8.0, 9.0]
    g.copy_(g.flip(0))  # overlapping source and target
    assert host(g)[0].tolist() == [0.0, 9.0, 2.0, 3.0]
    g[1:].copy_(g[:2].clone())
    with pytest.raises(RuntimeError):
        g.copy_(ember.ones(5))
    if ember.cuda.device_count() >= 2:
        g1 = ember.zeros(3, 4, device="cuda:1")
        g1.copy_(g)  # cuda:0 -> cuda:1
        np.testing.assert_array_equal(host(g1), host(g))


# ---------------------------------------------------------------------------
# what Python reads from device tensors
def test_reading_values():
    g = ember.tensor([[1.5, 0.0], [-2.0, 4.0]], device="cuda")
    assert repr(g).endswith("device='cuda:0')") and "1.5000" in repr(g)
    assert "device='cuda:0'" in str(g)
    assert g[0, 0].item() == 1.5 and isinstance(g[0, 0].item(), float)
    assert g.tolist() == [[1.5, 0.0], [-2.0, 4.0]]
    assert bool(g[0, 0]) is True and bool(g[0, 1]) is False
    assert float(g[1, 0]) == -2.0 and int(g[1, 1]) == 4
    assert ember.tensor(3, device="cuda").item() == 3
    assert (g > 0).any().item() is True
    assert list(map(float, g[1])) == [-2.0, 4.0]  # iteration
    with pytest.raises(RuntimeError):
        bool(g)  # more than one value
    with pytest.raises(TypeError, match="cpu"):
        g.numpy()  # as torch: copy to the host first
    with pytest.raises(TypeError):
        np.asarray(g)
    np.testing.assert_array_equal(g.cpu().numpy(), [[1.5, 0.0], [-2.0, 4.0]])
    assert g.data_ptr() != 0 and g.untyped_storage().device == DEV0


def test_factories_on_cuda():
    """device='cuda' factories: on the device, with the CPU's values."""
    cases = {
        "zeros": lambda d: ember.zeros(2, 3, device=d), "ones": lambda d: ember.ones((2, 3), device=d),
        "full": lambda d: ember.full((2,), 3.5, device=d), "arange": lambda d: ember.arange(1, 10, 2, device=d),
        "arange-float": lambda d: ember.arange(0.0, 1.0, 0.25, device=d), "eye": lambda d: ember.eye(3, 4, device=d),
        "linspace": lambda d: ember.linspace(-1, 1, 7, device=d), "logspace": lambda d: ember.logspace(0, 2, 3, device=d),
        "tensor": lambda d: ember.tensor([[1, 2], [3, 4]], device=d), "tensor-0d": lambda d: ember.tensor(2.5, device=d),
        "as_tensor": lambda d: ember.as_tensor([1.0, 2.0], device=d),
        "tensor-dtype": lambda d: ember.tensor([1, 2], dtype=ember.float16, device=d),
        "zeros-int": lambda d: ember.zeros(3, dtype=ember.int32, device=d),
        "tril_indices": lambda d: ember.tril_indices(3, 3, device=d),
    }
    for name, make in cases.items():
        g, c = make("cuda"), make("cpu")
        assert g.device == DEV0, name
        assert g.dtype == c.dtype and g.shape == c.shape, name
        np.testing.assert_array_equal(host(g), c.numpy(), err_msg=name)
    like = ember.arange(6.0, device="cuda").view(2, 3)
    for name, g in (("zeros_like", ember.zeros_like(like)), ("ones_like", ember.ones_like(like)),
                    ("full_like", ember.full_like(like, 7)), ("empty_like", ember.empty_like(like)),
                    ("rand_like", ember.rand_like(like)), ("randn_like", ember.randn_like(like)),
                    ("new_zeros", like.new_zeros(4)), ("new_ones", like.new_ones(2, 2)),
                    ("new_full", like.new_full((3,), 2.0)), ("new_tensor", like.new_tensor([1.0, 2.0])),
                    ("new_empty", like.new_empty(5)), ("zeros_like-cpu", ember.zeros_like(like, device="cpu"))):
        assert g.device == (ember.device("cpu") if name.endswith("cpu") else DEV0), name
    assert host(ember.full_like(like, 7)).tolist() == [[7.0] * 3] * 2
    assert ember.empty(2, 3, device="cuda").device == DEV0


def test_random_factories_on_cuda():
    for g in (ember.rand(1000, device="cuda"), ember.randn(1000, device="cuda"),
              ember.randint(0, 5, (1000,), device="cuda"), ember.randperm(50, device="cuda"),
              ember.empty(1000, device="cuda").uniform_(2, 3), ember.empty(1000, device="cuda").normal_()):
        assert g.device == DEV0
    v = host(ember.rand(1000, device="cuda"))
    assert v.min() >= 0 and v.max() < 1 and 0.4 < v.mean() < 0.6
    assert sorted(host(ember.randperm(50, device="cuda")).tolist()) == list(range(50))
    ember.cuda.manual_seed(3)
    a = host(ember.randn(10, device="cuda"))
    ember.cuda.manual_seed_all(3)
    np.testing.assert_array_equal(host(ember.randn(10, device="cuda")), a)  # seeding repeats the draw


PYTHON_LEVEL = {  # functions written in Python over the op table (they make tensors of their own)
    "isin": lambda L, x, i: L.isin(i, L.tensor([1, 2], device=i.device)),
    "isin-scalar": lambda L, x, i: L.isin(i, 1),
    "diag_embed": lambda L, x, i: L.diag_embed(x, offset=1),
    "diag_embed-neg": lambda L, x, i: L.diag_embed(x, offset=-2),
    "block_diag": lambda L, x, i: L.block_diag(x, x[0], x[0, 0]),
    "vander": lambda L, x, i: L.vander(x[0], 3),
    "bincount": lambda L, x, i: L.bincount(i),
    "bincount-weights": lambda L, x, i: L.bincount(i, weights=x[0, :3], minlength=5),
    "histc": lambda L, x, i: L.histc(x, bins=4, min=-2, max=2),
    "cartesian_prod": lambda L, x, i: L.cartesian_prod(x[0], x[1]),
    "combinations": lambda L, x, i: L.combinations(x[0], 2),
    "pad_sequence": lambda L, x, i: L.nn.utils.rnn.pad_sequence([x[0], x[1, :2]], batch_first=True),
    "sdpa-causal": lambda L, x, i: L.nn.functional.scaled_dot_product_attention(*(x.view(1, 1, 3, 4),) * 3,
                                                                                  is_causal=True),
    "cross_entropy": lambda L, x, i: L.nn.functional.cross_entropy(x, i, label_smoothing=0.1),
    "one_hot": lambda L, x, i: L.nn.functional.one_hot(i, 4),
    "normalize": lambda L, x, i: L.nn.functional.normalize(x),
    "cdist": lambda L, x, i: L.cdist(x, x),
    "einsum": lambda L, x, i: L.einsum("ij,kj->ik", x, x),
    "unique": lambda L, x, i: L.unique(i, return_counts=True),
}


@pytest.mark.parametrize("name", list(PYTHON_LEVEL))
def test_python_level_functions(name):
    """Functions written in Python make their helper tensors on their inputs' device."""
    x = ember.from_numpy(np.linspace(-1.5, 1.5, 12).reshape(3, 4).astype(np.float32))
    i = ember.tensor([0, 2, 1])
    cpu, dev = PYTHON_LEVEL[name](ember, x, i), PYTHON_LEVEL[name](ember, x.cuda(), i.cuda())
    for c, d in zip(cpu if isinstance(cpu, tuple) else (cpu,), dev if isinstance(dev, tuple) else (dev,)):
        assert d.device == DEV0 and d.dtype == c.dtype and d.shape == c.shape
        np.testing.assert_allclose(host(d), c.numpy(), rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------------------
# autograd across devices
def test_gradient_comes_back_to_the_cpu_leaf():
    x = ember.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x.cuda()
    assert y.requires_grad and y.grad_fn is not None and y.device == DEV0
    (y * y).sum().backward()
    assert x.grad.device == ember.device("cpu")
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0, 6.0])


def test_gradient_comes_back_to_the_cuda_leaf():
    w = ember.tensor([[1.0, -1.0], [2.0, 0.5]], device="cuda", requires_grad=True)
    b = ember.zeros(2, requires_grad=True)  # a CPU leaf too
    out = (w.cpu() * 3).sum(0) + b
    out.backward(ember.tensor([1.0, 2.0]))
    assert w.grad.device == DEV0 and b.grad.device == ember.device("cpu")
    np.testing.assert_array_equal(host(w.grad), [[3.0, 6.0], [3.0, 6.0]])
    np.testing.assert_array_equal(b.grad.numpy(), [1.0, 2.0])


def test_autograd_grad_and_dtype_moves():
    x = ember.tensor([0.5, 1.5], dtype=ember.float64, requires_grad=True)
    y = x.to("cuda", ember.float32).exp().sum()
    (g,) = ember.autograd.grad(y, x)
    assert g.device == ember.device("cpu") and g.dtype == ember.float64
    np.testing.assert_allclose(g.numpy(), np.exp([0.5, 1.5]), rtol=1e-6)
    z = ember.ones(3, device="cuda", requires_grad=True)
    (z * 2).sum().backward()  # the implicit gradient of a device scalar
    assert z.grad.device == DEV0 and host(z.grad).tolist() == [2.0] * 3


def test_gradient_between_cuda0_and_cuda1():
    two_devices()
    x = ember.ones(3, device="cuda:0", requires_grad=True)
    (x.to("cuda:1") * 4).sum().backward()
    assert x.grad.device == DEV0 and host(x.grad).tolist() == [4.0] * 3


# ---------------------------------------------------------------------------
# modules and optimizers
def mlp():
    nn = ember.nn
    return nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.BatchNorm1d(16), nn.Linear(16, 8), nn.GELU(),
                         nn.Dropout(0.0), nn.Linear(8, 3))


def copy_of(model, make):
    other = make()
    other.load_state_dict(model.state_dict())
    return other


def train(model, opt_cls, x, y, steps, **opt_kw):
    opt = opt_cls(model.parameters(), **opt_kw)
    losses = []
    for _ in range(steps):
        loss = ember.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        ember.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()
        losses.append(loss.item())
    return losses, opt


def test_module_cuda_and_to():
    m = mlp()
    assert m.cuda() is m
    assert all(p.device == DEV0 and isinstance(p, ember.nn.Parameter) for p in m.parameters())
    assert all(b.device == DEV0 for b in m.buffers())  # running statistics too
    assert m.to("cpu") is m and all(p.device == ember.device("cpu") for p in m.parameters())
    m.to("cuda", ember.float64)
    assert all(p.device == DEV0 and p.dtype == ember.float64 for p in m.parameters())
    m.cpu().float()
    if ember.cuda.device_count() >= 2:
        m.cuda(1)
        assert all(p.device == DEV1 for p in m.parameters())
        assert m(ember.randn(4, 5, device="cuda:1")).device == DEV1


@pytest.mark.parametrize("opt_name,opt_kw", [("SGD", {"lr": 0.1, "momentum": 0.9}),
                                             ("AdamW", {"lr": 0.01, "weight_decay": 0.1}),
                                             ("Adam", {"lr": 0.01}), ("RMSprop", {"lr": 0.01})])
def test_mlp_training_matches_the_cpu(opt_name, opt_kw):
    """The same steps on the CPU and on the device: the same losses, weights,
    running statistics; gradients and optimizer state on the device."""
    ember.manual_seed(0)
    cpu_model = mlp()
    dev_model = copy_of(cpu_model, mlp).cuda()
    x, y = ember.randn(16, 5), ember.randint(0, 3, (16,))
    opt_cls = getattr(ember.optim, opt_name)
    cpu_losses, _ = train(cpu_model, opt_cls, x, y, 4, **opt_kw)
    dev_losses, opt = train(dev_model, opt_cls, x.cuda(), y.cuda(), 4, **opt_kw)
    np.testing.assert_allclose(dev_losses, cpu_losses, rtol=RTOL, atol=1e-6)
    assert cpu_losses[-1] < cpu_losses[0]
    for (name, c), (_, d) in zip(cpu_model.state_dict().items(), dev_model.state_dict().items()):
        assert d.device == DEV0, name
        np.testing.assert_allclose(host(d), c.numpy(), rtol=1e-4, atol=1e-5, err_msg=name)
    for p in dev_model.parameters():
        assert p.grad.device == DEV0
        for key, s in opt.state[p].items():
            if isinstance(s, ember.Tensor) and s.dim() > 0:
                assert s.device == DEV0, key


def test_gpt_training_matches_the_cpu():
    """benchmarks/gpt.py's model, tiny, with AdamW: a few steps on the device give the CPU's losses."""
    from benchmarks.gpt import make_gpt
    cfg = dict(vocab=13, block=8, n_layer=2, n_embd=16, n_head=2)
    ember.manual_seed(0)
    cpu_model = make_gpt(ember, **cfg)
    dev_model = make_gpt(OnDevice("cuda"), **cfg)  # its forward makes positions on the device
    dev_model.load_state_dict(cpu_model.state_dict())
    dev_model.cuda()
    assert dev_model.head.weight is dev_model.tok.weight  # tied weights stay tied
    x, y = ember.randint(0, 13, (4, 8)), ember.randint(0, 13, (4, 8))
    losses = {}
    for name, model, xb, yb in (("cpu", cpu_model, x, y), ("cuda", dev_model, x.cuda(), y.cuda())):
        opt = ember.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.1)
        losses[name] = []
        for _ in range(3):
            loss = model(xb, yb)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            ember.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            losses[name].append(loss.item())
    np.testing.assert_allclose(losses["cuda"], losses["cpu"], rtol=RTOL)
    assert losses["cpu"][-1] < losses["cpu"][0]
    np.testing.assert_allclose(host(dev_model.tok.weight), cpu_model.tok.weight.detach().numpy(), rtol=1e-4,
                               atol=1e-5)


def test_train_gpt_example_on_cuda(tmp_path, capsys):
    """examples/train_gpt.py --device cuda: trains, evaluates, saves and samples on the device,
    printing the losses of the same run on the CPU."""
    import pathlib
    import sys
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "examples"))
    import train_gpt
    data = tmp_path / "corpus.txt"
    data.write_text("the quick brown fox jumps over the lazy dog. " * 100)
    args = ["--data", str(data), "--steps", "6", "--batch-size", "4", "--block-size", "8", "--n-layer", "1",
            "--n-embd", "16", "--n-head", "2", "--lr", "3e-3", "--eval-interval", "6", "--eval-batches", "2",
            "--sample-chars", "10"]
    printed = {}
    for device in ("cpu", "cuda"):
        model = train_gpt.main(args + ["--device", device, "--out", str(tmp_path / f"{device}.pt")])
        printed[device] = capsys.readouterr().out
        assert all(p.device == (DEV0 if device == "cuda" else ember.device("cpu")) for p in model.parameters())
    losses = {d: [float(v) for v in re.findall(r"(?:loss|train|val) (\d+\.\d+)", text)] for d, text in printed.items()}
    assert losses["cuda"] and len(losses["cuda"]) == len(losses["cpu"])
    np.testing.assert_allclose(losses["cuda"], losses["cpu"], atol=2e-3)  # printed with 3 decimals
    ckpt = ember.load(str(tmp_path / "cuda.pt"), map_location="cpu")
    assert all(v.device == ember.device("cpu") for v in ckpt["model"].values())


# ---------------------------------------------------------------------------
# checkpoints
def roundtrip(obj, **load_kw):
    buf = io.BytesIO()
    ember.save(obj, buf)
    buf.seek(0)
    return ember.load(buf, **load_kw)


def test_save_and_load_cuda_tensors():
    ember.manual_seed(1)
    model = mlp().cuda()
    sd = model.state_dict()
    back = roundtrip(sd)  # lands where it was saved
    assert list(back) == list(sd)
    for k in sd:
        assert back[k].device == sd[k].device == DEV0, k
        np.testing.assert_array_equal(host(back[k]), host(sd[k]), err_msg=k)
    for ml in ("cpu", ember.device("cpu"), {"cuda:0": "cpu"}, lambda storage, loc: storage):
        on_cpu = roundtrip(sd, map_location=ml)
        assert all(v.device == ember.device("cpu") for v in on_cpu.values())
        np.testing.assert_array_equal(on_cpu["0.weight"].numpy(), host(sd["0.weight"]))
    fresh = mlp()
    fresh.load_state_dict(roundtrip(sd, map_location="cpu"))
    x = ember.randn(4, 5)
    model.eval(), fresh.eval()
    np.testing.assert_allclose(fresh(x).detach().numpy(), host(model(x.cuda())), rtol=1e-5, atol=1e-6)


def test_save_views_and_mixed_devices():
    g = ember.arange(12.0, device="cuda").view(3, 4)
    obj = {"g": g, "col": g[:, 1], "cpu": ember.ones(2), "to_cpu": ember.zeros(1, device="cuda")}
    back = roundtrip(obj, map_location={"cuda:0": "cuda:0"})
    assert back["g"].device == back["col"].device == DEV0 and back["cpu"].device == ember.device("cpu")
    np.testing.assert_array_equal(host(back["col"]), [1.0, 5.0, 9.0])
    back["g"][0, 1] = 100.0  # the view still shares the loaded storage
    assert back["col"][0].item() == 100.0
    cpu = ember.ones(2)
    assert roundtrip(cpu, map_location="cuda").device == DEV0
    if ember.cuda.device_count() >= 2:
        b = roundtrip({"x": ember.ones(2, device="cuda:1")})
        assert b["x"].device == DEV1
        assert roundtrip({"x": ember.ones(2, device="cuda:1")}, map_location={"cuda:1": "cuda:0"})["x"].device == DEV0


def test_cuda_checkpoint_loads_in_torch(torch):
    """torch reads ember's checkpoint of device tensors (onto its CPU with map_location)."""
    g = ember.arange(6.0, device="cuda").view(2, 3)
    buf = io.BytesIO()
    ember.save({"w": g, "t": g.t()}, buf)
    buf.seek(0)
    r = torch.load(buf, map_location="cpu")
    np.testing.assert_array_equal(r["w"].numpy(), host(g))
    np.testing.assert_array_equal(r["t"].numpy(), host(g).T)


# ---------------------------------------------------------------------------
# data loading
def test_dataloader_batches_to_cuda():
    """DataLoader(pin_memory=True) iterates (pinning itself is not implemented:
    Tensor.pin_memory is missing, batches are ordinary host tensors) and its
    batches move to the device."""
    from ember.utils.data import DataLoader, TensorDataset
    xs, ys = ember.arange(20.0).view(10, 2), ember.arange(10)
    seen = []
    for xb, yb in DataLoader(TensorDataset(xs, ys), batch_size=4, pin_memory=True):
        xb, yb = xb.cuda(non_blocking=True), yb.to("cuda", non_blocking=True)
        assert xb.device == yb.device == DEV0
        seen += host(yb).tolist()
    assert seen == list(range(10))


@pytest.mark.gpu
def test_real_gpu_is_the_backend():
    """On a real GPU: the backend is ember._cuda and a device matmul agrees with the CPU
    (cuBLAS or the fallback), which also runs on the fake."""
    assert ember._C._cuda_backend_name() == "cuda" and real_gpu()
    a, b = ember.randn(256, 128, dtype=ember.float64), ember.randn(128, 64, dtype=ember.float64)
    np.testing.assert_allclose(host(a.cuda() @ b.cuda()), (a @ b).numpy(), rtol=1e-10, atol=1e-10)


def test_memory_summary_reports_the_statistics():
    gc.collect()
    t = ember.empty(3 * 2 ** 20, dtype=ember.uint8, device="cuda")  # 3 MiB
    text = ember.cuda.memory_summary()
    stats = ember.cuda.memory_stats()
    row = next(line for line in text.splitlines() if line.startswith("Allocated memory"))
    mib = stats["allocated_bytes.all.current"] / 2 ** 20
    assert f"{mib:.2f} MiB" in row
    assert "Reserved memory" in text and "out-of-memory errors" in text
    assert "out-of-memory" not in ember.cuda.memory_summary(abbreviated=True)
    del t


def test_rng_state_all_round_trips():
    states = ember.cuda.get_rng_state_all()
    assert len(states) == ember.cuda.device_count()
    a = ember.rand(5, device="cuda")
    ember.cuda.set_rng_state_all(states)
    b = ember.rand(5, device="cuda")
    np.testing.assert_array_equal(host(a), host(b))


def test_set_stream_makes_it_current():
    s = ember.cuda.Stream()
    before = ember.cuda.current_stream()
    ember.cuda.set_stream(s)
    try:
        assert ember.cuda.current_stream() == s
    finally:
        ember.cuda.set_stream(before)
    assert ember.cuda.current_stream() == before


def test_mem_get_info_counts_the_cache_as_used():
    gc.collect()
    free0, total = ember.cuda.mem_get_info()
    assert 0 < free0 <= total
    t = ember.empty(8 * 2 ** 20, dtype=ember.uint8, device="cuda")  # 8 MiB
    free1, total1 = ember.cuda.mem_get_info(0)
    assert total1 == total
    if not real_gpu():  # the fake's free memory is exactly 1 GiB minus what the cache reserved
        assert free1 == total - ember.cuda.memory_reserved()
    else:
        assert free1 <= free0
    del t
