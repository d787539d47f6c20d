"""DataLoader (torch.utils.data.dataloader): iterate a dataset in batches.

The loader itself only validates and stores its options; each `iter(loader)`
makes an iterator that does the work:

- `_SingleProcessDataLoaderIter` fetches each batch in the main process;
- `_MultiProcessingDataLoaderIter` hands batch keys to `num_workers` worker
  processes (round robin, `prefetch_factor` batches per worker in flight)
  and yields their results in sampler order (or as they come, with
  in_order=False). Batches come back pickled through a multiprocessing
  queue. A worker's exception is raised again in the main process with the
  worker's traceback text; a worker that dies, or a `timeout` that passes,
  raises RuntimeError instead of hanging; the workers are shut down when the
  epoch ends, on error, and when the iterator is dropped (e.g. `break`).

Randomness: each iterator first draws a base seed from `generator` (or the
default generator) as PyTorch does; worker i seeds `random`, ember and NumPy
from base_seed + i. With shuffle=True the order comes from RandomSampler.
"""
import itertools
import math
import multiprocessing
import os
import pickle
import queue
import time
import warnings
from typing import Generic, TypeVar

import ember

from . import _worker
from ._collate import default_collate, default_convert
from ._fetch import _create_fetcher
from .dataset import IterableDataset
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler

__all__ = ["DataLoader", "default_collate", "default_convert", "get_worker_info"]

get_worker_info = _worker.get_worker_info
T_co = TypeVar("T_co", covariant=True)

# Seconds to wait for workers to exit on shutdown before terminating them.
_SHUTDOWN_TIMEOUT = 5.0


class _InfiniteConstantSampler(Sampler):
    """Keys for an IterableDataset: None forever (the dataset decides when to stop)."""

    def __iter__(self):
        while True:
            yield None


def _cpu_count():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class DataLoader(Generic[T_co]):
    """Combines a dataset and a sampler and iterates over batches of samples.
    Same arguments, defaults and validation as torch.utils.data.DataLoader."""

    _initialized = False

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor=None, persistent_workers=False, pin_memory_device="",
                 in_order=True):
        if not isinstance(num_workers, int) or num_workers < 0:
            raise ValueError(f"num_workers option should be non-negative; use num_workers=0 to "
                             f"disable multiprocessing (got num_workers={num_workers})")
        if timeout < 0:
            raise ValueError(f"timeout option should be non-negative (got timeout={timeout})")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in multiprocessing. "
                             "let num_workers > 0 to enable multiprocessing, otherwise set "
                             "prefetch_factor to None.")
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        elif prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError(f"prefetch_factor option should be non-negative "
                             f"(got prefetch_factor={prefetch_factor})")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")

        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.in_order = in_order

        if isinstance(dataset, IterableDataset):
            self._dataset_kind_iterable = True
            if shuffle not in (False, None):
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified shuffle "
                                 f"option, but got shuffle={shuffle}")
            if sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified sampler "
                                 f"option, but got sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified "
                                 f"batch_sampler option, but got batch_sampler={batch_sampler}")
        else:
            self._dataset_kind_iterable = False
            shuffle = bool(shuffle)

        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
            batch_size = None  # the batch sampler decides
            drop_last = False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually "
                             "exclusive with drop_last")

        if sampler is None:
            if self._dataset_kind_iterable:
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)

        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.generator = generator
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn
        self.persistent_workers = persistent_workers
        self._IterableDataset_len_called = None  # len(self) reported for an IterableDataset
        self._iterator = None  # the persistent workers' iterator
        self._initialized = True
        self.check_worker_number_rationality()

    # -- options ---------------------------------------------------------
    @property
    def multiprocessing_context(self):
        return self._multiprocessing_context

    @multiprocessing_context.setter
    def multiprocessing_context(self, context):
        if context is not None:
            if self.num_workers == 0:
                raise ValueError(f"multiprocessing_context can only be used with multi-process "
                                 f"loading (num_workers > 0), but got "
                                 f"num_workers={self.num_workers}")
            if isinstance(context, str):
                methods = multiprocessing.get_all_start_methods()
                if context not in methods:
                    raise ValueError(f"multiprocessing_context option should specify a valid "
                                     f"start method in {methods!r}, but got "
                                     f"multiprocessing_context={context!r}")
                context = multiprocessing.get_context(context)
            if not isinstance(context, multiprocessing.context.BaseContext):
                raise TypeError(f"multiprocessing_context option should be a valid context "
                                f"object or a string specifying the start method, but got "
                                f"multiprocessing_context={context}")
        self._multiprocessing_context = context

    def __setattr__(self, attr, value):
        # These define the batches; changing them under a live loader would
        # desynchronize the samplers built from them.
        if self._initialized and attr in ("batch_size", "batch_sampler", "sampler", "drop_last",
                                          "dataset", "persistent_workers"):
            raise ValueError(f"{attr} attribute should not be set after "
                             f"{type(self).__name__} is initialized")
        super().__setattr__(attr, value)

    @property
    def _auto_collation(self):
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    def check_worker_number_rationality(self):
        """Warn when asking for more workers than this process may use CPUs."""
        cpus = _cpu_count()
        if self.num_workers > cpus:
            warnings.warn(f"This DataLoader will create {self.num_workers} worker processes in "
                          f"total. Our suggested max number of worker in current system is "
                          f"{cpus}, which is smaller than what this DataLoader is going to "
                          f"create. Please be aware that excessive worker creation might get "
                          f"DataLoader running slow or even freeze, lower the worker number to "
                          f"avoid potential slowness/freeze if necessary.", stacklevel=3)

    # -- iteration -------------------------------------------------------
    def _get_iterator(self):
        if self.num_workers == 0:
            return _SingleProcessDataLoaderIter(self)
        return _MultiProcessingDataLoaderIter(self)

    def __iter__(self):
        if self.persistent_workers and self.num_workers > 0:
            if self._iterator is None or self._iterator._shutdown:
                self._iterator = self._get_iterator()
            else:
                self._iterator._reset(self)
            return self._iterator
        return self._get_iterator()

    def __len__(self):
        if not self._dataset_kind_iterable:
            return len(self._index_sampler)
        # An IterableDataset with __len__: the loader can only trust it.
        length = self._IterableDataset_len_called = len(self.dataset)
        if self.batch_size is not None:
            length = length // self.batch_size if self.drop_last else \
                math.ceil(length / self.batch_size)
        return length


