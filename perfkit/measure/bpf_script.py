"""The bpftrace program perfkit runs beside a level: GIL and lock waits, syscalls.

For one process (`pid`), per thread (bpftrace's `tid`, the kernel's thread id), from the
futex tracepoints (a wait costs two tracepoint hits; a GIL handoff that does not block
costs nothing):
- GIL wait: a futex wait (FUTEX_WAIT, FUTEX_WAIT_BITSET) on a word of the interpreter's
  static data, where the GIL's mutex and condition variables live (measure/elfsyms.py;
  checked with uprobes: every futex call inside take_gil/drop_gil is on such a word, and
  no other). A wait lasts from the call to the thread's wake-up (sched_wakeup): once
  woken it waits for a core, which the run-queue wait (schedstat) counts, not this.
- Lock wait: a futex wait on any other word (threading.Lock, Condition, queue.Queue, a C
  mutex). The thread that woke it (FUTEX_WAKE on the word) released the lock: its holder.
- Syscalls (raw_syscalls): count and time in each, per thread and syscall number.
- Who held the GIL while the engine thread waited for it (asleep, until its wake-up):
  every 1/HOLD_HZ s on each CPU, the thread of this process on it (a thread running Python
  holds the GIL; native threads, which run without it, are told apart afterwards). A
  holder that lost its core while holding the GIL is not seen.
With `gil_uprobes` the GIL is traced at its functions instead: uprobes on take_gil (entry
to return: every acquisition counted) and drop_gil (hold times). Exact, but a uretprobe
costs microseconds on each of the ~10^4 GIL handoffs a second a torch engine makes
(every op releases the GIL): measured at 30% of step time on a VM. It is also what runs
where the tracepoints cannot (no tracefs).

Output (bpftrace -f json; one JSON object per line):
  "T <ns>"                       BEGIN: every probe is attached; its time checks clocks
  "G <tid> <start> <dur> <waker> <ret>"  an engine-thread GIL wait >= min_wait_ns (asleep:
                                 call to wake-up; the futex's return: 0 woken, -110
                                 timed out; uprobes: take_gil entry to return, 0 0)
  "F <tid> <start> <dur> <waker> <ret>"  an engine-thread lock wait >= min_wait_ns
  "M <ns>" + maps                the running totals when perfkit woke `mark_addr` (its
                                 measured phase starts)
  "E <ns>" + maps                the last totals, at the end (SIGINT)
Maps: @gil_ns/@gil_n, @lock_ns/@lock_n, @futex_n, @hold_ns [tid]; @sc_ns/@sc_n [tid,nr];
@ran[tid]: samples on a CPU while the engine thread waited for the GIL.
Times are bpftrace's `nsecs` (bpf_ktime_get_ns, CLOCK_MONOTONIC: time.perf_counter's
clock on Linux; the "T" line is checked against it).
"""

from __future__ import annotations

from dataclasses import dataclass, field

FUTEX_WAITS = (0, 9)  # FUTEX_WAIT, FUTEX_WAIT_BITSET (op & FUTEX_CMD_MASK)
FUTEX_WAKES = (1, 10)  # FUTEX_WAKE, FUTEX_WAKE_BITSET
TOTALS = ("gil_ns", "gil_n", "hold_ns", "lock_ns", "lock_n", "futex_n", "sc_ns", "sc_n",
          "ran")
SCRATCH = ("gs", "hs", "fs", "fa", "wk", "waker", "ss", "sid", "egil")
HOLD_HZ = 499  # not a divisor of the usual timer rates


@dataclass(frozen=True)
class ScriptSpec:
    pid: int
    engine_tid: int | None  # its waits are events with times; None: totals only
    gil_data: list[tuple[int, int]] = field(default_factory=list)  # the GIL's static data
    tracepoints: bool = True  # futex and raw_syscalls tracepoints (need tracefs)
    gil_uprobes: str | None = None  # the ELF with take_gil: trace the GIL at its functions
    mark_addr: int | None = None  # a FUTEX_WAKE on this word dumps the totals ("M")
    min_wait_ns: int = 50_000  # engine waits this long are events (the rest: totals)


def _engine(s: ScriptSpec) -> str:
    return "0" if s.engine_tid is None else f"tid == {s.engine_tid}"


