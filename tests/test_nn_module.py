"""nn.Module, Parameter, containers, Linear/Bilinear, nn.init and nn.utils:
registration and its errors, tree walking, state_dict / load_state_dict,
conversions, hooks, repr; checked against hand-written expectations and,
when PyTorch is installed, against torch.nn doing the same thing."""
import copy
import math
import pickle
from collections import OrderedDict

import numpy as np
import pytest

import ember
from ember import nn
from ember.nn import functional as F
from ember.nn import init

try:
    import torch as _torch
except ImportError:
    _torch = None
needs_torch = pytest.mark.skipif(_torch is None, reason="torch not installed")


def _block_init(self, lib):
    lib.nn.Module.__init__(self)
    self.fc1 = lib.nn.Linear(3, 4)
    self.fc2 = lib.nn.Linear(4, 2, bias=False)
    self.register_buffer("steps", lib.zeros((), dtype=lib.int64))
    self.register_buffer("scratch", lib.ones(2), persistent=False)
    self.scale = lib.nn.Parameter(lib.ones(1))
    self.alias = self.scale  # the same Parameter under two names
    self.empty = None


def make_block(lib):
    """A small nested model with a shared parameter, buffers and a None child,
    written against either library (torch's Module when lib is torch)."""
    class Block(lib.nn.Module):
        def __init__(self):
            _block_init(self, lib)

        def forward(self, x):
            return self.fc2(self.fc1(x).relu()) * self.scale
    return Block()


def Block():
    return make_block(ember)


# ---------------------------------------------------------------------------
# registration
def test_attributes_register_in_the_right_dict():
    m = Block()
    assert list(m._parameters) == ["scale", "alias"]
    assert list(m._buffers) == ["steps", "scratch"]
    assert list(m._modules) == ["fc1", "fc2"]
    assert isinstance(m.fc1.weight, nn.Parameter) and isinstance(m.fc1.weight, ember.Tensor)
    assert m.fc1.weight.requires_grad and m.fc1.weight.is_leaf
    assert m.empty is None and "empty" in m.__dict__
    m.fc2 = None  # a registered child may be set to None
    assert m._modules["fc2"] is None
    del m.scale
    assert "scale" not in m._parameters
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        m.nope


