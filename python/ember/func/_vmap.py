"""vmap: map a function over a dimension of its inputs (torch.func.vmap).

Not fused: ember calls the function once per index of the mapped dimension,
on the slices (views) of the inputs, and stacks the results along out_dims.
The results equal torch's batched ones; the cost is a Python loop. Because
each call is an ordinary call, nested vmap, vmap(grad(f)) and autograd
through the stacked result all work. Random draws inside the function are
refused (randomness='error': the generator's state is compared across the
first call), repeated for every index ('same': the generator's state is
restored before each call), or drawn afresh for each ('different') -- the
values of 'different' are not those of torch's batched draws.
"""
import functools

from .. import _C
from .._comparison import equal as _equal
from ..random import get_rng_state, set_rng_state
from ._pytree import broadcast_prefix, tree_flatten, tree_unflatten


def _is_dim(x):
    return x is None or (isinstance(x, int) and not isinstance(x, bool))


def _fn_name(func):
    return getattr(func, "__name__", repr(func))


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """A function that maps func over dim in_dims of its positional inputs (an int,
    None, or a tuple matching the inputs' structure) and stacks the results along
    out_dims; keyword arguments are passed to every call unmapped."""
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or 'same'. "
                           f"Got {randomness}")
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size <= 0):
        raise ValueError(f"vmap: chunk_size should be None or greater than 0. (got {chunk_size})")

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        name = _fn_name(func)
        head = f"vmap({name}, in_dims={in_dims}, ...)(<inputs>)"
        if not args:
            raise ValueError(f"vmap({name})(<inputs>): got no inputs. Maybe you forgot to add inputs, or you are "
                             "trying to vmap over a function with no inputs. The latter is unsupported.")
        if not (_is_dim(in_dims) and in_dims is not None) and not isinstance(in_dims, tuple):
            raise ValueError(f"{head}: expected `in_dims` to be int or a (potentially nested) tuple matching the "
                             f"structure of inputs, got: {type(in_dims)}.")
        if isinstance(in_dims, tuple) and len(in_dims) != len(args):
            raise ValueError(f"{head}: in_dims is not compatible with the structure of `inputs`. in_dims has "
                             f"{len(in_dims)} entries but there are {len(args)} inputs.")
        leaves, spec = tree_flatten(args)
        dims = broadcast_prefix(in_dims, args, _is_dim)
        if dims is None:
            raise ValueError(f"{head}: in_dims is not compatible with the structure of `inputs`.")
        size = None
        norm_dims = []
        for x, d in zip(leaves, dims):
            if d is None:
                norm_dims.append(None)
                continue
            if not isinstance(x, _C.Tensor):
                raise ValueError(f"{head}: Got in_dim={d} for an input but the input is of type {type(x)}. We "
                                 "cannot vmap over non-Tensor arguments, please use None as the respective in_dim")
            if not -x.dim() <= d < x.dim():
                raise ValueError(f"{head}: Got in_dim={d} for some input, but that input is a Tensor of "
                                 f"dimensionality {x.dim()} so expected in_dim to satisfy "
                                 f"-{x.dim()} <= in_dim < {x.dim()}.")
            d %= x.dim()
            norm_dims.append(d)
            if size is None:
                size = x.shape[d]
            elif x.shape[d] != size:
                sizes = [x.shape[dd] for x, dd in zip(leaves, norm_dims) if dd is not None]
                raise ValueError(f"vmap: Expected all tensors to have the same size in the mapped dimension, "
                                 f"got sizes {sizes} for the mapped dimension")
        if size is None:
            raise ValueError("vmap: Expected at least one Tensor to vmap over")

        def call(i):
            if i is None:  # an empty batch: call on zeros to learn the outputs' shapes
                sl = [x if d is None else _C.zeros(tuple(s for k, s in enumerate(x.shape) if k != d),
                                                   dtype=x.dtype, device=x.device)
                      for x, d in zip(leaves, norm_dims)]
            else:
                sl = [x if d is None else x.select(d, i) for x, d in zip(leaves, norm_dims)]
            return func(*tree_unflatten(sl, spec), **kwargs)

        results = []
        state = get_rng_state() if randomness != "different" else None
        for i in range(max(size, 1)):
            if randomness == "same":
                set_rng_state(state)
            results.append(call(i if size else None))
            if randomness == "error" and i == 0 and not _equal(get_rng_state(), state):
                set_rng_state(state)
                raise RuntimeError("vmap: called random operation while in randomness error mode. Please either "
                                   "use the 'same' or 'different' randomness flags on vmap or perform the "
                                   "randomness operation out of vmap")
        return _stack_outputs(name, results, out_dims, size)
    return wrapper


def _stack_outputs(name, results, out_dims, size):
    flats = [tree_flatten(r) for r in results]
    out_spec = flats[0][1]
    out_leaves = [f[0] for f in flats]
    odims = broadcast_prefix(out_dims, results[0], _is_dim)
    if odims is None:
        raise ValueError(f"vmap({name}, ..., out_dims={out_dims})(<inputs>): out_dims is not compatible with the "
                         "structure of `outputs`.")
    stacked = []
    for j, od in enumerate(odims):
        column = [leaves[j] for leaves in out_leaves]
        first = column[0]
        if od is None:
            if isinstance(first, _C.Tensor) and any(
                    c is not first and not (c.shape == first.shape and _equal(c, first)) for c in column[1:]):
                raise ValueError(f"vmap({name}, ...): `{name}` can not return a BatchedTensor when out_dim is None")
            stacked.append(first)
            continue
        if not isinstance(first, _C.Tensor):
            raise ValueError(f"vmap({name}, ...): `{name}` must only return Tensors, got type {type(first)}. Did "
                             "you mean to set out_dims= to None for output?")
        if size == 0:
            stacked.append(_C.stack([first], od).narrow(od % (first.dim() + 1), 0, 0))
        else:
            stacked.append(_C.stack(column, od))
    return tree_unflatten(stacked, out_spec)
