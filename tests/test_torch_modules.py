"""The torch modules libraries import (Lightning, timm, torchvision,
x-transformers): nn.utils.prune, nn.utils.fusion, nn.modules.utils, hub /
model_zoo, multiprocessing (spawn, shared memory), backends.cudnn, jit/fx
markers, onnx, ao.quantization stubs, profiler answers, torch._C names,
PyTorchFileReader, trapz and the math constants. References: NumPy top-k and
norms, the unfused layers, hashlib, hand values; multi-process cases run in a
child interpreter under a timeout."""
import hashlib
import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import ember
import ember.nn.utils.prune as prune
from ember.nn.utils.fusion import fuse_conv_bn_eval, fuse_conv_bn_weights, fuse_linear_bn_eval

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(ember.__file__)))


def _np(t):
    return np.array(t.detach().tolist())


# -- nn.utils.prune ------------------------------------------------------------------------------
def test_l1_unstructured_masks_the_smallest_magnitudes():
    ember.manual_seed(0)
    m = ember.nn.Linear(5, 4)
    w = _np(m.weight)
    prune.l1_unstructured(m, "weight", amount=0.3)  # round(0.3 * 20) = 6 entries
    expected = np.ones(20)
    expected[np.argsort(np.abs(w).ravel())[:6]] = 0
    np.testing.assert_array_equal(_np(m.weight_mask).ravel(), expected)
    # torch's layout: weight_orig parameter, weight_mask buffer, weight a plain attribute
    assert sorted(n for n, _ in m.named_parameters()) == ["bias", "weight_orig"]
    assert [n for n, _ in m.named_buffers()] == ["weight_mask"]
    assert "weight" not in m._parameters and prune.is_pruned(m)
    np.testing.assert_allclose(_np(m.weight), w * expected.reshape(4, 5))
    # forward uses the masked weight; the gradient reaches weight_orig only where the mask is 1
    x = ember.randn(3, 5)
    y = m(x)
    np.testing.assert_allclose(_np(y), _np(x) @ (w * expected.reshape(4, 5)).T + _np(m.bias), rtol=1e-5, atol=1e-6)
    y.sum().backward()
    np.testing.assert_allclose(_np(m.weight_orig.grad), np.tile(_np(x).sum(0), (4, 1)) * expected.reshape(4, 5),
                               rtol=1e-5, atol=1e-6)


def test_iterative_pruning_acts_on_what_is_left_and_remove_makes_it_permanent():
    ember.manual_seed(1)
    m = ember.nn.Linear(6, 3)
    w = _np(m.weight).ravel()
    prune.l1_unstructured(m, "weight", amount=4)
    prune.l1_unstructured(m, "weight", amount=3)  # 3 more among the 14 survivors
    order = np.argsort(np.abs(w))
    expected = np.ones(18)
    expected[order[:7]] = 0
    np.testing.assert_array_equal(_np(m.weight_mask).ravel(), expected)
    hooks = [h for h in m._forward_pre_hooks.values() if isinstance(h, prune.BasePruningMethod)]
    assert len(hooks) == 1 and isinstance(hooks[0], prune.PruningContainer) and len(hooks[0]) == 2
    prune.remove(m, "weight")
    assert not prune.is_pruned(m)
    assert sorted(n for n, _ in m.named_parameters()) == ["bias", "weight"]
    assert isinstance(m.weight, ember.nn.Parameter) and list(m.buffers()) == []
    np.testing.assert_allclose(_np(m.weight).ravel(), w * expected)
    with pytest.raises(ValueError, match="has to be pruned"):
        prune.remove(m, "weight")


def test_ln_structured_keeps_the_largest_norm_channels():
    ember.manual_seed(2)
    conv = ember.nn.Conv2d(3, 6, 3)
    w = _np(conv.weight)
    prune.ln_structured(conv, "weight", amount=2, n=2, dim=0)
    norms = np.sqrt((w ** 2).sum(axis=(1, 2, 3)))
    kept = np.zeros(6)
    kept[np.argsort(norms)[2:]] = 1
    np.testing.assert_array_equal(_np(conv.weight_mask), np.broadcast_to(kept[:, None, None, None], w.shape))
    m = ember.nn.Linear(4, 5)
    w = _np(m.weight)
    prune.ln_structured(m, "weight", amount=0.5, n=1, dim=1)  # columns by L1 norm
    kept = np.zeros(4)
    kept[np.argsort(np.abs(w).sum(0))[2:]] = 1
    np.testing.assert_array_equal(_np(m.weight_mask), np.broadcast_to(kept, w.shape))


