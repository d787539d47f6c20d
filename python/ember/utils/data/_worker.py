"""DataLoader worker processes (torch.utils.data._utils.worker).

Each worker runs `_worker_loop`: it seeds its random generators, calls the
user's worker_init_fn, then answers tasks `(task_idx, keys)` read from its
own index queue with messages `(task_idx, kind, body)` on the result queue
shared by all workers:

    kind "data"   body = the batch
    kind "error"  body = an _ExceptionWrapper: type and traceback text
    kind "end"    body = worker id; its IterableDataset copy is exhausted
    kind "resume" body = worker id; acknowledges _RESUME (persistent workers)

Messages are pickled by the worker before they are queued, so a batch that
cannot be pickled becomes an error message instead of being lost (a hang).
`None` on the index queue, or the done event, tells the worker to exit. A
worker also exits when its parent process is gone (it polls; no signal
handlers needed).
"""
import io
import os
import pickle
import queue
import random
import sys
import traceback
from multiprocessing.reduction import ForkingPickler

from ..._lazy import numpy as np

import ember

from ._fetch import _create_fetcher

# How often (seconds) blocked waits wake up to check that the other side lives.
_POLL_INTERVAL = 0.2

# Sent on an index queue at the start of each epoch of persistent workers.
_RESUME = "__ember_dataloader_resume__"
_NOTHING = object()  # no task arrived within _POLL_INTERVAL


class WorkerInfo:
    """What `get_worker_info()` returns inside a worker: id, num_workers,
    seed and dataset (this worker's copy). Read-only."""

    _frozen = False

    def __init__(self, **kwargs):
        for key, value in kwargs.items():
            setattr(self, key, value)
        self._keys = tuple(kwargs)
        self._frozen = True

    def __setattr__(self, key, value):
        if self._frozen:
            raise RuntimeError(f"Cannot assign attributes to {type(self).__name__} objects")
        super().__setattr__(key, value)

    def __repr__(self):
        fields = ", ".join(f"{k}={getattr(self, k)}" for k in self._keys)
        return f"{type(self).__name__}({fields})"


_worker_info = None


def get_worker_info():
    """In a DataLoader worker: its WorkerInfo. In the main process: None.
    An IterableDataset's __iter__ uses it to pick this worker's share."""
    return _worker_info


class _KeyErrorMessage(str):
    """KeyError shows repr(message); this keeps the traceback text readable."""

    def __repr__(self):
        return self


class _ExceptionWrapper:
    """An exception caught in a worker, carried to the main process as its
    type and formatted traceback, and raised there again."""

    def __init__(self, where):
        exc_type, exc_value, tb = sys.exc_info()
        self.exc_type = exc_type
        self.exc_msg = "".join(traceback.format_exception(exc_type, exc_value, tb))
        self.where = where

    def reraise(self):
        msg = f"Caught {self.exc_type.__name__} {self.where}.\nOriginal {self.exc_msg}"
        if self.exc_type is KeyError:
            msg = _KeyErrorMessage(msg)
        try:
            exc = self.exc_type(msg)
        except Exception:  # the type wants other constructor arguments
            exc = RuntimeError(msg)
        raise exc


def _numpy_seed(base_seed, worker_id):
    """NumPy's global seed for a worker: four 32-bit words from a SeedSequence
    over (worker_id, base_seed's two halves, 0) -- the same words PyTorch uses."""
    words = [worker_id, base_seed & 0xFFFFFFFF, base_seed >> 32, 0]
    return np.random.SeedSequence(words).generate_state(4)


def _dumps(obj):
    buffer = io.BytesIO()
    ForkingPickler(buffer, pickle.HIGHEST_PROTOCOL).dump(obj)
    return buffer.getvalue()


def _encode(task_idx, kind, body, worker_id):
    """Pickle a message now (not in the queue's feeder thread, where a failure
    would be printed and the message lost)."""
    try:
        return _dumps((task_idx, kind, body))
    except Exception:
        where = f"in DataLoader worker process {worker_id} (while pickling its result)"
        wrapped = _ExceptionWrapper(where)
        try:
            pickle.dumps(wrapped.exc_type)
        except Exception:
            wrapped.exc_type = RuntimeError
        return _dumps((task_idx, "error", wrapped))


def _worker_loop(is_iterable, dataset, index_queue, result_queue, done_event, auto_collation,
                 collate_fn, drop_last, base_seed, init_fn, worker_id, num_workers):
    global _worker_info
    parent_pid = os.getppid()
    try:
        ember.set_num_threads(1)  # one process per core is the parallelism here
        seed = base_seed + worker_id
        random.seed(seed)
        ember.manual_seed(seed)
        np.random.seed(_numpy_seed(base_seed, worker_id))
        _worker_info = WorkerInfo(id=worker_id, num_workers=num_workers, seed=seed,
                                  dataset=dataset)

        def new_fetcher():
            """(fetcher, None), or (None, the error to answer every task with)."""
            if init_fn_error is not None:
                return None, init_fn_error
            try:
                return _create_fetcher(is_iterable, dataset, auto_collation, collate_fn,
                                       drop_last), None
            except Exception:
                return None, _ExceptionWrapper(f"in DataLoader worker process {worker_id}")

        init_fn_error = None
        try:
            if init_fn is not None:
                init_fn(worker_id)
        except Exception:
            init_fn_error = _ExceptionWrapper(f"in DataLoader worker process {worker_id}")
        fetcher, init_error = new_fetcher()

        exhausted = False
        while True:
            try:
                task = index_queue.get(timeout=_POLL_INTERVAL)
            except queue.Empty:
                task = _NOTHING
            # done_event, not only the None task, ends the loop: when the main
            # side's iterator is collected as part of a reference cycle, its
            # index queues may be finalized before the None is sent.
            if task is None or done_event.is_set() or os.getppid() != parent_pid:
                break
            if task is _NOTHING:
                continue
            if task == _RESUME:  # a new epoch: a fresh iterator over the dataset
                exhausted = False
                fetcher, init_error = new_fetcher()
                result_queue.put(_encode(None, "resume", worker_id, worker_id))
                continue
            if exhausted:
                continue  # nothing left to give this epoch
            task_idx, keys = pickle.loads(task)
            if init_error is not None:  # every task fails: there is no fetcher
                kind, body = "error", init_error
            else:
                try:
                    kind, body = "data", fetcher.fetch(keys)
                except StopIteration:
                    if not is_iterable:
                        kind, body = "error", _ExceptionWrapper(
                            f"in DataLoader worker process {worker_id}")
                    else:
                        kind, body, exhausted = "end", worker_id, True
                except Exception:
                    kind, body = "error", _ExceptionWrapper(
                        f"in DataLoader worker process {worker_id}")
            result_queue.put(_encode(task_idx, kind, body, worker_id))
            del body, keys, task
    except KeyboardInterrupt:
        pass  # Ctrl-C reaches the whole process group; the main process reports it
    finally:
        _worker_info = None
    if done_event.is_set():
        # Nobody reads the results any more: exit without flushing them.
        result_queue.cancel_join_thread()
        result_queue.close()
