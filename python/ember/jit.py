"""torch.jit's answers for ember, which has no TorchScript: code is never being
traced or scripted, `script` hands the function or module back to run eagerly
(as ember.compile does), and the markers TorchScript reads (ignore, unused,
export, annotate, Final) do nothing outside it, as in torch."""
import typing

__all__ = ["is_tracing", "is_scripting", "script", "ignore", "unused", "export", "annotate", "Final",
           "ScriptModule", "ScriptFunction", "interface"]

Final = typing.Final


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
