"""torch.autograd.profiler: the older profiler API (profile with
function_events / table, record_function) over ember.profiler's events."""
from ..profiler import EventList, FunctionEvent, FunctionEventAvg, record_function  # noqa: F401
from ..profiler import _ignored, _Recorder

__all__ = ["profile", "record_function", "EventList", "FunctionEvent", "FunctionEventAvg", "emit_nvtx", "emit_itt"]


class profile:
    """Records op and autograd events while the context is open (enabled);
    the results are in .function_events afterwards."""

    def __init__(self, enabled=True, *, use_cuda=False, use_device=None, record_shapes=False, with_flops=False,
                 profile_memory=False, with_stack=False, with_modules=False, use_kineto=False, use_cpu=True,
                 experimental_config=None, acc_events=False, custom_trace_id_callback=None):
        self.enabled = enabled
        if enabled:
            _ignored({"memory": profile_memory, "stacks": with_stack, "FLOPs": with_flops,
                      "modules": with_modules, "GPU kernel times": use_cuda or use_device == "cuda"})
        self._recorder = _Recorder(record_shapes)
        self.function_events = None

    def __enter__(self):
        if self.enabled:
            self._recorder.start()
        return self

    def __exit__(self, *exc):
        if self.enabled:
            self.function_events = self._recorder.stop()
        return False

    def _check(self):
        if self.function_events is None:
            raise RuntimeError("Profiler didn't finish running")
        return self.function_events

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0):
        return self._check().key_averages(group_by_input_shape, group_by_stack_n)

    def total_average(self):
        return self._check().total_average()

    def table(self, sort_by=None, row_limit=100, header=None, top_level_events_only=False, **kw):
        return self._check().table(sort_by=sort_by, row_limit=row_limit, header=header,
                                   top_level_events_only=top_level_events_only)

    def export_chrome_trace(self, path):
        self._check().export_chrome_trace(path)

    @property
    def self_cpu_time_total(self):
        return self._check().self_cpu_time_total

    def __str__(self):
        return str(self._check())


class emit_nvtx:
    """NVTX ranges around every op for Nsight: ember emits none (it has no
    NVTX), so the context does nothing, as torch's does without NVTX."""

    def __init__(self, enabled=True, record_shapes=False):
        self.enabled = enabled
        self.record_shapes = record_shapes

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class emit_itt(emit_nvtx):
    """Intel ITT ranges: none are emitted (no ITT in ember)."""
