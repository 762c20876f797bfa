"""A level's raw contention data (measure/contention.py) -> its ContentionSection.

Per thread: the eBPF totals between the dump nearest the measured phase's start and the
last one (bpftrace dumps its running totals every 100 ms: the totals' window is good to
one dump), or the fallback's ticks (each tick stands for one sampling interval). The
engine thread's waits long enough to be events (>= the script's min_wait: 50 us; the
fallback: one tick each) are placed in the engine's steps and behind their holders:
- GIL: the other threads' GIL holds (>= 100 us) that overlap each engine wait;
- lock: the thread that woke the engine's futex (FUTEX_WAKE on its word): the releaser.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from perfkit.measure import syscall_names
from perfkit.measure.bpf_script import HOLD_HZ
from perfkit.measure.contention import ContentionRaw
from perfkit.measure.ebpf import BpfTrace, Dump, Wait
from perfkit.measure.threads import NATIVE, ThreadBook
from perfkit.result.contention import (
    ContentionSection,
    Holder,
    SyscallRow,
    ThreadCounts,
    ThreadTimes,
    ThreadWait,
)
from perfkit.summary.contention_cost import cost_info, hw_counters
from perfkit.summary.contention_time import Interval, Waits, step_waits

TOP_SYSCALLS = 5
Totals = dict[str, dict[str, int]]


def _window(trace: BpfTrace) -> tuple[Dump | None, Dump | None]:
    """(the totals at the measured phase's start, None: from attach; the last totals)."""
    marks = [d for d in trace.dumps if not d.final]
    ends = [d for d in trace.dumps if d.final]
    return (marks[-1] if marks else None), (ends[-1] if ends else None)


def _delta(end: Dump, base: Dump | None) -> Totals:
    out: Totals = {}
    for name, values in end.maps.items():
        before = base.maps.get(name, {}) if base is not None else {}
        out[name.lstrip("@")] = {k: v - before.get(k, 0) for k, v in values.items()}
    return out


def _ebpf_row(tid: int, t: Totals, measured: dict[str, bool]) -> tuple[ThreadCounts,
                                                                        ThreadTimes]:
    key = str(tid)

    def get(name: str, what: str) -> int | None:
        return t.get(name, {}).get(key, 0) if measured[what] else None

    def secs(name: str, what: str) -> float | None:
        v = get(name, what)
        return None if v is None else v / 1e9

    calls = sum(v for k, v in t.get("sc_n", {}).items() if k.split(",")[0] == key)
    in_calls = sum(v for k, v in t.get("sc_ns", {}).items() if k.split(",")[0] == key)
    sys_ok, uprobes = measured["syscalls"], measured["uprobes"]
    gil_n = get("gil_n", "gil_wait")
    counts = ThreadCounts(None if uprobes else gil_n, gil_n if uprobes else None, None,
                          get("lock_n", "lock_wait"), None, get("futex_n", "lock_wait"),
                          calls if sys_ok else None, None)
    times = ThreadTimes(secs("gil_ns", "gil_wait"),
                        secs("hold_ns", "gil_wait") if uprobes else None,
                        secs("lock_ns", "lock_wait"), in_calls / 1e9 if sys_ok else None,
                        None, None)
    return counts, times


def _syscalls(tid: int, t: Totals) -> list[SyscallRow]:
    rows = []
    for k, n in t.get("sc_n", {}).items():
        who, _, nr = k.partition(",")
        if who == str(tid) and n > 0:
            ns = t.get("sc_ns", {}).get(k, 0)
            rows.append(SyscallRow(syscall_names.name(int(nr)), n, ns / 1e9))
    return sorted(rows, key=lambda r: -r.time_s)[:TOP_SYSCALLS]


def _with_proc(tid: int, raw: ContentionRaw, c: ThreadCounts, t: ThreadTimes
               ) -> tuple[ThreadCounts, ThreadTimes]:
    a, b = raw.stats_at_mark.get(tid), raw.stats_at_end.get(tid)
    if b is None:
        return c, t
    a = a or (0.0, 0.0, 0)  # started during the phase: all of it is the phase's
    return (replace(c, minor_faults=b[2] - a[2]),
            replace(t, cpu_s=(b[0] + b[1]) - (a[0] + a[1]), kernel_s=b[1] - a[1]))


def _sampled_row(tid: int, raw: ContentionRaw, measured: dict[str, bool]
                 ) -> tuple[ThreadCounts, ThreadTimes]:
    s = raw.sampled
    ticks: dict[str, int] = dict(s.counts.get(tid, {})) if s is not None else {}
    step = s.interval_s if s is not None else 0.0
    gil = ticks.get("gil", 0) if measured["gil_wait"] else None
    lock = ticks.get("lock", 0) if measured["lock_wait"] else None
    return (ThreadCounts(None, None, gil, None, lock, None, None, None),
            ThreadTimes(None if gil is None else gil * step, None,
                        None if lock is None else lock * step, None, None, None))


def thread_rows(raw: ContentionRaw, totals: Totals) -> list[ThreadWait]:
    measured = {k: k not in raw.unavailable for k in ("gil_wait", "lock_wait", "syscalls")}
    measured["uprobes"] = raw.gil_probe == "uprobes"
    tids: set[int] = set(raw.stats_at_end)
    tids |= {int(k.split(",")[0]) for m in totals.values() for k in m}
    if raw.sampled is not None:
        tids |= set(raw.sampled.counts)
    rows = []
    for tid in tids:
        c, t = (_ebpf_row(tid, totals, measured) if raw.source == "ebpf"
                else _sampled_row(tid, raw, measured))
        c, t = _with_proc(tid, raw, c, t)
        rows.append(ThreadWait(tid, raw.book.name(tid), raw.book.role(tid), c, t,
                               _syscalls(tid, totals)))
    return sorted(rows, key=lambda r: (-((r.times.gil_wait_s or 0) + (r.times.lock_wait_s
                                                                      or 0)), r.tid))


def engine_waits(raw: ContentionRaw) -> tuple[Waits | None, Waits | None]:
    """The engine thread's GIL and lock waits in the measured phase (None: not measured)."""
    lo, hi, tid = raw.mark_s, raw.end_s, raw.engine_tid
    gil: list[Interval] = []
    lock: list[Interval] = []
    if raw.trace is not None:
        gil = [(w[1], w[1] + w[2]) for w in raw.trace.gil_waits if w[0] == tid]
        lock = [(w[1], w[1] + w[2]) for w in raw.trace.lock_waits if w[0] == tid]
    elif raw.sampled is not None:
        step = raw.sampled.interval_s
        for t, at, what in raw.sampled.waits:
            if t == tid:
                (gil if what == "gil" else lock).append((at - step, at))
    clip = [(max(s, lo), min(e, hi)) for s, e in gil]
    clip_lock = [(max(s, lo), min(e, hi)) for s, e in lock]
    return (None if "gil_wait" in raw.unavailable or tid is None else Waits(clip),
            None if "lock_wait" in raw.unavailable or tid is None else Waits(clip_lock))


TIMED_OUT = -110  # -ETIMEDOUT: the GIL's 5 ms switch interval ran out


def _woken_by(waits: list[Wait], tid: int, within: Waits) -> dict[int, float]:
    """Waker tid -> seconds of `tid`'s waits it ended; a wait that timed out goes to the
    waker of the same thread's next woken wait (the holder it asked to drop the GIL)."""
    out: dict[int, float] = {}
    pending = 0.0
    for _, s, d, waker, ret in sorted(w for w in waits if w[0] == tid):
        pending += within.inside(s, s + d)
        if ret == TIMED_OUT or not waker or waker == tid:
            continue
        out[waker] = out.get(waker, 0.0) + pending
        pending = 0.0
    return out


def _holders(raw: ContentionRaw, totals: Totals, gil: Waits | None, lock: Waits | None
             ) -> tuple[list[Holder], list[Holder]]:
    """GIL: the Python threads that ran while the engine thread waited for it (one of
    them held it); lock: the threads that woke the engine's lock waits (released it)."""
    trace, tid, book = raw.trace, raw.engine_tid, raw.book
    if tid is None:
        return [], []
    ran: dict[int, float] = {}
    if raw.sampled is not None:
        ran = {t: n * raw.sampled.interval_s for t, n in raw.sampled.gil_ran.items()}
    elif trace is not None:
        ran = {int(t): n / HOLD_HZ for t, n in totals.get("ran", {}).items()}
    ran = {t: s for t, s in ran.items() if book.role(t) != NATIVE}
    woke = _woken_by(trace.lock_waits, tid, lock) if trace and lock is not None else {}
    return (_rank(ran, gil.total_s if gil else 0.0, book) if gil is not None else [],
            _rank(woke, lock.total_s if lock else 0.0, book))


def _rank(by_tid: dict[int, float], total: float, book: ThreadBook) -> list[Holder]:
    rows = [Holder(t, book.name(t), book.role(t), s, s / total if total > 0 else 0.0,
                   book.code.get(t, "")) for t, s in by_tid.items() if s > 0]
    return sorted(rows, key=lambda h: -h.seconds)[:5]


def contention_section(raw: ContentionRaw, step_start_s: Sequence[float],
                       step_end_s: Sequence[float], t0_s: float, output_tokens: int,
                       gc: Sequence[Interval] = ()) -> ContentionSection:
    """Steps and GC pauses on perf_counter (the engine's clock outside lockstep); t0_s:
    the level's 0."""
    base, end = _window(raw.trace) if raw.trace else (None, None)
    totals = _delta(end, base) if end is not None else {}
    gil, lock = engine_waits(raw)
    rows = thread_rows(raw, totals)
    engine = next((r for r in rows if r.tid == raw.engine_tid), None)
    window = ((end.t_s - (base.t_s if base else raw.trace.attached_s or raw.mark_s))
              if end is not None and raw.trace is not None else raw.end_s - raw.mark_s)
    g_hold, l_hold = _holders(raw, totals, gil, lock)
    steps = list(zip(step_start_s, step_end_s))
    step_s = sum(e - s for s, e in steps)
    unavailable = dict(raw.unavailable)
    unavailable |= raw.counters.unavailable if raw.counters is not None else {}
    unavailable |= {"counters": raw.counters_reason} if raw.counters_reason else {}
    return ContentionSection(
        source=raw.source, reason=raw.reason, gil_probe=raw.gil_probe,
        unavailable=unavailable,
        window_s=window, engine_tid=raw.engine_tid, threads=rows,
        gil_holders=g_hold, lock_holders=l_hold,
        steps=step_waits(step_start_s, step_end_s, gil, lock),
        min_event_s=(raw.sampled.interval_s if raw.sampled is not None else 50e-6),
        placed_share=_placed(engine, gil, lock, raw.source),
        gil_in_gc_s=None if gil is None else gil.total_s - gil.minus(Waits(gc)).total_s,
        cost=cost_info(raw, engine, step_s),
        counters=hw_counters(raw.counters, output_tokens, len(steps)),
        clock_note=raw.trace.clock_note if raw.trace else "",
        gil_s=[(s - t0_s, e - t0_s) for s, e in gil.intervals()] if gil else [],
        lock_s=[(s - t0_s, e - t0_s) for s, e in lock.intervals()] if lock else [])


def _placed(engine: ThreadWait | None, gil: Waits | None, lock: Waits | None,
            source: str) -> float | None:
    """Of the engine thread's total waits, the share its events place in time."""
    if engine is None or source != "ebpf":
        return 1.0 if source == "sampled" else None
    total = (engine.times.gil_wait_s or 0.0) + (engine.times.lock_wait_s or 0.0)
    placed = (gil.total_s if gil else 0.0) + (lock.total_s if lock else 0.0)
    return min(1.0, placed / total) if total > 0 else None
