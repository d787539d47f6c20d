"""ember._cuda, the real CUDA backend (csrc/cuda), reached directly through
its EmCudaBackend table (csrc/cuda_backend.h) with ctypes, so each entry is
checked on its own, below the core.

Without a GPU (this file's first part): the module imports when it was built,
its capsule holds the table, nothing calls into CUDA at import, the device
count is 0, every entry fails cleanly instead of crashing, and a CUDA request
through ember raises RuntimeError. With a GPU (the `gpu` tests, skipped
otherwise): allocation and the caching allocator's statistics, copy round
trips, the strided copy-and-cast kernel for all 10x10 dtype pairs against
NumPy's casts, streams and events, and cuBLAS products against NumPy.
Two parts run GPU code's logic on the CPU: the caching allocator on a stub
CUDA runtime, and the copy kernel's per-element rules (copy_rules.h) driven
element by element. The whole file is skipped when ember._cuda was not
built (no nvcc).
"""
import ctypes as C
import os
import re
import shutil
import subprocess

import numpy as np
import pytest

import ember

try:
    import ember._cuda as ember_cuda
except ModuleNotFoundError:
    pytest.skip("ember._cuda was not built (no nvcc at build time)", allow_module_level=True)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# ------------------------------------------------- the table, seen by ctypes

F = C.CFUNCTYPE
VP = C.c_void_p
I64P = C.POINTER(C.c_int64)


class Props(C.Structure):
    _fields_ = [("name", C.c_char * 256), ("total_memory", C.c_int64), ("major", C.c_int),
                ("minor", C.c_int), ("multi_processor_count", C.c_int),
                ("l2_cache_size", C.c_int64), ("warp_size", C.c_int)]


class Stats(C.Structure):
    _fields_ = [(n, C.c_int64) for n in ("allocated", "max_allocated", "reserved", "max_reserved",
                                         "num_alloc_retries", "num_ooms")]


class Backend(C.Structure):
    """Mirror of struct EmCudaBackend, entry for entry."""
    _fields_ = [
        ("abi", C.c_int), ("name", C.c_char_p), ("last_error", F(C.c_char_p)),
        ("device_count", F(C.c_int)), ("current_device", F(C.c_int)),
        ("set_device", F(C.c_int, C.c_int)),
        ("device_props", F(C.c_int, C.c_int, C.POINTER(Props))),
        ("synchronize", F(C.c_int, C.c_int)),
        ("alloc", F(VP, C.c_int, C.c_size_t, VP)),
        ("free", F(None, C.c_int, VP, C.c_size_t, VP)),
        ("memory_stats", F(None, C.c_int, C.POINTER(Stats))),
        ("reset_peak_stats", F(None, C.c_int)), ("empty_cache", F(C.c_int)),
        ("host_alloc", F(VP, C.c_size_t)), ("host_free", F(None, VP)),
        ("memcpy", F(C.c_int, VP, C.c_int, VP, C.c_int, C.c_size_t, C.c_bool)),
        ("stream_create", F(C.c_int, C.c_int, C.c_int, C.POINTER(VP))),
        ("stream_destroy", F(None, C.c_int, VP)),
        ("stream_synchronize", F(C.c_int, C.c_int, VP)),
        ("stream_query", F(C.c_int, C.c_int, VP)),
        ("current_stream", F(VP, C.c_int)),
        ("set_current_stream", F(C.c_int, C.c_int, VP)),
        ("stream_wait_event", F(C.c_int, C.c_int, VP, VP)),
        ("event_create", F(C.c_int, C.c_int, C.c_bool, C.POINTER(VP))),
        ("event_destroy", F(None, C.c_int, VP)),
        ("event_record", F(C.c_int, C.c_int, VP, VP)),
        ("event_synchronize", F(C.c_int, C.c_int, VP)),
        ("event_query", F(C.c_int, C.c_int, VP)),
        ("event_elapsed_ms", F(C.c_int, C.c_int, VP, VP, C.POINTER(C.c_float))),
        ("copy_strided", F(C.c_int, C.c_int, C.c_int, I64P, VP, C.c_int, I64P, VP, C.c_int, I64P)),
        ("gemm", F(C.c_int, C.c_int, C.c_int, C.c_bool, C.c_bool, C.c_int64, C.c_int64, C.c_int64,
                   C.c_double, VP, C.c_int64, C.c_int64, VP, C.c_int64, C.c_int64, C.c_double, VP,
                   C.c_int64, C.c_int64, C.c_int64, C.c_bool)),
        ("has_elementwise", F(C.c_bool, C.c_char_p, C.c_int)),
        ("elementwise", F(C.c_int, C.c_int, VP)),
        ("random_fill", F(C.c_int, C.c_int, C.c_int, C.c_int, VP, C.c_int64, C.c_uint64, C.c_uint64,
                          C.c_double, C.c_double, C.c_int64, C.c_uint64)),
    ] + [(name, VP) for name in (  # the fused nn kernels: tested by tests/test_cuda_nn_fused.py
        "softmax", "softmax_backward", "layer_norm", "layer_norm_backward", "cross_entropy",
        "cross_entropy_backward", "adam", "embedding", "embedding_backward",
        "has_reduce", "reduce",  # the reductions: tests/test_cuda_reduce.py
        "record_stream")]
    _fields_ += [(name, VP) for name in (  # indexing: tests/test_cuda_index.py
        "index_offsets", "index_gather", "index_put", "scatter_gather", "nonzero_scan", "nonzero_fill")]
    _fields_ += [(name, VP) for name in (  # sort and scan: tests/test_cuda_sort.py
        "sort_rows", "select_rows", "scan", "search", "unique")]
    _fields_ += [(name, VP) for name in (  # shape kernels: tests/test_cuda_shape.py
        "arange_fill", "linspace_fill", "tri_mask", "repeat_interleave")]
    _fields_ += [(name, VP) for name in (  # attention: tests/test_cuda_attention.py
        "attention_forward", "attention_backward")]
    _fields_ += [(name, VP) for name in (  # dropout, NLL, norm runs, pools: tests/test_cuda_nn_kernels.py
        "dropout", "nll_loss", "nll_loss_backward", "norm_runs_stats", "norm_runs_affine", "max_pool2d",
        "max_pool2d_backward", "avg_pool2d")]
    _fields_ += [(name, VP) for name in (  # attention extras: tests/test_cuda_attention_mem.py
        "attention_forward_ex", "attention_backward_ex")]
    _fields_ += [(name, VP) for name in (  # randperm, unique dim, bias: tests/test_cuda_factories_unique_bias.py
        "randperm", "unique_dim", "gemm_bias")]
    _fields_ += [(name, VP) for name in (  # convolution and upsampling: tests/test_cuda_conv.py
        "im2col", "col2im", "interp_nearest", "interp")]
    _fields_ += [("mem_get_info", VP)]  # runtime (lead): ember.cuda.mem_get_info


