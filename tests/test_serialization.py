"""ember.save / ember.load (PyTorch's zip checkpoint format) and
ember.safetensors: round trips, files written by PyTorch (tests/fixtures,
made by tests/fixtures/make_fixtures.py), PyTorch reading ember's files, and
malicious or broken inputs, which must be refused with a clear error and
never run code. Expected values come from NumPy formulas, never from ember."""
import collections
import datetime
import io
import json
import os
import pathlib
import pickle
import struct
import zipfile

import numpy as np
import pytest

import ember
import ember.safetensors as st
from ember import serialization
from conftest import requires_torch

FIXTURES = pathlib.Path(__file__).parent / "fixtures"

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]


def values(dtype, shape):
    """Values exactly representable in every dtype, as float64 NumPy."""
    n = int(np.prod(shape))
    v = (np.arange(n) % 7 - 3).astype(np.float64)
    if dtype == "bool":
        v = (v > 0).astype(np.float64)
    elif dtype == "uint8":
        v = v + 3
    return v.reshape(shape)


def make(dtype, shape):
    v = values(dtype, shape)
    flat = ember.tensor(v.reshape(-1).tolist(), dtype=ember.float64)
    return flat.reshape(shape).to(getattr(ember, dtype))


def as_np(t):
    return t.detach().to(ember.float64).numpy()


def roundtrip(obj, **kw):
    buf = io.BytesIO()
    ember.save(obj, buf)
    buf.seek(0)
    return ember.load(buf, **kw)


def layouts(dtype):
    """name -> (tensor, base it views)."""
    base = make(dtype, (4, 6))
    return {
        "contiguous": (base, base),
        "transposed": (base.t(), base),
        "sliced": (base[1:3, 2:5], base),
        "strided": (base[::2, ::3], base),
        "row": (base[2], base),
        "expanded": (base[1].expand(3, 6), base),
        "scalar": (make(dtype, ()), None),
        "empty": (ember.empty(0, 3, dtype=getattr(ember, dtype)), None),
    }


def fake_parameter_class(monkeypatch):
    """ember.nn.Parameter, or a stand-in subclass while ember has none."""
    param_cls = getattr(ember.nn, "Parameter", None)
    if param_cls is None:
        class FakeParameter(ember.Tensor):
            def __new__(cls, data, requires_grad=True):
                return ember.Tensor._make_subclass(cls, data.detach(), requires_grad)
        monkeypatch.setattr(ember.nn, "Parameter", FakeParameter, raising=False)
        param_cls = FakeParameter
    return param_cls


# -- round trips ------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced", "strided", "row", "expanded",
                                    "scalar", "empty"])
def test_roundtrip_dtype_layout(dtype, layout):
    t, base = layouts(dtype)[layout]
    out = roundtrip({"t": t, "base": base})
    got = out["t"]
    assert got.dtype == getattr(ember, dtype)
    assert tuple(got.shape) == tuple(t.shape)
    assert tuple(got.stride()) == tuple(t.stride())
    assert got.storage_offset() == t.storage_offset()
    if base is not None:
        np.testing.assert_array_equal(as_np(out["base"]), values(dtype, (4, 6)))
        assert got.untyped_storage() is out["base"].untyped_storage()
        assert got.untyped_storage().nbytes() == base.untyped_storage().nbytes()
    np.testing.assert_array_equal(as_np(got), as_np(t))


def test_shared_storage_write_through():
    a = ember.arange(12, dtype=ember.float32).view(3, 4)
    out = roundtrip({"a": a, "t": a.t(), "s": a[1:, 1:3]})
    out["t"][1, 2] = 100.0  # t[1, 2] is a[2, 1]
    assert as_np(out["a"])[2, 1] == 100.0
    assert as_np(out["s"])[1, 0] == 100.0
    assert out["a"].data_ptr() == out["t"].data_ptr()
    assert out["s"].data_ptr() == out["a"].data_ptr() + 5 * 4


def test_same_tensor_twice_is_one_object():
    a = ember.ones(3)
    out = roundtrip([a, a, {"x": a}])
    assert out[0] is out[1] and out[2]["x"] is out[0]


def test_nested_optimizer_state_and_plain_values():
    obj = {"state": {0: {"step": ember.tensor(3.0), "exp_avg": ember.zeros(2, 2)}},
           "param_groups": [{"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "params": [0], "name": None,
                             "flag": True, "tag": "x", "raw": b"\x00\x01", "big": 2 ** 70, "neg": -5,
                             "set": {1, 2}, "inf": float("inf")}],
           "od": collections.OrderedDict([("b", 1), ("a", 2)]),
           "dtype": ember.bfloat16, "device": ember.device("cpu"), "size": ember.Size([2, 3])}
    out = roundtrip(obj)
    assert out["param_groups"][0] == obj["param_groups"][0]
    assert type(out["od"]) is collections.OrderedDict and list(out["od"]) == ["b", "a"]
    assert out["dtype"] is ember.bfloat16
    assert out["device"] == ember.device("cpu")
    assert type(out["size"]) is ember.Size and tuple(out["size"]) == (2, 3)
    assert float(out["state"][0]["step"]) == 3.0


