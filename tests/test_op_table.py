"""The op table is the spec (Note [op row] in csrc/ember.h): for every row of
csrc/ops/ops.def, the columns the dispatcher, autocast and autograd read
must agree with what the op does.

- tags: `view` ops return tensors viewing their input's storage; `inplace`
  ops are exactly the `name_` rows and write into their first argument;
  `geometry` ops change only sizes and strides when run in place; `pointwise`
  ops are the rows with elementwise kernels.
- devices: every op with a `cuda` column runs without Note [CUDA fallback]
  on the GPU test double for a float32 sample (tests/op_db.py's samples);
  `any` ops never take it either.
- autocast: each CPU policy gives torch's result dtype under
  `autocast('cpu', dtype=bfloat16)`; the CUDA column agrees with torch's
  published CUDA op lists (stored below, from torch.amp's "Autocast Op
  Reference").
- backward: every row says BW / BW_NAMED (a formula), NO_FORMULA or NOGRAD;
  every row with a formula has a gradcheck case (tests/test_autograd_ops.py
  runs them against finite differences); the node recorded on `y.grad_fn`
  for a plain call is the row's node name; NOGRAD ops give results outside
  the graph, as torch's do.

References are torch's documented behaviour (storage sharing, result dtypes)
checked through NumPy-free structural facts, never ember against itself.
"""
import numpy as np
import pytest

import ember
from ember import _C
from op_db import OPS_BY_NAME
from test_ops import materialize, prepare

NAMES = _C._op_names()
INFO = {n: _C._op_info(n) for n in NAMES}

DEVICE_TOKENS = {"any", "cuda", "mixed", "cpu_index", "device_arg", "any_basic_key", "meta", "cuda_impl"}
TAG_TOKENS = {"view", "inplace", "writes", "geometry", "pointwise", "detaches", "format"}
CASTS = {"none", "lower", "fp32", "promote"}


def test_every_row_has_known_columns():
    assert len(NAMES) == len(set(NAMES)), "an op name appears twice"
    for n, info in INFO.items():
        assert set(info["devices"]) <= DEVICE_TOKENS, n
        assert set(info["tags"]) <= TAG_TOKENS, n
        assert info["autocast"]["cpu"] in CASTS and info["autocast"]["cuda"] in CASTS, n


def test_unknown_op_is_an_error():
    with pytest.raises(KeyError, match="no op named 'alias'"):
        _C._op_info("alias")


def test_inplace_tag_is_the_underscore_rows():
    for n, info in INFO.items():
        trailing = n.endswith("_") and not n.endswith("__")
        assert ("inplace" in info["tags"]) == trailing, n


def test_pointwise_tag_is_the_rows_with_kernels():
    for n, info in INFO.items():
        assert ("pointwise" in info["tags"]) == (info["impl_kernels"] != "none"), n


def test_geometry_ops_have_an_inplace_variant_that_writes_no_data():
    geometry = [n for n, i in INFO.items() if "geometry" in i["tags"]]
    assert geometry
    calls = {"transpose": (0, 1), "swapaxes": (0, 1), "swapdims": (0, 1), "t": (),
             "squeeze": (), "unsqueeze": (0,), "as_strided": ((3, 2), (1, 3))}
    for n in geometry:
        assert INFO[n]["variants"] & 4, f"{n}: geometry tag without an in-place variant"
        x = ember.arange(6.0).view(2, 3) if n != "squeeze" else ember.arange(6.0).view(1, 2, 3)
        flat = x.view(-1)  # the same storage, seen in the order it was written
        v0 = x._version
        getattr(x, n + "_")(*calls[n])
        # the bytes are untouched: only the geometry changed (and, as torch's, the version)
        assert np.array_equal(flat.numpy(), np.arange(6.0, dtype=np.float32)), n
        assert x.untyped_storage().data_ptr() == flat.untyped_storage().data_ptr(), n
        assert x._version == v0 + 1, n


