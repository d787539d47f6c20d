"""ember.utils.data: datasets, samplers, collation and the DataLoader.

Expected values are worked out by hand (orders, lengths, batches, collated
structures); where PyTorch is installed the same calls are made on
torch.utils.data and must give the same results -- ember's generators draw
the same numbers as PyTorch's, so even shuffled orders and random splits
agree for a given seed. Multi-process tests (class TestWorkers, `-k "not
Workers"` leaves them out) use 2 workers on tiny datasets.
"""
import collections
import multiprocessing
import os
import pickle
import time

import numpy as np
import pytest

import ember
from ember.utils.data import dataloader as dataloader_module
from ember.utils.data import (BatchSampler, ChainDataset, ConcatDataset, DataLoader, Dataset,
                              DistributedSampler, IterableDataset, RandomSampler, Sampler,
                              SequentialSampler, StackDataset, Subset, SubsetRandomSampler,
                              TensorDataset, WeightedRandomSampler, WorkerInfo, default_collate,
                              default_convert, get_worker_info, random_split)

needs_fork = pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(),
                                reason="worker tests define datasets in this module (need fork)")


# -- helpers -------------------------------------------------------------
def plain(x):
    """A comparable description of a (collated) structure from ember or torch."""
    if hasattr(x, "dtype") and hasattr(x, "shape") and hasattr(x, "tolist") \
            and not isinstance(x, np.ndarray):
        return ("tensor", str(x.dtype).split(".")[-1], tuple(x.shape), x.tolist())
    if isinstance(x, np.ndarray):
        return ("ndarray", str(x.dtype), x.tolist())
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return (type(x).__name__, tuple(plain(v) for v in x))
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, [plain(v) for v in x])
    if isinstance(x, dict):
        return (type(x).__name__, {k: plain(v) for k, v in x.items()})
    return x


def to_torch(x, torch):
    """The same sample with ember tensors replaced by torch tensors."""
    if isinstance(x, ember.Tensor):
        return torch.from_numpy(x.numpy().copy())
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return type(x)(*(to_torch(v, torch) for v in x))
    if isinstance(x, (list, tuple)):
        return type(x)(to_torch(v, torch) for v in x)
    if isinstance(x, dict):
        return type(x)((k, to_torch(v, torch)) for k, v in x.items())
    return x


def seeded(seed):
    g = ember.Generator()
    g.manual_seed(seed)
    return g


def torch_seeded(torch, seed):
    g = torch.Generator()
    g.manual_seed(seed)
    return g


def progress(iterable):
    """What tqdm does with a loader: ask len() once, then iterate, counting."""
    total = len(iterable)
    count = 0
    for item in iterable:
        count += 1
        yield item
    assert count == total


