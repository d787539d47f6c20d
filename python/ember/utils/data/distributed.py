"""DistributedSampler (torch.utils.data.distributed): gives each of
`num_replicas` processes its own interleaved share of a map-style dataset.

Every rank builds the same index list (a permutation seeded with
seed + epoch when shuffling), pads it by wrapping around (or cuts it, with
drop_last) to a multiple of num_replicas, and keeps every num_replicas-th
index starting at its rank. Call `set_epoch(e)` each epoch for a new order.
"""
import math

import ember

from .sampler import Sampler

_NO_PROCESS_GROUP = ("Default process group has not been initialized, please make sure to call "
                     "init_process_group (or pass num_replicas= and rank= to DistributedSampler).")


def _default_process_group():
    """The `ember.distributed` module when a process group is running, else None."""
    try:
        from ember import distributed as dist
    except ImportError:
        return None
    is_initialized = getattr(dist, "is_initialized", None)
    if is_initialized is None or not is_initialized():
        return None
    return dist


class DistributedSampler(Sampler):
    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0,
                 drop_last=False):
        if num_replicas is None or rank is None:
            # PyTorch asks the default process group; without one it raises ValueError.
            dist = _default_process_group()
            if dist is None:
                raise ValueError(_NO_PROCESS_GROUP)
            if num_replicas is None:
                num_replicas = dist.get_world_size()
            if rank is None:
                rank = dist.get_rank()
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval "
                             f"[0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        n = len(dataset)
        if drop_last and n % num_replicas != 0:
            # drop the tail so every rank gets the same number of samples
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self):
        n = len(self.dataset)
        if self.shuffle:
            g = ember.Generator()
            g.manual_seed(self.seed + self.epoch)
            indices = ember.randperm(n, generator=g).tolist()
        else:
            indices = list(range(n))
        if self.drop_last:
            indices = indices[:self.total_size]
        else:
            padding = self.total_size - len(indices)
            if padding > 0:  # wrap around (more than once if the dataset is tiny)
                indices += (indices * math.ceil(padding / len(indices)))[:padding]
        mine = indices[self.rank:self.total_size:self.num_replicas]
        if len(mine) != self.num_samples:  # internal invariant; never user input
            raise RuntimeError(f"DistributedSampler: rank {self.rank} got {len(mine)} indices, "
                               f"expected {self.num_samples}")
        return iter(mine)

    def __len__(self):
        return self.num_samples

    def set_epoch(self, epoch):
        """Seed the next epoch's shuffle with seed + epoch (same on every rank)."""
        self.epoch = epoch
