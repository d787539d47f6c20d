"""Shared, generic test helpers: `torch` fixture that skips without PyTorch."""
import importlib.util

import pytest

HAS_TORCH = importlib.util.find_spec("torch") is not None
requires_torch = pytest.mark.skipif(not HAS_TORCH, reason="torch not installed")


@pytest.fixture(scope="session")
def torch():
    """The real PyTorch module (skips the test when it is not installed)."""
    return pytest.importorskip("torch")


@pytest.fixture(params=["ember", "torch"])
def L(request):
    """The library under test: ember, then torch (skipped when not installed)."""
    import ember
    if request.param == "torch":
        return pytest.importorskip("torch")
    return ember


@pytest.fixture(scope="module")
def cuda_device():
    """'cuda': the real GPU when there is one, else the fake backend, switched
    on for the test module and off after it (Note [GPU tests], tests/cuda_common.py)."""
    from cuda_common import cuda_backend
    with cuda_backend() as device:
        yield device


@pytest.fixture
def cuda():
    """'real' on a GPU with ember._cuda, else 'fake': the fake backend (Note
    [fake CUDA]) switched on for the test's duration."""
    import gc
    import ember
    from ember import _C
    if ember.cuda.is_available() and _C._cuda_backend_name() == "cuda":
        yield "real"
        return
    from cuda_common import use_fake_backend
    try:
        use_fake_backend(True)
    except RuntimeError:  # CUDA storages of an earlier test wait in garbage cycles
        gc.collect()
        use_fake_backend(True)
    try:
        yield "fake"
    finally:
        # the test's own garbage is young: a full collection of the whole
        # session's heap (~0.5M objects, ~160 ms) per test made the suite
        # spend most of its time in gc; storages still alive after this are
        # freed by the retired fake later (Note [fake CUDA])
        gc.collect(1)
        use_fake_backend(False)


def pytest_runtest_setup(item):
    """@pytest.mark.gpu: only on a real GPU (the fake backend runs the CPU kernels)."""
    if item.get_closest_marker("gpu"):
        from cuda_common import real_gpu
        if not real_gpu():
            pytest.skip("needs a real GPU (the fake CUDA backend only runs CPU kernels)")


@pytest.fixture(params=[1, 2])
def ember_threads(request):
    """ember's thread count for the test: 1, then 2; restored after."""
    import ember
    before = ember.get_num_threads()
    ember.set_num_threads(request.param)
    yield request.param
    ember.set_num_threads(before)
