"""ember.utils.checkpoint: activation checkpointing (torch.utils.checkpoint),
as Hugging Face models' gradient_checkpointing_enable() calls it.

checkpoint(fn, *args) runs fn without building its graph, so none of its
intermediate values are kept; the output's node keeps only fn and its
inputs. When the backward pass reaches it, it runs fn again with grad on,
from the same random-number state (preserve_rng_state) and under the same
autocast, and backpropagates the output's gradient through that fresh
graph: the inputs get their gradients from its result, and the parameters
fn uses accumulate theirs as that inner backward reaches them.

use_reentrant=False (torch's recommended mode) also gives the parameters
their gradients when no input requires grad: the node is anchored in the
graph by a private tensor that requires grad. Both modes accumulate into
.grad, so like torch's reentrant mode neither works with autograd.grad()."""
import contextlib
import warnings

from .. import _C
from ..autograd.function import Function
from ..autograd.grad_mode import enable_grad, no_grad

__all__ = ["checkpoint", "checkpoint_sequential"]


def _cuda_devices(tensors):
    return sorted({t.device.index or 0 for t in tensors if t.device.type == "cuda"})


def _rng_state(devices):
    from .. import cuda, random
    return random.get_rng_state(), [cuda.get_rng_state(d) for d in devices]


def _set_rng_state(state, devices):
    from .. import cuda, random
    cpu, gpu = state
    random.set_rng_state(cpu)
    for d, s in zip(devices, gpu):
        cuda.set_rng_state(s, d)


def _autocast_state():
    return [(dev, _C._get_autocast(dev)) for dev in ("cpu", "cuda")]


@contextlib.contextmanager
def _autocast_as(state):
    from ..amp import autocast
    with contextlib.ExitStack() as stack:
        for dev, (enabled, dtype) in state:
            if enabled:
                stack.enter_context(autocast(dev, dtype=dtype))
        yield


class CheckpointFunction(Function):
    @staticmethod
    def forward(ctx, run_function, preserve_rng_state, anchor, *args):
        ctx.run_function = run_function
        ctx.preserve = preserve_rng_state
        ctx.autocast = _autocast_state()
        tensors = [a for a in args if isinstance(a, _C.Tensor)]
        ctx.devices = _cuda_devices(tensors)
        if preserve_rng_state:
            ctx.rng = _rng_state(ctx.devices)
        ctx.tensor_index = [i for i, a in enumerate(args) if isinstance(a, _C.Tensor)]
        ctx.others = [None if isinstance(a, _C.Tensor) else a for a in args]
        ctx.save_for_backward(*tensors)
        with no_grad():
            return run_function(*args)

    @staticmethod
    def backward(ctx, *grads):
        args = list(ctx.others)
        for i, t in zip(ctx.tensor_index, ctx.saved_tensors):
            args[i] = t.detach().requires_grad_(t.requires_grad)
        rng_now = _rng_state(ctx.devices) if ctx.preserve else None
        try:
            if ctx.preserve:
                _set_rng_state(ctx.rng, ctx.devices)
            with enable_grad(), _autocast_as(ctx.autocast):
                outputs = ctx.run_function(*args)
        finally:
            if ctx.preserve:
                _set_rng_state(rng_now, ctx.devices)
        if isinstance(outputs, _C.Tensor):
            outputs = (outputs,)
        pairs = [(o, g) for o, g in zip(outputs, grads)
                 if isinstance(o, _C.Tensor) and o.requires_grad and g is not None]
        if not pairs:
            raise RuntimeError("none of output has requires_grad=True, this checkpoint() is not necessary")
        from ..autograd import backward
        backward([o for o, _ in pairs], [g for _, g in pairs])
        return (None, None, None) + tuple(a.grad if isinstance(a, _C.Tensor) else None for a in args)


def checkpoint(function, *args, use_reentrant=None, preserve_rng_state=True, context_fn=None,
               determinism_check="default", debug=False, **kwargs):
    """function(*args, **kwargs), recomputed in the backward pass instead of
    keeping its intermediate values."""
    if use_reentrant is None:
        warnings.warn("torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly. In a "
                      "future release, calling checkpoint without use_reentrant will raise an exception. "
                      "use_reentrant=False is recommended, but if you need to preserve the current default "
                      "behavior, you can pass use_reentrant=True. Refer to docs for more details on the "
                      "differences between the two variants.", stacklevel=2)
        use_reentrant = True
    if use_reentrant and (context_fn is not None or debug):
        raise ValueError("Passing `context_fn` or `debug` is only supported when use_reentrant=False.")
    if context_fn is not None or debug:
        raise NotImplementedError("ember's checkpoint does not take context_fn or debug")
    if kwargs:
        if use_reentrant:
            raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
        fn = function
        function = lambda *a: fn(*a, **kwargs)  # noqa: E731
    if use_reentrant:
        if _C.is_grad_enabled() and not any(isinstance(a, _C.Tensor) and a.requires_grad for a in args):
            warnings.warn("None of the inputs have requires_grad=True. Gradients will be None", stacklevel=2)
        anchor = None
    else:  # the node stays in the graph for the parameters' sake
        anchor = _C.empty(0, requires_grad=True) if _C.is_grad_enabled() else None
    return CheckpointFunction.apply(function, preserve_rng_state, anchor, *args)


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    """Run a Sequential (or list of modules) in `segments` checkpointed
    pieces; the last piece runs normally."""
    if use_reentrant is None:
        warnings.warn("torch.utils.checkpoint.checkpoint_sequential: the use_reentrant parameter should be "
                      "passed explicitly. use_reentrant=False is recommended.", stacklevel=2)
        use_reentrant = True
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    from ..nn import Sequential
    if isinstance(functions, Sequential):
        functions = list(functions.children())
    functions = list(functions)

    def run(start, end):
        def forward(x):
            for j in range(start, end + 1):
                x = functions[j](x)
            return x
        return forward

    size = len(functions) // segments
    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(run(start, end), input, use_reentrant=use_reentrant)
    return run(end + 1, len(functions) - 1)(input)
