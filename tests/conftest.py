"""Shared, generic test helpers: `torch` fixture that skips without PyTorch."""
import importlib.util

import pytest

HAS_TORCH = importlib.util.find_spec("torch") is not None
requires_torch = pytest.mark.skipif(not HAS_TORCH, reason="torch not installed")


@pytest.fixture(scope="session")
def torch():
    """The real PyTorch module (skips the test when it is not installed)."""
    return pytest.importorskip("torch")


@pytest.fixture(scope="module")
def cuda_device():
    """'cuda': the real GPU when there is one, else the fake backend, switched
    on for the test module and off after it (Note [GPU tests], tests/cuda_common.py)."""
    from cuda_common import cuda_backend
    with cuda_backend() as device:
        yield device


def pytest_runtest_setup(item):
    """@pytest.mark.gpu: only on a real GPU (the fake backend runs the CPU kernels)."""
    if item.get_closest_marker("gpu"):
        from cuda_common import real_gpu
        if not real_gpu():
            pytest.skip("needs a real GPU (the fake CUDA backend only runs CPU kernels)")
