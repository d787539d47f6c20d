"""torch.overrides: the __torch_function__ protocol (Note [torch function] in
csrc/python/torch_function.c).

A Tensor subclass, or any type that defines a `__torch_function__`
classmethod, takes over the ember functions and Tensor methods it is passed
to; a `TorchFunctionMode` entered as a context takes over every call. The C
entry points decide cheaply that nothing overrides; when something does, they
call `_handle_from_c`, and Python functions of ember that are not table ops
call `handle_torch_function` themselves, as torch's do. The order is torch's:
the innermost mode first (popped from the stack while it runs, so the calls
it makes go to the modes outside it), then the overriding arguments' types,
subclasses before their bases, left to right; the first answer that is not
NotImplemented wins.
"""
import contextlib
import functools

from . import _C

__all__ = [
    "get_ignored_functions", "get_overridable_functions", "get_testing_overrides", "handle_torch_function",
    "has_torch_function", "has_torch_function_unary", "has_torch_function_variadic", "is_tensor_like",
    "is_tensor_method_or_property", "wrap_torch_function", "TorchFunctionMode", "enable_reentrant_dispatch",
    "resolve_name",
]

_disabled_torch_function_impl = _C._disabled_torch_function_impl
has_torch_function = _C._has_torch_function
has_torch_function_unary = _C._has_torch_function_unary
has_torch_function_variadic = _C._has_torch_function_variadic

# (the C side holds only the stack's length: ember's grad mode is process-wide, and so is this)
_mode_stack = []


def _set_modes():
    _C._set_torch_function_state(len(_mode_stack), _C._get_torch_function_state()[1])


class DisableTorchFunctionSubclass:
    """Within it, subclasses' __torch_function__ are not called (modes still are)."""

    def __enter__(self):
        modes, self._prev = _C._get_torch_function_state()
        _C._set_torch_function_state(modes, max(self._prev, 1))
        return self

    def __exit__(self, *exc):
        _C._set_torch_function_state(_C._get_torch_function_state()[0], self._prev)
        return False


class DisableTorchFunction:
    """Within it, neither subclasses' __torch_function__ nor modes are called."""

    def __enter__(self):
        modes, self._prev = _C._get_torch_function_state()
        _C._set_torch_function_state(modes, 2)
        return self

    def __exit__(self, *exc):
        _C._set_torch_function_state(_C._get_torch_function_state()[0], self._prev)
        return False


def _is_torch_function_enabled():
    return _C._get_torch_function_state()[1] == 0


def _is_torch_function_mode_enabled():
    return bool(_mode_stack) and _C._get_torch_function_state()[1] < 2


def _len_torch_function_stack():
    return len(_mode_stack)


def _push_mode(mode):
    _mode_stack.append(mode)
    _set_modes()


def _pop_mode():
    if not _mode_stack:
        raise RuntimeError("Trying to pop from an empty mode stack")
    mode = _mode_stack.pop()
    _set_modes()
    return mode


def _get_current_function_mode():
    return _mode_stack[-1] if _mode_stack else None


def _get_current_function_mode_stack():
    return list(_mode_stack)


@contextlib.contextmanager
def _pop_mode_temporarily():
    mode = _pop_mode()
    try:
        yield mode
    finally:
        _push_mode(mode)


class TorchFunctionMode:
    """A context that sees every torch function call made inside it:
    `__torch_function__(self, func, types, args=(), kwargs=None)`. Calls it
    makes itself go to the modes entered before it, then to the tensors."""
    inner = None

    def __init__(self):
        pass

    def __torch_function__(self, func, types, args=(), kwargs=None):
        raise NotImplementedError

    def __enter__(self):
        _push_mode(self)
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        _pop_mode()

    @classmethod
    def push(cls, *args, **kwargs):
        import warnings
        warnings.warn("`Mode.push()` is no longer necessary and can be replaced with just `with Mode()`")
        return cls(*args, **kwargs)