class Squares(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if not 0 <= i < self.n:
            raise IndexError(i)
        return i * i


class Stream(IterableDataset):
    """0..n-1; with shard=True each worker yields its own strided share."""

    def __init__(self, n, shard=False, length=None):
        self.n, self.shard, self.length = n, shard, length

    def __iter__(self):
        info = get_worker_info()
        if self.shard and info is not None:
            return iter(range(info.id, self.n, info.num_workers))
        return iter(range(self.n))

    def __len__(self):
        if self.length is None:
            raise TypeError("no length")
        return self.length


Point = collections.namedtuple("Point", ["x", "y"])


# -- datasets ------------------------------------------------------------
class TestDatasets:
    def test_base_dataset_needs_getitem(self):
        with pytest.raises(NotImplementedError):
            Dataset()[0]
        with pytest.raises(NotImplementedError):
            iter(IterableDataset())

    def test_tensor_dataset(self):
        x = ember.arange(12.).view(4, 3)
        y = ember.tensor([7, 8, 9, 10])
        ds = TensorDataset(x, y)
        assert len(ds) == 4
        a, b = ds[2]
        assert a.tolist() == [6., 7., 8.] and b.item() == 9
        assert [t.tolist() for t in ds[1:3]] == [[[3., 4., 5.], [6., 7., 8.]], [8, 9]]
        with pytest.raises(AssertionError, match="Size mismatch"):
            TensorDataset(x, ember.zeros(3))

    def test_concat_dataset_and_add(self):
        a, b, c = Squares(3), Squares(2), Squares(4)
        ds = a + b + c
        assert isinstance(ds, ConcatDataset)
        assert len(ds) == 9
        assert [ds[i] for i in range(9)] == [0, 1, 4, 0, 1, 0, 1, 4, 9]
        assert [ds[-i] for i in range(1, 10)] == [9, 4, 1, 0, 1, 0, 4, 1, 0]
        flat = ConcatDataset([a, b, c])
        assert flat.cumulative_sizes == [3, 5, 9]
        with pytest.raises(ValueError, match="absolute value"):
            flat[-10]
        with pytest.raises(IndexError):
            flat[9]
        with pytest.raises(AssertionError, match="empty"):
            ConcatDataset([])
        with pytest.raises(AssertionError, match="IterableDataset"):
            ConcatDataset([a, Stream(3)])

    def test_chain_dataset(self):
        chained = Stream(2) + Stream(3)
        assert isinstance(chained, ChainDataset)
        assert list(chained) == [0, 1, 0, 1, 2]
        assert len(ChainDataset([Stream(2, length=2), Stream(3, length=3)])) == 5
        with pytest.raises(AssertionError, match="only supports IterableDataset"):
            list(ChainDataset([Squares(2)]))

    def test_subset(self):
        sub = Subset(Squares(10), [9, 2, 5])
        assert len(sub) == 3
        assert [sub[i] for i in range(3)] == [81, 4, 25]
        assert sub.__getitems__([2, 0]) == [25, 81]
        nested = Subset(sub, [2, 1])  # the inner Subset's __getitems__ is used
        assert nested.__getitems__([0, 1]) == [25, 4]

        class Doubled(Subset):
            def __getitem__(self, i):
                return 2 * super().__getitem__(i)

        with pytest.raises(NotImplementedError, match="__getitems__"):
            Doubled(Squares(3), [0])

    def test_stack_dataset(self):
        tup = StackDataset(Squares(3), [10, 11, 12])
        assert tup[1] == (1, 11) and len(tup) == 3
        assert tup.__getitems__([2, 0]) == [(4, 12), (0, 10)]
        dct = StackDataset(sq=Squares(3), raw=[10, 11, 12])
        assert dct[2] == {"sq": 4, "raw": 12}
        assert dct.__getitems__([0]) == [{"sq": 0, "raw": 10}]
        with pytest.raises(ValueError, match="Size mismatch"):
            StackDataset(Squares(3), [1])
        with pytest.raises(ValueError, match="both"):
            StackDataset(Squares(1), b=Squares(1))
        with pytest.raises(ValueError, match="At least one"):
            StackDataset()


class TestRandomSplit:
    def test_int_lengths_partition_the_dataset(self):
        parts = random_split(range(10), [3, 7], generator=seeded(0))
        assert [len(p) for p in parts] == [3, 7]
        items = [p[i] for p in parts for i in range(len(p))]
        assert sorted(items) == list(range(10))
        # the split is randperm(10) cut at 3
        perm = ember.randperm(10, generator=seeded(0)).tolist()
        assert list(parts[0].indices) == perm[:3] and list(parts[1].indices) == perm[3:]

    @pytest.mark.parametrize("n, fractions, lengths", [
        (10, [0.3, 0.3, 0.4], [3, 3, 4]),
        (11, [0.5, 0.5], [6, 5]),          # floor 5 + 5, leftover 1 to the first
        (7, [0.25, 0.25, 0.25, 0.25], [2, 2, 2, 1]),  # 1 each, 3 left over round robin
    ])
    def test_fraction_lengths(self, n, fractions, lengths):
        parts = random_split(range(n), fractions, generator=seeded(1))
        assert [len(p) for p in parts] == lengths

    def test_zero_length_split_warns(self):
        # floors 1, 0, 0; the 2 left over go to splits 0 and 1
        with pytest.warns(UserWarning, match="index 2 is 0"):
            parts = random_split(range(3), [0.4, 0.3, 0.3], generator=seeded(0))
        assert [len(p) for p in parts] == [2, 1, 0]

    def test_errors(self):
        with pytest.raises(ValueError, match="Sum of input lengths"):
            random_split(range(10), [3, 4])
        with pytest.raises(ValueError, match="Sum of input lengths"):
            random_split(range(10), [0.5, 0.4])
        with pytest.raises(ValueError, match="not between 0 and 1"):
            random_split(range(10), [1.5, -0.5])

    def test_reproducible_with_default_generator(self):
        ember.manual_seed(5)
        first = [list(p.indices) for p in random_split(range(20), [10, 10])]
        ember.manual_seed(5)
        assert [list(p.indices) for p in random_split(range(20), [10, 10])] == first

    def test_same_split_as_torch(self, torch):
        ours = random_split(range(50), [0.7, 0.2, 0.1], generator=seeded(42))
        theirs = torch.utils.data.random_split(range(50), [0.7, 0.2, 0.1],
                                               generator=torch_seeded(torch, 42))
        assert [list(p.indices) for p in ours] == [list(p.indices) for p in theirs]


# -- samplers ------------------------------------------------------------
class TestSamplers:
    def test_sequential(self):
        s = SequentialSampler(range(5))
        assert list(s) == [0, 1, 2, 3, 4] and len(s) == 5

    def test_random_is_a_permutation_and_reproducible(self):
        s = RandomSampler(range(10), generator=seeded(3))
        assert sorted(s) == list(range(10))
        assert list(RandomSampler(range(10), generator=seeded(3))) == \
            ember.randperm(10, generator=seeded(3)).tolist()
        ember.manual_seed(0)
        first = list(RandomSampler(range(10)))
        ember.manual_seed(0)
        assert list(RandomSampler(range(10))) == first
        assert len(s) == 10

    def test_random_num_samples_beyond_dataset(self):
        s = RandomSampler(range(4), num_samples=10, generator=seeded(0))
        out = list(s)
        assert len(out) == len(s) == 10
        # two whole permutations, then the start of a third
        assert sorted(out[:4]) == sorted(out[4:8]) == [0, 1, 2, 3]
        assert len(set(out[8:])) == 2

    def test_random_with_replacement(self):
        s = RandomSampler(range(3), replacement=True, num_samples=100, generator=seeded(0))
        out = list(s)
        assert len(out) == 100 and set(out) == {0, 1, 2}

    def test_random_errors(self):
        with pytest.raises(TypeError, match="replacement"):
            RandomSampler(range(3), replacement=1)
        with pytest.raises(ValueError, match="num_samples"):
            RandomSampler(range(3), num_samples=0)
        with pytest.raises(ValueError, match="num_samples"):
            RandomSampler([])

    def test_subset_random(self):
        s = SubsetRandomSampler([10, 20, 30, 40], generator=seeded(0))
        perm = ember.randperm(4, generator=seeded(0)).tolist()
        assert list(s) == [[10, 20, 30, 40][i] for i in perm] and len(s) == 4

    def test_weighted(self):
        s = WeightedRandomSampler([0.0, 1.0, 0.0, 3.0], 200, generator=seeded(0))
        out = list(s)
        assert len(out) == len(s) == 200 and set(out) == {1, 3}
        assert 120 < out.count(3) < 180  # 3 to 1 odds
        no_repeat = list(WeightedRandomSampler([1, 2, 3, 4], 4, replacement=False,
                                               generator=seeded(0)))
        assert sorted(no_repeat) == [0, 1, 2, 3]
        with pytest.raises(ValueError, match="num_samples"):
            WeightedRandomSampler([1.0], 0)
        with pytest.raises(ValueError, match="num_samples"):
            WeightedRandomSampler([1.0], True)
        with pytest.raises(ValueError, match="replacement"):
            WeightedRandomSampler([1.0], 1, replacement=None)
        with pytest.raises(ValueError, match=r"1d sequence.*\(2, 2\)"):
            WeightedRandomSampler([[1.0, 2.0], [3.0, 4.0]], 1)

    def test_batch_sampler(self):
        assert list(BatchSampler(range(10), 3, False)) == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
        assert list(BatchSampler(range(10), 3, True)) == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
        assert len(BatchSampler(range(10), 3, False)) == 4
        assert len(BatchSampler(range(10), 3, True)) == 3
        assert list(BatchSampler(range(6), 3, True)) == [[0, 1, 2], [3, 4, 5]]
        assert list(BatchSampler(range(0), 3, False)) == []
        for bad in (0, -1, 2.0, True):
            with pytest.raises(ValueError, match="batch_size"):
                BatchSampler(range(3), bad, False)
        with pytest.raises(ValueError, match="drop_last"):
            BatchSampler(range(3), 2, 1)

    def test_sampler_base(self):
        class Evens(Sampler):
            def __iter__(self):
                return iter([0, 2, 4])

        assert list(Evens()) == [0, 2, 4]
        with pytest.raises(NotImplementedError):
            iter(Sampler())

    def test_samplers_match_torch(self, torch):
        tud = torch.utils.data
        cases = [
            (lambda g: RandomSampler(range(37), generator=g),
             lambda g: tud.RandomSampler(range(37), generator=g)),
            (lambda g: RandomSampler(range(5), num_samples=13, generator=g),
             lambda g: tud.RandomSampler(range(5), num_samples=13, generator=g)),
            (lambda g: RandomSampler(range(9), replacement=True, num_samples=75, generator=g),
             lambda g: tud.RandomSampler(range(9), replacement=True, num_samples=75,
                                         generator=g)),
            (lambda g: SubsetRandomSampler([5, 6, 7, 8, 9], generator=g),
             lambda g: tud.SubsetRandomSampler([5, 6, 7, 8, 9], generator=g)),
            (lambda g: WeightedRandomSampler([0.1, 0.9, 0.4, 0.7, 3.0, 0.6], 40, generator=g),
             lambda g: tud.WeightedRandomSampler([0.1, 0.9, 0.4, 0.7, 3.0, 0.6], 40,
                                                 generator=g)),
            (lambda g: WeightedRandomSampler([0.9, 0.4, 0.05, 0.2, 0.3], 5, False, generator=g),
             lambda g: tud.WeightedRandomSampler([0.9, 0.4, 0.05, 0.2, 0.3], 5, False,
                                                 generator=g)),
        ]
        for ours, theirs in cases:
            assert list(ours(seeded(7))) == list(theirs(torch_seeded(torch, 7)))
        # without a generator: one draw from the default generator per epoch
        ember.manual_seed(11)
        torch.manual_seed(11)
        assert list(RandomSampler(range(20))) == list(tud.RandomSampler(range(20)))


class TestDistributedSampler:
    def test_padding_by_wrapping(self):
        ranks = [list(DistributedSampler(range(10), 3, r, shuffle=False)) for r in range(3)]
        # 0..9 padded with 0, 1 to 12 items, then every third from the rank
        assert ranks == [[0, 3, 6, 9], [1, 4, 7, 0], [2, 5, 8, 1]]
        assert len(DistributedSampler(range(10), 3, 0)) == 4

    def test_drop_last(self):
        ranks = [list(DistributedSampler(range(10), 3, r, shuffle=False, drop_last=True))
                 for r in range(3)]
        assert ranks == [[0, 3, 6], [1, 4, 7], [2, 5, 8]]

    def test_tiny_dataset_wraps_several_times(self):
        ranks = [list(DistributedSampler(range(2), 5, r, shuffle=False)) for r in range(5)]
        assert ranks == [[0], [1], [0], [1], [0]]

    def test_shuffle_seed_and_epoch(self):
        def epoch(e, seed=0):
            out = []
            for r in range(2):
                s = DistributedSampler(range(8), num_replicas=2, rank=r, seed=seed)
                s.set_epoch(e)
                out.append(list(s))
            return out

        e0 = epoch(0)
        perm = ember.randperm(8, generator=seeded(0)).tolist()
        assert e0 == [perm[0::2], perm[1::2]]
        e1 = epoch(1)
        assert e1 == [ember.randperm(8, generator=seeded(1)).tolist()[r::2] for r in range(2)]
        assert epoch(0, seed=1) == e1  # the permutation is seeded with seed + epoch
        assert epoch(0) == e0

    def test_errors(self):
        with pytest.raises(ValueError, match="process group"):
            DistributedSampler(range(4))
        with pytest.raises(ValueError, match="process group"):
            DistributedSampler(range(4), num_replicas=2)
        with pytest.raises(ValueError, match=r"Invalid rank 2.*\[0, 1\]"):
            DistributedSampler(range(4), num_replicas=2, rank=2)
        with pytest.raises(ValueError, match="Invalid rank -1"):
            DistributedSampler(range(4), num_replicas=2, rank=-1)

    def test_matches_torch(self, torch):
        from torch.utils.data.distributed import DistributedSampler as TorchDS
        for n, replicas, drop_last in [(10, 3, False), (10, 3, True), (7, 4, False), (3, 5, False)]:
            for rank in range(replicas):
                ours = DistributedSampler(range(n), replicas, rank, seed=4, drop_last=drop_last)
                theirs = TorchDS(range(n), replicas, rank, seed=4, drop_last=drop_last)
                ours.set_epoch(2)
                theirs.set_epoch(2)
                assert list(ours) == list(theirs) and len(ours) == len(theirs)


# -- collation -----------------------------------------------------------
COLLATE_CASES = {
    "tensors": [ember.tensor([1., 2.]), ember.tensor([3., 4.])],
    "ints": [1, 2, 3],
    "floats": [1.5, 2.0],
    "bools": [True, False],
    "strings": ["a", "b"],
    "bytes": [b"a", b"b"],
    "numpy arrays": [np.array([1, 2], dtype=np.int32), np.array([3, 4], dtype=np.int32)],
    "numpy scalars": [np.float32(1.5), np.float32(2.5)],
    "tuples": [(ember.tensor(1), "a", 0.5), (ember.tensor(2), "b", 1.5)],
    "dicts": [{"x": ember.zeros(2), "label": 1}, {"x": ember.ones(2), "label": 0}],
    "namedtuples": [Point(1, 2.0), Point(3, 4.0)],
    "nested lists": [[[1, 2], [3]], [[4, 5], [6]]],
    "ordered dict": [collections.OrderedDict(b=1, a=2), collections.OrderedDict(b=3, a=4)],
}


class TestCollate:
    def test_tensors_are_stacked(self):
        out = default_collate([ember.tensor([1., 2.]), ember.tensor([3., 4.])])
        assert out.shape == (2, 2) and out.tolist() == [[1., 2.], [3., 4.]]

    def test_python_numbers(self):
        ints = default_collate([1, 2, 3])
        assert ints.dtype == ember.int64 and ints.tolist() == [1, 2, 3]
        floats = default_collate([1.5, 2])
        assert floats.dtype == ember.float64 and floats.tolist() == [1.5, 2.0]
        bools = default_collate([True, False])
        assert bools.dtype == ember.bool and bools.tolist() == [True, False]

    def test_numpy(self):
        arr = default_collate([np.arange(3, dtype=np.float32), np.ones(3, dtype=np.float32)])
        assert arr.dtype == ember.float32 and arr.tolist() == [[0, 1, 2], [1, 1, 1]]
        sc = default_collate([np.int16(3), np.int16(4)])
        assert sc.dtype == ember.int16 and sc.tolist() == [3, 4]
        with pytest.raises(TypeError, match="found <U1"):
            default_collate([np.array(["a"]), np.array(["b"])])

    def test_strings_stay_lists(self):
        assert default_collate(["a", "bc"]) == ["a", "bc"]

    def test_structures(self):
        out = default_collate([(ember.tensor(1), "a"), (ember.tensor(2), "b")])
        # a list of fields; a string field stays the tuple zip() made (as in torch)
        assert isinstance(out, list) and out[0].tolist() == [1, 2] and out[1] == ("a", "b")
        d = default_collate([{"x": ember.zeros(2), "y": 1}, {"x": ember.ones(2), "y": 0}])
        assert set(d) == {"x", "y"} and d["x"].tolist() == [[0, 0], [1, 1]]
        assert d["y"].tolist() == [1, 0]
        p = default_collate([Point(1, 2.0), Point(3, 4.0)])
        assert type(p) is Point and p.x.tolist() == [1, 3] and p.y.dtype == ember.float64
        nested = default_collate([[[1, 2], [3]], [[4, 5], [6]]])
        assert [[t.tolist() for t in inner] for inner in nested] == [[[1, 4], [2, 5]], [[3, 6]]]
        od = default_collate([collections.OrderedDict(b=1, a=2)] * 2)
        assert type(od) is collections.OrderedDict and list(od) == ["b", "a"]

    def test_errors(self):
        with pytest.raises(RuntimeError, match=r"stack expects each tensor to be equal size"):
            default_collate([ember.zeros(2), ember.zeros(3)])
        with pytest.raises(RuntimeError, match="equal size"):
            default_collate([[1, 2], [3]])
        with pytest.raises(TypeError, match="found <class 'object'>"):
            default_collate([object(), object()])

    def test_default_convert(self):
        assert default_convert(5) == 5 and default_convert("s") == "s"
        t = default_convert(np.arange(3))
        assert isinstance(t, ember.Tensor) and t.tolist() == [0, 1, 2]
        out = default_convert({"a": np.float64(1.5), "b": (np.zeros(1), 2)})
        assert out["a"].dtype == ember.float64 and out["a"].item() == 1.5
        assert isinstance(out["b"], list) and out["b"][0].tolist() == [0.0] and out["b"][1] == 2
        strings = np.array(["x"])
        assert default_convert(strings) is strings
        p = default_convert(Point(np.int64(1), [np.int64(2)]))
        assert type(p) is Point and p.x.item() == 1 and p.y[0].item() == 2

    @pytest.mark.parametrize("name", sorted(COLLATE_CASES))
    def test_matches_torch(self, torch, name):
        from torch.utils.data import default_collate as torch_collate
        batch = COLLATE_CASES[name]
        assert plain(default_collate(batch)) == plain(torch_collate(to_torch(batch, torch)))

    def test_convert_matches_torch(self, torch):
        from torch.utils.data import default_convert as torch_convert
        for sample in [np.arange(4.0), {"a": (np.int32(3), "s")}, [np.zeros(2), 1.5],
                       Point(np.ones(2), "y")]:
            assert plain(default_convert(sample)) == plain(torch_convert(sample))


# -- DataLoader, one process ---------------------------------------------
def tensors(n=10):
    return TensorDataset(ember.arange(float(n)), ember.arange(n) * 10)


class TestDataLoader:
    @pytest.mark.parametrize("n, batch_size, drop_last, expected_len", [
        (10, 3, False, 4), (10, 3, True, 3), (9, 3, True, 3), (2, 5, False, 1),
        (2, 5, True, 0), (0, 4, False, 0), (10, 1, False, 10)])
    def test_len_and_batches(self, n, batch_size, drop_last, expected_len):
        loader = DataLoader(Squares(n), batch_size=batch_size, drop_last=drop_last)
        batches = [b.tolist() for b in loader]
        assert len(loader) == len(batches) == expected_len
        flat = [v for b in batches for v in b]
        assert flat == [i * i for i in range(len(flat))]
        assert all(len(b) == batch_size for b in batches[:-1])

    def test_tensor_dataset_batches(self):
        batches = list(DataLoader(tensors(), batch_size=4))
        assert [(x.tolist(), y.tolist()) for x, y in batches] == [
            ([0., 1., 2., 3.], [0, 10, 20, 30]), ([4., 5., 6., 7.], [40, 50, 60, 70]),
            ([8., 9.], [80, 90])]
        assert isinstance(batches[0], list)  # tuples collate to lists, as in torch

    def test_enumerate_and_progress_bar(self):
        loader = DataLoader(tensors(), batch_size=3)
        seen = [(i, y.tolist()) for i, (x, y) in enumerate(progress(loader))]
        assert seen == [(0, [0, 10, 20]), (1, [30, 40, 50]), (2, [60, 70, 80]), (3, [90])]
        it = iter(loader)
        assert len(it) == 4 and iter(it) is it

    def test_no_auto_batching(self):
        loader = DataLoader([np.float32(1.5), np.arange(2)], batch_size=None)
        out = list(loader)
        assert len(loader) == 2
        assert out[0].dtype == ember.float32 and out[0].item() == 1.5  # default_convert
        assert out[1].tolist() == [0, 1]

    def test_shuffle_reproducible(self):
        def order(**kw):
            return [v for b in DataLoader(Squares(12), batch_size=5, shuffle=True, **kw)
                    for v in b.tolist()]

        a = order(generator=seeded(0))
        assert sorted(a) == sorted(i * i for i in range(12))
        assert order(generator=seeded(0)) == a
        assert order(generator=seeded(1)) != a
        ember.manual_seed(3)
        b = order()
        ember.manual_seed(3)
        assert order() == b

    def test_epochs_reshuffle(self):
        loader = DataLoader(Squares(20), batch_size=20, shuffle=True, generator=seeded(0))
        e1, e2 = next(iter(loader)).tolist(), next(iter(loader)).tolist()
        assert sorted(e1) == sorted(e2) and e1 != e2

    def test_custom_sampler_batch_sampler_collate(self):
        loader = DataLoader(Squares(6), sampler=[5, 0, 3], batch_size=2)
        assert [b.tolist() for b in loader] == [[25, 0], [9]]
        loader = DataLoader(Squares(6), batch_sampler=[[1, 2], [5]])
        assert [b.tolist() for b in loader] == [[1, 4], [25]] and len(loader) == 2
        assert loader.batch_size is None and loader.drop_last is False
        loader = DataLoader(Squares(4), batch_size=2, collate_fn=lambda b: tuple(b))
        assert list(loader) == [(0, 1), (4, 9)]

    def test_getitems_used_for_batches(self):
        class Batched(Squares):
            def __getitems__(self, keys):
                return [-k for k in keys]

        assert [b.tolist() for b in DataLoader(Batched(5), batch_size=2)] == [[0, -1], [-2, -3],
                                                                                [-4]]

    def test_iterable_dataset(self):
        assert [b.tolist() for b in DataLoader(Stream(7), batch_size=3)] == [[0, 1, 2], [3, 4, 5],
                                                                             [6]]
        assert [b.tolist() for b in DataLoader(Stream(7), batch_size=3, drop_last=True)] == \
            [[0, 1, 2], [3, 4, 5]]
        assert list(DataLoader(Stream(3), batch_size=None)) == [0, 1, 2]  # default_convert
        with pytest.raises(TypeError, match="no length"):
            len(DataLoader(Stream(3)))

    @pytest.mark.parametrize("length, batch_size, drop_last, expected", [
        (7, 3, False, 3), (7, 3, True, 2), (7, None, False, 7), (6, 3, True, 2)])
    def test_iterable_dataset_len(self, length, batch_size, drop_last, expected):
        loader = DataLoader(Stream(length, length=length), batch_size=batch_size,
                            drop_last=drop_last)
        assert len(loader) == expected

    def test_iterable_dataset_longer_than_reported_warns(self):
        loader = DataLoader(Stream(5, length=3), batch_size=None)
        assert len(loader) == 3
        with pytest.warns(UserWarning, match="reported to be 3"):
            assert len(list(loader)) == 5

    def test_pin_memory_is_accepted(self):
        loader = DataLoader(tensors(4), batch_size=2, pin_memory=True)
        if ember.cuda.is_available():
            pytest.skip("pinning is real with CUDA")
        with pytest.warns(UserWarning, match="no accelerator"):  # as torch warns, then ignores it
            assert [y.tolist() for _, y in loader] == [[0, 10], [20, 30]]

    def test_reachable_as_torch_utils_data(self):
        import ember as torch
        assert torch.utils.data.DataLoader is DataLoader
        # type hints users write, evaluated at import time
        assert DataLoader[int] is not None and Dataset[int] and Sampler[int]
        from ember.utils.data.dataloader import default_collate as dc
        assert dc is default_collate

    def test_worker_info_is_none_in_main_process(self):
        assert get_worker_info() is None
        info = WorkerInfo(id=1, num_workers=2, seed=5, dataset=None)
        assert repr(info) == "WorkerInfo(id=1, num_workers=2, seed=5, dataset=None)"
        with pytest.raises(RuntimeError, match="Cannot assign attributes to WorkerInfo"):
            info.id = 0

    def test_attributes_frozen_after_init(self):
        loader = DataLoader(Squares(3))
        for attr in ("batch_size", "sampler", "batch_sampler", "drop_last", "dataset",
                     "persistent_workers"):
            with pytest.raises(ValueError, match=f"{attr} attribute should not be set"):
                setattr(loader, attr, None)
        loader.num_workers = 0  # other attributes may change

    @pytest.mark.parametrize("kwargs, exc, match", [
        (dict(batch_sampler=[[0]], batch_size=2), ValueError, "mutually exclusive"),
        (dict(batch_sampler=[[0]], shuffle=True), ValueError, "mutually exclusive"),
        (dict(batch_sampler=[[0]], sampler=[0]), ValueError, "mutually exclusive"),
        (dict(batch_sampler=[[0]], drop_last=True), ValueError, "mutually exclusive"),
        (dict(sampler=[0], shuffle=True), ValueError, "sampler option is mutually exclusive"),
        (dict(batch_size=None, drop_last=True), ValueError, "batch_size=None"),
        (dict(batch_size=0), ValueError, "batch_size should be a positive integer"),
        (dict(num_workers=-1), ValueError, "num_workers option should be non-negative"),
        (dict(timeout=-1), ValueError, "timeout option should be non-negative"),
        (dict(prefetch_factor=2), ValueError, "prefetch_factor option could only be specified"),
        (dict(num_workers=1, prefetch_factor=-1), ValueError, "prefetch_factor"),
        (dict(persistent_workers=True), ValueError, "persistent_workers option needs"),
        (dict(multiprocessing_context="fork"), ValueError, "num_workers > 0"),
        (dict(num_workers=1, multiprocessing_context="nope"), ValueError, "valid start method"),
        (dict(num_workers=1, multiprocessing_context=3), TypeError, "valid context"),
    ])
    def test_argument_errors(self, kwargs, exc, match):
        with pytest.raises(exc, match=match):
            DataLoader(Squares(4), **kwargs)

    @pytest.mark.parametrize("kwargs", [dict(shuffle=True), dict(sampler=[0]),
                                        dict(batch_sampler=[[0]])])
    def test_iterable_dataset_rejects_samplers(self, kwargs):
        with pytest.raises(ValueError, match="DataLoader with IterableDataset: expected "
                                             "unspecified"):
            DataLoader(Stream(3), **kwargs)
        DataLoader(Stream(3), shuffle=False)  # an explicit False is fine

    def test_timeout_needs_workers(self):
        loader = DataLoader(Squares(3), timeout=1)
        with pytest.raises(AssertionError, match="num_workers"):
            iter(loader)

    def test_iterator_not_picklable(self):
        with pytest.raises(NotImplementedError):
            pickle.dumps(iter(DataLoader(Squares(3))))

    def test_dataset_errors_propagate(self):
        loader = DataLoader(Squares(3), sampler=[0, 7])
        with pytest.raises(IndexError):
            list(loader)

    def test_matches_torch(self, torch):
        tud = torch.utils.data
        x = np.arange(22, dtype=np.float32).reshape(11, 2)
        y = np.arange(11)
        ours_ds = TensorDataset(ember.as_tensor(x), ember.as_tensor(y))
        theirs_ds = tud.TensorDataset(torch.as_tensor(x), torch.as_tensor(y))
        for kw in [dict(batch_size=4), dict(batch_size=4, drop_last=True), dict(batch_size=None),
                   dict(batch_size=3, shuffle=True), dict(batch_size=11, shuffle=True)]:
            ours = DataLoader(ours_ds, generator=seeded(9), **kw)
            theirs = tud.DataLoader(theirs_ds, generator=torch_seeded(torch, 9), **kw)
            assert len(ours) == len(theirs)
            assert plain(list(ours)) == plain(list(theirs)), kw
        # shuffling from the default generator, over two epochs
        ember.manual_seed(21)
        torch.manual_seed(21)
        ours = DataLoader(ours_ds, batch_size=5, shuffle=True)
        theirs = tud.DataLoader(theirs_ds, batch_size=5, shuffle=True)
        for _ in range(2):
            assert plain(list(ours)) == plain(list(theirs))
        # structured samples: dicts of arrays, strings and numbers
        samples = [{"img": np.full((2, 2), i, dtype=np.uint8), "name": f"s{i}", "w": i / 2}
                   for i in range(5)]
        ours = list(DataLoader(samples, batch_size=2))
        theirs = list(tud.DataLoader(samples, batch_size=2))
        assert plain(ours) == plain(theirs)

    def test_iterable_len_matches_torch(self, torch):
        class TorchStream(torch.utils.data.IterableDataset):
            def __iter__(self):
                return iter(range(7))

            def __len__(self):
                return 7

        for kw in [dict(batch_size=3), dict(batch_size=3, drop_last=True), dict(batch_size=None)]:
            ours = DataLoader(Stream(7, length=7), **kw)
            theirs = torch.utils.data.DataLoader(TorchStream(), **kw)
            assert len(ours) == len(theirs)
            assert plain(list(ours)) == plain(list(theirs))


def test_tensors_pickle():
    """Batches travel from workers by pickle: ember tensors must round-trip."""
    t = ember.arange(6.).view(2, 3).t()  # non-contiguous
    back = pickle.loads(pickle.dumps(t))
    assert back.dtype == ember.float32 and back.tolist() == [[0., 3.], [1., 4.], [2., 5.]]


# -- DataLoader with worker processes ------------------------------------
class WhoLoads(Dataset):
    """Sample i reports which worker fetched it, that worker's seed, and a
    value from the worker's NumPy and ember generators."""

    def __len__(self):
        return 8

    def __getitem__(self, i):
        info = get_worker_info()
        return {"i": i, "worker": info.id, "seed": info.seed, "of": info.num_workers,
                "np": float(np.random.rand()), "ember": float(ember.rand(1).item()),
                "init": _INIT_MARK.get("worker", -1)}


_INIT_MARK = {}


def _mark_init(worker_id):
    _INIT_MARK["worker"] = worker_id * 100


def _fail_init(worker_id):
    raise ValueError(f"init failed in {worker_id}")


class Failing(Squares):
    def __init__(self, n, bad, exc=ValueError):
        super().__init__(n)
        self.bad, self.exc = bad, exc

    def __getitem__(self, i):
        if i == self.bad:
            raise self.exc(f"sample {i} is broken")
        return super().__getitem__(i)


class BrokenStream(IterableDataset):
    def __iter__(self):
        raise RuntimeError("no stream")


class Dies(Squares):
    def __getitem__(self, i):
        if i == 3:
            os._exit(7)
        return super().__getitem__(i)


class Slow(Squares):
    def __getitem__(self, i):
        if i >= 2:
            time.sleep(30)
        return super().__getitem__(i)


class Unpicklable(Squares):
    def __getitem__(self, i):
        return lambda: i


@needs_fork
class TestWorkers:
    def test_same_batches_as_one_process(self):
        ds = tensors(11)
        for kw in [dict(batch_size=3), dict(batch_size=3, drop_last=True), dict(batch_size=None),
                   dict(batch_size=2, shuffle=True)]:
            single = DataLoader(ds, generator=seeded(2), **kw)
            multi = DataLoader(ds, num_workers=2, generator=seeded(2), **kw)
            assert len(multi) == len(single)
            assert plain(list(enumerate(progress(multi)))) == plain(list(enumerate(single)))

    def test_worker_info_seeds_and_init_fn(self):
        loader = DataLoader(WhoLoads(), batch_size=2, num_workers=2, worker_init_fn=_mark_init,
                            generator=seeded(0))
        batches = list(loader)
        # batches go to workers round robin: 0, 1, 0, 1
        assert [b["worker"].tolist() for b in batches] == [[0, 0], [1, 1], [0, 0], [1, 1]]
        assert [b["i"].tolist() for b in batches] == [[0, 1], [2, 3], [4, 5], [6, 7]]
        assert all(b["of"].tolist() == [2, 2] for b in batches)
        assert [b["init"].tolist() for b in batches] == [[0, 0], [100, 100]] * 2
        base = ember.empty((), dtype=ember.int64).random_(generator=seeded(0)).item()
        assert [b["seed"].tolist()[0] for b in batches] == [base, base + 1] * 2
        # each worker's generators are seeded from its seed: reproducible, different
        again = list(DataLoader(WhoLoads(), batch_size=2, num_workers=2, generator=seeded(0)))
        assert plain([b["np"] for b in again]) == plain([b["np"] for b in batches])
        assert plain([b["ember"] for b in again]) == plain([b["ember"] for b in batches])
        assert batches[0]["np"].tolist() != batches[1]["np"].tolist()
        ember.manual_seed(int(base))
        assert batches[0]["ember"].tolist()[0] == pytest.approx(ember.rand(1).item())

    def test_worker_seeds_match_torch(self, torch):
        from torch.utils.data._utils.worker import _generate_state
        from ember.utils.data._worker import _numpy_seed
        ours = [b["seed"].tolist() for b in DataLoader(WhoLoads(), batch_size=4, num_workers=2,
                                                       generator=seeded(5))]
        base = torch.empty((), dtype=torch.int64).random_(generator=torch_seeded(torch, 5)).item()
        assert ours == [[base] * 4, [base + 1] * 4]
        for worker_id in range(3):
            assert list(_numpy_seed(base, worker_id)) == _generate_state(base, worker_id)

    def test_iterable_dataset_sharding(self):
        loader = DataLoader(Stream(9, shard=True), batch_size=2, num_workers=2)
        batches = [b.tolist() for b in loader]
        # worker 0 streams 0,2,4,6,8 and worker 1 streams 1,3,5,7; batches alternate
        assert batches == [[0, 2], [1, 3], [4, 6], [5, 7], [8]]
        unsharded = [v for b in DataLoader(Stream(3), batch_size=2, num_workers=2) for v in b]
        assert sorted(unsharded) == [0, 0, 1, 1, 2, 2]  # every worker yields everything

    def test_worker_exception_reraised_with_traceback(self):
        loader = DataLoader(Failing(8, bad=5), batch_size=2, num_workers=2)
        it = iter(loader)
        assert next(it).tolist() == [0, 1] and next(it).tolist() == [4, 9]
        with pytest.raises(ValueError) as info:
            next(it)
        msg = str(info.value)
        assert "Caught ValueError in DataLoader worker process 0" in msg
        assert "Traceback (most recent call last)" in msg and "sample 5 is broken" in msg
        assert "__getitem__" in msg
        assert next(it).tolist() == [36, 49]  # later batches still arrive

    def test_worker_key_error_reads_well(self):
        with pytest.raises(KeyError) as info:
            list(DataLoader(Failing(4, bad=1, exc=KeyError), num_workers=2))
        assert "Caught KeyError in DataLoader worker process 1" in str(info.value)
        assert "\\n" not in str(info.value)

    def test_worker_init_fn_exception(self):
        with pytest.raises(ValueError, match="init failed in 0"):
            list(DataLoader(Squares(4), num_workers=2, worker_init_fn=_fail_init))

    def test_iterable_dataset_iter_error(self):
        with pytest.raises(RuntimeError, match="(?s)Caught RuntimeError in DataLoader worker "
                                               "process 0.*no stream"):
            list(DataLoader(BrokenStream(), num_workers=2))
        with pytest.raises(RuntimeError, match="no stream"):
            iter(DataLoader(BrokenStream()))

    def test_dead_worker_raises(self):
        start = time.monotonic()
        with pytest.raises(RuntimeError, match=r"exit code 7\)\) exited unexpectedly"):
            list(DataLoader(Dies(6), num_workers=2))
        assert time.monotonic() - start < 10

    def test_timeout(self, monkeypatch):
        monkeypatch.setattr(dataloader_module, "_SHUTDOWN_TIMEOUT", 0.5)  # then terminate
        loader = DataLoader(Slow(4), batch_size=1, num_workers=2, timeout=1.0)
        it = iter(loader)
        assert next(it).item() == 0
        start = time.monotonic()
        with pytest.raises(RuntimeError, match="timed out after 1.0 seconds"):
            while True:
                next(it)
        assert time.monotonic() - start < 10
        assert not any(w.is_alive() for w in it._workers)

    def test_unpicklable_batch_is_an_error_not_a_hang(self):
        with pytest.raises(Exception, match="pickl"):
            list(DataLoader(Unpicklable(2), batch_size=None, num_workers=2, timeout=20))

    def test_break_and_delete_mid_epoch(self, monkeypatch):
        monkeypatch.setattr(dataloader_module, "_SHUTDOWN_TIMEOUT", 0.5)  # then terminate
        loader = DataLoader(Slow(50), batch_size=1, num_workers=2)
        it = iter(loader)
        assert next(it).item() == 0
        workers = list(it._workers)
        start = time.monotonic()
        del it  # workers are busy sleeping in __getitem__: they get terminated
        assert time.monotonic() - start < 10
        assert not any(w.is_alive() for w in workers)

        loader = DataLoader(Squares(100), batch_size=2, num_workers=2)
        for i, _ in enumerate(loader):
            if i == 3:
                break  # the for loop drops the iterator here
        del loader

    def test_persistent_workers(self):
        loader = DataLoader(WhoLoads(), batch_size=3, num_workers=2, persistent_workers=True)
        first = list(loader)
        pids = [w.pid for w in loader._iterator._workers]
        second = list(loader)
        assert [w.pid for w in loader._iterator._workers] == pids
        assert [b["i"].tolist() for b in first] == [b["i"].tolist() for b in second] == \
            [[0, 1, 2], [3, 4, 5], [6, 7]]
        # an epoch abandoned half way: the next one still starts from the beginning
        it = iter(loader)
        next(it)
        assert [b["i"].tolist() for b in loader] == [[0, 1, 2], [3, 4, 5], [6, 7]]
        # iterable datasets start again each epoch
        stream = DataLoader(Stream(5, shard=True), batch_size=2, num_workers=2,
                            persistent_workers=True)
        assert [b.tolist() for b in stream] == [b.tolist() for b in stream] == \
            [[0, 2], [1, 3], [4]]
        loader._iterator._shutdown_workers()
        assert not any(w.is_alive() for w in loader._iterator._workers)

    def test_out_of_order(self):
        loader = DataLoader(Squares(9), batch_size=2, num_workers=2, in_order=False)
        assert sorted(v for b in loader for v in b.tolist()) == [i * i for i in range(9)]

    def test_spawn_context(self):
        loader = DataLoader(Squares(4), batch_size=2, num_workers=1,
                            multiprocessing_context="spawn")
        assert [b.tolist() for b in loader] == [[0, 1], [4, 9]]
