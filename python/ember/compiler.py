"""torch.compiler's answers for ember, which has no graph compiler: nothing is
ever being compiled or exported, and the decorators that torch applies only
while compiling (disable, allow_in_graph, assume_constant_result, ...) hand the
function back unchanged, as torch's do when a function runs eagerly."""
from ._compile import compile  # noqa: F401,A004  (ember.compile: the model, run eagerly)

__all__ = ["compile", "is_compiling", "is_dynamo_compiling", "is_exporting", "disable", "allow_in_graph",
           "assume_constant_result", "reset", "cudagraph_mark_step_begin", "substitute_in_graph"]


def is_compiling():
    """False: ember never traces Python code into a graph."""
    return False


def is_dynamo_compiling():
    return False


def is_exporting():
    return False


def disable(fn=None, recursive=True, *, reason=None):
    """Exclude fn from compilation: it already runs eagerly, so fn comes back unchanged."""
    if fn is None:
        return lambda f: f
    return fn


def allow_in_graph(fn):
    return fn


def assume_constant_result(fn):
    return fn


def substitute_in_graph(original_fn, *, can_constant_fold_through=False, skip_signature_check=False):
    """The substitute is used only while tracing; eagerly the original runs."""
    return lambda substitute: substitute


def reset():
    """Clear compilation caches: ember keeps none."""


def cudagraph_mark_step_begin():
    """Marks a CUDA-graph step for compiled code: nothing to mark without compiled graphs."""