# ------------------------------------------------------------------ views
VIEW_CALLS = {
    "view": lambda x: x.view(4, 6), "view_as": lambda x: x.view_as(ember.empty(6, 4)),
    "as_strided": lambda x: ember.as_strided(x, (2, 2), (1, 2)),
    "transpose": lambda x: x.transpose(0, 1), "swapaxes": lambda x: x.swapaxes(0, 1),
    "swapdims": lambda x: x.swapdims(0, 1), "t": lambda x: x[0].t(),
    "permute": lambda x: x.permute(2, 0, 1), "expand": lambda x: x[:, :1].expand(2, 5, 4),
    "expand_as": lambda x: x[:, :1].expand_as(ember.empty(2, 5, 4)),
    "squeeze": lambda x: x[:, :1].squeeze(1), "unsqueeze": lambda x: x.unsqueeze(0),
    "select": lambda x: x.select(1, 2), "narrow": lambda x: x.narrow(2, 1, 2),
    "split": lambda x: x.split(1, 1), "chunk": lambda x: x.chunk(3, 1),
    "tensor_split": lambda x: x.tensor_split(2, 2), "unbind": lambda x: x.unbind(1),
    "unflatten": lambda x: x.unflatten(2, (2, 2)), "movedim": lambda x: x.movedim(0, 2),
    "moveaxis": lambda x: x.moveaxis(0, 2), "diagonal": lambda x: x.diagonal(0, 1, 2),
    "detach": lambda x: x.detach(), "broadcast_to": lambda x: x[:, :1].broadcast_to(2, 3, 4),
    "view_as_complex": lambda x: ember.view_as_complex(x.view(2, 3, 2, 2)),
    "view_as_real": lambda x: ember.view_as_real(ember.view_as_complex(x.view(2, 3, 2, 2))),
    "real": lambda x: ember.view_as_complex(x.view(2, 3, 2, 2)).real,
    "imag": lambda x: ember.view_as_complex(x.view(2, 3, 2, 2)).imag,
}


def test_view_tag_matches_the_calls_known():
    tagged = {n for n, i in INFO.items() if "view" in i["tags"]}
    assert tagged == set(VIEW_CALLS), f"tagged but not checked: {tagged - set(VIEW_CALLS)}; " \
                                      f"checked but not tagged: {set(VIEW_CALLS) - tagged}"


@pytest.mark.parametrize("name", sorted(VIEW_CALLS))
def test_view_ops_share_the_input_storage(name):
    x = ember.arange(24.0).view(2, 3, 4)
    r = VIEW_CALLS[name](x)
    outs = r if isinstance(r, (tuple, list)) else [r]
    assert outs
    for o in outs:
        assert o.untyped_storage().data_ptr() == x.untyped_storage().data_ptr(), name
        assert o._version == x._version  # one version counter: Note [version counter]


def test_ops_not_tagged_view_copy_when_torch_does():
    # clone / contiguous of a transposed tensor copy (torch's semantics), so
    # they must not carry the view tag
    for n in ("clone", "contiguous", "reshape", "flatten", "tril", "cat"):
        assert "view" not in INFO[n]["tags"]


# ------------------------------------------------------------------ devices
def float32_sample(op):
    for layout in ("contig",):
        try:
            samples = op.get_samples("float32", layout)
        except Exception:  # an op without float32 samples
            return None
        for s in samples:
            if getattr(s, "tile", None) == 1:
                return prepare(s, layout), layout
    return None


def run_on_device(op, sample, layout):
    from test_ops import call
    args, kwargs, _ = materialize(ember, sample, layout)

    def move(a):
        if isinstance(a, ember.Tensor):
            return a.to("cuda")
        if isinstance(a, (list, tuple)) and a and all(isinstance(t, ember.Tensor) for t in a):
            return type(a)(t.to("cuda") for t in a)
        return a
    args = [move(a) for a in args]
    kwargs = {k: move(v) for k, v in kwargs.items()}
    variant = "F" if "F" in op.variants and sample.desc != "varargs" else "M"
    return call(ember, op, variant, args, kwargs)


RANDOM_CALLS = {
    "uniform_": lambda x: x.uniform_(), "normal_": lambda x: x.normal_(),
    "bernoulli_": lambda x: x.bernoulli_(0.3), "random_": lambda x: x.random_(0, 10),
    "exponential_": lambda x: x.exponential_(), "bernoulli": lambda x: ember.bernoulli(x.fill_(0.5)),
}

CUDA_ROWS = sorted(n for n, i in INFO.items() if ("cuda" in i["devices"] or "any" in i["devices"])
                   and n in OPS_BY_NAME)


def test_cuda_impl_rows_run_on_the_gpu():
    # Note [device slot]: a CUDA front-end of its own is a way of running on the GPU
    slots = [n for n, i in INFO.items() if "cuda_impl" in i["devices"]]
    assert slots
    for n in slots:
        assert "cuda" in INFO[n]["devices"] and "any" not in INFO[n]["devices"], n


def test_the_cuda_rows_are_checked():
    assert len(CUDA_ROWS) > 150


