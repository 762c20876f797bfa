"""Table cells of a sweep: one place that turns a value into text.

A value that was not measured is None in the result model and `n/a` in every cell,
never 0 or "-" (a remote level has no engine steps; a sampler that was off has no CPU
figures). Every renderer and chart label goes through these.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from rich import box
from rich.table import Table

from perfkit.result import LevelResult
from perfkit.result.level import Latency, Throughput

NA = "n/a"


class Timed(Protocol):
    """A level measured or predicted: what the timing columns read."""

    @property
    def latency(self) -> Latency: ...

    @property
    def throughput(self) -> Throughput: ...


# The timing table's columns between the level and the goodput, one definition for the
# sweep's table and predict's (header, cell).
TIMING_CELLS: list[tuple[str, Callable[[Timed], str]]] = [
    ("req/s", lambda lv: num(lv.throughput.requests_per_s, 2)),
    ("out\ntok/s", lambda lv: num(lv.throughput.output_tokens_per_s)),
    ("TTFT\np50 ms", lambda lv: ms(lv.latency.ttft.p50)),
    ("TTFT\np99 ms", lambda lv: ms(lv.latency.ttft.p99)),
    ("TPOT\np50 ms", lambda lv: ms(lv.latency.tpot.p50)),
    ("TPOT\np99 ms", lambda lv: ms(lv.latency.tpot.p99)),
    ("E2E\np99 s", lambda lv: num(lv.latency.e2e.p99, 2)),
]


def ms(seconds: float | None) -> str:
    """Seconds as milliseconds, one decimal."""
    return NA if seconds is None else f"{seconds * 1e3:.1f}"


def num(value: float | None, digits: int = 1) -> str:
    return NA if value is None else f"{value:.{digits}f}"


def pct(share: float | None, digits: int = 0) -> str:
    """A share in [0, 1] as a percentage."""
    return NA if share is None else f"{share:.{digits}%}"


def count(value: int | None) -> str:
    return NA if value is None else str(value)


def level_name(lv: LevelResult) -> str:
    """As every table and chart names a level: 'c=4', '2/s'; ' #1' for the second repeat."""
    return lv.point.short + (f" #{lv.repeat}" if lv.repeat else "")


def lv_short(lv: LevelResult) -> str:
    return lv.point.short


def _number(text: str) -> tuple[float, int, str] | None:
    """(value, decimals, suffix) of '12.3' or '45%'; None for anything else."""
    suffix = "%" if text.endswith("%") else ""
    body = text[:-1] if suffix else text
    try:
        value = float(body)
    except ValueError:
        return None
    decimals = len(body.split(".")[1]) if "." in body else 0
    return value, decimals, suffix


def aggregate(cells: list[str]) -> str:
    """One cell for the repeats of a level, as hyperfine prints them: equal cells once
    (counts are deterministic), numbers as `mean ± σ` (sample σ, in the cells' own
    digits), anything else as `first … last`; n/a repeats are left out."""
    present = [c for c in cells if c != NA]
    if not present:
        return NA
    if len(set(present)) == 1:
        return present[0]
    parsed = [_number(c) for c in present]
    if any(p is None for p in parsed):
        return f"{present[0]} … {present[-1]}"
    values = [p[0] for p in parsed if p is not None]
    first = parsed[0]
    assert first is not None
    mean = sum(values) / len(values)
    sd = (sum((v - mean) ** 2 for v in values) / (len(values) - 1)) ** 0.5
    digits, suffix = first[1], first[2]
    return f"{mean:.{digits}f} ± {sd:.{digits}f}{suffix}"


def table(title: str, headers: list[str], body: list[list[str]]) -> Table:
    """The terminal table every sweep and prediction prints: "level" left, figures right;
    collapsed padding (two spaces between columns), so the widest table fits 80 columns."""
    out = Table(title=title, title_justify="left", title_style="bold", box=box.SIMPLE_HEAD,
                pad_edge=False, collapse_padding=True)
    for h in headers:
        out.add_column(h, justify="left" if h == "level" else "right", no_wrap=True)
    for row in body:
        out.add_row(*row)
    return out
