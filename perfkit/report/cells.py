"""Table cells of a sweep: one place that turns a value into text.

A value that was not measured is None in the result model and `n/a` in every cell,
never 0 or "-" (a remote level has no engine steps; a sampler that was off has no CPU
figures). Every renderer and chart label goes through these.
"""

from __future__ import annotations

from perfkit.result import LevelResult

NA = "n/a"


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