def test_requires_grad_kept():
    g = ember.tensor([1.0, 2.0]).requires_grad_()
    out = roundtrip({"g": g, "n": ember.ones(2)})
    assert out["g"].requires_grad and out["g"].is_leaf and out["g"].grad_fn is None
    assert not out["n"].requires_grad
    out2 = roundtrip(g * 2)  # a non-leaf comes back as a leaf that requires grad, as in torch
    assert out2.requires_grad and out2.is_leaf


def test_parameter_roundtrip_with_and_without_parameter_class(monkeypatch):
    param_cls = fake_parameter_class(monkeypatch)
    p = param_cls(ember.tensor([[1.0, 2.0], [3.0, 4.0]]), True)
    out = roundtrip({"p": p})
    assert isinstance(out["p"], param_cls) and out["p"].requires_grad
    np.testing.assert_array_equal(as_np(out["p"]), [[1, 2], [3, 4]])
    # with no Parameter class, a Parameter in a file becomes a leaf tensor that requires grad
    buf = io.BytesIO()
    ember.save({"p": p}, buf)
    monkeypatch.delattr(ember.nn, "Parameter", raising=False)
    out = ember.load(io.BytesIO(buf.getvalue()))
    assert type(out["p"]) is ember.Tensor and out["p"].requires_grad and out["p"].is_leaf


def test_path_pathlike_and_file_objects(tmp_path):
    a = ember.arange(5, dtype=ember.int64)
    ember.save(a, str(tmp_path / "a.pt"))
    ember.save(a, tmp_path / "b.pt")
    with open(tmp_path / "c.pt", "wb") as fp:
        ember.save(a, fp)
    for name in ("a.pt", "b.pt", "c.pt"):
        np.testing.assert_array_equal(ember.load(tmp_path / name).numpy(), np.arange(5))
    with open(tmp_path / "c.pt", "rb") as fp:
        np.testing.assert_array_equal(ember.load(fp).numpy(), np.arange(5))
    assert zipfile.ZipFile(tmp_path / "a.pt").namelist()[0] == "a/data.pkl"  # torch names records so


def test_file_layout_matches_torch_format(tmp_path):
    ember.save({"x": ember.ones(3), "y": ember.zeros(2, dtype=ember.int16)}, tmp_path / "m.pt")
    raw = (tmp_path / "m.pt").read_bytes()
    zf = zipfile.ZipFile(tmp_path / "m.pt")
    names = zf.namelist()
    assert names[0] == "m/data.pkl"
    assert {"m/version", "m/byteorder", "m/data/0", "m/data/1", "m/.format_version"} <= set(names)
    assert zf.read("m/version") == b"3\n" and zf.read("m/byteorder") == b"little"
    for info in zf.infolist():
        assert info.compress_type == zipfile.ZIP_STORED
        name_len, extra_len = struct.unpack("<HH", raw[info.header_offset + 26:info.header_offset + 30])
        assert (info.header_offset + 30 + name_len + extra_len) % 64 == 0  # torch's record alignment
    assert struct.unpack("<3f", zf.read("m/data/0")) == (1.0, 1.0, 1.0)
    assert zf.testzip() is None  # CRCs are right


def test_mmap_load(tmp_path):
    a = ember.arange(1000, dtype=ember.float32).view(10, 100)
    ember.save({"a": a, "t": a.t()}, tmp_path / "m.pt")
    before = (tmp_path / "m.pt").read_bytes()
    out = ember.load(tmp_path / "m.pt", mmap=True)
    np.testing.assert_array_equal(out["a"].numpy(), np.arange(1000, dtype=np.float32).reshape(10, 100))
    assert out["t"].untyped_storage() is out["a"].untyped_storage()
    out["a"][0, 0] = -1.0  # copy-on-write: the file never changes
    assert as_np(out["t"])[0, 0] == -1.0
    assert (tmp_path / "m.pt").read_bytes() == before
    with pytest.raises(ValueError, match="file path"):
        ember.load(io.BytesIO(before), mmap=True)


# -- map_location and devices -----------------------------------------------------------
def _rewrite(data, change):
    """The checkpoint bytes `data` with change(records dict) applied, written
    by Python's zipfile (so without torch's alignment)."""
    zin = zipfile.ZipFile(io.BytesIO(data))
    records = {n: zin.read(n) for n in zin.namelist()}
    change(records)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zout:
        for n, d in records.items():
            zout.writestr(n, d)
    return out.getvalue()


def _cuda_checkpoint():
    buf = io.BytesIO()
    ember.save({"w": ember.arange(3, dtype=ember.float32)}, buf)

    def to_cuda(records):
        pkl = records["archive/data.pkl"]
        old = b"X\x03\x00\x00\x00cpu"
        assert old in pkl
        records["archive/data.pkl"] = pkl.replace(old, b"X\x06\x00\x00\x00cuda:0")
    return _rewrite(buf.getvalue(), to_cuda)


