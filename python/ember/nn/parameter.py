"""nn.Parameter and nn.Buffer: tensors a Module registers when they are
assigned as attributes. A Parameter is a Tensor subclass sharing its data's
storage; ops on it return plain Tensors (as in torch)."""
from .. import _C

Tensor = _C.Tensor


class Parameter(Tensor):
    """A tensor that is a module parameter: requires grad by default and is
    listed by Module.parameters() when assigned as an attribute."""

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            data = _C.empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter(): data must be a Tensor, got {type(data).__name__}")
        return Tensor._make_subclass(cls, data.detach(), requires_grad)

    # ops on a Parameter are ops on its data: plain Tensors out (Note [torch function])
    __torch_function__ = _C._disabled_torch_function_impl

    def __init__(self, data=None, requires_grad=True):
        pass  # everything happened in __new__ (Tensor.__init__ must not run again)

    def __repr__(self):
        return "Parameter containing:\n" + Tensor.__repr__(self)

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        new = type(self)(self.detach().clone(), self.requires_grad)
        if self.grad is not None:
            new.grad = self.grad.clone()
        memo[id(self)] = new
        return new

    def __reduce_ex__(self, protocol):
        return (_rebuild_parameter, (self.detach(), self.requires_grad))


def _rebuild_parameter(data, requires_grad):
    return Parameter(data, requires_grad)


class Buffer(Tensor):
    """Marks a tensor as a buffer when assigned to a Module attribute
    (torch.nn.Buffer): `self.running_mean = nn.Buffer(zeros(3))`. The module
    stores the plain tensor; `persistent` says whether state_dict has it."""

    def __new__(cls, data=None, *, persistent=True):
        if data is None:
            data = _C.empty(0)
        t = Tensor._make_subclass(cls, data.detach(), data.requires_grad)
        t.persistent = persistent
        return t

    __torch_function__ = _C._disabled_torch_function_impl

    def __init__(self, data=None, *, persistent=True):
        pass


class _UninitializedMixin:
    """A placeholder of no shape yet (lazy modules, e.g. LazyLinear): empty data
    until materialize(shape) gives it storage and turns it into cls_to_become."""
    cls_to_become = None

    def materialize(self, shape, device=None, dtype=None):
        device = self.data.device if device is None else device
        dtype = self.data.dtype if dtype is None else dtype
        self.data = _C.empty(tuple(shape), device=device, dtype=dtype)
        self.__class__ = self.cls_to_become

    def __repr__(self):
        return f"<{type(self).__name__}>"

    def __reduce_ex__(self, protocol):
        return (type(self), (self.requires_grad,))


class UninitializedParameter(_UninitializedMixin, Parameter):
    cls_to_become = Parameter

    def __new__(cls, requires_grad=True, device=None, dtype=None):
        return Tensor._make_subclass(cls, _C.empty(0, device=device, dtype=dtype), requires_grad)

    def __init__(self, requires_grad=True, device=None, dtype=None):
        pass

    def __deepcopy__(self, memo):
        if id(self) not in memo:
            memo[id(self)] = type(self)(self.requires_grad, self.data.device, self.data.dtype)
        return memo[id(self)]


def is_lazy(param):
    """Whether param is an uninitialized placeholder of a lazy module."""
    return isinstance(param, _UninitializedMixin)
