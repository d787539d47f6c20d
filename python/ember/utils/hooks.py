"""RemovableHandle: what register_hook returns; .remove() unregisters the hook."""
import itertools
import weakref

_ids = itertools.count()


class RemovableHandle:
    """Removes a hook from the dict it was registered in (usable as a context manager)."""

    def __init__(self, hooks_dict, *, extra_dict=None):
        self.hooks_dict_ref = _ref(hooks_dict)
        self.id = next(_ids)
        # dicts that also hold this id (a forward hook's with_kwargs / always_call flags)
        extra = extra_dict if isinstance(extra_dict, (list, tuple)) else [extra_dict] if extra_dict is not None else []
        self.extra_dict_ref = tuple(_ref(d) for d in extra)

    def remove(self):
        for ref in (self.hooks_dict_ref,) + self.extra_dict_ref:
            d = ref()
            if d is not None:
                d.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def _ref(d):
    return weakref.ref(d) if _weakrefable(d) else (lambda: d)


def _weakrefable(obj):
    try:
        weakref.ref(obj)
        return True
    except TypeError:
        return False
