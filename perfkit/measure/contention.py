"""Who waited for what, beside one level: GIL and lock waits per thread, and counters.

    probe = ContentionProbe(pid, engine_tid); probe.start()  # before the level
    probe.mark()                                             # the measured phase starts
    raw = probe.stop()                                       # ContentionRaw

Where eBPF can run (root, bpftrace; the GIL's symbols in the interpreter's files; the
tracepoints need tracefs) a bpftrace child traces the process (measure/ebpf.py). Where
it cannot, the fallback samples each thread's state from /proc (measure/waitstates.py)
and `reason` says why eBPF did not run; what neither can measure carries its reason in
`unavailable` (never a 0). perf stat counts beside either (measure/hwcounters.py). All
times are perf_counter seconds (the tracer's clock is checked against it).
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field

from perfkit.measure import ebpf
from perfkit.measure.bpf_script import ScriptSpec
from perfkit.measure.elfsyms import GilImage, find_gil
from perfkit.measure.hwcounters import CounterReadings, CounterSource, PerfStat
from perfkit.measure.probe_cost import (
    Marker,
    ProbeCost,
    call_times,
    probe_cost,
    untraced_times,
)
from perfkit.measure.threads import ENGINE_LOADGEN, ThreadBook, thread_stats
from perfkit.measure.waitstates import SampledWaits, WaitSampler

MODES = ("auto", "ebpf", "sampled")  # auto: eBPF where it can run, else sampled
Stats = dict[int, tuple[float, float, int]]


@dataclass
class ContentionRaw:
    pid: int
    engine_tid: int | None
    source: str  # "ebpf", "sampled" (the fallback) or "" (nothing could run)
    reason: str  # why not eBPF; "" when eBPF ran
    gil_probe: str  # "futex" (words of the GIL), "uprobes" (take_gil), "sampled" or ""
    unavailable: dict[str, str]  # "gil_wait" | "lock_wait" | "syscalls" | ... -> why
    book: ThreadBook
    mark_s: float  # perf_counter: the measured phase's start
    end_s: float  # and its end
    trace: ebpf.BpfTrace | None = None
    sampled: SampledWaits | None = None
    cost: ProbeCost | None = None  # per probe hit (eBPF), from the calibration
    stats_at_mark: Stats = field(default_factory=dict)  # per-thread CPU and faults
    stats_at_end: Stats = field(default_factory=dict)
    counters: CounterReadings | None = None
    counters_reason: str = ""  # perf stat did not run: why


class ContentionProbe:
    def __init__(self, pid: int | None = None, engine_tid: int | None = None,
                 engine_role: str = ENGINE_LOADGEN, mode: str = "auto",
                 counters: CounterSource | None = None, sample_hz: float = 100.0,
                 python_names: dict[int, str] | None = None, gil_uprobes: bool = False,
                 thread_code: dict[int, str] | None = None) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        self.pid = os.getpid() if pid is None else pid
        own = self.pid == os.getpid()
        self.engine_tid = threading.get_native_id() if engine_tid is None and own \
            else engine_tid
        self.mode, self.sample_hz, self.gil_uprobes = mode, sample_hz, gil_uprobes
        self.book = ThreadBook(self.pid, self.engine_tid, engine_role)
        self._names, self._code = python_names, thread_code
        self._counters: CounterSource = counters or PerfStat(self.pid, self.engine_tid)
        self._tracer: ebpf.BpfTracer | None = None
        self._marker = Marker() if own else None
        self._sampler: WaitSampler | None = None
        self._raw = ContentionRaw(self.pid, self.engine_tid, "", "", "", {}, self.book, 0.0,
                                  0.0)

    def start(self) -> None:
        raw = self._raw
        self.book.look(self._names, self._code)
        gil, gil_why = find_gil(self.pid)
        why = ebpf.unavailable() if self.mode != "sampled" else "the sampled fallback chosen"
        if not why:
            why = self._start_ebpf(gil, gil_why)
        if why:
            raw.reason = why
            self._start_sampled(gil, gil_why)
        raw.counters_reason = self._counters.start()
        self.mark()

    def _start_sampled(self, gil: GilImage | None, gil_why: str) -> None:
        raw = self._raw
        sampler = WaitSampler(self.pid, gil, self.sample_hz, self.engine_tid)
        why = raw.reason if self.mode == "ebpf" else sampler.start()
        raw.unavailable["syscalls"] = raw.reason
        if why:
            raw.unavailable |= {"gil_wait": why, "lock_wait": why}
            return
        self._sampler, raw.source, raw.gil_probe = sampler, "sampled", "sampled"
        if gil is None:
            raw.unavailable["gil_wait"] = gil_why

    def _start_ebpf(self, gil: GilImage | None, gil_why: str) -> str:
        """The futex tracepoints (GIL waits: its words; lock waits: the rest) and, where
        asked for or where the tracepoints cannot run, the GIL's uprobes."""
        raw = self._raw
        tp_why = ebpf.tracepoints_reason()
        uprobes = gil is not None and gil.symbols and (self.gil_uprobes or bool(tp_why))
        if tp_why and not uprobes:
            return f"{tp_why}; and {gil_why}" if gil_why else tp_why
        own = self.pid == os.getpid()
        before = untraced_times(uprobes) if own else None
        spec = ScriptSpec(self.pid, self.engine_tid, gil.data_ranges if gil else [],
                          not tp_why, gil.path if uprobes and gil else None,
                          self._marker.address if self._marker else None)
        tracer = ebpf.BpfTracer(spec)
        why = tracer.start()
        if why:
            return why
        self._tracer, raw.source = tracer, "ebpf"
        raw.gil_probe = "uprobes" if uprobes else "futex" if gil is not None else ""
        raw.cost = probe_cost(before, call_times(uprobes) if own else None)
        if gil is None:
            raw.unavailable["gil_wait"] = gil_why
        if tp_why:
            raw.unavailable |= {"lock_wait": tp_why, "syscalls": tp_why}
        return ""

    def mark(self) -> None:
        """The measured phase starts now (the warm-up is over)."""
        self._raw.mark_s = time.perf_counter()
        if self._tracer is not None and self._marker is not None:
            self._marker.wake()  # the tracer dumps its totals: the phase's baseline
        self._raw.stats_at_mark = thread_stats(self.pid)
        self.book.look(self._names, self._code)
        if self._sampler is not None:
            self._sampler.mark()

    def stop(self) -> ContentionRaw:
        raw = self._raw
        raw.end_s = time.perf_counter()
        raw.stats_at_end = thread_stats(self.pid)
        self.book.look(self._names, self._code)
        if self._tracer is not None:
            raw.trace = self._tracer.stop()
            if raw.trace.error and not raw.trace.dumps:
                raw.unavailable |= {k: raw.trace.error for k in ("gil_wait", "lock_wait")}
        if self._sampler is not None:
            raw.sampled = self._sampler.stop()
        if not raw.counters_reason:
            raw.counters = self._counters.stop()
        return raw