def _backend():
    get = C.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = C.c_void_p, [C.py_object, C.c_char_p]
    return Backend.from_address(get(ember_cuda._backend, b"ember._cuda._backend"))


B = _backend()
HAS_GPU = B.device_count() > 0
gpu = pytest.mark.skipif(not HAS_GPU, reason="needs a CUDA GPU and driver")


def error():
    return B.last_error().decode()


def ints(values):
    values = list(values)
    return (C.c_int64 * max(1, len(values)))(*values)


def stats(dev=0):
    s = Stats()
    B.memory_stats(dev, C.byref(s))
    return s


# ---------------------------------------------------------------- no GPU needed

def test_capsule_holds_the_table_of_this_core():
    header = open(os.path.join(ROOT, "csrc", "cuda_backend.h")).read()
    abi = int(re.search(r"#define EM_CUDA_ABI (\d+)", header).group(1))
    assert B.abi == abi and B.name == b"cuda"
    assert ember_cuda.cuda_runtime_version >= 12000
    # one entry past the last must be the end of the struct: count them in the header
    entries = re.findall(r"\(\*(\w+)\)\(", header)
    assert entries == [n for n, _ in Backend._fields_[2:]]


def test_device_count_agrees_with_ember_cuda():
    assert B.device_count() == ember.cuda.device_count()
    assert ember.cuda.is_available() == HAS_GPU
    assert ember._C._cuda_backend_name() == "cuda"


@pytest.mark.skipif(HAS_GPU, reason="checks the behaviour without a GPU")
def test_without_gpu_every_entry_fails_cleanly():
    assert B.device_count() == 0 and B.current_device() == 0
    assert B.set_device(0) == -1 and "invalid device ordinal" in error()
    assert B.alloc(0, 1024, None) is None and "invalid device ordinal" in error()
    assert B.synchronize(0) == -1
    assert B.device_props(0, C.byref(Props())) == -1
    s = VP()
    assert B.stream_create(0, 0, C.byref(s)) == -1
    assert B.event_create(0, True, C.byref(s)) == -1
    assert B.stream_query(0, None) == -1 and B.event_query(0, None) == -1
    assert B.host_alloc(64) is None and "pinned memory" in error()
    assert B.empty_cache() == 0
    assert stats().allocated == 0 and stats().reserved == 0
    B.free(0, None, 0, None)  # no-op
    sizes = ints([4])
    assert B.copy_strided(0, 1, sizes, 1, 8, ints([1]), 1, 8, ints([1])) == -1
    assert "invalid device ordinal" in error()
    assert B.gemm(0, 8, False, False, 2, 2, 2, 1.0, 1, 2, 0, 1, 2, 0, 0.0, 1, 2, 0, 1, False) == -1


def test_bad_arguments_are_errors_not_crashes():
    sizes = ints([4])
    assert B.copy_strided(0, 1, sizes, 1, 10, ints([1]), 1, 8, ints([1])) == -1
    assert "unknown dtype" in error()
    assert B.copy_strided(0, 65, sizes, 1, 8, ints([1]), 1, 8, ints([1])) == -1
    assert B.copy_strided(0, 1, ints([-1]), 1, 8, ints([1]), 1, 8, ints([1])) == -1
    assert B.copy_strided(0, 1, ints([0]), None, 8, ints([1]), None, 8, ints([1])) == 0  # empty
    assert B.gemm(0, 4, False, False, 2, 2, 2, 1.0, 1, 2, 0, 1, 2, 0, 0.0, 1, 2, 0, 1, False) == -1
    assert "not float32" in error()
    assert B.gemm(0, 8, False, False, -1, 2, 2, 1.0, 1, 2, 0, 1, 2, 0, 0.0, 1, 2, 0, 1, False) == -1


def test_host_to_host_memcpy_copies_bytes():
    src = np.arange(100, dtype=np.int32)
    dst = np.zeros_like(src)
    assert B.memcpy(dst.ctypes.data, -1, src.ctypes.data, -1, src.nbytes, False) == 0
    np.testing.assert_array_equal(dst, src)


@pytest.mark.skipif(HAS_GPU, reason="checks the behaviour without a GPU")
def test_cuda_request_through_ember_raises_runtime_error():
    assert ember.cuda.is_available() is False
    with pytest.raises(RuntimeError, match="no NVIDIA driver"):
        ember.zeros(2, device="cuda")
    with pytest.raises(RuntimeError):
        ember.ones(2).to("cuda")


@pytest.mark.skipif(shutil.which("nm") is None, reason="needs binutils' nm")
def test_only_pyinit_is_exported():
    out = subprocess.run(["nm", "-D", "--defined-only", ember_cuda.__file__], capture_output=True,
                         text=True, check=True).stdout.split()
    assert [w for w in out if not re.fullmatch(r"[0-9a-f]+|[A-Za-z]", w)] == ["PyInit__cuda"]


# ---------------------------------------------------------------- with a GPU

