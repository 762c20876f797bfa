"""GIL and lock waits of planted threads, as the probe measures them beside a workload:
with eBPF (root and bpftrace: skipped with the reason otherwise) and with the sampled
fallback (anywhere with /proc); without either, the reasons instead of zeros."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from perfkit.measure import ebpf
from perfkit.measure.contention import ContentionProbe, ContentionRaw
from perfkit.measure.hwcounters import CounterReadings
from perfkit.summary.contention import contention_section

EBPF = ebpf.unavailable() or ebpf.tracepoints_reason()
needs_ebpf = pytest.mark.skipif(bool(EBPF), reason=f"eBPF unavailable: {EBPF}")


class NoCounters:
    """A counter source that counts nothing (perf stat is tested on its own)."""

    def start(self) -> str:
        return ""

    def mark(self) -> None:
        pass

    def stop(self) -> CounterReadings:
        return CounterReadings(1.0, {"task-clock": 5.0}, {"task-clock": 4.0},
                               {"hardware": "fake: no PMU"})


def hog(stop: threading.Event) -> None:
    while not stop.is_set():
        end = time.perf_counter() + 0.02
        while time.perf_counter() < end:
            sum(i * i for i in range(200))  # holds the GIL
        time.sleep(0.005)


def holder(lock: threading.Lock, stop: threading.Event) -> None:
    while not stop.is_set():
        with lock:
            time.sleep(0.03)  # asleep while holding it: no CPU, no GIL
        time.sleep(0.02)


@contextmanager
def planted() -> Iterator[threading.Lock]:
    lock, stop = threading.Lock(), threading.Event()
    threads = [threading.Thread(target=hog, args=(stop,), name="planted-hog", daemon=True),
               threading.Thread(target=holder, args=(lock, stop), name="planted-holder",
                                daemon=True)]
    for t in threads:
        t.start()
    try:
        yield lock
    finally:
        stop.set()
        for t in threads:
            t.join(5)


def engine_like(lock: threading.Lock, seconds: float) -> tuple[list[float], list[float]]:
    """Steps that take the lock, do Python work and release the GIL: (starts, ends)."""
    starts, ends = [], []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        starts.append(time.perf_counter())
        with lock:
            pass
        sum(range(2000))
        time.sleep(0.0005)  # releases the GIL, then must get it back
        ends.append(time.perf_counter())
    return starts, ends


def run(mode: str) -> tuple[ContentionRaw, list[float], list[float]]:
    with planted() as lock:
        probe = ContentionProbe(mode=mode, counters=NoCounters())
        probe.start()
        engine_like(lock, 0.2)  # a warm-up, left out after the mark
        probe.mark()
        starts, ends = engine_like(lock, 1.2)
        return probe.stop(), starts, ends


@needs_ebpf
def test_ebpf_names_the_gil_hog_and_the_lock_holder() -> None:
    raw, starts, ends = run("ebpf")
    assert raw.source == "ebpf" and raw.gil_probe == "futex", raw.reason
    sec = contention_section(raw, starts, ends, starts[0], output_tokens=100)
    engine = sec.thread(sec.engine_tid)
    assert engine is not None and engine.role == "engine+loadgen"
    assert (engine.times.gil_wait_s or 0) > 0.05 and (engine.counts.gil_waits or 0) > 5
    assert (engine.times.lock_wait_s or 0) > 0.1 and (engine.counts.lock_waits or 0) > 3
    assert sec.gil_holders[0].name == "planted-hog"
    assert sec.lock_holders[0].name == "planted-holder" and sec.lock_holders[0].share > 0.8
    steps = sec.step_group("all")
    assert steps is not None and (steps.gil_wait_s or 0) > 0 and (steps.lock_wait_s or 0) > 0
    assert sec.cost is not None and sec.cost.step_share is not None
    assert sec.counters is not None and sec.counters.events == {"task-clock": 5.0}
    assert sec.unavailable["hardware"] == "fake: no PMU"
    hog_row = next(t for t in sec.threads if t.name == "planted-hog")
    assert hog_row.syscalls and (hog_row.times.cpu_s or 0) > 0
    assert (sec.placed_share or 0) > 0.5


def test_the_sampled_fallback_sees_the_same_waits() -> None:
    raw, starts, ends = run("sampled")
    if raw.source != "sampled":
        pytest.skip(f"fallback unavailable: {raw.unavailable}")
    assert raw.reason == "the sampled fallback chosen"
    sec = contention_section(raw, starts, ends, starts[0], output_tokens=100)
    engine = sec.thread(sec.engine_tid)
    assert engine is not None and (engine.times.lock_wait_s or 0) > 0.05
    assert engine.counts.lock_wait_ticks and engine.counts.gil_waits is None
    assert sec.lock_holders == []  # the fallback cannot see who holds a lock
    assert sec.unavailable["syscalls"] == "the sampled fallback chosen"
    assert sec.cost is not None and sec.cost.sampler_cpu_s is not None


def test_without_ebpf_and_with_ebpf_required_everything_says_why(monkeypatch) -> None:
    monkeypatch.setattr(ebpf, "unavailable", lambda: "eBPF needs root (test)")
    probe = ContentionProbe(mode="ebpf", counters=NoCounters())
    probe.start()
    raw = probe.stop()
    sec = contention_section(raw, [], [], 0.0, output_tokens=0)
    assert sec.source == "" and sec.reason == "eBPF needs root (test)"
    assert sec.unavailable["gil_wait"] == sec.unavailable["lock_wait"] == sec.reason
    engine = sec.thread(sec.engine_tid)
    assert engine is not None and engine.times.gil_wait_s is None  # never a 0
    assert engine.times.lock_wait_s is None and engine.counts.gil_waits is None
