"""ember.profiler: torch.profiler's profile / record_function / schedule
over the core's op and autograd events (Note [profiler] in
csrc/core/profiler.c).

What is recorded: every op call ("aten::<op>", nested as ops call ops),
every autograd node the engine runs, and record_function annotations, each
with wall-clock start and end on its thread, and input shapes with
record_shapes=True. GPU kernels are not timed: with ProfilerActivity.CUDA the
CPU side of every op is what the table shows. Memory, stacks, FLOPs and
module hierarchy are not recorded (profile_memory, with_stack, with_flops,
with_modules warn and are ignored)."""
import enum
import os
import threading
import time
import warnings

from .. import _C
from ._events import EventList, FunctionEvent, FunctionEventAvg, build_events

__all__ = ["profile", "record_function", "ProfilerActivity", "ProfilerAction", "schedule",
           "tensorboard_trace_handler", "supported_activities", "EventList", "FunctionEvent",
           "FunctionEventAvg", "kineto_available"]


class ProfilerActivity(enum.Enum):
    CPU = 0
    CUDA = 1
    XPU = 2
    MTIA = 3
    HPU = 4
    PrivateUse1 = 5


def kineto_available():
    """False: ember's profiler is its own event recorder, not Kineto."""
    return False


def supported_activities():
    from .. import cuda
    acts = {ProfilerActivity.CPU}
    if cuda.is_available():
        acts.add(ProfilerActivity.CUDA)
    return acts


class ProfilerAction(enum.Enum):
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def schedule(*, wait, warmup, active, repeat=0, skip_first=0, skip_first_wait=0):
    """The action for each step: skip_first steps off, then cycles of `wait`
    off, `warmup` recorded and discarded, `active` recorded (the last one
    saving: on_trace_ready runs); `repeat` cycles (0: no end).
    skip_first_wait=1 drops the wait of the first cycle."""
    if wait < 0 or warmup < 0 or active <= 0 or repeat < 0 or skip_first < 0:
        raise AssertionError("Invalid profiler schedule arguments")
    if warmup == 0:
        warnings.warn("Profiler won't be using warmup, this can skew profiler results")

    def action(step):
        if step < 0:
            raise AssertionError(f"step ({step}) must be >= 0")
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        w = wait
        if skip_first_wait:
            # the first cycle has no wait: shift as if it had run
            step += wait
        n = w + warmup + active
        if repeat > 0 and step // n >= repeat:
            return ProfilerAction.NONE
        m = step % n
        if m < w:
            return ProfilerAction.NONE
        if m < w + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if m < n - 1 else ProfilerAction.RECORD_AND_SAVE
    return action


# record_function's events for the profile that is recording (None: none is)
_annotations = None
_lock = threading.Lock()


class record_function:
    """Names a region of code in the profile (a context manager, or a
    decorator). Outside a profile it costs a clock read."""

    def __init__(self, name, args=None):
        self.name = name
        self.args = args
        self._t0 = None

    def __enter__(self):
        self._t0 = time.perf_counter_ns()
        return self

    def __exit__(self, *exc):
        t1 = time.perf_counter_ns()
        sink = _annotations
        if sink is not None and self._t0 is not None:
            with _lock:
                sink.append((2, self.name, self._t0, t1, threading.get_ident(), None))
        return False

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapped(*a, **k):
            with record_function(self.name, self.args):
                return fn(*a, **k)
        return wrapped


def _ignored(flags):
    for name, on in flags.items():
        if on:
            warnings.warn(f"ember's profiler does not record {name}; the option is ignored", stacklevel=3)


class _Recorder:
    """One recording window of the core's events plus annotations."""

    def __init__(self, record_shapes):
        self.record_shapes = record_shapes
        self.on = False

    def start(self):
        global _annotations
        _annotations = []
        _C._profiler_start(bool(self.record_shapes))
        self.on = True

    def stop(self):
        global _annotations
        raw = _C._profiler_stop()
        notes, _annotations = _annotations or [], None
        self.on = False
        return build_events(list(raw) + notes)


