"""A crash fuzzer for ember: random calls of every op of the table
(ember._C._op_names()) and of the public Python functions and Tensor methods,
with hostile arguments (0 and huge sizes, bad dims, every dtype, views that are
non-contiguous, expanded or overlapping, NaN/inf/-0.0, extreme ints, wrong
types and keywords), plus random autograd graphs with in-place mutation,
detach_/.data writes, retain_graph misuse and double backward.

Every program is generated as Python source from (seed, batch, index), so a
finding is printed as a self-contained one-line reproducer. Each batch runs in
a child process with an address-space limit (resource.setrlimit) and a
no-progress timeout; a child that dies on a signal (segfault, abort) or stops
making progress is a finding, reduced to the shortest tail of its batch that
still fails in a fresh process (usually the one call). SystemError (an
internal error reaching Python) and AssertionError (an assert guarding user
input) are reported too.

    python tools/fuzz.py --seconds 60 --seed 0          # what CI runs (tests/test_fuzz.py)
    python tools/fuzz.py --seconds 3600 --seed $RANDOM  # a long campaign
    python tools/fuzz.py --replay "ember.add(ember.ones(2), 3)"

Exit status: 0 when nothing crashed or hung, 1 otherwise.
"""
import argparse
import json
import keyword
import os
import random
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

# Names never called: they touch files, processes, threads or global settings
# (a later call would then run in another world), or wait on purpose.
DENY = {
    "save", "load", "set_default_dtype", "set_default_device", "set_default_tensor_type", "set_num_threads",
    "set_num_interop_threads", "set_printoptions", "use_deterministic_algorithms", "set_flush_denormal",
    "set_rng_state", "manual_seed", "seed", "initial_seed", "compile", "from_file", "set_anomaly_enabled",
    "set_grad_enabled", "set_warn_always", "set_float32_matmul_precision", "set_deterministic_debug_mode",
    "share_memory_", "pin_memory", "cuda", "to_dlpack", "from_dlpack", "__dlpack__", "tofile", "numpy",
    "register_hook", "register_post_accumulate_grad_hook", "storage", "untyped_storage", "_typed_storage",
    "set_", "resize_", "resize_as_", "record_stream", "backward", "apply_", "map_", "map2_", "tolist",
    "__reduce_ex__", "__setstate__", "__getstate__", "__deepcopy__", "__reduce__", "__del__", "__init__",
    "__init_subclass__", "__new__", "__class__", "__subclasshook__", "__array__", "__array_wrap__",
    "__torch_function__", "__setattr__", "__delattr__", "__dir__", "__format__", "__sizeof__", "__hash__",
    "get_default_device", "hub", "jit", "onnx", "multiprocessing", "distributed", "utils", "testing",
    "profiler", "backends", "as_torch", "library", "export", "fx", "package", "serialization", "random",
}

# AssertionErrors torch itself raises for bad input (so ember does too)
TORCH_ASSERTS = {"Padding_idx must be within num_embeddings"}

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64",
          "uint16", "uint32", "uint64"]
FLOATS = ["float32", "float64"]
SPECIAL = ["float('nan')", "float('inf')", "-float('inf')", "-0.0", "0.0", "1e38", "-1e-45", "3.0"]
INTS = ["0", "1", "-1", "2", "3", "-2", "7", "2**31", "2**31-1", "-2**31", "2**62", "2**63-1", "-2**63", "2**64",
        "10**30", "True", "False"]
JUNK = ["None", "'abc'", "''", "[]", "()", "[1, 'a']", "{}", "object()", "slice(None)", "ember.float64",
        "'cpu'", "ember.device('cpu')", "1.5", "float('nan')", "[[1], [2, 3]]", "Ellipsis", "b'x'", "1j"]
KWARGS = ["dim", "keepdim", "dtype", "out", "alpha", "inplace", "reduction", "weight", "bias", "p", "eps",
          "size", "generator", "device", "requires_grad", "memory_format", "layout", "correction", "unbiased",
          "descending", "stable", "rounding_mode", "approximate", "value", "bogus_kwarg", "max", "min", "k",
          "diagonal", "offset", "start_dim", "end_dim", "index", "src", "mode", "scale_factor", "align_corners"]


