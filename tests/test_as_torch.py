"""ember.as_torch: `python -m ember.as_torch SCRIPT` and install() make `import torch`
answer with ember. Every case runs in a fresh interpreter (the test process keeps
its real torch, if any, for other tests' comparisons)."""
import os
import subprocess
import sys
import textwrap

import pytest

import ember

# where the ember under test was imported from (site-packages when installed, python/ in a
# development build): child processes must import the same one
PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(ember.__file__)))


def _env(**extra):
    env = dict(os.environ)
    env["PYTHONPATH"] = PYTHON_DIR + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("EMBER_AS_TORCH", None)
    env.update(extra)
    return env


def run_script(tmp_path, source, *args, runner=True, timeout=120, name="script.py"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    cmd = [sys.executable] + (["-m", "ember.as_torch"] if runner else []) + [str(path), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=_env(), cwd=str(tmp_path))


def run_code(source, timeout=120):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(source)], capture_output=True, text=True,
                          timeout=timeout, env=_env())


def test_script_sees_argv_main_and_one_module_object(tmp_path):
    r = run_script(tmp_path, """
        import sys, os
        import torch
        import torch.nn.functional as F
        import torch.utils.data
        import ember, ember.nn.functional, ember.utils.data
        assert torch is ember and F is ember.nn.functional and torch.utils.data is ember.utils.data
        assert torch.nn is ember.nn and sys.modules["torch.nn"] is ember.nn
        assert __name__ == "__main__" and sys.modules["__main__"].__file__ == __file__
        assert sys.path[0] == os.path.dirname(os.path.abspath(__file__))
        print(sys.argv[1:])
        """, "a", "--b=1", "c d")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "['a', '--b=1', 'c d']"


def test_exit_status_and_traceback_are_pythons(tmp_path):
    r = run_script(tmp_path, "import sys\nimport torch\nsys.exit(7)\n")
    assert r.returncode == 7
    r = run_script(tmp_path, "import torch\ndef f():\n    raise ValueError('boom 42')\nf()\n")
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert lines[0] == "Traceback (most recent call last):"
    assert lines[-1] == "ValueError: boom 42"
    assert "as_torch" not in r.stderr and "runpy" not in r.stderr  # only the program's frames
    assert 'script.py", line 4, in <module>' in r.stderr and 'line 3, in f' in r.stderr
    # the same program under plain python prints the same traceback (it fails at import torch
    # only if torch is missing, so compare on a torch-free program)
    plain = "def f():\n    raise ValueError('boom 42')\nf()\n"
    a = run_script(tmp_path, plain)
    b = run_script(tmp_path, plain, runner=False)
    assert (a.returncode, a.stderr) == (b.returncode, b.stderr)


def test_missing_script_and_usage(tmp_path):
    r = subprocess.run([sys.executable, "-m", "ember.as_torch", str(tmp_path / "nope.py")],
                       capture_output=True, text=True, timeout=60, env=_env())
    assert r.returncode == 2 and "can't open file" in r.stderr
    r = subprocess.run([sys.executable, "-m", "ember.as_torch"], capture_output=True, text=True,
                       timeout=60, env=_env())
    assert r.returncode == 2 and "usage" in r.stderr