def test_random_pruning_counts_and_channels():
    m = ember.nn.Linear(10, 10)
    prune.random_unstructured(m, "weight", amount=0.37)
    assert int((_np(m.weight_mask) == 0).sum()) == 37
    prune.random_structured(m, "weight", amount=3, dim=0)
    rows_dead = (_np(m.weight_mask).sum(1) == 0).sum()
    assert rows_dead >= 3
    prune.identity(m, "bias")
    np.testing.assert_array_equal(_np(m.bias_mask), np.ones(10))


def test_global_unstructured_ranks_all_tensors_together():
    ember.manual_seed(3)
    a, b = ember.nn.Linear(4, 3), ember.nn.Linear(3, 2)
    wa, wb = _np(a.weight).ravel(), _np(b.weight).ravel()
    prune.global_unstructured([(a, "weight"), (b, "weight")], pruning_method=prune.L1Unstructured, amount=7)
    allw = np.concatenate([wa, wb])
    expected = np.ones(allw.size)
    expected[np.argsort(np.abs(allw))[:7]] = 0
    got = np.concatenate([_np(a.weight_mask).ravel(), _np(b.weight_mask).ravel()])
    np.testing.assert_array_equal(got, expected)
    assert not a.weight_mask.requires_grad
    with pytest.raises(TypeError, match="unstructured"):
        prune.global_unstructured([(a, "bias")], pruning_method=prune.RandomStructured, amount=1)


def test_custom_from_mask_and_bad_amounts():
    m = ember.nn.Linear(3, 2)
    mask = ember.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]])
    prune.custom_from_mask(m, "weight", mask)
    np.testing.assert_allclose(_np(m.weight), _np(m.weight_orig) * _np(mask))
    with pytest.raises(ValueError, match="amount"):
        prune.l1_unstructured(ember.nn.Linear(2, 2), "weight", amount=1.5)
    with pytest.raises(TypeError, match="amount"):
        prune.l1_unstructured(ember.nn.Linear(2, 2), "weight", amount="half")
    with pytest.raises(ValueError, match="smaller than the number of parameters"):
        prune.l1_unstructured(ember.nn.Linear(2, 2), "weight", amount=5)
    lin = ember.nn.Linear(2, 2)
    with pytest.raises(ValueError, match="multidimensional"):
        prune.ln_structured(lin, "bias", amount=1, n=2, dim=0)
    assert sorted(n for n, _ in lin.named_parameters()) == ["bias", "weight"]  # the failed call undid itself


# -- nn.utils.fusion and nn.modules.utils ------------------------------------------------------------
def _eval_bn(bn):
    bn.running_mean.uniform_(-1, 1)
    bn.running_var.uniform_(0.5, 2)
    with ember.no_grad():
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.uniform_(-1, 1)
    return bn.eval()


def test_fuse_conv_bn_matches_the_unfused_pair():
    ember.manual_seed(4)
    for conv, bn, transpose in ((ember.nn.Conv2d(3, 5, 3, padding=1), ember.nn.BatchNorm2d(5), False),
                                (ember.nn.Conv1d(2, 4, 3, bias=False), ember.nn.BatchNorm1d(4), False),
                                (ember.nn.ConvTranspose2d(3, 4, 2), ember.nn.BatchNorm2d(4), True)):
        conv.eval()
        _eval_bn(bn)
        x = ember.randn(2, conv.in_channels, *([6] * (conv.weight.dim() - 2)))
        fused = fuse_conv_bn_eval(conv, bn, transpose=transpose)
        assert fused is not conv and fused.bias is not None
        np.testing.assert_allclose(_np(fused(x)), _np(bn(conv(x))), rtol=1e-5, atol=1e-5)
    with pytest.raises(AssertionError, match="eval"):
        fuse_conv_bn_eval(ember.nn.Conv2d(1, 1, 1), ember.nn.BatchNorm2d(1))


def test_fuse_linear_bn_against_numpy_formula():
    ember.manual_seed(5)
    lin, bn = ember.nn.Linear(4, 3).eval(), _eval_bn(ember.nn.BatchNorm1d(3))
    fused = fuse_linear_bn_eval(lin, bn)
    scale = _np(bn.weight) / np.sqrt(_np(bn.running_var) + bn.eps)
    np.testing.assert_allclose(_np(fused.weight), _np(lin.weight) * scale[:, None], rtol=1e-6)
    np.testing.assert_allclose(_np(fused.bias), (_np(lin.bias) - _np(bn.running_mean)) * scale + _np(bn.bias),
                               rtol=1e-5, atol=1e-6)
    w, b = fuse_conv_bn_weights(lin.weight, None, bn.running_mean, bn.running_var, bn.eps, None, None)
    assert isinstance(w, ember.nn.Parameter)
    np.testing.assert_allclose(_np(b), -_np(bn.running_mean) / np.sqrt(_np(bn.running_var) + bn.eps), rtol=1e-5)


