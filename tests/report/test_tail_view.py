"""The report's tail view: at the chosen level, the differential flame graph embedded and
the tail breakdown table (in-process: causes; remote: first token and stalls); one line
when the level has no tail data. The page parses and the embedded SVG is well-formed."""

from __future__ import annotations

import dataclasses
import html
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import report_fixtures as rd

from perfkit.report.html import render_html
from perfkit.report.report_inputs import inputs_from_results
from perfkit.result.client_tail import ClientRequest, ClientTailGroup, ClientTailSection, Stall
from perfkit.result.stacks import StacksInfo, TailStacksInfo
from perfkit.result.tail import CAUSES, StepTail, TailCause, TailGroup, TailSection
from perfkit.stacks.diffsvg import render_diff_svg

VOID = {"meta", "br", "hr", "img", "input", "link", "col", "wbr", "source"}


class Balanced(HTMLParser):
    """Every opened tag closed in order (the page parses as a tree)."""

    def __init__(self) -> None:
        super().__init__()
        self.open: list[str] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag not in VOID:
            self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        assert self.open and self.open[-1] == tag, (tag, self.open[-5:])
        self.open.pop()


def parses(page: str) -> None:
    parser = Balanced()
    parser.feed(page)
    parser.close()
    assert parser.open == []


def _group(metric: str, which: str, gc_s: float) -> TailGroup:
    causes = [TailCause(c, 2.0 if c == "gc" else 1.0,
                        None if c in ("preemption", "page_faults") else
                        (gc_s if c == "gc" else 0.001)) for c in CAUSES]
    return TailGroup(metric, which, 0.05, 3 if which == "tail" else 20,
                     0.2 if which == "tail" else 0.05, causes)


def _tail_level(tmp_path: Path, c: int):
    svg = tmp_path / f"level-{c}.tail-diff.svg"
    svg.write_text(render_diff_svg({"main (a.py:1);garbage (a.py:7)": 9}, {"main (a.py:1)": 5},
                                   f"planted {c}"))
    sec = TailSection(steps=StepTail(100, 0.01, 0.05, 2, 0.5, 0.1, 1.0, 0.0),
                      groups=[_group(m, w, 0.123 if w == "tail" else 0.004)
                              for m in ("ttft", "tpot") for w in ("tail", "median")])
    stacks = StacksInfo(sampler_used="thread", reason="", folded_path=None,
                        speedscope_path=None, svg_path=str(tmp_path / f"level-{c}.svg"),
                        num_samples=14, duration_s=1.0, rate_hz=100.0, native=False,
                        tail=TailStacksInfo(None, None, str(svg), 2, 40, 9, 5, 0.05),
                        offcpu_folded_path="stacks/level-4.offcpu.folded", offcpu_samples=7)
    return dataclasses.replace(rd.level_result(c), tail=sec, stacks=stacks)


def _page(levels, **kw) -> str:
    result = dataclasses.replace(rd.decode(rd.sweep_doc([rd.level(1)])), levels=levels)
    return render_html(inputs_from_results([result]), **kw)


def test_tail_view_embeds_the_diff_flame_graph_and_the_breakdown_table(tmp_path):
    page = _page([_tail_level(tmp_path, 2), _tail_level(tmp_path, 4)])
    parses(page)
    data = rd.chart_data(page)["tail-view"]
    assert data["inputs"] == [{"label": "default", "level": "4", "remote": False,
                               "diff_svg_path": str(tmp_path / "level-4.tail-diff.svg"),
                               "embedded": True}]
    view = page[page.index('id="chart-tail-view"'):]
    frame = re.search(r'<iframe[^>]*srcdoc="([^"]*)"', view)
    assert frame and "planted 4" in html.unescape(frame.group(1))
    ET.fromstring(html.unescape(frame.group(1)).split("</style>", 1)[1])  # the SVG itself
    assert "planted 2" not in page
    table = view[view.index('<table class="tail">'):view.index("</table>")]
    assert "TTFT p99 requests (n=3)" in table and "TPOT median requests (n=20)" in table
    assert "<td>GC pauses</td><td>2.0 / 123.0 ms</td><td>2.0 / 4.0 ms</td>" in table
    for name in ("queue wait", "own prefill", "interference", "preemptions", "run-queue wait",
                 "page faults"):
        assert name in table
    assert "<td>preemptions</td><td>1.0</td>" in table  # a count without a time
    assert "off-CPU: 7 samples of waiting threads" in view
    chosen = _page([_tail_level(tmp_path, 2), _tail_level(tmp_path, 4)], flame="2")
    assert "planted 2" in chosen and "planted 4" not in chosen


def test_a_level_without_tail_data_says_so_in_one_line():
    page = render_html(inputs_from_results([rd.decode(rd.sweep_doc())]))
    parses(page)
    assert "tail-view" not in rd.chart_data(page)
    # no stacks: the knee's level (2)
    assert re.search(r'<p class="note">tail view unavailable: concurrency 2 has no tail '
                     r"breakdown[^<]*</p>", page)


def test_remote_level_shows_the_client_view_and_where_the_tail_stalled():
    slow = ClientRequest(7, 0.5, 0.02, 0.4, 0.002, 2, 0.12, [Stall(5, 0.06), Stall(9, 0.06)])
    groups = [ClientTailGroup("ttft", "tail", 0.5, 1, 0.5, 0.1, 0.002, 0.0, 0.0),
              ClientTailGroup("ttft", "median", 0.1, 4, 0.1, 0.1, 0.002, 0.0, 0.0),
              ClientTailGroup("tpot", "tail", 0.02, 1, 0.2, 0.4, 0.002, 2.0, 0.12, [slow]),
              ClientTailGroup("tpot", "median", 0.005, 4, 0.1, 0.1, 0.002, 0.0, 0.0)]
    remote = rd.decode(rd.sweep_doc([rd.remote_level(4)])).levels[0]
    lv = dataclasses.replace(remote, client_tail=ClientTailSection(4.0, 0.002, "token", groups))
    page = _page([lv])
    parses(page)
    assert rd.chart_data(page)["tail-view"]["inputs"][0]["remote"] is True
    assert "No differential flame graph: recorded without --stacks." in page
    assert "<td>stalls</td><td>0.0</td><td>0.0</td><td>2.0</td><td>0.0</td>" in page
    assert "request 7: 5 (60.0 ms), 9 (60.0 ms)" in page