class Gen:
    """Source text of random values."""

    def __init__(self, rng):
        self.r = rng

    def shape(self):
        r = self.r
        nd = r.choice([0, 1, 1, 2, 2, 3, 4])
        dims = [r.choice([0, 1, 1, 2, 3, 4, 5]) for _ in range(nd)]
        return dims

    def tensor(self, dtype=None, shape=None, small=True):
        r = self.r
        dtype = dtype or r.choice(DTYPES + FLOATS * 2)
        shape = self.shape() if shape is None else shape
        n = 1
        for s in shape:
            n *= s
        sh = ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "")
        kind = r.random()
        if kind < 0.12 and n:
            vals = ", ".join(r.choice(SPECIAL) for _ in range(n))
            base = f"ember.tensor([{vals}]).reshape({sh or '()'})" if shape else f"ember.tensor({r.choice(SPECIAL)})"
        elif kind < 0.2:
            base = f"ember.full(({sh}), {r.choice(INTS[:8] + SPECIAL)})"
        else:
            base = f"(ember.randn({sh or '()'}) * {r.choice(['1', '3', '100', '1e-3'])})"
        src = f"{base}.to(ember.{dtype})"
        v = r.random()
        if v < 0.12 and len(shape) >= 2:  # non-contiguous
            src += f".transpose(0, {len(shape) - 1})"
        elif v < 0.2 and shape:  # expanded
            src = f"{base}.to(ember.{dtype})[..., :1].expand({sh})" if shape[-1] else src
        elif v < 0.26 and shape and shape[0] > 1:  # strided slice
            src += "[::2]"
        elif v < 0.3 and n >= 4:  # overlapping
            src = f"{base}.to(ember.{dtype}).flatten().as_strided((2, 2), (1, 1))"
        if r.random() < 0.08 and dtype in ("float32", "float64"):
            src += ".requires_grad_()"
        return src

    def int_arg(self):
        r = self.r
        return r.choice(INTS + ["0", "1", "2", "-1"] * 3)

    def size_arg(self):
        r = self.r
        k = r.random()
        if k < 0.5:
            return "(" + "".join(self.r.choice(["0", "1", "2", "3", "-1"]) + ", " for _ in range(r.randint(0, 3))) + ")"
        if k < 0.8:
            return "(" + ", ".join(r.choice(INTS) for _ in range(r.randint(1, 3))) + ",)"
        return r.choice(["[2**31, 2**31]", "(2**40,)", "(-5,)", "(2, -2)", "[3.5]", "(2**62, 4)"])

    def arg(self):
        r = self.r
        k = r.random()
        if k < 0.55:
            return self.tensor()
        if k < 0.7:
            return self.int_arg()
        if k < 0.78:
            return r.choice(SPECIAL)
        if k < 0.86:
            return self.size_arg()
        if k < 0.9:
            return f"ember.{r.choice(DTYPES)}"
        return r.choice(JUNK)


STRINGS = ["'mean'", "'sum'", "'none'", "'floor'", "'trunc'", "'reflect'", "'constant'", "'nearest'",
           "'bilinear'", "'tanh'", "'fro'", "'ortho'", "'L'", "'reduced'", "'abc'", "''"]
TENSOR_NAMES = {"input", "x", "tensor", "other", "weight", "bias", "target", "self", "A", "B", "mat", "mat1",
                "mat2", "vec", "vec1", "vec2", "src", "index", "mask", "grad", "end", "exponent", "query", "key",
                "value", "attn_mask", "indices", "boundaries", "sorted_sequence", "tensor1", "tensor2", "y",
                "elements", "test_elements", "condition", "log_probs", "targets", "input_lengths",
                "target_lengths", "running_mean", "running_var", "offsets", "per_sample_weights", "grid",
                "theta", "labels", "anchor", "positive", "negative", "input1", "input2", "var", "LU", "pivots"}
