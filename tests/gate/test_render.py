"""Renderers of a gate result: JUnit, JSON, Markdown; "not measured" in each."""

import copy
import xml.etree.ElementTree as ET

from gate_fixtures import noisy_doc, remote_doc, run
from rich.console import Console

from perfkit.gate import render

# ---- renderers ---------------------------------------------------------------------------


def test_junit_has_one_case_per_row_and_failures():
    base = noisy_doc(40)
    cur = copy.deepcopy(base)
    cur["levels"][0]["counts"]["output_tokens"] += 1
    result = run(base, cur)
    root = ET.fromstring(render.junit(result))
    cases = root.findall("./testsuite/testcase")
    assert len(cases) == len(result.rows)
    failed = [c for c in cases if c.find("failure") is not None]
    assert [(c.get("classname"), c.get("name")) for c in failed] == [
        ("perfkit.gate.c=1", "output_tokens")]
    assert root.get("failures") == "1"


def test_json_verdict_shape():
    data = render.to_dict(run(noisy_doc(41), noisy_doc(42)))
    assert (data["schema"], data["verdict"], data["failures"]) == ("perfkit.gate/2", "pass", 0)
    first = data["rows"][0]
    assert {"level", "metric", "baseline", "current", "change", "interval", "detectable",
            "pairs", "scale", "verdict", "fails"} <= set(first)
    assert data["summary"].startswith("pass: ")


def test_markdown_stays_under_one_mib():
    base = noisy_doc(43, concurrencies=(1,), n=60)
    result = run(base, copy.deepcopy(base))
    result.rows = result.rows * 20000  # ~380k rows
    text = render.markdown(result)
    assert len(text.encode()) < 1_048_576
    assert "rows left out" in text
    small = render.markdown(run(base, copy.deepcopy(base)))
    assert small.startswith("## ✅ perfkit gate: pass") and "rows left out" not in small


# ---- not measured, in every rendering ------------------------------------------------------


def _remote_result(optional: bool = False):
    rules = {m: {"required": False} for m in ("preemptions", "prefix_hits", "kv_peak_blocks",
                                              "kv_waste_slots", "cpu_per_token", "cpu_per_step")
             } if optional else None
    return run(remote_doc(60, concurrencies=(1,), gate_rules=rules),
               remote_doc(61, concurrencies=(1,)))


def _terminal(result, verbose: bool = False) -> list[str]:
    console = Console(width=80, record=True, color_system=None)
    console.print(render.rich_table(result, verbose))
    lines = [line.rstrip() for line in console.export_text().splitlines()]
    assert max(map(len, lines)) <= 80
    return lines


def test_terminal_table_says_not_measured_and_fails_when_required():
    lines = _terminal(_remote_result())
    assert "c=1   kv_peak_blocks        -               -   -    - not measured" in lines
    assert lines[-1] == "regression: 27 checks, 17 decided, 21 passed, 6 failed, 0 inconclusive"
    assert "FAIL c=1 kv_peak_blocks: not measured in the baseline and current result: a" \
        in lines
    assert not any(" steps " in line for line in lines)  # passing rows: only with --verbose
    verbose = _terminal(_remote_result(), verbose=True)
    assert any(line.endswith("not measured*") and " steps " in line for line in verbose)


def test_terminal_shows_failures_and_one_summary_line_by_default():
    base = noisy_doc(44)
    lines = _terminal(run(base, copy.deepcopy(base)))
    assert lines == ["pass: 54 checks, 52 decided, 54 passed, 0 failed, 0 inconclusive"]
    assert len(_terminal(run(base, copy.deepcopy(base)), verbose=True)) > 42


def test_terminal_table_optional_not_measured_passes():
    text = "\n".join(_terminal(_remote_result(optional=True), verbose=True))
    assert "not measured*" in text and "FAIL" not in text
    assert text.rstrip().endswith(
        "pass: 27 checks, 17 decided, 27 passed, 0 failed, 0 inconclusive")


def test_markdown_lists_not_measured_with_its_side():
    failing = render.markdown(_remote_result())
    table = failing.split("### Failing")[1].split("<details>")[0]
    assert ("| c=1 | kv_peak_blocks | - | - | - | - | - | not measured in both | not measured "
            "in the baseline and current result: a remote target exports no KV block counts |"
            ) in table
    assert table.count("not measured in both") == 6
    passing = render.markdown(_remote_result(optional=True))
    assert passing.startswith("## ✅") and "### Failing" not in passing
    assert "| c=1 | kv_peak_blocks | - | - | - | - | - | not measured in both (optional) |" \
           in passing


def _cases(result) -> tuple[dict[str, ET.Element], ET.Element]:
    root = ET.fromstring(render.junit(result))
    return {c.get("name"): c for c in root.iter("testcase")}, root


def test_junit_not_measured_is_a_failure_when_required_and_skipped_when_optional():
    cases, root = _cases(_remote_result())
    failure = cases["kv_peak_blocks"].find("failure")
    assert failure is not None and failure.get("type") == "not measured"
    assert failure.get("message").startswith("not measured in both: baseline -, current -")
    assert "exports no KV block counts" in failure.text
    assert cases["steps"].find("skipped") is not None  # optional
    # steps, gpu_peak_bytes, kv_saved_blocks, copy_on_writes
    assert (root.get("failures"), root.get("skipped")) == ("6", "4")
    cases, root = _cases(_remote_result(optional=True))
    skipped = cases["kv_peak_blocks"].find("skipped")
    assert skipped is not None and cases["kv_peak_blocks"].find("failure") is None
    assert skipped.get("message").startswith("not measured in both (optional)")
    assert (root.get("failures"), root.get("skipped")) == ("0", "10")


def test_json_verdict_names_the_side_not_measured():
    data = render.to_dict(_remote_result())
    (kv,) = [r for r in data["rows"] if r["metric"] == "kv_peak_blocks"]
    assert (kv["verdict"], kv["not_measured"], kv["fails"]) == ("not measured", "both", True)
    assert (kv["baseline"], kv["current"], kv["delta"]) == (None, None, None)
    (tokens,) = [r for r in data["rows"] if r["metric"] == "output_tokens"]
    assert tokens["not_measured"] is None
    assert data["failures"] == 6
    optional = render.to_dict(_remote_result(optional=True))
    assert optional["verdict"] == "pass"
    assert [r["fails"] for r in optional["rows"] if r["verdict"] == "not measured"] == [False] * 9
