"""Pure-Python SVG charts: a line chart with labelled series and marks, and the
shared frame (axes, grid, legend) the bar and ladder charts in `chart_bars` use.

Every chart is a `Chart`: an inline `<svg>` (no scripts, no external fonts) and
`data`, exactly the numbers it plots in raw units, which the HTML report writes
into the figure's `data-chart` attribute so tests can compare it with the input.
Pixel layout of a frame (y grows downwards):

    top ............ MARGIN_TOP (room for mark labels)
    plot box ....... PLOT_H px; y ticks left of it, x ticks below it
    x axis title ... then the legend, LEGEND_ROW_H px per row
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from perfkit.report.chart_axes import Axis, Scale, fmt_num, format_value, x_scale, y_scale

WIDTH = 760
MARGIN_LEFT = 72
MARGIN_RIGHT = 24
MARGIN_TOP = 18
PLOT_H = 230
EMPTY_PLOT_H = 40  # a chart with nothing to plot keeps only a "no data" line
X_AXIS_H = 42  # tick labels + axis title below the plot box
LEGEND_ROW_H = 18
CHAR_PX = 6.4  # average advance of an 11 px sans-serif glyph, for layout
FONT = 'font-family="system-ui, -apple-system, Segoe UI, Roboto, sans-serif" font-size="11"'

# One colour per input file, in order; a second input is always red-ish against blue.
PALETTE = ("#1f6feb", "#cf222e", "#1a7f37", "#9a6700", "#8250df", "#bf3989", "#0a7ea4",
           "#57606a")
GRID = "#d0d7de"
INK = "#24292f"
MUTED = "#57606a"


def color_of(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


def tint(color: str, amount: float) -> str:
    """Mix a #rrggbb colour with white: amount 0 keeps it, 1 gives white."""
    rgb = [int(color[i:i + 2], 16) for i in (1, 3, 5)]
    mixed = [round(c + (255 - c) * amount) for c in rgb]
    return "#" + "".join(f"{c:02x}" for c in mixed)


@dataclass(frozen=True)
class Chart:
    id: str  # the figure's element id, unique in the report
    title: str
    svg: str
    data: dict[str, Any]  # exactly the numbers plotted, raw units
    caption: str = ""


@dataclass(frozen=True)
class Series:
    label: str
    x: list[float]
    y: list[float | None]  # None: no value (a gap in the line); len(y) == len(x)
    color: str
    dashed: bool = False
    markers: bool = True  # a circle with a tooltip at every point


@dataclass(frozen=True)
class Mark:
    """A labelled vertical line at x (the knee)."""

    x: float
    label: str
    color: str


@dataclass
class Frame:
    """Plot box and legend layout of one chart."""

    legend: list[tuple[str, str, bool]]  # (label, colour, dashed)
    plot_h: float = PLOT_H
    left: float = MARGIN_LEFT
    x_axis_h: float = X_AXIS_H
    rows: list[list[tuple[float, str, str, bool]]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rows = _legend_rows(self.legend, WIDTH - self.left - MARGIN_RIGHT)

    @property
    def top(self) -> float:
        return MARGIN_TOP

    @property
    def bottom(self) -> float:
        return MARGIN_TOP + self.plot_h

    @property
    def right(self) -> float:
        return WIDTH - MARGIN_RIGHT

    @property
    def height(self) -> float:
        return self.bottom + self.x_axis_h + LEGEND_ROW_H * len(self.rows) + 6


def _legend_rows(entries: list[tuple[str, str, bool]], width: float
                 ) -> list[list[tuple[float, str, str, bool]]]:
    """Entries laid out left to right, wrapping: (x offset, label, colour, dashed)."""
    rows: list[list[tuple[float, str, str, bool]]] = []
    x = width + 1.0
    for label, color, dashed in entries:
        w = 26 + len(label) * CHAR_PX + 14
        if x + w > width and (not rows or rows[-1]):
            rows.append([])
            x = 0.0
        rows[-1].append((x, label, color, dashed))
        x += w
    return rows


def svg_open(frame: Frame, label: str) -> str:
    w, h = WIDTH, fmt_num(frame.height)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
            f'viewBox="0 0 {w} {h}" role="img" aria-label={quoteattr(label)} {FONT}>'
            f'<rect width="{w}" height="{h}" fill="#ffffff"/>')


def text(x: float, y: float, body: str, anchor: str = "start", color: str = INK,
         extra: str = "") -> str:
    return (f'<text x="{fmt_num(x)}" y="{fmt_num(y)}" text-anchor="{anchor}" '
            f'fill="{color}"{extra}>{escape(body)}</text>')


def y_axis_svg(frame: Frame, scale: Scale, ticks: Sequence[float], axis: Axis) -> str:
    """Horizontal grid lines with labels, and the rotated axis title."""
    out = []
    for t in ticks:
        y = scale(t)
        out.append(f'<line x1="{fmt_num(frame.left)}" x2="{fmt_num(frame.right)}" '
                   f'y1="{fmt_num(y)}" y2="{fmt_num(y)}" stroke="{GRID}" stroke-width="1"/>')
        out.append(text(frame.left - 6, y + 4, format_value(t, axis), "end", MUTED))
    mid = (frame.top + frame.bottom) / 2
    out.append(text(14, mid, axis.title, "middle", INK,
                    f' transform="rotate(-90 14 {fmt_num(mid)})"'))
    return "".join(out)