def test_ntuple_helpers():
    from ember.nn.modules.utils import _ntuple, _pair, _quadruple, _reverse_repeat_tuple, _single, _triple
    assert _single(3) == (3,) and _pair(2) == (2, 2) and _triple(1) == (1, 1, 1) and _quadruple(0) == (0,) * 4
    assert _pair((1, 5)) == (1, 5) and _ntuple(5)(7) == (7,) * 5 and _pair.__name__ == "_pair"
    assert _reverse_repeat_tuple((1, 2), 2) == (2, 2, 1, 1)


# -- hub / model_zoo ---------------------------------------------------------------------------------
def _state_file(tmp_path):
    ember.manual_seed(6)
    lin = ember.nn.Linear(3, 2)
    raw = tmp_path / "raw.pt"
    ember.save(lin.state_dict(), str(raw))
    digest = hashlib.sha256(raw.read_bytes()).hexdigest()
    named = tmp_path / f"lin-{digest[:8]}.pt"
    raw.rename(named)
    return lin, named, digest


def test_load_state_dict_from_file_url_with_hash(tmp_path):
    import ember.hub as hub
    from ember.utils import model_zoo
    lin, path, digest = _state_file(tmp_path)
    cache = tmp_path / "cache"
    sd = hub.load_state_dict_from_url(path.as_uri(), model_dir=str(cache), check_hash=True, progress=False)
    np.testing.assert_array_equal(_np(sd["weight"]), _np(lin.weight))
    assert (cache / path.name).read_bytes() == path.read_bytes()
    assert model_zoo.load_url is hub.load_state_dict_from_url
    assert hub.HASH_REGEX.search(path.name).group(1) == digest[:8]
    # a cached file is used as is; a wrong hash prefix is refused and leaves nothing behind
    bad = tmp_path / "lin-00000000.pt"
    bad.write_bytes(path.read_bytes())
    with pytest.raises(RuntimeError, match="invalid hash value"):
        hub.load_state_dict_from_url(bad.as_uri(), model_dir=str(tmp_path / "c2"), check_hash=True, progress=False)
    assert os.listdir(tmp_path / "c2") == []
    dst = tmp_path / "copy.pt"
    hub.download_url_to_file(str(path), str(dst), hash_prefix=digest[:16], progress=False)
    assert dst.read_bytes() == path.read_bytes()


def test_hub_dirs_and_unreachable_urls(tmp_path, monkeypatch):
    import ember.hub as hub
    monkeypatch.setattr(hub, "_hub_dir", None)
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "th"))
    assert hub.get_dir() == str(tmp_path / "th" / "hub")
    hub.set_dir(str(tmp_path / "mine"))
    assert hub.get_dir() == str(tmp_path / "mine")
    with pytest.raises(FileNotFoundError):
        hub.download_url_to_file((tmp_path / "missing.pt").as_uri(), str(tmp_path / "x"), progress=False)
    # loopback port 9 (discard) refuses at once: the error names the URL (no network is used)
    monkeypatch.setattr(hub, "_READ_TIMEOUT_S", 5)
    with pytest.raises(RuntimeError, match="cannot download 'http://127.0.0.1:9/w.pt'"):
        hub.download_url_to_file("http://127.0.0.1:9/w.pt", str(tmp_path / "w.pt"), progress=False)
    assert not (tmp_path / "w.pt").exists()


