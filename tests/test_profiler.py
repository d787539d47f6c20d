"""ember.profiler and ember.autograd.profiler (Note [profiler]): which
events are recorded, their nesting and self times (hand-built timelines),
shapes, schedules (torch's documented step actions, and torch's own
schedule when installed), traces and tables."""
import json
import os

import pytest

import ember
from ember.profiler import (ProfilerAction, ProfilerActivity, profile, record_function, schedule,
                            tensorboard_trace_handler)
from ember.profiler._events import build_events


def _names(events):
    return [e.name for e in events]


def test_ops_nodes_and_annotations_are_recorded():
    x = ember.randn(3, 4, requires_grad=True)
    w = ember.randn(4, 2)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        with record_function("forward"):
            y = (x @ w).relu().sum()
        y.backward()
    names = _names(prof.events())
    assert {"forward", "aten::matmul", "aten::relu", "aten::sum"} <= set(names)
    assert any(n.startswith("autograd::engine::evaluate_function: ") and "Relu" in n for n in names)
    fwd = next(e for e in prof.events() if e.name == "forward")
    inside = {e.name for e in fwd.cpu_children}
    assert {"aten::matmul", "aten::relu", "aten::sum"} <= inside
    assert fwd.cpu_time_total >= sum(c.cpu_time_total for c in fwd.cpu_children)
    avg = {e.key: e for e in prof.key_averages()}
    assert avg["aten::relu"].count == 1 and avg["forward"].count == 1


def test_counts_and_nothing_outside_the_window():
    a = ember.ones(5)
    a + a
    with profile() as prof:
        for _ in range(3):
            a + a
        a.mul(2)
    a + a
    avg = {e.key: e.count for e in prof.key_averages()}
    assert avg["aten::add"] == 3 and avg["aten::mul"] == 1
    assert ember._C._profiler_stop() == []  # not recording any more


def test_self_times_from_a_hand_built_timeline():
    # thread 1: A [0, 100] holds B [10, 40] (which holds C [20, 30]) and D [50, 90]; thread 2: E [5, 15]
    raw = [(2, "A", 0, 100_000, 1, None), (0, "B", 10_000, 40_000, 1, None), (0, "C", 20_000, 30_000, 1, None),
           (0, "D", 50_000, 90_000, 1, None), (1, "E", 5_000, 15_000, 2, None)]
    ev = {e.name: e for e in build_events(raw)}
    assert ev["A"].cpu_time_total == 100.0 and ev["A"].self_cpu_time_total == 100.0 - 30.0 - 40.0
    assert ev["aten::B"].self_cpu_time_total == 20.0 and ev["aten::C"].cpu_parent is ev["aten::B"]
    assert ev["aten::D"].cpu_parent is ev["A"]
    assert ev["autograd::engine::evaluate_function: E"].cpu_parent is None  # other thread
    events = build_events(raw)
    assert events.self_cpu_time_total == pytest.approx(100.0 + 10.0)
    table = events.key_averages().table(sort_by="self_cpu_time_total")
    lines = table.splitlines()
    assert "Self CPU %" in lines[1] and "# of Calls" in lines[1]
    # largest self time first: D (40us of 110us), then A (30us self, 100us total)
    assert lines[3].strip().startswith("aten::D ") and "36.36%" in lines[3]
    assert lines[4].strip().startswith("A ")
    assert "27.27%" in lines[4] and "30.000us" in lines[4] and "100.000us" in lines[4] and "90.91%" in lines[4]
    assert lines[-1] == "Self CPU time total: 110.000us"


def test_record_shapes_and_grouping():
    a, b = ember.randn(2, 3), ember.randn(3, 4)
    with profile(record_shapes=True) as prof:
        ember.mm(a, b)
        ember.mm(b.t(), a.t())
    mm = [e for e in prof.events() if e.name == "aten::mm"]
    assert [e.input_shapes[:2] for e in mm] == [[[2, 3], [3, 4]], [[4, 3], [3, 2]]]
    groups = [e for e in prof.key_averages(group_by_input_shape=True) if e.key == "aten::mm"]
    assert len(groups) == 2 and all(g.count == 1 for g in groups)
    assert "Input Shapes" in prof.key_averages(group_by_input_shape=True).table()


