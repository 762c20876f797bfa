import copy
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from gate_docs import doc, level, noisy_doc

from perfkit.config.schema import GateRule
from perfkit.errors import PerfkitError
from perfkit.gate import render
from perfkit.gate.compare import GateResult, decide, evaluate
from perfkit.gate.inputs import repeat_samples
from perfkit.gate.rules import DEFAULT_RULES, METRICS
from perfkit.gate.stats import (
    Interval,
    bootstrap_percentile,
    mean_delta,
    min_samples,
    percentile_delta,
)
from perfkit.summary.latency import distribution

PATHS = (Path("base.json"), Path("cur.json"))
ALARMS = {"regression", "improved", "changed", "missing"}


def run(base: dict, cur: dict, **kw) -> GateResult:
    return evaluate(base, cur, PATHS, **kw)


def row(result: GateResult, level: str, metric: str):
    (found,) = [r for r in result.rows if r.level == level and r.metric == metric]
    return found


# ---- the proofs ----------------------------------------------------------------


def test_identical_inputs_pass():
    d = noisy_doc(1)
    result = run(d, copy.deepcopy(d))
    assert result.verdict == "pass"
    assert not result.failures
    assert {r.verdict for r in result.rows} <= {"ok", "within noise", "missing",
                                                "too few samples"}
    assert {r.metric for r in result.rows if r.verdict == "missing"} == {"gpu_peak_bytes"}


def test_thirty_noise_pairs_raise_no_alarm():
    alarms = []
    for i in range(30):  # 3 repeats x 200 requests: p99 gets an interval too (>= 500)
        result = run(noisy_doc(2 * i, n=200), noisy_doc(2 * i + 1, n=200))
        assert result.verdict == "pass", [r for r in result.failures]
        assert all(r.interval is not None for r in result.rows if r.kind != "count"
                   and r.metric != "gpu_peak_bytes")
        alarms += [(i, r.level, r.metric, r.verdict) for r in result.rows
                   if r.verdict in ALARMS and r.metric != "gpu_peak_bytes"]
    assert alarms == []  # not even an "improved" from noise


@pytest.mark.parametrize("which", ["ttft", "tpot"])
@pytest.mark.parametrize("seed", range(5))
def test_planted_20pct_slowdown_is_detected(which, seed):
    base = noisy_doc(1000 + 2 * seed, n=300)
    cur = noisy_doc(1001 + 2 * seed, n=300, **{f"{which}_factor": 1.2})
    result = run(base, cur)
    assert result.verdict == "regression"
    hits = [r for r in result.failures if r.metric == f"{which}_p50"]
    assert hits, [(r.level, r.metric, r.verdict) for r in result.rows]
    for r in hits:  # the whole interval lies beyond the band
        assert r.tolerance < r.interval.low < r.delta < r.interval.high
    other = "tpot" if which == "ttft" else "ttft"
    assert not [r for r in result.failures if r.metric.startswith(other)]


def test_planted_speedup_is_improved_not_failing():
    result = run(noisy_doc(3, n=300), noisy_doc(4, n=300, tpot_factor=0.7))
    assert result.verdict == "pass"
    assert row(result, "c=1", "tpot_p50").verdict == "improved"


def test_changed_deterministic_count_is_detected_exactly():
    base = noisy_doc(5)
    cur = copy.deepcopy(base)
    cur["levels"][1]["counts"]["output_tokens"] += 1  # one token, one repeat of c=4
    result = run(base, cur)
    assert result.verdict == "regression"
    (fail,) = result.failures
    assert (fail.level, fail.metric, fail.verdict) == ("c=4", "output_tokens", "changed")
    assert "current repeats disagree" in fail.note


def test_count_change_in_every_repeat_fails_whichever_way_it_goes():
    base = noisy_doc(6)
    cur = copy.deepcopy(base)
    for lv in cur["levels"]:
        lv["counts"]["preemptions"] = 0  # fewer preemptions: better, but behaviour changed
    r = row(run(base, cur), "c=4", "preemptions")
    assert (r.verdict, r.fails, r.delta) == ("changed", True, -1.0)
    assert r.note.startswith("better")
    assert row(run(base, cur), "c=1", "preemptions").verdict == "ok"  # 0 == 0


