"""SVG charts: ticks and scales, well-formed SVG, and data that is exactly what is drawn."""

from __future__ import annotations

import itertools
import xml.etree.ElementTree as ET

from hypothesis import given
from hypothesis import strategies as st

from perfkit.report.chart_axes import Axis, Scale, format_value, linear_ticks, nice_step
from perfkit.report.chart_bars import LadderRow, Stack, ladder_chart, stacked_bars
from perfkit.report.charts import Mark, Series, color_of, line_chart, tint

NS = "{http://www.w3.org/2000/svg}"


def _svg(chart) -> ET.Element:
    return ET.fromstring(chart.svg)  # well-formed XML or it raises


@given(st.floats(min_value=1e-9, max_value=1e12, allow_nan=False))
def test_linear_ticks_start_at_zero_and_cover_the_data(hi):
    ticks, top = linear_ticks(hi, Axis("y"))
    assert ticks[0] == 0 and ticks[-1] == top >= hi * (1 - 1e-9)
    assert 2 <= len(ticks) <= 12
    steps = {round(b - a, 12) for a, b in itertools.pairwise(ticks)}
    assert len({round(s / top, 6) for s in steps}) == 1  # evenly spaced


def test_nice_step_is_one_two_or_five_times_a_power_of_ten():
    assert [nice_step(s) for s in (1, 7, 30, 0.9, 4500)] == [0.2, 2, 10, 0.2, 1000]


def test_ticks_are_nice_in_display_units():
    ticks, _top = linear_ticks(0.0213, Axis("TTFT (ms)", unit=1e-3))
    assert [round(t * 1e3, 9) for t in ticks] == [0, 5, 10, 15, 20, 25]
    assert format_value(0.015, Axis("ms", unit=1e-3)) == "15"
    assert format_value(0.25, Axis("share", percent=True)) == "25%"


def test_scales_map_ends_to_pixels():
    lin = Scale(0.0, 10.0, 100.0, 200.0)
    assert (lin(0), lin(5), lin(10)) == (100.0, 150.0, 200.0)
    log = Scale(1.0, 8.0, 0.0, 300.0, log2=True)
    assert [log(x) for x in (1, 2, 4, 8)] == [0.0, 100.0, 200.0, 300.0]


def test_line_chart_data_is_the_series_and_marks():
    a = Series("a", [1, 2, 4], [10.0, None, 30.0], "#1f6feb")
    b = Series("b <&>", [1, 2, 4], [5.0, 6.0, 7.0], "#cf222e", dashed=True)
    chart = line_chart("t", "T", [a, b], Axis("x", log2=True), Axis("y"), [Mark(2, "knee", "#000")])
    assert chart.data["series"] == [
        {"label": "a", "color": "#1f6feb", "x": [1, 2, 4], "y": [10.0, None, 30.0]},
        {"label": "b <&>", "color": "#cf222e", "x": [1, 2, 4], "y": [5.0, 6.0, 7.0]}]
    assert chart.data["marks"] == [{"label": "knee", "x": 2}]
    root = _svg(chart)
    # a None breaks a's line in two; b is one line; one marker per present value
    assert len(root.findall(f"{NS}polyline")) == 3
    assert len(root.findall(f"{NS}circle")) == 5
    assert "b &lt;&amp;&gt;" in chart.svg


def test_line_chart_points_rise_with_their_values():
    chart = line_chart("t", "T", [Series("a", [1, 2, 3], [1.0, 2.0, 3.0], "#000")],
                       Axis("x"), Axis("y"))
    ys = [float(c.get("cy")) for c in _svg(chart).iter(f"{NS}circle")]
    assert ys == sorted(ys, reverse=True)  # SVG y grows downwards


def test_empty_charts_say_no_data():
    for chart in (line_chart("e", "E", [], Axis("x"), Axis("y")),
                  stacked_bars("e", "E", [], [], Axis("v")),
                  ladder_chart("e", "E", [], Axis("v"))):
        assert "no data" in chart.svg
        _svg(chart)


def test_stacked_bars_segments_add_up_to_the_bar():
    stacks = [Stack("used", [0.25, 0.5], "#0a0"), Stack("free", [0.75, 0.5], "#ccc")]
    chart = stacked_bars("f", "F", ["p1", "p2"], stacks, Axis("share", percent=True))
    assert chart.data["categories"] == ["p1", "p2"]
    assert [s["values"] for s in chart.data["stacks"]] == [[0.25, 0.5], [0.75, 0.5]]
    rects = [r for r in _svg(chart).iter(f"{NS}rect") if r.find(f"{NS}title") is not None]
    widths = [float(r.get("width")) for r in rects]
    assert len(rects) == 4
    assert abs(widths[0] + widths[1] - (widths[2] + widths[3])) < 0.05  # both bars = 100%
    assert abs(widths[0] * 3 - widths[1]) < 0.05


def test_vertical_bars_skip_missing_values():
    stacks = [Stack("user · a", [1.0, None], "#0000ff"), Stack("user · b", [None, 2.0], "#ff0000")]
    chart = stacked_bars("c", "C", ["c=1\na", "c=1\nb"], stacks, Axis("s"), horizontal=False)
    rects = [r for r in _svg(chart).iter(f"{NS}rect") if r.find(f"{NS}title") is not None]
    heights = [float(r.get("height")) for r in rects]
    assert len(rects) == 2 and abs(heights[1] - 2 * heights[0]) < 0.05


def test_ladder_orders_min_p50_p99_max_left_to_right():
    stats = {"min": 1.0, "p50": 2.0, "p90": 3.0, "p99": 4.0, "max": 5.0}
    chart = ladder_chart("l", "L", [LadderRow("c=1", "#0000ff", stats)], Axis("ms", unit=1e-3))
    assert chart.data["rows"] == [{"label": "c=1", "color": "#0000ff", **stats}]
    root = _svg(chart)
    box = next(r for r in root.iter(f"{NS}rect") if r.get("stroke") == "#0000ff")
    whisker = next(ln for ln in root.iter(f"{NS}line") if ln.get("stroke-width") == "1.5"
                   and ln.get("stroke") == "#0000ff")
    x_min, x_max = float(whisker.get("x1")), float(whisker.get("x2"))
    x_box, w_box = float(box.get("x")), float(box.get("width"))
    assert x_min < x_box < x_box + w_box < x_max
    assert abs((x_box - x_min) - (x_max - x_box - w_box)) < 0.05  # 2-1 == 5-4


def test_colours():
    assert color_of(0) != color_of(1) and color_of(0) == color_of(len(("x",) * 8))
    assert tint("#000000", 0.0) == "#000000" and tint("#000000", 1.0) == "#ffffff"
