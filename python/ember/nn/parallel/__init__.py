"""torch.nn.parallel: DistributedDataParallel over ember.distributed, and
DataParallel (the module itself without several GPUs)."""
from .data_parallel import DataParallel, data_parallel
from .distributed import DistributedDataParallel

__all__ = ["DistributedDataParallel", "DataParallel", "data_parallel"]