# EmDType code -> NumPy storage dtype (bfloat16 kept as its 16 bits)
CODES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
         "float64"]
STORAGE = {n: np.dtype(np.uint16 if n == "bfloat16" else n) for n in CODES}
FLOATING = {"float16", "bfloat16", "float32", "float64"}


def bf16_bits(x):
    """float32 values -> bfloat16 bits, rounding to nearest even."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_values(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def as_values(a, name):
    """Stored array -> NumPy values (bool bytes read as != 0)."""
    if name == "bfloat16":
        return bf16_values(a)
    if name == "bool":
        return a.view(np.uint8) != 0
    return a


def reference_cast(a, src, dst):
    """torch's cast rules done in NumPy: through float for halves, != 0 for
    bool, floating -> narrow integer through int64 (keeping the low bits)."""
    v = as_values(a, src)
    if dst == "bool":
        return (v != 0).astype(np.bool_)
    if dst == "bfloat16":
        return bf16_bits(v.astype(np.float32))
    if src in FLOATING and dst not in FLOATING and STORAGE[dst].itemsize < 8:
        return v.astype(np.float64).astype(np.int64).astype(STORAGE[dst])
    return v.astype(STORAGE[dst])


def sample(name, n, rng, odd_bools=False):
    """n values of dtype `name` that every cast maps to a defined result;
    odd_bools: bool bytes of 2 too (any non-zero byte reads as true)."""
    if name == "bool":
        return rng.integers(0, 3 if odd_bools else 2, n).astype(np.uint8).view(np.bool_)
    lo = 0 if name == "uint8" else -100
    v = rng.integers(lo, 101, n).astype(np.float64)
    if name in FLOATING:
        v += rng.choice([0.0, 0.25, 0.5, 0.75], n)  # exact but in bfloat16, which rounds
        return bf16_bits(v) if name == "bfloat16" else v.astype(name)
    return v.astype(name)


class Device:
    """A device buffer from the caching allocator, freed on close."""

    def __init__(self, nbytes, dev=0):
        self.nbytes, self.dev = nbytes, dev
        self.ptr = B.alloc(dev, nbytes, B.current_stream(dev))
        assert self.ptr, error()

    @classmethod
    def of(cls, a):
        d = cls(max(a.nbytes, 1))
        assert B.memcpy(d.ptr, 0, a.ctypes.data, -1, a.nbytes, False) == 0, error()
        return d

    def read(self, dtype, count, offset=0):
        out = np.empty(count, dtype)
        assert B.memcpy(out.ctypes.data, -1, self.ptr + offset, self.dev, out.nbytes, False) == 0
        return out

    def close(self):
        B.free(self.dev, self.ptr, self.nbytes, B.current_stream(self.dev))


def copy_strided(sizes, dst, dname, dstrides, src, sname, sstrides, doff=0, soff=0):
    rc = B.copy_strided(0, len(sizes), ints(sizes), dst.ptr + doff, CODES.index(dname),
                        ints(dstrides), src.ptr + soff, CODES.index(sname), ints(sstrides))
    assert rc == 0, error()


@gpu
def test_device_properties():
    p = Props()
    assert B.device_props(0, C.byref(p)) == 0
    assert p.name and p.total_memory > 0 and p.major >= 7 and p.warp_size == 32
    assert p.multi_processor_count > 0 and B.synchronize(0) == 0


@pytest.fixture
def own_stream():
    """A new current stream: blocks cached by other tests are not reused on it."""
    s = VP()
    assert B.stream_create(0, 0, C.byref(s)) == 0, error()
    old = B.current_stream(0)
    assert B.set_current_stream(0, s) == 0
    yield s
    B.stream_synchronize(0, s)
    B.set_current_stream(0, old)
    B.stream_destroy(0, s)


@gpu
def test_caching_allocator_statistics(own_stream):
    B.empty_cache()
    base = stats()
    a = Device(1000)  # small: 1024 B out of a fresh 2 MiB segment
    s = stats()
    assert s.allocated - base.allocated == 1024
    assert s.reserved - base.reserved == 2 << 20 and s.max_reserved >= s.reserved
    ptr = a.ptr
    a.close()
    s = stats()
    assert s.allocated == base.allocated and s.reserved - base.reserved == 2 << 20  # cached
    b = Device(1000)
    assert b.ptr == ptr  # the freed block came back
    c = Device(1000)
    assert c.ptr == ptr + 1024  # carved from the same segment
    assert stats().reserved - base.reserved == 2 << 20
    big = Device(30 << 20)  # large: its own segment, rounded to 2 MiB
    assert stats().reserved - base.reserved == (2 << 20) + (30 << 20)
    for d in (b, c, big):
        d.close()
    assert stats().allocated == base.allocated
    peak = stats().max_allocated
    assert peak >= base.allocated + (30 << 20)
    B.reset_peak_stats(0)
    assert stats().max_allocated == stats().allocated
    assert B.empty_cache() == 0
    assert stats().reserved == base.reserved


@gpu
def test_out_of_memory_retries_then_fails_cleanly():
    before = stats()
    assert B.alloc(0, 1 << 55, None) is None and "cudaMalloc" in error()
    after = stats()
    assert after.num_ooms == before.num_ooms + 1
    assert after.num_alloc_retries == before.num_alloc_retries + 1


@gpu
@pytest.mark.parametrize("name", CODES)
def test_memcpy_round_trip(name):
    a = sample(name, 777, np.random.default_rng(1))
    d = Device.of(a)
    np.testing.assert_array_equal(d.read(a.dtype, a.size), a)
    pinned = B.host_alloc(a.nbytes)
    assert pinned, error()
    view = np.ctypeslib.as_array((C.c_uint8 * a.nbytes).from_address(pinned)).view(a.dtype)
    assert B.memcpy(pinned, -1, d.ptr, 0, a.nbytes, True) == 0
    assert B.stream_synchronize(0, B.current_stream(0)) == 0
    np.testing.assert_array_equal(view, a)
    B.host_free(pinned)
    d.close()


@gpu
@pytest.mark.parametrize("sname", CODES)
@pytest.mark.parametrize("dname", CODES)
def test_copy_strided_casts_like_numpy(dname, sname):
    rng = np.random.default_rng(CODES.index(dname) * 10 + CODES.index(sname))
    n = 1031  # not a multiple of 4: the vector kernel's tail
    a = sample(sname, n, rng, odd_bools=dname != "bool")  # bool -> bool copies bytes
    src = Device.of(a)
    item = STORAGE[dname].itemsize
    dst = Device(n * item + 64)
    want = reference_cast(a, sname, dname)
    copy_strided([n], dst, dname, [1], src, sname, [1])  # contiguous (vector kernel)
    np.testing.assert_array_equal(dst.read(STORAGE[dname], n), want)
    # misaligned by one element: the scalar kernel
    copy_strided([n - 1], dst, dname, [1], src, sname, [1], doff=item,
                 soff=STORAGE[sname].itemsize)
    np.testing.assert_array_equal(dst.read(STORAGE[dname], n - 1, item), want[1:])
    # a transposed 2-d source
    m = a[:1000].reshape(25, 40)
    copy_strided([40, 25], dst, dname, [25, 1], src, sname, [1, 40])
    got = dst.read(STORAGE[dname], 1000).reshape(40, 25)
    np.testing.assert_array_equal(got, reference_cast(m.T.copy(), sname, dname))
    src.close()
    dst.close()


@gpu
def test_copy_strided_broadcast_permuted_and_size_one_dims():
    rng = np.random.default_rng(7)
    a = rng.standard_normal((3, 1, 5, 4)).astype(np.float32)
    src = Device.of(a)
    dst = Device(8 * 3 * 6 * 5 * 4)
    # broadcast the size-1 dim to 6, and cast to float64
    sizes, sst = [3, 6, 5, 4], [20, 0, 4, 1]
    copy_strided(sizes, dst, "float64", [120, 20, 4, 1], src, "float32", sst)
    np.testing.assert_array_equal(dst.read(np.float64, 360).reshape(3, 6, 5, 4),
                                  np.broadcast_to(a, (3, 6, 5, 4)).astype(np.float64))
    # permuted source dims, same dtype (the raw-bits kernel), with a size-1 dim kept
    p = a.transpose(3, 1, 0, 2)  # (4, 1, 3, 5)
    strides = [s // 4 for s in p.strides]
    copy_strided(list(p.shape), dst, "float32", [15, 15, 5, 1], src, "float32", strides)
    np.testing.assert_array_equal(dst.read(np.float32, 60).reshape(p.shape), p)
    # a scalar (0-d) broadcast to a 2-d strided destination
    one = Device.of(np.array([2.5], np.float32))
    copy_strided([4, 3], dst, "float32", [6, 2], one, "float32", [0, 0])
    got = dst.read(np.float32, 24).reshape(4, 6)
    np.testing.assert_array_equal(got[:, ::2], np.full((4, 3), 2.5, np.float32))
    for d in (src, dst, one):
        d.close()


@gpu
def test_large_copies_use_64_bit_offsets():
    n = (1 << 31) + 6  # elements past 2**31
    src, dst = Device(n), Device(2 * n)
    tail = np.arange(-32, 32, dtype=np.int8)
    assert B.memcpy(src.ptr + n - 64, 0, tail.ctypes.data, -1, 64, False) == 0
    copy_strided([n], dst, "int16", [1], src, "int8", [1])  # the vector kernel
    np.testing.assert_array_equal(dst.read(np.int16, 64, 2 * (n - 64)), tail.astype(np.int16))
    # the strided kernel: dst[2 j + i] = src[i m + j], an interleaving write
    m = n // 2
    copy_strided([2, m], dst, "int8", [1, 2], src, "int8", [m, 1])
    got = dst.read(np.int8, 64, n - 64)  # dst[n-64:n]: (i, j) = (0 or 1, m-32 ...)
    np.testing.assert_array_equal(got[1::2], tail[32:])
    src.close()
    dst.close()


@gpu
def test_streams_and_events():
    s = VP()
    assert B.stream_create(0, -1, C.byref(s)) == 0, error()
    assert B.set_current_stream(0, s) == 0 and B.current_stream(0) == s.value
    start, end = VP(), VP()
    assert B.event_create(0, True, C.byref(start)) == 0
    assert B.event_create(0, True, C.byref(end)) == 0
    big = Device(256 << 20)
    other = Device(256 << 20)
    assert B.event_record(0, start, s) == 0
    for _ in range(4):
        assert B.memcpy(other.ptr, 0, big.ptr, 0, big.nbytes, True) == 0
    assert B.event_record(0, end, s) == 0
    assert B.stream_wait_event(0, None, end) == 0
    assert B.event_synchronize(0, end) == 0 and B.event_query(0, end) == 1
    assert B.stream_synchronize(0, s) == 0 and B.stream_query(0, s) == 1
    ms = C.c_float()
    assert B.event_elapsed_ms(0, start, end, C.byref(ms)) == 0 and ms.value > 0
    untimed = VP()
    assert B.event_create(0, False, C.byref(untimed)) == 0
    assert B.event_record(0, untimed, s) == 0 and B.event_synchronize(0, untimed) == 0
    assert B.event_elapsed_ms(0, start, untimed, C.byref(ms)) == -1 and error()
    big.close()
    other.close()
    B.stream_destroy(0, s)
    assert B.current_stream(0) is None  # no longer current
    for e in (start, end, untimed):
        B.event_destroy(0, e)


@gpu
@pytest.mark.parametrize("name,tol", [("float32", 1e-5), ("float64", 1e-12), ("float16", 2e-3),
                                      ("bfloat16", 1e-2)])
@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True)])
def test_gemm_matches_numpy(name, tol, ta, tb):
    rng = np.random.default_rng(3)
    batch, m, n, k = 3, 37, 19, 53
    a = rng.standard_normal((batch, m, k))
    b = rng.standard_normal((batch, k, n))
    c = rng.standard_normal((batch, m, n))

    def stored(x):  # values rounded to the dtype, and their storage
        if name == "bfloat16":
            bits = bf16_bits(x.astype(np.float32))
            return bf16_values(bits).astype(np.float64), bits
        s = x.astype(name)
        return s.astype(np.float64), s

    # row-major A stored transposed when ta: the kernel sees op(A) = A
    av, ast = stored(a)
    bv, bst = stored(b)
    cv, cst = stored(c)
    a_mem = np.ascontiguousarray(ast.transpose(0, 2, 1)) if ta else ast
    b_mem = np.ascontiguousarray(bst.transpose(0, 2, 1)) if tb else bst
    da, db, dc = Device.of(a_mem), Device.of(b_mem), Device.of(np.ascontiguousarray(cst))
    # row-major C = A @ B is column-major C^T = B^T A^T: swap the operands
    lda = m if ta else k
    ldb = k if tb else n
    rc = B.gemm(0, CODES.index(name), tb, ta, n, m, k, 0.5, db.ptr, ldb, k * n, da.ptr, lda,
                m * k, 2.0, dc.ptr, n, m * n, batch, False)
    assert rc == 0, error()
    got = as_values(dc.read(STORAGE[name], batch * m * n), name).astype(np.float64)
    want = 0.5 * av @ bv + 2.0 * cv
    np.testing.assert_allclose(got.reshape(batch, m, n), want, rtol=tol, atol=tol * np.sqrt(k) * 4)
    for d in (da, db, dc):
        d.close()


@gpu
def test_gemm_broadcast_operand_and_tf32():
    rng = np.random.default_rng(4)
    a = rng.standard_normal((64, 64)).astype(np.float32)
    b = rng.standard_normal((2, 64, 64)).astype(np.float32)
    da, db, dc = Device.of(a), Device.of(b), Device(2 * 64 * 64 * 4)
    rc = B.gemm(0, 8, False, False, 64, 64, 64, 1.0, db.ptr, 64, 64 * 64, da.ptr, 64, 0, 0.0,
                dc.ptr, 64, 64 * 64, 2, True)  # stride 0: the same A for both
    assert rc == 0, error()
    got = dc.read(np.float32, 2 * 64 * 64).reshape(2, 64, 64)
    np.testing.assert_allclose(got, a @ b, rtol=1e-2, atol=5e-2)  # TF32: 10-bit mantissa
    for d in (da, db, dc):
        d.close()


@gpu
def test_tensors_cross_to_the_gpu_and_back():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = ember.tensor(x).to("cuda")
    assert t.is_cuda
    np.testing.assert_array_equal(t.cpu().numpy(), x)
    np.testing.assert_array_equal(t.t().contiguous().to(ember.float64).cpu().numpy(),
                                  x.T.astype(np.float64))


# ------------------------------- the caching allocator on a stub CUDA runtime
# allocator.cpp's bookkeeping (size classes, splitting, merging, per-stream
# reuse, release-and-retry, statistics) is plain C++ above cudaMalloc: here it
# is compiled against a stub runtime whose "device memory" is a counter with
# a 64 MiB capacity, so it runs without a GPU, against hand-computed numbers.

STUB_RUNTIME = r"""
#include <cstdlib>
#include "runtime.h"
static int current = 0;
static size_t used = 0, capacity = 64u << 20;
static cudaError_t last = cudaSuccess;
extern "C" {
__host__ cudaError_t CUDARTAPI cudaGetDevice(int *d) { *d = current; return cudaSuccess; }
__host__ cudaError_t CUDARTAPI cudaSetDevice(int d) { current = d; return cudaSuccess; }
__host__ cudaError_t CUDARTAPI cudaGetLastError(void) { cudaError_t e = last; last = cudaSuccess; return e; }
__host__ const char *CUDARTAPI cudaGetErrorString(cudaError_t e) {
    return e == cudaErrorMemoryAllocation ? "out of memory" : "stub error";
}
__host__ cudaError_t CUDARTAPI cudaMalloc(void **p, size_t n) {
    if (used + n > capacity) return last = cudaErrorMemoryAllocation;
    used += n;
    *p = malloc(sizeof(size_t)); /* an address nobody else has; the size kept in it */
    *(size_t *)*p = n;
    return cudaSuccess;
}
__host__ cudaError_t CUDARTAPI cudaFree(void *p) { used -= *(size_t *)p; free(p); return cudaSuccess; }
static size_t pinned = 0;
__host__ cudaError_t CUDARTAPI cudaHostAlloc(void **p, size_t n, unsigned) {
    size_t *b = (size_t *)malloc(n + sizeof(size_t));
    *b = n;
    pinned += n;
    *p = b + 1;
    return cudaSuccess;
}
__host__ cudaError_t CUDARTAPI cudaFreeHost(void *p) {
    size_t *b = (size_t *)p - 1;
    pinned -= *b;
    free(b);
    return cudaSuccess;
}
/* streams are handles the test marks busy or idle; an event is done when
 * the stream it was recorded on is idle; synchronizing makes it idle */
static void *busy[8];
static bool is_busy(void *s) {
    for (void *b : busy) if (b && b == s) return true;
    return false;
}
static void set_idle(void *s) {
    for (void *&b : busy) if (b == s) b = nullptr;
}
struct StubEvent { void *stream; };
static int live_events = 0;
__host__ cudaError_t CUDARTAPI cudaEventCreateWithFlags(cudaEvent_t *e, unsigned) {
    *e = (cudaEvent_t) new StubEvent{nullptr};
    live_events++;
    return cudaSuccess;
}
__host__ cudaError_t CUDARTAPI cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
    ((StubEvent *)e)->stream = s;
    return cudaSuccess;
}
__host__ cudaError_t CUDARTAPI cudaEventQuery(cudaEvent_t e) {
    return is_busy(((StubEvent *)e)->stream) ? cudaErrorNotReady : cudaSuccess;
}
__host__ cudaError_t CUDARTAPI cudaEventSynchronize(cudaEvent_t e) {
    set_idle(((StubEvent *)e)->stream);
    return cudaSuccess;
}
__host__ cudaError_t CUDARTAPI cudaEventDestroy(cudaEvent_t e) {
    delete (StubEvent *)e;
    live_events--;
    return cudaSuccess;
}
__host__ cudaError_t CUDARTAPI cudaStreamSynchronize(cudaStream_t s) {
    set_idle(s);
    return cudaSuccess;
}
size_t stub_used(void) { return used; }
size_t stub_pinned(void) { return pinned; }
int stub_live_events(void) { return live_events; }
void stub_set_busy(void *s) {
    for (void *&b : busy) if (!b) { b = s; return; }
}
void stub_set_idle(void *s) { set_idle(s); }
}
int emc_device_count(void) { return 2; }
int emc_valid_device(int dev) { return dev >= 0 && dev < 2 ? 0 : emc_fail("invalid device ordinal %d", dev); }
extern "C" {
void *stub_alloc(int dev, size_t n, void *s) { return emc_alloc(dev, n, s); }
void stub_free(int dev, void *p) { emc_free(dev, p, 0, nullptr); }
void stub_stats(int dev, EmCudaMemoryStats *o) { emc_memory_stats(dev, o); }
void stub_reset_peak(int dev) { emc_reset_peak_stats(dev); }
int stub_empty_cache(void) { return emc_empty_cache(); }
const char *stub_error(void) { return emc_last_error(); }
int stub_record_stream(int dev, void *p, void *s) { return emc_record_stream(dev, p, s); }
void *stub_host_alloc(size_t n) { return emc_host_alloc(n); }
void stub_host_free(void *p) { emc_host_free(p); }
void stub_host_record_use(void *p, int dev, void *s) { emc_host_record_use(p, dev, s); }
}
"""


def _cuda_include():
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and os.path.exists(os.path.join(root, "include", "cuda_runtime_api.h")):
            return os.path.join(root, "include")
    return None


def build_host_library(tmp_path_factory, name, source, sources=()):
    """Compile `source` (+ csrc/cuda files) with g++ into a library; skip
    when g++, the CUDA headers or ember's sources are not at hand."""
    inc, cxx = _cuda_include(), shutil.which("g++")
    cuda_src = os.path.join(ROOT, "csrc", "cuda")
    if not inc or not cxx or not os.path.isdir(cuda_src):
        pytest.skip("needs g++, the CUDA headers and ember's sources")
    d = tmp_path_factory.mktemp(name)
    (d / f"{name}.cpp").write_text(source)
    lib = d / f"lib{name}.so"
    # -Bsymbolic: the stub runtime's own cudaMalloc, even where torch has put
    # the real libcudart in the global symbol scope
    subprocess.run([cxx, "-std=c++17", "-O1", "-shared", "-fPIC", "-Wl,-Bsymbolic", "-I", inc,
                    "-I", cuda_src,
                    str(d / f"{name}.cpp"), *[os.path.join(cuda_src, f) for f in sources],
                    "-o", str(lib)], check=True)
    return C.CDLL(str(lib))