def test_cuda_checkpoint_needs_map_location():
    data = _cuda_checkpoint()
    with pytest.raises(RuntimeError, match="CUDA.*map_location"):
        ember.load(io.BytesIO(data))
    for ml in ("cpu", ember.device("cpu"), {"cuda:0": "cpu"}, lambda storage, loc: storage):
        out = ember.load(io.BytesIO(data), map_location=ml)
        np.testing.assert_array_equal(out["w"].numpy(), [0, 1, 2])
    with pytest.raises(RuntimeError, match="CUDA"):
        ember.load(io.BytesIO(data), map_location={"cuda:1": "cpu"})
    with pytest.raises(RuntimeError, match="CUDA"):
        roundtrip(ember.ones(2), map_location="cuda")
    with pytest.raises(TypeError, match="map_location"):
        roundtrip(ember.ones(2), map_location=3)


# -- files written by PyTorch -------------------------------------------------------------
def _expected_fixture_model():
    f32 = np.arange(12, dtype=np.float64).reshape(3, 4) / 4
    return {
        "f32": f32, "f32_t": f32.T, "f32_slice": f32[1:, 1:3],
        "f64": np.arange(6) / 8, "f16": (np.arange(5) - 2) / 4, "bf16": (np.arange(5) - 2) * 1.5,
        "i8": np.arange(-3, 3), "i16": np.arange(6) * 1000 - 2000, "i32": np.arange(4) * 100000,
        "i64": np.array([2 ** 40, -1, 0]), "u8": np.arange(250, 256), "bool": np.array([1, 0, 1]),
        "scalar": np.array(3.5), "empty": np.zeros((0, 3)), "expanded": np.array([[1, 2, 3], [1, 2, 3]]),
        "grad": np.array([1, 2]), "param": np.array([[1, 2], [3, 4]]),
    }


@pytest.mark.parametrize("fixture, mmap", [("torch_checkpoint.pt", False), ("torch_checkpoint.pt", True),
                                           ("torch_legacy.pt", False)])
def test_load_torch_written_checkpoint(fixture, mmap):
    ckpt = ember.load(FIXTURES / fixture, mmap=mmap)
    model = ckpt["model"]
    assert type(model) is collections.OrderedDict
    expected = _expected_fixture_model()
    assert list(model) == list(expected)
    for name, exp in expected.items():
        np.testing.assert_array_equal(as_np(model[name]), exp, err_msg=name)
    dtypes = {"f32": "float32", "f64": "float64", "f16": "float16", "bf16": "bfloat16", "i8": "int8",
              "i16": "int16", "i32": "int32", "i64": "int64", "u8": "uint8", "bool": "bool"}
    for name, dt in dtypes.items():
        assert model[name].dtype == getattr(ember, dt)
    assert model["f32_t"].untyped_storage() is model["f32"].untyped_storage()
    assert model["f32_slice"].storage_offset() == 5 and model["f32_t"].stride() == (1, 4)
    assert model["expanded"].stride() == (0, 1)
    assert model["grad"].requires_grad and model["param"].requires_grad
    assert not model["f32"].requires_grad
    if hasattr(ember.nn, "Parameter"):
        assert isinstance(model["param"], ember.nn.Parameter)
    opt = ckpt["optimizer"]
    assert opt["param_groups"] == [{"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.01,
                                    "amsgrad": False, "params": [0], "name": None}]
    assert float(opt["state"][0]["step"]) == 3.0
    np.testing.assert_array_equal(opt["state"][0]["exp_avg_sq"].numpy(), np.full((2, 2), 0.25))
    if fixture == "torch_checkpoint.pt":
        assert ckpt["epoch"] == 7 and ckpt["note"] == "fixture"


