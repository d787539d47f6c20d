"""torch.futures.Future: a value that a background thread provides later
(ember.distributed's Work.get_future() returns one)."""
import threading

__all__ = ["Future", "collect_all", "wait_all"]


class Future:
    def __init__(self, *, devices=None):
        self._cond = threading.Condition()
        self._done = False
        self._value = None
        self._exc = None
        self._callbacks = []

    def done(self):
        with self._cond:
            return self._done

    def wait(self):
        with self._cond:
            self._cond.wait_for(lambda: self._done)
        if self._exc is not None:
            raise self._exc
        return self._value

    def value(self):
        with self._cond:
            if not self._done:
                raise RuntimeError("Future.value(): the future is not completed yet")
        if self._exc is not None:
            raise self._exc
        return self._value

    def _complete(self, value, exc):
        with self._cond:
            if self._done:
                raise RuntimeError("Future can only be marked completed once.")
            self._value, self._exc, self._done = value, exc, True
            callbacks, self._callbacks = self._callbacks, []
            self._cond.notify_all()
        for cb in callbacks:
            cb(self)

    def set_result(self, result):
        self._complete(result, None)

    def set_exception(self, result):
        self._complete(None, result)

    def add_done_callback(self, callback):
        with self._cond:
            if not self._done:
                self._callbacks.append(callback)
                return
        callback(self)

    def then(self, callback):
        """A new Future holding callback(self)'s result (or its exception)."""
        out = Future()

        def run(fut):
            try:
                out.set_result(callback(fut))
            except Exception as e:  # the callback's error belongs to the chained future
                out.set_exception(e)
        self.add_done_callback(run)
        return out


def collect_all(futures):
    out, left = Future(), [len(futures)]
    lock = threading.Lock()
    if not futures:
        out.set_result([])

    def one(_):
        with lock:
            left[0] -= 1
            last = left[0] == 0
        if last:
            out.set_result(list(futures))
    for f in futures:
        f.add_done_callback(one)
    return out


def wait_all(futures):
    return [f.wait() for f in futures]