class _BaseDataLoaderIter:
    def __init__(self, loader):
        self._dataset = loader.dataset
        self._is_iterable = loader._dataset_kind_iterable
        self._IterableDataset_len_called = loader._IterableDataset_len_called
        self._auto_collation = loader._auto_collation
        self._drop_last = loader.drop_last
        self._index_sampler = loader._index_sampler
        self._num_workers = loader.num_workers
        self._timeout = loader.timeout
        self._collate_fn = loader.collate_fn
        self._persistent_workers = loader.persistent_workers
        self._pin_memory = loader.pin_memory and ember.cuda.is_available()
        if loader.pin_memory and not self._pin_memory:
            warnings.warn("'pin_memory' argument is set as true but no accelerator is found, "
                          "then device pinned memory won't be used.", stacklevel=3)
        self._sampler_iter = iter(self._index_sampler)
        # Drawn even without workers, as PyTorch does, so the default
        # generator's stream (and thus later shuffles) matches PyTorch's.
        self._base_seed = ember.empty((), dtype=ember.int64).random_(
            generator=loader.generator).item()
        self._num_yielded = 0

    def __iter__(self):
        return self

    def _reset(self, loader):
        self._sampler_iter = iter(self._index_sampler)
        self._num_yielded = 0
        self._IterableDataset_len_called = loader._IterableDataset_len_called

    def _next_index(self):
        return next(self._sampler_iter)  # StopIteration ends the epoch

    def __next__(self):
        data = self._next_data()
        self._num_yielded += 1
        if (self._is_iterable and self._IterableDataset_len_called is not None
                and self._num_yielded > self._IterableDataset_len_called):
            msg = (f"Length of IterableDataset {self._dataset} was reported to be "
                   f"{self._IterableDataset_len_called} (when accessing len(dataloader)), but "
                   f"{self._num_yielded} samples have been fetched. ")
            if self._num_workers > 0:
                msg += ("For multiprocessing data-loading, this could be caused by not properly "
                        "configuring the IterableDataset replica at each worker (see "
                        "get_worker_info()).")
            warnings.warn(msg, stacklevel=2)
        return data

    def __len__(self):
        return len(self._index_sampler)

    def __getstate__(self):
        raise NotImplementedError(f"{type(self).__name__} cannot be pickled")


