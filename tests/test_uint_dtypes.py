"""uint16 / uint32 / uint64 (Note [wide unsigned dtypes] in csrc/ember.h).

References: torch's own results for the calls of uint_cases.py, stored in
tests/data/uint_torch_reference.json (and torch itself when installed), a
checkpoint torch wrote, NumPy for casts and sweeps, and op_db's NumPy
references for every op that accepts integer input."""
import io
import json
import math
import os
import pickletools
import re
import struct
import warnings
import zipfile
import zlib

import numpy as np
import pytest

import ember
import op_db
import uint_cases

DATA = os.path.join(os.path.dirname(__file__), "data")
NPU = {"uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64}

# case regex -> why ember's answer differs from torch's on purpose. Each of these
# is a call torch refuses for the wide unsigned types and ember computes (the
# values are checked against NumPy in test_op_table_values below).
MORE_THAN_TORCH = {
    r"^(arange|index_put|masked_fill|topk)\[": "ember's generic kernels (copy, sort, fill) cover these dtypes; "
                                               "torch raises NotImplementedError",
    r"^int\[uint64\]": "int() of a uint64 above 2**63 gives the Python int; torch raises RuntimeError",
}


def _same(a, b):
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-6)
    if isinstance(a, dict) and isinstance(b, dict):
        if "error" in a or "error" in b:
            if a.get("error") != b.get("error"):
                return False
            # torch's promotion refusal is worded the same
            return "Promotion" not in a.get("message", "") or a["message"] == b["message"]
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def _mismatches(reference, got):
    bad = []
    for key, want in reference.items():
        if any(re.search(k, key) for k in MORE_THAN_TORCH):
            continue
        if not _same(want, got[key]):
            bad.append(f"{key}: torch {str(want)[:160]} / ember {str(got[key])[:160]}")
    return bad


@pytest.fixture(scope="module")
def ember_results():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return uint_cases.all_results(ember)


def test_cases_match_stored_torch_results(ember_results):
    with open(os.path.join(DATA, "uint_torch_reference.json")) as f:
        reference = json.load(f)["results"]
    assert reference.keys() == ember_results.keys(), "tests/data/make_uint_reference.py is out of date"
    bad = _mismatches(reference, ember_results)
    assert not bad, f"{len(bad)} difference(s) from torch:\n" + "\n".join(bad)


def test_known_differences_still_differ(ember_results):
    """Each MORE_THAN_TORCH entry names a real difference (drop it once ember matches)."""
    with open(os.path.join(DATA, "uint_torch_reference.json")) as f:
        reference = json.load(f)["results"]
    for pattern in MORE_THAN_TORCH:
        keys = [k for k in reference if re.search(pattern, k)]
        assert keys and any(not _same(reference[k], ember_results[k]) for k in keys), pattern


def test_cases_match_live_torch(torch, ember_results):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        live = uint_cases.all_results(torch)
    for v in live.values():
        if isinstance(v.get("value"), str):
            v["value"] = v["value"].replace("torch.", "ember.")
    bad = _mismatches(live, ember_results)
    assert not bad, f"{len(bad)} difference(s) from torch:\n" + "\n".join(bad)


