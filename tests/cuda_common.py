"""What the CUDA tests share (tests/test_cuda_*.py): which backend runs them,
and a stand-in for the `ember` module that makes its tensors on the device.

Note [GPU tests]: with a real GPU (ember._cuda loaded, a device found) the
tests run on it. Without one they switch on the fake backend (Note [fake
CUDA] in csrc/testing/cuda_fake.c, the extension ember._cuda_fake: two
"devices" in host memory, filled with garbage on alloc/free) for the test
module and off again after (use_fake_backend), so every
layer above the kernels — device checks, copies, the CPU fallback,
autograd, modules, optimizers — is exercised on any machine. Tests marked
@pytest.mark.gpu need the real thing and skip on the fake.
"""
import contextlib
import functools
import gc
import sys

import ember

_real = None


def real_gpu():
    """True when ember's real CUDA backend loads and sees a GPU (asked once,
    before any test switches the fake on)."""
    global _real
    if _real is None:
        _real = ember._C._cuda_backend_name() == "cuda" and ember._C._cuda_device_count() > 0
    return _real


def use_fake_backend(on):
    """The fake backend on (from its start: devices, counters and streams
    reset) or off: ember._C takes its table from the capsule
    ember._cuda_fake._backend, as it takes ember._cuda's. Switching on while
    CUDA storages are alive raises RuntimeError."""
    if on:
        from ember import _cuda_fake
        ember._C._cuda_use_backend("ember._cuda_fake")
        _cuda_fake.reset()
    else:
        ember._C._cuda_use_backend(None)


def fake_counters():
    """The fake's launch counts by entry (ember._cuda_fake.counters())."""
    from ember import _cuda_fake
    return _cuda_fake.counters()


def collect():
    """Free every CUDA storage the tests let go of (also the ones a failed
    test's traceback, kept by pytest in sys.last_*, still holds)."""
    for name in ("last_type", "last_value", "last_traceback", "last_exc"):
        if hasattr(sys, name):
            setattr(sys, name, None)
    gc.collect()


@contextlib.contextmanager
def cuda_backend():
    """'cuda' on the real backend, or on the fake one for the duration."""
    if real_gpu():
        yield "cuda"
        return
    collect()
    use_fake_backend(True)
    try:
        yield "cuda"
    finally:
        collect()
        ember.cuda.set_device(0)
        use_fake_backend(False)  # RuntimeError: a test leaked CUDA tensors


@contextlib.contextmanager
def no_cuda_backend():
    """Neither backend: what a machine without a GPU sees."""
    collect()
    use_fake_backend(False)
    yield


# Functions that make new tensors from nothing: on the device, they take device=.
FACTORIES = frozenset({
    "tensor", "as_tensor", "zeros", "ones", "empty", "full", "arange", "range", "linspace", "logspace",
    "eye", "rand", "randn", "randint", "randperm", "empty_strided", "tril_indices", "triu_indices",
    "normal", "scalar_tensor", "bartlett_window", "hann_window", "hamming_window", "blackman_window"})


class OnDevice:
    """`ember`, except that new tensors are made on `device`: from_numpy()
    copies to it, factories and Generator() get device= (unless the caller gives one). Test
    code written as `L.op(...)` for a library L runs on the device with it."""

    def __init__(self, device, keep_integers_on_cpu=False):
        self.device = device
        self.keep_integers_on_cpu = keep_integers_on_cpu  # index-like arrays stay host tensors

    def __getattr__(self, name):
        value = getattr(ember, name)
        if name == "Generator":  # a generator for the device's tensors, as torch requires
            return lambda device=None: ember.Generator(device=device or self.device)
        if name == "from_numpy":
            return lambda a: ember.from_numpy(a) if self.keep_integers_on_cpu and a.dtype.kind in "iub" \
                else ember.from_numpy(a).to(self.device)
        if name in FACTORIES and callable(value) and not (self.keep_integers_on_cpu and name == "tensor"):
            @functools.wraps(value)
            def on_device(*args, **kwargs):
                if kwargs.get("device") is None and kwargs.get("out") is None:
                    kwargs["device"] = self.device
                return value(*args, **kwargs)
            return on_device
        return value

    def __repr__(self):
        return f"<ember on {self.device}>"


class native:
    """Asserts that none of the named ops took Note [CUDA fallback] inside the
    block and, on the fake backend, that the backend entries named in
    `entries` ran (ember._cuda_fake.counters())."""

    def __init__(self, *ops, entries=()):
        self.ops, self.entries = ops, entries

    def __enter__(self):
        ember._C._cuda_fallback_counts(True)
        self.fake = ember._C._cuda_backend_name() == "fake"
        self.before = fake_counters() if self.fake else None

    def __exit__(self, *exc):
        counts = ember._C._cuda_fallback_counts(True)
        if exc[0] is None:
            fell = {op: counts[op] for op in self.ops if op in counts}
            assert not fell, f"took the fallback: {fell}"
            if self.fake:
                after = fake_counters()
                for e in self.entries:
                    assert after[e] > self.before[e], f"the backend entry {e} did not run"