def test_optional_count_change_is_shown_but_passes():
    base = noisy_doc(7)
    cur = copy.deepcopy(base)
    for lv in cur["levels"]:
        lv["counts"]["steps"] += 5
    result = run(base, cur)
    assert result.verdict == "pass"
    assert row(result, "c=1", "steps").verdict == "changed"


def test_count_tolerance_from_rule():
    base = noisy_doc(8)
    cur = copy.deepcopy(base)
    for lv in cur["levels"]:
        lv["counts"]["output_tokens"] += 10  # 3200 -> 3210: 0.3%
    assert run(base, cur).verdict == "regression"
    rules = {"output_tokens": {"rel_tol": 0.01}}
    assert run(doc(base["levels"], gate_rules=rules), cur).verdict == "pass"


# ---- missing things ----------------------------------------------------------------------


def test_required_metric_missing_from_current_fails_with_reason():
    base = noisy_doc(9)
    cur = copy.deepcopy(base)
    for lv in cur["levels"]:
        del lv["throughput"]
    r = row(run(base, cur), "c=1", "throughput")
    assert (r.verdict, r.fails) == ("missing", True)
    assert "current" in r.note


def test_missing_timing_samples_fail():
    base = noisy_doc(10)
    cur = copy.deepcopy(base)
    for lv in cur["levels"]:
        for req in lv["requests"]:
            req["tpot_s"] = None
    result = run(base, cur)
    assert row(result, "c=4", "tpot_p99").fails
    assert not row(result, "c=4", "ttft_p99").fails


def test_missing_level_fails_and_extra_level_is_noted():
    base = noisy_doc(11, concurrencies=(1, 4))
    cur = noisy_doc(12, concurrencies=(1, 8))
    result = run(base, cur)
    assert row(result, "c=4", "ttft_p50").verdict == "missing"
    assert "c=4 is not in the current result" in row(result, "c=4", "ttft_p50").note
    assert any("c=8" in n for n in result.notes)


def test_warmup_samples_are_excluded():
    base = noisy_doc(13)
    cur = copy.deepcopy(base)
    for lv in cur["levels"]:
        for req in lv["requests"]:
            if req["warmup"]:
                req["tpot_s"] *= 100  # flagged: gone (and still done before any arrival)
    assert row(run(base, cur), "c=1", "tpot_p50").delta == 0
    for lv in cur["levels"]:
        warm = lv["requests"][0]
        warm["e2e_s"] += 0.5  # ends late: measured requests arriving before it are cold
    r = row(run(base, cur), "c=1", "tpot_p50")
    assert r.note.startswith("n=300 vs 150 samples")


def test_samples_match_the_level_summaries():
    d = noisy_doc(14)
    for lv in d["levels"]:
        samples = repeat_samples(lv["requests"])
        for k in ("ttft", "tpot", "e2e"):
            assert distribution(samples[f"{k}_s"]).to_dict() == lv["latency"][k]


# ---- few repeats ----------------------------------------------------------------------


def test_single_repeat_needs_a_large_change_for_rates():
    base = noisy_doc(15, repeats=1)
    cur = copy.deepcopy(base)
    for lv in cur["levels"]:
        lv["throughput"]["output_tokens_per_s"] *= 0.8  # -20%: under 3 x 10%
    result = run(base, cur)
    r = row(result, "c=1", "throughput")
    assert (r.verdict, r.interval) == ("within noise", None)
    assert "needs >= 3 repeats" in r.note and any("repeat(s)" in n for n in result.notes)
    for lv in cur["levels"]:
        lv["throughput"]["output_tokens_per_s"] *= 0.5  # -60%
    assert row(run(base, cur), "c=1", "throughput").verdict == "regression"


def test_single_repeat_widens_timing_band():
    base, cur = noisy_doc(16, repeats=1, n=300), noisy_doc(17, repeats=1, n=300, tpot_factor=1.2)
    r = row(run(base, cur), "c=1", "tpot_p50")
    assert r.verdict == "within noise" and "widened 3x" in r.note
    cur = noisy_doc(17, repeats=1, n=300, tpot_factor=2.0)
    assert row(run(base, cur), "c=1", "tpot_p50").verdict == "regression"


