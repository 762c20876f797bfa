"""perf stat's counters: lines parsed, intervals after the mark summed, "not supported"
kept as None with the reason; the real perf on the software events that exist anywhere."""

from __future__ import annotations

import os
import shutil
import threading
import time

import pytest

from perfkit.measure.hwcounters import NO_PMU_VM, PerfStat, parse_line, pmu_reason, readings

LINES = """\
     0.100,python3-11,100.3,msec,task-clock,100365352,100.00,0.502,CPUs utilized
     0.100,python3-12,<not counted>,msec,task-clock,0,100.00,,
     0.100,python3-11,80,,context-switches,100365352,100.00,797.088,/sec
     0.100,python3-11,<not supported>,,cycles,0,100.00,,
     0.200,python3-11,99.0,msec,task-clock,99000000,100.00,0.5,CPUs utilized
     0.200,python3-12,12.5,msec,task-clock,12500000,100.00,0.06,CPUs utilized
     0.200,python3-11,70,,context-switches,99000000,100.00,700.0,/sec
     0.200,python3-11,<not supported>,,cycles,0,100.00,,
"""


def test_a_line_gives_time_thread_event_and_value() -> None:
    assert parse_line("0.100,python3-11,100.3,msec,task-clock,1,100.00,,") == \
        (0.1, 11, "task-clock", 100.3)
    assert parse_line("0.1,my-thread-7,<not supported>,,cycles,0,100.00,,") == \
        (0.1, 7, "cycles", None)
    assert parse_line("0.1,python3-7,<not counted>,,instructions,0,100.00,,")[3] == 0.0
    assert parse_line("0.100,5,,context-switches,1,100.00") == (0.1, None, "context-switches",
                                                               5.0)
    assert parse_line("# started on Mon") is None and parse_line("") is None


def test_intervals_after_the_mark_are_summed_per_process_and_engine_thread() -> None:
    t0 = 1000.0  # lines arrive just after their interval ends
    lines = [(t0 + float(x.split(",")[0]) + 0.001, x) for x in LINES.splitlines()]
    r = readings(lines, mark_s=t0 + 0.15, engine_tid=11, pmu=NO_PMU_VM, hitm="")
    assert r.process == {"task-clock": 111.5, "context-switches": 70.0, "cycles": None}
    assert r.engine == {"task-clock": 99.0, "context-switches": 70.0, "cycles": None}
    assert r.unavailable == {"hardware": NO_PMU_VM, "hitm": NO_PMU_VM}
    assert r.window_s == pytest.approx(0.05, abs=0.002)  # from the mark to the last end


def test_no_output_says_why() -> None:
    r = readings([(1.0, "Error: No permission to enable task-clock event.\n")], 0.0, 1, "",
                 "")
    assert r.process == {} and r.unavailable["counters"].startswith("perf stat: Error")


@pytest.mark.skipif(shutil.which("perf") is None, reason="perf not installed")
def test_perf_stat_counts_this_process_software_events() -> None:
    source = PerfStat(os.getpid(), threading.get_native_id())
    why = source.start()
    if why:
        pytest.skip(why)
    time.sleep(0.25)
    source.mark()
    end = time.perf_counter() + 0.4
    while time.perf_counter() < end:
        sum(range(1000))
    r = source.stop()
    if "counters" in r.unavailable:
        pytest.skip(r.unavailable["counters"])  # no permission for perf events here
    assert (r.engine["task-clock"] or 0) > 50  # ms of CPU: it burned most of 0.4 s
    assert r.engine["context-switches"] is not None
    if pmu_reason():
        assert r.unavailable["hardware"] == pmu_reason() and "cycles" not in r.process
