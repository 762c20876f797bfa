"""Where kernel time went, for high_kernel_time (with --contention): by thread (system
CPU and minor page faults, from /proc), and the busiest threads' syscalls (eBPF: calls,
and the time inside them, blocking included: a futex or read that sleeps counts its
sleep, so the calls are ranked by count, not time)."""

from __future__ import annotations

from perfkit.result.contention import ContentionSection, ThreadWait
from perfkit.result.level import LevelResult

TOP = 3


def _kernel(t: ThreadWait) -> float:
    return t.times.kernel_s or 0.0


def _syscalls(t: ThreadWait) -> str:
    rows = sorted(t.syscalls, key=lambda s: -s.count)[:TOP]
    return ", ".join(f"{s.name} {s.count} calls ({s.time_s * 1e3:.0f} ms)" for s in rows)


def kernel_detail(lv: LevelResult) -> tuple[str, dict[str, object]]:
    """(a sentence, evidence) naming the threads, their faults and syscalls; says how to
    get them when the level was not traced."""
    sec: ContentionSection | None = lv.contention
    if sec is None:
        return (" Run with --contention to see which threads and syscalls it went to.", {})
    total = sum(_kernel(t) for t in sec.threads)
    busiest = sorted((t for t in sec.threads if _kernel(t) > 0), key=lambda t: -_kernel(t))
    faults = sorted((t for t in sec.threads if t.counts.minor_faults),
                    key=lambda t: -(t.counts.minor_faults or 0))[:2]
    text = ""
    if busiest and total > 0:
        text += " Kernel CPU by thread: " + ", ".join(
            f"{t.name} ({t.role}) {_kernel(t):.2f} s ({_kernel(t) / total:.0%})"
            for t in busiest[:TOP]) + "."
    if faults:
        text += " Minor page faults: " + ", ".join(
            f"{t.name} {t.counts.minor_faults}" for t in faults) + "."
    calls = [t for t in busiest[:2] if t.syscalls]
    if calls:
        text += " Syscalls (time includes sleeping in them): " + "; ".join(
            f"{t.name}: {_syscalls(t)}" for t in calls) + "."
    elif "syscalls" in sec.unavailable:
        text += f" Syscalls not traced: {sec.unavailable['syscalls']}."
    return text, {
        "kernel_s_by_thread": {t.name: _kernel(t) for t in busiest[:TOP]},
        "minor_faults_by_thread": {t.name: t.counts.minor_faults for t in faults},
        "syscalls": {t.name: [{"syscall": s.name, "count": s.count, "seconds": s.time_s}
                              for s in t.syscalls] for t in calls}}