INT_NAMES = {"dim", "axis", "k", "n", "groups", "num_classes", "bins", "diagonal", "offset", "dim0", "dim1",
             "start_dim", "end_dim", "upscale_factor", "downscale_factor", "num_samples", "steps", "repeats",
             "chunks", "sections", "split_size_or_sections", "row", "col", "m", "N", "ord", "padding_idx",
             "blank", "ignore_index", "num_groups", "dims", "shifts", "source", "destination", "start", "step",
             "length", "size"}
SIZE_NAMES = {"size", "shape", "kernel_size", "stride", "padding", "dilation", "output_size", "pad",
              "normalized_shape", "output_padding", "s", "dims", "sizes", "split_size", "scale_factor"}
# Counts of iterations that torch runs as asked (svd_lowrank's niter: a Python
# loop, 2**31 rounds are hours there too): drawn small, so a slow call by
# request is not reported as a hang
ITER_NAMES = {"niter"}
# Output lengths torch fills as asked (linspace/logspace's steps): 2**31 steps
# are 2**31 values computed in torch too, tens of seconds, so the values drawn
# skip that range but keep the ones a size check must refuse at once
LENGTH_NAMES = {"steps"}
LENGTHS = ["0", "1", "2", "3", "7", "-1", "-2**31", "2**62", "2**63-1", "-2**63", "2**64", "10**30", "True"]
NUM_NAMES = {"p", "eps", "alpha", "beta", "momentum", "lambd", "negative_slope", "threshold", "margin",
             "min_val", "max_val", "lower", "upper", "min", "max", "rtol", "atol", "delta", "beta1", "label_smoothing",
             "max_norm", "norm_type", "scale", "rcond", "tol", "q", "base", "weight_decay", "lr", "fill_value"}


def _parse_doc(doc, method):
    """[(type, name, has_default, keyword_only)] from a table op's 'name(Type a, *, Type b=1)' doc."""
    import re
    m = re.match(r"\s*[\w.]+\((.*)\)\s*$", (doc or "").split("\n")[0])
    if not m:
        return None
    params, kwonly = [], False
    for part in m.group(1).split(","):
        part = part.strip()
        if not part:
            continue
        if part == "*":
            kwonly = True
            continue
        decl, _, default = part.partition("=")
        bits = decl.split()
        if len(bits) < 2:
            continue
        params.append((bits[0], bits[-1], bool(default), kwonly))
    if method and params:
        params = params[1:]
    return params


def _py_params(fn, method):
    import inspect
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    out = []
    for p in sig.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            out.append(("Tensor" if p.kind == p.VAR_POSITIONAL else "skip", p.name, True, False))
            continue
        ty = "?"
        if p.default is not p.empty:
            ty = {bool: "bool", int: "int", float: "Number", str: "str"}.get(type(p.default), "?")
        out.append((ty, p.name, p.default is not p.empty, p.kind == p.KEYWORD_ONLY))
    if method and out and out[0][1] == "self":
        out = out[1:]
    return out


def targets(ember):
    """(source prefix, is_method) of everything callable the fuzzer drives, in a fixed order."""
    import types
    out = []
    seen = set()

    def add(src, obj):
        if id(obj) in seen or not callable(obj) or isinstance(obj, type):
            return
        seen.add(id(obj))
        out.append((src, False, _parse_doc(getattr(obj, "__doc__", ""), False) or _py_params(obj, False)))

    for name in ember._C._op_names():
        if name in DENY:
            continue
        for owner, src in ((ember, "ember"), (ember._C, "ember._C")):
            if hasattr(owner, name):
                add(f"{src}.{name}", getattr(owner, name))
                break
    import importlib
    for modname in ("", ".nn.functional", ".linalg", ".special", ".fft"):
        try:
            mod = importlib.import_module("ember" + modname)
        except ImportError:
            continue
        for name in sorted(dir(mod)):
            if name.startswith("_") or name in DENY:
                continue
            obj = getattr(mod, name, None)
            if isinstance(obj, types.ModuleType):
                continue
            add(f"ember{modname}.{name}", obj)
    for name in sorted(dir(ember.Tensor)):
        if name in DENY or (name.startswith("__") and name not in (
                "__add__", "__mul__", "__getitem__", "__setitem__", "__matmul__", "__pow__", "__floordiv__",
                "__mod__", "__truediv__", "__lshift__", "__rshift__", "__and__", "__or__", "__xor__",
                "__iadd__", "__imul__", "__rsub__", "__rpow__", "__neg__", "__abs__", "__invert__", "__bool__",
                "__int__", "__float__", "__index__", "__len__", "__iter__", "__contains__", "__repr__", "__eq__",
                "__lt__", "__ipow__", "__itruediv__", "__ifloordiv__", "__imod__", "__rfloordiv__")):
            continue
        meth = getattr(ember.Tensor, name, None)
        if not callable(meth):
            continue
        base = getattr(ember, name.rstrip("_"), None) if name.endswith("_") else None
        params = (_parse_doc(getattr(meth, "__doc__", ""), True) or _py_params(meth, True)
                  or (_parse_doc(getattr(base, "__doc__", ""), True) if base is not None else None))
        out.append((name, True, params))
    return out


