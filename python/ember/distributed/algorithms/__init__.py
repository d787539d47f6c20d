"""torch.distributed.algorithms: only `join` (the Join context manager's types)."""
from . import join  # noqa: F401
from .join import Join, Joinable, JoinHook  # noqa: F401
