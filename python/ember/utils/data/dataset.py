"""Datasets (torch.utils.data.dataset): the map-style `Dataset` protocol
(`__getitem__` + `__len__`), the stream-style `IterableDataset` protocol
(`__iter__`), and the small wrappers built on them: tensors zipped by their
first dimension, stacking, concatenation, chaining, subsets and random splits.
"""
import bisect
import itertools
import math
import warnings
from typing import Generic, TypeVar

import ember

T_co = TypeVar("T_co", covariant=True)
T = TypeVar("T")


class Dataset(Generic[T_co]):
    """A map from keys (usually 0..len-1) to samples. Subclasses define
    `__getitem__` and usually `__len__` (samplers and `len(loader)` need it);
    `__getitems__(indices)` may be added to fetch a whole batch at once."""

    def __getitem__(self, index):
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset[T_co]):
    """A stream of samples: subclasses define `__iter__`. With worker processes
    each worker iterates its own copy; use `get_worker_info()` in `__iter__`
    to give each worker its own share of the stream."""

    def __iter__(self):
        raise NotImplementedError("Subclasses of IterableDataset should implement __iter__.")

    def __add__(self, other):
        return ChainDataset([self, other])


class TensorDataset(Dataset):
    """Sample i is `(t[i] for t in tensors)`; all tensors share their first size."""

    def __init__(self, *tensors):
        if tensors and any(tensors[0].size(0) != t.size(0) for t in tensors):
            sizes = [t.size(0) for t in tensors]
            raise AssertionError(f"Size mismatch between tensors: first dimensions are {sizes}")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].size(0)


class StackDataset(Dataset):
    """Zips datasets of equal length: positional ones give tuples, keyword
    ones give dicts, e.g. `StackDataset(image=imgs, text=texts)[i]`."""

    def __init__(self, *args, **kwargs):
        if args and kwargs:
            raise ValueError("Supported either ``tuple``- (via ``args``) or ``dict``- (via "
                             "``kwargs``) like input/output, but both types are given.")
        if not args and not kwargs:
            raise ValueError("At least one dataset should be passed")
        parts = list(args) if args else list(kwargs.values())
        lengths = [len(d) for d in parts]
        if any(n != lengths[0] for n in lengths):
            raise ValueError(f"Size mismatch between datasets: lengths are {lengths}")
        self._length = lengths[0]
        self.datasets = args if args else kwargs

    def __getitem__(self, index):
        if isinstance(self.datasets, dict):
            return {k: d[index] for k, d in self.datasets.items()}
        return tuple(d[index] for d in self.datasets)

    def __getitems__(self, indices):
        def column(d):
            getitems = getattr(d, "__getitems__", None)
            if not callable(getitems):
                return [d[i] for i in indices]
            items = getitems(indices)
            if len(items) != len(indices):
                raise ValueError(f"Nested dataset's output size mismatch. "
                                 f"Expected {len(indices)}, got {len(items)}")
            return items

        if isinstance(self.datasets, dict):
            cols = {k: column(d) for k, d in self.datasets.items()}
            return [{k: cols[k][j] for k in cols} for j in range(len(indices))]
        cols = [column(d) for d in self.datasets]
        return [tuple(c[j] for c in cols) for j in range(len(indices))]

    def __len__(self):
        return self._length


class ConcatDataset(Dataset[T_co]):
    """Map-style datasets one after another; index i finds its part by
    bisecting the running lengths (`cumulative_sizes`)."""

    @staticmethod
    def cumsum(sequence):
        return list(itertools.accumulate(len(d) for d in sequence))

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise AssertionError("datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise AssertionError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = self.cumsum(self.datasets)

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        if idx < 0:
            if -idx > len(self):
                raise ValueError(f"absolute value of index should not exceed dataset length "
                                 f"(got index {idx} for length {len(self)})")
            idx += len(self)
        part = bisect.bisect_right(self.cumulative_sizes, idx)
        start = self.cumulative_sizes[part - 1] if part > 0 else 0
        return self.datasets[part][idx - start]


class ChainDataset(IterableDataset):
    """Iterable datasets one after another (lazily: parts are iterated in turn)."""

    def __init__(self, datasets):
        self.datasets = datasets

    def _parts(self):
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise AssertionError("ChainDataset only supports IterableDataset")
            yield d

    def __iter__(self):
        for d in self._parts():
            yield from d

    def __len__(self):
        return sum(len(d) for d in self._parts())


class Subset(Dataset[T_co]):
    """The samples of `dataset` at `indices`, in that order."""

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = indices
        # The DataLoader fetches batches through __getitems__; a subclass that
        # changes only __getitem__ would silently be bypassed.
        cls = type(self)
        if cls.__getitem__ is not Subset.__getitem__ and cls.__getitems__ is Subset.__getitems__:
            raise NotImplementedError(
                f"{cls.__name__} overrides __getitem__ but not __getitems__; the DataLoader "
                f"fetches batches through __getitems__, so override it too, e.g. "
                f"`def __getitems__(self, indices): return [self[i] for i in indices]`")

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __getitems__(self, indices):
        inner = [self.indices[i] for i in indices]
        getitems = getattr(self.dataset, "__getitems__", None)
        if callable(getitems):
            return getitems(inner)
        return [self.dataset[i] for i in inner]

    def __len__(self):
        return len(self.indices)


def _lengths_from_fractions(fractions, n):
    """Fractions summing to 1 -> integer lengths summing to n: floor each part,
    then hand the leftover items out one each, round robin from the first."""
    lengths = []
    for i, frac in enumerate(fractions):
        if frac < 0 or frac > 1:
            raise ValueError(f"Fraction at index {i} is not between 0 and 1 (got {frac})")
        lengths.append(math.floor(n * frac))
    for i in range(n - sum(lengths)):
        lengths[i % len(lengths)] += 1
    for i, length in enumerate(lengths):
        if length == 0:
            warnings.warn(f"Length of split at index {i} is 0. "
                          f"This might result in an empty dataset.", stacklevel=3)
    return lengths


def random_split(dataset, lengths, generator=ember.default_generator):
    """Split `dataset` into non-overlapping random `Subset`s of the given
    lengths (ints summing to len(dataset), or fractions summing to 1).
    One `randperm(len(dataset), generator=generator)` decides the split, so a
    seeded generator gives the same split as PyTorch with that seed."""
    n = len(dataset)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        lengths = _lengths_from_fractions(lengths, n)
    if sum(lengths) != n:
        raise ValueError(f"Sum of input lengths does not equal the length of the input dataset! "
                         f"(lengths {list(lengths)} sum to {sum(lengths)}, dataset has {n})")
    order = ember.randperm(n, generator=generator).tolist()
    ends = itertools.accumulate(lengths)
    return [Subset(dataset, order[end - length:end]) for end, length in zip(ends, lengths)]