def test_hub_load_list_help_from_a_local_hubconf(tmp_path):
    import ember.hub as hub
    lin, path, _ = _state_file(tmp_path)
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "helper_mod.py").write_text("FEATURES = 3\n")
    (repo / "hubconf.py").write_text(textwrap.dedent(f"""
        dependencies = ["numpy"]
        import ember
        from helper_mod import FEATURES  # hubconf's own directory is importable

        def tiny(pretrained=False, out=2):
            '''A Linear(3, out).'''
            m = ember.nn.Linear(FEATURES, out)
            if pretrained:
                m.load_state_dict(ember.hub.load_state_dict_from_url({path.as_uri()!r},
                                  model_dir={str(tmp_path / "ckpt")!r}, progress=False))
            return m

        def _private():
            pass
        """))
    assert hub.list(str(repo), source="local") == ["tiny"]
    assert hub.help(str(repo), "tiny", source="local") == "A Linear(3, out)."
    m = hub.load(str(repo), "tiny", source="local", pretrained=True)
    np.testing.assert_array_equal(_np(m.weight), _np(lin.weight))
    assert hub.load(str(repo), "tiny", False, 5, source="local").out_features == 5
    with pytest.raises(RuntimeError, match="Cannot find callable nope"):
        hub.load(str(repo), "nope", source="local")
    with pytest.raises(ValueError, match="Unknown source"):
        hub.load(str(repo), "tiny", source="gitlab")
    (repo / "hubconf.py").write_text("dependencies = ['surely_not_a_module_xyz']\n")
    with pytest.raises(RuntimeError, match="Missing dependencies: surely_not_a_module_xyz"):
        hub.list(str(repo), source="local")


# -- multiprocessing --------------------------------------------------------------------------------
def _run_child_script(tmp_path, source, timeout=450):
    path = tmp_path / "mp_script.py"
    path.write_text(textwrap.dedent(source))
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=timeout, env=env,
                          cwd=str(tmp_path))


def test_spawn_two_children_share_memory_and_report_failures(tmp_path):
    r = _run_child_script(tmp_path, """
        import time
        import ember
        import ember.multiprocessing as mp

        def fill(i, t, q):
            t[i] = 10.0 + i          # writes the parent's shared storage
            q.put((i, t.is_shared()))

        def fail_one(i):
            if i == 1:
                raise ValueError("boom in child 1")
            time.sleep(600)          # must be terminated by the parent

        def exit_code(i):
            raise SystemExit(3)

        if __name__ == "__main__":
            t = ember.zeros(2)
            assert not t.is_shared()
            assert t.share_memory_() is t and t.is_shared()
            q = mp.get_context("spawn").SimpleQueue()
            ctx = mp.spawn(fill, args=(t, q), nprocs=2, join=False)
            deadline = time.monotonic() + 200
            while not ctx.join(timeout=5):
                assert time.monotonic() < deadline, "children hung"
            print(sorted(q.get() for _ in range(2)), t.tolist())
            start = time.monotonic()
            try:
                mp.spawn(fail_one, nprocs=2, daemon=True)
            except mp.ProcessRaisedException as e:
                print("raised", e.error_index, "ValueError: boom in child 1" in str(e), time.monotonic() - start < 200)
            try:
                mp.start_processes(exit_code, nprocs=1, start_method="fork")
            except mp.ProcessExitedException as e:
                print("exited", e.error_index, e.exit_code, str(e))
        """)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[0] == "[(0, True), (1, True)] [10.0, 11.0]"
    assert lines[1] == "raised 1 True True"
    assert lines[2] == "exited 0 3 process 0 terminated with exit code 3"


def test_multiprocessing_module_surface():
    import multiprocessing

    import ember.multiprocessing as mp
    assert mp.Queue is multiprocessing.Queue and mp.get_context is multiprocessing.get_context
    assert mp.get_sharing_strategy() == "file_system" and mp.get_all_sharing_strategies() == {"file_system"}
    with pytest.raises(AssertionError):
        mp.set_sharing_strategy("file_descriptor")
    with pytest.raises(ValueError):
        mp.start_processes(print, nprocs=0)
    # a queue moves a shared tensor by its file: the receiver's writes are the sender's
    t = ember.arange(4.0).share_memory_()
    from multiprocessing.reduction import ForkingPickler
    u = ForkingPickler.loads(bytes(ForkingPickler.dumps(t)))
    u[0] = 7.0
    assert t.tolist() == [7.0, 1.0, 2.0, 3.0] and u.is_shared()
    v = ForkingPickler.loads(bytes(ForkingPickler.dumps(ember.ones(2))))  # unshared: by value
    assert v.tolist() == [1.0, 1.0] and not v.is_shared()
    m = ember.nn.Linear(2, 2)
    w = m.weight
    m.share_memory()
    assert m.weight is w and m.weight.is_shared() and m.bias.is_shared() and m.weight.requires_grad


# -- small modules and names ------------------------------------------------------------------------
def test_backends_cudnn_module():
    import importlib
    cudnn = importlib.import_module("ember.backends.cudnn")
    assert ember.backends.cudnn is cudnn
    assert cudnn.is_available() is False and cudnn.version() is None
    old = cudnn.benchmark
    with cudnn.flags(enabled=False, benchmark=True, deterministic=True):
        assert cudnn.benchmark is True and cudnn.enabled is False and cudnn.deterministic is True
    assert cudnn.benchmark is old and cudnn.enabled is True


