"""The HTML report: each chart's data against the result JSON, overlays, flame-graph
choice, self-containment; and a real headless Chromium loading a report made from a
real sweep: no console errors, and no chart screenshot is blank."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import report_fixtures as rd

from perfkit.docs_site import DOCS_URL, finding_url
from perfkit.errors import PerfkitError
from perfkit.report.browser import capture, find_chromium
from perfkit.report.html import render_html, write_report, write_report_files
from perfkit.report.report_inputs import inputs_from_results, load_inputs

CHROMIUM = find_chromium()
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="needs Chromium on PATH (apt-get install chromium)")


def _inputs(*docs, labels=None):
    """Documents decoded as the CLI decodes a file: the typed results the report takes."""
    return inputs_from_results([rd.decode(d) for d in docs], labels)


def _charts(*docs, labels=None, flame=None, search=()):
    return rd.chart_data(render_html(_inputs(*docs, labels=labels), flame, search))


def _series(chart):
    return {s["label"]: s for s in chart["series"]}


def test_load_curves_are_the_levels_numbers():
    doc = rd.sweep_doc()
    charts = _charts(doc)
    levels = doc["levels"]
    thr = charts["throughput"]["series"][0]
    assert thr["x"] == [1, 2, 4, 8]
    assert thr["y"] == [lv["throughput"]["output_tokens_per_s"] for lv in levels]
    assert charts["throughput"]["marks"] == [{"label": "knee", "x": 2.0}]
    for metric in ("ttft", "tpot"):
        series = _series(charts[metric])
        for pct in ("p50", "p99"):
            assert series[pct]["y"] == [lv["latency"][metric][pct] for lv in levels]
        assert charts[metric]["marks"] == charts["throughput"]["marks"]


def test_distributions_kv_cpu_and_faults_per_level():
    doc = rd.sweep_doc()
    charts = _charts(doc)
    levels = doc["levels"]
    for metric in ("ttft", "tpot", "e2e"):
        rows = charts[f"{metric}-dist"]["rows"]
        assert [r["label"] for r in rows] == ["c=1", "c=2", "c=4", "c=8"]
        for row, lv in zip(rows, levels):
            assert {k: row[k] for k in ("min", "p50", "p90", "p99", "max")} == {
                k: lv["latency"][metric][k] for k in ("min", "p50", "p90", "p99", "max")}
    kv = _series(charts["kv-usage"])
    for lv in levels:
        assert kv[f"c={lv['concurrency']}"]["x"] == lv["kv"]["timeline"]["t_s"]
        assert kv[f"c={lv['concurrency']}"]["y"] == lv["kv"]["timeline"]["blocks_used"]
    cpu = {s["label"]: s["values"] for s in charts["cpu-time"]["stacks"]}
    assert cpu == {"user": [lv["cpu"]["user_s"] for lv in levels],
                   "system": [lv["cpu"]["system_s"] for lv in levels]}
    faults = {s["label"]: s["values"] for s in charts["page-faults"]["stacks"]}
    assert faults["minor"] == [lv["cpu"]["num_minor_faults"] for lv in levels]
    assert faults["major"] == [lv["cpu"]["num_major_faults"] for lv in levels]


def test_gpu_memory_timeline_or_the_reason_it_is_missing():
    doc = rd.sweep_doc([rd.level(1, gpu=True), rd.level(2, gpu=True)])
    series = _series(_charts(doc)["gpu-memory"])
    assert series["c=2"]["x"] == [p["t_s"] for p in doc["levels"][1]["gpu"]["timeline"]]
    assert series["c=2"]["y"] == [p["used_bytes"] for p in doc["levels"][1]["gpu"]["timeline"]]
    page = render_html(_inputs(rd.sweep_doc()))
    assert rd.chart_data(page)["gpu-memory"]["series"] == []
    assert "NVML unavailable: no NVIDIA driver" in page


def test_repeats_are_averaged_on_curves_and_listed_per_level():
    doc = rd.sweep_doc([rd.level(c, repeat=r) for r in (0, 1) for c in (1, 2)])
    charts = _charts(doc)
    thr = charts["throughput"]["series"][0]
    assert thr["y"] == [(100.0 + 101.0) / 2, (200.0 + 201.0) / 2]
    p99 = [(lv["latency"]["ttft"]["p99"]) for lv in doc["levels"]]
    assert _series(charts["ttft"])["p99"]["y"] == [(p99[0] + p99[2]) / 2, (p99[1] + p99[3]) / 2]
    assert [r["label"] for r in charts["ttft-dist"]["rows"]] == ["c=1", "c=1 #1", "c=2",
                                                                 "c=2 #1"]


def test_open_loop_levels_get_their_own_curves_without_a_knee():
    doc = rd.sweep_doc([rd.level(None, rate=r) for r in (2.0, 4.0)], knee=None)
    charts = _charts(doc)
    assert "throughput" not in charts
    assert charts["throughput-rate"]["series"][0]["x"] == [2.0, 4.0]
    assert charts["throughput-rate"]["marks"] == []
    assert [r["label"] for r in charts["ttft-dist"]["rows"]] == ["2/s", "4/s"]


def test_overlay_labels_every_series_with_one_colour_per_input():
    base, cur = rd.sweep_doc(knee=2.0), rd.sweep_doc(knee=4.0)
    cur["levels"] = [rd.level(c, scale=0.5) for c in (1, 2, 4, 8)]
    charts = _charts(base, cur, labels=["baseline", "current"])
    thr = _series(charts["throughput"])
    assert thr["current"]["y"] == [lv["throughput"]["output_tokens_per_s"] for lv in cur["levels"]]
    colours = {thr["baseline"]["color"], thr["current"]["color"]}
    assert len(colours) == 2
    ttft = _series(charts["ttft"])
    assert set(ttft) == {"p99 · baseline", "p50 · baseline", "p99 · current", "p50 · current"}
    assert ttft["p99 · current"]["color"] == thr["current"]["color"]
    assert charts["throughput"]["marks"] == [{"label": "knee baseline", "x": 2.0},
                                             {"label": "knee current", "x": 4.0}]
    rows = charts["ttft-dist"]["rows"]
    assert [r["label"] for r in rows[:2]] == ["c=1 · baseline", "c=1 · current"]
    assert rows[1]["color"] == thr["current"]["color"]
    cpu = {s["label"]: s["values"] for s in charts["cpu-time"]["stacks"]}
    assert cpu["user · current"][:2] == [None, cur["levels"][0]["cpu"]["user_s"]]


def test_remote_levels_plot_what_the_client_measured_and_no_block_pool():
    doc = rd.sweep_doc([rd.remote_level(c) for c in (1, 2)])
    page = render_html(_inputs(doc))
    charts = rd.chart_data(page)
    assert charts["throughput"]["series"][0]["y"] == [
        lv["throughput"]["output_tokens_per_s"] for lv in doc["levels"]]
    assert [s["y"] for s in charts["kv-usage"]["series"]] == [[], []]
    assert "No engine block pool" in page and "The pool holds" not in page


def test_fragmentation_bars_are_the_policy_shares(tmp_path):
    doc = rd.frag_doc(live=True)
    charts = rd.chart_data(render_html(load_inputs([rd.write(tmp_path / "f.json", doc)])))
    frag = charts["fragmentation"]
    assert frag["categories"] == ["reserve-max", "paged-16", "engine"]
    policies = [*doc["policies"], doc["live"]["engine"]]
    for stack in frag["stacks"]:
        assert stack["values"] == [p[stack["label"]] for p in policies]
    assert "throughput" not in charts  # no sweep, no sweep charts


def test_findings_and_knee_sentence_are_on_the_page():
    page = render_html(_inputs(rd.sweep_doc()))
    assert "Saturated &lt;here&gt;." in page and "Cap concurrency." in page
    assert "Knee at concurrency 2." in page


def _with_stacks(tmp_path: Path, keys=(1, 2, 4)) -> dict:
    (tmp_path / "stacks").mkdir()
    levels = []
    for c in keys:
        svg = tmp_path / "stacks" / f"level-{c}.svg"
        svg.write_text(f'<svg xmlns="http://www.w3.org/2000/svg" width="100" height="20">'
                       f"<text>frames of {c}</text></svg>")
        levels.append(rd.level(c, svg=f"stacks/level-{c}.svg"))  # relative to the JSON's folder
    return rd.sweep_doc([*levels, rd.level(8)])


def test_flame_graph_defaults_to_the_highest_concurrency_with_stacks(tmp_path):
    path = rd.write(tmp_path / "r.json", _with_stacks(tmp_path))
    page = render_html(load_inputs([path]))
    assert rd.chart_data(page)["flame-graph"]["inputs"] == [
        {"label": "r", "level": "4", "svg_path": "stacks/level-4.svg", "embedded": True}]
    assert "frames of 4" in page and "frames of 2" not in page
    frame = re.search(r"<iframe[^>]*>", page)
    assert frame and " sandbox " in frame.group(0) and "allow-scripts" not in frame.group(0)
    chosen = render_html(load_inputs([path]), flame="c=2")
    assert "frames of 2" in chosen and "frames of 4" not in chosen


def test_flame_level_that_does_not_exist_is_a_clear_error(tmp_path):
    path = rd.write(tmp_path / "r.json", _with_stacks(tmp_path))
    with pytest.raises(PerfkitError, match=r"--flame 16: .*choose one of 1, 2, 4"):
        render_html(load_inputs([path]), flame="16")
    with pytest.raises(PerfkitError, match="no result has stacks"):
        render_html(_inputs(rd.sweep_doc()), flame="8")


def test_missing_flame_svg_is_a_note_not_a_failure(tmp_path):
    doc = rd.sweep_doc([rd.level(1, svg=str(tmp_path / "gone.svg"))])
    page = render_html(_inputs(doc))
    assert rd.chart_data(page)["flame-graph"]["inputs"][0]["embedded"] is False
    assert "not found" in page


def test_report_is_self_contained(tmp_path):
    path = rd.write(tmp_path / "r.json", _with_stacks(tmp_path))
    page = render_html(load_inputs([path, rd.write(tmp_path / "f.json", rd.frag_doc())]))
    assert "<script" not in page and "<link" not in page and "@import" not in page
    assert not re.search(r"""src\s*=\s*["']?(https?:|//)""", page)
    # the only outside addresses: links a reader may follow to the findings catalogue
    hrefs = set(re.findall(r"""href\s*=\s*["']?((?:https?:)?//[^\s"'<>]+)""", page))
    assert hrefs and all(h.startswith(DOCS_URL + "findings/#") for h in hrefs)
    urls = set(re.findall(r"https?://[^\s\"'<>&]+", page)) - hrefs
    assert urls <= {"http://www.w3.org/2000/svg"}  # the SVG namespace, never fetched


