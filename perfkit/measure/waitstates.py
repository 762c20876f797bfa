"""The fallback without eBPF: what each thread waited on, sampled from /proc.

At every tick (rate_hz) each thread of the process is, since the last tick:
- "on": its on-CPU time (schedstat field 1) rose by at least IDLE_SHARE of the interval;
- "runnable": it did not run and its state is R (waiting for a core: the run queue);
- "gil": it did not run and sleeps in a futex on a word of the interpreter's static data
  (the GIL's condition variable: measure/elfsyms.py), read from
  /proc/PID/task/TID/syscall (syscall number, then its arguments: the futex word first);
- "lock": it sleeps in any other futex (threading.Lock, Condition, Queue, a C mutex);
- "idle": it sleeps elsewhere (epoll, a sleep, I/O).
A wait is good to one tick: a sample stands for the interval before it. The holder of
the GIL or of a lock is not seen: the threads that ran while the engine thread waited
for the GIL are kept as candidates (`gil_ran`: one of them held it, or a native thread
ran beside it); py-spy dump shows which thread holds the GIL, one snapshot at a time
(`owns_gil`); the off-CPU stacks (--stacks) show where the others wait.
Reading a thread's syscall needs ptrace permission over the process (its own: always).
In its own process the sampler runs Python, so at its tick every thread that runs Python
waits for the GIL; the on-CPU rise decides those ticks ("on"), as in stacks/offcpu.py.
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

from perfkit.measure import syscall_names
from perfkit.measure.elfsyms import GilImage
from perfkit.measure.threads import name_native

IDLE_SHARE = 0.05
STATES = ("on", "runnable", "gil", "lock", "idle")
MAX_EVENTS = 400_000


@dataclass
class SampledWaits:
    interval_s: float
    ticks: int = 0
    counts: dict[int, Counter[str]] = field(default_factory=dict)  # tid -> state -> ticks
    # (tid, tick time on perf_counter, "gil" | "lock"): the waits, for steps and the tail
    waits: list[tuple[int, float, str]] = field(default_factory=list)
    reason: str = ""  # "" when it sampled; else why nothing was
    cpu_s: float = 0.0  # the sampler thread's own CPU time: its cost
    # tid -> ticks it ran ("on") while the engine thread waited for the GIL
    gil_ran: Counter[int] = field(default_factory=Counter)


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read()
    except OSError:
        return None


class WaitSampler:
    def __init__(self, pid: int, gil: GilImage | None, rate_hz: float = 100.0,
                 engine_tid: int | None = None, proc: str = "/proc") -> None:
        if rate_hz <= 0:
            raise ValueError(f"rate_hz must be > 0, got {rate_hz}")
        self.pid, self.gil, self.engine_tid = pid, gil, engine_tid
        self.task = f"{proc}/{pid}/task"  # /proc/PID/task (another root: tests)
        self.data = SampledWaits(1.0 / rate_hz)
        self._futex = {n for n in (syscall_names.number("futex"),
                                   syscall_names.number("futex_waitv")) if n is not None}
        self._cpu_ns: dict[int, int] = {}
        self._me = -1
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="perfkit-wait-sampler",
                                         daemon=True)

    def start(self) -> str:
        """"" when sampling started; else why it cannot (and nothing runs)."""
        why = self.check()
        if why:
            self.data.reason = why
            return why
        self._thread.start()
        return ""

    def check(self) -> str:
        task = f"{self.task}/{self.pid}"
        if _read(f"{task}/schedstat") is None:
            return "no /proc/PID/task/*/schedstat on this machine"
        if _read(f"{task}/syscall") is None:
            return (f"cannot read /proc/{self.pid}/task/*/syscall (needs ptrace permission "
                    "over the process, or a kernel with CONFIG_HAVE_ARCH_TRACEHOOK)")
        return ""

    def mark(self) -> None:
        """The measured phase starts: the counts so far (the warm-up's) are dropped."""
        self.data.counts, self.data.ticks, self.data.gil_ran = {}, 0, Counter()

    def stop(self) -> SampledWaits:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        return self.data

    def _run(self) -> None:
        name_native("pk-wait-sampler")
        self._me = threading.get_native_id()
        cpu0 = time.thread_time()
        next_s = time.monotonic()
        while not self._stop.wait(max(0.0, next_s - time.monotonic())):
            self.sample_once()
            next_s = max(next_s + self.data.interval_s, time.monotonic())
        self.data.cpu_s = time.thread_time() - cpu0

    def sample_once(self) -> None:
        d = self.data
        now = time.perf_counter()
        d.ticks += 1
        try:
            tids = [int(t) for t in os.listdir(self.task)]
        except OSError:
            return
        states = {tid: s for tid in tids if tid != self._me and (s := self.state(tid))}
        for tid, state in states.items():
            d.counts.setdefault(tid, Counter())[state] += 1
            if state in ("gil", "lock") and len(d.waits) < MAX_EVENTS:
                d.waits.append((tid, now, state))
        if self.engine_tid is not None and states.get(self.engine_tid) == "gil":
            d.gil_ran.update(t for t, s in states.items() if s == "on")

    def state(self, tid: int) -> str | None:
        """One of STATES, or None: the thread's first tick (nothing to compare) or gone."""
        base = f"{self.task}/{tid}"
        sched = _read(f"{base}/schedstat")
        if sched is None:
            return None
        cpu = int(sched.split()[0])
        before = self._cpu_ns.get(tid)
        self._cpu_ns[tid] = cpu
        if before is None:
            return None
        if cpu - before >= IDLE_SHARE * self.data.interval_s * 1e9:
            return "on"
        stat = _read(f"{base}/stat")
        if stat is not None and stat.rsplit(")", 1)[-1].split()[:1] == ["R"]:
            return "runnable"
        return self._waiting_in(_read(f"{base}/syscall"))

    def _waiting_in(self, syscall: str | None) -> str:
        fields = (syscall or "").split()
        if len(fields) < 2 or not fields[0].isdigit() or int(fields[0]) not in self._futex:
            return "idle"
        word = int(fields[1], 16)
        return "gil" if self.gil is not None and self.gil.holds(word) else "lock"
