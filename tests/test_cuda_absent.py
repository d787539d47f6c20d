"""A machine without CUDA (neither ember._cuda with a GPU nor the fake
backend): ember.cuda says so, and every CUDA request is a RuntimeError
saying why, never a crash. Skips on a machine with a real GPU."""
import io

import pytest

import ember
from cuda_common import no_cuda_backend, real_gpu

pytestmark = pytest.mark.skipif(real_gpu(), reason="a real GPU is present")


@pytest.fixture(autouse=True, scope="module")
def without_cuda():
    with no_cuda_backend():
        yield


def test_queries_say_no_gpu():
    assert ember.cuda.is_available() is False
    assert ember.cuda.device_count() == 0 and not ember.cuda.is_initialized()
    assert ember.cuda.is_bf16_supported() is False
    assert ember.cuda.memory_allocated() == 0 and ember.cuda.max_memory_reserved() == 0
    assert ember.cuda.memory_stats() == {}
    ember.cuda.empty_cache()  # nothing cached: a no-op
    ember.cuda.reset_peak_memory_stats()
    ember.cuda.manual_seed(1)  # seeds the CPU generator the fallback draws from; no GPU needed


@pytest.mark.parametrize("request_cuda", [
    lambda: ember.zeros(2, device="cuda"), lambda: ember.ones(2, device="cuda:0"),
    lambda: ember.tensor([1.0], device="cuda"), lambda: ember.arange(3, device=ember.device("cuda")),
    lambda: ember.randn(2, device="cuda"), lambda: ember.zeros_like(ember.ones(2), device="cuda"),
    lambda: ember.ones(2).cuda(), lambda: ember.ones(2).to("cuda"), lambda: ember.ones(2).to("cuda:1"),
    lambda: ember.ones(2).to("cuda", ember.float64), lambda: ember.nn.Linear(2, 2).cuda(),
    lambda: ember.nn.Linear(2, 2).to("cuda"), lambda: ember.cuda.current_device(), lambda: ember.cuda.init(),
    lambda: ember.cuda.set_device(0), lambda: ember.cuda.synchronize(), lambda: ember.cuda.get_device_name(),
    lambda: ember.cuda.get_device_properties(0), lambda: ember.cuda.Stream(), lambda: ember.cuda.current_stream(),
    lambda: ember.cuda.Event(enable_timing=True).record(),
], ids=["zeros", "ones-cuda:0", "tensor", "arange-device", "randn", "zeros_like", "Tensor.cuda", "to-cuda",
        "to-cuda:1", "to-cuda-dtype", "Module.cuda", "Module.to", "current_device", "init", "set_device",
        "synchronize", "get_device_name", "get_device_properties", "Stream", "current_stream", "Event.record"])
def test_cuda_requests_raise(request_cuda):
    with pytest.raises(RuntimeError, match="cuda|CUDA"):
        request_cuda()


def test_cpu_work_is_untouched():
    x = ember.ones(3, requires_grad=True)
    (x * 2).sum().backward()
    assert x.grad.tolist() == [2.0] * 3 and x.device == ember.device("cpu") and not x.is_cuda
    assert x.to("cpu") is x and x.cpu() is x


def test_cuda_checkpoint_needs_map_location():
    """A checkpoint of device tensors (saved with the fake backend) loads on
    the CPU with map_location, and says why without it."""
    from cuda_common import cuda_backend
    buf = io.BytesIO()
    with cuda_backend():
        ember.save({"w": ember.arange(4.0, device="cuda")}, buf)
    buf.seek(0)
    with pytest.raises(RuntimeError, match="map_location"):
        ember.load(buf)
    buf.seek(0)
    assert ember.load(buf, map_location="cpu")["w"].tolist() == [0.0, 1.0, 2.0, 3.0]
