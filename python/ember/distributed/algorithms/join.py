"""torch.distributed.algorithms.join: the Join context manager for uneven inputs across ranks.

ember's DistributedDataParallel has no join hooks (shadow collectives for ranks that ran out of
data), so a Join that is enabled raises NotImplementedError when entered; `enable=False` (what
single-process code such as accelerate passes) is a no-op, as in torch."""


class JoinHook:
    """Per-Joinable hooks: main_hook shadows collectives, post_hook runs once all ranks joined."""

    def main_hook(self):
        pass

    def post_hook(self, is_last_joiner: bool):
        pass


class Joinable:
    """Base class of objects that take part in a Join (torch: an ABC with these three members)."""

    def join_hook(self, **kwargs):
        raise NotImplementedError(f"{type(self).__name__}.join_hook")

    @property
    def join_device(self):
        raise NotImplementedError(f"{type(self).__name__}.join_device")

    @property
    def join_process_group(self):
        raise NotImplementedError(f"{type(self).__name__}.join_process_group")


class Join:
    def __init__(self, joinables, enable=True, throw_on_early_termination=False, **kwargs):
        joinables = list(joinables)
        if len(joinables) == 0:
            raise ValueError("The join context manager requires at least one joinable")
        for j in joinables:
            if not isinstance(j, Joinable):
                raise TypeError(f"Join expects Joinable objects, got {type(j).__name__}")
        self._joinables = joinables
        self._enable = enable
        self._throw_on_early_termination = throw_on_early_termination

    def __enter__(self):
        if self._enable:
            raise NotImplementedError("Join(enable=True): ember's DistributedDataParallel has no join hooks "
                                      "for uneven inputs; give every rank the same number of batches")
        return self

    def __exit__(self, exc_type, exc, tb):
        return None

    @staticmethod
    def notify_join_context(joinable):
        return None
