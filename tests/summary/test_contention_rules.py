"""gil_contention and lock_contention: they name the waiting thread, the holder, the tail
share and a fix; a clean level (and a wait too small to matter) names nothing; a level
without --contention, or where waits were not measured, never trips them."""

from __future__ import annotations

from dataclasses import replace

from levels import level

from perfkit.config.profile import load_profile
from perfkit.result.contention import (
    ContentionSection,
    Holder,
    StepGroup,
    SyscallRow,
    ThreadCounts,
    ThreadTimes,
    ThreadWait,
)
from perfkit.result.level import LevelResult
from perfkit.summary.contention_rules import contention
from perfkit.summary.findings import find_all, kernel_time
from perfkit.summary.kernel_detail import kernel_detail

PROFILE = load_profile("default")


def thread(tid: int, name: str, role: str, gil: float | None, lock: float | None,
           kernel: float = 0.0) -> ThreadWait:
    return ThreadWait(tid, name, role,
                      ThreadCounts(10, None, None, 5, None, 40, 90, 7),
                      ThreadTimes(gil, None, lock, 0.5, 1.0, kernel),
                      [SyscallRow("futex", 40, 0.3)])


def section(gil: float | None, lock: float | None, **kw: object) -> ContentionSection:
    base = dict(
        source="ebpf", gil_probe="futex", window_s=4.0, engine_tid=1,
        threads=[thread(1, "MainThread", "engine+loadgen", gil, lock, kernel=0.3),
                 thread(2, "gilhog", "other", 0.1, 0.0, kernel=0.1)],
        gil_holders=[Holder(2, "gilhog", "other", 0.9 * (gil or 0), 0.9, "app.bursts")],
        lock_holders=[Holder(3, "flusher", "other", lock or 0, 1.0, "app.flusher")],
        steps=[StepGroup("all", 400, 0.008, (gil or 0) / 400, (lock or 0) / 400),
               StepGroup("tail", 4, 0.060, 0.020, 0.015),
               StepGroup("median", 40, 0.005, 0.0005, 0.0)])
    return ContentionSection(**(base | kw))  # type: ignore[arg-type]


def lv(sec: ContentionSection | None) -> LevelResult:
    return replace(level({}), contention=sec)


def test_gil_contention_names_thread_holder_and_fix() -> None:
    (f,) = contention([lv(section(gil=1.0, lock=0.0))], PROFILE)
    assert f.id == "gil_contention" and f.severity == "warning"
    assert "The engine thread (MainThread) waited for the GIL 50% of its busy time at " \
        "concurrency 4: 1.00 s of 2.00 s on a CPU or waiting (25% of the 4.00 s level; " \
        "inside the steps 2.50 of 8.00 ms a step" in f.message
    assert "20.00 of 60.00 ms in its slowest steps" in f.message
    assert "Held by (ran while it waited): gilhog (other, app.bursts) 90%" in f.message
    assert f.evidence["holders"][0]["name"] == "gilhog"
    assert f.evidence["level_share"] == 0.25 and f.evidence["busy_share"] == 0.5
    assert "Move the work of thread 'gilhog' (app.bursts) out of the engine's process" in f.fix


def test_lock_contention_names_the_releaser() -> None:
    (f,) = contention([lv(section(gil=0.01, lock=0.8))], PROFILE)
    assert f.id == "lock_contention"
    assert "waited for a lock 44% of its busy time" in f.message
    assert "Held by (released it, ending the wait): flusher (other, app.flusher) 100%" \
        in f.message
    assert "Shorten the critical section of thread 'flusher' (app.flusher)" in f.fix


def test_clean_levels_and_small_waits_name_nothing() -> None:
    assert contention([lv(section(gil=0.06, lock=0.0))], PROFILE) == []  # 1.5%: clean
    small = section(gil=0.04, lock=0.04, window_s=0.2)  # 20% but 40 ms in all
    assert contention([lv(small)], PROFILE) == []
    assert contention([lv(None)], PROFILE) == []
    unmeasured = section(gil=None, lock=None, unavailable={"gil_wait": "x", "lock_wait": "x"})
    assert contention([lv(unmeasured)], PROFILE) == []


