"""ember.autograd.Function: ops defined in Python with a forward and a
backward, mixing freely with C ops in the graph. The engine calls back into
FunctionCtx._engine_backward with the gradients of the outputs."""
import functools

from .. import _C
from .grad_mode import no_grad

_FREED = ("Trying to backward through the graph a second time (or directly access saved tensors "
          "after they have already been freed). Saved intermediate values of the graph are freed "
          "when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
          "backward through the graph a second time or if you need to access saved tensors after "
          "calling backward.")


class _Packed:
    """A tensor saved under saved_tensors_hooks: pack_hook's result and its unpack_hook."""
    __slots__ = ("packed", "unpack")

    def __init__(self, packed, unpack):
        self.packed, self.unpack = packed, unpack

    def unpacked(self):
        t = self.unpack(self.packed)
        if not isinstance(t, _C.Tensor):
            raise TypeError("Output of saved tensor unpack_hook expected to be a Tensor but got result of type "
                            f"{type(t).__name__}")
        return t


class FunctionCtx:
    """The `ctx` passed to forward/backward."""

    def __init__(self):
        self._saved = ()
        self._saved_versions = ()
        self._released = False
        self._non_differentiable = ()
        self._dirty = ()
        self._materialize_grads = True
        self.needs_input_grad = ()

    def save_for_backward(self, *tensors):
        for t in tensors:
            if t is not None and not isinstance(t, _C.Tensor):
                raise TypeError(f"save_for_backward can only save variables, but argument {tensors.index(t)} "
                                f"is of type {type(t).__name__}")
        hooks = _C._saved_tensors_hooks_current()
        if hooks is not None:  # saved_tensors_hooks: keep what pack makes of each tensor
            pack, unpack = hooks
            self._saved = tuple(None if t is None else _Packed(pack(t), unpack) for t in tensors)
            self._saved_versions = tuple(None for _ in tensors)
            return
        self._saved = tensors
        self._saved_versions = tuple(t._version if t is not None else None for t in tensors)

    @property
    def saved_tensors(self):
        if self._released:
            raise RuntimeError(_FREED)
        if any(type(t) is _Packed for t in self._saved):
            return tuple(t.unpacked() if type(t) is _Packed else t for t in self._saved)
        for i, (t, v) in enumerate(zip(self._saved, self._saved_versions)):
            if t is not None and t._version != v:
                raise RuntimeError(
                    "one of the variables needed for gradient computation has been modified by an "
                    f"inplace operation: [{t.type()} {list(t.shape)}], is at version {t._version}; "
                    f"expected version {v} instead. (saved_tensors[{i}] of {self._name})")
        return self._saved

    def mark_non_differentiable(self, *args):
        self._non_differentiable = args

    def mark_dirty(self, *args):
        self._dirty = args

    def set_materialize_grads(self, value):
        self._materialize_grads = bool(value)

    def _release_saved(self):
        self._saved = ()
        self._released = True

    def _engine_backward(self, grads):
        if self._materialize_grads:
            grads = tuple(g if g is not None else _C.zeros(shape, dtype=dtype)
                          for g, (shape, dtype) in zip(grads, self._output_meta))
        result = self._cls.backward(self, *grads)
        if not isinstance(result, tuple):
            result = (result,)
        n = len(self._is_tensor)
        if len(result) != n:
            if len(result) > n and all(r is None for r in result[n:]):
                result = result[:n]
            else:
                raise RuntimeError(f"function {self._name} returned an incorrect number of gradients "
                                   f"(expected {n}, got {len(result)})")
        out = []
        for g, is_t in zip(result, self._is_tensor):
            if not is_t:
                continue
            if g is not None and not isinstance(g, _C.Tensor):
                raise TypeError(f"function {self._name} returned a gradient of type {type(g).__name__}; "
                                "expected a Tensor or None")
            out.append(g)
        return tuple(out)


class Function:
    """Subclass with static forward(ctx, *args) and backward(ctx, *grads)
    (or forward(*args) plus setup_context(ctx, inputs, output)); call .apply."""

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def setup_context(ctx, inputs, output):
        raise NotImplementedError("setup_context is not overridden")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("You must implement either the backward or vjp method for your custom "
                                  "autograd.Function to use it with backward mode AD.")

    vjp = backward

    @classmethod
    def apply(cls, *args, **kwargs):
        ctx = FunctionCtx()
        ctx._cls = cls
        ctx._name = cls.__name__ + "Backward"
        ctx._is_tensor = tuple(isinstance(a, _C.Tensor) for a in args)
        ctx.needs_input_grad = tuple(isinstance(a, _C.Tensor) and a.requires_grad for a in args)
        new_style = cls.setup_context is not Function.setup_context
        with no_grad():
            outputs = cls.forward(*args, **kwargs) if new_style else cls.forward(ctx, *args, **kwargs)
        if new_style:
            cls.setup_context(ctx, args, outputs)
        single = not isinstance(outputs, tuple)
        outs = (outputs,) if single else tuple(outputs)
        if _C.is_grad_enabled() and any(ctx.needs_input_grad):
            # an input returned as an output gets a fresh alias to carry the new grad_fn
            as_is = tuple(isinstance(o, _C.Tensor) and any(o is a for a in args) and
                          all(o is not d for d in ctx._dirty) for o in outs)
            outs = tuple(o.detach() if a else o for o, a in zip(outs, as_is))
            # outputs torch treats as views made inside the Function: writing into them in place
            # is an error (checked in csrc/autograd/record.c)
            ctx._view_outputs = tuple(i for i, (o, a) in enumerate(zip(outs, as_is))
                                      if a or (isinstance(o, _C.Tensor) and o._base is not None))
            ctx._output_meta = tuple((tuple(o.shape), o.dtype) if isinstance(o, _C.Tensor) else ((), None)
                                     for o in outs)
            _C._python_node(ctx, ctx._name, tuple(args), outs, ctx._non_differentiable)
        return outs[0] if single else outs


def once_differentiable(fn):
    """Decorator for backward: it runs without recording a graph."""
    @functools.wraps(fn)
    def wrapper(ctx, *args):
        with no_grad():
            return fn(ctx, *args)
    return wrapper
