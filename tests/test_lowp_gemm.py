"""bfloat16 / float16 matrix products on the CPU (Note [low-precision GEMM]
in csrc/cpu/lowp_gemm.c), on each path: "convert" (float32 copies, sgemm)
and "library" (oneDNN loaded at run time; skipped where it is not
installed, or where it has no kernel for the dtype on this CPU).

References are NumPy float64. Two kinds of inputs:
- dyadic values (k/8, |k| <= 8): every product and partial sum is exact in
  float32, so a product accumulated in float32 and rounded once, as torch
  does, equals the float64 result rounded to the dtype, bit for bit; a
  path that rounded partial sums to the half dtype, or rounded twice,
  fails;
- normal random values, at torch's default tolerances for the dtype
  (assert_close: bfloat16 rtol 1.6e-2, float16 rtol 1e-3, atol 1e-5).
Operands come contiguous, transposed (read in place), sliced with a step
(copied first) and batch-broadcast (stride 0), at sizes 0, 1, 7, 33, 129."""
import os
import subprocess
import sys

import numpy as np
import pytest

import ember

INFO = ember._C._lowp_gemm_info()
DTYPES = {"bfloat16": ember.bfloat16, "float16": ember.float16}
TOL = {"bfloat16": (1.6e-2, 1e-5), "float16": (1e-3, 1e-5)}


def library_reason(dt):
    if not INFO["loaded"]:
        return f"oneDNN not loadable here ({INFO['error'] or 'not found'})"
    if not INFO["dtypes"][dt]["supported"]:
        return f"oneDNN has no {dt} matmul on this CPU"
    return None


@pytest.fixture(params=["convert", "library"])
def path(request):
    """Forces the path for the test (the dtype's skip is in `case`)."""
    ember._C._set_lowp_gemm(request.param)
    yield request.param
    ember._C._set_lowp_gemm(INFO["mode"])


@pytest.fixture(params=list(DTYPES))
def case(request, path):
    dt = request.param
    if path == "library" and library_reason(dt):
        pytest.skip(library_reason(dt))
    return path, dt


def calls():
    return ember._C._lowp_gemm_info()["calls"]