def _pin(data):
    """A batch with its tensors copied into page-locked memory (containers kept;
    objects with their own pin_memory() method use it, as torch's loader does)."""
    if isinstance(data, ember.Tensor):
        return data.pin_memory()
    if isinstance(data, dict):
        return type(data)({k: _pin(v) for k, v in data.items()}) if type(data) is not dict else \
            {k: _pin(v) for k, v in data.items()}
    if isinstance(data, tuple) and hasattr(data, "_fields"):  # namedtuple
        return type(data)(*(_pin(v) for v in data))
    if isinstance(data, (list, tuple)):
        return type(data)(_pin(v) for v in data)
    if hasattr(data, "pin_memory"):
        return data.pin_memory()
    return data


class _SingleProcessDataLoaderIter(_BaseDataLoaderIter):
    def __init__(self, loader):
        super().__init__(loader)
        if self._timeout != 0:
            raise AssertionError(f"timeout={self._timeout} bounds the wait for a worker process "
                                 f"and needs num_workers > 0 (got num_workers=0)")
        self._fetcher = _create_fetcher(self._is_iterable, self._dataset, self._auto_collation,
                                        self._collate_fn, self._drop_last)

    def _next_data(self):
        index = self._next_index()
        data = self._fetcher.fetch(index)
        return _pin(data) if self._pin_memory else data


