"""ember.autograd: reverse-mode differentiation. The graph and the engine
are in C (csrc/autograd/); this module is the Python API torch users call:
backward, grad, grad modes, Function, gradcheck."""
from .. import _C
from .function import Function, FunctionCtx, once_differentiable
from .grad_mode import (no_grad, enable_grad, set_grad_enabled, inference_mode, is_grad_enabled,
                        is_inference_mode_enabled, set_detect_anomaly, detect_anomaly)
from .gradcheck import gradcheck, gradgradcheck, GradcheckError
from . import graph

Variable = _C.Tensor  # the legacy name: tensors are variables


def _tensor_tuple(x, what):
    if isinstance(x, _C.Tensor):
        return (x,)
    if x is None:
        return None
    x = tuple(x)
    for t in x:
        if not isinstance(t, _C.Tensor):
            raise TypeError(f"{what} must be Tensors, got {type(t).__name__}")
    return x


def _grads_tuple(grads, n):
    if grads is None:
        return (None,) * n
    if isinstance(grads, _C.Tensor):
        grads = (grads,)
    grads = tuple(grads)
    if len(grads) != n:
        raise RuntimeError(f"grad can be implicitly created only for scalar outputs; got {len(grads)} "
                           f"gradients for {n} outputs")
    return grads


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, grad_variables=None,
             inputs=None):
    """Accumulate the gradients of `tensors` into the .grad of the leaves (or of `inputs`)."""
    if grad_variables is not None:
        grad_tensors = grad_variables
    tensors = _tensor_tuple(tensors, "tensors")
    grads = _grads_tuple(grad_tensors, len(tensors))
    if retain_graph is None:
        retain_graph = create_graph
    inputs = _tensor_tuple(inputs, "inputs")
    if inputs is not None and len(inputs) == 0:
        raise RuntimeError("'inputs' argument to backward() cannot be empty.")
    _C._run_backward(tensors, grads, bool(retain_graph), bool(create_graph), inputs, True, True)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, only_inputs=True,
         allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """Gradients of `outputs` with respect to `inputs`, returned (not accumulated)."""
    if is_grads_batched:
        raise NotImplementedError("is_grads_batched=True is not supported")
    outputs = _tensor_tuple(outputs, "outputs")
    inputs = _tensor_tuple(inputs, "inputs")
    grads = _grads_tuple(grad_outputs, len(outputs))
    if retain_graph is None:
        retain_graph = create_graph
    if allow_unused is None:
        allow_unused = materialize_grads
    if materialize_grads and not allow_unused:
        raise ValueError("Expected allow_unused to be True or not passed when materialize_grads=True, "
                         "but got: allow_unused=False.")
    result = _C._run_backward(outputs, grads, bool(retain_graph), bool(create_graph), inputs,
                              bool(allow_unused), False)
    if materialize_grads:
        result = tuple(g if g is not None else _C.zeros_like(x) for g, x in zip(result, inputs))
    return result


from . import functional  # noqa: E402,F401  (vjp, jvp, jacobian, hessian, hvp, vhp; uses grad above)


def __getattr__(name):
    """ember.autograd.profiler, the older profiler API, on first use (import stays fast)."""
    if name == "profiler":
        import importlib
        return importlib.import_module(".profiler", __name__)
    raise AttributeError(f"module 'ember.autograd' has no attribute '{name}'")
