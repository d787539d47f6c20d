"""grad, grad_and_value, vjp, jvp, jacrev, jacfwd and hessian of ember.func,
built on ember's reverse-mode engine.

Each transform differentiates with respect to fresh tensors standing for the
chosen arguments: differentiable views of them when they already take part in
an outer graph, new leaves otherwise. When the call is nested in another
transform (grad(grad(f)), jacrev(grad(f))), or -- under grad mode -- an
argument requires grad or the function's output reaches other tensors that
require grad (a model's parameters it closes over: a gradient penalty), the
gradients keep their graph (create_graph) so the outer level can
differentiate them; otherwise results come back detached, as torch.func's
do at the top level.

jacfwd is computed in reverse mode, one row per output element: the values
equal forward mode's; only the cost differs. jvp uses the double-backward
trick (the gradient of J^T u with respect to u, applied to the tangents).
"""
import functools

from .. import _C
from ..autograd import grad as _autograd_grad
from ..autograd.grad_mode import enable_grad
from ._pytree import spec_repr, tree_flatten, tree_map, tree_unflatten

_state = {"level": 0}  # how many transforms are running around the current call


class _Level:
    def __enter__(self):
        _state["level"] += 1

    def __exit__(self, *exc):
        _state["level"] -= 1


def _nested():
    return _state["level"] > 0


def _check_argnums(argnums, nargs):
    if isinstance(argnums, int) and not isinstance(argnums, bool):
        nums = (argnums,)
    elif isinstance(argnums, tuple) and all(isinstance(a, int) and not isinstance(a, bool) for a in argnums):
        nums = argnums
        if not nums:
            raise RuntimeError("argnums must be non-empty")
        if len(set(nums)) != len(nums):
            raise RuntimeError(f"argnums elements must be unique, got {argnums}")
    else:
        raise RuntimeError(f"argnums must be int or Tuple[int, ...], got: {type(argnums)}")
    for a in nums:
        if not -nargs <= a < nargs:
            raise RuntimeError(f"Got argnum={a}, but only {nargs} positional inputs")
    return tuple(a % nargs for a in nums)


def _fresh(t):
    """The tensor to differentiate with respect to, standing for argument leaf t."""
    if not isinstance(t, _C.Tensor):
        raise ValueError(f"Thing passed to transform API must be Tensor, got {type(t)}")
    if t.requires_grad:
        return t.view_as(t)  # keeps t's own graph for an outer level
    return t.detach().requires_grad_(True)


def _prepare(args, argnums, outer_grad):
    """(new args, diff pytree (one entry per argnum), wants_graph); outer_grad: the grad mode of the caller."""
    # called inside the transform's own _Level: an outer transform makes the level > 1
    wants_graph = outer_grad and (_state["level"] > 1 or any(
        isinstance(x, _C.Tensor) and x.requires_grad for x in tree_flatten(args)[0]))
    args = list(args)
    diff = []
    for a in argnums:
        args[a] = tree_map(_fresh, args[a])
        diff.append(args[a])
    return tuple(args), diff, wants_graph


def _reaches_other_leaves(outputs, own):
    """Whether the graph of outputs reaches a tensor requiring grad other than the leaves in own."""
    own_ids = {id(t) for t in own}
    stack, seen = [], set()
    for o in outputs:
        if isinstance(o, _C.Tensor) and o.requires_grad:
            if o.grad_fn is None:
                if id(o) not in own_ids:
                    return True
            else:
                stack.append(o.grad_fn)
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        var = getattr(node, "variable", None)
        if var is not None:  # AccumulateGrad: a leaf
            if id(var) not in own_ids:
                return True
            continue
        stack.extend(f for f, _ in node.next_functions if f is not None)
    return False


def _keep_graph(keep, outer_grad, outputs, diff):
    return keep or (outer_grad and _reaches_other_leaves(outputs, tree_flatten(diff)[0]))


def _grads(outputs, inputs, grad_outputs, create_graph):
    """autograd.grad with zeros for inputs the outputs do not reach."""
    live = [(o, g) for o, g in zip(outputs, grad_outputs) if o.requires_grad]
    if live:
        gs = _autograd_grad(tuple(o for o, _ in live), tuple(inputs), tuple(g for _, g in live),
                            retain_graph=True, create_graph=create_graph, allow_unused=True)
    else:
        gs = (None,) * len(inputs)
    return [_C.zeros_like(x) if g is None else g for g, x in zip(gs, inputs)]


def _finish(tree, keep_graph):
    return tree if keep_graph else tree_map(lambda t: t.detach() if isinstance(t, _C.Tensor) else t, tree)


