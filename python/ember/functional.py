"""Functions torch keeps in torch.functional that are thin Python fronts over
the C core. einsum: torch's calling conventions (operands as varargs or one
list, or the sublist format) in front of the C implementation
(csrc/ops/einsum.c), which takes the equation and a list."""
from . import _C

__all__ = ["einsum"]


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