def test_dash_m_and_dash_c(tmp_path):
    (tmp_path / "mymod.py").write_text("import sys, torch, ember\nprint(torch is ember, sys.argv[1:])\n")
    r = subprocess.run([sys.executable, "-m", "ember.as_torch", "-m", "mymod", "x"], capture_output=True,
                       text=True, timeout=60, env=_env(), cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "True ['x']"
    r = subprocess.run([sys.executable, "-m", "ember.as_torch", "-c", "import sys, torch; print(torch.__name__, sys.argv)",
                        "y"], capture_output=True, text=True, timeout=60, env=_env())
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ember ['-c', 'y']"


def test_install_find_spec_and_metadata():
    r = run_code("""
        import importlib.util, importlib.metadata
        import ember.as_torch
        ember.as_torch.install()
        ember.as_torch.install()  # idempotent
        spec = importlib.util.find_spec("torch.nn.functional")
        assert spec is not None
        import torch, ember
        assert torch is ember and importlib.util.find_spec("torch") is not None
        v = importlib.metadata.version("torch")
        assert v == torch.__version__ == ember.__version__
        assert importlib.metadata.distribution("torch").metadata["Name"] == "torch"
        print(v)
        """)
    assert r.returncode == 0, r.stderr
    v = r.stdout.strip()
    assert v == "2.15.0+ember0.1.0"
    packaging = pytest.importorskip("packaging.version")
    parsed = packaging.Version(v)
    assert parsed.release == (2, 15, 0) and parsed.local == "ember0.1.0"


def test_version_compares_as_a_version():
    import ember
    v = ember.__version__
    assert isinstance(v, str) and str(v) == "2.15.0+ember0.1.0"
    assert v >= "2.6" and v > "2.14.9" and v < "2.16" and v < "10.0"  # "10.0" < "2.6" as text
    assert v >= (2, 6) and not v < (2, 15)
    assert v == "2.15.0+ember0.1.0" and v != "2.14"


def test_missing_submodule_names_it():
    r = run_code("""
        import ember.as_torch
        ember.as_torch.install()
        try:
            import torch._inductor
        except ModuleNotFoundError as e:
            print(e.name)
            print(e)
        """)
    assert r.returncode == 0, r.stderr
    name, msg = r.stdout.strip().splitlines()
    assert name == "torch._inductor" and "torch._inductor" in msg


def test_refuses_when_real_torch_imported():
    r = run_code("""
        import sys, types
        fake = types.ModuleType("torch")
        fake.__file__ = "/site-packages/torch/__init__.py"
        sys.modules["torch"] = fake
        import ember.as_torch
        try:
            ember.as_torch.install()
        except ImportError as e:
            print(type(e).__name__, "|", e)
        assert sys.modules["torch"] is fake and not ember.as_torch.is_installed()
        """)
    assert r.returncode == 0, r.stderr
    kind, msg = r.stdout.strip().split(" | ")
    assert kind == "TorchAlreadyImportedError"
    assert "already imported" in msg and "/site-packages/torch/__init__.py" in msg


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_multiprocessing_children_keep_ember_as_torch(tmp_path, method):
    r = run_script(tmp_path, """
        import multiprocessing as mp, sys
        import torch

        def work(q):
            import torch.nn.functional as F, importlib.metadata, ember
            q.put((torch is ember, F is ember.nn.functional, importlib.metadata.version("torch"),
                   float(torch.ones(3).sum())))

        class Squares(torch.utils.data.Dataset):
            def __len__(self):
                return 4
            def __getitem__(self, i):
                import torch as t, ember
                assert t is ember
                return t.tensor([float(i * i)])

        if __name__ == "__main__":
            ctx = mp.get_context(sys.argv[1])
            q = ctx.Queue()
            p = ctx.Process(target=work, args=(q,))
            p.start()
            print(q.get(timeout=60))
            p.join(60)
            print(p.exitcode)
            dl = torch.utils.data.DataLoader(Squares(), batch_size=2, num_workers=2,
                                             multiprocessing_context=sys.argv[1])
            print([b.flatten().tolist() for b in dl])
        """, method, timeout=180)
    assert r.returncode == 0, r.stderr
    out = r.stdout.strip().splitlines()
    assert out == ["(True, True, '2.15.0+ember0.1.0', 3.0)", "0", "[[0.0, 1.0], [4.0, 9.0]]"]


def test_spawn_child_finds_ember_without_pythonpath(tmp_path):
    """ember put on sys.path by the program itself (not the environment): the
    spawn child still installs ember as torch before it re-imports __main__."""
    (tmp_path / "main.py").write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {PYTHON_DIR!r})
        import ember.as_torch
        ember.as_torch.install()
        import multiprocessing as mp
        import torch

        def work(q):
            import ember
            q.put(torch is ember)

        if __name__ == "__main__":
            ctx = mp.get_context("spawn")
            q = ctx.Queue()
            p = ctx.Process(target=work, args=(q,))
            p.start()
            print(q.get(timeout=60))
            p.join(60)
        """))
    env = _env()
    env.pop("PYTHONPATH")
    r = subprocess.run([sys.executable, str(tmp_path / "main.py")], capture_output=True, text=True,
                       timeout=120, env=env, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "True"


def test_environment_marks_as_torch_for_launchers(tmp_path):
    r = run_script(tmp_path, "import os\nprint(os.environ.get('EMBER_AS_TORCH'))\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "1"


def test_torch_submodules_transformers_imports(tmp_path):
    """The torch modules transformers, accelerate and peft import at import time resolve, each to
    ember's own module object; torch.distributed answers is_available() for what this build has."""
    r = run_script(tmp_path, """
        import importlib, sys
        import torch, ember
        names = ["torch.nn.functional", "torch.utils.data", "torch.utils._pytree", "torch.compiler", "torch.jit",
                 "torch._dynamo", "torch._dynamo.eval_frame", "torch._dynamo._trace_wrapped_higher_order_op",
                 "torch.version", "torch.accelerator", "torch.library", "torch.nn.attention",
                 "torch.nn.attention.flex_attention", "torch.autograd.graph", "torch.serialization",
                 "torch.nn.modules.module", "torch.cuda.graphs", "torch.distributed"]
        for name in names:
            m = importlib.import_module(name)
            assert m is sys.modules["ember" + name[5:]], name
        import torch.distributed as dist
        assert torch.distributed is dist and isinstance(dist.is_available(), bool)
        if not dist.is_available():  # this build has no ember.distributed package: nothing else answers
            assert dist.is_initialized() is False
            try:
                dist.init_process_group
            except AttributeError as e:
                assert "is_available() is False" in str(e)
            else:
                raise AssertionError("an unavailable torch.distributed offered init_process_group")
        from torch.nn.modules.module import _EXTRA_STATE_KEY_SUFFIX
        from torch.nn.attention.flex_attention import BlockMask, create_block_mask, flex_attention
        print("ok", dist.is_available())
        """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("ok")


def test_torch_on_ember_distribution_declares_the_same_version():
    tomllib = pytest.importorskip("tomllib")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the repository
    with open(os.path.join(root, "packaging", "torch-on-ember", "pyproject.toml"), "rb") as f:
        meta = tomllib.load(f)["project"]
    with open(os.path.join(root, "pyproject.toml"), "rb") as f:
        ember_meta = tomllib.load(f)["project"]
    import ember
    assert meta["name"] == "torch"
    assert meta["version"] == str(ember.__version__)
    assert meta["dependencies"] == [f"ember=={ember_meta['version']}"]
    assert str(ember.__version__).endswith("+ember" + ember_meta["version"])


def test_a_real_torch_on_sys_path_is_never_imported(tmp_path):
    """A torch package earlier on sys.path (a real PyTorch install) is shadowed: the finder
    answers first and never lets the search fall through to it, submodules included."""
    fake = tmp_path / "site" / "torch"
    (fake / "nn").mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('the real torch was imported')\n")
    (fake / "onnx.py").write_text("raise ImportError('the real torch.onnx was imported')\n")
    (tmp_path / "main.py").write_text(textwrap.dedent("""
        import torch, ember
        assert torch is ember
        try:
            import torch.onnx
        except ModuleNotFoundError as e:
            assert e.name == "torch.onnx", e
        print("ok")
        """))
    env = _env()
    env["PYTHONPATH"] = str(tmp_path / "site") + os.pathsep + env["PYTHONPATH"]
    r = subprocess.run([sys.executable, "-m", "ember.as_torch", str(tmp_path / "main.py")], capture_output=True,
                       text=True, timeout=120, env=env, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"