@pytest.mark.parametrize("name", CUDA_ROWS)
def test_cuda_column_never_takes_the_fallback(name, cuda):
    if cuda != "fake":
        pytest.skip("the fallback counts are checked on the test double")
    op = OPS_BY_NAME[name]
    _C._cuda_fallback_counts(True)
    if name in RANDOM_CALLS:  # op_db describes random ops by their distributions, not samples
        RANDOM_CALLS[name](ember.empty(64, device="cuda"))
    else:
        found = float32_sample(op)
        if found is None:
            pytest.skip(f"{name} has no float32 sample")
        sample, layout = found
        try:
            run_on_device(op, sample, layout)
        except (RuntimeError, ValueError, TypeError, IndexError, NotImplementedError):
            pass  # the op's own error for this sample: what matters is where it ran
    fell = _C._cuda_fallback_counts(True)
    assert name not in fell, f"{name} is marked to run on the GPU but took the CPU fallback"


# ------------------------------------------------------------------ autocast
# torch's CUDA autocast lists, restricted to the ops ember's table has
TORCH_CUDA_LOWER = {"mm", "bmm", "matmul", "mv", "addmm", "addmv", "addr", "baddbmm", "addbmm",
                    "einsum", "_convolution", "_convolution_transpose", "_scaled_dot_product_flash_attention_for_cpu",
                    "_scaled_dot_product_efficient_attention"}
TORCH_CUDA_FP32 = {"acos", "asin", "cosh", "sinh", "tan", "erfinv", "exp", "expm1", "log", "log10",
                   "log2", "log1p", "reciprocal", "rsqrt", "pow", "_softplus", "_native_layer_norm",
                   "_native_group_norm", "_nll_loss", "_cross_entropy", "_pointwise_loss",
                   "logsumexp", "softmax", "log_softmax", "sum", "prod", "cumsum", "cumprod", "norm",
                   "_linalg_vector_norm", "_upsample_nearest1d", "_upsample_nearest2d",
                   "_upsample_linear1d", "_upsample_bilinear2d", "_upsample_bicubic2d"}
TORCH_CUDA_PROMOTE = {"addcdiv", "addcmul", "atan2", "dot", "vdot", "index_put", "scatter_add", "cat",
                      "concat", "concatenate", "stack", "index_copy"}


def test_cuda_autocast_column_is_torchs_list():
    got = {p: {n for n, i in INFO.items() if i["autocast"]["cuda"] == p} for p in ("lower", "fp32", "promote")}
    assert got["lower"] == TORCH_CUDA_LOWER
    assert got["fp32"] == TORCH_CUDA_FP32
    assert got["promote"] == TORCH_CUDA_PROMOTE


def bf(*shape):
    return ember.randn(*shape)


CPU_CALLS = {  # op -> a call whose result dtype shows the policy
    "mm": lambda: ember.mm(bf(2, 3), bf(3, 4)), "bmm": lambda: ember.bmm(bf(2, 2, 3), bf(2, 3, 2)),
    "matmul": lambda: ember.matmul(bf(2, 3), bf(3, 4)),
    "addmm": lambda: ember.addmm(bf(2, 4), bf(2, 3), bf(3, 4)),
    "baddbmm": lambda: ember.baddbmm(bf(2, 2, 2), bf(2, 2, 3), bf(2, 3, 2)),
    "addbmm": lambda: ember.addbmm(bf(2, 2), bf(2, 2, 3), bf(2, 3, 2)),
    "_convolution": lambda: ember.nn.functional.conv2d(bf(1, 2, 4, 4), bf(3, 2, 3, 3)),
    "_convolution_transpose": lambda: ember.nn.functional.conv_transpose2d(bf(1, 2, 4, 4), bf(2, 3, 3, 3)),
    "_scaled_dot_product_flash_attention_for_cpu":
        lambda: ember.nn.functional.scaled_dot_product_attention(bf(1, 2, 4, 8), bf(1, 2, 4, 8), bf(1, 2, 4, 8)),
    "prod": lambda: ember.prod(bf(3).to(ember.bfloat16)),
    "trace": lambda: ember.trace(bf(3, 3).to(ember.bfloat16)),
    "_nll_loss": lambda: ember.nn.functional.nll_loss(bf(3, 4).to(ember.bfloat16), ember.tensor([0, 1, 2])),
    "_cross_entropy": lambda: ember.nn.functional.cross_entropy(bf(3, 4).to(ember.bfloat16), ember.tensor([0, 1, 2])),
    "_pointwise_loss": lambda: ember.nn.functional.mse_loss(bf(3).to(ember.bfloat16), bf(3).to(ember.bfloat16)),
    "cat": lambda: ember.cat([bf(2).to(ember.bfloat16), bf(2)]),
    "concat": lambda: ember.concat([bf(2).to(ember.bfloat16), bf(2)]),
    "concatenate": lambda: ember.concatenate([bf(2).to(ember.bfloat16), bf(2)]),
    "stack": lambda: ember.stack([bf(2).to(ember.bfloat16), bf(2)]),
    "index_copy": lambda: bf(3).to(ember.bfloat16).index_copy(0, ember.tensor([0]), bf(1)),
}
EXPECTED = {"lower": ember.bfloat16, "fp32": ember.float32, "promote": ember.float32}


