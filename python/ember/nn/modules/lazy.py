"""LazyModuleMixin (torch.nn.modules.lazy's): a module whose parameters are
UninitializedParameter placeholders until its first forward, which calls
initialize_parameters(*input) to give them shapes from the input, then drops
the hook and turns the module into cls_to_become (LazyLinear -> Linear).
Loading a state_dict first materializes them to the checkpoint's shapes.
Build optimizers after the first forward (or load): the placeholders have no
data before it."""
from ..parameter import is_lazy

__all__ = ["LazyModuleMixin"]


class LazyModuleMixin:
    cls_to_become = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._initialize_hook = self.register_forward_pre_hook(_infer_parameters, with_kwargs=True)

    def has_uninitialized_params(self):
        tensors = list(self._parameters.values()) + list(self._buffers.values())
        return any(t is not None and is_lazy(t) for t in tensors)

    def initialize_parameters(self, *args, **kwargs):
        raise NotImplementedError(f"initialize_parameters is not implemented for {type(self).__name__}")

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        from ...autograd.grad_mode import no_grad
        for group in (self._parameters, self._buffers):
            for name, t in group.items():
                value = state_dict.get(prefix + name)
                # an uninitialized module's state_dict holds empty (0,) tensors: nothing to take a shape from
                empty = value is not None and tuple(value.shape) == (0,)
                if t is not None and is_lazy(t) and value is not None and not is_lazy(value) and not empty:
                    with no_grad():
                        t.materialize(tuple(value.shape))
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)


def _infer_parameters(module, args, kwargs=None):
    """The forward pre-hook: shape the parameters from this first input, once."""
    module.initialize_parameters(*args, **(kwargs or {}))
    if module.has_uninitialized_params():
        raise RuntimeError(f"module {type(module).__name__} has not been fully initialized")
    # by id from this module's own dicts: a deepcopied handle would point at the original's
    hook_id = module._initialize_hook.id
    module._forward_pre_hooks.pop(hook_id, None)
    module._forward_pre_hooks_with_kwargs.pop(hook_id, None)
    del module._initialize_hook
    if module.cls_to_become is not None:
        module.__class__ = module.cls_to_become