def typed_arg(g, ty, name):
    r = g.r
    if r.random() < 0.06:  # the wrong kind of thing
        return g.arg()
    t = ty.rstrip("?")
    if name in ITER_NAMES:
        return r.choice(["0", "1", "2", "3", "-1", "None"])
    if name in LENGTH_NAMES:
        return r.choice(LENGTHS)
    if t == "?":
        t = ("Tensor" if name in TENSOR_NAMES else "IntList" if name in SIZE_NAMES and r.random() < 0.6
             else "int" if name in INT_NAMES else "Number" if name in NUM_NAMES
             else "dtype" if name == "dtype" else "str" if name in ("reduction", "mode", "norm", "padding_mode")
             else "Tensor" if r.random() < 0.6 else "any")
    if t in ("Tensor", "TensorOrNumber"):
        return g.tensor() if t == "Tensor" or r.random() < 0.7 else r.choice(SPECIAL + INTS[:6])
    if t in ("Number", "float", "Scalar"):
        return r.choice(SPECIAL + INTS[:7])
    if t == "int":
        return g.int_arg()
    if t.startswith("IntList") or t in ("Shape", "Size"):
        return g.size_arg() if r.random() < 0.7 else g.int_arg()
    if t == "bool":
        return r.choice(["True", "False"])
    if t == "str":
        return r.choice(STRINGS)
    if t == "TensorList":
        return "[" + ", ".join(g.tensor() for _ in range(r.randint(0, 3))) + "]"
    if t in ("dtype", "ScalarType"):
        return f"ember.{r.choice(DTYPES)}"
    if t == "skip":
        return None
    return g.arg()


def gen_call(g, tgt):
    r = g.r
    src, is_method, params = tgt
    if params is not None and r.random() < 0.85:
        args, kw = [], []
        for ty, name, has_default, kwonly in params:
            if ty == "skip" or (has_default and r.random() < 0.65):
                continue
            if not has_default and r.random() < 0.02:
                continue  # a required argument left out
            v = typed_arg(g, ty, name)
            if v is None:
                continue
            if is_method and src.endswith("_") and name == "out":
                continue
            if keyword.iskeyword(name):
                args.append(v)
            elif kwonly or (has_default and r.random() < 0.5) or (kw and not kwonly):
                kw.append(f"{name}={v}")
            else:
                args.append(v)
        if r.random() < 0.05:
            kw.append(f"{r.choice(KWARGS)}={g.arg()}")
        if r.random() < 0.05:
            args.append(g.arg())
        call_args = ", ".join(args + list(dict.fromkeys(kw)))
        recv = g.tensor()
        return f"{recv}.{src}({call_args})" if is_method else f"{src}({call_args})"
    nargs = r.choice([0, 1, 1, 2, 2, 3, 4])
    args = [g.arg() for _ in range(nargs)]
    kw = []
    for _ in range(r.choice([0, 0, 0, 1, 1, 2])):
        name = r.choice(KWARGS)
        val = {"dim": g.int_arg, "out": g.tensor, "dtype": lambda: f"ember.{r.choice(DTYPES)}",
               "size": g.size_arg}.get(name, g.arg)()
        kw.append(f"{name}={val}")
    if r.random() < 0.3:  # the usual calling shape: a tensor first, then a dim-like int
        args = [g.tensor()] + ([g.int_arg()] if r.random() < 0.5 else []) + args[:1]
    call_args = ", ".join(args + list(dict.fromkeys(kw)))
    if is_method:
        return f"{g.tensor()}.{src}({call_args})"
    return f"{src}({call_args})"