def test_cpu_autocast_rows_are_checked():
    assert {n for n, i in INFO.items() if i["autocast"]["cpu"] != "none"} == set(CPU_CALLS)


@pytest.mark.parametrize("name", sorted(CPU_CALLS))
def test_cpu_autocast_column_gives_torchs_dtype(name):
    policy = INFO[name]["autocast"]["cpu"]
    with ember.autocast("cpu", dtype=ember.bfloat16):
        r = CPU_CALLS[name]()
    assert r.dtype == EXPECTED[policy], f"{name} ({policy}) gave {r.dtype}"
    if policy == "lower":  # outside autocast the op keeps its float32 inputs' dtype
        assert CPU_CALLS[name]().dtype == ember.float32


# ------------------------------------------------------------------ autograd
GRADS = {"formula", "named", "raises", "no_formula", "nograd"}
WITH_FORMULA = sorted(n for n, i in INFO.items() if i["grad"] in ("formula", "named"))
# torch differentiates these, ember has no formula yet (their rows say NO_FORMULA):
# second derivatives of fused kernels' backward ops, two foreach ops, positive
NO_FORMULA = {"positive", "_native_layer_norm_backward", "_foreach_norm", "_foreach_mul_",
              "_softmax_backward_data", "_silu_backward", "_native_batch_norm_backward",
              "_native_group_norm_backward", "_cross_entropy_backward",
              "_scaled_dot_product_flash_attention_for_cpu_backward",
              "_scaled_dot_product_flash_attention_backward",
              "_scaled_dot_product_efficient_attention_backward"}


def test_every_row_says_its_backward():
    for n, info in INFO.items():
        assert info["grad"] in GRADS, n
        has = info["grad"] in ("formula", "named", "raises")
        assert (info["backward"] is not None) == has, n
        assert info["grad"] in ("formula", "named") or info["saves"] == 0, n
        if info["grad"] == "formula":  # a fixed node name, torch's spelling
            assert info["node"].endswith(("Backward0", "Backward1", "Backward2", "Backward3", "Backwards")), n
        elif info["grad"] == "raises":
            assert info["node"] in ("NotImplemented", "Unique2Backward0", "UniqueConsecutiveBackward0"), n
        else:
            assert info["node"] is None, n
    # torch records these, and their backward raises
    assert {n for n, i in INFO.items() if i["grad"] == "raises"} == {"floor_divide", "heaviside", "unique",
                                                                       "unique_consecutive"}
    assert {n for n, i in INFO.items() if i["grad"] == "no_formula"} == NO_FORMULA


def test_backward_column_is_the_formula_table():
    rows = _C._differentiable_ops()
    assert set(rows) == set(WITH_FORMULA)
    for n in WITH_FORMULA:
        assert rows[n] == (INFO[n]["node"] or "(depends on the call)"), n


def test_detach_is_the_row_tagged_detaches():
    assert [n for n, i in INFO.items() if "detaches" in i["tags"]] == ["detach"]
    x = ember.ones(3, requires_grad=True) * 2
    v = x._version
    assert x.detach_() is x and x.grad_fn is None and not x.requires_grad
    assert x._version == v  # detach_ writes no data: no version bump (torch's too)


def test_format_rows_give_channels_last_results_for_channels_last_inputs():
    # tests/test_memory_format.py checks each row's strides and values; here,
    # that the tagged rows are the ones it covers
    from test_memory_format import FORMAT_ROWS
    assert {n for n, i in INFO.items() if "format" in i["tags"]} == set(FORMAT_ROWS)


def test_every_row_with_a_formula_is_gradchecked():
    import test_autograd_ops as ag  # its CASES: op_db's samples and the areas' extra cases
    missing = [n for n in WITH_FORMULA if not ag.CASES.get((n, ""))]
    assert not missing, f"rows with a backward formula but no gradcheck case: {missing}"


