"""ember.autograd.graph: the node type of the autograd graph (grad_fn objects)
and its hook registration."""
from .. import _C
from ..utils.hooks import RemovableHandle

Node = _C.Node


def _register(hooks, hook):
    handle = RemovableHandle(hooks)
    hooks[handle.id] = hook
    return handle


def register_hook(self, fn):
    """fn(grad_inputs, grad_outputs) runs after the node; it may return new grad_inputs."""
    return _register(self._post_hooks, fn)


def register_prehook(self, fn):
    """fn(grad_outputs) runs before the node; it may return new grad_outputs."""
    return _register(self._pre_hooks, fn)


_C._add_attrs(Node, {"register_hook": register_hook, "register_prehook": register_prehook})
