"""torch.distributed.tensor: ember has no distributed tensors (DTensor).
The placement types are real descriptions (placement_types.py); DTensor and
distribute_tensor/distribute_module are "not available" answers (_absent.py)."""
from .._absent import absent_class, absent_function
from .placement_types import Partial, Placement, Replicate, Shard

_WHAT = ("distributed tensors (DTensor); data parallel training is nn.parallel.DistributedDataParallel, "
         "sharded training distributed.fsdp (flat shards, FlatShardedTensor state dicts)")
DTensor = absent_class("DTensor", _WHAT)
distribute_tensor = absent_function("distribute_tensor", _WHAT)
distribute_module = absent_function("distribute_module", _WHAT)

__all__ = ["DTensor", "Partial", "Placement", "Replicate", "Shard", "distribute_module", "distribute_tensor"]
