"""torch.library for ember: operators defined in Python.

`custom_op("ns::name", fn, mutates_args=...)` makes an operator: calling it (or
`ember.ops.ns.name`) runs fn, or the kernel registered for the inputs' device
type with `register_kernel`; inputs on the meta device run the `register_fake`
function (shapes and dtypes only). `register_autograd(op, backward,
setup_context=...)` gives it a derivative: the call is recorded as one node of
the graph, whose backward is the given function (as a Python autograd.Function
would be). Without a registered derivative, backpropagating through the op
raises, as in torch. The op's body always runs without recording a graph."""
import functools

from . import _C
from .autograd.function import Function
from .autograd.grad_mode import no_grad

__all__ = ["custom_op", "CustomOpDef", "register_fake", "register_autograd", "register_kernel", "impl_abstract",
           "get_ctx"]

_OPS = {}  # "ns::name" -> CustomOpDef
# fakes registered for ops not (yet) defined. torch raises there, but packages
# whose compiled ops ember cannot load register fakes for them at import
# (torchvision's nms): kept, and given to the op if custom_op defines it later
_PENDING_FAKES = {}


def _qualname(name):
    if not isinstance(name, str) or name.count("::") != 1 or not all(name.split("::")):
        raise ValueError(f"Expected the operator name to be of the form \"namespace::name\", got {name!r}")
    return name


def _tensors_in(args):
    for a in args:
        if isinstance(a, _C.Tensor):
            yield a
        elif isinstance(a, (list, tuple)):
            yield from (x for x in a if isinstance(x, _C.Tensor))


class CustomOpDef:
    """A Python operator: a default implementation, per-device kernels, a fake
    (meta) implementation and an optional derivative."""

    def __init__(self, qualname, fn, mutates_args, device_types=None, schema=None):
        self._qualname = qualname
        self._namespace, self._name = qualname.split("::")
        self._init_fn = fn
        self._schema = schema
        self._mutates_args = mutates_args
        self._kernels = {}
        if device_types is not None:
            for d in ([device_types] if isinstance(device_types, str) else device_types):
                self._kernels[d] = fn
            self._init_fn = None  # only the listed device types have a kernel
        self._fake_fn = None
        self._backward_fn = None
        self._setup_context_fn = None
        self._autograd_fn = None
        functools.update_wrapper(self, fn)

    def __repr__(self):
        return f"<CustomOpDef({self._qualname})>"

    # -- registrations
    def register_kernel(self, device_types, fn=None):
        def inner(f):
            for d in ([device_types] if isinstance(device_types, str) or device_types is None else device_types):
                self._kernels[d if d is not None else "default"] = f
            return f
        return inner if fn is None else inner(fn)

    def register_fake(self, fn):
        self._fake_fn = fn
        return fn

    def register_autograd(self, backward, *, setup_context=None):
        if not callable(backward):
            raise TypeError(f"register_autograd: expected backward to be callable, got {type(backward).__name__}")
        self._backward_fn = backward
        self._setup_context_fn = setup_context
        self._autograd_fn = None

    # -- calling
    def _kernel_for(self, args, kwargs):
        tensors = list(_tensors_in(list(args) + list(kwargs.values())))
        device_type = tensors[0].device.type if tensors else "cpu"
        if device_type == "meta":
            if self._fake_fn is None:
                raise RuntimeError(f"{self._qualname}: there is no fake (meta) implementation; register one "
                                   "with torch.library.register_fake")
            return self._fake_fn
        fn = self._kernels.get(device_type) or self._kernels.get("default") or self._init_fn
        if fn is None:
            raise NotImplementedError(f"{self._qualname}: no kernel registered for device type '{device_type}' "
                                      f"(it has kernels for {sorted(self._kernels)})")
        return fn

    def _make_autograd_fn(self):
        op = self
        names = (self._name + "Backward",)

        def forward(*args):
            return op._kernel_for(args, {})(*args)

        def setup_context(ctx, inputs, output):
            if op._setup_context_fn is not None:
                op._setup_context_fn(ctx, inputs, output)

        def backward(ctx, *grads):
            if op._backward_fn is None:
                raise RuntimeError(f"{op._qualname}: Trying to backward through an operator that has no autograd "
                                   "formula. Register one with torch.library.register_autograd.")
            result = op._backward_fn(ctx, *grads)
            return result if isinstance(result, tuple) else (result,)

        return type(names[0], (Function,), {"forward": staticmethod(forward),
                                              "setup_context": staticmethod(setup_context),
                                              "backward": staticmethod(backward)})

    def __call__(self, *args, **kwargs):
        tensors = list(_tensors_in(list(args) + list(kwargs.values())))
        if _C.is_grad_enabled() and any(t.requires_grad for t in tensors):
            if kwargs:
                raise RuntimeError(f"{self._qualname}: pass the arguments of an op with a derivative positionally")
            if self._autograd_fn is None:
                self._autograd_fn = self._make_autograd_fn()
            return self._autograd_fn.apply(*args)
        with no_grad():
            return self._kernel_for(args, kwargs)(*args, **kwargs)


