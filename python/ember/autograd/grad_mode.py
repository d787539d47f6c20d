"""Grad modes as context managers and decorators: no_grad, enable_grad,
set_grad_enabled, inference_mode (thread-local state lives in C)."""
import functools
import sys

from .. import _C


def _is_generator_function(func):
    """inspect.isgeneratorfunction, without importing inspect (a sixth of
    `import ember`'s time): partials and bound methods unwrapped, then the
    code object's generator flag."""
    while isinstance(func, functools.partial):
        func = func.func
    code = getattr(getattr(func, "__func__", func), "__code__", None)
    return code is not None and bool(code.co_flags & 0x20)  # CO_GENERATOR


class _Mode:
    """Base: a context manager that also works as a decorator (with or without ())."""

    def __call__(self, func):
        if _is_generator_function(func):
            @functools.wraps(func)
            def gen_wrapper(*args, **kwargs):
                # the mode holds only while the generator runs, not between yields
                gen = func(*args, **kwargs)
                try:
                    with self.clone():
                        response = gen.send(None)
                    while True:
                        try:
                            request = yield response
                        except GeneratorExit:
                            with self.clone():
                                gen.close()
                            raise
                        except BaseException:
                            with self.clone():
                                response = gen.throw(*sys.exc_info())
                        else:
                            with self.clone():
                                response = gen.send(request)
                except StopIteration as e:
                    return e.value
            return gen_wrapper

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with self.__class__(*self._args):
                return func(*args, **kwargs)
        return wrapper

    def clone(self):
        return self.__class__(*self._args)


class no_grad(_Mode):
    """Ops inside do not record graphs; results don't require grad."""

    def __new__(cls, func=None):
        self = super().__new__(cls)
        if callable(func):  # used as @no_grad without parentheses
            self.__init__()
            return self(func)
        return self

    def __init__(self, func=None):
        self._args = ()

    def __enter__(self):
        self.prev = _C.is_grad_enabled()
        _C._set_grad_enabled(False)

    def __exit__(self, *exc):
        _C._set_grad_enabled(self.prev)


class enable_grad(no_grad):
    """Turns recording back on (inside no_grad)."""

    def __enter__(self):
        self.prev = _C.is_grad_enabled()
        _C._set_grad_enabled(True)


class set_grad_enabled(_Mode):
    """set_grad_enabled(mode): takes effect at once (usable as a plain call),
    and restores the previous mode when used as a context manager."""

    def __init__(self, mode):
        self._args = (mode,)
        self.prev = _C.is_grad_enabled()
        _C._set_grad_enabled(bool(mode))

    def __call__(self, func):
        _C._set_grad_enabled(self.prev)  # as a decorator it must not leak the mode
        return super().__call__(func)

    def __enter__(self):
        pass

    def __exit__(self, *exc):
        _C._set_grad_enabled(self.prev)


class inference_mode(_Mode):
    """Like no_grad; tensors made inside are inference tensors, which can't
    later be saved for backward."""

    def __new__(cls, mode=True):
        self = super().__new__(cls)
        if callable(mode):
            self.__init__()
            return self(mode)
        return self

    def __init__(self, mode=True):
        self._args = (mode,)
        self.mode = bool(mode) if not callable(mode) else True

    def __enter__(self):
        self.prev = _C._enter_inference_mode(self.mode)

    def __exit__(self, *exc):
        _C._exit_inference_mode(self.prev, self.mode)


def is_grad_enabled():
    return _C.is_grad_enabled()


def is_inference_mode_enabled():
    return _C.is_inference_mode_enabled()


class set_detect_anomaly:
    """Accepted for compatibility; ember's errors already name the failing op."""

    def __init__(self, mode, check_nan=True):
        self.mode = mode

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


detect_anomaly = set_detect_anomaly