def x_axis_svg(frame: Frame, scale: Scale, ticks: Sequence[float], axis: Axis,
               grid: bool = False) -> str:
    """Tick labels under the plot box and the axis title; the baseline."""
    out = [f'<line x1="{fmt_num(frame.left)}" x2="{fmt_num(frame.right)}" '
           f'y1="{fmt_num(frame.bottom)}" y2="{fmt_num(frame.bottom)}" stroke="{INK}"/>']
    for t in ticks:
        x = scale(t)
        if grid:
            out.append(f'<line x1="{fmt_num(x)}" x2="{fmt_num(x)}" y1="{fmt_num(frame.top)}" '
                       f'y2="{fmt_num(frame.bottom)}" stroke="{GRID}"/>')
        out.append(text(x, frame.bottom + 15, format_value(t, axis), "middle", MUTED))
    out.append(text((frame.left + frame.right) / 2, frame.bottom + frame.x_axis_h - 9,
                    axis.title, "middle"))
    return "".join(out)


def legend_svg(frame: Frame, swatch: str = "line") -> str:
    out = []
    y0 = frame.bottom + frame.x_axis_h + 8
    for r, row in enumerate(frame.rows):
        y = y0 + r * LEGEND_ROW_H
        for x_off, label, color, dashed in row:
            x = frame.left + x_off
            if swatch == "line":
                dash = ' stroke-dasharray="5 3"' if dashed else ""
                out.append(f'<line x1="{fmt_num(x)}" x2="{fmt_num(x + 20)}" y1="{fmt_num(y)}" '
                           f'y2="{fmt_num(y)}" stroke="{color}" stroke-width="2.5"{dash}/>')
            else:
                out.append(f'<rect x="{fmt_num(x + 4)}" y="{fmt_num(y - 6)}" width="12" '
                           f'height="12" fill="{color}"/>')
            out.append(text(x + 26, y + 4, label))
    return "".join(out)


def no_data_svg(frame: Frame) -> str:
    return text((frame.left + frame.right) / 2, (frame.top + frame.bottom) / 2, "no data",
                "middle", MUTED)


def _points(series: Series) -> list[tuple[float, float]]:
    return [(x, y) for x, y in zip(series.x, series.y) if y is not None]


def _polylines(s: Series, sx: Scale, sy: Scale) -> str:
    """One polyline per run of present values (None breaks the line)."""
    runs: list[list[str]] = [[]]
    for x, y in zip(s.x, s.y):
        if y is None:
            runs.append([])
        else:
            runs[-1].append(f"{fmt_num(sx(x))},{fmt_num(sy(y))}")
    dash = ' stroke-dasharray="6 4"' if s.dashed else ""
    return "".join(f'<polyline points="{" ".join(r)}" fill="none" stroke="{s.color}" '
                   f'stroke-width="2" stroke-linejoin="round"{dash}/>' for r in runs if r)


def _markers(s: Series, sx: Scale, sy: Scale, x_axis: Axis, y_axis: Axis) -> str:
    fill = "#ffffff" if s.dashed else s.color
    return "".join(
        f'<circle cx="{fmt_num(sx(x))}" cy="{fmt_num(sy(y))}" r="3.5" fill="{fill}" '
        f'stroke="{s.color}" stroke-width="1.5"><title>{escape(s.label)}: '
        f'{escape(format_value(x, x_axis))} → {escape(format_value(y, y_axis))}</title></circle>'
        for x, y in _points(s))


def _mark_svg(m: Mark, sx: Scale, frame: Frame, slot: int) -> str:
    x = sx(m.x)
    return (f'<line x1="{fmt_num(x)}" x2="{fmt_num(x)}" y1="{fmt_num(frame.top)}" '
            f'y2="{fmt_num(frame.bottom)}" stroke="{m.color}" stroke-width="1.5" '
            f'stroke-dasharray="2 3"/>'
            + text(x + 4, frame.top + 10 + 12 * slot, m.label, "start", m.color))


def line_chart(chart_id: str, title: str, series: Sequence[Series], x_axis: Axis,
               y_axis: Axis, marks: Sequence[Mark] = (), caption: str = "") -> Chart:
    """Series over a shared x axis; y from 0. Marks draw a labelled vertical line."""
    pts = [p for s in series for p in _points(s)]
    frame = Frame([(s.label, s.color, s.dashed) for s in series],
                  plot_h=PLOT_H if pts else EMPTY_PLOT_H)
    xs = [x for x, _ in pts] + [m.x for m in marks]
    sx, xt = x_scale(xs, x_axis, frame.left + 8, frame.right - 8)
    sy, yt = y_scale([y for _, y in pts], y_axis, frame.bottom, frame.top)
    body = [svg_open(frame, title)]
    if pts:
        body += [y_axis_svg(frame, sy, yt, y_axis), x_axis_svg(frame, sx, xt, x_axis)]
        body += [_mark_svg(m, sx, frame, i) for i, m in enumerate(marks)]
        body += [_polylines(s, sx, sy) for s in series]
        body += [_markers(s, sx, sy, x_axis, y_axis) for s in series if s.markers]
    else:
        body.append(no_data_svg(frame))
    body += [legend_svg(frame), "</svg>"]
    data = {"kind": "line", "x_axis": x_axis.title, "y_axis": y_axis.title,
            "series": [{"label": s.label, "color": s.color, "x": list(s.x), "y": list(s.y)}
                       for s in series],
            "marks": [{"label": m.label, "x": m.x} for m in marks]}
    return Chart(chart_id, title, "".join(body), data, caption)
