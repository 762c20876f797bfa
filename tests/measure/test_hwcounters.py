"""perf stat's counters: lines parsed, per-thread totals summed, "not supported" kept as
None with the reason; the real perf on the software events that exist anywhere, counting
only between mark() and stop()."""

from __future__ import annotations

import os
import shutil
import threading
import time

import pytest

from perfkit.measure.hwcounters import NO_PMU_VM, PerfStat, parse_line, pmu_reason, readings

OUT = """\
# started on Thu Dec  3 15:48:22 2026

Events disabled
Events enabled
python3-11,100.3,msec,task-clock,100365352,100.00,0.502,CPUs utilized
python3-12,<not counted>,msec,task-clock,0,100.00,,
python3-11,80,,context-switches,100365352,100.00,797.088,/sec
python3-12,3,,context-switches,100365352,100.00,797.088,/sec
python3-11,<not supported>,,cycles,0,100.00,,
python3-12,<not supported>,,cycles,0,100.00,,
Events disabled
"""


def test_a_line_gives_thread_event_and_value() -> None:
    assert parse_line("python3-11,100.3,msec,task-clock,1,100.00,,") == \
        (11, "task-clock", 100.3)
    assert parse_line("my-thread-7,<not supported>,,cycles,0,100.00,,") == (7, "cycles", None)
    assert parse_line("python3-7,<not counted>,,instructions,0,100.00,,") == \
        (7, "instructions", 0.0)
    assert parse_line("5,,context-switches,1,100.00") == (None, "context-switches", 5.0)
    for junk in ("# started on Mon", "", "Events enabled"):
        assert parse_line(junk) is None


def test_threads_are_summed_and_the_engine_kept_apart() -> None:
    r = readings(OUT.splitlines(), 1.5, engine_tid=11, pmu=NO_PMU_VM, hitm="")
    assert r.process == {"task-clock": 100.3, "context-switches": 83.0, "cycles": None}
    assert r.engine == {"task-clock": 100.3, "context-switches": 80.0, "cycles": None}
    assert r.unavailable == {"hardware": NO_PMU_VM, "hitm": NO_PMU_VM}
    assert r.window_s == 1.5


def test_no_counts_say_why() -> None:
    r = readings(["Error: No permission to enable task-clock event."], 0.0, 1, "", "")
    assert r.process == {} and r.unavailable["counters"] == \
        "perf stat: Error: No permission to enable task-clock event."


@pytest.mark.skipif(shutil.which("perf") is None, reason="perf not installed")
def test_perf_stat_counts_this_process_between_mark_and_stop() -> None:
    source = PerfStat(os.getpid(), threading.get_native_id())
    why = source.start()
    if why:
        pytest.skip(why)
    end = time.perf_counter() + 0.3
    while time.perf_counter() < end:  # before the mark: not counted
        sum(range(1000))
    source.mark()
    for _ in range(30):  # asleep, 30 naps: little CPU, and switches counted even when perf
        time.sleep(0.01)  # enables its counters late on a loaded machine (0 once in CI)
    r = source.stop()
    if "counters" in r.unavailable:
        pytest.skip(r.unavailable["counters"])  # no permission for perf events here
    assert r.window_s >= 0.3
    assert r.engine["task-clock"] is not None and r.engine["task-clock"] < 150  # ms
    assert r.engine["context-switches"] is not None and r.engine["context-switches"] >= 1
    if pmu_reason():
        assert r.unavailable["hardware"] == pmu_reason() and "cycles" not in r.process
