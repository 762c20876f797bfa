"""One process's contention in the terminal (`perfkit stacks --pid --contention`): its
threads' GIL and lock waits (times as a share of the window, counts apart), CPU and kernel
time, the heaviest syscall; who held what the main thread waited for; what could not be
measured and why; what the probes cost."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from perfkit.report.cells import NA, count, num, pct
from perfkit.result.contention import ContentionSection, Holder, ThreadWait

VIA = {"futex": "eBPF: futex tracepoints", "uprobes": "eBPF: uprobes on take_gil",
       "sampled": "sampled thread states (/proc)"}


def _secs(value: float | None, window: float) -> str:
    if value is None:
        return NA
    return f"{value:.2f} {pct(value / window) if window > 0 else NA}"


def _row(t: ThreadWait, window: float) -> list[str]:
    c, tm = t.counts, t.times
    gil_n = c.gil_waits if c.gil_waits is not None else (
        c.gil_acquires if c.gil_acquires is not None else c.gil_wait_ticks)
    lock_n = c.lock_waits if c.lock_waits is not None else c.lock_wait_ticks
    top = t.syscalls[0] if t.syscalls else None
    return [t.name[:16], t.role, _secs(tm.gil_wait_s, window), count(gil_n),
            _secs(tm.lock_wait_s, window), count(lock_n), num(tm.cpu_s, 2),
            num(tm.kernel_s, 2), NA if top is None else f"{top.name[:10]} {top.count}"]


def threads_table(sec: ContentionSection, top: int = 12) -> Table:
    table = Table(title=f"threads over {sec.window_s:.1f} s, most waiting first (waits: "
                        "s and % of the window; n: waits, or ticks when sampled)",
                  title_justify="left", box=None, pad_edge=False)
    for head in ("thread", "role", "GIL", "n", "lock", "n", "CPU s", "sys s", "top syscall"):
        table.add_column(head, justify="left" if head in ("thread", "role", "top syscall")
                         else "right", no_wrap=True, overflow="ellipsis")
    for t in sec.threads[:top]:
        table.add_row(*_row(t, sec.window_s))
    return table


def _holders(label: str, rows: list[Holder]) -> Text | None:
    shown = [h for h in rows if h.share >= 0.01][:4]
    if not shown:
        return None
    return Text(f"{label}: " + ", ".join(
        f"{h.name} ({h.role}{', ' + h.code if h.code else ''}) {h.share:.0%}" for h in shown))


def contention_renderable(sec: ContentionSection, top: int = 12) -> RenderableType:
    waiter = sec.thread(sec.engine_tid)
    who = f"{waiter.name} ({waiter.role})" if waiter else f"tid {sec.engine_tid}"
    parts: list[RenderableType] = [Text(
        f"contention: {VIA.get(sec.gil_probe, sec.source or 'nothing measured')}",
        style="bold")]
    if sec.threads:
        parts.append(threads_table(sec, top))
    for label, rows in ((f"GIL held while {who} waited (ran meanwhile)", sec.gil_holders),
                        (f"locks {who} waited on, released by", sec.lock_holders)):
        line = _holders(label, rows)
        if line is not None:
            parts.append(line)
    if sec.cost is not None and sec.cost.futex_us is not None:
        parts.append(Text(f"probe cost per hit: futex {sec.cost.futex_us:.1f} µs, syscall "
                          f"{sec.cost.syscall_us:.1f} µs", style="dim"))
    if sec.reason:
        parts.append(Text(f"eBPF not used: {sec.reason}", style="dim"))
    parts += [Text(f"{what} unavailable: {why}", style="dim")
              for what, why in sec.unavailable.items()]
    return Group(*parts)