def test_registration_errors_match_torch():
    m = nn.Linear(2, 2)
    with pytest.raises(TypeError, match="cannot assign .* as parameter 'weight'"):
        m.weight = ember.ones(2, 2)
    with pytest.raises(TypeError, match="cannot assign .* as child module"):
        seq = nn.Sequential(nn.Identity())
        seq._modules["0"]  # exists
        setattr(seq, "0", 3)
    with pytest.raises(KeyError, match="contain"):
        m.register_buffer("a.b", ember.ones(1))
    with pytest.raises(KeyError, match="already exists"):
        m.register_parameter("training", None)
    with pytest.raises(TypeError, match="name should be a string"):
        m.register_parameter(1, None)
    with pytest.raises(TypeError):
        m.register_buffer("b", 3.0)

    class Early(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(ember.ones(1))
    with pytest.raises(AttributeError, match="before Module.__init__"):
        Early()
    with pytest.raises(TypeError, match="unexpected keyword"):
        nn.Module(foo=1)


def test_parameters_are_listed_once_and_in_order():
    m = Block()
    names = [n for n, _ in m.named_parameters()]
    assert names == ["scale", "fc1.weight", "fc1.bias", "fc2.weight"]
    all_names = [n for n, _ in m.named_parameters(remove_duplicate=False)]
    assert all_names == ["scale", "alias", "fc1.weight", "fc1.bias", "fc2.weight"]
    assert len(list(m.parameters())) == 4
    assert [n for n, _ in m.named_parameters(recurse=False)] == ["scale"]
    assert [n for n, _ in m.named_buffers()] == ["steps", "scratch"]
    assert [n for n, _ in m.named_modules()] == ["", "fc1", "fc2"]
    assert list(m.children()) == [m.fc1, m.fc2]
    shared = nn.Linear(2, 2)
    seq = nn.Sequential(shared, shared)
    assert len(list(seq.modules())) == 2 and len(list(seq.parameters())) == 2


@needs_torch
def test_tree_walk_matches_torch():
    e, t = Block(), make_block(_torch)
    for fn in (lambda m: [n for n, _ in m.named_parameters()],
               lambda m: [n for n, _ in m.named_parameters(remove_duplicate=False)],
               lambda m: [n for n, _ in m.named_buffers()],
               lambda m: [n for n, _ in m.named_modules()],
               lambda m: list(m.state_dict().keys()),
               lambda m: list(m.state_dict()._metadata.items())):
        assert fn(e) == fn(t)


def test_get_submodule_parameter_buffer():
    m = nn.Sequential(OrderedDict(block=Block()))
    assert m.get_submodule("block.fc1") is m.block.fc1
    assert m.get_parameter("block.fc1.bias") is m.block.fc1.bias
    assert m.get_buffer("block.steps") is m.block.steps
    with pytest.raises(AttributeError):
        m.get_submodule("block.nope")
    with pytest.raises(AttributeError, match="not an nn.Module"):
        m.get_submodule("block.fc1.weight")
    with pytest.raises(AttributeError, match="not an nn.Parameter"):
        m.get_parameter("block.steps")


# ---------------------------------------------------------------------------
# state dicts
def test_state_dict_contents():
    m = Block()
    sd = m.state_dict()
    assert list(sd) == ["scale", "alias", "steps", "fc1.weight", "fc1.bias", "fc2.weight"]
    assert "scratch" not in sd  # non-persistent
    assert not sd["fc1.weight"].requires_grad and sd["fc1.weight"].data_ptr() == m.fc1.weight.data_ptr()
    assert m.state_dict(keep_vars=True)["fc1.weight"] is m.fc1.weight
    assert sd._metadata[""] == {"version": 1} and "fc1" in sd._metadata
    pre = m.state_dict(prefix="model.")
    assert list(pre)[0] == "model.scale"


def test_load_state_dict_copies_and_reports_keys():
    src, dst = Block(), Block()
    with ember.no_grad():
        src.fc1.weight.fill_(0.5)
    w = dst.fc1.weight
    res = dst.load_state_dict(src.state_dict())
    assert res.missing_keys == [] and res.unexpected_keys == [] and repr(res) == "<All keys matched successfully>"
    assert dst.fc1.weight is w  # copied into, not replaced
    np.testing.assert_array_equal(w.detach().numpy(), np.full((4, 3), 0.5, np.float32))

    sd = src.state_dict()
    del sd["fc2.weight"]
    sd["fc1.extra"] = ember.ones(1)
    sd["nothere.weight"] = ember.ones(1)
    with pytest.raises(RuntimeError) as e:
        dst.load_state_dict(sd)
    msg = str(e.value)
    assert msg.startswith("Error(s) in loading state_dict for Block:")
    assert 'Missing key(s) in state_dict: "fc2.weight".' in msg
    assert 'Unexpected key(s) in state_dict: "nothere.weight", "fc1.extra".' in msg  # torch's order
    res = dst.load_state_dict(sd, strict=False)
    assert res.missing_keys == ["fc2.weight"] and sorted(res.unexpected_keys) == ["fc1.extra", "nothere.weight"]

    bad = src.state_dict()
    bad["fc1.bias"] = ember.ones(5)
    with pytest.raises(RuntimeError, match=r"size mismatch for fc1.bias: copying a param with shape "
                                           r"ember.Size\(\[5\]\) from checkpoint, the shape in current model "
                                           r"is ember.Size\(\[4\]\)"):
        dst.load_state_dict(bad, strict=False)  # size mismatches raise even when not strict
    with pytest.raises(TypeError, match="Expected state_dict to be dict-like"):
        dst.load_state_dict([1, 2])


def test_load_state_dict_assign_and_hooks():
    src, dst = nn.Linear(2, 3), nn.Linear(2, 3)
    dst.load_state_dict(src.state_dict(), assign=True)
    assert isinstance(dst.weight, nn.Parameter) and dst.weight.data_ptr() == src.weight.data_ptr()
    seen = []
    dst.register_load_state_dict_post_hook(lambda mod, keys: seen.append(list(keys.missing_keys)))
    dst.load_state_dict({"weight": ember.zeros(3, 2)}, strict=False)
    assert seen == [["bias"]]

    class Custom(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(ember.zeros(2))

        def _load_from_state_dict(self, state_dict, prefix, *args):
            state_dict[prefix + "w"] = state_dict.pop(prefix + "old_w")  # a renamed key
            super()._load_from_state_dict(state_dict, prefix, *args)

    c = Custom()
    c.load_state_dict({"old_w": ember.ones(2)})
    np.testing.assert_array_equal(c.w.detach().numpy(), [1, 1])


@needs_torch
def test_load_state_dict_errors_match_torch():
    for lib in (ember, _torch):
        sd = lib.nn.Linear(2, 3).state_dict()
        del sd["bias"]
        sd["junk"] = lib.ones(1)
        with pytest.raises(RuntimeError) as e:
            lib.nn.Linear(2, 3).load_state_dict(sd)
        if lib is ember:
            got = str(e.value)
        else:
            assert got == str(e.value)


# ---------------------------------------------------------------------------
# modes, gradients, conversions
def test_train_eval_requires_grad_zero_grad():
    m = Block()
    assert m.training and m.fc1.training
    m.eval()
    assert not m.training and not m.fc1.training
    m.train()
    assert m.fc2.training
    with pytest.raises(ValueError):
        m.train("yes")
    m.requires_grad_(False)
    assert not any(p.requires_grad for p in m.parameters())
    m.requires_grad_()
    x = ember.ones(5, 3)
    out = m(x)
    out.backward(ember.ones(5, 2))
    assert m.fc1.weight.grad is not None
    m.zero_grad(set_to_none=False)
    assert float(m.fc1.weight.grad.abs().max()) == 0.0
    m.zero_grad()
    assert m.fc1.weight.grad is None


def test_to_converts_floating_tensors_in_place():
    m = Block()
    w = m.fc1.weight
    m.to(ember.float64)
    assert m.fc1.weight is w and w.dtype == ember.float64 and isinstance(w, nn.Parameter)
    assert m.steps.dtype == ember.int64  # integer buffers keep their dtype
    m.half()
    assert w.dtype == ember.float16
    m.float()
    assert w.dtype == ember.float32
    m.to("cpu")
    m.to(ember.zeros(1, dtype=ember.float64))
    assert w.dtype == ember.float64
    with pytest.raises(TypeError, match="only accepts floating point"):
        m.to(ember.int64)
    out = m(ember.ones(1, 3, dtype=ember.float64))
    assert out.dtype == ember.float64


def test_apply_and_deepcopy_and_pickle():
    m = Block()
    seen = []
    m.apply(lambda mod: seen.append(type(mod).__name__))
    assert seen == ["Linear", "Linear", "Block"]
    c = copy.deepcopy(m)
    assert c.fc1.weight is not m.fc1.weight and isinstance(c.fc1.weight, nn.Parameter)
    assert c.scale is c.alias  # sharing survives the copy
    np.testing.assert_array_equal(c.fc1.weight.detach().numpy(), m.fc1.weight.detach().numpy())
    p = pickle.loads(pickle.dumps(m.fc1))
    assert isinstance(p.weight, nn.Parameter) and p.weight.requires_grad
    np.testing.assert_array_equal(p.weight.detach().numpy(), m.fc1.weight.detach().numpy())


# ---------------------------------------------------------------------------
# hooks
def test_forward_hooks():
    m = nn.Linear(2, 2)
    calls = []
    h1 = m.register_forward_pre_hook(lambda mod, args: (args[0] * 0,))
    h2 = m.register_forward_hook(lambda mod, args, out: out + 1)
    out = m(ember.ones(1, 2))
    np.testing.assert_allclose(out.detach().numpy(), m.bias.detach().numpy()[None] + 1, rtol=1e-6)
    h1.remove()
    h2.remove()
    h3 = m.register_forward_pre_hook(lambda mod, args, kwargs: ((args[0] * 2,), kwargs), with_kwargs=True)
    h4 = m.register_forward_hook(lambda mod, args, kwargs, out: calls.append(("post", kwargs)), with_kwargs=True)
    m.register_forward_hook(lambda mod, args, out: calls.append("first"), prepend=True)
    m(ember.ones(1, 2))
    assert calls == ["first", ("post", {})]
    h3.remove()
    h4.remove()

    class Boom(nn.Module):
        def forward(self, x):
            raise ValueError("boom")
    b = Boom()
    b.register_forward_hook(lambda mod, args, out: calls.append(("always", out)), always_call=True)
    with pytest.raises(ValueError, match="boom"):
        b(1)
    assert calls[-1] == ("always", None)
    with pytest.raises(NotImplementedError, match="forward"):
        nn.Module()(1)


# ---------------------------------------------------------------------------
# repr
def test_repr_by_hand():
    m = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Sequential(nn.Linear(4, 1, bias=False), nn.Sigmoid()))
    assert repr(m) == (
        "Sequential(\n"
        "  (0): Linear(in_features=3, out_features=4, bias=True)\n"
        "  (1): ReLU()\n"
        "  (2): Sequential(\n"
        "    (0): Linear(in_features=4, out_features=1, bias=False)\n"
        "    (1): Sigmoid()\n"
        "  )\n"
        ")")
    assert repr(nn.Sequential()) == "Sequential()"
    assert repr(nn.ReLU(inplace=True)) == "ReLU(inplace=True)"


@needs_torch
def test_repr_matches_torch():
    def build(lib):
        n = lib.nn
        return [n.Sequential(n.Linear(3, 4), n.ReLU(), n.ModuleList([n.Linear(2, 2) for _ in range(3)] + [n.Tanh()])),
                n.ModuleDict({"a": n.Flatten(), "b": n.Unflatten(1, (2, 2)), "c": n.Identity()}),
                n.ParameterList([n.Parameter(lib.ones(2, 3)), lib.zeros(2)]),
                n.ParameterDict({"b": n.Parameter(lib.ones(2, 3)), "a": lib.zeros(2)}),
                n.Bilinear(2, 3, 4), make_block(lib), n.Parameter(lib.ones(2))]
    for e, t in zip(build(ember), build(_torch)):
        assert repr(e) == repr(t).replace("torch.", "ember.")


# ---------------------------------------------------------------------------
# containers
def test_sequential():
    a, b, c = nn.Linear(2, 2), nn.ReLU(), nn.Tanh()
    s = nn.Sequential(a, b, c)
    assert len(s) == 3 and s[0] is a and s[-1] is c and list(s) == [a, b, c]
    assert isinstance(s[1:], nn.Sequential) and list(s[1:]) == [b, c]
    with pytest.raises(IndexError):
        s[3]
    s[1] = nn.Sigmoid()
    assert isinstance(s[1], nn.Sigmoid)
    del s[0]
    assert list(s._modules) == ["0", "1"] and s[0] is not a
    s.append(a).insert(0, b)
    assert list(s) == [b, s[1], c, a] and list(s._modules) == ["0", "1", "2", "3"]
    s2 = s + nn.Sequential(nn.Identity())
    assert len(s2) == 5 and len(s * 2) == 8
    assert s.pop(0) is b and len(s) == 3
    named = nn.Sequential(OrderedDict(first=nn.Identity(), second=nn.ReLU()))
    assert named.first is named[0]
    x = ember.tensor([[-1.0, 2.0]])
    np.testing.assert_array_equal(named(x).numpy(), [[0.0, 2.0]])


def test_module_list_dict():
    ml = nn.ModuleList([nn.Identity() for _ in range(3)])
    ml.append(nn.ReLU())
    ml += [nn.Tanh()]
    assert len(ml) == 5 and isinstance(ml[-1], nn.Tanh) and isinstance(ml[1:3], nn.ModuleList)
    ml.insert(1, nn.Sigmoid())
    assert isinstance(ml[1], nn.Sigmoid) and len(ml) == 6
    del ml[0]
    assert list(ml._modules) == [str(i) for i in range(5)]
    with pytest.raises(TypeError):
        ml.extend(nn.ReLU())
    with pytest.raises(NotImplementedError):
        ml(1)
    md = nn.ModuleDict({"x": nn.ReLU()})
    md["y"] = nn.Tanh()
    md.update([("z", nn.Identity())])
    assert list(md.keys()) == ["x", "y", "z"] and "y" in md and len(md) == 3
    assert isinstance(md.pop("x"), nn.ReLU) and list(md) == ["y", "z"]
    with pytest.raises(ValueError):
        md.update([("a", nn.ReLU(), 3)])


def test_parameter_list_dict():
    pl = nn.ParameterList([ember.ones(2), nn.Parameter(ember.zeros(3))])
    assert all(isinstance(p, nn.Parameter) for p in pl) and len(pl) == 2
    pl.append(ember.ones(1))
    assert len(list(pl.parameters())) == 3
    pd = nn.ParameterDict({"b": ember.ones(2), "a": ember.zeros(1)})
    assert list(pd.keys()) == ["a", "b"]  # a plain dict is inserted sorted, as torch does
    pd["c"] = nn.Parameter(ember.ones(4))
    assert [n for n, _ in pd.named_parameters()] == ["a", "b", "c"]
    assert isinstance(pd.pop("a"), nn.Parameter) and "a" not in pd
    with pytest.raises(RuntimeError):
        pl(1)


# ---------------------------------------------------------------------------
# Linear, Bilinear, Flatten
def test_linear_forward_and_backward_against_numpy():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 5, 3))
    m = nn.Linear(3, 4).double()
    W, b = m.weight.detach().numpy(), m.bias.detach().numpy()
    xe = ember.from_numpy(x.copy()).requires_grad_()
    y = m(xe)
    np.testing.assert_allclose(y.detach().numpy(), x @ W.T + b, rtol=1e-12)
    g = rng.standard_normal((2, 5, 4))
    y.backward(ember.from_numpy(g))
    np.testing.assert_allclose(m.weight.grad.numpy(), np.einsum("bto,bti->oi", g, x), rtol=1e-12)
    np.testing.assert_allclose(m.bias.grad.numpy(), g.sum((0, 1)), rtol=1e-12)
    np.testing.assert_allclose(xe.grad.numpy(), g @ W, rtol=1e-12)
    # 1-D input, no bias
    m2 = nn.Linear(3, 2, bias=False).double()
    v = rng.standard_normal(3)
    np.testing.assert_allclose(m2(ember.from_numpy(v)).detach().numpy(), m2.weight.detach().numpy() @ v)
    with pytest.raises(RuntimeError):
        m(ember.ones(2, 5, dtype=ember.float64))


