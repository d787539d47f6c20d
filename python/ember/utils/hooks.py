"""RemovableHandle: what register_hook returns; .remove() unregisters the hook."""
import itertools
import weakref

_ids = itertools.count()


class RemovableHandle:
    """Removes a hook from the dict it was registered in (usable as a context manager)."""

    def __init__(self, hooks_dict):
        self.hooks_dict_ref = weakref.ref(hooks_dict) if _weakrefable(hooks_dict) else (lambda: hooks_dict)
        self.id = next(_ids)

    def remove(self):
        d = self.hooks_dict_ref()
        if d is not None:
            d.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def _weakrefable(obj):
    try:
        weakref.ref(obj)
        return True
    except TypeError:
        return False
