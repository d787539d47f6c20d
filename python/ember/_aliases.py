"""torch's alternative spellings of existing ember functions.

torch keeps NumPy-style names (arccos, multiply, greater_equal, ...) next to its own; scripts
use both. Each alias is the very same ember function (same signature, same autograd node),
bound under the other name as a torch.* function (ember/__init__.py), a Tensor method and its
in-place `_` twin (ember/_tensor.py).
"""

# alias -> ember name (torch.* function, Tensor method and in-place method)
ALIASES = {
    "arccos": "acos", "arccosh": "acosh", "arcsin": "asin", "arcsinh": "asinh", "arctan": "atan",
    "arctanh": "atanh", "arctan2": "atan2", "divide": "div", "multiply": "mul", "subtract": "sub",
    "greater": "gt", "greater_equal": "ge", "less": "lt", "less_equal": "le", "not_equal": "ne",
}


def functions(namespace):
    """{alias: function} for the aliases a module's namespace (a dict) does not define yet."""
    return {alias: namespace[name] for alias, name in ALIASES.items() if alias not in namespace}


def methods(tensor_type):
    """{alias: method} (and the in-place twins) that tensor_type has under the ember name only."""
    out = {}
    for alias, name in ALIASES.items():
        for suffix in ("", "_"):
            if not hasattr(tensor_type, alias + suffix) and hasattr(tensor_type, name + suffix):
                out[alias + suffix] = getattr(tensor_type, name + suffix)
    return out