@pytest.fixture(scope="module")
def stub(tmp_path_factory):
    s = build_host_library(tmp_path_factory, "stub", STUB_RUNTIME, ("allocator.cpp", "error.cpp"))
    s.stub_alloc.restype, s.stub_alloc.argtypes = VP, [C.c_int, C.c_size_t, VP]
    s.stub_free.argtypes = [C.c_int, VP]
    s.stub_stats.argtypes = [C.c_int, C.POINTER(Stats)]
    s.stub_error.restype = C.c_char_p
    s.stub_used.restype = s.stub_pinned.restype = C.c_size_t
    s.stub_record_stream.argtypes = [C.c_int, VP, VP]
    s.stub_host_alloc.restype, s.stub_host_alloc.argtypes = VP, [C.c_size_t]
    s.stub_host_free.argtypes = [VP]
    s.stub_host_record_use.argtypes = [VP, C.c_int, VP]
    s.stub_set_busy.argtypes = s.stub_set_idle.argtypes = [VP]
    return s


def stub_stats(s, dev=0):
    out = Stats()
    s.stub_stats(dev, C.byref(out))
    return out


MiB = 1 << 20


def test_allocator_size_classes_and_reuse(stub):
    s = stub
    a = s.stub_alloc(0, 1000, None)  # small: 1024 B from a 2 MiB segment
    st = stub_stats(s)
    assert (st.allocated, st.reserved) == (1024, 2 * MiB)
    b = s.stub_alloc(0, 1, None)  # 512 B, right after a in the same segment
    assert b == a + 1024 and stub_stats(s).reserved == 2 * MiB
    s.stub_free(0, a)
    assert s.stub_alloc(0, 700, None) == a  # the freed 1024-B hole is the best fit
    big = s.stub_alloc(0, 5 * MiB, None)  # large under 10 MiB: a 20 MiB segment
    assert stub_stats(s).reserved == 22 * MiB
    big2 = s.stub_alloc(0, 5 * MiB + 1, None)  # cut from the same segment
    assert big2 == big + 5 * MiB and stub_stats(s).reserved == 22 * MiB
    huge = s.stub_alloc(0, 11 * MiB + 5, None)  # >= 10 MiB: its own segment, 2 MiB multiple
    st = stub_stats(s)
    assert st.reserved == 34 * MiB
    # huge keeps its whole 12 MiB segment: a rest under 1 MiB is not split off
    assert st.allocated == 1024 + 512 + 5 * MiB + (5 * MiB + 512) + 12 * MiB
    assert st.max_allocated == st.allocated and st.max_reserved == 34 * MiB
    for p in (a, b, big, big2, huge):
        s.stub_free(0, p)
    st = stub_stats(s)
    assert st.allocated == 0 and st.reserved == 34 * MiB  # all cached
    assert st.max_allocated > 0
    s.stub_reset_peak(0)
    assert stub_stats(s).max_allocated == 0
    assert s.stub_empty_cache() == 0  # every segment is wholly free again: merged
    assert stub_stats(s).reserved == 0 and s.stub_used() == 0