def test_each_finding_id_links_to_its_catalogue_entry():
    doc = rd.sweep_doc()
    ids = [f["id"] for f in doc["findings"]]
    page = render_html(_inputs(doc))
    assert ids
    for finding_id in ids:
        link = f'<a class="finding" href="{finding_url(finding_id)}"><b>{finding_id}</b></a>'
        assert link in page


def test_write_report_labels_in_memory_results_by_profile(tmp_path):
    out = write_report([rd.decode(rd.sweep_doc(name="p1")), rd.decode(rd.sweep_doc(name="p1"))],
                       tmp_path / "r.html")
    charts = rd.chart_data(out.read_text(encoding="utf-8"))
    assert [s["label"] for s in charts["throughput"]["series"]] == ["p1 #1", "p1 #2"]


# -- a real browser on a report from a real sweep ------------------------------------------
TINY = ["--profile", "default", "--concurrency", "1,4", "--requests", "6", "--warmup", "2",
        "--set", "workload.output_len.kind=\"fixed\"", "--set", "workload.output_len.mean=8",
        "--set", "workload.output_len.min=8", "--set", "workload.output_len.max=8",
        "--set", "engine.cpu_threads=1"]


def _perfkit(*args: str, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "perfkit", *args], cwd=cwd,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _real_report(tmp_path: Path, tiny: list[str]) -> Path:
    """A real sweep with stacks and a real fragmentation replay, run side by side."""
    runs = [_perfkit("sweep", *tiny, "--stacks", "--stack-rate", "50", "--json", "r.json",
                     "--format", "json", cwd=tmp_path),
            _perfkit("fragmentation", "--requests", "40", "--jobs", "1", "--block-sizes",
                     "16,64", "--json", "f.json", cwd=tmp_path)]
    for proc in runs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode(errors="replace")
    return write_report_files([tmp_path / "r.json", tmp_path / "f.json"], tmp_path / "rep.html")


