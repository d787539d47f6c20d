"""ember.return_types: the named tuples returned by ops such as max(dim),
sort, topk (torch.return_types). Types appear here once an op has made one."""
from . import _C


def __getattr__(name):
    try:
        return _C._return_types[name]
    except KeyError:
        raise AttributeError(f"module 'ember.return_types' has no attribute '{name}'") from None
