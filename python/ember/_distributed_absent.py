"""What `ember.distributed` answers while this build has no ember.distributed
package: is_available() is False (as torch's on a build without distributed
support) and nothing is initialized; any other name raises saying why. It is
registered as sys.modules["ember.distributed"] only when that package is
missing, so `import torch.distributed` (which transformers does at import)
works under ember.as_torch."""
import importlib.machinery
import sys
import types


def _absent_module():
    m = types.ModuleType("ember.distributed", "ember.distributed: not available in this build of ember")
    m.__spec__ = importlib.machinery.ModuleSpec("ember.distributed", None)

    def is_available():
        return False

    def is_initialized():
        return False

    def __getattr__(name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError(f"ember.distributed.{name}: this build of ember has no distributed package "
                             "(ember.distributed.is_available() is False)")

    m.is_available, m.is_initialized, m.__getattr__ = is_available, is_initialized, __getattr__
    return m


def load():
    """The ember.distributed package, or the stand-in that says it is not available."""
    try:
        return importlib.import_module("ember.distributed")
    except ModuleNotFoundError as e:
        if e.name != "ember.distributed":
            raise
    m = sys.modules.setdefault("ember.distributed", _absent_module())
    setattr(sys.modules["ember"], "distributed", m)
    return m