def test_the_first_level_that_holds_is_named_once() -> None:
    levels = [lv(section(gil=0.0, lock=0.0)), lv(section(gil=2.0, lock=0.0)),
              lv(section(gil=3.0, lock=0.0))]
    found = [f for f in find_all(levels, PROFILE, None) if f.id == "gil_contention"]
    assert len(found) == 1 and found[0].evidence["wait_s"] == 2.0


def test_perfkit_own_thread_as_holder_says_so() -> None:
    own = section(gil=1.0, lock=0.0, gil_holders=[Holder(5, "perfkit-stack-sampler",
                                                         "perfkit", 0.8, 0.8)])
    (f,) = contention([lv(own)], PROFILE)
    assert "perfkit's own perfkit-stack-sampler: lower --stack-rate" in f.fix


def test_a_gil_wait_with_no_holder_running_is_the_machines_not_a_hog() -> None:
    # measured beside 1.8 busy cores: 19% of busy time, threads seen running in 10% of it
    # (the holders had lost their cores): the run queue, machine_contended's to name
    starved = section(gil=0.23, lock=0.0, gil_holders=[
        Holder(5, "perfkit-tail-probe", "perfkit", 0.014, 0.06),
        Holder(6, "python3", "native", 0.2, 0.9)])  # native threads hold no GIL
    assert contention([lv(starved)], PROFILE) == []


def test_the_fallback_names_candidates_and_cannot_see_a_lock_holder() -> None:
    sampled = section(gil=1.0, lock=0.8, source="sampled", gil_probe="sampled",
                      lock_holders=[])
    gil, lock = contention([lv(sampled)], PROFILE)
    assert "Held by (ran while it waited): gilhog (other, app.bursts) 90%" in gil.message
    assert "). The holder is not seen without eBPF: the off-CPU stacks (--stacks)" \
        in lock.message


def test_high_kernel_time_says_which_threads_and_syscalls() -> None:
    text, ev = kernel_detail(lv(section(gil=0.0, lock=0.0)))
    assert "Kernel CPU by thread: MainThread (engine+loadgen) 0.30 s (75%), gilhog (other) " \
        "0.10 s (25%)." in text
    assert "Minor page faults: MainThread 7, gilhog 7." in text
    assert "Syscalls (time includes sleeping in them): MainThread: futex 40 calls (300 ms)" \
        in text
    assert ev["kernel_s_by_thread"] == {"MainThread": 0.3, "gilhog": 0.1}
    text, ev = kernel_detail(lv(None))
    assert "Run with --contention" in text and ev == {}
    hot = level({"cpu": {"available": True, "user_s": 1.0, "system_s": 0.5,
                         "system_share": 1 / 3, "wall_s": 2.0}, "counts": {"steps": 10}})
    (f,) = kernel_time([replace(hot, contention=section(gil=0.0, lock=0.0))], PROFILE)
    assert "Kernel CPU by thread: MainThread" in f.message
    assert f.evidence["syscalls"]["MainThread"][0]["syscall"] == "futex"


def test_gil_waits_during_gc_pauses_are_the_collectors() -> None:
    # the engine waited 1.0 s for the GIL, 0.9 s of it while another thread collected
    # garbage: the GC findings name that; 0.1 s (2.5%) is no GIL contention
    assert contention([lv(section(gil=1.0, lock=0.0, gil_in_gc_s=0.9))], PROFILE) == []
    (f,) = contention([lv(section(gil=1.0, lock=0.0, gil_in_gc_s=0.3))], PROFILE)
    assert "41% of its busy time" in f.message and "besides 0.30 s in GC pauses" in f.message
