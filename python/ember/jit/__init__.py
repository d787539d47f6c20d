"""torch.jit's answers for ember, which has no TorchScript: code is never being
traced or scripted, `script` hands the function or module back to run eagerly
(as ember.compile does), and the markers TorchScript reads (ignore, unused,
export, annotate, Final) do nothing outside it, as in torch."""
import typing

__all__ = ["is_tracing", "is_scripting", "script", "trace", "trace_module", "ignore", "unused", "export", "annotate",
           "annotations", "Final", "ScriptModule", "ScriptFunction", "interface"]

Final = typing.Final

from . import annotations  # noqa: E402  (torch.jit.annotations)


def is_tracing():
    """False: ember has no tracer."""
    return False


def is_scripting():
    """False: ember has no TorchScript compiler."""
    return False


class ScriptModule:
    """torch.jit.ScriptModule: ember makes none, so nothing is an instance of it."""

    def __init__(self, *args, **kwargs):
        raise RuntimeError("ember has no TorchScript: torch.jit.ScriptModule cannot be created")


class ScriptFunction:
    """torch.jit.ScriptFunction: ember makes none, so nothing is an instance of it."""

    def __init__(self, *args, **kwargs):
        raise RuntimeError("ember has no TorchScript: torch.jit.ScriptFunction cannot be created")


def script(obj=None, optimize=None, _frames_up=0, _rcb=None, example_inputs=None):
    """No TorchScript compiler: the function or module comes back unchanged and runs eagerly."""
    if obj is None:
        return lambda f: f
    return obj


def trace(func, example_inputs=None, optimize=None, check_trace=True, check_inputs=None, check_tolerance=1e-5,
          strict=True, _force_outplace=False, _module_class=None, _compilation_unit=None,
          example_kwarg_inputs=None, _store_inputs=True):
    """No tracer: the function or module comes back unchanged and runs eagerly
    (the example inputs are not run, so nothing is checked or recorded)."""
    if not callable(func):
        raise TypeError(f"torch.jit.trace: expected a function or module, got {type(func).__name__}")
    return func


def trace_module(mod, inputs, *args, **kwargs):
    """No tracer: the module comes back unchanged."""
    return mod


def _script_if_tracing(fn):
    """Scripts fn only while tracing; ember never traces, so fn itself."""
    return fn


def _overload(fn):
    """TorchScript overload declaration: eagerly the last definition is the one called."""
    return fn


def _overload_method(fn):
    return fn


def ignore(drop=False, **kwargs):
    if callable(drop):
        return drop
    return lambda fn: fn


def unused(fn):
    return fn


def export(fn):
    return fn


def interface(obj):
    return obj


def annotate(the_type, the_value):
    """A type hint for TorchScript; eagerly the value itself."""
    return the_value
