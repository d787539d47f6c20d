"""GPU tensors crossing ember's edges: checkpoints (locations, map_location),
pinned memory and the DataLoader's pin_memory, DLPack on the device, and
autocast on 'cuda'. Run on the real backend when a GPU is present, else on
Note [fake CUDA] (host memory behind the CUDA interface); values are checked
against NumPy."""
import io

import numpy as np
import pytest

import ember
import ember._cuda_fake




def _arr(seed, *shape):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_checkpoint_keeps_locations_and_maps_them(cuda):
    a, b = _arr(0, 3, 4), _arr(1, 4)
    sd = {"w": ember.tensor(a).cuda(), "b": ember.tensor(b).to("cuda:1"), "c": ember.tensor(b)}
    buf = io.BytesIO()
    ember.save(sd, buf)
    buf.seek(0)
    back = ember.load(buf)
    assert str(back["w"].device) == "cuda:0" and str(back["b"].device) == "cuda:1"
    assert back["c"].device.type == "cpu"
    np.testing.assert_array_equal(back["w"].cpu().numpy(), a)
    np.testing.assert_array_equal(back["b"].cpu().numpy(), b)
    buf.seek(0)
    on_cpu = ember.load(buf, map_location="cpu")
    assert all(t.device.type == "cpu" for t in on_cpu.values())
    np.testing.assert_array_equal(on_cpu["w"].numpy(), a)
    buf.seek(0)
    moved = ember.load(buf, map_location={"cuda:1": "cuda:0"})
    assert str(moved["b"].device) == "cuda:0"
    buf.seek(0)
    with pytest.raises(RuntimeError, match="device_count"):
        ember.load(buf, map_location="cuda:7")


def test_views_sharing_a_gpu_storage_stay_shared(cuda):
    base = ember.arange(12.0).cuda()
    buf = io.BytesIO()
    ember.save([base, base[2:8].view(2, 3)], buf)
    buf.seek(0)
    x, v = ember.load(buf)
    v[0, 0] = 100.0
    assert x[2].item() == 100.0 and v.device == x.device


def test_pin_memory_and_non_blocking_copies(cuda):
    a = _arr(2, 5, 6)
    t = ember.tensor(a)
    assert not t.is_pinned()
    p = t.pin_memory()
    assert p.is_pinned() and p.device.type == "cpu" and p.pin_memory() is p
    np.testing.assert_array_equal(p.numpy(), a)
    d = p.to("cuda", non_blocking=True)
    ember.cuda.synchronize()
    np.testing.assert_array_equal(d.cpu().numpy(), a)
    with pytest.raises(RuntimeError, match="pin"):
        d.pin_memory()


def test_dataloader_pins_batches(cuda):
    from ember.utils.data import DataLoader, TensorDataset
    xs, ys = ember.tensor(_arr(3, 8, 2)), ember.arange(8)
    batches = list(DataLoader(TensorDataset(xs, ys), batch_size=4, pin_memory=True))
    assert len(batches) == 2 and all(x.is_pinned() and y.is_pinned() for x, y in batches)
    np.testing.assert_array_equal(batches[1][0].numpy(), xs.numpy()[4:])


def test_dlpack_round_trip_on_the_device(cuda):
    a = _arr(4, 3, 5)
    d = ember.tensor(a).cuda()
    assert d.__dlpack_device__() == (2, 0)
    back = ember.from_dlpack(d.__dlpack__())
    assert back.device == d.device and back.data_ptr() == d.data_ptr()  # shared, not copied
    back[0, 0] = 7.0
    assert d[0, 0].item() == 7.0