UNARY = ["exp", "sin", "tanh", "sigmoid", "relu", "abs", "sqrt", "log", "neg", "square", "cumsum(0)", "t()",
         "transpose(0, 1)", "sum(0)", "mean(1, keepdim=True)", "softmax(-1)", "log_softmax(0)", "reshape(-1)",
         "flatten()", "unsqueeze(0)", "clamp(-1, 1)", "pow(2)", "max(0)[0]", "norm()", "cumprod(1)", "flip(0)",
         "roll(1, 0)", "contiguous()", "clone()", "expand(2, 3, 4)", "narrow(1, 0, 2)", "select(0, 1)",
         "unbind(0)[1]", "view(4, 3)", "sort(1)[0]", "topk(2)[0]", "amax(0)", "logsumexp(1)", "diag()"]
BINARY = ["add", "mul", "sub", "div", "maximum", "minimum", "fmax", "fmin", "atan2", "hypot", "matmul",
          "pow", "where_gt", "cat", "stack", "copysign", "logaddexp", "lerp", "addcmul", "dist"]
MUTATE = ["add_(1)", "mul_(2)", "zero_()", "detach_()", "data.mul_(3)", "copy_(ember.ones(3, 4))", "t_()",
          "clamp_(0, 1)", "exp_()", "fill_(2)", "__setitem__(0, 5)", "requires_grad_(False)",
          "unsqueeze_(0)", "data.zero_()", "squeeze_()", "set_(ember.zeros(3, 4))", "__iadd__(1)"]


def gen_graph(g):
    """A random autograd program: leaves, ops, in-place mutations, backward/grad calls."""
    r = g.r
    dt = r.choice(["float64", "float32", "float32", "float16", "bfloat16"])
    lines = [f"a = ember.randn(3, 4, dtype=ember.{dt}, requires_grad=True)",
             f"b = ember.randn(3, 4, dtype=ember.{dt}, requires_grad={r.choice(['True', 'False'])})"]
    names = ["a", "b"]
    for i in range(r.randint(2, 7)):
        x, y = r.choice(names), r.choice(names)
        k = r.random()
        if k < 0.45:
            expr = f"{x}.{r.choice(UNARY)}"
        elif k < 0.8:
            op = r.choice(BINARY)
            if op == "where_gt":
                expr = f"ember.where({x} > 0, {x}, {y})"
            elif op in ("cat", "stack"):
                expr = f"ember.{op}([{x}, {y}])"
            elif op in ("lerp", "addcmul"):
                expr = f"ember.{op}({x}, {y}, {r.choice(names)})" if op == "addcmul" else f"ember.lerp({x}, {y}, 0.3)"
            else:
                expr = f"ember.{op}({x}, {y})"
        else:
            lines.append(f"{x}.{r.choice(MUTATE)}")
            continue
        nm = f"h{i}"
        lines.append(f"{nm} = {expr}")
        names.append(nm)
        if r.random() < 0.25:
            lines.append(f"{r.choice(names)}.{r.choice(MUTATE)}")
    out = names[-1]
    lines.append(f"l = {out}.sum() if {out}.dim() else {out}")
    k = r.random()
    if k < 0.3:
        lines.append("l.backward(retain_graph=True)")
        lines.append("l.backward()")
        if r.random() < 0.5:
            lines.append("l.backward()")  # misuse: the graph is freed
    elif k < 0.6:
        lines.append("gs = ember.autograd.grad(l, [a], create_graph=True, allow_unused=True)")
        lines.append("(gs[0].sum() if gs[0] is not None else l).backward()")
    elif k < 0.8:
        lines.append(f"{r.choice(names)}.{r.choice(MUTATE)}")
        lines.append("l.backward()")
    else:
        lines.append("l.backward(ember.randn(()) if l.dim() == 0 else None)")
        lines.append("a.grad.sum()")
    return "; ".join(lines)