def test_errors_pass_through_and_are_still_timed():
    with profile() as prof:
        with pytest.raises(RuntimeError):
            ember.ones(2, 3) @ ember.ones(2, 3)
    assert "aten::matmul" in _names(prof.events())


def test_one_profile_at_a_time():
    with profile():
        with pytest.raises(RuntimeError, match="already enabled"):
            ember._C._profiler_start(False)


# torch's documented schedule: wait, then warmup, then active steps whose
# last one saves; repeat cycles; skip_first steps off first
A = ProfilerAction


def test_schedule_actions():
    s = schedule(skip_first=1, wait=1, warmup=1, active=2, repeat=2)
    got = [s(i) for i in range(11)]
    assert got == [A.NONE, A.NONE, A.WARMUP, A.RECORD, A.RECORD_AND_SAVE,
                   A.NONE, A.WARMUP, A.RECORD, A.RECORD_AND_SAVE, A.NONE, A.NONE]


def test_schedule_matches_torch(torch):
    for kw in [dict(wait=1, warmup=1, active=3, repeat=2), dict(wait=0, warmup=2, active=1),
               dict(wait=2, warmup=1, active=2, skip_first=3, repeat=1)]:
        ours, theirs = schedule(**kw), torch.profiler.schedule(**kw)
        assert [ours(i).name for i in range(20)] == [theirs(i).name for i in range(20)], kw


def test_scheduled_profile_saves_only_active_steps():
    saved = []
    with profile(schedule=schedule(wait=1, warmup=1, active=2, repeat=1),
                 on_trace_ready=lambda p: saved.append(sorted({e.name for e in p.events()
                                                               if e.name.startswith("step")}))) as prof:
        for i in range(6):
            with record_function(f"step{i}"):
                ember.ones(2) + 1
            prof.step()
    assert saved == [["step2", "step3"]]
    steps = [e.name for e in prof.events() if e.name.startswith("ProfilerStep#")]
    assert steps == ["ProfilerStep#2", "ProfilerStep#3"]


def test_chrome_trace_and_tensorboard_handler(tmp_path):
    with profile() as prof:
        ember.ones(3).exp()
    path = tmp_path / "trace.json"
    prof.add_metadata("run", "7")
    prof.export_chrome_trace(str(path))
    data = json.loads(path.read_text())
    assert data["run"] == "7"
    exp = [e for e in data["traceEvents"] if e["name"] == "aten::exp"]
    assert len(exp) == 1 and exp[0]["ph"] == "X" and exp[0]["dur"] >= 0
    out = tmp_path / "tb"
    with profile(schedule=schedule(wait=0, warmup=1, active=1, repeat=1),
                 on_trace_ready=tensorboard_trace_handler(str(out), worker_name="w0")) as prof:
        for _ in range(3):
            ember.ones(2).sin()
            prof.step()
    files = os.listdir(out)
    assert len(files) == 1 and files[0].startswith("w0.") and files[0].endswith(".pt.trace.json")


def test_legacy_autograd_profiler():
    x = ember.randn(4, requires_grad=True)
    with ember.autograd.profiler.profile(record_shapes=True) as prof:
        with ember.autograd.profiler.record_function("loss"):
            (x * x).sum().backward()
    names = {e.name for e in prof.function_events}
    assert {"loss", "aten::mul", "aten::sum"} <= names
    assert "Self CPU time total" in prof.table(sort_by="cpu_time_total")
    assert prof.self_cpu_time_total > 0
    with ember.autograd.profiler.profile(enabled=False) as off:
        x + 1
    with pytest.raises(RuntimeError):
        off.table()


def test_record_function_as_decorator():
    @record_function("helper")
    def f(t):
        return t * 2

    with profile() as prof:
        f(ember.ones(2))
    helper = next(e for e in prof.events() if e.name == "helper")
    assert [c.name for c in helper.cpu_children] == ["aten::mul"]


def test_unsupported_options_warn():
    with pytest.warns(UserWarning, match="memory"):
        with profile(profile_memory=True):
            pass