def test_autocast_on_cuda_uses_the_cuda_lists(cuda):
    x = ember.tensor(_arr(5, 4, 8)).cuda().requires_grad_()
    w = ember.tensor(_arr(6, 8, 8)).cuda().requires_grad_()
    with ember.autocast("cuda"):
        assert ember.is_autocast_enabled() and not ember.is_autocast_enabled("cpu")
        y = x @ w
        assert y.dtype == ember.float16 and y.is_cuda
        assert y.exp().dtype == ember.float32  # exp is on CUDA's float32 list
        assert ember.softmax(y, -1).dtype == ember.float32
        c = ember.ones(2, 2) @ ember.ones(2, 2)  # CPU tensors: CPU autocast is off
        assert c.dtype == ember.float32
    with ember.autocast("cuda", dtype=ember.bfloat16):
        assert (x @ w).dtype == ember.bfloat16
    y.float().sum().backward()
    assert x.grad.dtype == ember.float32 and x.grad.is_cuda
    ref = np.ones((4, 8), np.float32) @ w.detach().cpu().numpy().astype(np.float16).astype(np.float32).T
    np.testing.assert_allclose(x.grad.cpu().numpy(), ref, rtol=1e-2, atol=1e-2)


def test_grad_scaler_on_cuda_skips_inf_steps(cuda):
    m = ember.nn.Linear(3, 1).cuda()
    opt = ember.optim.SGD(m.parameters(), lr=0.1)
    scaler = ember.amp.GradScaler("cuda", init_scale=4.0)
    assert scaler.is_enabled()
    w0 = m.weight.detach().cpu().numpy().copy()
    loss = m(ember.full((2, 3), float("inf"), device="cuda")).sum()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    np.testing.assert_array_equal(m.weight.detach().cpu().numpy(), w0)  # skipped
    assert scaler.get_scale() == 2.0
    opt.zero_grad()
    loss = m(ember.ones(2, 3, device="cuda")).sum()
    scaler.scale(loss).backward()
    scaler.step(opt)
    # d loss / d w = 2 for each weight: one SGD step moves every weight by -0.2
    np.testing.assert_allclose(m.weight.detach().cpu().numpy(), w0 - 0.2, rtol=1e-6, atol=1e-6)


def test_fallback_counts_name_the_ops_without_a_gpu_kernel(cuda):
    _C = ember._C
    x = ember.tensor([[3.0, 1.0], [2.0, 5.0]], device="cuda")
    _C._cuda_fallback_counts(True)
    (x + 1).sum()  # elementwise and reduction kernels: no fallback
    assert _C._cuda_fallback_counts(False) == {}
    # an op with no GPU kernel here: a scan (counted once per call)
    before = _C._cuda_fallback_counts(False).get("cumsum", 0)
    y = x.cumsum(1)
    ember.cumsum(x, 0)
    np.testing.assert_allclose(y.cpu().numpy(), [[3, 4], [2, 7]])
    counts = _C._cuda_fallback_counts(True)
    assert counts.get("cumsum", 0) - before in (0, 2)  # 0 once scans get a kernel
    assert _C._cuda_fallback_counts(False) == {}


def test_record_stream_names_the_memory_to_the_allocator(cuda):
    x = ember.ones(1000, device="cuda")
    s = ember.cuda.Stream()
    if cuda == "fake":
        before = ember._cuda_fake.counters()["record_stream"]
    with ember.cuda.stream(s):
        y = x * 2  # x is read on s
    x.record_stream(s)
    x[10:].record_stream(s)  # a view names its storage
    if cuda == "fake":
        assert ember._cuda_fake.counters()["record_stream"] == before + 2
    del x  # the block waits for s's work before it is reused
    s.synchronize()
    np.testing.assert_array_equal(y.cpu().numpy(), np.full(1000, 2.0, np.float32))
    with pytest.raises(RuntimeError, match="CPU tensor"):
        ember.ones(3).record_stream(s)
    with pytest.raises(TypeError, match="Stream"):
        y.record_stream(3)
    if ember.cuda.device_count() > 1:
        with pytest.raises(RuntimeError, match="cuda:1"):
            ember.ones(3, device="cuda:1").record_stream(s)
