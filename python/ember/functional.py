"""Functions torch defines in Python (torch.functional) because they take
variadic tensors, shapes or equations: broadcast_shapes, broadcast_tensors,
meshgrid, einsum. The work is done in C (ember._C: ops/join.c,
ops/einsum.c); these only gather the arguments the way torch accepts them."""
from . import _C

__all__ = ["broadcast_shapes", "broadcast_tensors", "meshgrid", "einsum"]



def broadcast_shapes(*shapes):
    """The shape tensors of these shapes broadcast to, without making tensors.

    Each shape is an int or a sequence of ints, as torch.broadcast_shapes."""
    dims = []
    for shape in shapes:
        if isinstance(shape, int) and not isinstance(shape, bool):
            dims.append((shape,))
        elif isinstance(shape, (tuple, list)) and all(isinstance(s, int) and not isinstance(s, bool)
                                                      for s in shape):
            dims.append(tuple(shape))
        else:
            raise RuntimeError("Input shapes should be of type ints, a tuple of ints, or a list of ints, "
                               f"got {shape}")
    result = [1] * max((len(d) for d in dims), default=0)
    for index, shape in enumerate(dims):
        for i in range(-1, -1 - len(shape), -1):
            if shape[i] < 0:
                raise ValueError("Attempting to broadcast a dimension with negative length!")
            if shape[i] == 1 or shape[i] == result[i]:
                continue
            if result[i] != 1:
                raise RuntimeError(f"Attempting to broadcast a dimension of length {shape[i]} at {i}! "
                                   f"Mismatching argument at index {index} had {shape}; but expected shape "
                                   f"should be broadcastable to {result}")
            result[i] = shape[i]
    return _C.Size(result)


def broadcast_tensors(*tensors):
    """Views of the tensors expanded to their common broadcast shape."""
    return _C.broadcast_tensors(tensors)


def meshgrid(*tensors, indexing=None):
    """Coordinate grids (views) of 0-D/1-D tensors; indexing 'ij' (the default,
    with torch's warning when not given) or 'xy'."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tensors[0]
    return _C.meshgrid(tensors, indexing=indexing)



def _subscript(n):
    if n is Ellipsis:
        return "..."
    if isinstance(n, int) and 0 <= n < 26:
        return chr(ord("A") + n)
    if isinstance(n, int) and 26 <= n < 52:
        return chr(ord("a") + n - 26)
    raise ValueError("einsum(): subscript in subscript list is not within the valid range [0, 52)")


def einsum(*args):
    """einsum(equation, *operands) -> Tensor

    Sums the product of the operands' elements over the subscripts the
    equation contracts. Also einsum(op1, sublist1, op2, sublist2, ...,
    [sublist_out]) with subscripts as integers in [0, 52) and Ellipsis."""
    if len(args) < 2:
        raise ValueError("einsum(): must specify the equation string and at least one operand, "
                         "or at least one operand and its subscripts list")
    if isinstance(args[0], _C.Tensor):  # sublist format
        equation = ",".join("".join(_subscript(s) for s in sub) for sub in args[1::2])
        if len(args) % 2 == 1:
            equation += "->" + "".join(_subscript(s) for s in args[-1])
            operands = args[:-1:2]
        else:
            operands = args[::2]
    else:
        equation, operands = args[0], args[1:]
        if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
            operands = operands[0]
    if not isinstance(equation, str):
        raise TypeError(f"einsum(): argument 'equation' must be str, not {type(equation).__name__}")
    return _C.einsum(equation, list(operands))


_SPARE = "ZYXWVUTSRQPONMLKJIHGFEDCBA"  # letters for '...' dims, picked from the unused ones


def _einsum_terms(equation, operands):
    """(input subscripts, output subscript) with '...' spelled out as letters."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    used = set(c for c in eq if c.isalpha())
    spare = [c for c in _SPARE if c not in used]
    n_ell = max((x.dim() - (len(t) - 3) for t, x in zip(terms, operands) if "..." in t), default=0)
    ell = "".join(spare[:n_ell])
    out_terms = []
    for t, x in zip(terms, operands):
        if "..." in t:
            k = x.dim() - (len(t) - 3)
            t = t.replace("...", ell[n_ell - k:])
        out_terms.append(t)
    if arrow:
        out = rhs.replace("...", ell)
    else:
        counts = {}
        for t in out_terms:
            for c in t:
                counts[c] = counts.get(c, 0) + 1
        out = ell + "".join(sorted(c for c, k in counts.items() if k == 1 and c not in ell))
    return out_terms, out


def _einsum_backward(equation, operands, grad, needs):
    """Gradients of einsum's operands: for operand i, einsum of the gradient
    with the other operands onto i's subscripts; letters only i sums over are
    broadcast back, repeated letters (diagonals) are scattered into zeros."""
    terms, out = _einsum_terms(equation, operands)
    grads = []
    for i, (t, x) in enumerate(zip(terms, operands)):
        if not needs[i]:
            grads.append(None)
            continue
        others = [(terms[j], operands[j]) for j in range(len(terms)) if j != i]
        seen = "".join(t[k] for k in range(len(t)) if t[k] not in t[:k])  # unique, in order
        elsewhere = set(out) | set("".join(o for o, _ in others))
        kept = "".join(c for c in seen if c in elsewhere)
        eq = ",".join([out] + [o for o, _ in others]) + "->" + kept
        r = _C.einsum(eq, [grad] + [op for _, op in others])
        size = {c: x.shape[k] for k, c in enumerate(t)}
        for k, c in enumerate(seen):  # letters only this operand sums over: broadcast back
            if c not in elsewhere:
                r = r.unsqueeze(k)
        r = r.expand(*[-1 if c in elsewhere else size[c] for c in seen])  # kept dims may broadcast
        if len(seen) != len(t):  # repeated letters: the gradient lives on the diagonal
            z = _C.zeros(tuple(x.shape), dtype=r.dtype, device=r.device)
            contiguous = [1] * len(t)
            for k in range(len(t) - 2, -1, -1):
                contiguous[k] = contiguous[k + 1] * x.shape[k + 1]
            strides = [sum(contiguous[k] for k in range(len(t)) if t[k] == c) for c in seen]
            z.as_strided([size[c] for c in seen], strides).copy_(r)
            r = z
        grads.append(r)
    return tuple(grads)


_C._set_helpers({"einsum_backward": _einsum_backward})