def test_bilinear_against_numpy():
    rng = np.random.default_rng(1)
    m = nn.Bilinear(2, 3, 4).double()
    a, b = rng.standard_normal((5, 2)), rng.standard_normal((5, 3))
    want = np.einsum("ni,oij,nj->no", a, m.weight.detach().numpy(), b) + m.bias.detach().numpy()
    got = m(ember.from_numpy(a), ember.from_numpy(b))
    np.testing.assert_allclose(got.detach().numpy(), want, rtol=1e-12)
    with pytest.raises(RuntimeError):
        m(ember.ones(5, 2, dtype=ember.float64), ember.ones(4, 3, dtype=ember.float64))


def test_gradcheck_linear_bilinear():
    rng = np.random.default_rng(2)
    leaf = [ember.from_numpy(rng.standard_normal(s)).requires_grad_() for s in ((3, 4), (2, 4), (2,))]
    assert ember.autograd.gradcheck(lambda x, w, b: F.linear(x, w, b), leaf)
    assert ember.autograd.gradcheck(lambda x, w: F.linear(x, w), leaf[:2])
    bl = [ember.from_numpy(rng.standard_normal(s)).requires_grad_() for s in ((3, 2), (3, 3), (4, 2, 3), (4,))]
    assert ember.autograd.gradcheck(F.bilinear, bl)


