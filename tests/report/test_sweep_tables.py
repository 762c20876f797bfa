"""The summary tables, the CSV and the exporter registry on typed results: exact text,
n/a for what a level did not measure (never 0), and a v1 file renders as its v2 twin."""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path

import pytest
import report_fixtures as rd
from rich.console import Console

from perfkit.measure.proc import ProcStats
from perfkit.report.exporters import EXPORTERS, render_table, write_outputs
from perfkit.report.html import write_report_files
from perfkit.report.levels_csv import HEADER, csv_text
from perfkit.report.tables import markdown
from perfkit.result import Distribution, GuardCounts, SweepResult
from perfkit.result.codec import to_json
from perfkit.result.io import decode_result, load_result, result_json

REAL_V1 = Path(__file__).parents[1] / "result" / "data"  # written by perfkit sweep, schema /1
COUNTS_HEAD = ("| level | reqs | out tokens | rej. | pre- empt | KV peak blocks | KV peak slots "
               "| run peak | prefix hit | steps |")


def _section(md: str, title: str) -> list[str]:
    """The lines of one Markdown table: header, rule, rows."""
    lines = md.splitlines()
    start = lines.index(f"### {title}") + 2
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return lines[start:end]


def _csv_rows(result: SweepResult) -> list[dict[str, str]]:
    lines = csv_text(result).splitlines()
    assert lines[0].split(",") == HEADER
    return [dict(zip(HEADER, line.split(","))) for line in lines[1:]]


def _text(result: SweepResult, width: int = 120) -> str:
    out = io.StringIO()
    Console(file=out, width=width, color_system=None).print(render_table(result))
    return out.getvalue()


def test_in_process_counts_are_blocks_slots_and_steps():
    result = rd.decode(rd.sweep_doc([rd.level(1), rd.level(4)]))
    assert _section(markdown(result), "Counts (deterministic)") == [
        COUNTS_HEAD, "|---|---|---|---|---|---|---|---|---|---|",
        "| c=1 | 10 | 80 | 0 | 0 | 3/64 | 48 | 1 | 10% | 40 |",
        "| c=4 | 10 | 320 | 0 | 1 | 12/64 | 192 | 4 | 10% | 160 |"]
    assert "Remote target" not in markdown(result)


def test_remote_level_prints_na_for_steps_and_blocks_and_its_scraped_kv_share():
    result = rd.decode(rd.sweep_doc([rd.remote_level(4, usage_peak=0.42, preemptions=3),
                                     rd.remote_level(8, usage_peak=None)]))
    md = markdown(result)
    assert _section(md, "Counts (deterministic)")[2:] == [
        "| c=4 | 10 | 320 | 0 | 3 | 42% | n/a | 4 | 10% | n/a |",  # scraped preemptions
        "| c=8 | 10 | 640 | 0 | n/a | n/a | n/a | n/a | 10% | n/a |"]  # nothing scraped
    cpu = _section(md, "CPU, GC, GPU (noisy)")
    assert [row.split(" | ")[4] for row in cpu[2:]] == ["n/a", "n/a"]  # faults per step
    client = "Remote target: errors (count); the load generator's cost and error (noisy)"
    assert _section(md, client)[2:] == [  # errors, workers, busiest CPU, CPU/chunk, lag, ...
        "| c=4 | 1 | 1 | 10% | n/a | 2.0 | n/a | n/a |",
        "| c=8 | 1 | 1 | 10% | n/a | 2.0 | n/a | n/a |"]
    rows = _csv_rows(result)
    assert [(r["preemptions"], r["peak_blocks_used"], r["blocks_total"]) for r in rows] == [
        ("3", "n/a", "n/a"), ("n/a", "n/a", "n/a")]
    text = _text(result)
    row = " c=4      10     320     0     3      42%      n/a     4     10%    n/a"
    assert row in text