def program(seed, batch, index, tgts):
    """The index-th program of a batch (deterministic in its three numbers)."""
    rng = random.Random(f"{seed}/{batch}/{index}")
    g = Gen(rng)
    if rng.random() < 0.15:
        return gen_graph(g)
    return gen_call(g, tgts[rng.randrange(len(tgts))])


# ------------------------------------------------------------------ child

def child_main(args):
    import io
    import warnings
    warnings.simplefilter("ignore")
    import ember
    tgts = targets(ember)
    stats = {"calls": 0, "exceptions": {}, "internal": []}
    progress = open(args.progress, "w", buffering=1)
    sink = io.StringIO()
    real_stdout = sys.stdout
    sources = ([args.replay] if args.replay else
               (program(args.seed, args.batch, i, tgts) for i in range(args.start, args.start + args.calls)))
    for i, src in enumerate(sources, args.start):
        progress.write(json.dumps([i, src]) + "\n")
        sys.stdout = sink
        try:
            exec(src, {"ember": ember})
        except Exception as e:  # noqa: BLE001  (every exception is an acceptable outcome but SystemError)
            name = type(e).__name__
            stats["exceptions"][name] = stats["exceptions"].get(name, 0) + 1
            if isinstance(e, SystemError) or (isinstance(e, AssertionError) and str(e) not in TORCH_ASSERTS):
                stats["internal"].append([src, f"{name}: {e}"[:300]])
        finally:
            sys.stdout = real_stdout
            sink.seek(0)
            sink.truncate()
        stats["calls"] += 1
        if args.replay and stats["internal"]:
            break
    progress.write(json.dumps(["done", stats]) + "\n")
    progress.close()


# ----------------------------------------------------------------- parent

def _limits(mem_bytes):
    def apply():
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (mem_bytes, mem_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    return apply


def _proc_stat(pid):
    """(state letter, CPU seconds of the whole process) from /proc, or None"""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return fields[0], (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pid):
    st = _proc_stat(pid)
    return st[1] if st else 0.0


def _stalled(pid, idle, cpu_before, limit):
    """A child that made no progress for `idle` seconds is hung when it spun
    for `limit` CPU seconds (a busy loop) or sat blocked for `limit` seconds
    (a deadlock); one that was merely waiting for a CPU on a loaded machine
    is given ten times as long before it counts."""
    if idle <= limit:
        return False
    st = _proc_stat(pid)
    if st is None:
        return idle > 10 * limit
    state, cpu = st
    return cpu - cpu_before > limit or (state in "SD" and cpu - cpu_before < 0.1 * limit) or idle > 10 * limit


def run_child(opts, seed, batch, start, calls, replay=None):
    """Run one child; returns (status, stats, last_index, last_source) with status
    'ok', 'crash:<signal or rc>' or 'hang'."""
    fd, progress = tempfile.mkstemp(prefix="ember-fuzz-", suffix=".jsonl")
    os.close(fd)
    cmd = [sys.executable, os.path.abspath(__file__), "--child", "--seed", str(seed), "--batch", str(batch),
           "--start", str(start), "--calls", str(calls), "--progress", progress]
    if replay:
        cmd += ["--replay", replay]
    env = dict(os.environ, OMP_NUM_THREADS=str(opts.threads), OPENBLAS_NUM_THREADS=str(opts.threads),
               PYTHONFAULTHANDLER="")
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                            preexec_fn=_limits(opts.mem_mb << 20))
    last, size, changed = None, -1, time.monotonic()
    cpu_at_change = _cpu_seconds(proc.pid)
    status = None
    while True:
        try:
            proc.wait(timeout=0.2)
            break
        except subprocess.TimeoutExpired:
            pass
        s = os.path.getsize(progress)
        if s != size:
            size, changed, cpu_at_change = s, time.monotonic(), _cpu_seconds(proc.pid)
        elif _stalled(proc.pid, time.monotonic() - changed, cpu_at_change, opts.hang_seconds):
            proc.kill()
            proc.wait()
            status = "hang"
            break
    stderr = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    stats = None
    with open(progress) as f:
        for line in f:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if rec[0] == "done":
                stats = rec[1]
            else:
                last = rec
    os.unlink(progress)
    if status is None:
        rc = proc.returncode
        status = "ok" if rc == 0 and stats is not None else f"crash:{rc}"
        if status != "ok" and "MemoryError" in stderr and stats is None:
            status = "ok-oom"  # the interpreter itself ran out of the allowed memory: not ember's crash
    return status, stats, last, stderr[-2000:]


