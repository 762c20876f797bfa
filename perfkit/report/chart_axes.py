"""Scales, ticks and number formats for the SVG charts.

Data stay in base units (seconds, bytes, tokens/s) everywhere, in the plotted
SVG and in each chart's `data-chart` JSON; an `Axis` only decides how a value
is *shown*: display = raw / unit (e.g. unit=1e-3 shows seconds as ms), and the
ticks are nice numbers in display units.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Axis:
    title: str  # with the display unit, e.g. "TTFT (ms)"
    unit: float = 1.0  # raw value per display unit: 1e-3 shows seconds as ms
    log2: bool = False  # log-2 scale (concurrency doubles); ticks at the data's own values
    percent: bool = False  # a share in [0, 1], shown as %


def nice_step(span: float, target_ticks: int = 5) -> float:
    """1, 2 or 5 times a power of ten, so that span / step is about target_ticks."""
    if span <= 0 or not math.isfinite(span):
        return 1.0
    raw = span / target_ticks
    power = 10 ** math.floor(math.log10(raw))
    for mult in (1, 2, 5, 10):
        if raw <= mult * power:
            return mult * power
    return 10 * power


def linear_ticks(hi_raw: float, axis: Axis) -> tuple[list[float], float]:
    """Ticks from 0 (raw units) and the axis top: the first tick at or above `hi_raw`.

    Invariant: ticks[0] == 0 and ticks[-1] == top >= hi_raw (> 0)."""
    hi = max(hi_raw / axis.unit, 0.0)
    if axis.percent:
        hi = max(hi, 1e-9)
    step = nice_step(hi if hi > 0 else 1.0)
    count = max(1, math.ceil(hi / step - 1e-9))
    ticks = [i * step * axis.unit for i in range(count + 1)]
    return ticks, ticks[-1]


def log2_ticks(values: Sequence[float]) -> list[float]:
    """The data's own x values, sorted and unique (all > 0)."""
    return sorted({float(v) for v in values if v > 0})


def format_value(raw: float, axis: Axis) -> str:
    """A tick or tooltip label in display units: 3 significant digits, no trailing zeros."""
    if axis.percent:
        return f"{raw * 100:.3g}%"
    value = raw / axis.unit
    if value != 0 and (abs(value) >= 1e5 or abs(value) < 1e-3):
        return f"{value:.2e}"
    return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"


@dataclass(frozen=True)
class Scale:
    """Maps raw values to pixels along one axis: [lo, hi] -> [px0, px1]."""

    lo: float
    hi: float
    px0: float
    px1: float
    log2: bool = False

    def __call__(self, value: float) -> float:
        lo, hi, v = self.lo, self.hi, value
        if self.log2:
            lo, hi, v = math.log2(lo), math.log2(hi), math.log2(max(value, 1e-300))
        frac = 0.5 if hi == lo else (v - lo) / (hi - lo)
        return self.px0 + frac * (self.px1 - self.px0)


def x_scale(values: Sequence[float], axis: Axis, px0: float, px1: float
            ) -> tuple[Scale, list[float]]:
    """The x scale and its ticks: log2 over the data's own values, else linear from 0."""
    if axis.log2:
        ticks = log2_ticks(values) or [1.0]
        return Scale(ticks[0], ticks[-1], px0, px1, log2=True), ticks
    ticks, top = linear_ticks(max(values, default=0.0), axis)
    return Scale(0.0, top, px0, px1), ticks


def y_scale(values: Sequence[float], axis: Axis, px_bottom: float, px_top: float
            ) -> tuple[Scale, list[float]]:
    """Linear from 0 to a nice top at or above the largest value."""
    ticks, top = linear_ticks(max(values, default=0.0), axis)
    return Scale(0.0, top, px_bottom, px_top), ticks


def fmt_num(value: float) -> str:
    """Compact SVG coordinate: two decimals, no trailing zeros."""
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text
