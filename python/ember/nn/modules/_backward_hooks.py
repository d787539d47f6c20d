"""Module backward hooks (torch.nn.Module.register_full_backward_hook,
register_full_backward_pre_hook, the legacy register_backward_hook, and the
global register_module_*backward* functions).

How: for a call of a module with full hooks, the tensor inputs that require
grad go through an identity autograd.Function before forward, and the tensor
outputs through another after it. The output node's pre-hook sees the
gradients wrt the outputs first (backward pre-hooks may replace them); the
input node's post-hook sees the gradients wrt the inputs once all of them are
computed and calls hook(module, grad_input, grad_output), which may return
replacement grad_input. Positions that are not tensors needing grad get None.
When no input requires grad the hooks fire from the output node instead,
with grad_input all None (and must not replace it). Legacy hooks are plain
post-hooks on the output's grad_fn.
"""
import warnings
from collections import OrderedDict

from ... import _C
from ...autograd.function import Function
from ...utils.hooks import RemovableHandle

Tensor = _C.Tensor

_global_backward_pre_hooks = OrderedDict()
_global_backward_hooks = OrderedDict()
_global_is_full_backward_hook = None  # True / False once a global full / legacy hook is registered

_MIXED = "Cannot use both regular backward hooks and full backward hooks on a single Module. " \
         "Please use only one of them."


def _add(hooks, hook, prepend=False):
    handle = RemovableHandle(hooks)
    hooks[handle.id] = hook
    if prepend:
        hooks.move_to_end(handle.id, last=False)
    return handle


# -- global registration (torch.nn.modules.module.register_module_*) -------
def register_module_full_backward_pre_hook(hook):
    """hook(module, grad_output) for every module's backward."""
    return _add(_global_backward_pre_hooks, hook)


def register_module_full_backward_hook(hook):
    """hook(module, grad_input, grad_output) for every module's backward."""
    global _global_is_full_backward_hook
    if _global_is_full_backward_hook is False:
        raise RuntimeError("Cannot use both regular backward hooks and full backward hooks as a global Module "
                           "hook. Please use only one of them.")
    _global_is_full_backward_hook = True
    return _add(_global_backward_hooks, hook)


def register_module_backward_hook(hook):
    """Legacy global hook (deprecated in torch): a post-hook on every module output's grad_fn."""
    global _global_is_full_backward_hook
    if _global_is_full_backward_hook is True:
        raise RuntimeError("Cannot use both regular backward hooks and full backward hooks as a global Module "
                           "hook. Please use only one of them.")
    _global_is_full_backward_hook = False
    return _add(_global_backward_hooks, hook)


# -- Module methods (attached in module.py) ----------------------------------
def register_full_backward_pre_hook(self, hook, prepend=False):
    """hook(module, grad_output) -> None or a tuple replacing grad_output,
    before the gradients wrt the module's inputs are computed."""
    return _add(self._backward_pre_hooks, hook, prepend)


def register_full_backward_hook(self, hook, prepend=False):
    """hook(module, grad_input, grad_output) -> None or a tuple replacing
    grad_input, once the gradients wrt the module's inputs are computed."""
    if self._is_full_backward_hook is False:
        raise RuntimeError(_MIXED)
    self._is_full_backward_hook = True
    return _add(self._backward_hooks, hook, prepend)


def register_backward_hook(self, hook):
    """Legacy form: hook(module, grad_input, grad_output) on the grad_fn of the
    module's (first) output only, so grad_input is that node's inputs' gradients."""
    if self._is_full_backward_hook is True:
        raise RuntimeError(_MIXED)
    self._is_full_backward_hook = False
    return _add(self._backward_hooks, hook)


def _get_backward_hooks(module):
    """(full hooks, legacy hooks, pre-hooks) that apply to this module's calls."""
    full, legacy = [], []
    if _global_backward_hooks:
        (full if _global_is_full_backward_hook else legacy).extend(_global_backward_hooks.values())
    if module._backward_hooks:
        (full if module._is_full_backward_hook else legacy).extend(module._backward_hooks.values())
    pre = list(_global_backward_pre_hooks.values()) + list(module._backward_pre_hooks.values())
    return full, legacy, pre


