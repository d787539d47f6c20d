"""torch.utils.flop_counter: FlopCounterMode counts the floating-point
operations of the matrix products, convolutions and attention run inside it,
forward and backward, with torch's formulas (2 flops per multiply-add; the
other ops count 0, as torch's registry has them).

ember has no aten level: the counter is a TorchFunctionMode (ember.overrides)
that sees the calls made from Python. Backward products are counted when
autograd actually runs them: each counted op whose result is in a graph gets
a pre-hook on its node that adds the backward's products (one per input that
needs a gradient, as torch's mm/conv backward computes only those).

    with FlopCounterMode(display=False) as fc:
        model(x).sum().backward()
    fc.get_total_flops()
"""
from collections import defaultdict
from math import prod

from .. import _C
from ..overrides import TorchFunctionMode

__all__ = ["FlopCounterMode", "register_flop_formula"]


def _shape(t):
    return tuple(t.shape)


def mm_flop(a_shape, b_shape):
    """(m, k) @ (k, n): 2mkn."""
    m, k = a_shape
    k2, n = b_shape
    return 2 * m * k * n


def bmm_flop(a_shape, b_shape):
    b, m, k = a_shape
    return 2 * b * m * k * b_shape[-1]


def matmul_flop(a_shape, b_shape):
    """torch.matmul as aten runs it: mm/bmm for 2-d and batched operands (the
    batch broadcast), none for mv and dot, which torch's registry does not count."""
    if len(a_shape) == 1 and len(b_shape) == 1:
        return 0
    if len(b_shape) == 1:
        return 0  # mv (batched: folded into mv too)
    a = (1,) + a_shape if len(a_shape) == 1 else a_shape
    m, k = a[-2:]
    n = b_shape[-1]
    batch = _broadcast(a[:-2], b_shape[:-2])
    return 2 * prod(batch) * m * k * n


def _broadcast(x, y):
    n = max(len(x), len(y))
    x, y = (1,) * (n - len(x)) + tuple(x), (1,) * (n - len(y)) + tuple(y)
    return tuple(max(p, q) for p, q in zip(x, y))


def conv_flop_count(x_shape, w_shape, out_shape, transposed=False):
    """2 x batch x C_out x C_in/groups x prod(kernel) x prod(spatial), the
    spatial extent of the output (the input's for a transposed conv)."""
    batch = x_shape[0]
    spatial = (x_shape if transposed else out_shape)[2:]
    c_out, c_in, *kernel = w_shape
    return 2 * batch * c_out * c_in * prod(kernel) * prod(spatial)


def _swap01(s):
    return (s[1], s[0]) + tuple(s[2:])


def conv_backward_flop(grad_out_shape, x_shape, w_shape, transposed, need_input, need_weight):
    """grad_input: the transposed conv of grad_out with w; grad_weight: the conv
    of the input with grad_out, batch and channels swapped (torch's formula)."""
    flops = 0
    if need_input:
        flops += conv_flop_count(grad_out_shape, w_shape, x_shape, not transposed)
    if need_weight:
        gw = _swap01(w_shape)
        if transposed:
            flops += conv_flop_count(_swap01(grad_out_shape), _swap01(x_shape), gw)
        else:
            flops += conv_flop_count(_swap01(x_shape), _swap01(grad_out_shape), gw)
    return flops


def sdpa_flop_count(q_shape, k_shape, v_shape):
    """q k^T and (attention) v as bmm's over batch x heads (the query's heads)."""
    *bh, s_q, d_q = q_shape
    s_k = k_shape[-2]
    d_v = v_shape[-1]
    b = prod(bh)
    return bmm_flop((b, s_q, d_q), (b, d_q, s_k)) + bmm_flop((b, s_q, s_k), (b, s_k, d_v))


def sdpa_backward_flop_count(q_shape, k_shape, v_shape):
    """The gradients of v, of the attention, of q and of k: four bmm's."""
    *bh, s_q, d_q = q_shape
    s_k = k_shape[-2]
    d_v = v_shape[-1]
    b = prod(bh)
    return (bmm_flop((b, s_k, s_q), (b, s_q, d_v)) + bmm_flop((b, s_q, d_v), (b, d_v, s_k))
            + bmm_flop((b, s_q, s_k), (b, s_k, d_q)) + bmm_flop((b, d_q, s_q), (b, s_q, s_k)))


