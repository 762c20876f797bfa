"""The bpftrace program: what it traces for the options given (its text; whether it loads
and what it measures is tests/measure/test_ebpf.py's, as root)."""

from __future__ import annotations

import pytest

from perfkit.measure.bpf_script import ScriptSpec, script


def test_futex_mode_tells_the_gil_by_its_words_and_marks_the_phase() -> None:
    text = script(ScriptSpec(4242, 4243, [(0x1000, 0x2000)], mark_addr=0xABC))
    assert "tracepoint:syscalls:sys_enter_futex /pid == 4242/" in text
    assert "($a >= 4096 && $a < 8192)" in text  # the GIL's static data
    assert "uprobe" not in text  # no probe on the GIL's hot path
    assert f"if ($a == {0xABC})" in text and 'printf("M %llu' in text
    assert "profile:hz:499 /pid == 4242 && tid != 4243 && @egil == 1/" in text
    assert "tracepoint:sched:sched_wakeup" in text  # waits end at the wake-up
    assert text.startswith("BEGIN {") and 'END { printf("E %llu' in text


def test_uprobes_mode_traces_take_gil_and_its_holds() -> None:
    text = script(ScriptSpec(1, 2, [(1, 2)], gil_uprobes="/lib/libpython3.11.so.1.0"))
    assert "uprobe:/lib/libpython3.11.so.1.0:take_gil /pid == 1/" in text
    assert "uretprobe:/lib/libpython3.11.so.1.0:take_gil" in text
    assert "@hold_ns[tid] = sum(" in text
    # the futex part still traces locks, but leaves GIL waits to the uprobes
    assert "@lock_ns[tid]" in text and text.count("@gil_ns[tid] = sum(") == 1


def test_without_tracepoints_only_the_gil_uprobes_run() -> None:
    text = script(ScriptSpec(1, 2, [], tracepoints=False, gil_uprobes="/x/python3"))
    assert "tracepoint:" not in text and "uprobe:/x/python3:drop_gil" in text


def test_nothing_to_trace_is_refused() -> None:
    with pytest.raises(ValueError, match="nothing to trace"):
        script(ScriptSpec(1, None, [], tracepoints=False))


def test_without_an_engine_thread_no_events_and_no_holder_sampling() -> None:
    text = script(ScriptSpec(7, None, [(1, 2)]))
    assert "profile:hz" not in text and "if (0 && $d >=" in text
