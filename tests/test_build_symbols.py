"""What the built extensions export and contain (setup.py: every extension is
compiled with -fvisibility=hidden, ember._cuda linked with
csrc/cuda/exports.map).

- ember._C exports one dynamic symbol, PyInit__C: the core's C functions
  are reached only from inside it, or through its capsules.
- The CUDA test double (Note [fake CUDA]) is not part of ember._C: none of
  its functions or messages are in the file. It is the separate extension
  ember._cuda_fake, which exports only PyInit__cuda_fake and links nothing
  of the core (it borrows the core's kernels through Note [host API]).
- ember._cuda, when built, exports only PyInit__cuda.

Read with binutils' nm; skipped where there is none.
"""
import importlib
import importlib.util
import shutil
import subprocess

import pytest

NM = shutil.which("nm")
pytestmark = pytest.mark.skipif(NM is None, reason="nm (binutils) not found")


def so_path(module):
    return importlib.import_module(module).__file__


def dynamic_symbols(path, which):
    """Names of the dynamic symbols of a shared object: which is
    '--defined-only' or '--undefined-only'."""
    out = subprocess.run([NM, "-D", which, path], capture_output=True, text=True, check=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.strip()}


def test_core_exports_only_its_init():
    assert dynamic_symbols(so_path("ember._C"), "--defined-only") == {"PyInit__C"}


def test_core_does_not_contain_the_fake_backend():
    data = open(so_path("ember._C"), "rb").read()
    # the fake's entry points (static functions, named in the symbol table and
    # debug info of any object that holds them), its messages, its module
    for s in (b"fake_alloc", b"fake_memcpy", b"fake_elementwise", b"ember fake CUDA device",
              b"the fake device holds at most 1 GiB", b"_cuda_fake_counters", b"_cuda_fake_kernel_calls",
              b"_cuda_use_fake_backend", b"PyInit__cuda_fake"):
        assert s not in data, s


def test_fake_backend_is_its_own_extension():
    path = so_path("ember._cuda_fake")
    assert dynamic_symbols(path, "--defined-only") == {"PyInit__cuda_fake"}
    borrowed = {s for s in dynamic_symbols(path, "--undefined-only") if s.startswith(("em_", "Em"))}
    assert not borrowed, f"links core symbols (ember._C exports none): {sorted(borrowed)}"
    data = open(path, "rb").read()
    assert b"ember fake CUDA device" in data and b"ember._cuda_fake._backend" in data


def test_cuda_extension_exports_only_its_init():
    if importlib.util.find_spec("ember._cuda") is None:
        pytest.skip("ember._cuda was not built (no nvcc at build time)")
    try:
        path = so_path("ember._cuda")
    except ImportError as e:  # built, but its CUDA libraries do not load here
        pytest.skip(f"ember._cuda does not import: {e}")
    assert dynamic_symbols(path, "--defined-only") == {"PyInit__cuda"}


def test_fake_backend_is_installed_through_its_capsule():
    """ember._C takes the fake's table from the capsule ember._cuda_fake._backend,
    as it takes ember._cuda's; a name that is no backend module is refused."""
    import gc

    import ember
    from cuda_common import use_fake_backend
    gc.collect()
    assert ember._C._cuda_live_storages() == 0
    use_fake_backend(True)
    try:
        assert ember._C._cuda_backend_name() == "fake"
        assert ember.cuda.device_count() == 2
        x = ember.arange(4.0).cuda(1)
        assert (x * 2).cpu().tolist() == [0.0, 2.0, 4.0, 6.0]
        del x
    finally:
        gc.collect()
        use_fake_backend(False)
    with pytest.raises(TypeError, match="module name or None"):
        ember._C._cuda_use_backend(3)
    with pytest.raises(ModuleNotFoundError):
        ember._C._cuda_use_backend("ember._no_such_backend")
    with pytest.raises(AttributeError):  # a module without a _backend capsule
        ember._C._cuda_use_backend("ember.cuda")
    ember._C._cuda_use_backend(None)