def test_allocator_reuses_blocks_only_on_their_stream(stub):
    s = stub
    a = s.stub_alloc(0, 4096, 0x10)
    s.stub_free(0, a)
    b = s.stub_alloc(0, 4096, 0x20)  # another stream: a new segment
    assert b != a and stub_stats(s).reserved == 4 * MiB
    assert s.stub_alloc(0, 4096, 0x10) == a  # its own stream gets it back
    s.stub_free(0, a)
    s.stub_free(0, b)
    assert s.stub_empty_cache() == 0 and stub_stats(s).reserved == 0


def test_allocator_devices_are_separate(stub):
    s = stub
    a = s.stub_alloc(1, 100, None)
    assert stub_stats(s, 1).allocated == 512 and stub_stats(s, 0).allocated == 0
    s.stub_free(1, a)
    assert s.stub_alloc(2, 100, None) is None and b"invalid device" in s.stub_error()
    s.stub_empty_cache()


def test_allocator_releases_cache_and_retries_then_reports_oom(stub):
    s = stub
    ps = [s.stub_alloc(0, 12 * MiB, None) for _ in range(5)]  # 60 of the stub's 64 MiB
    for p in ps:
        s.stub_free(0, p)
    before = stub_stats(s)
    assert before.reserved == 60 * MiB
    p = s.stub_alloc(0, 30 * MiB, None)  # fits only once the cached segments are released
    after = stub_stats(s)
    assert p and after.num_alloc_retries == before.num_alloc_retries + 1
    assert after.reserved == 30 * MiB and after.num_ooms == before.num_ooms
    assert s.stub_alloc(0, 40 * MiB, None) is None  # more than is left, even after release
    after = stub_stats(s)
    assert after.num_ooms == before.num_ooms + 1 and b"out of memory" in s.stub_error()
    s.stub_free(0, p)
    s.stub_free(0, 12345)  # a pointer it never handed out: ignored, with a message
    assert b"did not hand out" in s.stub_error()
    assert s.stub_empty_cache() == 0 and s.stub_used() == 0


