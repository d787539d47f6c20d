"""torch.distributed.checkpoint.default_planner: the default planners, which
save and load every entry as it is. ember's save/load accept them (they are
what happens without a planner); custom planners are not available."""

__all__ = ["DefaultSavePlanner", "DefaultLoadPlanner"]


class DefaultSavePlanner:
    def __init__(self, flatten_state_dict=True, flatten_sharded_tensors=True, dedup_replicated_tensors=None,
                 dedup_save_to_lowest_rank=False, enable_plan_caching=False):
        if not flatten_state_dict:
            raise NotImplementedError("DefaultSavePlanner(flatten_state_dict=False) is not available in ember")


class DefaultLoadPlanner:
    def __init__(self, flatten_state_dict=True, flatten_sharded_tensors=True, allow_partial_load=False):
        if not flatten_state_dict:
            raise NotImplementedError("DefaultLoadPlanner(flatten_state_dict=False) is not available in ember")
        self.allow_partial_load = allow_partial_load
