"""`perfkit report`: writes the HTML, overlays labelled inputs, bad input exits 2 with
one clear line, --png writes one PNG per chart or names what to install."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from perfkit.report.browser import find_chromium

_spec = importlib.util.spec_from_file_location(
    "report_fixtures", Path(__file__).parents[1] / "report" / "report_fixtures.py")
assert _spec is not None and _spec.loader is not None
rd = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rd)


@pytest.fixture
def run(cli):
    """`perfkit report ARGS` on the real app."""
    return lambda *args: cli("report", *map(str, args), width=200)


@pytest.fixture
def results(tmp_path):
    base = rd.write(tmp_path / "base.json", rd.sweep_doc())
    cur = rd.write(tmp_path / "cur.json", rd.sweep_doc([rd.level(c, scale=0.8) for c in (1, 2)]))
    frag = rd.write(tmp_path / "frag.json", rd.frag_doc())
    return base, cur, frag


def test_writes_one_html_with_every_input(run, results, tmp_path):
    out = tmp_path / "out" / "report.html"
    res = run(*results, "-o", out)
    assert res.exit_code == 0, res.stderr
    assert f"wrote {out}" in res.stdout
    charts = rd.chart_data(out.read_text(encoding="utf-8"))
    assert [s["label"] for s in charts["throughput"]["series"]] == ["base", "cur"]
    assert charts["fragmentation"]["categories"] == ["reserve-max", "paged-16"]
    again = run(*results, "-o", out)  # the one overwrite rule: not without --force
    assert again.exit_code == 2 and "pass --force" in again.stderr
    assert run(*results, "-o", out, "--force").exit_code == 0


def test_labels_name_the_inputs(run, results, tmp_path):
    out = tmp_path / "r.html"
    res = run(results[0], results[1], "--label", "main", "--label", "pr-42", "-o", out)
    assert res.exit_code == 0, res.stderr
    ttft = rd.chart_data(out.read_text(encoding="utf-8"))["ttft"]["series"]
    assert [s["label"] for s in ttft] == ["p99 · main", "p50 · main", "p99 · pr-42",
                                          "p50 · pr-42"]


def _bad_files(tmp_path: Path) -> dict[str, Path]:
    files = {
        "text": "not json at all", "list": "[1, 2]",
        "other": json.dumps({"schema": "perfkit.gate/1"}),
        "nolevels": json.dumps({"schema": "perfkit.sweep/1", "levels": 3}),
        "badlevel": json.dumps(rd.sweep_doc() | {"levels": [{"concurrency": 1}]}),
        "badpolicy": json.dumps(rd.frag_doc() | {"policies": [{"name": "x", "used": "a lot"}]}),
    }
    for name, body in files.items():
        (tmp_path / f"{name}.json").write_text(body, encoding="utf-8")
    return {name: tmp_path / f"{name}.json" for name in files}


@pytest.mark.parametrize(("case", "message"), [
    ("missing", "no such file"),
    ("text", "not a readable JSON result"),
    ("list", "not a perfkit sweep or fragmentation result"),
    ("other", "not a perfkit sweep or fragmentation result (schema 'perfkit.gate/1'"),
    ("nolevels", "malformed sweep result ('levels' is not a list)"),
    ("badlevel", "level 0: missing field 'rate'"),
    ("badpolicy", "policy 0: field 'used' has an unexpected value 'a lot'"),
])
def test_unreadable_or_unknown_input_exits_2_with_one_line(run, tmp_path, case, message):
    files = _bad_files(tmp_path)
    path = files.get(case, tmp_path / "missing.json")
    res = run(path, "-o", tmp_path / "r.html")
    assert res.exit_code == 2, res.stdout
    assert message in res.stderr and str(path) in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize(("extra", "message"), [
    (["--label", "only-one"], "--label: got 1 labels for 2 result files"),
    (["--label", "x", "--label", "x"], "--label: labels must be non-empty and differ"),
    (["--flame", "8"], "--flame 8: no result has stacks"),
])
def test_bad_options_exit_2_with_one_line(run, results, tmp_path, extra, message):
    res = run(results[0], results[1], *extra, "-o", tmp_path / "r.html")
    assert res.exit_code == 2, res.stdout
    assert message in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr


def test_output_that_is_a_folder_exits_2(run, results, tmp_path):
    res = run(results[0], "-o", tmp_path)
    assert res.exit_code == 2 and "is a folder" in res.stderr


def test_png_without_a_browser_names_what_to_install_and_writes_nothing(
        run, results, tmp_path, monkeypatch):
    monkeypatch.setenv("PERFKIT_CHROMIUM", str(tmp_path / "no-such-browser"))
    out = tmp_path / "r.html"
    res = run(results[0], "-o", out, "--png", tmp_path / "png")
    assert res.exit_code == 2
    assert "apt-get install chromium" in res.stderr and "nothing was written" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert not out.exists() and not (tmp_path / "png").exists()


@pytest.mark.skipif(find_chromium() is None, reason="needs Chromium on PATH")
def test_png_writes_one_image_per_chart(run, results, tmp_path):
    out = tmp_path / "r.html"
    res = run(results[0], results[2], "-o", out, "--png", tmp_path / "png")
    assert res.exit_code == 0, res.stderr
    charts = rd.chart_data(out.read_text(encoding="utf-8"))
    pngs = sorted(p.stem for p in (tmp_path / "png").glob("*.png"))
    assert pngs == sorted(charts)
    assert f"wrote {len(pngs)} PNG charts" in res.stdout
    colours, ink = rd.png_stats((tmp_path / "png" / "throughput.png").read_bytes())
    assert colours > 8 and ink > 0.01


def test_malformed_timeline_exits_2(run, tmp_path):
    doc = rd.sweep_doc()
    doc["levels"][1]["kv"]["timeline"]["blocks_used"] = ["many"]
    path = rd.write(tmp_path / "r.json", doc)
    res = run(path, "-o", tmp_path / "r.html")
    assert res.exit_code == 2 and "level 1: kv.timeline holds something other" in res.stderr
