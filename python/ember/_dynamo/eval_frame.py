"""torch._dynamo.eval_frame: the wrapper type torch.compile returns for a module.
ember.compile returns the module itself, so nothing is an OptimizedModule."""


class OptimizedModule:
    def __init__(self, *args, **kwargs):
        raise RuntimeError("ember has no graph compiler: ember.compile returns the module itself, "
                           "never an OptimizedModule")


def _is_skip_guard_eval_unsafe_stance():
    return False