def _needs(t):
    return isinstance(t, _C.Tensor) and t.requires_grad


# name -> fn(args, kwargs, out) -> (forward flops, backward flops when the
# result's node runs); args are the call's as the function received them
def _mm(args, kwargs, out):
    a, b = args[0], args[1]
    f = mm_flop(_shape(a), _shape(b))
    return f, f * (_needs(a) + _needs(b))


def _addmm(args, kwargs, out):
    a, b = args[1], args[2]
    f = mm_flop(_shape(a), _shape(b))
    return f, f * (_needs(a) + _needs(b))


def _bmm(args, kwargs, out):
    a, b = args[0], args[1]
    f = bmm_flop(_shape(a), _shape(b))
    return f, f * (_needs(a) + _needs(b))


def _baddbmm(args, kwargs, out):
    a, b = args[1], args[2]
    f = bmm_flop(_shape(a), _shape(b))
    return f, f * (_needs(a) + _needs(b))


def _matmul(args, kwargs, out):
    a, b = args[0], args[1]
    f = matmul_flop(_shape(a), _shape(b))
    return f, f * (_needs(a) + _needs(b))


def _conv(transposed):
    def formula(args, kwargs, out):
        x, w = args[0], args[1]
        xs, ws, os_ = _shape(x), _shape(w), _shape(out)
        f = conv_flop_count(xs, ws, os_, transposed)
        return f, conv_backward_flop(os_, xs, ws, transposed, _needs(x), _needs(w))
    return formula


def einsum_flop(equation, shapes):
    """einsum as torch runs it without opt_einsum: operands contracted left to
    right, each pair one bmm over the indices either keeps (2 x the product of
    their sizes); an index only one side has and nothing later needs is summed
    away first, which costs nothing here."""
    eq = equation.replace(" ", "")
    lhs, _, out = eq.partition("->")
    terms = lhs.split(",")
    if not out and "->" not in eq:
        out = "".join(sorted(c for c in set(lhs.replace(",", "")) if lhs.count(c) == 1))
    if "." in eq or len(terms) != len(shapes):
        return 0
    size = {}
    for term, shape in zip(terms, shapes):
        size.update(zip(term, shape))
    flops, cur = 0, terms[0]
    for i, nxt in enumerate(terms[1:], 1):
        later = set(out).union(*terms[i + 1:])
        keep_a = {c for c in cur if c in later or c in nxt}
        keep_b = {c for c in nxt if c in later or c in cur}
        flops += 2 * prod(size[c] for c in keep_a | keep_b)
        cur = "".join(sorted((keep_a | keep_b) & later))
    return flops


def _einsum(args, kwargs, out):
    equation, operands = args[0], args[1:]
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = operands[0]
    shapes = [_shape(t) for t in operands]
    f = einsum_flop(equation, shapes)
    return f, f * sum(_needs(t) for t in operands)


def _sdpa(args, kwargs, out):
    q, k, v = args[0], args[1], args[2]
    qs, ks, vs = _shape(q), _shape(k), _shape(v)
    back = sdpa_backward_flop_count(qs, ks, vs) if (_needs(q) or _needs(k) or _needs(v)) else 0
    return sdpa_flop_count(qs, ks, vs), back


_FORMULAS = {
    "mm": _mm, "addmm": _addmm, "bmm": _bmm, "baddbmm": _baddbmm, "matmul": _matmul, "__matmul__": _matmul,
    "einsum": _einsum,
    "_convolution": _conv(False), "_convolution_transpose": _conv(True),
    "_scaled_dot_product_flash_attention_for_cpu": _sdpa, "_scaled_dot_product_flash_attention": _sdpa,
    "_scaled_dot_product_efficient_attention": _sdpa,
}


