"""Raw contention data -> the level's section: totals between the mark and the end,
the engine's waits placed in its steps, holders, cost; the fallback's ticks; and
"unavailable" kept as reasons, never zeros. Exact setups, no tracer."""

from __future__ import annotations

import pytest

from perfkit.measure.bpf_script import HOLD_HZ
from perfkit.measure.contention import ContentionRaw
from perfkit.measure.ebpf import BpfTrace, Dump
from perfkit.measure.probe_cost import ProbeCost
from perfkit.measure.threads import ThreadBook
from perfkit.measure.waitstates import SampledWaits
from perfkit.summary.contention import contention_section

ENGINE, HOG, HOLDER, OMP = 10, 11, 12, 13


def book() -> ThreadBook:
    b = ThreadBook(1, ENGINE)
    b.python = {ENGINE: "MainThread", HOG: "hog", HOLDER: "flusher"}
    b.comm = {OMP: "python3"}
    b.code = {HOLDER: "app.flusher"}
    return b


def trace() -> BpfTrace:
    t = BpfTrace(attached_s=99.0)
    t.dumps = [
        Dump(100.0, False, {"@gil_ns": {"10": 1_000_000, "11": 5}, "@gil_n": {"10": 1},
                            "@lock_ns": {"10": 0}, "@lock_n": {"10": 0},
                            "@futex_n": {"10": 4}, "@ran": {"11": 10},
                            "@sc_n": {"10,202": 4}, "@sc_ns": {"10,202": 1_000_000}}),
        Dump(101.0, True, {"@gil_ns": {"10": 41_000_000, "11": 5}, "@gil_n": {"10": 5},
                           "@lock_ns": {"10": 30_000_000}, "@lock_n": {"10": 2},
                           "@futex_n": {"10": 20}, "@ran": {"11": 10 + HOLD_HZ // 50,
                                                            "13": 30},
                           "@sc_n": {"10,202": 20, "10,230": 3},
                           "@sc_ns": {"10,202": 71_000_000, "10,230": 2_000_000}})]
    # engine GIL waits: 30 ms in step 1, 10 ms between steps; a lock wait timed out then
    # one woken by the holder (the timed-out one is the holder's too)
    t.gil_waits = [(ENGINE, 100.10, 0.030, HOG, 0), (ENGINE, 100.50, 0.010, HOG, 0)]
    t.lock_waits = [(ENGINE, 100.60, 0.020, HOG, -110), (ENGINE, 100.62, 0.010, HOLDER, 0)]
    return t


def raw(**kw) -> ContentionRaw:
    base = dict(pid=1, engine_tid=ENGINE, source="ebpf", reason="", gil_probe="futex",
                unavailable={}, book=book(), mark_s=100.0, end_s=101.0, trace=trace(),
                cost=ProbeCost(0.0, 1e-6, 2e-6),
                stats_at_mark={ENGINE: (1.0, 0.5, 100)},
                stats_at_end={ENGINE: (1.5, 0.6, 180), HOG: (0.9, 0.0, 2)})
    return ContentionRaw(**(base | kw))


STEPS = ([100.05, 100.55, 100.70], [100.15, 100.65, 100.71])  # 100, 100 and 10 ms


def test_ebpf_totals_are_the_measured_phase_only() -> None:
    sec = contention_section(raw(), *STEPS, t0_s=100.0, output_tokens=50)
    assert sec.source == "ebpf" and sec.gil_probe == "futex" and sec.window_s == 1.0
    e = sec.thread(ENGINE)
    assert e is not None and e.name == "MainThread" and e.role == "engine+loadgen"
    assert e.times.gil_wait_s == pytest.approx(0.040)  # 41 ms less the 1 ms before the mark
    assert e.counts.gil_waits == 4 and e.counts.gil_acquires is None
    assert e.times.lock_wait_s == pytest.approx(0.030) and e.counts.lock_waits == 2
    assert e.counts.futex_calls == 16 and e.counts.syscalls == 19
    assert e.times.cpu_s == pytest.approx(0.6) and e.times.kernel_s == pytest.approx(0.1)
    assert e.counts.minor_faults == 80
    assert [(s.name, s.count) for s in e.syscalls] == [("futex", 16), ("clock_nanosleep", 3)]
    assert e.times.gil_hold_s is None  # futex mode: holds are the uprobes' only


def test_waits_are_placed_in_steps_and_the_tail() -> None:
    sec = contention_section(raw(), *STEPS, t0_s=100.0, output_tokens=50)
    every, tail = sec.step_group("all"), sec.step_group("tail")
    assert every is not None and every.num_steps == 3
    assert every.gil_wait_s == pytest.approx(0.030 / 3)  # the 2nd wait is between steps
    assert every.lock_wait_s == pytest.approx(0.030 / 3)  # both lock waits in step 2
    assert tail is not None and tail.num_steps == 1
    assert sec.gil_s == [pytest.approx((0.10, 0.13)), pytest.approx((0.50, 0.51))]
    assert sec.placed_share == pytest.approx((0.040 + 0.030) / (0.040 + 0.030))


