"""Stacked bars (horizontal or vertical) and a percentile ladder, as SVG `Chart`s.

Stacked bars: one bar per category; stack k contributes values[k][i] to bar i,
segments drawn in stack order from the axis outwards (None: no segment).
Ladder: one row per distribution: a whisker from min to max, a box from p50 to
p99, a bold line at p50 and a tick at p90 — the tail is what serving cares about.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from xml.sax.saxutils import escape

from perfkit.report.chart_axes import Axis, Scale, fmt_num, format_value, linear_ticks
from perfkit.report.charts import (
    CHAR_PX,
    INK,
    MUTED,
    Chart,
    Frame,
    legend_svg,
    no_data_svg,
    svg_open,
    text,
    tint,
    x_axis_svg,
    y_axis_svg,
)

ROW_H = 22  # horizontal bar / ladder row pitch, px
BAR_FILL = 0.7  # share of a row or slot the bar fills
MAX_LABEL_PX = 230
LADDER_KEYS = ("min", "p50", "p90", "p99", "max")


@dataclass(frozen=True)
class Stack:
    label: str
    values: list[float | None]  # one per category; None: not part of that bar
    color: str


@dataclass(frozen=True)
class LadderRow:
    label: str
    color: str
    stats: dict[str, float]  # LADDER_KEYS, raw units; min <= p50 <= p90 <= p99 <= max


def _clip(label: str, max_px: float) -> str:
    max_chars = max(4, int(max_px / CHAR_PX))
    return label if len(label) <= max_chars else label[: max_chars - 1] + "…"


def _label_px(labels: Sequence[str]) -> float:
    return min(MAX_LABEL_PX, 16 + CHAR_PX * max((len(s) for s in labels), default=4))


def _totals(categories: Sequence[str], stacks: Sequence[Stack]) -> list[float]:
    return [sum(s.values[i] or 0.0 for s in stacks) for i in range(len(categories))]


def _segment(x: float, y: float, w: float, h: float, color: str, tip: str) -> str:
    return (f'<rect x="{fmt_num(x)}" y="{fmt_num(y)}" width="{fmt_num(max(w, 0.0))}" '
            f'height="{fmt_num(max(h, 0.0))}" fill="{color}"><title>{escape(tip)}</title></rect>')


def _bars_h(frame: Frame, sv: Scale, categories: Sequence[str], stacks: Sequence[Stack],
            axis: Axis) -> list[str]:
    out = []
    for i, cat in enumerate(categories):
        y = frame.top + i * ROW_H + ROW_H * (1 - BAR_FILL) / 2
        out.append(text(frame.left - 6, y + ROW_H * BAR_FILL / 2 + 4,
                        _clip(cat, frame.left - 10), "end", INK))
        for s, start, v in _pieces(stacks, i):
            x0, x1 = sv(start), sv(start + v)
            out.append(_segment(x0, y, x1 - x0, ROW_H * BAR_FILL, s.color,
                                f"{cat} · {s.label}: {format_value(v, axis)}"))
    return out


def _bars_v(frame: Frame, sv: Scale, categories: Sequence[str], stacks: Sequence[Stack],
            axis: Axis) -> list[str]:
    out = []
    slot = (frame.right - frame.left) / max(len(categories), 1)
    for i, cat in enumerate(categories):
        x = frame.left + i * slot + slot * (1 - BAR_FILL) / 2
        for line, part in enumerate(cat.split("\n")):
            out.append(text(x + slot * BAR_FILL / 2, frame.bottom + 15 + 13 * line,
                            _clip(part, slot), "middle", MUTED))
        for s, start, v in _pieces(stacks, i):
            y0, y1 = sv(start), sv(start + v)
            out.append(_segment(x, y1, slot * BAR_FILL, y0 - y1, s.color,
                                f"{cat.replace(chr(10), ' ')} · {s.label}: "
                                f"{format_value(v, axis)}"))
    return out


def _pieces(stacks: Sequence[Stack], i: int) -> Iterator[tuple[Stack, float, float]]:
    """Category i's segments bottom-up: (series, start on the value axis, value); a missing
    value (None) takes no room."""
    acc = 0.0
    for s in stacks:
        v = s.values[i]
        if v is not None:
            yield s, acc, v
            acc += v


def stacked_bars(chart_id: str, title: str, categories: Sequence[str],
                 stacks: Sequence[Stack], axis: Axis, horizontal: bool = True,
                 caption: str = "") -> Chart:
    """Bars of stacked segments; the value axis starts at 0 (100% for shares)."""
    legend = [(s.label, s.color, False) for s in stacks]
    totals = _totals(categories, stacks)
    top_value = max(totals, default=0.0)
    if horizontal:
        frame = Frame(legend, plot_h=max(ROW_H * len(categories), ROW_H) + 4,
                      left=_label_px(categories))
        ticks, top = linear_ticks(top_value, axis)
        sv = Scale(0.0, top, frame.left, frame.right)
    else:
        lines = max((c.count("\n") + 1 for c in categories), default=1)
        frame = Frame(legend, x_axis_h=30 + 13 * lines)
        ticks, top = linear_ticks(top_value, axis)
        sv = Scale(0.0, top, frame.bottom, frame.top)
    body = [svg_open(frame, title)]
    if not categories or top_value <= 0:
        body.append(no_data_svg(frame))
    elif horizontal:
        body.append(x_axis_svg(frame, sv, ticks, axis, grid=True))
        body += _bars_h(frame, sv, categories, stacks, axis)
    else:
        body.append(y_axis_svg(frame, sv, ticks, axis))
        body += _bars_v(frame, sv, categories, stacks, axis)
    body += [legend_svg(frame, swatch="box"), "</svg>"]
    data = {"kind": "stacked-bars", "axis": axis.title, "categories": list(categories),
            "stacks": [{"label": s.label, "color": s.color, "values": list(s.values)}
                       for s in stacks]}
    return Chart(chart_id, title, "".join(body), data, caption)


def _ladder_row(frame: Frame, sv: Scale, i: int, row: LadderRow, axis: Axis) -> str:
    st = row.stats
    mid = frame.top + i * ROW_H + ROW_H / 2
    half = ROW_H * BAR_FILL / 2
    tip = escape(row.label + ": " + ", ".join(
        f"{k} {format_value(st[k], axis)}" for k in LADDER_KEYS))
    x = {k: sv(st[k]) for k in LADDER_KEYS}
    return (
        f'<g><title>{tip}</title>'
        + text(frame.left - 6, mid + 4, _clip(row.label, frame.left - 10), "end", INK)
        + f'<line x1="{fmt_num(x["min"])}" x2="{fmt_num(x["max"])}" y1="{fmt_num(mid)}" '
        f'y2="{fmt_num(mid)}" stroke="{row.color}" stroke-width="1.5"/>'
        + f'<rect x="{fmt_num(x["p50"])}" y="{fmt_num(mid - half)}" '
        f'width="{fmt_num(max(x["p99"] - x["p50"], 1.0))}" height="{fmt_num(2 * half)}" '
        f'fill="{tint(row.color, 0.65)}" stroke="{row.color}"/>'
        + "".join(f'<line x1="{fmt_num(x[k])}" x2="{fmt_num(x[k])}" '
                  f'y1="{fmt_num(mid - half)}" y2="{fmt_num(mid + half)}" stroke="{row.color}" '
                  f'stroke-width="{w}"/>' for k, w in (("p50", 3), ("p90", 1.5)))
        + "</g>")


def ladder_chart(chart_id: str, title: str, rows: Sequence[LadderRow], axis: Axis,
                 legend: Sequence[tuple[str, str]] = (), caption: str = "") -> Chart:
    """One row per distribution; `legend` is (label, colour) per input."""
    frame = Frame([(lab, col, False) for lab, col in legend],
                  plot_h=max(ROW_H * len(rows), ROW_H) + 4, left=_label_px([r.label for r in rows]))
    ticks, top = linear_ticks(max((r.stats["max"] for r in rows), default=0.0), axis)
    sv = Scale(0.0, top, frame.left, frame.right)
    body = [svg_open(frame, title)]
    if rows:
        body.append(x_axis_svg(frame, sv, ticks, axis, grid=True))
        body += [_ladder_row(frame, sv, i, r, axis) for i, r in enumerate(rows)]
    else:
        body.append(no_data_svg(frame))
    body += [legend_svg(frame, swatch="box"), "</svg>"]
    data = {"kind": "ladder", "axis": axis.title,
            "rows": [{"label": r.label, "color": r.color, **{k: r.stats[k] for k in LADDER_KEYS}}
                     for r in rows]}
    return Chart(chart_id, title, "".join(body), data, caption)
