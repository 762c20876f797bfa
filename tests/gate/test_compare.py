"""The gate's comparisons: the issue's proofs, counts, missing things, few repeats."""

import copy

import pytest
from gate_docs import doc, level, noisy_doc, row, run

from perfkit.gate.inputs import decode, repeat_samples
from perfkit.summary.latency import distribution

ALARMS = {"regression", "improved", "changed", "missing", "not measured"}


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
    # A well-formed result always has its sections (a gone one is malformed: tests in
    # test_rules); what can go missing is a sampler's output: the CPU sampler off.
    base = noisy_doc(9)
    cur = copy.deepcopy(base)
    for lv in cur["levels"]:
        lv["cpu"] |= {"available": False, "reason": "samplers off"}
    r = row(run(base, cur), "c=1", "system_share")
    assert (r.verdict, r.fails) == ("missing", True)
    assert "current" in r.note
    assert r.note == "no system_share in the current result (cpu: samplers off)"


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
    d = decode(noisy_doc(14), "d.json")
    for lv in d.levels:
        samples = repeat_samples(lv.requests)
        for k in ("ttft", "tpot", "e2e"):
            assert distribution(samples[f"{k}_s"]) == getattr(lv.latency, k)


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