def test_legacy_format_errors():
    data = (FIXTURES / "torch_legacy.pt").read_bytes()
    for cut in (5, len(data) // 2, len(data) - 3):
        with pytest.raises((RuntimeError, pickle.UnpicklingError, EOFError)):
            ember.load(io.BytesIO(data[:cut]))
    with pytest.raises(RuntimeError, match="CUDA"):
        ember.load(io.BytesIO(data), map_location="cuda:0")
    # the legacy header pickles go through the restricted unpickler too
    evil = b"\x80\x02cos\nsystem\n" + _s(":") + b"\x85R."
    with pytest.raises(RuntimeError, match="not a PyTorch checkpoint"):
        ember.load(io.BytesIO(evil))


# -- PyTorch reading ember's files ---------------------------------------------------------
@requires_torch
@pytest.mark.parametrize("dtype", DTYPES)
def test_torch_loads_ember_file(torch, dtype, tmp_path):
    lay = layouts(dtype)
    obj = collections.OrderedDict((k, t) for k, (t, _) in lay.items())
    obj["grad"] = ember.ones(2, dtype=ember.float32).requires_grad_()
    obj["meta"] = {"step": 3, "betas": (0.9, 0.99), "none": None, "dtype": getattr(ember, dtype),
                   "size": ember.Size([1, 2]), "device": ember.device("cpu")}
    ember.save(obj, tmp_path / "e.pt")
    got = torch.load(tmp_path / "e.pt", weights_only=True)
    assert type(got) is collections.OrderedDict
    for name, (t, _) in lay.items():
        g = got[name]
        assert str(g.dtype) == f"torch.{dtype}"
        assert tuple(g.shape) == tuple(t.shape) and g.stride() == tuple(t.stride())
        assert g.storage_offset() == t.storage_offset()
        np.testing.assert_array_equal(g.double().numpy(), as_np(t), err_msg=name)
    base_ptr = got["contiguous"].untyped_storage().data_ptr()
    for name in ("transposed", "sliced", "strided", "row", "expanded"):
        assert got[name].untyped_storage().data_ptr() == base_ptr, name
    assert got["grad"].requires_grad
    assert got["meta"]["dtype"] == getattr(torch, dtype)
    assert got["meta"]["size"] == torch.Size([1, 2]) and got["meta"]["device"] == torch.device("cpu")
    assert got["meta"]["betas"] == (0.9, 0.99) and got["meta"]["none"] is None
    # torch can memory-map ember's file too (it needs torch's record alignment)
    mm = torch.load(tmp_path / "e.pt", weights_only=True, mmap=True)
    np.testing.assert_array_equal(mm["contiguous"].double().numpy(), values(dtype, (4, 6)))


@requires_torch
def test_torch_loads_ember_parameter(torch, monkeypatch):
    param_cls = fake_parameter_class(monkeypatch)
    buf = io.BytesIO()
    ember.save({"p": param_cls(ember.tensor([1.0, 2.0]), True)}, buf)
    buf.seek(0)
    got = torch.load(buf, weights_only=True)
    assert isinstance(got["p"], torch.nn.Parameter) and got["p"].requires_grad
    assert got["p"].tolist() == [1.0, 2.0]


@requires_torch
def test_ember_loads_fresh_torch_file_with_mmap(torch, tmp_path):
    a = torch.arange(24, dtype=torch.float32).view(4, 6)
    torch.save({"a": a, "v": a[1:, ::2], "b": a.to(torch.bfloat16)}, tmp_path / "t.pt")
    out = ember.load(tmp_path / "t.pt", mmap=True)
    exp = np.arange(24, dtype=np.float64).reshape(4, 6)
    np.testing.assert_array_equal(as_np(out["a"]), exp)
    np.testing.assert_array_equal(as_np(out["v"]), exp[1:, ::2])
    np.testing.assert_array_equal(as_np(out["b"]), exp)
    assert out["v"].untyped_storage() is out["a"].untyped_storage()


# -- a failed save never corrupts an existing file ---------------------------------------------
def test_failed_save_keeps_existing_file(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.pt"
    ember.save({"w": ember.ones(3)}, path)
    before = path.read_bytes()
    with pytest.raises((pickle.PicklingError, AttributeError, TypeError)):
        ember.save({"w": ember.zeros(3), "f": lambda x: x}, path)  # a lambda can't be pickled
    assert path.read_bytes() == before

    def boom(self, name, data):
        raise OSError("disk full")
    monkeypatch.setattr(serialization._ZipWriter, "write_record", boom)
    with pytest.raises(OSError, match="disk full"):
        ember.save({"w": ember.zeros(3)}, path)
    assert path.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["ckpt.pt"]  # no temporary file left behind
    monkeypatch.undo()
    np.testing.assert_array_equal(ember.load(path)["w"].numpy(), np.ones(3))


def test_saving_views_of_one_storage_as_different_dtypes_is_refused():
    a = ember.ones(4)
    with pytest.raises(RuntimeError, match="different types"):
        roundtrip({"a": a, "b": a.view(ember.int32)})


# -- malicious and broken checkpoints -------------------------------------------------------------
def _checkpoint(pkl, extra=None):
    """A zip checkpoint whose data.pkl is the hand-made pickle `pkl`."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zf:
        zf.writestr("archive/data.pkl", pkl)
        zf.writestr("archive/version", b"3\n")
        for name, data in (extra or {}).items():
            zf.writestr(f"archive/{name}", data)
    out.seek(0)
    return out


def _s(text):
    """BINUNICODE opcode pushing a str."""
    b = text.encode()
    return b"X" + struct.pack("<I", len(b)) + b


SENTINEL_CALLS = []


def _sentinel(*args):
    SENTINEL_CALLS.append(args)
    return "ran"


# Each pickle would call a dangerous global if the unpickler let it through
# (with inert arguments anyway). They are built opcode by opcode: nothing is
# pickled from a live object and nothing is ever executed.
MALICIOUS = {
    "os.system": b"\x80\x02cos\nsystem\n" + _s(":") + b"\x85R.",
    "posix.system": b"\x80\x02cposix\nsystem\n" + _s(":") + b"\x85R.",
    "builtins.eval": b"\x80\x02c__builtin__\neval\n" + _s("1+1") + b"\x85R.",
    "builtins.exec": b"\x80\x02cbuiltins\nexec\n" + _s("pass") + b"\x85R.",
    "builtins.getattr": b"\x80\x02cbuiltins\ngetattr\ncbuiltins\nint\n" + _s("real") + b"\x86R.",
    "subprocess.Popen": b"\x80\x02csubprocess\nPopen\n" + _s(":") + b"\x85R.",
    "subprocess.check_output": b"\x80\x02csubprocess\ncheck_output\n" + _s(":") + b"\x85R.",
    "os.system via STACK_GLOBAL": b"\x80\x04\x8c\x02os\x94\x8c\x06system\x94\x93\x8c\x01:\x85R.",
    "os.system via INST": b"(S':'\nios\nsystem\n.",
    "os.system via OBJ": b"\x80\x02(cos\nsystem\n" + _s(":") + b"o.",
    "torch.load": b"\x80\x02ctorch\nload\n" + _s("x") + b"\x85R.",
    "sentinel": b"\x80\x02c" + __name__.encode() + b"\n_sentinel\n" + _s("x") + b"\x85R.",
}


@pytest.mark.parametrize("name", list(MALICIOUS))
def test_malicious_globals_are_refused(name):
    SENTINEL_CALLS.clear()
    with pytest.raises(pickle.UnpicklingError, match="weights_only") as info:
        ember.load(_checkpoint(MALICIOUS[name]))
    refused = {"os.system via STACK_GLOBAL": "os.system", "os.system via INST": "os.system",
               "os.system via OBJ": "os.system", "sentinel": "_sentinel"}.get(name, name)
    assert refused in str(info.value)
    assert SENTINEL_CALLS == []


def test_build_on_allowed_function_is_refused():
    # BUILD would set __defaults__ on ember's own rebuild function
    pkl = b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\n}" + _s("__defaults__") + b"Nsb."
    with pytest.raises(pickle.UnpicklingError, match="state"):
        ember.load(_checkpoint(pkl))
    pkl = b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\nN}" + _s("__kwdefaults__") + b"Ns\x86b."
    with pytest.raises(pickle.UnpicklingError):
        ember.load(_checkpoint(pkl))
    assert serialization._rebuild_tensor_v2.__defaults__ == (False, None, None)


def test_hostile_arguments_to_allowed_globals():
    bad = [
        b"\x80\x02ccollections\nOrderedDict\nK\x01\x85R.",  # OrderedDict(1): TypeError inside
        b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\n(" + _s("x") + b"K\x00))tR.",  # storage is a str
        b"\x80\x02" + _s("x") + b"Q.",  # persistent id that isn't a storage tuple
        b"\x80\x02(" + _s("storage") + b"ctorch\nFloatStorage\n" + _s("0") + _s("cpu") + b"K\x02tQ.",  # no data/0
        b"\x80\x02(" + _s("storage") + _s("float") + _s("0") + _s("cpu") + b"K\x02tQ.",  # type is a str
        b"\x80\x02h\x05.",  # memo key that was never stored
        b"\x80\x02",  # no STOP
    ]
    for pkl in bad:
        with pytest.raises((pickle.UnpicklingError, RuntimeError)):
            ember.load(_checkpoint(pkl))


def _tensor_pkl(numel, size, stride, offset=0):
    """data.pkl for _rebuild_tensor_v2(FloatStorage '0' of numel, offset, size, stride)."""
    def tup(xs):
        return b"(" + b"".join(b"J" + struct.pack("<i", x) for x in xs) + b"t"
    pid = (b"(" + _s("storage") + b"ctorch\nFloatStorage\n" + _s("0") + _s("cpu")
           + b"J" + struct.pack("<i", numel) + b"t")
    return (b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\n(" + pid + b"QJ" + struct.pack("<i", offset)
            + tup(size) + tup(stride) + b"\x89ccollections\nOrderedDict\n)RtR.")


def test_storage_shorter_than_tensor_needs():
    four = {"data/0": struct.pack("<4f", 1, 2, 3, 4)}
    ok = ember.load(_checkpoint(_tensor_pkl(4, [2, 2], [2, 1]), four))
    np.testing.assert_array_equal(ok.numpy(), [[1, 2], [3, 4]])
    with pytest.raises(RuntimeError, match="out of bounds"):
        ember.load(_checkpoint(_tensor_pkl(4, [3, 2], [2, 1]), four))
    with pytest.raises(RuntimeError, match="out of bounds"):
        ember.load(_checkpoint(_tensor_pkl(4, [2], [1], offset=3), four))
    with pytest.raises(RuntimeError, match="holds 8 bytes"):  # record shorter than the storage's numel
        ember.load(_checkpoint(_tensor_pkl(4, [2, 2], [2, 1]), {"data/0": struct.pack("<2f", 1, 2)}))
    with pytest.raises(RuntimeError, match="negative"):
        ember.load(_checkpoint(_tensor_pkl(4, [2], [-1], offset=1), four))
    with pytest.raises(RuntimeError, match="strides and shape"):
        ember.load(_checkpoint(_tensor_pkl(4, [2, 2], [1]), four))


def _good_bytes():
    buf = io.BytesIO()
    ember.save({"w": ember.arange(100, dtype=ember.float32)}, buf)
    return buf.getvalue()


def test_truncated_and_corrupt_zips():
    data = _good_bytes()
    for cut in (10, 100, len(data) // 2, len(data) - 30, len(data) - 1):
        with pytest.raises(RuntimeError, match="zip"):
            ember.load(io.BytesIO(data[:cut]))
    with pytest.raises(EOFError):
        ember.load(io.BytesIO(b""))
    with pytest.raises(RuntimeError, match="not a PyTorch checkpoint"):
        ember.load(io.BytesIO(b"\x00hello this is not a checkpoint"))
    # a flipped byte in a storage record fails its CRC check
    info = zipfile.ZipFile(io.BytesIO(data)).getinfo("archive/data/0")
    name_len, extra_len = struct.unpack("<HH", data[info.header_offset + 26:info.header_offset + 30])
    bad = bytearray(data)
    bad[info.header_offset + 30 + name_len + extra_len + 8] ^= 0xFF
    with pytest.raises(RuntimeError, match="CRC"):
        ember.load(io.BytesIO(bytes(bad)))


def test_wrong_zip_contents():
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zf:
        zf.writestr("archive/other.txt", b"hi")
    with pytest.raises(RuntimeError, match="data.pkl"):
        ember.load(io.BytesIO(out.getvalue()))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zf:
        zf.writestr("data.pkl", b"\x80\x02K\x01.")
    with pytest.raises(RuntimeError, match="folder"):
        ember.load(io.BytesIO(out.getvalue()))
    data = _rewrite(_good_bytes(), lambda r: r.pop("archive/data/0"))
    with pytest.raises(RuntimeError, match="missing"):
        ember.load(io.BytesIO(data))
    data = _rewrite(_good_bytes(), lambda r: r.update({"archive/byteorder": b"middle"}))
    with pytest.raises(RuntimeError, match="byteorder"):
        ember.load(io.BytesIO(data))
    # an ember file rewritten without torch's alignment still loads (no mmap)
    data = _rewrite(_good_bytes(), lambda r: None)
    np.testing.assert_array_equal(ember.load(io.BytesIO(data))["w"].numpy(), np.arange(100))


def test_big_endian_checkpoint_is_byteswapped():
    ck = _checkpoint(_tensor_pkl(2, [2], [1]), {"data/0": struct.pack(">2f", 1.5, -2.0), "byteorder": b"big"})
    np.testing.assert_array_equal(ember.load(ck).numpy(), [1.5, -2.0])


def test_weights_only_false_allows_other_globals():
    obj = {"d": datetime.date(2020, 1, 2), "w": ember.ones(2)}
    with pytest.raises(pickle.UnpicklingError, match="datetime.date"):
        roundtrip(obj)
    out = roundtrip(obj, weights_only=False)
    assert out["d"] == datetime.date(2020, 1, 2)
    np.testing.assert_array_equal(out["w"].numpy(), [1, 1])


# -- safetensors ---------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
def test_safetensors_roundtrip(dtype, tmp_path):
    tensors = {"m": make(dtype, (3, 5)), "s": make(dtype, ()), "v": make(dtype, (7,)),
               "e": ember.empty(0, 2, dtype=getattr(ember, dtype))}
    st.save_file(tensors, tmp_path / "x.safetensors", metadata={"format": "pt"})
    for out in (st.load_file(tmp_path / "x.safetensors"), st.load(st.save(tensors))):
        assert sorted(out) == sorted(tensors)
        for k, t in tensors.items():
            assert out[k].dtype == t.dtype and tuple(out[k].shape) == tuple(t.shape)
            np.testing.assert_array_equal(as_np(out[k]), as_np(t))
    assert st.load_metadata(tmp_path / "x.safetensors") == {"format": "pt"}


def test_safetensors_file_layout(tmp_path):
    """ember's file, parsed by hand with the format's rules."""
    st.save_file({"a": ember.arange(6, dtype=ember.float32).view(2, 3), "b": ember.tensor([1, 2], dtype=ember.int16),
                  "c": ember.tensor([1.5], dtype=ember.float64)}, tmp_path / "x.safetensors")
    raw = (tmp_path / "x.safetensors").read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    assert n % 8 == 0
    header = json.loads(raw[8:8 + n])
    buf = raw[8 + n:]
    assert header["a"]["dtype"] == "F32" and header["a"]["shape"] == [2, 3]
    for name, fmt, want in (("a", "<f4", [0, 1, 2, 3, 4, 5]), ("b", "<i2", [1, 2]), ("c", "<f8", [1.5])):
        lo, hi = header[name]["data_offsets"]
        assert np.frombuffer(buf[lo:hi], fmt).tolist() == want
    assert sum(hi - lo for lo, hi in (v["data_offsets"] for v in header.values())) == len(buf)


def test_safetensors_torch_fixture():
    out = st.load_file(FIXTURES / "torch_weights.safetensors")
    expected = _expected_fixture_model()
    for name in ("f32_t", "f32_slice", "expanded"):
        expected.pop(name)
    assert sorted(out) == sorted(expected)
    for name, exp in expected.items():
        np.testing.assert_array_equal(as_np(out[name]), exp, err_msg=name)
    assert out["bf16"].dtype == ember.bfloat16 and out["bool"].dtype == ember.bool
    assert st.load_metadata(FIXTURES / "torch_weights.safetensors") == {"format": "pt"}


def test_safetensors_mmap_is_copy_on_write(tmp_path):
    st.save_file({"a": ember.zeros(1000)}, tmp_path / "x.safetensors")
    before = (tmp_path / "x.safetensors").read_bytes()
    out = st.load_file(tmp_path / "x.safetensors")
    out["a"][3] = 7.0
    assert as_np(out["a"])[3] == 7.0
    assert (tmp_path / "x.safetensors").read_bytes() == before
    with pytest.raises(RuntimeError, match="CUDA"):
        st.load_file(tmp_path / "x.safetensors", device="cuda:0")


def test_safetensors_refuses_shared_and_noncontiguous(tmp_path):
    a = ember.arange(12, dtype=ember.float32).view(3, 4)
    with pytest.raises(RuntimeError, match="share memory"):
        st.save({"a": a, "b": a.view(12)})
    with pytest.raises(RuntimeError, match="share memory"):
        st.save({"a": a[0:2], "b": a[1:3]})  # overlapping rows
    st.save({"a": a[0], "b": a[1]})  # disjoint parts of one storage are fine
    with pytest.raises(ValueError, match="non contiguous"):
        st.save({"t": a.t()})
    with pytest.raises(ValueError):
        st.save({"x": [1, 2]})
    with pytest.raises(ValueError):
        st.save({1: a})
    with pytest.raises(ValueError, match="metadata"):
        st.save({"a": a}, metadata={"k": 1})
    path = tmp_path / "w.safetensors"
    st.save_file({"a": ember.ones(2)}, path)
    before = path.read_bytes()
    with pytest.raises(RuntimeError):
        st.save_file({"a": a, "b": a}, path)
    assert path.read_bytes() == before and sorted(os.listdir(tmp_path)) == ["w.safetensors"]


def _st_bytes(header, data=b"", length=None):
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(text) if length is None else length) + text + data


def _one(dtype, shape, offsets):
    return {"dtype": dtype, "shape": shape, "data_offsets": offsets}


BAD_SAFETENSORS = {
    "too short": (b"\x01\x00", "HeaderTooSmall"),
    "header length past end": (_st_bytes(b"{}", length=1000), "past the end"),
    "header too large": (_st_bytes(b"{}", length=2 ** 40), "HeaderTooLarge"),
    "not json": (_st_bytes(b"{not json}"), "InvalidHeaderDeserialization"),
    "not an object": (_st_bytes(b"[1, 2]"), "InvalidHeaderStart"),
    "not utf-8": (_st_bytes(b"{\xff\xfe}"), "UTF-8"),
    "duplicate key": (_st_bytes(b'{"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}, '
                                b'"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}}', b"\0"), "duplicate"),
    "unknown dtype": (_st_bytes({"a": _one("F8_E5M2", [1], [0, 1])}, b"\0"), "F8_E5M2"),
    "bogus dtype": (_st_bytes({"a": _one("XX", [1], [0, 2])}, b"\0\0"), "XX"),
    "missing field": (_st_bytes({"a": {"dtype": "U8", "shape": [1]}}, b"\0"), "data_offsets"),
    "negative shape": (_st_bytes({"a": _one("U8", [-1], [0, 0])}), "shape"),
    "bool in shape": (_st_bytes({"a": _one("U8", [True], [0, 1])}, b"\0"), "shape"),
    "offsets reversed": (_st_bytes({"a": _one("U8", [0], [2, 1])}, b"\0\0"), "data_offsets"),
    "size mismatch": (_st_bytes({"a": _one("F32", [2], [0, 4])}, b"\0" * 4), "needs 8 bytes"),
    "offsets out of range": (_st_bytes({"a": _one("F32", [2], [0, 8])}, b"\0" * 4), "MetadataIncompleteBuffer"),
    "overlap": (_st_bytes({"a": _one("F32", [2], [0, 8]), "b": _one("F32", [1], [4, 8])}, b"\0" * 8), "overlaps"),
    "gap": (_st_bytes({"a": _one("F32", [1], [0, 4]), "b": _one("F32", [1], [8, 12])}, b"\0" * 12), "gap"),
    "not starting at 0": (_st_bytes({"a": _one("F32", [1], [4, 8])}, b"\0" * 8), "gap"),
    "trailing bytes": (_st_bytes({"a": _one("F32", [1], [0, 4])}, b"\0" * 9), "MetadataIncompleteBuffer"),
    "bad metadata": (_st_bytes({"__metadata__": {"k": 1}}), "__metadata__"),
}


@pytest.mark.parametrize("name", list(BAD_SAFETENSORS))
def test_safetensors_rejects_bad_input(name, tmp_path):
    data, msg = BAD_SAFETENSORS[name]
    with pytest.raises(st.SafetensorError, match=msg):
        st.load(data)
    path = tmp_path / "bad.safetensors"
    path.write_bytes(data)
    with pytest.raises(st.SafetensorError, match=msg):
        st.load_file(path)
    assert issubclass(st.SafetensorError, ValueError)


def test_safetensors_empty_dict():
    assert st.load(st.save({})) == {}


def test_zip64_records_and_directory(monkeypatch, tmp_path):
    """Checkpoints over 4 GiB need ZIP64 fields; lower the thresholds so a
    small file takes those paths, then read it with Python's zipfile, ember
    and (when installed) torch."""
    monkeypatch.setattr(serialization, "_ZIP64_SIZE", 16)
    monkeypatch.setattr(serialization, "_ZIP64_COUNT", 3)
    a = ember.arange(40, dtype=ember.float32).view(5, 8)
    ember.save({"a": a, "t": a.t(), "b": ember.tensor([1, 2], dtype=ember.int8)}, tmp_path / "z.pt")
    zf = zipfile.ZipFile(tmp_path / "z.pt")
    assert zf.testzip() is None
    assert struct.unpack("<40f", zf.read("z/data/0")) == tuple(range(40))
    raw = (tmp_path / "z.pt").read_bytes()
    assert b"PK\x06\x06" in raw and b"PK\x06\x07" in raw  # ZIP64 end record and locator
    for mmap in (False, True):
        out = ember.load(tmp_path / "z.pt", mmap=mmap)
        np.testing.assert_array_equal(out["t"].numpy(), np.arange(40).reshape(5, 8).T)
        assert out["t"].untyped_storage() is out["a"].untyped_storage()
    try:
        import torch
    except ImportError:
        return
    got = torch.load(tmp_path / "z.pt", weights_only=True)
    assert got["t"].tolist() == np.arange(40).reshape(5, 8).T.tolist()


def test_zip_bomb_records_are_refused():
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("archive/data.pkl", b"\x80\x02N" + b"\x00" * (50 << 20) + b".")  # 50 MB of zeros
    with pytest.raises(RuntimeError, match="expand"):
        ember.load(io.BytesIO(out.getvalue()))


def test_legacy_storage_larger_than_file_is_refused():
    data = (FIXTURES / "torch_legacy.pt").read_bytes()
    # the first storage's persistent id: ('storage', <type>, key, 'cpu', numel, None) with a BININT1/BININT numel
    pos = data.index(b"X\x03\x00\x00\x00cpu") + 8
    if data[pos:pos + 1] == b"q":  # BINPUT memoizing 'cpu'
        pos += 2
    assert data[pos:pos + 1] in (b"K", b"J", b"M")
    evil = data[:pos] + b"J" + struct.pack("<i", 2 ** 30) + data[pos + {b"K": 2, b"M": 3, b"J": 5}[data[pos:pos + 1]]:]
    with pytest.raises(RuntimeError, match="more than"):
        ember.load(io.BytesIO(evil))


# -- property: random views of random tensors survive a round trip (and torch reads them) ----------------
from hypothesis import given, settings, HealthCheck, strategies as hst  # noqa: E402


@hst.composite
def _views(draw):
    dtype = draw(hst.sampled_from(DTYPES))
    shape = tuple(draw(hst.lists(hst.integers(0, 5), min_size=1, max_size=3)))
    keys = tuple(slice(draw(hst.integers(0, n)), draw(hst.integers(0, n)) if n else 0, draw(hst.integers(1, 3)))
                 for n in shape)
    perm = draw(hst.permutations(range(len(shape))))
    return dtype, shape, keys, tuple(perm)


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(_views())
def test_random_views_roundtrip(case):
    dtype, shape, keys, perm = case
    base = make(dtype, shape)
    view = base[keys].permute(*perm)
    expected = values(dtype, shape)[keys].transpose(perm)
    buf = io.BytesIO()
    ember.save({"base": base, "view": view}, buf)
    out = ember.load(io.BytesIO(buf.getvalue()))
    np.testing.assert_array_equal(as_np(out["view"]), expected)
    assert tuple(out["view"].stride()) == tuple(view.stride())
    assert out["view"].storage_offset() == view.storage_offset()
    if base.numel():
        assert out["view"].untyped_storage() is out["base"].untyped_storage()
    try:
        import torch
    except ImportError:
        return
    got = torch.load(io.BytesIO(buf.getvalue()), weights_only=True)
    np.testing.assert_array_equal(got["view"].double().numpy(), expected)
    assert got["view"].stride() == tuple(view.stride())


def test_saved_file_modes(tmp_path):
    old = os.umask(0o022)
    try:
        ember.save(ember.ones(2), tmp_path / "new.pt")
        st.save_file({"a": ember.ones(2)}, tmp_path / "new.safetensors")
    finally:
        os.umask(old)
    assert (tmp_path / "new.pt").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "new.safetensors").stat().st_mode & 0o777 == 0o644
    os.chmod(tmp_path / "new.pt", 0o600)
    ember.save(ember.zeros(2), tmp_path / "new.pt")  # replacing a file keeps its mode
    assert (tmp_path / "new.pt").stat().st_mode & 0o777 == 0o600
    np.testing.assert_array_equal(ember.load(tmp_path / "new.pt").numpy(), [0, 0])


def test_state_dict_metadata_survives_a_round_trip(tmp_path):
    """A module's state_dict keeps _metadata as an attribute, not as a key."""
    m = ember.nn.Sequential(ember.nn.Linear(2, 3), ember.nn.LayerNorm(3))
    path = tmp_path / "sd.pt"
    ember.save(m.state_dict(), str(path))
    sd = ember.load(str(path))
    assert list(sd) == ["0.weight", "0.bias", "1.weight", "1.bias"]
    assert sd._metadata == m.state_dict()._metadata
    ember.nn.Sequential(ember.nn.Linear(2, 3), ember.nn.LayerNorm(3)).load_state_dict(sd)