def test_jit_and_fx_markers():
    import ember.fx as fx
    import ember.jit as jit
    m = ember.nn.Linear(2, 2)
    assert jit.trace(m, ember.zeros(1, 2)) is m and jit.script(m) is m
    assert jit._script_if_tracing(len) is len and jit._overload_method(len) is len
    assert jit.annotations.List is __import__("typing").List
    assert not isinstance(m, (jit.ScriptModule, jit.ScriptFunction, fx.GraphModule))
    assert issubclass(fx.GraphModule, ember.nn.Module)
    with pytest.raises(NotImplementedError, match="no torch.fx symbolic tracer"):
        fx.symbolic_trace(m)
    for cls in (fx.GraphModule, fx.Graph, fx.Proxy):
        with pytest.raises(NotImplementedError):
            cls()
    ns = {}
    exec("import ember.fx\nname = ember.fx.wrap('len')\nfn = ember.fx.wrap(len)", ns)  # module level
    assert ns["name"] == "len" and ns["fn"] is len
    with pytest.raises(NotImplementedError, match="top level"):
        fx.wrap(len)  # inside a function, as torch refuses


def test_onnx_quantization_profiler_answers():
    import ember.ao.quantization as q
    import ember.onnx
    from ember.autograd.profiler import emit_nvtx
    with pytest.raises(NotImplementedError, match="no ONNX exporter"):
        ember.onnx.export(ember.nn.Linear(1, 1), (ember.zeros(1),), "m.onnx")
    assert ember.onnx.is_in_onnx_export() is False
    x = ember.randn(3)
    assert q.QuantStub()(x) is x and q.DeQuantStub()(x) is x
    w = q.QuantWrapper(ember.nn.Linear(3, 2))
    np.testing.assert_allclose(_np(w(x)), _np(w.module(x)))
    with emit_nvtx(record_shapes=True):
        assert (x + 1).shape == (3,)
    assert ember.profiler.kineto_available() is False


def test_torch_c_names_and_file_reader(tmp_path):
    from ember import _C
    _C._log_api_usage_once("python.test")
    assert _C._TensorMeta is type(ember.Tensor)
    assert _C._nn._parse_to(ember.float16) == (None, ember.float16, False, None)
    dev, dt, nb, fmt = _C._nn._parse_to("cpu", dtype=ember.float64, non_blocking=True,
                                       memory_format=ember.contiguous_format)
    assert dev == ember.device("cpu") and dt is ember.float64 and nb is True and fmt is ember.contiguous_format
    p = tmp_path / "ck.pt"
    ember.save({"a": ember.arange(5, dtype=ember.int64)}, str(p))
    r = ember.PyTorchFileReader(str(p))
    assert r.has_record("data.pkl") and not r.has_record("nope") and "data/0" in r.get_all_records()
    raw = r.get_record("data/0")
    assert np.frombuffer(raw, dtype=np.int64).tolist() == [0, 1, 2, 3, 4]
    assert r.get_storage_from_record("data/0", 5, ember.int64).tolist() == [0, 1, 2, 3, 4]
    with open(p, "rb") as f:
        f.seek(r.get_record_offset("data/0"))
        assert f.read(len(raw)) == raw
    with pytest.raises(RuntimeError, match="file not found"):
        r.get_record("nope")


def test_ops_for_compiled_extensions_and_constants():
    with pytest.raises(OSError, match="cannot load compiled PyTorch extensions"):
        ember.ops.load_library("/nonexistent/_C.so")
    with pytest.raises(AttributeError, match="no attribute 'nms'"):
        ember.ops.torchvision.nms
    assert (ember.pi, ember.e, ember.inf) == (math.pi, math.e, math.inf) and math.isnan(ember.nan)
    y = ember.tensor([[1.0, 4.0, 9.0], [0.0, 1.0, 0.0]])
    assert ember.trapz(y).tolist() == [9.0, 1.0]  # hand: (1+4)/2 + (4+9)/2, (0+1)/2 + (1+0)/2
    assert ember.trapz(y, ember.tensor([0.0, 1.0, 3.0])).tolist() == [15.5, 1.5]
    assert ember.trapz(y, dx=2.0, dim=0).tolist() == [1.0, 5.0, 9.0]


