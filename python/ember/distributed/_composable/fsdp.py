"""torch.distributed._composable.fsdp: not available in ember (see ember.distributed.fsdp)."""
from ..fsdp import CPUOffloadPolicy, FSDPModule, MixedPrecisionPolicy, fully_shard  # noqa: F401
