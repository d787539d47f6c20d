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


class saved_tensors_hooks:
    """Within the block, every tensor the autograd graph saves for backward is
    kept as pack_hook(tensor), and unpack_hook(packed) gives it back when the
    backward reads it (the innermost block's hooks apply). unpack_hook must
    return a tensor with the saved tensor's value."""

    def __init__(self, pack_hook, unpack_hook):
        self.pack_hook = pack_hook
        self.unpack_hook = unpack_hook

    def __enter__(self):
        _C._saved_tensors_hooks_push(self.pack_hook, self.unpack_hook)
        return self

    def __exit__(self, *exc):
        _C._saved_tensors_hooks_pop()
        return False


class save_on_cpu(saved_tensors_hooks):
    """Saved tensors live in host memory (pinned if pin_memory=True) until the
    backward needs them, when they go back to the device they came from."""

    def __init__(self, pin_memory=False, device_type="cuda"):
        def pack(t):
            packed = _C.empty(tuple(t.shape), dtype=t.dtype, device="cpu", pin_memory=bool(pin_memory)
                              and t.device.type != "cpu")
            packed.copy_(t)
            return t.device, packed

        def unpack(packed):
            device, t = packed
            return t.to(device, non_blocking=bool(pin_memory))

        super().__init__(pack, unpack)


class disable_saved_tensors_hooks:
    """Within the block, saved_tensors_hooks raise RuntimeError(error_message)
    (entering one, or saving a tensor under one already entered)."""

    def __init__(self, error_message):
        self.error_message = error_message
        self._previous = None

    def __enter__(self):
        self._previous = _C._saved_tensors_hooks_set_disabled(self.error_message)
        return self

    def __exit__(self, *exc):
        _C._saved_tensors_hooks_set_disabled(self._previous)
        return False