def test_record_stream_parks_a_freed_block_until_the_other_stream_is_done(stub):
    s = stub
    a = s.stub_alloc(0, 4096, 0x10)
    assert s.stub_record_stream(0, a, 0x20) == 0
    assert s.stub_record_stream(0, a, 0x20) == 0 and s.stub_record_stream(0, a, 0x10) == 0  # once; own stream: nothing
    s.stub_set_busy(0x20)  # stream 0x20 still has work that uses a
    s.stub_free(0, a)
    assert stub_stats(s).allocated == 4096  # parked, still counted
    b = s.stub_alloc(0, 4096, 0x10)
    assert b != a  # a is not handed out while 0x20 is busy
    s.stub_set_idle(0x20)
    c = s.stub_alloc(0, 4096, 0x10)  # the next allocation releases a first
    assert c == a and stub_stats(s).allocated == 8192 and s.stub_live_events() == 0
    for p in (b, c):
        s.stub_free(0, p)
    # parked blocks are waited for when the cache is emptied
    a = s.stub_alloc(0, 4096, 0x10)
    s.stub_record_stream(0, a, 0x30)
    s.stub_set_busy(0x30)
    s.stub_free(0, a)
    assert s.stub_empty_cache() == 0
    st = stub_stats(s)
    assert st.allocated == 0 and st.reserved == 0 and s.stub_used() == 0 and s.stub_live_events() == 0
    # a pointer it did not hand out, or another device's
    assert s.stub_record_stream(0, 12345, 0x20) == -1 and b"is not memory" in s.stub_error()
    a = s.stub_alloc(0, 512, 0x10)
    assert s.stub_record_stream(1, a, 0x20) == -1
    s.stub_free(0, a)
    s.stub_empty_cache()


