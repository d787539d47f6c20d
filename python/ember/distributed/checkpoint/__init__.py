"""torch.distributed.checkpoint (sharded checkpoints): not available in ember.
Checkpoints are ember.save / ember.load and safetensors, from every rank or rank 0."""
from .._absent import absent_function

_WHAT = "distributed checkpoints (torch.distributed.checkpoint); save with ember.save or safetensors"
save = absent_function("save", _WHAT)
load = absent_function("load", _WHAT)

__all__ = ["load", "save"]
