"""ember.as_torch: unchanged torch code runs on ember.

`python -m ember.as_torch SCRIPT [ARGS...]` (or `-m MODULE [ARGS...]`) runs a
script with `torch` answered by ember; `ember.as_torch.install()` does the same
in a running process. Only Python's own mechanisms are used:

- a meta-path finder answers `torch` and every `torch.X` with the module object
  `ember.X` itself (one object: `torch.nn.functional is ember.nn.functional`);
  a `torch.X` ember lacks raises ModuleNotFoundError naming it (the finder
  never lets the search fall through to a real torch on sys.path);
- the same finder is an importlib.metadata distribution finder, so
  `importlib.metadata.version("torch")` answers the torch release ember
  follows with a local label naming ember (ember.torch_version);
- multiprocessing children: fork children inherit the finder; spawn and
  forkserver children get it before they re-import the parent's __main__, from
  an entry the parent adds to multiprocessing's preparation data (it installs
  the finder when the child unpickles it). `EMBER_AS_TORCH=1` is set in the
  environment for launchers (ember.distributed.run) to pass on.
"""
import importlib
import importlib.abc
import importlib.machinery
import importlib.metadata
import os
import sys

__all__ = ["install", "is_installed", "TorchAlreadyImportedError"]

ENV_VAR = "EMBER_AS_TORCH"


class TorchAlreadyImportedError(ImportError):
    """Raised by install() when a real torch is already imported."""


def _ember_name(fullname):
    return "ember" + fullname[len("torch"):]


def _is_torch_name(fullname):
    return fullname == "torch" or fullname.startswith("torch.")


class _AliasLoader(importlib.abc.Loader):
    """Hands the import system the already-imported ember module itself."""

    def __init__(self, module):
        self._module = module
        self._own_spec = getattr(module, "__spec__", None)

    def create_module(self, spec):
        return self._module

    def exec_module(self, module):
        # module_from_spec set module.__spec__ to the torch.X spec; the module
        # stays ember's, with ember's own spec (reload, pickling, pkgutil)
        if self._own_spec is not None:
            module.__spec__ = self._own_spec


class _TorchDistribution(importlib.metadata.Distribution):
    """The `torch` distribution metadata ember answers with."""

    def read_text(self, filename):
        if filename == "METADATA":
            from ..torch_version import __version__, EMBER_VERSION
            return (f"Metadata-Version: 2.1\nName: torch\nVersion: {__version__}\n"
                    "Summary: torch's API provided by ember (ember.as_torch)\n"
                    f"Requires-Dist: ember=={EMBER_VERSION}\n")
        return None

    def locate_file(self, path):
        return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), str(path))


class TorchFinder(importlib.abc.MetaPathFinder):
    """`torch.X` -> the module ember.X; metadata for the `torch` distribution."""

    def find_spec(self, fullname, path=None, target=None):
        if not _is_torch_name(fullname):
            return None
        ember_name = _ember_name(fullname)
        try:
            module = importlib.import_module(ember_name)
        except ModuleNotFoundError as e:
            if e.name is not None and (ember_name == e.name or ember_name.startswith(e.name + ".")):
                raise ModuleNotFoundError(
                    f"No module named '{fullname}': ember (imported as torch by ember.as_torch) has no "
                    f"'{ember_name}'", name=fullname) from None
            raise
        is_pkg = hasattr(module, "__path__") and module.__path__ is not None
        spec = importlib.machinery.ModuleSpec(fullname, _AliasLoader(module), is_package=is_pkg)
        if is_pkg:
            spec.submodule_search_locations = list(module.__path__)
        return spec

    def find_distributions(self, context=importlib.metadata.DistributionFinder.Context()):
        name = context.name
        if name is None or name.lower().replace("-", "_").replace(".", "_") == "torch":
            yield _TorchDistribution()

    def invalidate_caches(self):
        pass


_finder = TorchFinder()


def is_installed():
    return any(isinstance(f, TorchFinder) for f in sys.meta_path)


def _real_torch_loaded():
    mod = sys.modules.get("torch")
    return mod is not None and getattr(mod, "__name__", None) != "ember"


def install():
    """Make `import torch` (and torch.X, and importlib.metadata's "torch")
    answer with ember in this process and in its multiprocessing children.
    Idempotent. Raises TorchAlreadyImportedError when a real torch is loaded."""
    if _real_torch_loaded():
        where = getattr(sys.modules["torch"], "__file__", None) or "an unknown location"
        raise TorchAlreadyImportedError(
            f"ember.as_torch.install(): a real torch is already imported (from {where}); ember cannot "
            "stand in for it in this process. Install ember as torch before anything imports torch "
            "(run the script with `python -m ember.as_torch SCRIPT`).")
    import ember
    if not is_installed():
        sys.meta_path.insert(0, _finder)
    # modules ember already holds are torch's from now on (one object each)
    for name, module in list(sys.modules.items()):
        if name == "ember" or name.startswith("ember."):
            if module is not None and not name.startswith("ember.as_torch"):
                sys.modules.setdefault("torch" + name[len("ember"):], module)
    os.environ[ENV_VAR] = "1"
    from . import _multiprocessing
    _multiprocessing.patch()
    return ember
