"""torch.fx for ember, which has no symbolic tracer: `wrap` (which marks a
function as a leaf for the tracer) is the identity, GraphModule, Graph, Node,
Proxy and Tracer are types nothing is an instance of, and `symbolic_trace`
raises NotImplementedError saying so."""
import sys

__all__ = ["wrap", "symbolic_trace", "GraphModule", "Graph", "Node", "Proxy", "Tracer", "Interpreter", "Transformer"]

_NO_FX = "ember has no torch.fx symbolic tracer (nothing is ever traced into a Graph)"


def wrap(fn_or_name):
    """torch.fx.wrap: marks a module-level function as a tracer leaf. With no
    tracer it changes nothing: the function (or name) comes back unchanged."""
    if not (callable(fn_or_name) or isinstance(fn_or_name, str)):
        raise TypeError(f"torch.fx.wrap: expected a function or a function name, got {type(fn_or_name).__name__}")
    caller = sys._getframe(1)
    if caller.f_code.co_name != "<module>":  # as torch: wrap patches the calling module's globals
        raise NotImplementedError("wrap must be called at the top level of a module")
    return fn_or_name


def symbolic_trace(root, concrete_args=None):
    raise NotImplementedError(f"torch.fx.symbolic_trace: {_NO_FX}")


class _NeverMade:
    def __init__(self, *args, **kwargs):
        raise NotImplementedError(f"torch.fx.{type(self).__name__}: {_NO_FX}")


class Graph(_NeverMade):
    """torch.fx.Graph: ember makes none."""


class Node(_NeverMade):
    """torch.fx.Node: ember makes none."""


class Proxy(_NeverMade):
    """torch.fx.Proxy: ember makes none."""


class Tracer(_NeverMade):
    """torch.fx.Tracer: ember has no tracer."""


class Interpreter(_NeverMade):
    """torch.fx.Interpreter: there are no graphs to interpret."""


class Transformer(Interpreter):
    """torch.fx.Transformer: there are no graphs to transform."""


def _graph_module_class():
    from ..nn.modules.module import Module

    class GraphModule(Module):
        """torch.fx.GraphModule: ember makes none, so nothing is an instance of it."""

        def __init__(self, *args, **kwargs):
            raise NotImplementedError(f"torch.fx.GraphModule: {_NO_FX}")

    GraphModule.__module__ = __name__
    GraphModule.__qualname__ = "GraphModule"
    return GraphModule


GraphModule = _graph_module_class()
