"""torch.distributed.fsdp on ember: FullyShardedDataParallel (the FSDP1
wrapper, fully_sharded_data_parallel.py) and fully_shard (the FSDP2 per-module
API, _fully_shard.py), sharding CPU tensors over ember's gloo collectives.
Both flatten a unit's parameters into one buffer padded to a multiple of the
world size (_flat_param.py). Sharded state dicts hold FlatShardedTensor values
(ember has no DTensor); distributed.checkpoint saves and loads them."""
from ._fully_shard import CPUOffloadPolicy, FSDPModule, MixedPrecisionPolicy, OffloadPolicy, UnshardHandle, fully_shard
from .api import (BackwardPrefetch, CPUOffload, FullOptimStateDictConfig, FullStateDictConfig,
                  LocalOptimStateDictConfig, LocalStateDictConfig, MixedPrecision, OptimStateDictConfig,
                  ShardedOptimStateDictConfig, ShardedStateDictConfig, ShardingStrategy, StateDictConfig,
                  StateDictSettings, StateDictType)
from .fully_sharded_data_parallel import FullyShardedDataParallel

__all__ = ["BackwardPrefetch", "CPUOffload", "CPUOffloadPolicy", "FSDPModule", "FullOptimStateDictConfig",
           "FullStateDictConfig", "FullyShardedDataParallel", "LocalOptimStateDictConfig", "LocalStateDictConfig",
           "MixedPrecision", "MixedPrecisionPolicy", "OffloadPolicy", "OptimStateDictConfig",
           "ShardedOptimStateDictConfig", "ShardedStateDictConfig", "ShardingStrategy", "StateDictConfig",
           "StateDictSettings", "StateDictType", "UnshardHandle", "fully_shard"]
