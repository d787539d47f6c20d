"""torch.distributed._composable.fsdp: fully_shard and its policies (see ember.distributed.fsdp)."""
from ..fsdp import CPUOffloadPolicy, FSDPModule, MixedPrecisionPolicy, OffloadPolicy, fully_shard  # noqa: F401
