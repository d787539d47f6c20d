"""torch._dynamo's answers for ember, which has no Python-bytecode compiler:
nothing is being compiled, the decorators that steer compilation hand the
function back unchanged (as torch's do for code that runs eagerly), and the
types compiled code would have (eval_frame.OptimizedModule) have no instances."""
from ..compiler import allow_in_graph, assume_constant_result, disable, reset  # noqa: F401
from . import config, eval_frame, exc  # noqa: F401

__all__ = ["allow_in_graph", "assume_constant_result", "disable", "reset", "is_compiling", "mark_static_address",
           "mark_dynamic", "mark_static", "maybe_mark_dynamic", "config", "eval_frame", "exc", "OptimizedModule"]

OptimizedModule = eval_frame.OptimizedModule


def is_compiling():
    return False


def mark_static_address(t, guard=True):
    """A hint to compiled code that t keeps its address; nothing reads it eagerly."""


def mark_dynamic(t, index, *, min=None, max=None):  # noqa: A002
    """A shape hint for compilation; nothing reads it eagerly."""


def maybe_mark_dynamic(t, index):
    """A shape hint for compilation; nothing reads it eagerly."""


def mark_static(t, index=None):
    """A shape hint for compilation; nothing reads it eagerly."""