def test_what_was_not_measured_prints_na_not_a_dash_or_zero():
    lv = rd.level_result(2)
    lv = dataclasses.replace(
        lv, cpu=ProcStats.wall_only(1.0, "samplers off"), goodput=dataclasses.replace(
            lv.goodput, share=None),
        latency=dataclasses.replace(lv.latency, tpot=Distribution(count=0)))
    result = rd.decode(rd.sweep_doc([to_json(lv)]))
    md = markdown(result)
    assert _section(md, "Timings (noisy)")[2] == \
        "| c=2 | 20.00 | 200.0 | 20.0 | 40.0 | n/a | n/a | 0.40 | n/a |"
    assert _section(md, "CPU, GC, GPU (noisy)")[2] == \
        "| c=2 | n/a | n/a | n/a | n/a | n/a | n/a | 1.5 | n/a |"
    (row,) = _csv_rows(result)
    assert row["rate"] == row["tpot_p50_s"] == row["goodput_share"] == row["user_s"] == "n/a"
    assert row["concurrency"] == "2" and row["ttft_p50_s"] == "0.02"


def test_guard_table_appears_when_tool_calls_ran():
    lv = rd.level_result(1)
    assert lv.guard is not None
    guard = dataclasses.replace(lv.guard, counts=GuardCounts({"stop": 3, "loop": 1}, 3, 0))
    result = rd.decode(rd.sweep_doc([to_json(dataclasses.replace(lv, guard=guard))]))
    assert _section(markdown(result), "Guard (counts; µs/step is a timing)")[2:] == [
        "| c=1 | 3 | 0 | 3 | 1 | 0 | 25 |"]
    assert "Guard" not in markdown(rd.decode(rd.sweep_doc([rd.level(1)])))


def test_a_v1_file_renders_as_its_v2_twin(tmp_path):
    for name, levels in (("local", [rd.level(c, gpu=True) for c in (1, 2)]),
                         ("remote", [rd.remote_level(c) for c in (1, 2)])):
        doc = rd.sweep_doc(levels)
        v2 = load_result(rd.write(tmp_path / f"{name}-v2.json", doc))
        v1 = load_result(rd.write(tmp_path / f"{name}-v1.json", rd.as_v1(doc)))
        for export in EXPORTERS.values():
            assert export(v1) == export(v2), (name, export)
        assert _text(v1) == _text(v2)
        pages = [write_report_files([tmp_path / f"{name}-{v}.json"], tmp_path / f"{name}-{v}.html",
                                    ["r"]).read_text(encoding="utf-8") for v in ("v1", "v2")]
        assert rd.chart_data(pages[0]) == rd.chart_data(pages[1])


@pytest.mark.parametrize("name", ["v1-local", "v1-remote"])
def test_real_v1_files_render_as_the_v2_files_they_upgrade_to(tmp_path, name):
    v1_path = REAL_V1 / f"{name}.json"
    v1 = load_result(v1_path)
    v2_path = tmp_path / f"{name}-v2.json"
    v2_path.write_text(result_json(v1), encoding="utf-8")
    v2 = load_result(v2_path)
    assert json.loads(v2_path.read_text())["schema"] == "perfkit.sweep/2"
    for export in (markdown, csv_text, _text):
        assert export(v1) == export(v2)
    pages = [write_report_files([p], tmp_path / f"{i}.html", ["r"]).read_text(encoding="utf-8")
             for i, p in enumerate((v1_path, v2_path))]
    assert rd.chart_data(pages[0]) == rd.chart_data(pages[1])
    if name == "v1-remote":  # v1 wrote 0 steps and 0 blocks remotely: never measured
        assert _section(markdown(v1), "Counts (deterministic)")[2] == \
            "| c=2 | 3 | 12 | 0 | n/a | n/a | n/a | n/a | 0% | n/a |"


def test_the_exporters_and_the_out_files(tmp_path):
    result = rd.decode(rd.sweep_doc([rd.level(1), rd.remote_level(2)]))
    assert set(EXPORTERS) == {"json", "markdown", "csv"}
    assert decode_result(json.loads(EXPORTERS["json"](result)), "again") == result
    assert EXPORTERS["markdown"](result) == markdown(result)
    out = tmp_path / "out"
    paths = write_outputs(result, out)
    assert paths == [out / "summary.md", out / "levels.csv"]
    assert paths[0].read_text(encoding="utf-8") == markdown(result)
    assert paths[1].read_bytes() == csv_text(result).encode()  # CSV rows end in \r\n
    assert sorted(p.name for p in out.iterdir()) == ["levels.csv", "summary.md"]  # no temp files
