"""Samplers (torch.utils.data.sampler): iterables of dataset keys that decide
the order a DataLoader visits a map-style dataset, and `BatchSampler`, which
groups keys into batches.

Randomness comes from ember's generators, which draw the same numbers as
PyTorch's; each sampler makes the same draws in the same order as PyTorch's,
so a seeded run visits samples in the order PyTorch would.
"""
import itertools
from typing import Generic, TypeVar

import ember

T_co = TypeVar("T_co", covariant=True)

# RandomSampler(replacement=True) draws its indices in chunks of this size
# (PyTorch does too; keeping it keeps the random stream identical).
_REPLACEMENT_CHUNK = 32


def _is_positive_int(value):
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


class Sampler(Generic[T_co]):
    """Base class: subclasses define `__iter__` (and `__len__` when they can)."""

    def __init__(self, data_source=None):
        pass  # accepted for compatibility; samplers keep what they need themselves

    def __iter__(self):
        raise NotImplementedError


class SequentialSampler(Sampler[int]):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


def _fresh_generator():
    """A generator seeded from the default one: draws from the global stream
    once per epoch, so `manual_seed` makes the epoch's order reproducible."""
    seed = int(ember.empty((), dtype=ember.int64).random_().item())
    generator = ember.Generator()
    generator.manual_seed(seed)
    return generator


class RandomSampler(Sampler[int]):
    """A random permutation of the indices (repeated, then cut, when
    num_samples exceeds the dataset), or with replacement=True num_samples
    independent uniform draws."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(replacement, bool):
            raise TypeError(f"replacement should be a boolean value, but got "
                            f"replacement={replacement}")
        if not _is_positive_int(self.num_samples):
            raise ValueError(f"num_samples should be a positive integer value, but got "
                             f"num_samples={self.num_samples}")

    @property
    def num_samples(self):
        # read the dataset's length lazily: it may change after construction
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n = len(self.data_source)
        generator = self.generator if self.generator is not None else _fresh_generator()
        total = self.num_samples
        if self.replacement:
            for _ in range(total // _REPLACEMENT_CHUNK):
                yield from ember.randint(0, n, (_REPLACEMENT_CHUNK,), dtype=ember.int64,
                                         generator=generator).tolist()
            yield from ember.randint(0, n, (total % _REPLACEMENT_CHUNK,), dtype=ember.int64,
                                     generator=generator).tolist()
        else:
            for _ in range(total // n):
                yield from ember.randperm(n, generator=generator).tolist()
            yield from ember.randperm(n, generator=generator).tolist()[:total % n]

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler[int]):
    """The given indices, in a random order (without replacement)."""

    def __init__(self, indices, generator=None):
        self.indices = indices
        self.generator = generator

    def __iter__(self):
        for i in ember.randperm(len(self.indices), generator=self.generator).tolist():
            yield self.indices[i]

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler[int]):
    """num_samples indices into `weights`, index i drawn with probability
    proportional to weights[i] (weights need not sum to one)."""

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        if not _is_positive_int(num_samples):
            raise ValueError(f"num_samples should be a positive integer value, but got "
                             f"num_samples={num_samples}")
        if not isinstance(replacement, bool):
            raise ValueError(f"replacement should be a boolean value, but got "
                             f"replacement={replacement}")
        weights = ember.as_tensor(weights, dtype=ember.float64)
        if weights.dim() != 1:
            raise ValueError(f"weights should be a 1d sequence but given weights have shape "
                             f"{tuple(weights.shape)}")
        self.weights = weights
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def __iter__(self):
        drawn = ember.multinomial(self.weights, self.num_samples, self.replacement,
                                  generator=self.generator)
        yield from drawn.tolist()

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler[list]):
    """Groups the keys of `sampler` into lists of `batch_size`; the last,
    shorter list is kept unless drop_last=True."""

    def __init__(self, sampler, batch_size, drop_last):
        if not _is_positive_int(batch_size):
            raise ValueError(f"batch_size should be a positive integer value, but got "
                             f"batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self):
        keys = iter(self.sampler)
        while True:
            batch = list(itertools.islice(keys, self.batch_size))
            if not batch or (self.drop_last and len(batch) < self.batch_size):
                return
            yield batch

    def __len__(self):
        if self.drop_last:
            return len(self.sampler) // self.batch_size
        return -(-len(self.sampler) // self.batch_size)
