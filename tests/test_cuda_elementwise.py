"""The CUDA elementwise kernels (csrc/cuda/elementwise.cu, Note [CUDA
elementwise]) against the CPU kernels: every elementwise op of tests/op_db.py
over its dtypes and layouts (contiguous, transposed, sliced, expanded, 0-d,
broadcast, Python and 0-d CPU scalars, mixed and half dtypes) is run on the
CPU and on 'cuda', and the results must agree (the issue takes the CPU result
as the reference; op_db's NumPy references check the CPU side in test_ops).

Two backends run the same tests:
  cuda  the real kernels on a GPU (skipped without one);
  emu   a host build of elementwise.cu (-DEM_CUDA_EW_HOST_TEST: both
        launchers run on the host) plugged into the fake backend (Note [fake
        CUDA]) through EMBER_FAKE_CUDA_KERNELS: the functors, dtype
        conversions, offset arithmetic and launcher choice checked without a
        GPU. Built here with nvcc when the toolkit is present (cached under
        build/), skipped otherwise.
"""
import gc
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import ember
from cuda_common import use_fake_backend
from ember import _C
from op_db import FLOATS, OPS, OPS_BY_NAME
from test_ops import materialize, prepare, to_np

ROOT = Path(__file__).resolve().parent.parent
CU = ROOT / "csrc" / "cuda" / "elementwise.cu"
HOST_LIB = ROOT / "build" / "cuda_ew_host" / "libew_host.so"
SOURCES = [CU, ROOT / "csrc" / "cuda" / "elementwise.h", ROOT / "csrc" / "cuda_backend.h",
           ROOT / "csrc" / "cpu" / "math.h", ROOT / "csrc" / "cpu" / "act_math.h"]


# ---------------------------------------------------------------------------
# the kernel names: the CUDA table against the CPU tables
def cuda_table():
    """{name: dtype-mask macro} of elementwise.cu's EW_ENTRY lines."""
    return dict(re.findall(r"EW_ENTRY\((\w+), (M_\w+)\)", CU.read_text()))


def cpu_tables():
    names = set()
    for f in [*(ROOT / "csrc" / "cpu").glob("*.c"), ROOT / "csrc" / "core" / "copy.c"]:  # copy: core/copy.c
        src = re.sub(r"^.*\\\n", "", f.read_text(), flags=re.M)  # not the macros' own bodies
        names |= set(re.findall(r"^\s*EM_TABLE\((\w+),", src, re.M))
        names |= set(re.findall(r"^\s*EM_KERNELS(?:_SPLIT)?\(\w+, (\w+),", src, re.M))
        names |= set(re.findall(r"^\s*(?:ACT_HOT|ROUNDING)\((\w+),", src, re.M))
        names |= set(re.findall(r"^\s*PREDICATE(?:_C)?\((\w+),", src, re.M))
        names |= set(re.findall(r"EmKernels em_kernels_(\w+) = ", src))
    return names - {"name"}  # a macro's parameter


def test_cuda_kernel_names_are_cpu_tables():
    """Every name the CUDA table claims is a CPU kernel table (the iterator
    asks for kernels by the CPU table's name), and every CPU table has one."""
    cuda, cpu = set(cuda_table()), cpu_tables()
    assert len(cuda) == len(re.findall(r"EW_ENTRY\(\w+, M_\w+\)", CU.read_text())), "a name twice"
    assert cuda <= cpu, f"CUDA kernels without a CPU table: {sorted(cuda - cpu)}"
    # the complex tables: the CUDA backend has no complex dtypes (their launches take the CPU fallback)
    cpu_only = {"conj", "make_complex", "polar"}
    assert cpu - cpu_only <= cuda, f"CPU tables without a CUDA kernel: {sorted(cpu - cpu_only - cuda)}"


def test_cuda_kernel_names_on_the_fake():
    """On the fake backend, an op whose CPU kernel table is one of the CUDA
    names runs on 'cuda' (a smoke check that the names reach the iterator)."""
    def run():
        x = ember.tensor([1.0, -2.0, 3.0]).cuda()
        assert (x + x).cpu().tolist() == [2.0, -4.0, 6.0]
        assert ember.where(x > 0, x, -x).cpu().tolist() == [1.0, 2.0, 3.0]

    gc.collect()
    use_fake_backend(True)
    try:
        run()
    finally:
        gc.collect()
        use_fake_backend(False)


# ---------------------------------------------------------------------------
# backends
def _stale():
    return not HOST_LIB.exists() or any(s.stat().st_mtime > HOST_LIB.stat().st_mtime for s in SOURCES)


