"""torch.nn.parallel: DistributedDataParallel over ember.distributed; DataParallel on one device."""
from .data_parallel import DataParallel
from .distributed import DistributedDataParallel

__all__ = ["DataParallel", "DistributedDataParallel"]