def test_merged_single_repeat_results_count_as_repeats():
    """Interleaved A/B in CI: three --repeats 1 sweeps a side, levels concatenated."""
    def merged(seed: int, **kw) -> dict:
        parts = [noisy_doc(seed + 10 * i, repeats=1, n=300, **kw) for i in range(3)]
        return parts[0] | {"levels": [lv for p in parts for lv in p["levels"]]}

    result = run(merged(50), merged(51, tpot_factor=1.2))
    assert not any("repeat(s)" in n for n in result.notes)
    r = row(result, "c=1", "tpot_p50")
    assert r.verdict == "regression" and "widened" not in r.note


def test_p99_without_enough_samples_never_alarms():
    base, cur = noisy_doc(18, n=50), noisy_doc(19, n=50, ttft_factor=3.0)
    result = run(base, cur)
    r = row(result, "c=1", "ttft_p99")  # 150 samples < 500
    assert (r.verdict, r.interval, r.fails) == ("too few samples", None, False)
    assert "needs >= 500 samples" in r.note
    assert any("too few samples to decide" in n for n in result.notes)


def test_open_loop_scheduled_counts_are_treated_as_noisy():
    levels = [level([0.05] * 20, [0.01] * 20, None, r, rate=2.0) for r in range(3)]
    cur = copy.deepcopy(levels)
    for i, lv in enumerate(cur):
        lv["counts"]["steps"] += i  # a wobble, not a change
        lv["kv"]["peak_blocks_used"] += i % 2
    result = run(doc(levels), doc(cur))
    assert row(result, "2/s", "steps").verdict == "within noise"
    assert "open-loop" in row(result, "2/s", "kv_peak_blocks").note
    assert result.verdict == "pass"


# ---- comparability and rules --------------------------------------------------------------


def test_device_class_mismatch_is_refused_unless_allowed():
    base = noisy_doc(20)
    cur = noisy_doc(21, device_class="cuda:NVIDIA H200")
    with pytest.raises(PerfkitError, match=r"cpu:Test CPU.*cuda:NVIDIA H200.*--allow-mismatch"):
        run(base, cur)
    result = run(base, cur, allow_mismatch=True)
    assert any("device class differs" in n for n in result.notes)


def test_profile_mismatch_names_the_differing_key():
    base = noisy_doc(22)
    cur = noisy_doc(23, sha256="b" * 64, resolved={"name": "test", "engine": {"block_size": 32}})
    with pytest.raises(PerfkitError, match=re.escape("engine.block_size: 16 vs 32")):
        run(base, cur)


def test_profiles_differing_only_in_gate_rules_compare():
    base = noisy_doc(24)
    cur = noisy_doc(25, sha256="b" * 64, gate_rules={"ttft_p50": {"rel_tol": 0.5}})
    result = run(base, cur)
    assert any("differ only in [gate]" in n for n in result.notes)


def test_profile_rules_override_defaults_field_by_field():
    base = noisy_doc(26, n=300, gate_rules={"ttft_p50": {"rel_tol": 0.5}})
    cur = noisy_doc(27, n=300, ttft_factor=1.2)
    r = row(run(base, cur), "c=1", "ttft_p50")
    assert r.verdict == "within noise" and r.tolerance == pytest.approx(0.5 * r.baseline)


def test_profile_rule_flipping_direction_warns():
    base = noisy_doc(28, gate_rules={"throughput": {"direction": "lower", "rel_tol": 0.1}})
    assert any("opposite" in n and "throughput" in n for n in run(base, noisy_doc(29)).notes)


def test_unknown_metric_in_profile_rules_is_refused():
    with pytest.raises(PerfkitError, match="did you mean 'ttft_p50'"):
        run(noisy_doc(30, gate_rules={"ttft_p5O": {}}), noisy_doc(31))


@pytest.mark.parametrize(("text", "message"), [
    ("[rules.tpot_p95]\nrel_tol = 0.1\n", "unknown metric 'tpot_p95'; did you mean 'tpot_p99'"),
    ("[rules.ttft_p50]\nrel_tol = 'ten'\n", "rules.ttft_p50.rel_tol: expected a number"),
    ("[rules.ttft_p50]\ndirection = 'down'\n", "expected 'lower' or 'higher'"),
    ("[rules.ttft_p50]\nrel_tol = -1\n", "rules.ttft_p50.rel_tol"),
    ("[rule.ttft_p50]\nrel_tol = 0.1\n", "unknown key 'rule'; did you mean 'rules'"),
    ("[rules.ttft_p50\n", "TOML syntax error"),
])
def test_bad_rules_file_is_refused_clearly(tmp_path, text, message):
    path = tmp_path / "rules.toml"
    path.write_text(text)
    with pytest.raises(PerfkitError, match="--rules .*" + re.escape(message)):
        run(noisy_doc(32), noisy_doc(33), rules_file=path)