def round_to(x, dt):
    """float64 values exactly representable in float32 -> the nearest dtype value (ties to even), as float64"""
    f = np.asarray(x, dtype=np.float32)
    assert np.array_equal(f.astype(np.float64), x), "reference not exact in float32"
    if dt == "float16":
        return f.astype(np.float16).astype(np.float64)
    u = f.view(np.uint32).astype(np.uint64)
    u = ((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
    return u.view(np.float32).astype(np.float64)


RNG = np.random.default_rng(20)


def dyadic(*shape):
    return RNG.integers(-8, 9, size=shape).astype(np.float64) / 8


def normal(*shape):
    return round_to(RNG.standard_normal(shape).astype(np.float32).astype(np.float64), "bfloat16")


def make(x, dt, layout="c"):
    """An ember tensor in dtype dt holding x (exact in dt), in a layout:
    c contiguous, t the transpose of a contiguous tensor (last two dims),
    s every other column of a wider one (a stride BLAS cannot take)."""
    if layout == "t":
        base = ember.from_numpy(np.ascontiguousarray(np.swapaxes(x, -1, -2))).to(DTYPES[dt])
        return base.transpose(-1, -2)
    if layout == "s":
        wide = np.zeros(x.shape[:-1] + (2 * x.shape[-1],))
        wide[..., ::2] = x
        return ember.from_numpy(wide).to(DTYPES[dt])[..., ::2]
    return ember.from_numpy(np.ascontiguousarray(x)).to(DTYPES[dt])


def value(t):
    return t.float().numpy().astype(np.float64)


def check_exact(got, ref, dt):
    assert got.dtype == DTYPES[dt]
    np.testing.assert_array_equal(value(got), round_to(ref, dt))


def check_close(got, ref, dt):
    rtol, atol = TOL[dt]
    np.testing.assert_allclose(value(got), ref, rtol=rtol, atol=atol)


SIZES = [(1, 1, 1), (1, 7, 33), (7, 33, 1), (33, 1, 7), (7, 129, 33), (129, 33, 129), (33, 129, 7)]
LAYOUTS = [("c", "c"), ("t", "t"), ("t", "c"), ("s", "c"), ("c", "s")]


@pytest.mark.parametrize("m,k,n", SIZES)
@pytest.mark.parametrize("la,lb", LAYOUTS)
def test_mm_exact(case, m, k, n, la, lb):
    path, dt = case
    a, b = dyadic(m, k), dyadic(k, n)
    before = calls()
    check_exact(ember.mm(make(a, dt, la), make(b, dt, lb)), a @ b, dt)
    assert (calls() > before) == (path == "library")


@pytest.mark.parametrize("m,k,n", [(7, 33, 129), (1, 129, 1)])
def test_library_refusal_falls_back_by_conversion(m, k, n):
    """A shape the library refuses is computed by conversion inside the library path: still one rounding"""
    if library_reason("bfloat16"):
        pytest.skip(library_reason("bfloat16"))
    ember._C._set_lowp_gemm("library")
    ember._C._lowp_gemm_refuse_for_tests(True)
    try:
        for dt in ("bfloat16", "float16"):
            a, b, c = dyadic(m, k), dyadic(k, n), dyadic(m, n)
            before = calls()
            got = ember.addmm(make(c, dt), make(a, dt, "t"), make(b, dt, "t"), beta=-2, alpha=0.5)
            check_exact(got, -2 * c + 0.5 * (a @ b), dt)
            # a batch the library refuses as one call, then matrix by matrix
            ab, bb = dyadic(3, m, k), dyadic(3, k, n)
            check_exact(ember.bmm(make(ab, dt), make(bb, dt, "t")), ab @ bb, dt)
            assert calls() == before
    finally:
        ember._C._lowp_gemm_refuse_for_tests(False)
        ember._C._set_lowp_gemm(INFO["mode"])


@pytest.mark.parametrize("m,k,n", [(7, 33, 129), (129, 129, 33), (1, 129, 7)])
def test_mm_normal(case, m, k, n):
    _, dt = case
    a, b = normal(m, k), normal(k, n)
    check_close(make(a, dt, "t") @ make(b, dt), a @ b, dt)


def test_mm_column_major_out(case):
    """C written as a transposed (column-major) view: C^T = B^T A^T"""
    _, dt = case
    a, b = dyadic(33, 7), dyadic(7, 129)
    out = ember.empty(129, 33, dtype=DTYPES[dt]).t()
    ember.mm(make(a, dt), make(b, dt), out=out)
    check_exact(out, a @ b, dt)
    # an out= no GEMM can write in place (every other column): a scratch C, copied in
    wide = ember.zeros(33, 258, dtype=DTYPES[dt])
    ember.mm(make(a, dt), make(b, dt), out=wide[:, ::2])
    check_exact(wide[:, ::2], a @ b, dt)
    np.testing.assert_array_equal(value(wide[:, 1::2]), np.zeros((33, 129)))


@pytest.mark.parametrize("m,k,n", [(0, 7, 33), (7, 0, 33), (7, 33, 0), (0, 0, 0)])
def test_mm_zero_sizes(case, m, k, n):
    _, dt = case
    r = ember.mm(make(dyadic(m, k), dt), make(dyadic(k, n), dt))
    assert tuple(r.shape) == (m, n) and r.dtype == DTYPES[dt]
    np.testing.assert_array_equal(value(r), np.zeros((m, n)))


@pytest.mark.parametrize("m,k,n", [(1, 7, 33), (33, 129, 7), (7, 1, 1)])
@pytest.mark.parametrize("la,lb", [("c", "c"), ("t", "t"), ("s", "t")])
def test_bmm_exact(case, m, k, n, la, lb):
    _, dt = case
    a, b = dyadic(3, m, k), dyadic(3, k, n)
    check_exact(ember.bmm(make(a, dt, la), make(b, dt, lb)), a @ b, dt)


def test_bmm_zero_batch_and_normal(case):
    _, dt = case
    r = ember.bmm(make(dyadic(0, 7, 33), dt), make(dyadic(0, 33, 5), dt))
    assert tuple(r.shape) == (0, 7, 5)
    a, b = normal(4, 33, 129), normal(4, 129, 7)
    check_close(ember.bmm(make(a, dt), make(b, dt, "t")), a @ b, dt)


@pytest.mark.parametrize("m,k,n", [(7, 33, 129), (1, 7, 1), (129, 1, 33)])
@pytest.mark.parametrize("bias", ["row", "full"])
def test_addmm_exact(case, m, k, n, bias):
    _, dt = case
    a, b = dyadic(m, k), dyadic(k, n)
    c = dyadic(n) if bias == "row" else dyadic(m, n)
    check_exact(ember.addmm(make(c, dt), make(a, dt), make(b, dt, "t")), c + a @ b, dt)
    check_exact(ember.addmm(make(c, dt), make(a, dt, "t"), make(b, dt), beta=-2, alpha=0.5),
                -2 * c + 0.5 * (a @ b), dt)


def test_addmm_beta_zero_ignores_nan_and_k_zero(case):
    _, dt = case
    a, b = dyadic(7, 33), dyadic(33, 5)
    c = make(np.full((7, 5), np.nan), dt)
    check_exact(ember.addmm(c, make(a, dt), make(b, dt), beta=0), a @ b, dt)
    c = dyadic(7, 5)
    r = ember.addmm(make(c, dt), make(dyadic(7, 0), dt), make(dyadic(0, 5), dt), beta=0.5)
    check_exact(r, 0.5 * c, dt)


def test_addmm_inplace_and_normal(case):
    _, dt = case
    a, b, c = normal(33, 129), normal(129, 7), normal(33, 7)
    t = make(c, dt)
    t.addmm_(make(a, dt), make(b, dt))
    check_close(t, c + a @ b, dt)


@pytest.mark.parametrize("shape", [(7,), (33, 129), (2, 7, 129), (0, 33)])
@pytest.mark.parametrize("with_bias", [True, False])
def test_linear_exact(case, shape, with_bias):
    _, dt = case
    x, w, bias = dyadic(*shape), dyadic(33, shape[-1]), dyadic(33)
    ref = x @ w.T + (bias if with_bias else 0)
    got = ember.nn.functional.linear(make(x, dt), make(w, dt), make(bias, dt) if with_bias else None)
    assert tuple(got.shape) == ref.shape
    check_exact(got, ref, dt)


@pytest.mark.parametrize("sa,sb", [((7,), (7, 33)), ((33, 7), (7,)), ((2, 3, 7, 33), (33, 129)),
                                   ((2, 1, 7, 33), (3, 33, 1)), ((33,), (4, 33, 7)), ((4, 1, 33), (4, 33, 129))])
def test_matmul_exact(case, sa, sb):
    _, dt = case
    a, b = dyadic(*sa), dyadic(*sb)
    got = ember.matmul(make(a, dt), make(b, dt, "t" if len(sb) > 1 else "c"))
    assert tuple(got.shape) == np.matmul(a, b).shape
    check_exact(got, np.matmul(a, b), dt)


def test_matmul_broadcast_batch_stride_zero(case):
    """A batch operand expanded with stride 0 is read in place, not copied per batch (on the library path
    one call for the whole batch, the shared matrix broadcast)"""
    path, dt = case
    a, b = dyadic(1, 7, 33), dyadic(5, 33, 33)
    ea = make(a, dt).expand(5, 7, 33)
    before = calls()
    check_exact(ember.matmul(ea, make(b, dt)), np.matmul(a, b), dt)
    assert calls() - before == (1 if path == "library" else 0)
    # batch dims that do not fold into one stride: one call per matrix
    a4, b4 = dyadic(2, 3, 7, 33), dyadic(2, 3, 33, 5)
    check_exact(ember.matmul(make(a4, dt)[:, ::2], make(b4, dt)[:, ::2]), np.matmul(a4[:, ::2], b4[:, ::2]), dt)


@pytest.mark.parametrize("m,k,n", [(7, 33, 129), (1, 1, 7), (33, 0, 7)])
def test_baddbmm_exact(case, m, k, n):
    _, dt = case
    a, b, c = dyadic(3, m, k), dyadic(3, k, n), dyadic(3, m, n)
    check_exact(ember.baddbmm(make(c, dt), make(a, dt), make(b, dt, "t")), c + a @ b, dt)
    check_exact(ember.baddbmm(make(c, dt), make(a, dt, "t"), make(b, dt), beta=0.5, alpha=-2),
                0.5 * c - 2 * (a @ b), dt)


def test_addbmm(case):
    """addbmm sums the batch into C. On the library path C stays in the dtype and each batch's product is
    added and rounded in turn — what torch 2.15 gives (checked bit for bit on these inputs); the convert path
    sums in float32 and rounds once"""
    path, dt = case
    a, b, c = dyadic(6, 7, 129), dyadic(6, 129, 33), dyadic(7, 33)
    got = ember.addbmm(make(c, dt), make(a, dt), make(b, dt, "t"))
    if path == "library":
        want = round_to(c, dt)
        for i in range(6):
            want = round_to(want + a[i] @ b[i], dt)
        np.testing.assert_array_equal(value(got), want)
    else:
        check_exact(got, c + np.einsum("bij,bjk->ik", a, b), dt)


@pytest.mark.parametrize("m,k", [(7, 129), (1, 33), (129, 1)])
def test_mv_and_addmv(case, m, k):
    _, dt = case
    a, x, y = dyadic(m, k), dyadic(k), dyadic(m)
    check_exact(ember.mv(make(a, dt, "t"), make(x, dt)), a @ x, dt)
    check_exact(ember.addmv(make(y, dt), make(a, dt), make(x, dt), beta=0.5, alpha=2), 0.5 * y + 2 * (a @ x), dt)


@pytest.mark.parametrize("sa,sb", [((33, 129), (129, 7)), ((2, 7, 33), (33, 129)), ((3, 1, 33), (3, 33, 7))])
def test_matmul_grad_bfloat16(path, sa, sb):
    if path == "library" and library_reason("bfloat16"):
        pytest.skip(library_reason("bfloat16"))
    a, b = dyadic(*sa), dyadic(*sb)
    out_shape = np.matmul(a, b).shape
    g = dyadic(*out_shape)
    ta, tb = make(a, "bfloat16").requires_grad_(), make(b, "bfloat16").requires_grad_()
    ember.matmul(ta, tb).backward(make(g, "bfloat16"))
    ga = np.matmul(g, np.swapaxes(b, -1, -2))
    gb = np.matmul(np.swapaxes(a, -1, -2), g)
    gb = gb.reshape((-1,) + gb.shape[-2:]).sum(0) if len(sb) < len(out_shape) else gb
    assert ta.grad.dtype == ember.bfloat16 and tb.grad.dtype == ember.bfloat16
    check_exact(ta.grad, ga, "bfloat16")
    # b's grad sums over the broadcast batch: one rounding of the whole sum, or one per batch then a sum
    check_close(tb.grad, gb, "bfloat16")


def test_float32_untouched(path):
    """float32 products never go to the low-precision library"""
    a, b = dyadic(33, 7), dyadic(7, 5)
    before = calls()
    r = ember.from_numpy(a.astype(np.float32)) @ ember.from_numpy(b.astype(np.float32))
    np.testing.assert_array_equal(r.numpy(), (a @ b).astype(np.float32))
    assert calls() == before


def test_set_mode_rejects_unknown():
    with pytest.raises(ValueError, match="'auto', 'library' or 'convert'"):
        ember._C._set_lowp_gemm("fast")


def run_py(code, **env):
    e = dict(os.environ)
    e.update(env)
    r = subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True, timeout=120)
    return r.returncode, r.stdout + r.stderr


MM = ("import ember; a = ember.ones(4, 5, dtype=ember.bfloat16); b = ember.ones(5, 3, dtype=ember.bfloat16)\n"
      "r = a @ b; print(r.float().sum().item(), ember._C._lowp_gemm_info()['mode'], "
      "ember._C._lowp_gemm_info()['calls'])")


def test_env_forces_convert():
    rc, out = run_py(MM, EMBER_LOWP_GEMM="convert")
    assert rc == 0, out
    assert out.split()[-3:] == ["60.0", "convert", "0"]


def test_env_library_missing_is_an_error():
    code = ("import ember\na = ember.ones(4, 5, dtype=ember.bfloat16)\n"
            "print((ember.ones(2, 2) @ ember.ones(2, 2)).sum().item())\n"
            "try:\n    a @ a.t()\nexcept RuntimeError as e:\n    print('RuntimeError', e)\n")
    rc, out = run_py(code, EMBER_LOWP_GEMM="library", EMBER_LOWP_GEMM_LIB="/nonexistent/libdnnl.so.3")
    assert rc == 0, out
    assert "8.0" in out and "RuntimeError EMBER_LOWP_GEMM=library, but oneDNN could not be loaded" in out
    assert "/nonexistent/libdnnl.so.3" in out


def test_env_bad_value():
    code = ("import ember\na = ember.ones(4, 5, dtype=ember.bfloat16)\n"
            "try:\n    a @ a.t()\nexcept ValueError as e:\n    print('ValueError', e)\n")
    rc, out = run_py(code, EMBER_LOWP_GEMM="fastest")
    assert rc == 0, out
    assert "ValueError EMBER_LOWP_GEMM must be 'auto', 'library' or 'convert', got 'fastest'" in out


@pytest.mark.skipif(library_reason("bfloat16") is not None, reason=str(library_reason("bfloat16")))
def test_env_forces_library():
    rc, out = run_py(MM, EMBER_LOWP_GEMM="library")
    assert rc == 0, out
    total, mode, n = out.split()[-3:]
    assert (total, mode) == ("60.0", "library") and int(n) >= 1


def test_threads_share_the_library():
    """Python threads multiplying at once (the primitive cache and per-thread streams): every result exact"""
    import threading
    shapes = [(7, 33, 129), (33, 129, 7), (129, 7, 33), (1, 33, 7)]
    work = [(dyadic(*s[:2]), dyadic(*s[1:])) for s in shapes for _ in range(3)]
    errors = []

    def run(i):
        try:
            for j in range(8):
                a, b = work[(i + j) % len(work)]
                check_exact(make(a, "bfloat16") @ make(b, "bfloat16", "t"), a @ b, "bfloat16")
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
    for path in ["library", "convert"] if not library_reason("bfloat16") else ["convert"]:
        ember._C._set_lowp_gemm(path)
        try:
            ts = [threading.Thread(target=run, args=(i,)) for i in range(4)]
            for t in ts:
                t.start()
            for t in ts:
                t.join(60)
        finally:
            ember._C._set_lowp_gemm(INFO["mode"])
        assert not errors, errors


def test_big_product_in_slabs():
    """A product past 2^32 multiply-adds on the main thread runs in row slabs (polled for Ctrl-C): still exact"""
    if library_reason("bfloat16"):
        pytest.skip(library_reason("bfloat16"))
    m, k, n = 2055, 1024, 2048
    a = RNG.integers(-2, 3, size=(m, k)).astype(np.float32) / 2
    b = RNG.integers(-2, 3, size=(k, n)).astype(np.float32) / 2
    ember._C._set_lowp_gemm("library")
    try:
        before = calls()
        got = make(a, "bfloat16") @ make(b, "bfloat16")
        slabs = calls() - before
    finally:
        ember._C._set_lowp_gemm(INFO["mode"])
    check_exact(got, (a @ b).astype(np.float64), "bfloat16")  # float32 sums of quarters stay exact here
    assert slabs >= 1, slabs  # 2 (2048 + 7 rows) where Ctrl-C polling is armed, as in a plain pytest run
