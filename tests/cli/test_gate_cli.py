import copy
import importlib.util
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "gate_fixtures", Path(__file__).parents[1] / "gate" / "gate_fixtures.py")
assert _spec is not None and _spec.loader is not None
gate_fixtures = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gate_fixtures)


@pytest.fixture
def gate(cli, tmp_path):
    """`perfkit gate BASE CUR ARGS` on the real app, the two results written first."""

    def invoke(base: dict | str, cur: dict | str, *args: str):
        paths = []
        for name, d in (("base.json", base), ("cur.json", cur)):
            path = tmp_path / name
            path.write_text(d if isinstance(d, str) else json.dumps(d))
            paths.append(str(path))
        return cli("gate", *paths, *args)

    return invoke


def test_identical_results_exit_0_and_write_every_output(gate, tmp_path):
    d = gate_fixtures.noisy_doc(1)
    md, xml, out = tmp_path / "s.md", tmp_path / "j.xml", tmp_path / "v.json"
    md.write_text("")  # CI passes existing empty files ($GITHUB_STEP_SUMMARY): replaced
    result = gate(d, d, "--markdown", str(md), "--junit", str(xml), "--json", str(out))
    assert result.exit_code == 0, result.stdout + result.stderr
    assert "pass: 54 checks, 52 decided, 54 passed, 0 failed, 0 inconclusive" in result.stdout
    assert "ttft_p50" not in result.stdout  # passing rows only with --verbose
    verbose = gate(d, d, "--verbose")
    assert "ttft_p50" in verbose.stdout and max(map(len, verbose.stdout.splitlines())) <= 80
    assert md.read_text().startswith("## ✅ perfkit gate: pass")
    assert ET.parse(xml).getroot().get("failures") == "0"
    verdict = json.loads(out.read_text())
    assert (verdict["schema"], verdict["verdict"]) == ("perfkit.gate/2", "pass")


def test_planted_slowdown_exits_1_with_a_junit_failure(gate, tmp_path):
    base = gate_fixtures.noisy_doc(1000)
    cur = gate_fixtures.noisy_doc(1001, tpot_factor=1.1)
    xml = tmp_path / "j.xml"
    result = gate(base, cur, "--junit", str(xml))
    assert result.exit_code == 1
    assert "FAIL c=1 tpot_p50: regression" in result.stdout
    failed = {c.get("name") for c in ET.parse(xml).getroot().iter("testcase")
              if c.find("failure") is not None}
    assert "tpot_p50" in failed


def test_changed_count_exits_1(gate):
    base = gate_fixtures.noisy_doc(2)
    cur = copy.deepcopy(base)
    cur["levels"][0]["counts"]["pool_hits"] += 1
    result = gate(base, cur)
    assert result.exit_code == 1
    assert "prefix_hits: changed" in result.stdout


def test_incomparable_results_exit_2_with_the_reason(gate):
    base = gate_fixtures.noisy_doc(3)
    cur = gate_fixtures.noisy_doc(4, device_class="cuda:NVIDIA H200")
    result = gate(base, cur)
    assert result.exit_code == 2
    assert result.stderr.startswith("error: cannot compare")
    assert "'cpu:Test CPU'" in result.stderr and "'cuda:NVIDIA H200'" in result.stderr
    allowed = gate(base, cur, "--allow-mismatch")
    assert allowed.exit_code == 0
    assert "warning:" in allowed.stderr and "device class differs" in allowed.stderr


@pytest.mark.parametrize("bad", [
    "{not json", json.dumps({"schema": "other"}), json.dumps([1, 2]),
    json.dumps({"schema": "perfkit.sweep/1", "levels": "x"}),
])
def test_malformed_file_exits_2(gate, bad):
    result = gate(gate_fixtures.noisy_doc(5), bad)
    assert result.exit_code == 2
    assert result.stderr.startswith("error:") and "cur.json" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout


def test_missing_file_exits_2(cli, tmp_path):
    result = cli("gate", str(tmp_path / "a.json"), str(tmp_path / "b.json"))
    assert result.exit_code == 2
    assert "no such file" in result.stderr


def test_rules_file_with_unknown_metric_exits_2(gate, tmp_path):
    rules = tmp_path / "rules.toml"
    rules.write_text("[rules.thruput]\nrel_tol = 0.2\n")
    d = gate_fixtures.noisy_doc(6)
    result = gate(d, d, "--rules", str(rules))
    assert result.exit_code == 2
    assert "unknown metric 'thruput'; did you mean 'throughput'" in result.stderr


def test_remote_results_without_scraping_fail_as_not_measured(gate, tmp_path):
    base, cur = gate_fixtures.remote_doc(7), gate_fixtures.remote_doc(8)
    result = gate(base, cur)
    assert result.exit_code == 1
    assert "FAIL c=4 kv_peak_blocks: not measured in the baseline and current result" \
        in result.stdout
    assert "FAIL c=1 preemptions: not measured" in result.stdout
    assert "regression: 54 checks, 34 decided, 42 passed, 12 failed" in result.stdout
    rules = tmp_path / "remote.toml"
    rules.write_text("".join(f"[rules.{m}]\nrequired = false\n" for m in
                             ("preemptions", "prefix_hits", "kv_peak_blocks", "kv_waste_slots",
                              "cpu_per_token", "cpu_per_step")))
    passed = gate(base, cur, "--rules", str(rules), "--verbose")
    assert passed.exit_code == 0, passed.stdout
    assert "not measured*" in passed.stdout


def test_v1_and_v2_files_of_the_same_run_gate_as_equal(gate, tmp_path):
    """But for blocks saved by sharing, which v1 never measured (optional: not failing)."""
    for d in (gate_fixtures.noisy_doc(9), gate_fixtures.remote_doc(10, scraped=True)):
        verdicts = []
        for i, base in enumerate((d, gate_fixtures.as_v1(d))):
            out = tmp_path / f"v{i}-{len(verdicts)}-{id(d)}.json"
            result = gate(base, d, "--json", str(out))
            rows = [r for r in json.loads(out.read_text())["rows"]
                    if r["metric"] != "kv_saved_blocks"]
            verdicts.append((result.exit_code, rows))
        assert verdicts[0] == verdicts[1]


def test_malformed_v2_file_exits_2_naming_the_file_and_field(gate, tmp_path):
    bad = gate_fixtures.noisy_doc(11)
    bad["levels"][1]["counts"]["steps"] = "many"
    result = gate(gate_fixtures.noisy_doc(12), bad)
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"error: {tmp_path / 'cur.json'}: malformed sweep result: ")
    assert "levels[1].counts.steps: expected an integer" in line


def test_one_run_against_itself_is_inconclusive_not_a_regression(gate, tmp_path):
    d = gate_fixtures.noisy_doc(12, repeats=1, n=20)
    out = tmp_path / "v.json"
    result = gate(d, d, "--json", str(out))
    assert result.exit_code == 1, result.stdout + result.stderr  # undecided fails by default
    text = " ".join(result.stdout.split())
    assert "inconclusive: " in text and "regression:" not in text, text
    assert "nothing regressed; 3 paired runs a side (now 1)" in text
    assert ">= 50 measured requests a run for the tails" in text
    assert json.loads(out.read_text())["verdict"] == "inconclusive"
    assert gate(d, d, "--allow-inconclusive").exit_code == 0
