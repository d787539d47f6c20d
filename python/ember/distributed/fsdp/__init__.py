"""torch.distributed.fsdp: ember has no fully sharded data parallel yet
("not available" answers, _absent.py); nn.parallel.DistributedDataParallel
is what it has."""
from .._absent import absent_class, absent_function

_WHAT = "FSDP yet; use nn.parallel.DistributedDataParallel"
FullyShardedDataParallel = absent_class("FullyShardedDataParallel", _WHAT)
FSDPModule = absent_class("FSDPModule", _WHAT)
CPUOffloadPolicy = absent_class("CPUOffloadPolicy", _WHAT)
MixedPrecisionPolicy = absent_class("MixedPrecisionPolicy", _WHAT)
fully_shard = absent_function("fully_shard", _WHAT)

__all__ = ["CPUOffloadPolicy", "FSDPModule", "FullyShardedDataParallel", "MixedPrecisionPolicy", "fully_shard"]
