"""torch.multiprocessing.spawn: run fn(i, *args) in nprocs processes and
report the first failure as torch does (ProcessRaisedException with the
child's traceback, ProcessExitedException with its exit code or signal);
when one process fails the others are terminated."""
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import tempfile
import time
import traceback

__all__ = ["spawn", "start_processes", "ProcessContext", "SpawnContext", "ProcessException",
           "ProcessRaisedException", "ProcessExitedException"]


class ProcessException(Exception):
    __slots__ = ["error_index", "error_pid"]

    def __init__(self, msg, error_index, pid):
        super().__init__(msg)
        self.msg = msg
        self.error_index = error_index
        self.pid = pid

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.pid)


class ProcessRaisedException(ProcessException):
    """A process raised: msg holds its traceback."""


class ProcessExitedException(ProcessException):
    """A process exited with a non-zero code or was killed by a signal."""
    __slots__ = ["exit_code"]

    def __init__(self, msg, error_index, error_pid, exit_code, signal_name=None):
        super().__init__(msg, error_index, error_pid)
        self.exit_code = exit_code
        self.signal_name = signal_name

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.pid, self.exit_code, self.signal_name)


def _wrap(fn, i, args, error_file):
    """The child's body: run fn, and on an exception write its traceback where
    the parent reads it, then exit 1."""
    try:
        fn(i, *args)
    except KeyboardInterrupt:
        pass  # the parent is stopping us (SIGINT)
    except Exception:
        with open(error_file, "w") as f:
            f.write(traceback.format_exc())
        sys.exit(1)


class ProcessContext:
    def __init__(self, processes, error_files):
        self.processes = processes
        self.error_files = error_files
        self.sentinels = {p.sentinel: i for i, p in enumerate(processes)}

    def pids(self):
        return [int(p.pid) for p in self.processes]

    def _stop_all(self, grace_period):
        for p in self.processes:
            if p.is_alive():
                p.terminate()
        deadline = time.monotonic() + (grace_period if grace_period is not None else 30)
        for p in self.processes:
            p.join(max(0.0, deadline - time.monotonic()))
        for p in self.processes:
            if p.is_alive():
                p.kill()
                p.join()

    def _cleanup(self):
        for path in self.error_files:
            try:
                os.unlink(path)
            except OSError:
                pass

    def join(self, timeout=None, grace_period=None):
        """Wait up to timeout seconds (None: until done) for the processes.
        True when all have exited successfully, False while some still run;
        raises for the first one that failed, after stopping the others."""
        if not self.sentinels:
            return True
        ready = multiprocessing.connection.wait(list(self.sentinels), timeout=timeout)
        failed = None
        for sentinel in ready:
            i = self.sentinels.pop(sentinel)
            p = self.processes[i]
            p.join()
            if p.exitcode != 0 and failed is None:
                failed = i
        if failed is None:
            if self.sentinels:
                return False
            self._cleanup()
            return True

        self._stop_all(grace_period)
        self.sentinels.clear()
        p = self.processes[failed]
        error_file = self.error_files[failed]
        try:
            with open(error_file) as f:
                original = f.read()
        except OSError:
            original = ""
        self._cleanup()
        if original:
            msg = f"\n\n-- Process {failed} terminated with the following error:\n{original}"
            raise ProcessRaisedException(msg, failed, p.pid)
        if p.exitcode < 0:
            try:
                name = signal.Signals(-p.exitcode).name
            except ValueError:
                name = f"<Unknown signal {-p.exitcode}>"
            raise ProcessExitedException(f"process {failed} terminated with signal {name}", failed, p.pid,
                                         p.exitcode, name)
        raise ProcessExitedException(f"process {failed} terminated with exit code {p.exitcode}", failed, p.pid,
                                     p.exitcode)


class SpawnContext(ProcessContext):
    """What spawn(join=False) returns (torch keeps the name)."""


def start_processes(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """Start nprocs processes with the given start method, each running
    fn(i, *args); with join, wait for all and raise on the first failure,
    else return the ProcessContext."""
    if not callable(fn):
        raise TypeError(f"start_processes: fn must be callable, got {type(fn).__name__}")
    if not isinstance(nprocs, int) or nprocs < 1:
        raise ValueError(f"start_processes: nprocs must be a positive int, got {nprocs!r}")
    ctx = multiprocessing.get_context(start_method)
    processes, error_files = [], []
    for i in range(nprocs):
        fd, error_file = tempfile.mkstemp(prefix="ember_spawn_err_")
        os.close(fd)
        os.unlink(error_file)  # the child creates it only if it fails
        p = ctx.Process(target=_wrap, args=(fn, i, tuple(args), error_file), daemon=daemon)
        p.start()
        processes.append(p)
        error_files.append(error_file)
    context = ProcessContext(processes, error_files)
    if not join:
        return context
    while not context.join():
        pass


def spawn(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """start_processes with the "spawn" start method by default (torch's)."""
    if start_method != "spawn":
        import warnings
        warnings.warn(f"This method only supports start_method=spawn (got: {start_method}).\n"
                      "To use a different start_method use:\n\t\t torch.multiprocessing.start_processes(...)",
                      FutureWarning, stacklevel=2)
    return start_processes(fn, args, nprocs, join, daemon, start_method)
