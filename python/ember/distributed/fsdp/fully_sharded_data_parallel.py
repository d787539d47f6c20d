"""torch.distributed.fsdp.fully_sharded_data_parallel: where torch defines the FSDP class
(accelerate imports it from here); ember's is the "not available" one of fsdp/__init__.py."""
from . import FullyShardedDataParallel  # noqa: F401

__all__ = ["FullyShardedDataParallel"]