def _lookup(op):
    if isinstance(op, CustomOpDef):
        return op
    name = _qualname(op)
    if name not in _OPS:
        raise RuntimeError(f"operator {name} does not exist: define it first with torch.library.custom_op")
    return _OPS[name]


def custom_op(name, fn=None, /, *, mutates_args, device_types=None, schema=None, tags=None):
    """Define the operator `name` ("namespace::name") implemented by fn;
    used directly or as a decorator. mutates_args names the arguments fn
    writes into ("unknown" if it may write any); () when none."""
    name = _qualname(name)
    if not (mutates_args == "unknown" or isinstance(mutates_args, (tuple, list, set, frozenset))):
        raise ValueError(f"custom_op: mutates_args must be a sequence of argument names or \"unknown\", "
                         f"got {mutates_args!r}")

    def inner(f):
        if not callable(f):
            raise TypeError(f"custom_op: expected a function, got {type(f).__name__}")
        op = CustomOpDef(name, f, mutates_args, device_types, schema)
        if name in _PENDING_FAKES:
            op.register_fake(_PENDING_FAKES.pop(name))
        _OPS[name] = op
        return op
    return inner if fn is None else inner(fn)


def register_fake(op, func=None, /, *, lib=None, _stacklevel=1):
    """The shape/dtype-only implementation of op, run for meta inputs. An op
    not defined yet keeps the fake for when it is (see _PENDING_FAKES)."""
    if isinstance(op, str) and _qualname(op) not in _OPS:
        def pending(f):
            _PENDING_FAKES[op] = f
            return f
        return pending if func is None else pending(func)
    target = _lookup(op)

    def inner(f):
        target.register_fake(f)
        return f
    return inner if func is None else inner(func)


impl_abstract = register_fake


def register_autograd(op, backward, /, *, setup_context=None, lib=None):
    """backward(ctx, *grads) -> a gradient per input; setup_context(ctx, inputs, output) saves what it needs."""
    _lookup(op).register_autograd(backward, setup_context=setup_context)


def register_kernel(op, device_types, func=None, /, *, lib=None):
    return _lookup(op).register_kernel(device_types, func)


def get_ctx():
    raise RuntimeError("torch.library.get_ctx() is only valid inside a fake implementation of a dynamic-shape "
                       "operator, which ember's fake tensors do not have")


class _OpNamespace:
    """ember.ops.<namespace>: the operators defined with custom_op in it."""

    def __init__(self, name):
        self._name = name

    def __getattr__(self, op):
        if op.startswith("__"):
            raise AttributeError(op)
        found = _OPS.get(f"{self._name}::{op}")
        if found is None:
            raise AttributeError(f"'_OpNamespace' '{self._name}' object has no attribute '{op}'")
        return found

    def __repr__(self):
        return f"<ember.ops.{self._name}>"


class _Ops:
    """ember.ops (torch.ops): ops.<namespace>.<name> finds a custom op; a name
    nothing defined raises AttributeError, as torch's does for an op no
    loaded library registered."""

    @staticmethod
    def load_library(path):
        """torch.ops.load_library loads a compiled extension into libtorch's
        dispatcher. ember has no libtorch: such libraries cannot load, and
        this raises OSError (what torch raises for a library that fails to
        load, so callers' fallbacks run)."""
        raise OSError(f"torch.ops.load_library('{path}'): ember cannot load compiled PyTorch extensions (they link "
                      "libtorch, which ember replaces); the operators it would register are not available")

    def __getattr__(self, namespace):
        if namespace.startswith("__"):
            raise AttributeError(namespace)
        return _OpNamespace(namespace)


ops = _Ops()