def reduce_finding(opts, seed, batch, index, tgts, status):
    """The shortest tail of the batch up to `index` that fails the same way in a fresh child."""
    def fails(start):
        st, _, _, _ = run_child(opts, seed, batch, start, index - start + 1)
        return st.split(":")[0] == status.split(":")[0]
    if fails(index):
        return [program(seed, batch, index, tgts)]
    lo, hi = 0, index  # fails(lo) presumably (the original run); find the largest failing start
    if not fails(lo):
        return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fails(mid):
            lo = mid
        else:
            hi = mid
    return [program(seed, batch, i, tgts) for i in range(lo, index + 1)]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch-calls", type=int, default=400)
    p.add_argument("--mem-mb", type=int, default=3072, help="address-space limit of a child")
    p.add_argument("--hang-seconds", type=float, default=30, help="no progress for this long is a hang")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--max-findings", type=int, default=20)
    p.add_argument("--replay", help="run one program (source) in a limited child and report")
    p.add_argument("--json", help="write the summary here")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--batch", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--start", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--calls", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--progress", help=argparse.SUPPRESS)
    opts = p.parse_args(argv)
    if opts.child:
        return child_main(opts)
    import ember
    tgts = targets(ember)
    if opts.replay:
        status, stats, last, err = run_child(opts, 0, 0, 0, 1, replay=opts.replay)
        print(status, json.dumps(stats), err[-500:])
        return 0 if status.startswith("ok") else 1
    t_end = time.monotonic() + opts.seconds
    total = {"calls": 0, "exceptions": {}, "internal": [], "crashes": [], "hangs": [], "batches": 0,
             "targets": len(tgts), "seed": opts.seed}
    batch = 0
    while time.monotonic() < t_end and len(total["crashes"]) + len(total["hangs"]) < opts.max_findings:
        status, stats, last, err = run_child(opts, opts.seed, batch, 0, opts.batch_calls)
        total["batches"] += 1
        if stats:
            total["calls"] += stats["calls"]
            for k, v in stats["exceptions"].items():
                total["exceptions"][k] = total["exceptions"].get(k, 0) + v
            total["internal"] += stats["internal"]
        elif last:
            total["calls"] += last[0] + 1
        if not status.startswith("ok"):
            index = last[0] if last else 0
            repro = reduce_finding(opts, opts.seed, batch, index, tgts, status)
            finding = {"status": status, "batch": batch, "index": index,
                       "reproducer": "import ember; " + "; ".join(repro) if repro else None,
                       "last_program": last[1] if last else None, "stderr": err[-600:]}
            (total["hangs"] if status == "hang" else total["crashes"]).append(finding)
            print(f"[fuzz] {status}: {finding['reproducer'] or finding['last_program']}", flush=True)
        batch += 1
    summary = (f"[fuzz] seed {opts.seed}: {total['calls']} calls in {total['batches']} batches over "
               f"{total['targets']} targets; exceptions {sum(total['exceptions'].values())} "
               f"{dict(sorted(total['exceptions'].items(), key=lambda kv: -kv[1]))}; "
               f"crashes {len(total['crashes'])}, hangs {len(total['hangs'])}, internal errors "
               f"{len(total['internal'])}")
    print(summary, flush=True)
    for src, msg in total["internal"][:20]:
        print(f"[fuzz] internal error: {msg}\n    import ember; {src}")
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(total, f, indent=1)
    return 1 if total["crashes"] or total["hangs"] else 0


if __name__ == "__main__":
    sys.exit(main())