def test_holders_gil_ran_meanwhile_lock_released_it() -> None:
    sec = contention_section(raw(), *STEPS, t0_s=100.0, output_tokens=50)
    assert [h.name for h in sec.gil_holders] == ["hog"]  # the native thread is left out
    assert sec.gil_holders[0].seconds == pytest.approx((HOLD_HZ // 50) / HOLD_HZ)
    (holder,) = sec.lock_holders
    assert holder.name == "flusher" and holder.code == "app.flusher"
    assert holder.share == pytest.approx(1.0)  # the timed-out wait is the releaser's too


def test_cost_is_hits_times_the_calibrated_cost() -> None:
    sec = contention_section(raw(), *STEPS, t0_s=100.0, output_tokens=50)
    assert sec.cost is not None
    assert sec.cost.engine_s == pytest.approx(19 * 1e-6 + 16 * 2e-6)
    assert sec.cost.step_share == pytest.approx(sec.cost.engine_s / 0.21)


def test_unavailable_parts_are_reasons_not_zeros() -> None:
    why = "tracefs is not mounted"
    r = raw(unavailable={"lock_wait": why, "syscalls": why}, counters_reason="perf not found")
    sec = contention_section(r, *STEPS, t0_s=100.0, output_tokens=50)
    e = sec.thread(ENGINE)
    assert e is not None and e.times.lock_wait_s is None and e.counts.lock_waits is None
    assert e.times.syscall_s is None and e.syscalls[0].name == "futex"
    assert sec.unavailable == {"lock_wait": why, "syscalls": why, "counters": "perf not found"}
    assert sec.lock_holders == [] and sec.lock_s == []
    every = sec.step_group("all")
    assert every is not None and every.lock_wait_s is None


def test_the_sampled_fallback_counts_ticks() -> None:
    s = SampledWaits(0.01, ticks=100)
    s.counts = {ENGINE: {"gil": 20, "lock": 5, "on": 75}, HOG: {"on": 90}}  # type: ignore
    s.waits = [(ENGINE, 100.11, "gil"), (ENGINE, 100.61, "lock")]
    s.gil_ran.update({HOG: 18})
    s.cpu_s = 0.05
    r = raw(source="sampled", gil_probe="sampled", reason="eBPF needs root", trace=None,
            sampled=s, cost=None, unavailable={"syscalls": "eBPF needs root"})
    sec = contention_section(r, *STEPS, t0_s=100.0, output_tokens=50)
    e = sec.thread(ENGINE)
    assert e is not None and e.counts.gil_wait_ticks == 20 and e.counts.gil_waits is None
    assert e.times.gil_wait_s == pytest.approx(0.20) and e.times.lock_wait_s == 0.05
    assert sec.gil_holders[0].name == "hog" and sec.gil_holders[0].seconds == 0.18
    assert sec.lock_holders == [] and sec.window_s == 1.0
    assert sec.cost is not None and sec.cost.sampler_cpu_s == 0.05
    every = sec.step_group("all")
    assert every is not None and every.gil_wait_s == pytest.approx(0.01 / 3)


def test_gil_waits_inside_gc_pauses_are_counted_apart() -> None:
    sec = contention_section(raw(), *STEPS, t0_s=100.0, output_tokens=50,
                             gc=[(100.12, 100.20)])  # covers 10 of the first wait's 30 ms
    assert sec.gil_in_gc_s == pytest.approx(0.010)


def test_counters_per_output_token_and_per_step_from_a_fake_pmu() -> None:
    from perfkit.measure.hwcounters import CounterReadings

    fake = CounterReadings(1.0, process={"instructions": 8e9, "cycles": 4e9,
                                         "LLC-load-misses": 2e6, "task-clock": 900.0},
                           engine={"instructions": 6e9, "cycles": 2e9,
                                   "LLC-load-misses": 1.5e6, "L1-dcache-load-misses": None},
                           hitm_event="mem_load_l3_hit_retired.xsnp_hitm")
    sec = contention_section(raw(counters=fake), *STEPS, t0_s=100.0, output_tokens=500)
    c = sec.counters
    assert c is not None and c.ipc == 3.0  # the engine thread's instructions / cycles
    assert c.per_token["instructions"] == 8e9 / 500 and c.per_token["LLC-load-misses"] == 4e3
    assert c.per_step["LLC-load-misses"] == 1.5e6 / 3
    assert c.per_step["L1-dcache-load-misses"] is None  # not supported: None, never 0
    assert c.hitm_event == "mem_load_l3_hit_retired.xsnp_hitm"
