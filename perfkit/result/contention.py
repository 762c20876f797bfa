"""Contention in one level: who waited for the GIL and for locks, who held them, what the
probes cost, and the CPU's counters (with `sweep --contention`; `stacks --pid
--contention` reports the same per-thread rows).

Counts (acquisitions, waits, syscalls, faults) and times (seconds waited, held, in
syscalls) are separate types. A value that was not measured is None and `unavailable`
names what and why (never a 0): "gil_wait", "lock_wait", "syscalls", "counters",
"hardware", "hitm".
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ThreadCounts:
    gil_waits: int | None  # eBPF futex: GIL waits that blocked in the kernel
    gil_acquires: int | None  # eBPF uprobes: take_gil calls (every acquisition)
    gil_wait_ticks: int | None  # fallback: ticks the thread was seen waiting for the GIL
    lock_waits: int | None  # eBPF: futex waits on words that are not the GIL's
    lock_wait_ticks: int | None  # fallback: ticks seen waiting in such a futex
    futex_calls: int | None  # every futex syscall, the GIL's too (eBPF)
    syscalls: int | None  # every syscall (eBPF)
    minor_faults: int | None  # page faults without I/O (/proc); None: thread not seen twice


@dataclass(frozen=True)
class ThreadTimes:
    gil_wait_s: float | None  # asking for the GIL -> holding it
    gil_hold_s: float | None  # holding the GIL (eBPF uprobes only)
    lock_wait_s: float | None  # blocked in a futex that is not the GIL's
    syscall_s: float | None  # inside syscalls, blocking ones included (eBPF)
    cpu_s: float | None  # user + system CPU (/proc, 10 ms ticks)
    kernel_s: float | None  # system CPU alone


@dataclass(frozen=True)
class SyscallRow:
    name: str  # "futex", "mmap", ... ("syscall N" when the number is unknown here)
    count: int
    time_s: float  # inside the call, blocking included


@dataclass(frozen=True)
class ThreadWait:
    tid: int  # the kernel's thread id
    name: str  # the Python thread's name, else the kernel's (comm)
    role: str  # measure/threads.py ROLES: engine+loadgen, engine+http, sampler, native, other
    counts: ThreadCounts
    times: ThreadTimes
    syscalls: list[SyscallRow] = field(default_factory=list)  # by time, top few (eBPF)


@dataclass(frozen=True)
class Holder:
    """A thread that held what the engine thread waited for."""

    tid: int
    name: str
    role: str
    seconds: float  # of the engine's waits while this thread held it
    share: float  # of the engine's waits placed in time (0..1)
    code: str = ""  # what the thread runs: its target's module.name ("" unknown)


@dataclass(frozen=True)
class StepGroup:
    which: str  # "all", "tail" (steps slower than p99) or "median" (p45..p55)
    num_steps: int
    step_s: float  # mean step duration
    gil_wait_s: float | None  # mean engine-thread GIL wait inside a step
    lock_wait_s: float | None  # mean lock wait inside a step


@dataclass(frozen=True)
class ProbeCostInfo:
    gil_pair_us: float | None  # added to each GIL release + retake (calibrated at start)
    syscall_us: float | None  # added to each syscall
    futex_us: float | None  # added to each futex syscall beyond that
    engine_s: float | None  # those times the engine thread's hits: probe time in it
    step_share: float | None  # engine_s over the level's step time
    sampler_cpu_s: float | None  # fallback: the sampling thread's own CPU time


@dataclass(frozen=True)
class HwCounters:
    """perf stat over the measured phase: process totals and the engine thread's."""

    window_s: float
    events: dict[str, float | None] = field(default_factory=dict)  # process totals
    engine_events: dict[str, float | None] = field(default_factory=dict)
    ipc: float | None = None  # instructions / cycles, the engine thread's
    per_token: dict[str, float | None] = field(default_factory=dict)  # process / out token
    per_step: dict[str, float | None] = field(default_factory=dict)  # engine / step
    hitm_event: str = ""  # the PMU's HITM event counted ("" none)


@dataclass(frozen=True, kw_only=True)
class ContentionSection:
    source: str  # "ebpf", "sampled" (fallback: thread states from /proc) or ""
    reason: str = ""  # why not eBPF ("" when it ran)
    # how GIL waits were seen: "futex" (waits on the GIL's futex words, eBPF), "uprobes"
    # (take_gil entry to return, eBPF), "sampled" (thread states) or "" (not measured)
    gil_probe: str = ""
    unavailable: dict[str, str] = field(default_factory=dict)  # what -> why not measured
    window_s: float  # seconds the per-thread totals cover
    engine_tid: int | None
    threads: list[ThreadWait] = field(default_factory=list)  # most waiting first
    # who held the GIL while the engine thread waited: futex, the thread that woke it
    # (released the GIL); uprobes, the GIL holds overlapping its waits; fallback, the
    # threads that ran during its waits (candidates: not seen holding)
    gil_holders: list[Holder] = field(default_factory=list)
    lock_holders: list[Holder] = field(default_factory=list)  # who woke its lock waits
    steps: list[StepGroup] = field(default_factory=list)  # all, tail, median
    min_event_s: float = 0.0  # waits shorter than this are in totals, not placed in steps
    placed_share: float | None = None  # of the engine's waits, the share placed in time
    # of the engine's GIL waits placed in time, the seconds inside GC pauses (a collecting
    # thread holds the GIL: that wait is the collector's, named by the GC findings)
    gil_in_gc_s: float | None = None
    cost: ProbeCostInfo | None = None
    counters: HwCounters | None = None
    clock_note: str = ""  # "" when the tracer's clock checked out against perf_counter
    # The engine thread's waits on the level's clock (seconds from its t0), for the tail
    # breakdown; not in JSON.
    gil_s: list[tuple[float, float]] = field(default_factory=list, metadata={"json": False})
    lock_s: list[tuple[float, float]] = field(default_factory=list, metadata={"json": False})

    def thread(self, tid: int | None) -> ThreadWait | None:
        return next((t for t in self.threads if t.tid == tid), None)

    def step_group(self, which: str) -> StepGroup | None:
        return next((g for g in self.steps if g.which == which), None)