def _split_aux(output, has_aux, api):
    if not has_aux:
        return output, None
    if not (isinstance(output, tuple) and len(output) == 2):
        raise RuntimeError(f"{api}(f)(*args): output of function f should be a tuple: (output, aux) if "
                           "has_aux is True")
    return output


# -- grad -----------------------------------------------------------------------------

def grad_and_value(func, argnums=0, has_aux=False):
    """A function returning (gradient of func's scalar output with respect to the
    arguments at argnums, func's output); ((grad, (output, aux))) with has_aux."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        nums = _check_argnums(argnums, len(args))
        outer_grad = _C.is_grad_enabled()
        with _Level(), enable_grad():
            args, diff, keep = _prepare(args, nums, outer_grad)
            output, aux = _split_aux(func(*args, **kwargs), has_aux, "grad_and_value")
            if not isinstance(output, _C.Tensor):
                raise RuntimeError(f"grad_and_value(f)(*args): Expected f(*args) to return a Tensor, got "
                                   f"{type(output)}")
            if output.dim() != 0:
                raise RuntimeError(f"grad_and_value(f)(*args): Expected f(*args) to return a scalar Tensor, got "
                                   f"tensor with {output.dim()} dims. Maybe you wanted to use the vjp or jacrev "
                                   "APIs instead?")
            flat, spec = tree_flatten(diff)
            keep = _keep_graph(keep, outer_grad, [output], diff)
            gs = _grads([output], flat, [None], create_graph=keep)
        g = tree_unflatten(gs, spec)
        g = g[0] if isinstance(argnums, int) else tuple(g)
        g = _finish(g, keep)
        value = output if keep else output.detach()
        if has_aux:
            return g, (value, _finish(aux, keep))
        return g, value
    return wrapper


def grad(func, argnums=0, has_aux=False):
    """A function returning the gradient of func's scalar output with respect to
    the arguments at argnums (a pytree like them); (grad, aux) with has_aux."""
    gv = grad_and_value(func, argnums, has_aux)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        g, value = gv(*args, **kwargs)
        return (g, value[1]) if has_aux else g
    return wrapper


# -- vjp, jvp -------------------------------------------------------------------------

def vjp(func, *primals, has_aux=False):
    """(func(*primals), vjp_fn[, aux]): vjp_fn(cotangents) gives, for each primal,
    the cotangents pulled back through func (a tuple as long as primals)."""
    outer_grad = _C.is_grad_enabled()
    with _Level(), enable_grad():
        args, diff, keep = _prepare(primals, tuple(range(len(primals))), outer_grad)
        output, aux = _split_aux(func(*args), has_aux, "vjp")
    out_flat, out_spec = tree_flatten(output)
    keep = _keep_graph(keep, outer_grad, out_flat, diff)
    for o in out_flat:
        if not isinstance(o, _C.Tensor):
            raise RuntimeError(f"vjp(f, *primals): Expected f to be a function that has non-empty output "
                               f"(got {type(o)}) and outputs Tensors only")
    in_flat, in_spec = tree_flatten(diff)

    def vjp_fn(cotangents, retain_graph=True, create_graph=None):
        ct_flat, ct_spec = tree_flatten(cotangents)
        if ct_spec != out_spec:
            raise RuntimeError("Expected pytree structure of cotangents to be the same as pytree structure of "
                               f"outputs to the function. cotangents: {spec_repr(ct_spec)}, primal output: "
                               f"{spec_repr(out_spec)}")
        for i, (c, o) in enumerate(zip(ct_flat, out_flat)):
            if tuple(c.shape) != tuple(o.shape):
                raise RuntimeError(f"Mismatch in shape: grad_output[{i}] has a shape of {c.shape} and "
                                   f"output[{i}] has a shape of {o.shape}.")
        cg = create_graph if create_graph is not None else (
            _C.is_grad_enabled() and (keep or _nested() or any(c.requires_grad for c in ct_flat)))
        with enable_grad():
            gs = _grads(out_flat, in_flat, ct_flat, create_graph=cg)
        return _finish(tuple(tree_unflatten(gs, in_spec)), cg)

    out = _finish(output, keep)
    if has_aux:
        return out, vjp_fn, _finish(aux, keep)
    return out, vjp_fn


def jvp(func, primals, tangents, *, strict=False, has_aux=False):
    """(func(*primals), J tangents): the forward-mode product, by the double-backward trick."""
    if not isinstance(primals, tuple):
        raise RuntimeError("jvp(f, primals, tangents): Expected primals to be a tuple. E.g. it should be valid "
                           "to call f(*primals).")
    p_flat, p_spec = tree_flatten(primals)
    t_flat, t_spec = tree_flatten(tangents)
    if not isinstance(tangents, tuple) or p_spec != t_spec:
        raise RuntimeError("jvp(f, primals, tangents): Expected primals and tangents to have the same python "
                           "structure. For example, if primals is a tuple of 3 tensors, tangents also must be. Got "
                           f"primals with structure {spec_repr(p_spec)} and tangents with structure "
                           f"{spec_repr(t_spec)}")
    for p, t in zip(p_flat, t_flat):
        if tuple(p.shape) != tuple(t.shape):
            raise RuntimeError(f"Trying to set a forward gradient that has a different size than that of the "
                               f"original Tensor, this is not supported. Tensor is of size {list(p.shape)} while "
                               f"the given forward gradient is of size {list(t.shape)}.")
    outer_grad = _C.is_grad_enabled()
    with _Level(), enable_grad():
        args, diff, keep = _prepare(primals, tuple(range(len(primals))), outer_grad)
        output, aux = _split_aux(func(*args), has_aux, "jvp")
        out_flat, out_spec = tree_flatten(output)
        keep = _keep_graph(keep, outer_grad, out_flat, diff)
        in_flat = tree_flatten(diff)[0]
        # J^T u is linear in u: its gradient with respect to u, applied to the tangents, is J t
        us = [_C.zeros_like(o).requires_grad_(True) for o in out_flat]
        back = _grads(out_flat, in_flat, us, create_graph=True)
        jv = _grads(back, us, t_flat, create_graph=keep)
    result = (_finish(output, keep), _finish(tree_unflatten(jv, out_spec), keep))
    return result + (_finish(aux, keep),) if has_aux else result


# -- Jacobians and Hessians ------------------------------------------------------------

def _jacobian_transform(func, argnums, has_aux, api):
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        nums = _check_argnums(argnums, len(args))
        outer_grad = _C.is_grad_enabled()
        with _Level(), enable_grad():
            args, diff, keep = _prepare(args, nums, outer_grad)
            output, aux = _split_aux(func(*args, **kwargs), has_aux, api)
            out_flat, out_spec = tree_flatten(output)
            keep = _keep_graph(keep, outer_grad, out_flat, diff)
            in_flat, in_spec = tree_flatten(diff)
            per_output = []
            for o in out_flat:
                if not isinstance(o, _C.Tensor):
                    raise RuntimeError(f"{api}(f, ...)(*args): Expected f to return Tensors only, got {type(o)}")
                rows = [[] for _ in in_flat]  # rows[j]: one in_j-shaped gradient per element of o
                flat_o = o.reshape(-1)
                for k in range(o.numel()):
                    for j, g in enumerate(_grads([flat_o[k]], in_flat, [None], create_graph=keep)):
                        rows[j].append(g)
                jacs = [_C.stack(r, 0).reshape(tuple(o.shape) + tuple(x.shape)) if r else
                        _C.zeros(tuple(o.shape) + tuple(x.shape), dtype=x.dtype, device=x.device)
                        for r, x in zip(rows, in_flat)]
                per_arg = tree_unflatten(jacs, in_spec)
                per_output.append(per_arg[0] if isinstance(argnums, int) else tuple(per_arg))
        jac = _finish(tree_unflatten(per_output, out_spec), keep)
        return (jac, _finish(aux, keep)) if has_aux else jac
    return wrapper


def jacrev(func, argnums=0, *, has_aux=False, chunk_size=None, _preallocate_and_copy=False):
    """A function returning the Jacobian of func with respect to the arguments at
    argnums, by reverse mode: for each output o and argument leaf x, a tensor of
    shape o.shape + x.shape, in the output's structure (of the arguments' structure)."""
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size <= 0):
        raise ValueError("jacrev: `chunk_size` should be greater than 0.")
    return _jacobian_transform(func, argnums, has_aux, "jacrev")


def jacfwd(func, argnums=0, has_aux=False, *, randomness="error"):
    """The Jacobian as jacrev gives it. ember computes it in reverse mode too (one
    backward pass per output element): the values are forward mode's, the cost is not."""
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or 'same'. "
                           f"Got {randomness}")
    return _jacobian_transform(func, argnums, has_aux, "jacfwd")


def hessian(func, argnums=0):
    """The Hessian of func with respect to the arguments at argnums: jacfwd(jacrev(func))."""
    return jacfwd(jacrev(func, argnums), argnums)