def test_pinned_host_blocks_are_reused_once_their_copies_are_done(stub):
    s = stub
    p = s.stub_host_alloc(1000)  # a 4 KiB block
    assert s.stub_pinned() == 4096
    s.stub_host_free(p)
    q = s.stub_host_alloc(3000)  # same class: the cached block, no new pinning
    assert q == p and s.stub_pinned() == 4096
    s.stub_host_record_use(q + 100, 0, 0x40)  # an async copy on 0x40 uses it (interior address)
    s.stub_set_busy(0x40)
    s.stub_host_free(q)
    r = s.stub_host_alloc(4096)  # still in use by the copy: a new block
    assert r != p and s.stub_pinned() == 8192
    s.stub_host_alloc(5000)  # another class: 8 KiB
    assert s.stub_pinned() == 16384
    s.stub_set_idle(0x40)
    s.stub_host_free(r)
    assert s.stub_host_alloc(10) in (p, r)  # both free and idle now
    s.stub_host_record_use(12345, 0, 0x40)  # pageable memory: not the cache's, ignored
    s.stub_host_free(12345)
    assert b"pinned host cache did not hand out" in s.stub_error()
    assert s.stub_empty_cache() == 0
    assert s.stub_pinned() == 4096 + 8192  # the two blocks still handed out stay
    assert s.stub_live_events() == 0


# ------------------------------- the strided copy's element rules on the CPU
# copy_rules.h (casts, index -> offsets, dim collapsing) compiled as host
# code and driven element by element as the strided kernel does: the cast
# rules and layouts are checked against NumPy here, without a GPU.