def test_flatten_unflatten_identity():
    x = ember.arange(24.0).reshape(2, 3, 4)
    assert nn.Flatten()(x).shape == (2, 12)
    assert nn.Flatten(0, 1)(x).shape == (6, 4)
    assert nn.Unflatten(2, (2, 2))(x).shape == (2, 3, 2, 2)
    assert nn.Identity(54, unused="x")(x) is x
    with pytest.raises(TypeError):
        nn.Unflatten(1, 3)


@needs_torch
def test_layers_initialize_like_torch():
    """Same seed, same draws: ember's generator is torch's mt19937 and the
    layers draw in torch's order with torch's bounds."""
    for make in (lambda n: n.Linear(7, 5), lambda n: n.Linear(3, 2, bias=False), lambda n: n.Bilinear(2, 3, 4)):
        ember.manual_seed(3)
        _torch.manual_seed(3)
        e, t = make(ember.nn), make(_torch.nn)
        for (ne, pe), (nt, pt) in zip(e.named_parameters(), t.named_parameters()):
            assert ne == nt
            np.testing.assert_allclose(pe.detach().numpy(), pt.detach().numpy(), rtol=1e-6, atol=1e-7)


# ---------------------------------------------------------------------------
# nn.init
def test_calculate_gain_by_hand():
    assert init.calculate_gain("linear") == 1 and init.calculate_gain("sigmoid") == 1
    assert init.calculate_gain("tanh") == 5 / 3
    assert init.calculate_gain("relu") == math.sqrt(2)
    assert init.calculate_gain("leaky_relu") == math.sqrt(2 / (1 + 0.01 ** 2))
    assert init.calculate_gain("leaky_relu", 0.2) == math.sqrt(2 / 1.04)
    assert init.calculate_gain("selu") == 0.75
    with pytest.raises(ValueError):
        init.calculate_gain("nope")
    with pytest.raises(ValueError):
        init.calculate_gain("leaky_relu", True)


