"""Where kernel time went, for high_kernel_time: by thread (system CPU from /proc) and by
syscall (eBPF: count and time inside each, blocking included), from --contention."""

from __future__ import annotations

from perfkit.result.contention import ContentionSection
from perfkit.result.level import LevelResult

TOP = 3


def _threads(sec: ContentionSection) -> list[tuple[str, float]]:
    rows = [(t.name, t.times.kernel_s) for t in sec.threads if t.times.kernel_s]
    return sorted(((n, s) for n, s in rows if s is not None), key=lambda r: -r[1])[:TOP]


def _syscalls(sec: ContentionSection) -> list[tuple[str, str, int, float]]:
    """(syscall, thread, calls, seconds inside): the heaviest over every thread."""
    rows = [(s.name, t.name, s.count, s.time_s) for t in sec.threads for s in t.syscalls]
    return sorted(rows, key=lambda r: -r[3])[:TOP]


def kernel_detail(lv: LevelResult) -> tuple[str, dict[str, object]]:
    """(a sentence, evidence) naming the threads and syscalls; says how to get them when
    the level was not traced."""
    sec = lv.contention
    if sec is None:
        return (" Run with --contention to see which threads and syscalls it went to.", {})
    threads, calls = _threads(sec), _syscalls(sec)
    total = sum(t.times.kernel_s or 0.0 for t in sec.threads)
    text = ""
    if threads and total > 0:
        text += " Kernel CPU by thread: " + ", ".join(
            f"{n} {s:.2f} s ({s / total:.0%})" for n, s in threads) + "."
    if calls:
        text += " Time inside syscalls (blocking included): " + ", ".join(
            f"{c} in {t} {n} calls {s * 1e3:.0f} ms" for c, t, n, s in calls) + "."
    elif "syscalls" in sec.unavailable:
        text += f" Syscalls not traced: {sec.unavailable['syscalls']}."
    return text, {"kernel_s_by_thread": dict(threads),
                  "syscalls": [{"syscall": c, "thread": t, "count": n, "seconds": s}
                               for c, t, n, s in calls]}