# -- what torchvision, timm and Lightning import ------------------------------------------------------
def test_data_parallel_without_gpus_is_the_module():
    m = ember.nn.Linear(3, 2)
    dp = ember.nn.DataParallel(m)
    x = ember.randn(4, 3)
    assert dp.module is m and dp.device_ids == []
    np.testing.assert_array_equal(_np(dp(x)), _np(m(x)))
    assert sorted(k for k, _ in dp.state_dict().items()) == ["module.bias", "module.weight"]


def test_onnx_registrations_and_helpers_libraries_use_at_import():
    import ember.onnx as onnx
    from ember.onnx import symbolic_opset11
    from ember.onnx.symbolic_helper import parse_args

    @parse_args("v", "v", "f")
    def sym(g, a, b, c):
        return symbolic_opset11.unsqueeze(g, a, 0)
    onnx.register_custom_op_symbolic("myns::op", sym, 11)
    assert onnx._custom_symbolics[("myns::op", 11)] is sym
    onnx.unregister_custom_op_symbolic("myns::op", 11)
    assert ("myns::op", 11) not in onnx._custom_symbolics
    with pytest.raises(ValueError):
        onnx.register_custom_op_symbolic("no_namespace", sym, 11)
    with pytest.raises(NotImplementedError, match="no ONNX exporter"):
        sym(None, 1, 2, 3)
    assert onnx.TensorProtoDataType.FLOAT == 1 and onnx.TensorProtoDataType.INT64 == 7


def test_small_torch_names_libraries_import():
    from ember._C import DispatchKey, DispatchKeySet
    from ember._dynamo.utils import is_compile_supported
    from ember.distributed.constants import default_pg_timeout
    from ember.jit.annotations import BroadcastingList2, List
    from ember.utils._pytree import SUPPORTED_NODES, LeafSpec, TreeSpec, _get_node_type, tree_unflatten
    import collections
    import datetime
    keys = DispatchKeySet(DispatchKey.AutocastCPU) | DispatchKeySet(DispatchKey.AutocastCUDA)
    assert keys.has(DispatchKey.AutocastCUDA) and not keys.has(DispatchKey.CPU)
    assert (keys - DispatchKeySet(DispatchKey.AutocastCPU)) == DispatchKeySet(DispatchKey.AutocastCUDA)
    assert is_compile_supported("cpu") and not is_compile_supported("meta")
    assert default_pg_timeout == datetime.timedelta(minutes=30)
    assert BroadcastingList2[int] is int and List[int] == __import__("typing").List[int]
    # Lightning's CombinedLoader builds specs itself from SUPPORTED_NODES by _get_node_type
    Point = collections.namedtuple("Point", "x y")
    p = Point(1, [2, 3])
    node_type = _get_node_type(p)
    assert node_type is collections.namedtuple and node_type in SUPPORTED_NODES and _get_node_type([1]) is list
    children, context = SUPPORTED_NODES[node_type].flatten_fn(p)
    spec = TreeSpec(node_type, context, [LeafSpec(), LeafSpec()])
    assert tree_unflatten([5, 6], spec) == Point(5, 6)
    import ember.hub as hub
    from ember.utils.model_zoo import tqdm
    assert hub.urlparse("file:///a/b").path == "/a/b" and tqdm is hub.tqdm
    from ember._custom_ops import get_ctx
    with pytest.raises(RuntimeError):
        get_ctx()


def test_torch_assert():
    ember._assert(True, "unused")
    with pytest.raises(AssertionError, match="boxes must be"):
        ember._assert(False, "boxes must be 2D")


@pytest.mark.skipif(__import__("importlib").util.find_spec("einops") is None,
                    reason="einops not installed (pip install '.[libs]')")
def test_einops_unchanged_under_as_torch(tmp_path):
    path = tmp_path / "einops_script.py"
    path.write_text(textwrap.dedent("""
        import numpy as np
        import torch
        from einops import rearrange, reduce, repeat
        from einops.layers.torch import Rearrange, Reduce
        a = np.arange(24.0).reshape(2, 3, 4)
        x = torch.tensor(a, requires_grad=True)
        y = rearrange(x, "b c (h w) -> b h w c", h=2)
        assert np.array_equal(y.detach().numpy(), a.reshape(2, 3, 2, 2).transpose(0, 2, 3, 1))
        assert np.allclose(reduce(x, "b c n -> b c", "max").detach().numpy(), a.max(-1))
        assert repeat(x, "b c n -> b c n k", k=2).shape == (2, 3, 4, 2)
        m = torch.nn.Sequential(Rearrange("b c n -> b (c n)"), torch.nn.Linear(12, 2), Reduce("b k -> k", "sum"))
        m(x.detach().float()).sum().backward()
        (y * 2).sum().backward()
        assert np.array_equal(x.grad.numpy(), np.full((2, 3, 4), 2.0))
        print("ok")
        """))
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("EMBER_AS_TORCH", None)
    r = subprocess.run([sys.executable, "-m", "ember.as_torch", str(path)], capture_output=True, text=True,
                       timeout=120, env=env)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def _run_as_torch(tmp_path, name, source, timeout=240):
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("EMBER_AS_TORCH", None)
    return subprocess.run([sys.executable, "-m", "ember.as_torch", str(path)], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=str(tmp_path))