def test_init_distributions_by_hand():
    g = ember.Generator().manual_seed(0)
    t = ember.empty(400, 300)
    init.uniform_(t, -2, 3, generator=g)
    v = t.numpy()
    assert v.min() >= -2 and v.max() < 3 and abs(v.mean() - 0.5) < 0.05
    init.normal_(t, 1.0, 2.0, generator=g)
    assert abs(t.numpy().mean() - 1) < 0.05 and abs(t.numpy().std() - 2) < 0.05
    init.trunc_normal_(t, 0.0, 1.0, -1.0, 1.5, generator=g)
    assert t.numpy().min() >= -1 and t.numpy().max() <= 1.5
    init.xavier_uniform_(t, generator=g)
    bound = math.sqrt(6 / 700)
    assert np.abs(t.numpy()).max() <= bound and np.abs(t.numpy()).max() > 0.99 * bound
    init.kaiming_uniform_(t, mode="fan_in", nonlinearity="relu", generator=g)
    bound = math.sqrt(3) * math.sqrt(2) / math.sqrt(300)
    assert np.abs(t.numpy()).max() <= bound and np.abs(t.numpy()).max() > 0.99 * bound
    init.kaiming_normal_(t, mode="fan_out", generator=g)
    assert abs(t.numpy().std() - math.sqrt(2 / (1 + 0.01 ** 2)) / math.sqrt(400)) < 0.002
    init.constant_(t, 0.25)
    assert (t.numpy() == 0.25).all()
    init.zeros_(t), init.ones_(t)
    assert (t.numpy() == 1).all()
    with pytest.raises(ValueError):
        init.xavier_uniform_(ember.ones(3))
    with pytest.raises(ValueError):
        init.kaiming_uniform_(t, mode="fan_middle")
    w = ember.ones(3, 2, requires_grad=True)
    init.normal_(w)  # under no_grad: allowed on a leaf requiring grad
    assert w.grad_fn is None