# -- casts against NumPy -------------------------------------------------------------------
@pytest.mark.parametrize("d", uint_cases.UNSIGNED)
@pytest.mark.parametrize("src", ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool"])
def test_integer_casts_wrap_as_numpy(d, src):
    rng = np.random.default_rng(zlib.crc32(f"{d} {src}".encode()))
    info = np.iinfo(np.int64) if src == "bool" else np.iinfo(src)
    v = rng.integers(info.min, info.max, 257, dtype=np.int64 if info.min < 0 else np.uint64, endpoint=True)
    v = v.astype(bool) if src == "bool" else v.astype(src)
    got = ember.from_numpy(v).to(getattr(ember, d))
    np.testing.assert_array_equal(got.numpy(), v.astype(NPU[d]))
    back = got.to(getattr(ember, src))  # and back: NumPy's wrap-around too
    np.testing.assert_array_equal(back.numpy(), v.astype(NPU[d]).astype(src))


@pytest.mark.parametrize("d", uint_cases.UNSIGNED)
@pytest.mark.parametrize("fdt", ["float16", "float32", "float64"])
def test_float_casts_in_range(d, fdt):
    rng = np.random.default_rng(7)
    top = min(2.0 ** uint_cases.BITS[d], float(np.finfo(fdt).max))
    v = np.concatenate([rng.uniform(0, top, 300), [0.0, 0.999, 1.5, 2.0 ** 24 if fdt != "float16" else 2048.0]])
    v = v.astype(fdt)
    v = v[v.astype(np.float64) < top]
    got = ember.from_numpy(v).to(getattr(ember, d)).numpy()
    np.testing.assert_array_equal(got, np.trunc(v.astype(np.float64)).astype(NPU[d]))
    u = rng.integers(0, 2 ** uint_cases.BITS[d] - 1, 300, dtype=np.uint64, endpoint=True).astype(NPU[d])
    with np.errstate(over="ignore"):  # beyond float16: inf in both
        np.testing.assert_array_equal(ember.from_numpy(u).to(getattr(ember, fdt)).numpy(), u.astype(fdt))


def test_uint64_above_int64_keeps_its_value():
    big = np.array([2 ** 64 - 1, 2 ** 63, 2 ** 63 - 1, 12345], dtype=np.uint64)
    t = ember.from_numpy(big)
    assert t.tolist() == [int(x) for x in big]
    assert t[1].item() == 2 ** 63
    assert ember.tensor([2 ** 64 - 1, 2 ** 63], dtype=ember.uint64).tolist() == [2 ** 64 - 1, 2 ** 63]
    assert ember.full((2,), 2 ** 64 - 1, dtype=ember.uint64).tolist() == [2 ** 64 - 1] * 2
    np.testing.assert_array_equal(t.to(ember.float64).numpy(), big.astype(np.float64))
    np.testing.assert_array_equal((t * 3).numpy(), big * np.uint64(3))  # wraps modulo 2**64
    np.testing.assert_array_equal(ember.maximum(t, ember.tensor(2 ** 63, dtype=ember.uint64)).numpy(),
                                  np.maximum(big, np.uint64(2 ** 63)))
    assert ember.sort(t).values.tolist() == sorted(int(x) for x in big)
    assert (ember.tensor([1.0]) * (2 ** 64 - 1)).item() == float(2 ** 64 - 1)


@pytest.mark.parametrize("d", uint_cases.UNSIGNED)
def test_sort_and_unique_against_numpy(d):
    rng = np.random.default_rng(3)
    v = rng.integers(0, 2 ** uint_cases.BITS[d] - 1, 1000, dtype=np.uint64, endpoint=True).astype(NPU[d])
    v[::7] = v[3]  # repeats
    t = ember.from_numpy(v)
    np.testing.assert_array_equal(ember.sort(t).values.numpy(), np.sort(v))
    np.testing.assert_array_equal(ember.sort(t, descending=True).values.numpy(), np.sort(v)[::-1])
    np.testing.assert_array_equal(ember.argsort(t, stable=True).numpy(), np.argsort(v, kind="stable"))
    np.testing.assert_array_equal(ember.unique(t).numpy(), np.unique(v))
    assert t.sum().item() == int(v.astype(np.uint64).sum().astype(np.int64))  # int64, wrapping for uint64


# -- promotion -----------------------------------------------------------------------------
def test_promotion_table_matches_torch_record():
    with open(os.path.join(DATA, "uint_torch_reference.json")) as f:
        reference = json.load(f)["results"]
    n = 0
    for key, want in reference.items():
        if key.startswith("promote_types["):
            a, b = key[len("promote_types["):-1].split(",")
            got = uint_cases.run(ember, lambda L: L.promote_types(getattr(L, a), getattr(L, b)))
            assert _same(want, got), (key, want, got)
            n += 1
    assert n == 15 * 15 - 12 * 12


# -- files ---------------------------------------------------------------------------------
def test_loads_torch_checkpoint():
    ck = ember.load(os.path.join(DATA, "uint_torch_checkpoint.pt"))
    for d in uint_cases.UNSIGNED:
        assert ck[d].dtype == getattr(ember, d)
        assert ck[d].tolist() == [2 ** uint_cases.BITS[d] - 1, 0, 7]
    assert ck["view"].tolist() == [0, 7]
    assert ck["view"].untyped_storage().data_ptr() == ck["uint32"].untyped_storage().data_ptr()


def test_saves_torch_layout(tmp_path):
    """torch has no typed storage class for these dtypes: it pickles them through
    _rebuild_tensor_v3 over an UntypedStorage sized in bytes, and so does ember."""
    t = ember.tensor([2 ** 32 - 1, 0, 7], dtype=ember.uint32)
    path = tmp_path / "u.pt"
    ember.save({"t": t, "v": t[1:]}, path)
    with zipfile.ZipFile(path) as z:
        pkl = z.read(next(n for n in z.namelist() if n.endswith("data.pkl")))
    ops = [(op.name, arg) for op, arg, _ in pickletools.genops(pkl)]
    assert ("GLOBAL", "torch._utils _rebuild_tensor_v3") in ops
    assert ("GLOBAL", "torch.storage UntypedStorage") in ops
    assert ("GLOBAL", "torch uint32") in ops
    assert ("BININT1", 12) in ops  # the storage's size in bytes
    back = ember.load(path)
    assert back["t"].tolist() == [2 ** 32 - 1, 0, 7] and back["v"].tolist() == [0, 7]


def test_torch_reads_ember_checkpoint(torch, tmp_path):
    ts = {d: ember.tensor([2 ** uint_cases.BITS[d] - 1, 5], dtype=getattr(ember, d)) for d in uint_cases.UNSIGNED}
    ember.save(ts, tmp_path / "e.pt")
    back = torch.load(tmp_path / "e.pt", weights_only=True)
    for d in uint_cases.UNSIGNED:
        assert back[d].dtype == getattr(torch, d) and back[d].tolist() == ts[d].tolist()


def test_safetensors_round_trip_and_codes():
    from ember import safetensors
    ts = {d: ember.tensor([2 ** uint_cases.BITS[d] - 1, 1, 2], dtype=getattr(ember, d)) for d in uint_cases.UNSIGNED}
    blob = safetensors.save(ts)
    n = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8:8 + n])
    assert {k: header[k]["dtype"] for k in ts} == {"uint16": "U16", "uint32": "U32", "uint64": "U64"}
    back = safetensors.load(blob)
    assert all(back[k].dtype == ts[k].dtype and back[k].tolist() == ts[k].tolist() for k in ts)
    # a file written by hand from the format's description
    payload = np.array([1, 2 ** 32 - 1], np.uint32).tobytes()
    head = json.dumps({"x": {"dtype": "U32", "shape": [2], "data_offsets": [0, 8]}}).encode()
    x = safetensors.load(struct.pack("<Q", len(head)) + head + payload)["x"]
    assert x.dtype == ember.uint32 and x.tolist() == [1, 2 ** 32 - 1]