@pytest.mark.skipif(__import__("importlib").util.find_spec("lightning") is None,
                    reason="lightning not installed (pip install --no-deps lightning lightning-utilities torchmetrics)")
def test_lightning_fit_and_measure_flops_under_as_torch(tmp_path):
    # the losses and FLOPs PyTorch 2.15 + Lightning 2.6.6 print for this script
    r = _run_as_torch(tmp_path, "pl_script.py", """
        import torch, lightning as L, torchmetrics
        from torch.utils.data import DataLoader, TensorDataset
        from lightning.fabric.utilities.throughput import measure_flops
        torch.manual_seed(0)
        X = torch.randn(64, 8); Y = (X.sum(1) > 0).long()
        class M(L.LightningModule):
            def __init__(s):
                super().__init__()
                s.acc = torchmetrics.Accuracy(task="multiclass", num_classes=2)
                s.net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
            def forward(s, x): return s.net(x)
            def training_step(s, b, i):
                x, y = b; loss = torch.nn.functional.cross_entropy(s(x), y); s.log("train_loss", loss); return loss
            def validation_step(s, b, i):
                x, y = b; o = s(x); s.acc(o, y)
                s.log("val_loss", torch.nn.functional.cross_entropy(o, y)); s.log("val_acc", s.acc)
            def configure_optimizers(s): return torch.optim.SGD(s.parameters(), lr=0.1)
        m = M()
        dl = DataLoader(TensorDataset(X, Y), batch_size=16)
        t = L.Trainer(max_epochs=2, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                      enable_model_summary=False, accelerator="cpu")
        t.fit(m, dl, dl)
        print(*(float(t.callback_metrics[k]) for k in ("train_loss", "val_loss", "val_acc")))
        with torch.device("meta"):
            mm = M()
        print(measure_flops(mm, lambda: mm(torch.randn(4, 8, device="meta"))),
              measure_flops(m, lambda: m(torch.randn(4, 8)), lambda y: y.sum()))
        """)
    assert r.returncode == 0, r.stderr[-3000:]
    losses, flops = r.stdout.strip().splitlines()[-2:]
    train, val, acc = map(float, losses.split())
    assert abs(train - 0.580567479133606) < 1e-6 and abs(val - 0.6262360215187073) < 1e-6
    assert acc == 0.671875  # torchmetrics' Accuracy: 43 of 64
    assert flops.split() == ["1280", "2816"]


@pytest.mark.skipif(__import__("importlib").util.find_spec("torchvision") is None,
                    reason="torchvision not installed (pip install --no-deps torchvision)")
def test_torchvision_transforms_v2_on_tv_tensors_under_as_torch(tmp_path):
    r = _run_as_torch(tmp_path, "tv2_script.py", """
        import torch
        from torchvision import tv_tensors
        from torchvision.transforms import v2
        img = tv_tensors.Image(torch.arange(3 * 4 * 6, dtype=torch.float32).reshape(3, 4, 6) / 72)
        boxes = tv_tensors.BoundingBoxes(torch.tensor([[2.0, 1.0, 5.0, 3.0]]), format="XYXY", canvas_size=(4, 6))
        assert type(img + 1) is torch.Tensor and type(img.to(torch.float64)) is tv_tensors.Image
        t = v2.Compose([v2.RandomHorizontalFlip(p=1.0), v2.Normalize([0.5] * 3, [0.25] * 3)])
        oi, ob = t(img, boxes)
        assert type(oi) is tv_tensors.Image and type(ob) is tv_tensors.BoundingBoxes
        import json
        print(json.dumps([ob.tolist(), oi[0, 0].tolist()]))
        print(repr(ob).split("(")[0])
        """)
    assert r.returncode == 0, r.stderr[-3000:]
    box_line, name = r.stdout.strip().splitlines()[-2:]
    # flipped box: x -> 6 - x; the first row of channel 0 reversed, then (v - 0.5) / 0.25
    row = [(v / 72 - 0.5) / 0.25 for v in (5, 4, 3, 2, 1, 0)]
    boxes, first = __import__("json").loads(box_line)
    assert boxes == [[1.0, 1.0, 4.0, 3.0]]
    np.testing.assert_allclose(first, row, rtol=1e-6)
    assert name == "BoundingBoxes"