def register_flop_formula(targets, get_raw=False):
    """Decorator: formula(*args, out_val=..., **kwargs) -> flops for the ember
    functions (or their names) in targets, counted forward only."""
    if not isinstance(targets, (list, tuple)):
        targets = [targets]

    def register(formula):
        for t in targets:
            name = t if isinstance(t, str) else getattr(t, "__name__", None)
            if name is None:
                raise TypeError(f"register_flop_formula: cannot name {t!r}")
            if name in _FORMULAS and not isinstance(t, str):
                raise RuntimeError(f"duplicate registrations for {name}")
            _FORMULAS[name] = lambda args, kwargs, out, f=formula: (f(*args, out_val=out, **kwargs), 0)
        return formula
    return register


class _Counting(TorchFunctionMode):
    def __init__(self, counter):
        super().__init__()
        self.counter = counter

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        formula = _FORMULAS.get(getattr(func, "__name__", None))
        if formula is not None:
            first = out[0] if isinstance(out, (tuple, list)) else out
            fwd, bwd = formula(args, kwargs, first)
            self.counter._add(func, fwd)
            node = getattr(first, "grad_fn", None)
            if bwd and node is not None:
                mods = list(self.counter._parents)
                node.register_prehook(lambda grad_outputs, f=func, n=bwd, m=mods: self.counter._add(f, n, m))
        return out


class FlopCounterMode:
    """Counts FLOPs inside `with`: get_total_flops(), get_flop_counts()
    ({"Global": {func: flops}, "<module path>": {...}}), get_table()."""

    def __init__(self, mods=None, depth=2, display=True, custom_mapping=None):
        self.flop_counts = defaultdict(lambda: defaultdict(int))
        self.depth = depth
        self.display = display
        if custom_mapping:
            for target, formula in custom_mapping.items():
                register_flop_formula(target)(formula)
        self._parents = ["Global"]
        self._mode = None
        self._hooks = []

    def _add(self, func, flops, parents=None):
        for p in set(parents if parents is not None else self._parents):
            self.flop_counts[p][func] += flops

    def get_total_flops(self):
        return sum(self.flop_counts["Global"].values())

    def get_flop_counts(self):
        return {k: dict(v) for k, v in self.flop_counts.items()}

    def get_table(self, depth=None):
        depth = self.depth if depth is None else depth
        total = self.get_total_flops()
        rows = [("Module", "FLOP", "% Total")]
        for mod, counts in self.flop_counts.items():
            if mod.count(".") + (mod != "Global") > (depth if depth is not None else 999):
                continue
            n = sum(counts.values())
            rows.append((mod, _human(n), f"{100 * n / total:.2f}%" if total else "0.00%"))
            for func, c in counts.items():
                rows.append((f" - {_func_name(func)}", _human(c), f"{100 * c / total:.2f}%" if total else "0.00%"))
        widths = [max(len(r[i]) for r in rows) for i in range(3)]
        return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows)

    # module paths: a module's name is its parent's plus its attribute name
    def _pre(self, module, args):
        parent = self._parents[-1]
        name = type(module).__name__
        if self._stack_mods:
            owner = self._stack_mods[-1]
            name = next((f"{parent}.{k}" for k, m in owner._modules.items() if m is module), f"{parent}.{name}")
        self._stack_mods.append(module)
        self._parents.append(name)

    def _post(self, module, args, output):
        if self._stack_mods and self._stack_mods[-1] is module:
            self._stack_mods.pop()
            self._parents.pop()

    def __enter__(self):
        from ..nn.modules.module import register_module_forward_pre_hook, register_module_forward_hook
        self.flop_counts.clear()
        self._parents = ["Global"]
        self._stack_mods = []
        self._hooks = [register_module_forward_pre_hook(self._pre), register_module_forward_hook(self._post)]
        self._mode = _Counting(self)
        self._mode.__enter__()
        return self

    def __exit__(self, *exc):
        self._mode.__exit__(*exc)
        for h in self._hooks:
            h.remove()
        self._hooks = []
        if self.display:
            print(self.get_table(self.depth))
        return False


def _func_name(func):
    return f"ember.{getattr(func, '__name__', func)}"


def _human(n):
    for unit, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= scale:
            return f"{n / scale:.3f}{unit}"
    return str(n)