def test_numpy_and_dlpack_interop():
    for d in uint_cases.UNSIGNED:
        a = np.array([2 ** uint_cases.BITS[d] - 1, 3], dtype=d)
        t = ember.from_numpy(a)
        assert t.dtype == getattr(ember, d)
        t[1] = 9  # shares memory
        assert a[1] == 9
        assert np.from_dlpack(t).dtype == np.dtype(d)
        assert ember.from_dlpack(a).dtype == getattr(ember, d)
        assert np.asarray(t).dtype == np.dtype(d)
        mv = memoryview(t.numpy())
        assert mv.format in ("H", "I", "L", "Q")


# -- every op of the table: a result is right, or the call is refused cleanly ------------
def _uint_args(a, d):
    if isinstance(a, op_db.TS):
        if a.dtype == "int64":
            return ember.from_numpy(np.array(a.values, NPU[d]))
        if a.dtype == "bfloat16":
            return ember.tensor(a.values).to(ember.bfloat16)
        return ember.from_numpy(np.array(a.values, op_db.NP[a.dtype]))
    if isinstance(a, (list, tuple)) and any(isinstance(x, op_db.TS) for x in a):
        return type(a)(_uint_args(x, d) for x in a)
    if isinstance(a, op_db.DT):
        return getattr(ember, a)
    return a