def _build_host_lib():
    nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
    if not nvcc:
        pytest.skip("nvcc not found: the host build of the CUDA kernels needs it")
    HOST_LIB.parent.mkdir(parents=True, exist_ok=True)
    tmp = HOST_LIB.with_suffix(".tmp.so")
    cmd = [nvcc, "-std=c++17", "-O1", "-DEM_CUDA_EW_HOST_TEST", "-Xcompiler", "-fPIC,-Wno-unknown-pragmas",
           "-shared", "-I", str(ROOT / "csrc"), str(CU), "-o", str(tmp)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, "host build of elementwise.cu failed:\n" + r.stderr[-4000:]
    tmp.replace(HOST_LIB)


@pytest.fixture(scope="module", params=["cuda", "emu"])
def backend(request):
    if request.param == "cuda":
        if not (ember.cuda.is_available() and _C._cuda_backend_name() == "cuda"):
            pytest.skip("no GPU (the real kernels run on one)")
        yield "cuda"
        return
    if _stale():
        _build_host_lib()
    gc.collect()
    os.environ["EMBER_FAKE_CUDA_KERNELS"] = str(HOST_LIB)
    use_fake_backend(True)
    try:
        yield "emu"
    finally:
        gc.collect()
        use_fake_backend(False)
        del os.environ["EMBER_FAKE_CUDA_KERNELS"]


def test_emu_runs_the_cuda_code(backend):
    """The emulation really runs elementwise.cu's launchers (both of them)."""
    if backend != "emu":
        pytest.skip("the host build only")
    import ctypes
    lib = ctypes.CDLL(str(HOST_LIB))  # the same handle the fake opened
    lib.em_cuda_ew_host_launches.restype = ctypes.c_longlong
    before = [lib.em_cuda_ew_host_launches(i) for i in (0, 1)]
    x = ember.arange(12.0).cuda()
    y = (x * 2)[::3] + 1  # contiguous, then strided
    assert y.cpu().tolist() == (np.arange(12.0)[::3] * 2 + 1).tolist()
    after = [lib.em_cuda_ew_host_launches(i) for i in (0, 1)]
    assert after[0] > before[0] and after[1] > before[1], (before, after)


def test_has_elementwise_is_exact(backend):
    """has_elementwise answers for the CPU table's dtypes only (else the core
    falls back to the CPU)."""
    if backend != "emu":
        pytest.skip("the host build only")
    import ctypes
    lib = ctypes.CDLL(str(HOST_LIB))
    lib.em_cuda_has_elementwise.restype = ctypes.c_bool
    has = lambda name, dt: lib.em_cuda_has_elementwise(name.encode(), dt)  # noqa: E731
    BOOL, U8, I64, F16, BF16, F32, F64 = 0, 1, 5, 6, 7, 8, 9
    assert has("add", BOOL) and has("add", I64) and has("add", F32) and not has("add", F16)
    assert not has("sub", BOOL) and has("sub", U8)
    assert not has("bitwise_and", F32) and has("bitwise_and", BOOL)
    assert not has("shift_left", BOOL) and has("shift_left", I64)
    assert has("logical_and", BOOL) and not has("logical_and", F32)
    assert not has("exp", I64) and has("exp", F64)
    assert has("copy", F16) and has("copy", BF16) and not has("where", BF16)
    assert not has("no_such_kernel", F32) and not has("add", 10) and not has("add", -1)
    assert all(has(n, F32) or m in ("M_INTB", "M_INT", "M_BOOL") for n, m in cuda_table().items())


class OnDevice:
    """ember, with tensors made by from_numpy on 'cuda': test_ops' builders
    then lay them out (transpose, slice, expand) as views on the device."""

    def __getattr__(self, name):
        return getattr(ember, name)

    @staticmethod
    def from_numpy(a):
        return ember.from_numpy(a).to("cuda")


DEV = OnDevice()

# float results: both sides compute in the same dtype with different libm's
# (CUDA's are within 2 ulp); half types may round the other way from there
TOL = {"float16": (2e-3, 1e-3), "bfloat16": (1.6e-2, 1e-2), "float32": (2e-5, 1e-6), "float64": (1e-12, 1e-14)}
LOOSE = {"tan", "erfinv", "pow", "float_power", "_mish", "_softplus", "lerp", "addcdiv", "atan2", "fmod",
         "remainder", "floor_divide", "div", "true_divide", "rsub", "sub", "add", "addcmul"}


def _same(name, a, b, where):
    """a (device result, to CPU) against b (the CPU result)."""
    if isinstance(b, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same(name, x, y, where)
        return
    if not isinstance(b, ember.Tensor):
        assert a == b, where
        return
    assert a.device.type == "cuda", f"{where}: result on {a.device}"
    assert a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape), \
        f"{where}: {a.dtype}{tuple(a.shape)} vs CPU {b.dtype}{tuple(b.shape)}"
    x, y = to_np(a.cpu()), to_np(b)
    dt = str(b.dtype).split(".")[-1]
    if dt in FLOATS:
        rtol, atol = TOL[dt]
        if name in LOOSE and dt in ("float32", "float64"):  # cancellation / ill-conditioned points
            rtol, atol = rtol * 10, atol * 10
        np.testing.assert_allclose(x.astype(np.float64), y.astype(np.float64), rtol=rtol, atol=atol,
                                   equal_nan=True, err_msg=where)
    else:
        np.testing.assert_array_equal(x, y, err_msg=where)


def _call(L, op, args, kwargs):
    if op.call:
        return op.call(L, *args, **kwargs)
    fn = op.fn(L) if op.fn else getattr(L, op.name, None)
    if fn is None or "F" not in op.variants:
        return getattr(args[op.method_self], op.name)(*args[:op.method_self], *args[op.method_self + 1:],
                                                    **kwargs)
    return fn(*args, **kwargs)


EW_OPS = [op.name for op in OPS if op.kind == "ew"] + ["_glu", "_to_copy"]


@pytest.mark.parametrize("name", EW_OPS)
def test_op_matches_cpu(backend, name):
    op = OPS_BY_NAME[name]
    fails, n = [], 0
    for dtype in op.dtypes:
        for layout in op.layouts:
            for s in op.get_samples(dtype, layout):
                s = prepare(s, layout)
                where = f"{name} {dtype} {layout} {s.desc} {s!r}"[:300]
                try:
                    args, kwargs, _ = materialize(ember, s, layout)
                    try:
                        want = _call(ember, op, args, kwargs)
                    except Exception as e:  # the CPU refuses: the device must refuse the same way
                        want = e
                    dargs, dkwargs, _ = materialize(DEV, s, layout)
                    if isinstance(want, Exception):
                        with pytest.raises(type(want)):
                            _call(DEV, op, dargs, dkwargs)
                        continue
                    got = _call(DEV, op, dargs, dkwargs)
                    _same(name, got, want, where)
                    n += 1
                except Exception as e:  # collect them all: one op, many dtypes
                    fails.append(f"{where}: {type(e).__name__}: {str(e)[:400]}")
    assert not fails, f"{len(fails)} failing case(s):\n" + "\n".join(fails[:12])
    assert n > 0


# ---------------------------------------------------------------------------
# launcher paths beyond op_db's samples
def _pair(x):
    return ember.from_numpy(np.ascontiguousarray(x)), ember.from_numpy(np.ascontiguousarray(x)).cuda()


def _check(got, want, where=""):
    _same("", got, want, where)


def test_zero_d_cpu_scalar_and_mixed_dtypes(backend):
    rng = np.random.default_rng(0)
    a, da = _pair(rng.standard_normal((5, 7)).astype(np.float32))
    i, di = _pair(rng.integers(-9, 9, (5, 7)).astype(np.int32))
    for s in (ember.tensor(2.5), ember.tensor(3), ember.tensor(True), ember.tensor(1.5, dtype=ember.float64)):
        _check(da * s, a * s, f"x * {s!r}")
        _check(di + s, i + s, f"int + {s!r}")
        _check(s / da, s / a, f"{s!r} / x")
    _check(da + di, a + i)
    _check(di * 2.5, i * 2.5)
    _check(ember.where(da > 0, di, da), ember.where(a > 0, i, a))
    h, dh = a.half(), da.half()
    b, db = a.bfloat16(), da.bfloat16()
    _check(dh + dh, h + h)
    _check(db * db, b * b)
    _check(dh + db, h + b)  # float16 + bfloat16: float32
    _check(dh + da, h + a)
    _check(ember.where(dh > 0, dh, 0.5), ember.where(h > 0, h, 0.5))
    _check((dh > db), (h > b))
    _check(dh.float(), h.float())
    _check(da.half(), a.half())
    _check(db.to(ember.float16), b.to(ember.float16))
    _check(ember.nn.functional.gelu(db), ember.nn.functional.gelu(b))


def test_vector_path_alignment_and_tails(backend):
    """Contiguous lengths around the vector width, offsets that break the
    16-byte alignment, and a broadcast 1-element tensor operand."""
    rng = np.random.default_rng(1)
    for dt in ("float32", "float64", "int8", "float16"):
        for n in (1, 3, 4, 5, 15, 16, 17, 33, 1000, 4099):
            x = rng.standard_normal(n + 3) * 4
            a, da = _pair(x.astype(dt))
            for off in (0, 1, 3):
                sa, sd = a[off:off + n - min(off, n - 1)], da[off:off + n - min(off, n - 1)]
                _check(sd * sd + 1, sa * sa + 1, f"{dt} n={n} off={off}")
                _check(sd > 0, sa > 0, f"{dt} n={n} off={off} cmp")
                one, done = sa[:1], sd[:1]
                _check(sd - done, sa - one, f"{dt} n={n} off={off} bcast")


def test_strided_many_dims_and_broadcast(backend):
    """Views that stay 5-d and more after the iterator merges dims, with
    broadcasting operands: the general launcher's offset arithmetic."""
    rng = np.random.default_rng(2)
    base = rng.standard_normal((3, 4, 5, 6, 7)).astype(np.float32)
    a, da = _pair(base)
    pa, pd = a.permute(4, 2, 0, 3, 1), da.permute(4, 2, 0, 3, 1)
    _check(pd * 2 - 1, pa * 2 - 1)
    sa, sd = a[:, ::2, 1:, ::3, ::2], da[:, ::2, 1:, ::3, ::2]
    _check(ember.maximum(sd, sd.flip(0) if hasattr(sd, "flip") else sd), ember.maximum(sa, sa.flip(0)))
    col, dcol = _pair(rng.standard_normal((4, 1, 6, 1)).astype(np.float32))
    _check(sd.exp() + dcol[::2, :, ::3], sa.exp() + col[::2, :, ::3])
    big = rng.standard_normal((2,) * 12).astype(np.float64)
    b, db = _pair(big)
    tb, tdb = b.permute(*range(11, -1, -1))[::1, 1:], db.permute(*range(11, -1, -1))[::1, 1:]
    _check(tdb.sigmoid(), tb.sigmoid())
    ia, ida = _pair(rng.integers(-100, 100, (6, 5, 4)).astype(np.int64))
    _check(ida.transpose(0, 2) // 7, ia.transpose(0, 2) // 7)
    _check(ida.transpose(0, 2) % -3, ia.transpose(0, 2) % -3)


def test_inplace_and_out_on_strided_outputs(backend):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((6, 8)).astype(np.float32)
    a, da = _pair(x)
    ta, td = a.t(), da.t()
    ta.mul_(3).add_(1)
    td.mul_(3).add_(1)
    _check(da, a)
    h, dh = _pair(x.astype(np.float16))
    h[:, ::2].clamp_(-0.5, 0.5)
    dh[:, ::2].clamp_(-0.5, 0.5)
    _check(dh, h)
    out, dout = ember.empty(8, 6, dtype=ember.float64), ember.empty(8, 6, dtype=ember.float64).cuda()
    ember.mul(ta, ta, out=out)
    ember.mul(td, td, out=dout)
    _check(dout, out)


def test_conversions_follow_the_cpu(backend):
    """Casts (the copy kernel and the loads/stores around every kernel) give
    the CPU's values, out-of-range float to int included."""
    vals = np.array([0.0, -0.0, 1.5, -1.5, 2.5, 127.9, 128.5, -129.5, 255.5, 300.25, -300.75, 65504.0,
                     70000.0, 3.0e9, -3.0e9, 1e20, -1e20, np.inf, -np.inf, np.nan, 1e-8, 6e-8, 3.4e38],
                    np.float64)
    for src in ("float64", "float32", "float16", "bfloat16"):
        a, da = _pair(vals)
        a, da = a.to(getattr(ember, src)), da.to(getattr(ember, src))
        for dst in ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
                    "float64"):
            d = getattr(ember, dst)
            _check(da.to(d), a.to(d), f"{src} -> {dst}")
    ints = np.array([0, 1, -1, 127, 128, 255, 256, -129, 32767, 40000, 2**31 - 1, -2**31, 2**40 + 3], np.int64)
    a, da = _pair(ints)
    for dst in ("bool", "uint8", "int8", "int16", "int32", "float16", "bfloat16", "float32", "float64"):
        d = getattr(ember, dst)
        _check(da.to(d), a.to(d), f"int64 -> {dst}")


def test_byte_offsets_past_2_31(backend):
    """A strided view whose elements lie more than 2^31 bytes apart in total:
    offsets are 64-bit even when the index fits 32 bits (GPU only: 2.1 GB)."""
    if backend != "cuda":
        pytest.skip("needs 2.1 GB of device memory (the fake holds 1 GiB)")
    n = (1 << 29) + (1 << 20)
    x = ember.zeros(n, dtype=ember.float32, device="cuda")
    v = x[:: 1 << 20]  # 513 elements, 4 MiB apart
    v.add_(ember.arange(v.numel(), dtype=ember.float32, device="cuda"))
    got = (v * 2 + 1).cpu().numpy()
    np.testing.assert_array_equal(got, np.arange(v.numel(), dtype=np.float32) * 2 + 1)
    assert x[-(1 << 20):].cpu().numpy()[0] == v.numel() - 1  # byte offset 2^31
    del x, v