@needs_chromium
def test_chromium_loads_a_real_report_without_errors_and_no_chart_is_blank(tmp_path):
    report = _real_report(tmp_path, TINY)
    page = report.read_text(encoding="utf-8")
    data = rd.chart_data(page)
    result = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    thr = data["throughput"]["series"][0]
    assert thr["y"] == [lv["throughput"]["output_tokens_per_s"] for lv in result["levels"]]
    assert data["flame-graph"]["inputs"][0]["embedded"] is True

    shot = capture(report, fast=True, exe=CHROMIUM)
    assert shot.console_errors == []
    assert sorted(k.removeprefix("chart-") for k in shot.shots) == sorted(data)
    for chart_id, png in shot.shots.items():
        colours, ink = rd.png_stats(png)
        assert colours > 8 and ink > 0.01, (chart_id, colours, ink)


@needs_chromium
def test_the_browser_checks_catch_errors_and_blank_charts(tmp_path):
    page = tmp_path / "bad.html"
    page.write_text('<!doctype html><body><figure id="chart-x" data-chart="{}" '
                    'style="width:300px;height:100px;background:#fff"></figure>'
                    '<img src="https://example.com/x.png"><script>console.error("boom")</script>',
                    encoding="utf-8")
    shot = capture(page, fast=True, exe=CHROMIUM)
    assert any("boom" in e for e in shot.console_errors)
    assert any("example.com" in e for e in shot.console_errors)  # offline: a load fails
    assert rd.png_stats(shot.shots["chart-x"]) == (1, 0.0)


def test_write_report_finds_relative_stacks_next_to_the_report(tmp_path, monkeypatch):
    doc = _with_stacks(tmp_path)
    monkeypatch.chdir("/")  # the recorded relative path does not resolve from here
    out = write_report([rd.decode(doc)], tmp_path / "r.html", flame_level="2")
    page = out.read_text(encoding="utf-8")
    assert "frames of 2" in page
    assert rd.chart_data(page)["flame-graph"]["inputs"][0]["level"] == "2"
