"""Keeps ember as torch in multiprocessing's spawn and forkserver children.

A spawn child starts a fresh interpreter, unpickles the parent's
"preparation data" and then re-imports the parent's __main__ (which imports
torch) before it unpickles the process object. The entry added here is the
first thing unpickled: unpickling it installs ember.as_torch in the child, so
the main module, the process object and the target all see ember as torch.
No .pth file, sitecustomize or edit to multiprocessing is needed; fork
children simply inherit the finder."""
import os
import sys

_KEY = "ember_as_torch"
_patched = False


class _InstallInChild:
    """Pickles as a call that installs ember.as_torch where it is unpickled."""

    def __init__(self, ember_parent_dir):
        self.ember_parent_dir = ember_parent_dir

    def __reduce__(self):
        # exec of a fixed program: the child may not yet have ember on sys.path (the parent's
        # sys.path is applied only after this entry is read), so the path travels with it
        code = ("import sys\n"
                f"if {self.ember_parent_dir!r} not in sys.path: sys.path.append({self.ember_parent_dir!r})\n"
                "import ember.as_torch\n"
                "ember.as_torch.install()\n")
        return exec, (code,)


def _ember_parent_dir():
    import ember
    return os.path.dirname(os.path.dirname(os.path.abspath(ember.__file__)))


def patch():
    """Wrap multiprocessing.spawn.get_preparation_data once per process."""
    global _patched
    if _patched:
        return
    from multiprocessing import spawn
    original = spawn.get_preparation_data
    parent_dir = _ember_parent_dir()

    def get_preparation_data(name):
        data = original(name)
        if "torch" in sys.modules and getattr(sys.modules["torch"], "__name__", None) == "ember":
            # dicts keep insertion order and pickle in it: this entry is rebuilt first
            data = {_KEY: _InstallInChild(parent_dir), **data}
        return data

    get_preparation_data.__wrapped__ = original
    spawn.get_preparation_data = get_preparation_data
    _patched = True
