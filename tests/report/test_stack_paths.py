"""Stack paths in a result are relative to the result file's folder: a report built from
a copy of that folder, anywhere, still embeds the flame graph. Old results (paths
relative to the working directory, or absolute) stay readable."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import report_fixtures as rd

from perfkit.config.profile import Overrides, load_profile
from perfkit.report.html import render_html
from perfkit.report.report_inputs import load_inputs
from perfkit.result.io import load_result
from perfkit.result.stacks import paths_relative_to, stack_path_candidates
from perfkit.run import StackOptions, run_sweep

TINY = ("sweep.concurrency=[1]", "workload.num_requests=3", "sweep.warmup=0",
        "workload.output_len.kind=\"fixed\"", "workload.output_len.mean=4",
        "workload.output_len.min=4", "workload.output_len.max=4", "engine.cpu_threads=1")
SVG = '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"></svg>'


def _flame(result_file: Path) -> dict:
    return rd.chart_data(render_html(load_inputs([result_file])))["flame-graph"]["inputs"][0]


def test_a_moved_result_folder_keeps_its_flame_graph(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    prof = load_profile("default", Overrides(sets=TINY))
    run_sweep(prof, Path("out/result.json"), samplers=False,
              stacks=StackOptions(Path("out/stacks"), 50.0, False))
    stacks = load_result(Path("out/result.json")).levels[0].stacks
    assert stacks is not None and stacks.svg_path == "stacks/level-1.svg"
    assert stacks.folded_path == "stacks/level-1.folded"
    moved = shutil.copytree(work / "out", tmp_path / "artifact" / "ci-run")
    shutil.rmtree(work / "out")
    monkeypatch.chdir(tmp_path)  # neither the old folder nor the old working directory
    flame = _flame(moved / "result.json")
    assert flame["embedded"] is True and flame["svg_path"] == "stacks/level-1.svg"


def test_without_a_result_file_paths_are_absolute(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    info = rd.level_result(1, svg="stacks/level-1.svg").stacks
    assert info is not None
    absolute = paths_relative_to(info, None)
    assert absolute.svg_path == str(tmp_path / "stacks/level-1.svg")
    beside = paths_relative_to(info, tmp_path / "results")
    assert beside.svg_path == "../stacks/level-1.svg"
    assert beside.folded_path == "../stacks/level-1.folded"


def test_old_results_with_working_directory_paths_still_resolve(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "out" / "stacks").mkdir(parents=True)
    (tmp_path / "out" / "stacks" / "level-1.svg").write_text(SVG)
    old = rd.sweep_doc([rd.level(1, svg="out/stacks/level-1.svg")])  # cwd-relative, as before
    result_file = rd.write(tmp_path / "out" / "result.json", old)
    monkeypatch.chdir(tmp_path)
    assert stack_path_candidates("out/stacks/level-1.svg", result_file) == [
        tmp_path / "out" / "out/stacks/level-1.svg", Path("out/stacks/level-1.svg")]
    assert _flame(result_file)["embedded"] is True
    absolute = rd.sweep_doc([rd.level(1, svg=str(tmp_path / "out/stacks/level-1.svg"))])
    monkeypatch.chdir("/")
    assert _flame(rd.write(tmp_path / "abs.json", absolute))["embedded"] is True