def _nonnegative(a):
    if isinstance(a, op_db.TS):
        return a.dtype != "int64" or a.values.size == 0 or a.values.min() >= 0
    if isinstance(a, (list, tuple)):
        return all(_nonnegative(x) for x in a)
    return True


def _np_values(a):
    if isinstance(a, op_db.TS):
        return a.values
    if isinstance(a, (list, tuple)) and any(isinstance(x, op_db.TS) for x in a):
        return type(a)(_np_values(x) for x in a)
    return a


def _call(op, args, kwargs, desc):
    if op.call:
        return op.call(ember, *args, **kwargs)
    if "F" in op.variants and desc != "varargs":
        return (op.fn(ember) if op.fn else getattr(ember, op.name))(*args, **kwargs)
    i = op.method_self
    return getattr(args[i], op.name)(*args[:i], *args[i + 1:], **kwargs)


@pytest.mark.parametrize("d", uint_cases.UNSIGNED)
def test_op_table_values(d):
    """Every op with integer samples, fed the same (non-negative) values as uint
    tensors: it raises a clean exception, or gives op_db's NumPy answer."""
    checked = refused = 0
    for op in op_db.OPS:
        if "int64" not in op.dtypes or op.kind == "random":
            continue
        for s in op.get_samples("int64", "contig"):
            if not _nonnegative(list(s.args) + list(s.kwargs.values())):
                continue
            args = [_uint_args(a, d) for a in s.args]
            kwargs = {k: _uint_args(v, d) for k, v in s.kwargs.items()}
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    r = _call(op, args, kwargs, s.desc)
            except (NotImplementedError, RuntimeError, TypeError, IndexError, ValueError):
                refused += 1
                continue
            expect, _ = op.expected(s, [_np_values(a) for a in s.args])
            got = r if isinstance(r, (tuple, list)) else (r,)
            want = expect if isinstance(expect, tuple) else (expect,)
            for g, w in zip(got, want):
                if isinstance(g, ember.Tensor):
                    gv = g.detach().numpy().astype(np.float64) if g.dtype != ember.bfloat16 else \
                        g.detach().to(ember.float64).numpy()
                    wv = np.asarray(w, np.float64)
                    assert gv.shape == wv.shape and np.allclose(gv, wv, rtol=1e-5, atol=1e-6, equal_nan=True), \
                        f"{op.name}{s.desc and ' ' + s.desc} on {d}: {gv.ravel()[:8]} != {wv.ravel()[:8]}"
            checked += 1
    assert checked > 50 and refused > 10, (checked, refused)


# -- put / put_ (torch has them for every dtype) ----------------------------------------
@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize("layout", ["contig", "T"])
def test_put_against_numpy(accumulate, layout):
    rng = np.random.default_rng(5)
    base = rng.standard_normal((4, 5))
    idx = np.array([0, -1, 7, 7, 13, -20])
    src = rng.standard_normal(6)
    want = base.copy().ravel()
    if accumulate:
        np.add.at(want, idx, src)
    else:
        for i, v in zip(idx, src):  # the last write wins, as in put_
            want[i] = v
    x = ember.from_numpy(base.copy()) if layout == "contig" else ember.from_numpy(base.T.copy()).t()
    out = ember.put(x, ember.from_numpy(idx), ember.from_numpy(src), accumulate=accumulate)
    np.testing.assert_allclose(out.numpy(), want.reshape(4, 5))
    np.testing.assert_allclose(x.numpy(), base)  # put leaves its input alone
    r = x.put_(ember.from_numpy(idx), ember.from_numpy(src), accumulate=accumulate)
    assert r is x
    np.testing.assert_allclose(x.numpy(), want.reshape(4, 5))


