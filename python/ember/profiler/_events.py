"""The profiler's events (Note [profiler] in csrc/core/profiler.c): the raw
records of the C core and of record_function turned into torch's
FunctionEvent / EventList, with self times, per-name averages, the summary
table and the Chrome trace.

A raw record is (kind, name, start_ns, end_ns, thread, input_shapes): kind 0
an op ("aten::<name>"), 1 an autograd node, 2 a user annotation. Events of
one thread nest (an op that runs other ops encloses them), so each event's
self time is its duration less its direct children's."""
import os

_PREFIX = {0: "aten::", 1: "autograd::engine::evaluate_function: ", 2: ""}


class FunctionEvent:
    """One timed call; times in microseconds, as torch reports them."""

    def __init__(self, id, name, thread, start_us, end_us, input_shapes=None):
        self.id = id
        self.name = name
        self.key = name
        self.thread = thread
        self.start_us = start_us
        self.end_us = end_us
        self.input_shapes = input_shapes if input_shapes is not None else []
        self.cpu_children = []
        self.cpu_parent = None
        self.count = 1
        self.device_type = "CPU"
        self.is_async = False
        self.is_legacy = False
        # no GPU kernel is timed (only the CPU side of every op)
        self.device_time_total = self.cuda_time_total = 0.0
        self.self_device_time_total = self.self_cuda_time_total = 0.0

    @property
    def cpu_time_total(self):
        return self.end_us - self.start_us

    @property
    def cpu_time(self):
        return self.cpu_time_total

    @property
    def self_cpu_time_total(self):
        return self.cpu_time_total - sum(c.cpu_time_total for c in self.cpu_children)

    def __repr__(self):
        return (f"<FunctionEvent id={self.id} name={self.name} cpu_time={_format_time(self.cpu_time_total)} "
                f"start_us={self.start_us:.3f} end_us={self.end_us:.3f} thread={self.thread} "
                f"input_shapes={self.input_shapes}>")


class FunctionEventAvg:
    """The events of one key (name, or name and input shapes) together."""

    def __init__(self, key, input_shapes=None):
        self.key = key
        self.input_shapes = input_shapes
        self.count = 0
        self.cpu_time_total = 0.0
        self.self_cpu_time_total = 0.0
        self.device_time_total = self.cuda_time_total = 0.0
        self.self_device_time_total = self.self_cuda_time_total = 0.0
        self.is_async = False
        self.is_legacy = False

    def add(self, ev):
        self.count += ev.count
        self.cpu_time_total += ev.cpu_time_total
        self.self_cpu_time_total += ev.self_cpu_time_total
        return self

    @property
    def cpu_time(self):
        return self.cpu_time_total / self.count if self.count else 0.0

    @property
    def self_cpu_time(self):
        return self.self_cpu_time_total / self.count if self.count else 0.0

    def __repr__(self):
        return (f"<FunctionEventAvg key={self.key} self_cpu_time={_format_time(self.self_cpu_time_total)} "
                f"cpu_time={_format_time(self.cpu_time_total)} input_shapes={self.input_shapes}>")


class EventList(list):
    """A list of FunctionEvent (or, from key_averages, FunctionEventAvg)."""

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0):
        groups = {}
        for ev in self:
            shapes = str(ev.input_shapes) if group_by_input_shape else None
            k = (ev.key, shapes)
            if k not in groups:
                groups[k] = FunctionEventAvg(ev.key, ev.input_shapes if group_by_input_shape else None)
            groups[k].add(ev)
        return EventList(groups.values())

    def total_average(self):
        total = FunctionEventAvg("Total")
        for ev in self:
            total.add(ev)
        return total

    @property
    def self_cpu_time_total(self):
        return sum(ev.self_cpu_time_total for ev in self)

    def table(self, sort_by=None, row_limit=100, max_src_column_width=75, max_name_column_width=55,
              max_shapes_column_width=80, header=None, top_level_events_only=False):
        return _table(self, sort_by, row_limit, max_name_column_width, max_shapes_column_width, header,
                      top_level_events_only)

    def __str__(self):
        return self.table()

    def export_chrome_trace(self, path, metadata=None):
        trace = [{"ph": "X", "cat": "cpu_op", "name": ev.name, "pid": os.getpid(), "tid": ev.thread,
                  "ts": ev.start_us, "dur": ev.cpu_time_total,
                  "args": {"Input Dims": ev.input_shapes} if ev.input_shapes else {}}
                 for ev in self if isinstance(ev, FunctionEvent)]
        import json
        with open(path, "w") as f:
            json.dump({**(metadata or {}), "traceEvents": trace, "displayTimeUnit": "ms"}, f)


def build_events(raw):
    """FunctionEvents from raw records, with parents and children set."""
    raw = sorted(raw, key=lambda r: (r[4], r[2], -r[3]))
    events, stacks = EventList(), {}
    for i, (kind, name, t0, t1, thread, shapes) in enumerate(raw):
        ev = FunctionEvent(i, _PREFIX[kind] + name, thread, t0 / 1000.0, t1 / 1000.0, shapes)
        stack = stacks.setdefault(thread, [])
        while stack and stack[-1].end_us <= ev.start_us:
            stack.pop()
        if stack:
            ev.cpu_parent = stack[-1]
            stack[-1].cpu_children.append(ev)
        stack.append(ev)
        events.append(ev)
    events.sort(key=lambda e: e.start_us)
    return events


def _format_time(us):
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


def _table(events, sort_by, row_limit, name_width, shapes_width, header, top_level_only):
    if top_level_only:
        events = EventList(e for e in events if getattr(e, "cpu_parent", None) is None)
    rows = list(events)
    if sort_by is not None:
        rows.sort(key=lambda e: getattr(e, sort_by), reverse=True)
    if row_limit is not None and row_limit > 0:
        rows = rows[:row_limit]
    self_total = sum(e.self_cpu_time_total for e in events)
    with_shapes = any(getattr(e, "input_shapes", None) for e in rows) and all(
        isinstance(e, FunctionEventAvg) for e in rows)
    names = [e.key for e in rows]
    nw = min(max([len(n) for n in names] + [4]) + 4, name_width)
    cols = ["Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg", "# of Calls"]
    widths = [nw] + [12] * len(cols)
    titles = ["Name"] + cols
    if with_shapes:
        widths.append(min(max(len(str(e.input_shapes)) for e in rows) + 4, shapes_width))
        titles.append("Input Shapes")
    line = "  ".join("-" * w for w in widths) + "  "

    def fmt(cells):
        out = []
        for i, (c, w) in enumerate(zip(cells, widths)):
            c = c if len(c) <= w else c[:w - 3] + "..."
            out.append(c.ljust(w) if i == len(cells) - 1 and with_shapes else c.rjust(w))
        return "  ".join(out) + "  "

    def pct(t):
        return f"{100.0 * t / self_total:.2f}%" if self_total > 0 else "0.00%"

    out = [header] if header else []
    out += [line, fmt(titles), line]
    for e in rows:
        cells = [e.key, pct(e.self_cpu_time_total), _format_time(e.self_cpu_time_total), pct(e.cpu_time_total),
                 _format_time(e.cpu_time_total), _format_time(e.cpu_time), str(e.count)]
        if with_shapes:
            cells.append(str(e.input_shapes))
        out.append(fmt(cells))
    out += [line, f"Self CPU time total: {_format_time(self_total)}", ""]
    return "\n".join(out)
