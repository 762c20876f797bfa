"""A value the result holds as None was not measured: the row says so, never "ok"; it
fails when the rule is required. v1 results (zeros for the same) read the same as v2."""

import copy
from pathlib import Path

import pytest
from gate_fixtures import as_v1, doc, noisy_doc, remote, remote_doc, row, run

from perfkit.gate.evaluate import gate_files
from perfkit.result.io import load_result, result_json

REAL_V1 = Path(__file__).parents[1] / "result" / "data"  # perfkit.sweep/1, local and remote

REQUIRED_UNSCRAPED = {"preemptions", "prefix_hits", "kv_peak_blocks", "kv_waste_slots",
                      "cpu_per_token", "cpu_per_step"}  # a client cannot see a server's CPU
OPTIONAL = {"steps": "not measured", "gpu_peak_bytes": "missing"}


def test_remote_without_scraping_fails_on_what_it_cannot_see():
    result = run(remote_doc(1), remote_doc(2))
    assert result.verdict == "regression"
    assert {(r.level, r.metric) for r in result.failures} == {
        (lv, m) for lv in ("c=1", "c=4") for m in REQUIRED_UNSCRAPED}
    for r in result.failures:
        assert (r.verdict, r.not_measured) == ("not measured", "both")
        assert (r.baseline, r.current, r.delta) == (None, None, None)
        assert r.note.startswith("not measured in the baseline and current result: ")
    assert "--scrape-metrics" in row(result, "c=4", "preemptions").note
    assert row(result, "c=4", "kv_peak_blocks").note.endswith("exports no KV block counts")
    steps = row(result, "c=1", "steps")
    assert (steps.verdict, steps.fails) == ("not measured", False)
    (note,) = [n for n in result.notes if "not measured" in n]
    assert note.startswith("required but not measured: cpu_per_step, cpu_per_token, "
                           "kv_peak_blocks, kv_waste_slots, preemptions, prefix_hits. To gate "
                           "without them, set required = false")
    assert "server's" in row(result, "c=1", "cpu_per_token").note


def test_scraped_remote_compares_preemptions_and_prefix_hits():
    result = run(remote_doc(3, scraped=True), remote_doc(4, scraped=True))
    assert {r.metric for r in result.failures} == {"kv_peak_blocks", "kv_waste_slots",
                                                   "cpu_per_token", "cpu_per_step"}
    for metric in ("preemptions", "prefix_hits", "output_tokens"):
        assert row(result, "c=4", metric).verdict == "ok"
    assert row(result, "c=4", "prefix_hits").baseline == 12  # the server's counter


def test_remote_gate_passes_once_the_unmeasurable_are_optional(tmp_path):
    rules = tmp_path / "rules.toml"
    rules.write_text("".join(f"[rules.{m}]\nrequired = false\n" for m in REQUIRED_UNSCRAPED))
    result = run(remote_doc(5), remote_doc(6), rules_file=rules)
    assert result.verdict == "pass"
    r = row(result, "c=1", "kv_peak_blocks")
    assert (r.verdict, r.required, r.fails) == ("not measured", False, False)  # still shown
    assert not any("required but not measured" in n for n in result.notes)
    in_profile = {m: {"required": False} for m in REQUIRED_UNSCRAPED}
    assert run(remote_doc(5, gate_rules=in_profile), remote_doc(6)).verdict == "pass"


def test_zero_against_not_measured_is_not_ok():
    """In-process baseline (0 preemptions at c=1), remote current (unscraped)."""
    base = noisy_doc(7, device_class="remote:test")
    cur = copy.deepcopy(base)
    cur["levels"] = [remote(lv) for lv in cur["levels"]]
    r = row(run(base, cur), "c=1", "preemptions")
    assert (r.verdict, r.not_measured, r.fails) == ("not measured", "current", True)
    assert (r.baseline, r.current) == (0, None)
    assert r.note.startswith("not measured in the current result: ")
    assert row(run(cur, base), "c=1", "kv_peak_blocks").not_measured == "baseline"