@pytest.mark.skipif(__import__("importlib").util.find_spec("timm") is None,
                    reason="timm not installed (pip install --no-deps timm huggingface_hub safetensors)")
def test_timm_models_forward_and_backward_under_as_torch(tmp_path):
    # PyTorch 2.15 + timm 1.0.31 on this script (float64 after a float32 init): output sums and
    # the sums of |grad| over the parameters; the init's float32 rounding leaves ~1e-6 between them
    torch_ref = {"resnet18": (0.7538615245448649, 9241.51366182628),
                 "vit_tiny_patch16_224": (3.098891345967955, 270468.376061109),
                 "convnext_atto": (-1.2314773916437267, 50832.2801502279)}
    r = _run_as_torch(tmp_path, "timm_script.py", """
        import json, torch, timm
        torch.manual_seed(0)
        out = {}
        for name in ["resnet18", "vit_tiny_patch16_224", "convnext_atto"]:
            m = timm.create_model(name, pretrained=False, num_classes=10).double()
            size = 224 if "vit" in name else 64
            x = torch.randn(2, 3, size, size, dtype=torch.float64)
            y = m(x)
            y.sum().backward()
            g = sum(float(p.grad.abs().sum()) for p in m.parameters() if p.grad is not None)
            out[name] = [float(y.sum()), g]
        # central differences on the first conv weight of resnet18 (a float64 reference of the gradient)
        m = timm.create_model("resnet18", pretrained=False, num_classes=10).double().eval()
        x = torch.randn(1, 3, 32, 32, dtype=torch.float64)
        w = m.conv1.weight
        m(x).sum().backward()
        fd = []
        with torch.no_grad():
            for idx in [(0, 0, 0, 0), (5, 1, 3, 2), (63, 2, 6, 6)]:
                old = w[idx].item(); h = 1e-6
                w[idx] = old + h; up = m(x).sum().item()
                w[idx] = old - h; down = m(x).sum().item()
                w[idx] = old
                fd.append([(up - down) / (2 * h), w.grad[idx].item()])
        out["fd"] = fd
        print(json.dumps(out))
        """, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    got = __import__("json").loads(r.stdout.strip().splitlines()[-1])
    for name, (y_sum, g_sum) in torch_ref.items():
        np.testing.assert_allclose(got[name], [y_sum, g_sum], rtol=1e-5, err_msg=name)
    for fd, grad in got["fd"]:
        assert abs(fd - grad) <= 1e-5 * max(1.0, abs(fd)), (fd, grad)


@pytest.mark.skipif(__import__("importlib").util.find_spec("x_transformers") is None,
                    reason="x-transformers not installed (pip install --no-deps x-transformers einops einx ...)")
def test_x_transformers_decoder_trains_and_samples_under_as_torch(tmp_path):
    r = _run_as_torch(tmp_path, "xt_script.py", """
        import json, torch
        from x_transformers import TransformerWrapper, Decoder, AutoregressiveWrapper
        torch.manual_seed(0)
        model = TransformerWrapper(num_tokens=20, max_seq_len=16,
                                   attn_layers=Decoder(dim=32, depth=2, heads=4, rotary_pos_emb=True))
        ar = AutoregressiveWrapper(model)
        opt = torch.optim.Adam(ar.parameters(), lr=1e-2)
        data = torch.randint(0, 20, (8, 17))
        losses = []
        for i in range(5):
            loss = ar(data); opt.zero_grad(); loss.backward(); opt.step()
            losses.append(float(loss))
        print(json.dumps([losses, ar.generate(data[:1, :4], 6, temperature=0.0).tolist()]))
        """)
    assert r.returncode == 0, r.stderr[-3000:]
    losses, sample = __import__("json").loads(r.stdout.strip().splitlines()[-1])
    # PyTorch 2.15 + x-transformers 2.31.10 on the same script
    np.testing.assert_allclose(losses, [3.1455934047698975, 2.855634927749634, 2.7784981727600098,
                                        2.5415358543395996, 2.357999801635742], rtol=1e-5)
    assert sample == [[16, 13, 16, 7, 9, 9]]