def test_put_gradients():
    w = ember.ones(4, dtype=ember.float64, requires_grad=True)
    s = ember.tensor([2.0, 3.0], dtype=ember.float64, requires_grad=True)
    (ember.put(w * 2, ember.tensor([1, 2]), s) * ember.arange(4.0, dtype=ember.float64)).sum().backward()
    assert w.grad.tolist() == [0.0, 0.0, 0.0, 6.0]  # overwritten places pass no gradient to w
    assert s.grad.tolist() == [1.0, 2.0]


@pytest.mark.parametrize("call,exc,msg", [
    (lambda x: x.put_(ember.tensor([0], dtype=ember.int32), ember.tensor([1.0])), RuntimeError, "Expected a long"),
    (lambda x: x.put_(ember.tensor([0, 1]), ember.tensor([1.0])), IndexError, "same number of elements"),
    (lambda x: x.put_(ember.tensor([6]), ember.tensor([1.0])), IndexError, "index 6 on a tensor of 6"),
    (lambda x: x.put_(ember.tensor([-7]), ember.tensor([1.0])), IndexError, "index -7 on a tensor of 6"),
    (lambda x: x.put_(ember.tensor([0]), ember.tensor([1.0], dtype=ember.float64)), RuntimeError, "Double"),
    (lambda x: ember.zeros(0).put_(ember.tensor([0]), ember.tensor([1.0])), IndexError, "empty tensor"),
])
def test_put_errors(call, exc, msg):
    with pytest.raises(exc, match=msg):
        call(ember.zeros(2, 3))


def test_dtype_objects():
    for d in uint_cases.UNSIGNED:
        dt = getattr(ember, d)
        assert repr(dt) == f"ember.{d}" and not dt.is_signed and not dt.is_floating_point
        assert ember.empty(2, dtype=dt).dtype is dt
        assert ember.ones(2, dtype=dt).view(ember.uint8).shape == (2 * dt.itemsize,)
        assert ember.tensor([1], dtype=dt).type() == f"ember.UInt{uint_cases.BITS[d]}Tensor"
        assert ember.tensor([1], dtype=dt).type(f"torch.UInt{uint_cases.BITS[d]}Tensor").dtype is dt


def test_meta_and_pickle():
    t = ember.tensor([2 ** 32 - 1, 4], dtype=ember.uint32)
    m = ember.empty(3, dtype=ember.uint64, device="meta")
    assert m.dtype == ember.uint64 and m.is_meta
    assert (m * 2).dtype == ember.uint64 and m.sum().dtype == ember.int64
    import pickle
    assert pickle.loads(pickle.dumps(t)).tolist() == [2 ** 32 - 1, 4]
    buf = io.BytesIO()
    ember.save(t, buf)
    buf.seek(0)
    assert ember.load(buf, weights_only=True).tolist() == [2 ** 32 - 1, 4]


def test_on_the_gpu_backend(cuda_device):
    """On a GPU (or the fake backend): data moves both ways, the elementwise
    kernels run or fall back, and the sorts (no GPU keys for these dtypes) fall
    back to the CPU's, values checked against NumPy."""
    for d in uint_cases.UNSIGNED:
        v = np.array([2 ** uint_cases.BITS[d] - 1, 3, 0, 7], dtype=d)
        t = ember.from_numpy(v).to(cuda_device)
        assert t.device.type == "cuda" and t.dtype == getattr(ember, d)
        np.testing.assert_array_equal(t.cpu().numpy(), v)
        np.testing.assert_array_equal((t * 3).cpu().numpy(), v * NPU[d](3))
        np.testing.assert_array_equal((t == 3).cpu().numpy(), v == 3)
        np.testing.assert_array_equal(ember.sort(t).values.cpu().numpy(), np.sort(v))
        np.testing.assert_array_equal(ember.unique(t).cpu().numpy(), np.unique(v))
        assert t.sum().item() == int(v.astype(np.uint64).sum().astype(np.int64))
        np.testing.assert_array_equal(t.to(ember.float64).cpu().numpy(), v.astype(np.float64))
        with pytest.raises(NotImplementedError):
            t + t