def has_backward_hooks(module):
    return bool(module._backward_hooks or module._backward_pre_hooks or _global_backward_hooks
                or _global_backward_pre_hooks)


# -- the per-call machinery ----------------------------------------------------
class BackwardHookFunction(Function):
    """Identity on the tensors given; only its graph node matters (torch's grad_fn
    for these is also named BackwardHookFunctionBackward)."""

    @staticmethod
    def forward(ctx, *tensors):
        return tensors

    @staticmethod
    def backward(ctx, *grads):
        return grads


def _pack(indices, values, size):
    out = [None] * size
    for i, v in zip(indices, values):
        out[i] = v
    return tuple(out)


class BackwardHook:
    """The hooks of one module call: wraps its inputs and outputs."""

    def __init__(self, module, hooks, pre_hooks):
        self.module = module
        self.hooks = hooks
        self.pre_hooks = pre_hooks
        self.grad_outputs = None
        self.n_inputs = 0
        self.input_index = None  # positions of the inputs passed through the input node
        self.input_zeros = {}  # other floating tensor inputs: their grad_input is zeros (as torch's)
        self.n_outputs = 0
        self.output_index = None

    @staticmethod
    def _through_identity(args):
        """(new args, positions wrapped, grad_fn) with the tensors needing grad passed through
        one BackwardHookFunction node, or (args, None, None) when there are none / grad is off."""
        index = [i for i, a in enumerate(args) if isinstance(a, Tensor) and a.requires_grad]
        if not index or not _C.is_grad_enabled():
            return args, None, None
        new = BackwardHookFunction.apply(*(args[i] for i in index))
        out = list(args)
        for i, t in zip(index, new):
            out[i] = t
        return tuple(out), index, new[0].grad_fn

    def setup_input_hook(self, args):
        self.n_inputs = len(args)
        new_args, self.input_index, fn = self._through_identity(args)
        if fn is not None:
            fn.register_hook(self._input_hook)
            self.input_zeros = {i: (tuple(a.shape), a.dtype, a.device) for i, a in enumerate(args)
                                if isinstance(a, Tensor) and not a.requires_grad and a.is_floating_point()}
        return new_args

    def setup_output_hook(self, result):
        is_tuple = isinstance(result, tuple)
        outs = result if is_tuple else (result,)
        self.n_outputs = len(outs)
        outs, self.output_index, fn = self._through_identity(outs)
        if fn is None:
            return result
        fn.register_prehook(self._output_hook)
        return outs if is_tuple else outs[0]

    def _output_hook(self, grads):
        """Pre-hook of the output node: the gradients wrt the module's outputs."""
        grad_output = _pack(self.output_index, grads, self.n_outputs)
        for hook in self.pre_hooks:
            res = hook(self.module, grad_output)
            if res is None:
                continue
            res = res if isinstance(res, tuple) else (res,)
            if len(res) != len(grad_output):
                raise RuntimeError(f"Backward pre hook returned an invalid number of grad_output, got {len(res)}, "
                                   f"but expected {len(grad_output)}")
            grad_output = res
        self.grad_outputs = grad_output
        if self.input_index is None and self.hooks:
            # nothing upstream will fire: call the hooks now, with no input gradients
            warnings.warn("Full backward hook is firing when gradients are computed with respect to module "
                          "outputs since no inputs require gradients. See https://docs.pytorch.org/docs/main/"
                          "generated/torch.nn.Module.html#torch.nn.Module.register_full_backward_hook for more "
                          "details.", stacklevel=5)
            grad_input = (None,) * self.n_inputs
            for hook in self.hooks:
                res = hook(self.module, grad_input, self.grad_outputs)
                if res is not None and not (isinstance(res, tuple) and all(r is None for r in res)):
                    raise RuntimeError("Backward hook for Modules where no input requires gradient should "
                                       "always return None or None for all gradients.")
            self.grad_outputs = None
        return tuple(grad_output[i] for i in self.output_index)

    def _input_hook(self, grad_inputs, _grad_outputs):
        """Post-hook of the input node: the gradients wrt the module's inputs."""
        grad_input = list(_pack(self.input_index, grad_inputs, self.n_inputs))
        for i, (shape, dtype, device) in self.input_zeros.items():
            grad_input[i] = _C.zeros(shape, dtype=dtype, device=device)
        grad_input = tuple(grad_input)
        for hook in self.hooks:
            res = hook(self.module, grad_input, self.grad_outputs)
            if res is None:
                continue
            res = res if isinstance(res, tuple) else (res,)
            if len(res) != len(grad_input):
                raise RuntimeError(f"Backward hook returned an invalid number of grad_input, got {len(res)}, "
                                   f"but expected {len(grad_input)}")
            grad_input = res
        self.grad_outputs = None
        return tuple(grad_input[i] for i in self.input_index)