def _uprobes(s: ScriptSpec) -> str:
    lib, pid = s.gil_uprobes, s.pid
    return f"""
uprobe:{lib}:take_gil /pid == {pid}/ {{ @gs[tid] = nsecs; if ({_engine(s)}) {{ @egil = 1; }} }}
uretprobe:{lib}:take_gil /pid == {pid} && @gs[tid]/ {{
  $s = @gs[tid]; delete(@gs[tid]); $d = nsecs - $s;
  @gil_ns[tid] = sum($d); @gil_n[tid] = count(); @hs[tid] = nsecs;
  if ({_engine(s)}) {{ @egil = 0;
    if ($d >= {s.min_wait_ns}) {{ printf("G %d %llu %llu 0 0\\n", tid, $s, $d); }} }}
}}
uprobe:{lib}:drop_gil /pid == {pid} && @hs[tid]/ {{
  @hold_ns[tid] = sum(nsecs - @hs[tid]); delete(@hs[tid]);
}}"""


def _in_gil_data(s: ScriptSpec, var: str) -> str:
    return " || ".join(f"({var} >= {lo} && {var} < {hi})" for lo, hi in s.gil_data) or "0"


def _futex(s: ScriptSpec) -> str:
    pid, eng = s.pid, _engine(s)
    wake_engine = "0" if s.engine_tid is None else f"args->pid == {s.engine_tid}"
    waits = " || ".join(f"$c == {op}" for op in FUTEX_WAITS)
    wakes = " || ".join(f"$c == {op}" for op in FUTEX_WAKES)
    event = f"""if ({eng} && $d >= {s.min_wait_ns}) {{
      printf("%s %d %llu %llu %d %d\\n", $k, tid, $s, $d, @waker[$a], args->ret); }}"""
    mark = "" if s.mark_addr is None else f"""
  if ($a == {s.mark_addr}) {{ printf("M %llu\\n", nsecs); DUMP }}"""
    gil_wait = "" if s.gil_uprobes else f"if ({eng} && ({_in_gil_data(s, '$a')})) {{ @egil = 1; }}"
    gil = "" if s.gil_uprobes else f"@gil_ns[tid] = sum($d); @gil_n[tid] = count(); {event}"
    return f"""
tracepoint:syscalls:sys_enter_futex /pid == {pid}/ {{
  $c = args->op & 127; $a = (uint64)args->uaddr; @futex_n[tid] = count();
  if ({waits}) {{ @fs[tid] = nsecs; @fa[tid] = $a; {gil_wait} }}
  else if ({wakes}) {{ @waker[$a] = tid; {mark} }}
}}
tracepoint:sched:sched_wakeup /@fs[args->pid]/ {{
  @wk[args->pid] = nsecs; if ({wake_engine}) {{ @egil = 0; }} }}
tracepoint:syscalls:sys_exit_futex /pid == {pid} && @fs[tid]/ {{
  $s = @fs[tid]; $w = @wk[tid]; $a = @fa[tid];
  delete(@fs[tid]); delete(@fa[tid]); delete(@wk[tid]);
  $d = $w > $s ? $w - $s : nsecs - $s;
  if ({eng}) {{ @egil = 0; }}
  if ({_in_gil_data(s, "$a")}) {{ $k = "G"; {gil} }}
  else {{ $k = "F"; @lock_ns[tid] = sum($d); @lock_n[tid] = count(); {event} }}
}}
tracepoint:raw_syscalls:sys_enter /pid == {pid}/ {{ @ss[tid] = nsecs; @sid[tid] = args->id; }}
tracepoint:raw_syscalls:sys_exit /pid == {pid} && @ss[tid]/ {{
  @sc_ns[tid, @sid[tid]] = sum(nsecs - @ss[tid]); @sc_n[tid, @sid[tid]] = count();
  delete(@ss[tid]); delete(@sid[tid]);
}}"""


def _holders(s: ScriptSpec) -> str:
    if s.engine_tid is None:
        return ""
    return f"""
profile:hz:{HOLD_HZ} /pid == {s.pid} && tid != {s.engine_tid} && @egil == 1/ {{
  @ran[tid] = count(); }}"""


def script(s: ScriptSpec) -> str:
    """The program text; needs the tracepoints or the GIL uprobes (or both)."""
    parts = ([_uprobes(s)] if s.gil_uprobes else []) + ([_futex(s)] if s.tracepoints else [])
    if not parts:
        raise ValueError("nothing to trace: neither tracepoints nor GIL uprobes")
    body = "\n".join([*parts, _holders(s)])
    used = [m for m in (*SCRATCH, *TOTALS) if f"@{m}[" in body or f"@{m} " in body]
    dump = " ".join(f"print(@{m});" for m in TOTALS if m in used)
    clear = " ".join(f"clear(@{m});" for m in used)
    return ('BEGIN { @egil = 0; printf("T %llu\\n", nsecs); }\n' + body.replace("DUMP", dump)
            + f'\nEND {{ printf("E %llu\\n", nsecs); {dump} {clear} }}\n')