def test_init_structured_by_hand():
    e = init.eye_(ember.empty(2, 3))
    np.testing.assert_array_equal(e.numpy(), np.eye(2, 3))
    d = init.dirac_(ember.empty(4, 2, 3))
    want = np.zeros((4, 2, 3))
    want[0, 0, 1] = want[1, 1, 1] = 1
    np.testing.assert_array_equal(d.numpy(), want)
    for shape in ((5, 3), (3, 5), (4, 2, 2)):
        q = init.orthogonal_(ember.empty(*shape), gain=2.0).numpy().reshape(shape[0], -1)
        small = q @ q.T if q.shape[0] <= q.shape[1] else q.T @ q
        np.testing.assert_allclose(small, 4 * np.eye(small.shape[0]), atol=1e-5)
    s = init.sparse_(ember.empty(10, 4), 0.3, generator=ember.Generator().manual_seed(1)).numpy()
    assert ((s == 0).sum(0) == 3).all()
    with pytest.raises(ValueError):
        init.eye_(ember.empty(2, 2, 2))


def test_init_generator_reproducible():
    a = init.kaiming_uniform_(ember.empty(3, 4), generator=ember.Generator().manual_seed(5))
    b = init.kaiming_uniform_(ember.empty(3, 4), generator=ember.Generator().manual_seed(5))
    np.testing.assert_array_equal(a.numpy(), b.numpy())