class _MultiProcessingDataLoaderIter(_BaseDataLoaderIter):
    """Bookkeeping per epoch: task i (the i-th batch of keys) is sent to a
    worker as (i, keys) and recorded in _task_worker[i]; answers that arrive
    before their turn wait in _early[i]; _rcvd_idx is the next task to yield.
    """

    _shutdown = True  # until the workers exist

    def __init__(self, loader):
        super().__init__(loader)
        # batches in flight per worker (prefetch_factor=0 would starve the workers)
        self._prefetch_factor = max(1, loader.prefetch_factor)
        self._in_order = loader.in_order
        context = loader.multiprocessing_context or multiprocessing.get_context()
        self._result_queue = context.Queue()
        self._done_event = context.Event()
        self._index_queues = []
        self._workers = []
        self._worker_exiting = [False] * self._num_workers  # told to exit: not a crash
        self._shutdown = False
        try:
            for worker_id in range(self._num_workers):
                index_queue = context.Queue()
                index_queue.cancel_join_thread()  # never block our exit on tasks nobody reads
                worker = context.Process(
                    target=_worker._worker_loop,
                    args=(self._is_iterable, self._dataset, index_queue, self._result_queue,
                          self._done_event, self._auto_collation, self._collate_fn,
                          self._drop_last, self._base_seed, loader.worker_init_fn, worker_id,
                          self._num_workers),
                    daemon=True)
                worker.start()
                self._index_queues.append(index_queue)
                self._workers.append(worker)
            self._start_epoch(resume=False)
        except BaseException:
            self._shutdown_workers()
            raise

    # -- epochs ----------------------------------------------------------
    def _reset(self, loader):
        super()._reset(loader)
        self._start_epoch(resume=True)

    def _start_epoch(self, resume):
        self._send_idx = 0
        self._rcvd_idx = 0
        self._task_worker = {}
        self._early = {}
        self._tasks_outstanding = 0
        self._worker_active = [True] * self._num_workers
        self._worker_cycle = itertools.cycle(range(self._num_workers))
        if resume:
            # Persistent workers: each acknowledges the new epoch after the
            # tasks it still had; everything before the acks is stale.
            for q in self._index_queues:
                q.put(_worker._RESUME)
            waiting = self._num_workers
            while waiting:
                _, kind, _ = self._get_message()
                waiting -= kind == "resume"
        for _ in range(self._prefetch_factor * self._num_workers):
            self._try_put_index()

    def _try_put_index(self):
        if self._tasks_outstanding >= self._prefetch_factor * self._num_workers:
            return
        try:
            keys = self._next_index()
        except StopIteration:
            return
        for _ in range(self._num_workers):
            worker_id = next(self._worker_cycle)
            if self._worker_active[worker_id]:
                break
        else:
            return  # every worker's stream has ended
        # Pickled here so that keys that cannot be pickled raise now, rather
        # than being dropped by the queue's feeder thread (a hang).
        self._index_queues[worker_id].put(_worker._dumps((self._send_idx, keys)))
        self._task_worker[self._send_idx] = worker_id
        self._tasks_outstanding += 1
        self._send_idx += 1

    # -- receiving -------------------------------------------------------
    def _get_message(self):
        """The next message from any worker, waiting at most `timeout` (if
        set), and checking meanwhile that no worker died."""
        deadline = time.monotonic() + self._timeout if self._timeout > 0 else None
        while True:
            wait = _worker._POLL_INTERVAL
            if deadline is not None:
                wait = max(0.0, min(wait, deadline - time.monotonic()))
            try:
                raw = self._result_queue.get(timeout=wait)
                break
            except queue.Empty:
                pass
            dead = [w for w, exiting in zip(self._workers, self._worker_exiting)
                    if not exiting and not w.is_alive()]
            if dead:
                self._shutdown_workers()
                detail = ", ".join(f"{w.pid} (exit code {w.exitcode})" for w in dead)
                raise RuntimeError(f"DataLoader worker (pid(s) {detail}) exited unexpectedly")
            if deadline is not None and time.monotonic() >= deadline:
                self._shutdown_workers()
                raise RuntimeError(f"DataLoader timed out after {self._timeout} seconds")
        try:
            return pickle.loads(raw) if isinstance(raw, bytes) else raw
        except Exception as e:
            self._shutdown_workers()
            raise RuntimeError(f"DataLoader could not unpickle a batch sent by a worker "
                               f"process: {type(e).__name__}: {e}") from e

    def _next_data(self):
        while True:
            if self._shutdown:
                raise StopIteration
            # Skip over tasks that will never be answered: their worker's
            # IterableDataset ended first (or they were yielded out of order).
            while self._rcvd_idx < self._send_idx:
                idx = self._rcvd_idx
                if idx not in self._task_worker:
                    self._rcvd_idx += 1
                elif idx in self._early:
                    return self._process(idx, *self._early.pop(idx))
                elif self._worker_active[self._task_worker[idx]]:
                    break
                else:
                    del self._task_worker[idx]
                    self._rcvd_idx += 1
            else:
                if not self._persistent_workers:
                    self._shutdown_workers()
                raise StopIteration

            idx, kind, body = self._get_message()
            if kind == "resume":
                continue  # a stale acknowledgement; cannot happen mid-epoch
            self._tasks_outstanding -= 1
            if kind == "end":
                self._worker_active[body] = False
                if not self._persistent_workers:
                    self._index_queues[body].put(None)
                    self._worker_exiting[body] = True
                self._try_put_index()
                continue
            if idx == self._rcvd_idx or not self._in_order:
                return self._process(idx, kind, body)
            self._early[idx] = (kind, body)

    def _process(self, idx, kind, body):
        del self._task_worker[idx]
        if idx == self._rcvd_idx:
            self._rcvd_idx += 1
        self._try_put_index()
        if kind == "error":
            body.reraise()
        return _pin(body) if self._pin_memory else body

    # -- shutdown --------------------------------------------------------
    def _shutdown_workers(self):
        """Stop and reap the workers; safe to call more than once, and from
        __del__ (never waits on a queue nobody reads)."""
        if self._shutdown:
            return
        self._shutdown = True
        self._done_event.set()
        for q in self._index_queues:
            try:
                q.put(None)
            except (OSError, ValueError):
                pass  # queue already closed
        deadline = time.monotonic() + _SHUTDOWN_TIMEOUT
        for w in self._workers:
            w.join(timeout=max(0.0, deadline - time.monotonic()))
        for w in self._workers:
            if w.is_alive():  # stuck in user code: stop it
                w.terminate()
                w.join(timeout=1.0)
        for q in self._index_queues:
            q.close()
        self._result_queue.cancel_join_thread()
        self._result_queue.close()

    def __del__(self):
        try:
            self._shutdown_workers()
        except Exception:
            pass  # interpreter shutdown: the daemonic workers are reaped anyway