class profile:
    """torch.profiler.profile: records while the context is open, or
    according to `schedule` as step() is called; key_averages() / events() /
    export_chrome_trace() give the results of the last saved window."""

    def __init__(self, *, activities=None, schedule=None, on_trace_ready=None, record_shapes=False,
                 profile_memory=False, with_stack=False, with_flops=False, with_modules=False,
                 experimental_config=None, execution_trace_observer=None, acc_events=False,
                 custom_trace_id_callback=None, use_cuda=None):
        self.activities = set(activities) if activities else supported_activities()
        if ProfilerActivity.CUDA in self.activities or use_cuda:
            warnings.warn("ember's profiler does not time GPU kernels; the table shows the CPU side of each op",
                          stacklevel=2)
        _ignored({"memory": profile_memory, "stacks": with_stack, "FLOPs": with_flops, "modules": with_modules})
        self.schedule = schedule
        self.on_trace_ready = on_trace_ready
        self.record_shapes = record_shapes
        self.acc_events = acc_events
        self.step_num = 0
        self._recorder = _Recorder(record_shapes)
        self._events = None
        self._action = ProfilerAction.NONE
        self._step_t0 = None
        self._metadata = {}

    # -- the window --------------------------------------------------------
    def _begin(self):
        if not self._recorder.on:
            self._recorder.start()

    def _end(self, save):
        if not self._recorder.on:
            return
        self._close_step()
        events = self._recorder.stop()
        if save:
            if self.acc_events and self._events is not None:
                events = EventList(sorted(list(self._events) + list(events), key=lambda e: e.start_us))
            self._events = events
            if self.on_trace_ready is not None:
                self.on_trace_ready(self)

    def _open_step(self):
        if self.schedule is not None and self._recorder.on:
            self._step_t0 = time.perf_counter_ns()

    def _close_step(self):
        if self._step_t0 is not None and _annotations is not None:
            _annotations.append((2, f"ProfilerStep#{self.step_num}", self._step_t0, time.perf_counter_ns(),
                                 threading.get_ident(), None))
        self._step_t0 = None

    def _enter_action(self, new):
        old, self._action = self._action, new
        R = (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)
        if old == ProfilerAction.RECORD_AND_SAVE:
            self._end(save=True)
        elif old == ProfilerAction.WARMUP and new in R:
            self._end(save=False)  # warm-up events are discarded
        elif old in R + (ProfilerAction.WARMUP,) and new == ProfilerAction.NONE:
            self._end(save=old in R)
        if new != ProfilerAction.NONE:
            self._begin()
            self._open_step()

    def start(self):
        self.step_num = 0
        self._enter_action(self.schedule(0) if self.schedule else ProfilerAction.RECORD)

    def stop(self):
        if self.schedule is None:
            self._end(save=True)
        elif self._action in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE):
            self._end(save=True)  # a window cut short still reports, as torch's does
        else:
            self._end(save=False)
        self._action = ProfilerAction.NONE

    def step(self):
        """Marks the end of a training step (advances the schedule)."""
        if self.schedule is None:
            self._close_step()
            self.step_num += 1
            return
        self._close_step()
        self.step_num += 1
        new = self.schedule(self.step_num)
        if new == self._action and new in (ProfilerAction.WARMUP, ProfilerAction.RECORD):
            self._open_step()
            return
        self._enter_action(new)

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    # -- results -----------------------------------------------------------
    def events(self):
        if self._events is None:
            raise AssertionError("no profile has been recorded yet")
        return self._events

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0, group_by_overload_name=False):
        return self.events().key_averages(group_by_input_shape, group_by_stack_n)

    def export_chrome_trace(self, path):
        if str(path).endswith(".gz"):
            import gzip
            tmp = str(path)[:-3]
            self.events().export_chrome_trace(tmp, self._metadata)
            with open(tmp, "rb") as f, gzip.open(path, "wb") as g:
                g.write(f.read())
            os.remove(tmp)
        else:
            self.events().export_chrome_trace(path, self._metadata)

    def add_metadata(self, key, value):
        """A key/value written at the top of exported Chrome traces."""
        self._metadata[str(key)] = str(value)


def tensorboard_trace_handler(dir_name, worker_name=None, use_gzip=False):
    """An on_trace_ready that writes each saved window as a Chrome trace
    `<worker>.<ms>.pt.trace.json[.gz]` in dir_name (TensorBoard's layout)."""
    def handler(prof):
        import socket
        os.makedirs(dir_name, exist_ok=True)
        worker = worker_name or f"{socket.gethostname()}_{os.getpid()}"
        name = f"{worker}.{time.time_ns() // 1_000_000}.pt.trace.json" + (".gz" if use_gzip else "")
        prof.export_chrome_trace(os.path.join(dir_name, name))
    return handler