def setup_legacy_hooks(module, hooks, args, result):
    """Legacy hooks: post-hooks on the grad_fn of the first tensor found in the result."""
    var = result
    while not isinstance(var, Tensor):
        if isinstance(var, dict):
            var = next((v for v in var.values() if isinstance(v, Tensor)), None)
        elif isinstance(var, (list, tuple)) and var:
            var = var[0]
        else:
            return
    fn = var.grad_fn
    if fn is None:
        return
    for hook in hooks:
        fn.register_hook(_ModuleHook(hook, module))
    _warn_partial_legacy_hook(args, result, fn)


_LEGACY = " is deprecated and will be removed in future versions. This hook will be missing some "
_USE_FULL = " Please use register_full_backward_hook to get the documented behavior."


def _warn_partial_legacy_hook(inputs, result, fn):
    """The legacy hook only sees one node: say so (FutureWarning, as torch) when
    that node is not the whole of the module's forward."""
    if not isinstance(result, Tensor):
        if not (isinstance(result, tuple) and all(isinstance(r, Tensor) for r in result)):
            warnings.warn("Using non-full backward hooks on a Module that does not return a single Tensor or a "
                          "tuple of Tensors" + _LEGACY + "of the grad_output." + _USE_FULL, FutureWarning,
                          stacklevel=4)
            return
    else:
        result = (result,)
    if not all(isinstance(i, Tensor) for i in inputs):
        warnings.warn("Using non-full backward hooks on a Module that does not take as input a single Tensor or a "
                      "tuple of Tensors" + _LEGACY + "of the grad_input." + _USE_FULL, FutureWarning, stacklevel=4)
        return
    out_fns = {id(r.grad_fn): r.grad_fn for r in result if r.grad_fn is not None}
    if not out_fns or (len(out_fns) == 1 and id(fn) not in out_fns):
        warnings.warn("Using a non-full backward hook when outputs are nested in python data structure" + _LEGACY
                      + "grad_output.", FutureWarning, stacklevel=4)
    elif len(out_fns) > 1:
        warnings.warn("Using a non-full backward hook when outputs are generated by different autograd Nodes"
                      + _LEGACY + "grad_output." + _USE_FULL, FutureWarning, stacklevel=4)
    else:
        in_fns = {id(i.grad_fn) for i in inputs if i.grad_fn is not None}
        next_fns = {id(n) for n, _ in fn.next_functions}  # (None too: an input needing no grad)
        if in_fns != next_fns:
            warnings.warn("Using a non-full backward hook when the forward contains multiple autograd Nodes"
                          + _LEGACY + "grad_input." + _USE_FULL, FutureWarning, stacklevel=4)


class _ModuleHook:
    """A legacy module hook as a node post-hook: node (grad_inputs, grad_outputs) -> hook(module, ...)."""

    def __init__(self, hook, module):
        self.hook, self.module = hook, module

    def __call__(self, grad_inputs, grad_outputs):
        return self.hook(self.module, grad_inputs, grad_outputs)