EMULATOR = r"""
#include "copy_rules.h"
extern "C" int emulate_copy(int ndim, const int64_t *sizes, void *dst, int dt, const int64_t *ds,
                            const void *src, int st, const int64_t *ss) {
    static const int itemsizes[DT_COUNT] = {1, 1, 1, 2, 4, 8, 2, 2, 4, 8};
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= sizes[d];
    if (n == 0) return 0;
    static Geometry g;
    collapse(ndim, sizes, ds, ss, g);
    auto run = [&](auto dtag, auto stag) {
        using D = typename decltype(dtag)::type;
        using S = typename decltype(stag)::type;
        for (int64_t i = 0; i < n; i++) {
            int64_t od, os;
            element_offsets(g, i, od, os);
            ((D *)dst)[od] = convert<D>(((const S *)src)[os]);
        }
    };
    if (dt == st)
        with_bits(itemsizes[dt], [&](auto t) { run(t, t); });
    else
        with_type(dt, [&](auto d) { with_type(st, [&](auto s) { run(d, s); }); });
    return g.ndim;
}
"""


@pytest.fixture(scope="module")
def emulator(tmp_path_factory):
    lib = build_host_library(tmp_path_factory, "emulator", EMULATOR)
    lib.emulate_copy.argtypes = [C.c_int, I64P, VP, C.c_int, I64P, VP, C.c_int, I64P]
    return lib


def emulate(lib, shape, dst, dname, dstrides, src, sname, sstrides):
    """dst <- src as the strided kernel would; strides in elements; the
    number of dims left after collapsing."""
    return lib.emulate_copy(len(shape), ints(shape), dst.ctypes.data, CODES.index(dname),
                            ints(dstrides), src.ctypes.data, CODES.index(sname), ints(sstrides))


@pytest.mark.parametrize("sname", CODES)
@pytest.mark.parametrize("dname", CODES)
def test_cast_rules_match_numpy(emulator, dname, sname):
    rng = np.random.default_rng(CODES.index(dname) * 10 + CODES.index(sname))
    a = sample(sname, 600, rng, odd_bools=dname != "bool")
    out = np.zeros(600, STORAGE[dname])
    assert emulate(emulator, [600], out, dname, [1], a, sname, [1]) == 1
    np.testing.assert_array_equal(out, reference_cast(a, sname, dname))
    m = a.reshape(20, 30)  # read transposed
    out = np.zeros((30, 20), STORAGE[dname])
    assert emulate(emulator, [30, 20], out, dname, [20, 1], m, sname, [1, 30]) == 2
    np.testing.assert_array_equal(out, reference_cast(m.T.copy(), sname, dname))


def test_cast_rules_special_values(emulator):
    f = np.array([np.nan, -0.0, np.inf, -1.0, -2.5, 255.9, 256.0, -129.0, 1e-40], np.float32)
    out = np.zeros(f.size, np.bool_)
    emulate(emulator, [f.size], out, "bool", [1], f, "float32", [1])
    np.testing.assert_array_equal(out, [True, False, True, True, True, True, True, True, True])
    u8 = np.zeros(5, np.uint8)
    emulate(emulator, [5], u8, "uint8", [1], f[3:8], "float32", [1])
    np.testing.assert_array_equal(u8, [255, 254, 255, 0, 127])  # through int64, low bits
    i8 = np.zeros(5, np.int8)
    emulate(emulator, [5], i8, "int8", [1], f[3:8], "float32", [1])
    np.testing.assert_array_equal(i8, [-1, -2, -1, 0, 127])
    h = np.zeros(f.size, np.float16)
    emulate(emulator, [f.size], h, "float16", [1], f, "float32", [1])
    np.testing.assert_array_equal(h, f.astype(np.float16))  # round to nearest, inf, nan, 0
    bf = np.zeros(3, np.uint16)
    emulate(emulator, [3], bf, "bfloat16", [1], np.array([1.00390625, 1.01171875, 3e38], np.float32),
            "float32", [1])
    np.testing.assert_array_equal(bf, [0x3F80, 0x3F82, 0x7F62])  # ties to even; large values kept


def test_collapsing_and_broadcast_layouts(emulator):
    a = np.arange(2 * 3 * 4, dtype=np.int32).reshape(2, 3, 4)
    out = np.zeros_like(a)
    # contiguous 3-d (with a size-1 dim inserted) is one dim
    assert emulate(emulator, [2, 1, 3, 4], out, "int32", [12, 12, 4, 1], a, "int32",
                   [12, 1, 4, 1]) == 1
    np.testing.assert_array_equal(out, a)
    # a permuted source (4, 2, 3) with strides (1, 12, 4): its last two dims
    # are still contiguous to each other (12 = 4 * 3) and merge
    p = a.transpose(2, 0, 1)
    out = np.zeros(p.shape, np.float64)
    assert emulate(emulator, list(p.shape), out, "float64", [6, 3, 1], a, "int32",
                   [s // 4 for s in p.strides]) == 2
    np.testing.assert_array_equal(out, p)
    # broadcasting a row (stride 0) into a matrix
    row = np.array([1.5, -2.0, 3.25], np.float32)
    out = np.zeros((4, 3), np.float16)
    assert emulate(emulator, [4, 3], out, "float16", [3, 1], row, "float32", [0, 1]) == 2
    np.testing.assert_array_equal(out, np.broadcast_to(row, (4, 3)).astype(np.float16))
    # a destination ordered by its strides: a column-major dst of a row-major src
    out = np.zeros((3, 4), np.int64).T  # shape (4, 3), strides (1, 4) in elements
    src = np.arange(12, dtype=np.int16).reshape(4, 3)
    assert emulate(emulator, [4, 3], out, "int64", [1, 4], src, "int16", [3, 1]) == 2
    np.testing.assert_array_equal(out, src)
    # a 0-d copy
    one, dst = np.array(7, np.uint8), np.zeros((), np.int64)
    assert emulate(emulator, [], dst, "int64", [], one, "uint8", []) == 1
    assert dst == 7