@needs_torch
def test_init_matches_torch_draw_for_draw():
    cases = [(lambda m, t, g: m.nn.init.uniform_(t, -1, 2, generator=g), (4, 5)),
             (lambda m, t, g: m.nn.init.normal_(t, 0.5, 2, generator=g), (4, 5)),
             (lambda m, t, g: m.nn.init.trunc_normal_(t, 0, 1, -1, 1, generator=g), (6, 7)),
             (lambda m, t, g: m.nn.init.trunc_normal_(t, 0, 1, 1.5, 4, generator=g), (6, 7)),  # < 30% mass
             (lambda m, t, g: m.nn.init.xavier_normal_(t, gain=2, generator=g), (4, 5)),
             (lambda m, t, g: m.nn.init.kaiming_normal_(t, generator=g), (4, 5, 3)),
             (lambda m, t, g: m.nn.init.orthogonal_(t, generator=g), (3, 6))]
    for fn, shape in cases:
        got = fn(ember, ember.empty(*shape), ember.Generator().manual_seed(11)).numpy()
        want = fn(_torch, _torch.empty(*shape), _torch.Generator().manual_seed(11)).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------
# nn.utils
def _with_grads(grads):
    ps = []
    for g in grads:
        p = nn.Parameter(ember.zeros(*np.shape(g), dtype=ember.float64))
        p.grad = ember.from_numpy(np.array(g, np.float64))
        ps.append(p)
    return ps


def test_clip_grad_norm_by_hand():
    ps = _with_grads([[3.0, 0.0], [[4.0]]])
    total = nn.utils.clip_grad_norm_(ps, 1.0)
    assert float(total) == 5.0
    np.testing.assert_allclose(ps[0].grad.numpy(), [3 / (5 + 1e-6), 0.0])
    ps = _with_grads([[3.0, -7.0], [[4.0]]])
    assert float(nn.utils.clip_grad_norm_(ps, 100.0, norm_type="inf")) == 7.0
    np.testing.assert_array_equal(ps[0].grad.numpy(), [3.0, -7.0])  # under the limit: unchanged
    ps = _with_grads([[1.0, -1.0]])
    assert float(nn.utils.clip_grad_norm_(ps, 1.0, norm_type=1)) == 2.0
    ps = _with_grads([[float("nan")]])
    with pytest.raises(RuntimeError, match="non-finite"):
        nn.utils.clip_grad_norm_(ps, 1.0, error_if_nonfinite=True)
    assert float(nn.utils.clip_grad_norm_([nn.Parameter(ember.ones(2))], 1.0)) == 0.0  # no grads


def test_clip_grad_value_and_vector_conversion():
    ps = _with_grads([[3.0, -0.5], [[-4.0]]])
    nn.utils.clip_grad_value_(ps, 1.0)
    np.testing.assert_array_equal(ps[0].grad.numpy(), [1.0, -0.5])
    np.testing.assert_array_equal(ps[1].grad.numpy(), [[-1.0]])
    m = nn.Linear(2, 3)
    vec = nn.utils.parameters_to_vector(m.parameters())
    assert vec.shape == (9,)
    np.testing.assert_array_equal(vec[:6].detach().numpy(), m.weight.detach().numpy().ravel())
    nn.utils.vector_to_parameters(ember.arange(9.0), m.parameters())
    np.testing.assert_array_equal(m.bias.detach().numpy(), [6, 7, 8])
    with pytest.raises(TypeError):
        nn.utils.vector_to_parameters([1.0], m.parameters())


def test_pad_sequence_by_hand():
    seqs = [ember.tensor([1, 2, 3]), ember.tensor([4]), ember.tensor([5, 6])]
    out = nn.utils.rnn.pad_sequence(seqs, batch_first=True, padding_value=-1)
    np.testing.assert_array_equal(out.numpy(), [[1, 2, 3], [4, -1, -1], [5, 6, -1]])
    out = nn.utils.rnn.pad_sequence(seqs)
    assert out.shape == (3, 3)
    np.testing.assert_array_equal(out.numpy()[:, 1], [4, 0, 0])
    left = nn.utils.rnn.pad_sequence(seqs, batch_first=True, padding_side="left")
    np.testing.assert_array_equal(left.numpy()[1], [0, 0, 4])
    with pytest.raises(ValueError):
        nn.utils.rnn.pad_sequence(seqs, padding_side="middle")
