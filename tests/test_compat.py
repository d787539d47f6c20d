"""The compatibility surface scripts touch on a CPU machine: ember.cuda's
queries, autocast switching (its casts: test_amp.py), GradScaler
(real loss scaling when enabled on 'cpu', disabled for 'cuda' without a GPU),
ember.compile (the identity), backends switches, matmul precision."""
import warnings

import numpy as np
import pytest

import ember
from ember import nn


@pytest.mark.skipif(ember.cuda.is_available(), reason="a GPU is present: tests/test_cuda_runtime.py covers it")
def test_cuda_queries():
    assert ember.cuda.is_available() is False and ember.cuda.device_count() == 0
    ember.cuda.manual_seed_all(0)  # accepted, as torch does without a GPU
    ember.cuda.empty_cache()
    assert ember.cuda.memory_allocated() == 0
    with pytest.raises(RuntimeError, match="CUDA"):
        ember.cuda.synchronize()


def test_autocast_context_and_decorator():
    """torch's semantics: is_autocast_enabled() with no argument is CUDA's."""
    assert not ember.is_autocast_enabled("cpu")
    with ember.autocast(device_type="cpu", dtype=ember.bfloat16):
        assert ember.is_autocast_enabled("cpu") and not ember.is_autocast_enabled()
        with ember.amp.autocast("cpu", enabled=False):
            assert not ember.is_autocast_enabled("cpu")
        assert ember.is_autocast_enabled("cpu")
    assert not ember.is_autocast_enabled("cpu")

    @ember.autocast("cpu")
    def f(x):
        return ember.is_autocast_enabled("cpu"), x * 2
    on, y = f(ember.ones(2))
    assert on and y.dtype == ember.float32  # mul has no autocast policy
    with pytest.raises(RuntimeError):
        ember.autocast("tpu")
    if not ember.cuda.is_available():
        with pytest.warns(UserWarning, match="CUDA is not available"):
            with ember.cuda.amp.autocast():
                assert not ember.is_autocast_enabled()


def test_grad_scaler_disabled_for_cuda_without_gpu():
    with pytest.warns(UserWarning, match="CUDA is not available"):
        s = ember.amp.GradScaler()
    assert not s.is_enabled() and s.get_scale() == 1.0 and s.state_dict() == {}
    loss = ember.tensor(2.0)
    assert s.scale(loss) is loss
    m = nn.Linear(2, 1)

    class Opt:
        param_groups = [{"params": list(m.parameters())}]
        steps = 0

        def step(self):
            Opt.steps += 1
    s.step(Opt())
    s.update()
    assert Opt.steps == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ember.amp.GradScaler(enabled=False)  # no warning when disabled on purpose


def _sgd_like(params):
    class Opt:
        param_groups = [{"params": params}]
        steps = 0

        def step(self):
            self.steps += 1
    return Opt()


def test_grad_scaler_on_cpu_scales_skips_and_adapts():
    s = ember.amp.GradScaler("cpu", init_scale=8.0, growth_interval=2)
    p = nn.Parameter(ember.tensor([1.0, 2.0]))
    opt = _sgd_like([p])
    loss = (p * ember.tensor([3.0, 4.0])).sum_to_size(())
    scaled = s.scale(loss)
    assert float(scaled) == 8.0 * 11.0
    scaled.backward()
    np.testing.assert_array_equal(p.grad.numpy(), [24.0, 32.0])
    s.unscale_(opt)
    np.testing.assert_array_equal(p.grad.numpy(), [3.0, 4.0])
    with pytest.raises(RuntimeError, match="already been called"):
        s.unscale_(opt)
    s.step(opt)
    s.update()
    assert opt.steps == 1 and s.get_scale() == 8.0  # one clean step of growth_interval 2
    p.grad = ember.tensor([float("inf"), 1.0])
    s.step(opt)  # unscales, finds inf, skips
    s.update()
    assert opt.steps == 1 and s.get_scale() == 4.0
    for _ in range(2):
        p.grad = ember.tensor([1.0, 1.0])
        s.step(opt)
        s.update()
    assert opt.steps == 3 and s.get_scale() == 8.0  # grew after 2 clean steps
    sd = s.state_dict()
    assert sd["scale"] == 8.0 and sd["_growth_tracker"] == 0
    s2 = ember.amp.GradScaler("cpu")
    s2.load_state_dict(sd)
    assert s2.get_scale() == 8.0
    with pytest.raises(RuntimeError, match="empty"):
        s2.load_state_dict({})
    with pytest.raises(ValueError):
        ember.amp.GradScaler("cpu", growth_factor=0.5)


def test_compile_backends_precision():
    m = nn.Linear(2, 2)
    assert ember.compile(m) is m

    @ember.compile(mode="max-autotune")
    def f(x):
        return x + 1
    assert float(f(ember.tensor(1.0))) == 2.0
    ember.backends.cuda.matmul.allow_tf32 = True
    ember.backends.cudnn.benchmark = True
    assert ember.backends.cuda.matmul.allow_tf32 and not ember.backends.mps.is_available()
    ember.set_float32_matmul_precision("high")
    assert ember.get_float32_matmul_precision() == "high"
    ember.set_float32_matmul_precision("highest")
    with pytest.raises(RuntimeError):
        ember.set_float32_matmul_precision("fast")
    n = ember.get_num_threads()
    ember.set_num_threads(1)
    assert ember.get_num_threads() == 1
    ember.set_num_threads(n)
    assert isinstance(ember.__version__, str)