def test_rules_file_overrides_profile_and_defaults(tmp_path):
    path = tmp_path / "rules.toml"
    path.write_text("[rules.output_tokens]\nrequired = false\n[rules.throughput]\nabs_tol = 1e9\n")
    base = noisy_doc(34)
    cur = copy.deepcopy(base)
    for lv in cur["levels"]:
        lv["counts"]["output_tokens"] += 1
    result = run(base, cur, rules_file=path)
    assert result.verdict == "pass"
    r = row(result, "c=1", "throughput")
    assert r.direction == "higher" and r.tolerance == 1e9  # direction kept from the default


def test_malformed_documents_are_refused():
    base = noisy_doc(35)
    for breakage in ("levels", "environment", "requests"):
        cur = copy.deepcopy(base)
        if breakage == "requests":
            cur["levels"][0]["requests"] = [{"ttft_s": 1.0}]
        else:
            del cur[breakage]
        with pytest.raises(PerfkitError, match=re.escape("cur.json: malformed")):
            run(base, cur)


def test_every_metric_has_a_default_rule():
    assert set(DEFAULT_RULES) == set(METRICS)


# ---- statistics ---------------------------------------------------------------------------


def test_bootstrap_percentile_matches_plain_resampling():
    x = np.sort(np.random.default_rng(1).lognormal(0, 0.5, 60))
    fast = bootstrap_percentile(x, 90, np.random.default_rng(2), 40000)
    slow = np.percentile(x[np.random.default_rng(3).integers(0, 60, (8000, 60))], 90, axis=1)
    assert np.percentile(fast, [5, 50, 95]) == pytest.approx(np.percentile(slow, [5, 50, 95]),
                                                           rel=0.02)


def test_percentile_interval_is_seeded_and_needs_tail_samples():
    a, b = [[float(i) for i in range(100)]], [[float(i) + 5 for i in range(100)]]
    first = percentile_delta(a, b, 50, "k")
    assert first == percentile_delta(a, b, 50, "k")
    assert first.low < 5 < first.high
    assert percentile_delta(a, b, 99, "k") is None  # 100 < 500
    assert (min_samples(50), min_samples(90), min_samples(99)) == (10, 50, 500)


def test_welch_interval_known_values():
    interval = mean_delta([10.0, 11.0, 12.0], [13.0, 14.0, 15.0])
    half = 2.776 * (2 / 3) ** 0.5  # df 4
    assert (interval.low, interval.high) == pytest.approx((3 - half, 3 + half))
    assert mean_delta([1.0], [2.0, 3.0]) is None
    assert mean_delta([5.0, 5.0], [6.0, 6.0]) == Interval(1.0, 1.0)


@pytest.mark.parametrize(("direction", "interval", "verdict"), [
    ("lower", (0.11, 0.3), "regression"), ("lower", (0.05, 0.3), "within noise"),
    ("lower", (-0.3, -0.11), "improved"), ("higher", (-0.3, -0.11), "regression"),
    ("higher", (0.11, 0.2), "improved"), ("lower", (-0.05, 0.05), "within noise"),
])
def test_decide_needs_the_whole_interval_beyond_the_band(direction, interval, verdict):
    rule = GateRule(direction=direction)
    assert decide(0.2, Interval(*interval), rule, 0.1) == verdict


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
    assert (data["schema"], data["verdict"], data["failures"]) == ("perfkit.gate/1", "pass", 0)
    first = data["rows"][0]
    assert {"level", "metric", "baseline", "current", "interval", "verdict", "fails"} <= set(first)


def test_markdown_stays_under_one_mib():
    base = noisy_doc(43, concurrencies=(1,), repeats=1, n=10)
    result = run(base, copy.deepcopy(base))
    result.rows = result.rows * 20000  # ~380k rows
    text = render.markdown(result)
    assert len(text.encode()) < 1_048_576
    assert "rows left out" in text
    small = render.markdown(run(base, copy.deepcopy(base)))
    assert small.startswith("## ✅ perfkit gate: pass") and "rows left out" not in small