def _node_cases():
    """The plain calls (ember.op(...) or t.op(...)) of each row with a fixed node name."""
    import test_autograd_ops as ag
    out = []
    for n in WITH_FORMULA:
        cases = [c for c in ag.CASES.get((n, ""), []) if c.form in ("F", "M")]
        if INFO[n]["grad"] == "formula" and cases:
            out.append(pytest.param(n, cases, id=n))
    return out


@pytest.mark.parametrize("name,cases", _node_cases())
def test_grad_fn_is_the_rows_node(name, cases):
    from autograd_common import build
    seen = 0
    for case in cases[:8]:
        leaves, fn = build(ember, case)
        outs = fn(*leaves)
        outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
        # an op may hand back its input unchanged (contiguous() of a contiguous
        # tensor): no node then, as in torch
        got = {type(o.grad_fn).__name__ for o in outs
               if isinstance(o, ember.Tensor) and o.grad_fn is not None and not any(o is x for x in leaves)}
        if got:
            seen += 1
            assert got == {INFO[name]["node"]}, f"{name}: row says {INFO[name]['node']}, grad_fn {got} ({case!r})"
    assert seen, f"{name}: no plain call recorded a node"


# NOGRAD rows: integer and bool results, comparisons, new data: torch gives
# results that do not require grad even from inputs that do
NOGRAD_CALLS = {
    "eq": lambda x: ember.eq(x, x), "lt": lambda x: x.lt(0.5), "isnan": lambda x: ember.isnan(x),
    "signbit": lambda x: ember.signbit(x), "argmax": lambda x: x.argmax(), "argsort": lambda x: x.argsort(),
    "nonzero": lambda x: x.nonzero(), "new_zeros": lambda x: x.new_zeros(2), "all": lambda x: x.all(),
    "count_nonzero": lambda x: ember.count_nonzero(x), "detach": lambda x: x.detach(),
}


@pytest.mark.parametrize("name", sorted(n for n, f in NOGRAD_CALLS.items() if f))
def test_nograd_rows_leave_the_graph(name):
    assert INFO[name]["grad"] == "nograd"
    x = ember.tensor([[0.25, -1.0], [2.0, 0.5]], dtype=ember.float64, requires_grad=True)
    r = NOGRAD_CALLS[name](x)
    assert not r.requires_grad and r.grad_fn is None


@pytest.mark.parametrize("name,call,node,error,message", [
    ("floor_divide", lambda x: ember.floor_divide(x, 2.0), "NotImplemented", RuntimeError,
     "derivative for aten::floor_divide is not implemented"),
    ("heaviside", lambda x: ember.heaviside(x, ember.tensor([0.5, 0.5])), "NotImplemented", RuntimeError,
     "derivative for aten::heaviside is not implemented"),
    ("unique", lambda x: ember.unique(x), "Unique2Backward0", NotImplementedError,
     "the derivative for '_unique2' is not implemented."),
    ("unique_consecutive", lambda x: ember.unique_consecutive(x), "UniqueConsecutiveBackward0",
     NotImplementedError, "the derivative for 'unique_consecutive' is not implemented."),
])
def test_raising_rows_record_torchs_node_and_raise_its_error(name, call, node, error, message):
    # node names and errors read from torch 2.15
    assert INFO[name]["grad"] == "raises" and INFO[name]["node"] == node
    x = ember.tensor([3.0, 5.0], requires_grad=True)
    y = call(x)
    assert type(y.grad_fn).__name__ == node
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        y.sum().backward()


@pytest.mark.parametrize("op", ["eq", "ne", "lt", "le", "gt", "ge"])
def test_in_place_comparisons_record_a_zero_gradient(op):
    # torch: x.clone().eq_(3.0) is EqBackward0 (a number), eq_(tensor) EqBackward1; the gradient is zero
    assert INFO[op]["grad"] == "nograd"
    x = ember.tensor([3.0, 5.0], requires_grad=True)
    cap = op.capitalize()
    y = getattr(x.clone(), op + "_")(3.0)
    assert type(y.grad_fn).__name__ == f"{cap}Backward0"
    z = getattr(x.clone(), op + "_")(ember.tensor([3.0, 1.0]))
    assert type(z.grad_fn).__name__ == f"{cap}Backward1"
    (y.sum() + z.sum()).backward()
    assert x.grad.tolist() == [0.0, 0.0]
    assert not getattr(ember, op)(x, 3.0).requires_grad  # out of place: outside the graph