class BaseTorchFunctionMode(TorchFunctionMode):
    """A mode that runs every call unchanged (a base for modes that watch)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def enable_reentrant_dispatch():
    """torch's dispatcher guard for re-entering from __torch_dispatch__; ember
    has no dispatch-level Python modes, so there is nothing to re-enable."""
    yield


def _overrides(t):
    f = getattr(t, "__torch_function__", None)
    return f is not None and f is not _disabled_torch_function_impl


def _flatten_relevant(args):
    for a in args:
        if isinstance(a, (list, tuple)):
            yield from a
        else:
            yield a


def _get_overloaded_args(relevant_args, get_type_fn=type):
    """The arguments whose types override, one per type, each subclass placed
    before its first base already in the list (torch's order)."""
    if _C._get_torch_function_state()[1] != 0:
        return []
    args, types = [], set()
    for arg in relevant_args:
        t = get_type_fn(arg)
        if t in types or t is _C.Tensor or not _overrides(t):
            continue
        types.add(t)
        index = len(args)
        for i, old in enumerate(args):
            if issubclass(t, get_type_fn(old)):
                index = i
                break
        args.insert(index, arg)
    return args


def handle_torch_function(public_api, relevant_args, *args, **kwargs):
    """Call the overriding mode or arguments' __torch_function__ for
    public_api(*args, **kwargs); relevant_args are the arguments to look at."""
    overloaded = _get_overloaded_args(relevant_args)
    types = tuple(type(a) for a in overloaded)
    if _is_torch_function_mode_enabled():
        with _pop_mode_temporarily() as mode:
            result = mode.__torch_function__(public_api, types, args, kwargs)
        if result is not NotImplemented:
            return result
    for arg in overloaded:
        result = type(arg).__torch_function__(public_api, types, args, kwargs)
        if result is not NotImplemented:
            return result
    msg = (f"no implementation found for '{resolve_name(public_api) or repr(public_api)}' on types that implement "
           f"__torch_function__: {[type(a) for a in overloaded]}")
    if _is_torch_function_mode_enabled():
        msg += f" nor in mode {_get_current_function_mode()}"
    raise TypeError(msg)


def _handle_from_c(func, args, kwargs):
    """The C entry points' way in: every argument is relevant (lists one level down)."""
    relevant = list(_flatten_relevant(args))
    relevant.extend(_flatten_relevant(kwargs.values()))
    if not _mode_stack or _C._get_torch_function_state()[1] == 2:
        if not _get_overloaded_args(relevant):  # the C side saw a type that stopped overriding
            with DisableTorchFunction():
                return func(*args, **kwargs)
    return handle_torch_function(func, relevant, *args, **kwargs)


_C._set_torch_function_handler(_handle_from_c)


def wrap_torch_function(dispatcher):
    """Decorator: `dispatcher(*args, **kwargs)` names the relevant arguments of
    the decorated Python function, which then honours __torch_function__."""
    def inner(func):
        @functools.wraps(func)
        def wrapped(*args, **kwargs):
            relevant = dispatcher(*args, **kwargs)
            if has_torch_function(relevant):
                return handle_torch_function(wrapped, relevant, *args, **kwargs)
            return func(*args, **kwargs)
        return wrapped
    return inner


def is_tensor_like(inp):
    """A Tensor, or an object whose type defines __torch_function__."""
    return type(inp) is _C.Tensor or hasattr(inp, "__torch_function__")


def is_tensor_method_or_property(func):
    """Whether func is a Tensor method or property getter (its first argument is self)."""
    return func in _tensor_methods() or getattr(func, "__name__", None) == "__get__"


@functools.lru_cache(None)
def _tensor_methods():
    return set(getattr(_C.Tensor, n) for n in dir(_C.Tensor)
               if callable(getattr(_C.Tensor, n, None)) and not n.startswith("__"))


@functools.lru_cache(None)
def get_default_nowrap_functions():
    """Functions whose results Tensor.__torch_function__ hands back without
    turning them into the subclass (the gradient and the view base)."""
    return {_C.Tensor._base.__get__, _C.Tensor.grad.__get__}


def get_ignored_functions():
    """Public functions that never dispatch through __torch_function__ in
    ember: the ones with no tensor to look at and no mode check (queries of
    global state)."""
    import ember
    names = ("is_tensor", "is_storage", "set_default_dtype", "get_default_dtype", "manual_seed", "seed",
             "initial_seed", "set_printoptions", "is_grad_enabled", "set_grad_enabled", "get_num_threads",
             "set_num_threads", "promote_types", "can_cast", "result_type", "compile")
    return {getattr(ember, n) for n in names if hasattr(ember, n)}


def get_overridable_functions():
    """{namespace: [functions]}: the op table's functions and Tensor methods,
    the ones the C entry points dispatch."""
    import ember
    fns = [getattr(_C, n) for n in _C._op_names() if hasattr(_C, n)]
    methods = [getattr(_C.Tensor, n) for n in _C._op_names() if hasattr(_C.Tensor, n)]
    return {ember: fns, _C.Tensor: methods}


def get_testing_overrides():
    """{function: a lambda of its signature returning -1}, for every
    overridable function, as torch's test helper gives."""
    out = {}
    for ns, fns in get_overridable_functions().items():
        for f in fns:
            out[f] = lambda *args, **kwargs: -1
    return out


def resolve_name(f):
    """The torch-style dotted name of f ('ember.add', 'ember.Tensor.add')."""
    if isinstance(f, (classmethod, staticmethod)):
        f = f.__func__
    owner = getattr(f, "__objclass__", None)
    if owner is _C.Tensor:
        return f"ember.Tensor.{f.__name__}"
    mod = getattr(f, "__module__", None)
    name = getattr(f, "__name__", None)
    if name is None:
        return None
    if mod in ("ember._C", None) and hasattr(_C, name):
        return f"ember.{name}"
    return f"{mod}.{name}"


def _convert(ret, cls):
    """Results of a subclass's call turned into the subclass (Tensor.__torch_function__)."""
    if cls is _C.Tensor:
        return ret
    if isinstance(ret, _C.Tensor) and not isinstance(ret, cls):
        return ret.as_subclass(cls)
    if isinstance(ret, (tuple, list)):
        return type(ret)(_convert(r, cls) for r in ret)
    return ret


def _tensor_torch_function(cls, func, types, args=(), kwargs=None):
    """Tensor.__torch_function__: run func with subclasses' overrides off, then
    hand the results back as cls (torch's default for subclasses)."""
    if kwargs is None:
        kwargs = {}
    if not all(issubclass(cls, t) for t in types):
        return NotImplemented
    with DisableTorchFunctionSubclass():
        ret = func(*args, **kwargs)
        if func in get_default_nowrap_functions():
            return ret
        return _convert(ret, cls)


_tensor_torch_function.__name__ = "__torch_function__"
_tensor_torch_function.__qualname__ = "Tensor.__torch_function__"