def test_one_repeat_not_measured_is_named():
    base = remote_doc(8, scraped=True)
    cur = copy.deepcopy(base)
    cur["levels"][3]["counts"]["preemptions"] = None  # c=4, repeat 1: a scrape failed
    r = row(run(base, cur), "c=4", "preemptions")
    assert (r.verdict, r.not_measured) == ("not measured", "current")
    assert r.note.startswith("not measured in the current (1 of 6 runs) result")
    assert r.current is None and r.baseline == 1


def test_rate_of_a_level_where_nothing_finished_is_not_measured(tmp_path):
    base = noisy_doc(9)
    cur = copy.deepcopy(base)
    for lv in cur["levels"]:
        lv["throughput"]["output_tokens_per_s"] = None
    r = row(run(base, cur), "c=1", "throughput")
    assert (r.verdict, r.fails) == ("not measured", False)  # optional by default
    rules = tmp_path / "rules.toml"
    rules.write_text("[rules.throughput]\nrequired = true\n")
    r = row(run(base, cur, rules_file=rules), "c=1", "throughput")
    assert (r.verdict, r.fails) == ("not measured", True)
    assert r.note == ("not measured in the current result: no request finished in the "
                      "measured window")


def test_optional_rows_keep_their_verdicts():
    result = run(remote_doc(10), remote_doc(10))
    for metric, verdict in OPTIONAL.items():
        r = row(result, "c=1", metric)
        assert (r.verdict, r.required, r.fails) == (verdict, False, False)


def test_v1_and_v2_of_the_same_run_gate_as_equal():
    """But for blocks saved by sharing, which v1 never measured (optional: not failing)."""
    def rows(result):
        return [r for r in result.rows if r.metric != "kv_saved_blocks"]

    for d in (noisy_doc(11), remote_doc(12), remote_doc(13, scraped=True)):
        same = run(d, copy.deepcopy(d))
        for base, cur in ((as_v1(d), d), (d, as_v1(d)), (as_v1(d), as_v1(d))):
            result = run(base, cur)
            assert rows(result) == rows(same)
            saved = row(result, "c=1", "kv_saved_blocks")
            assert saved.verdict == "not measured" and not saved.fails
    old = run(as_v1(remote_doc(14)), as_v1(remote_doc(14)))  # v1 wrote zeros: not "ok"
    assert row(old, "c=1", "kv_waste_slots").verdict == "not measured"


def test_open_loop_remote_counts_are_not_measured_too():
    lv = remote(noisy_doc(15, concurrencies=(1,), repeats=1)["levels"][0])
    lv |= {"concurrency": None, "rate": 2.0}
    d = doc([lv], device_class="remote:test")
    r = row(run(d, copy.deepcopy(d)), "2/s", "kv_peak_blocks")
    assert (r.verdict, r.fails) == ("not measured", True)


@pytest.mark.parametrize("name", ["v1-local", "v1-remote"])
def test_real_v1_files_gate_as_their_v2_rewrites(tmp_path, name):
    v1 = REAL_V1 / f"{name}.json"  # written by perfkit sweep before schema 2
    v2 = tmp_path / f"{name}-v2.json"
    v2.write_text(result_json(load_result(v1)), encoding="utf-8")
    same = gate_files(v1, v1, allow_inconclusive=True)  # one run a side: undecidable
    for base, cur in ((v1, v2), (v2, v1), (v2, v2)):
        assert gate_files(base, cur, allow_inconclusive=True).rows == same.rows
    failing = {r.metric for r in same.failures}
    assert failing == (REQUIRED_UNSCRAPED if name == "v1-remote" else set())


def test_a_side_that_ran_long_alone_after_its_lockstep_peer_is_noted():
    base = noisy_doc(12)
    cur = copy.deepcopy(base)
    cur["lockstep"] = {"quantum_s": 0.02, "handoffs": 10, "paused_s": 1.0, "alone_s": 30.0}
    base["lockstep"] = {"quantum_s": 0.02, "handoffs": 10, "paused_s": 1.0, "alone_s": 0.2}
    notes = run(base, cur).notes
    assert any(n.startswith("the current sweep ran 30.0 s alone") for n in notes)
    assert not any(n.startswith("the baseline sweep ran") for n in notes)
