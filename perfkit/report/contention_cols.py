"""The contention table (sweep --contention): the engine thread's GIL and lock waits as a
share of its step time, in its slowest steps, who held the GIL, what the probes cost,
and the CPU's counters; plus one line per thing that could not be measured, and why."""

from __future__ import annotations

from collections.abc import Callable

from perfkit.report.cells import NA, level_name, ms, num, pct
from perfkit.result import LevelResult, SweepResult
from perfkit.result.contention import ContentionSection, StepGroup

Cell = Callable[[LevelResult], str]
TITLE = ("Contention (--contention; noisy): engine thread's waits in its steps, "
         "GIL holder, probe cost")
VIA = {"futex": "eBPF", "uprobes": "uprobes", "sampled": "sampled"}


def _sec(get: Callable[[ContentionSection], str]) -> Cell:
    return lambda lv: NA if lv.contention is None else get(lv.contention)


def _share(which: str, field: str) -> Cell:
    def cell(sec: ContentionSection) -> str:
        g: StepGroup | None = sec.step_group(which)
        wait = None if g is None else getattr(g, field)
        return NA if g is None or wait is None or g.step_s <= 0 else pct(wait / g.step_s)
    return _sec(cell)


def _tail_ms(field: str) -> Cell:
    def cell(sec: ContentionSection) -> str:
        g = sec.step_group("tail")
        return NA if g is None else ms(getattr(g, field))
    return _sec(cell)


def _holder(sec: ContentionSection) -> str:
    """The thread that ran most while the engine waited for the GIL ("-" when it waited
    under 10 ms in all: nobody to name)."""
    top = next(iter(sec.gil_holders), None)
    if top is None:
        return NA
    return "-" if top.seconds < 0.01 else f"{top.name[:12]} {pct(top.share)}"


def _cost(sec: ContentionSection) -> str:
    c = sec.cost
    if c is None:
        return NA
    if c.sampler_cpu_s is not None:  # the fallback: its sampling thread's CPU share
        return f"{pct(c.sampler_cpu_s / sec.window_s) if sec.window_s > 0 else NA} cpu"
    return pct(c.step_share, 1)


CONTENTION: list[tuple[str, Cell]] = [
    ("level", level_name),
    ("via", _sec(lambda s: VIA.get(s.gil_probe, s.source or NA))),
    ("GIL\n%step", _share("all", "gil_wait_s")),
    ("lock\n%step", _share("all", "lock_wait_s")),
    ("tail step\nGIL ms", _tail_ms("gil_wait_s")),
    ("tail step\nlock ms", _tail_ms("lock_wait_s")),
    ("GIL held\nby (ran)", _sec(_holder)),
    ("probes\n%step", _sec(_cost)),
    ("IPC", _sec(lambda s: num(s.counters.ipc, 2) if s.counters else NA)),
]


def notes(result: SweepResult) -> list[str]:
    """'contention: gil_wait unavailable: ...' once per distinct reason."""
    seen: dict[str, str] = {}
    for lv in result.levels:
        sec = lv.contention
        if sec is None:
            continue
        if sec.reason:
            seen.setdefault("eBPF", sec.reason)
        for what, why in sec.unavailable.items():
            seen.setdefault(what, why)
    return [f"contention: {what} unavailable: {why}" for what, why in seen.items()]
