"""Shared, generic test helpers: `torch` fixture that skips without PyTorch."""
import importlib.util

import pytest

HAS_TORCH = importlib.util.find_spec("torch") is not None
requires_torch = pytest.mark.skipif(not HAS_TORCH, reason="torch not installed")


@pytest.fixture(scope="session")
def torch():
    """The real PyTorch module (skips the test when it is not installed)."""
    return pytest.importorskip("torch")
