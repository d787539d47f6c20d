"""torch.distributed.fsdp.wrap: auto-wrap policies and the wrap/enable_wrap
context, with torch's names and semantics.

A policy is called as policy(module=, recurse=, nonwrapped_numel=): with
recurse=True it answers whether to look inside `module` for units, with
recurse=False whether to wrap `module` itself, whose parameters not yet in a
unit below it number `nonwrapped_numel`. Wrapping goes bottom-up, so a unit's
parameters are those not already owned by a unit inside it."""
import contextlib

from ember import nn

__all__ = ["always_wrap_policy", "lambda_auto_wrap_policy", "transformer_auto_wrap_policy",
           "size_based_auto_wrap_policy", "enable_wrap", "wrap", "CustomPolicy", "ModuleWrapPolicy"]


def always_wrap_policy(*args, **kwargs):
    return True


def _module_wrap_policy(module, recurse, nonwrapped_numel, module_classes):
    if recurse:
        return True
    return isinstance(module, tuple(module_classes))


def lambda_auto_wrap_policy(module, recurse, nonwrapped_numel, lambda_fn):
    if recurse:
        return True
    return lambda_fn(module)


def transformer_auto_wrap_policy(module, recurse, nonwrapped_numel, transformer_layer_cls):
    return _module_wrap_policy(module, recurse, nonwrapped_numel, transformer_layer_cls)


def size_based_auto_wrap_policy(module, recurse, nonwrapped_numel, min_num_params=int(1e8),
                                force_leaf_modules=None, exclude_wrap_modules=None):
    force_leaf = size_based_auto_wrap_policy.FORCE_LEAF_MODULES if force_leaf_modules is None \
        else force_leaf_modules
    exclude = size_based_auto_wrap_policy.EXCLUDE_WRAP_MODULES if exclude_wrap_modules is None \
        else exclude_wrap_modules
    if recurse:
        return not isinstance(module, tuple(force_leaf))
    return nonwrapped_numel >= min_num_params and not isinstance(module, tuple(exclude))


size_based_auto_wrap_policy.EXCLUDE_WRAP_MODULES = {nn.ModuleList, nn.ModuleDict}
size_based_auto_wrap_policy.FORCE_LEAF_MODULES = {nn.MultiheadAttention}


class _Policy:
    """The object form of a policy (torch's ModuleWrapPolicy, CustomPolicy)."""

    def __call__(self, module, recurse, *args, **kwargs):
        raise NotImplementedError


class ModuleWrapPolicy(_Policy):
    """Wrap every module that is an instance of one of `module_classes`."""

    def __init__(self, module_classes):
        self._module_classes = set(module_classes)
        self._module_classes_str = str(self._module_classes)

    def __call__(self, module, recurse, *args, **kwargs):
        return _module_wrap_policy(module, recurse, None, self._module_classes)

    def __repr__(self):
        return super().__repr__() + f"({self._module_classes_str})"


class CustomPolicy(_Policy):
    """Wrap every module for which lambda_fn(module) is truthy (a dict of
    keyword overrides for that unit, or True)."""

    def __init__(self, lambda_fn):
        self._lambda_fn = lambda_fn

    def __call__(self, module, recurse, *args, **kwargs):
        return True if recurse else bool(self._lambda_fn(module))

    def _overrides(self, module):
        res = self._lambda_fn(module)
        return res if isinstance(res, dict) else {}


def _run_policy(policy, module, recurse, nonwrapped_numel):
    return policy(module=module, recurse=recurse, nonwrapped_numel=nonwrapped_numel)


def _recursive_wrap(module, auto_wrap_policy, wrapper_cls, ignored_module_ids, ignored_param_ids,
                    only_wrap_children=False, **kwargs):
    """(module or its wrapper, number of parameters wrapped) after wrapping
    bottom-up every submodule the policy selects."""
    if isinstance(module, wrapper_cls):
        return module, 0
    nonwrapped_numel = sum(p.numel() for p in module.parameters() if id(p) not in ignored_param_ids)
    if not _run_policy(auto_wrap_policy, module, True, nonwrapped_numel):
        return module, 0
    total_wrapped = 0
    for name, child in list(module.named_children()):
        if id(child) in ignored_module_ids:
            continue
        wrapped, n = _recursive_wrap(child, auto_wrap_policy, wrapper_cls, ignored_module_ids,
                                     ignored_param_ids, **kwargs)
        setattr(module, name, wrapped)
        total_wrapped += n
    remainder = nonwrapped_numel - total_wrapped
    if not only_wrap_children and _run_policy(auto_wrap_policy, module, False, remainder):
        overrides = auto_wrap_policy._overrides(module) if isinstance(auto_wrap_policy, CustomPolicy) else {}
        return wrapper_cls(module, **{**kwargs, **overrides}), nonwrapped_numel
    return module, total_wrapped


class _ConfigAutoWrap:
    """The state of enable_wrap(): the wrapper class and its keyword arguments."""
    in_autowrap_context = False
    wrapper_cls = None
    kwargs = {}


@contextlib.contextmanager
def enable_wrap(*, wrapper_cls, **wrapper_kwargs):
    """Inside, wrap(module) wraps with wrapper_cls(module, **wrapper_kwargs)."""
    if _ConfigAutoWrap.in_autowrap_context:
        raise NotImplementedError("You are already within an autowrap context and we currently do not "
                                  "supported nested autowrap.")
    _ConfigAutoWrap.in_autowrap_context = True
    _ConfigAutoWrap.wrapper_cls = wrapper_cls
    _ConfigAutoWrap.kwargs = dict(wrapper_kwargs)
    try:
        yield
    finally:
        _ConfigAutoWrap.in_autowrap_context = False
        _ConfigAutoWrap.wrapper_cls = None
        _ConfigAutoWrap.kwargs = {}


def wrap(module, **wrap_overrides):
    """module wrapped with the enable_wrap() context's wrapper (overrides win);
    outside such a context, module unchanged."""
    if not _ConfigAutoWrap.in_autowrap_context:
        return module
    kwargs = {**_ConfigAutoWrap.kwargs, **wrap_overrides}
    return _ConfigAutoWrap.wrapper_cls(module, **kwargs)


