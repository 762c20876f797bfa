"""The gate's comparisons: the issue's proofs, counts, missing things, few repeats."""

import copy

import pytest
from gate_fixtures import doc, level, noisy_doc, row, run

from perfkit.gate.inputs import decode, repeat_samples
from perfkit.summary.latency import distribution

ALARMS = {"regression", "improved", "changed", "missing", "not measured"}


# ---- the proofs ----------------------------------------------------------------


TIMINGS = ("ttft_s", "tpot_s", "e2e_s")


def scale_request(req: dict, factor: float) -> None:
    req |= {k: req[k] * factor for k in TIMINGS}


def scale_timings(result: dict, factor: float) -> None:
    """Every request's TTFT, TPOT and E2E in a result document times `factor`."""
    for lv in result["levels"]:
        for req in lv["requests"]:
            scale_request(req, factor)


def test_identical_inputs_pass():
    d = noisy_doc(1)
    result = run(d, copy.deepcopy(d))
    assert result.verdict == "pass"
    assert not result.failures
    assert {r.verdict for r in result.rows} <= {"ok", "missing"}
    assert {r.metric for r in result.rows if r.verdict == "missing"} == {"gpu_peak_bytes"}


def test_thirty_noise_pairs_raise_no_alarm():
    alarms = []
    for i in range(30):  # 6 paired runs x 100 requests
        result = run(noisy_doc(2 * i), noisy_doc(2 * i + 1))
        assert result.verdict == "pass", [r for r in result.failures]
        assert all(r.interval is not None for r in result.rows if r.kind != "count"
                   and r.metric != "gpu_peak_bytes")
        alarms += [(i, r.level, r.metric, r.verdict) for r in result.rows
                   if r.verdict in ALARMS and r.metric != "gpu_peak_bytes"]
    assert alarms == []  # not even an "improved" from noise


# Beyond each median's default band: TPOT 5%, TTFT 10% (one prefill step: noisier).
@pytest.mark.parametrize(("which", "factor"), [("ttft", 1.2), ("tpot", 1.1)])
@pytest.mark.parametrize("seed", range(3))
def test_planted_slowdown_beyond_the_band_is_detected(which, factor, seed):
    base = noisy_doc(1000 + 2 * seed)
    cur = noisy_doc(1001 + 2 * seed, **{f"{which}_factor": factor})
    result = run(base, cur)
    assert result.verdict == "regression"
    hits = [r for r in result.failures if r.metric == f"{which}_p50"]
    assert len(hits) == 2, [(r.level, r.metric, r.verdict) for r in result.rows]
    for r in hits:  # the whole interval lies beyond the band, on the log scale
        assert r.verdict == "regression" and r.scale == "log"
        assert r.tolerance < r.interval.low < r.change < r.interval.high
        assert r.detectable is not None and r.tolerance < r.detectable < r.change
    other = "tpot" if which == "ttft" else "ttft"
    assert not [r for r in result.failures if r.metric.startswith(other)]


def test_uniform_10pct_on_every_sample_is_caught():
    base = noisy_doc(30)
    cur = copy.deepcopy(base)
    scale_timings(cur, 1.1)
    result = run(base, cur)
    for metric in ("tpot_p50", "e2e_p50"):  # 5% bands: +10% is beyond them
        assert row(result, "c=4", metric).verdict == "regression"
    ttft = row(result, "c=4", "ttft_p50")  # +10% sits on TTFT's 10% band: never "ok"
    assert ttft.verdict in {"regression", "inconclusive"} and ttft.fails
    assert result.verdict == "regression"


def test_ten_times_slower_tail_never_passes():
    base = noisy_doc(31)
    cur = copy.deepcopy(base)
    for lv in cur["levels"]:
        measured = [r for r in lv["requests"] if not r["warmup"]]
        for req in sorted(measured, key=lambda r: r["e2e_s"])[-2:]:
            scale_request(req, 10)
    r = row(run(base, cur), "c=1", "e2e_p99")
    assert r.fails and r.verdict in ("regression", "inconclusive")


def test_the_slowest_request_ten_times_slower_never_passes():
    # the case: one request a run, which p99 (the second-slowest of 100) cannot see
    base = noisy_doc(32)
    cur = copy.deepcopy(base)
    for lv in cur["levels"]:
        measured = [r for r in lv["requests"] if not r["warmup"]]
        scale_request(max(measured, key=lambda r: r["e2e_s"]), 10)
    result = run(base, cur)
    assert row(result, "c=1", "e2e_p99").verdict == "ok"
    r = row(result, "c=1", "e2e_max")
    assert r.verdict == "regression" and r.interval.low > 2.0  # beyond the +200% band
    assert result.verdict == "regression"


def test_one_runs_slowest_request_ten_times_slower_is_inconclusive_and_fails():
    base = noisy_doc(33)
    cur = copy.deepcopy(base)
    first = cur["levels"][0]  # c=1, run 1 only
    measured = [r for r in first["requests"] if not r["warmup"]]
    scale_request(max(measured, key=lambda r: r["e2e_s"]), 10)
    r = row(run(base, cur), "c=1", "e2e_max")
    assert r.verdict == "inconclusive" and r.fails


def test_same_code_max_rows_pass_within_their_band():
    for i in range(5):
        result = run(noisy_doc(200 + 2 * i), noisy_doc(201 + 2 * i))
        assert all(r.verdict == "ok" for r in result.rows if r.metric.endswith("_max"))


def test_max_with_too_few_samples_per_run_is_inconclusive():
    r = row(run(noisy_doc(20, n=30), noisy_doc(21, n=30)), "c=1", "tpot_max")
    assert r.verdict == "inconclusive" and "max needs >= 50 samples per run" in r.note


def test_planted_speedup_is_improved_not_failing():
    result = run(noisy_doc(3), noisy_doc(4, tpot_factor=0.7))
    assert result.verdict == "pass"
    assert row(result, "c=1", "tpot_p50").verdict == "improved"


def test_changed_deterministic_count_is_detected_exactly():
    base = noisy_doc(5)
    cur = copy.deepcopy(base)
    cur["levels"][1]["counts"]["output_tokens"] += 1  # one token, one run of c=4
    result = run(base, cur)
    assert result.verdict == "regression"
    (fail,) = result.failures
    assert (fail.level, fail.metric, fail.verdict) == ("c=4", "output_tokens", "changed")
    assert "current runs disagree" in fail.note


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
    assert (r.verdict, r.pairs) == ("ok", 6)  # fewer samples per run, same pairs


def test_samples_match_the_level_summaries():
    d = decode(noisy_doc(14), "d.json")
    for lv in d.levels:
        samples = repeat_samples(lv.requests)
        for k in ("ttft", "tpot", "e2e"):
            assert distribution(samples[f"{k}_s"]) == getattr(lv.latency, k)


# ---- few runs ------------------------------------------------------------------------


def test_single_run_a_side_is_inconclusive_and_fails():
    base, cur = noisy_doc(15, repeats=1), noisy_doc(16, repeats=1)
    result = run(base, cur)
    r = row(result, "c=1", "tpot_p50")
    assert (r.verdict, r.interval, r.fails) == ("inconclusive", None, True)
    assert "needs >= 3 paired runs" in r.note
    assert any("1 paired run(s)" in n for n in result.notes)
    allowed = run(base, cur, allow_inconclusive=True)
    assert allowed.verdict == "pass" and row(allowed, "c=1", "tpot_p50").allowed


def test_runs_pair_in_order():
    result = run(noisy_doc(50), noisy_doc(51, tpot_factor=1.2))
    r = row(result, "c=1", "tpot_p50")
    assert r.verdict == "regression" and r.pairs == 6 and r.note.startswith("6 paired runs")


def test_p99_with_too_few_samples_per_run_is_inconclusive():
    base, cur = noisy_doc(18, n=30), noisy_doc(19, n=30)
    result = run(base, cur)
    r = row(result, "c=1", "ttft_p99")  # 30 samples a run < 50
    assert (r.verdict, r.interval, r.fails) == ("inconclusive", None, True)
    assert "p99 needs >= 50 samples per run" in r.note
    assert any("inconclusive" in n for n in result.notes)


def test_open_loop_scheduled_counts_are_treated_as_noisy():
    levels = [level([0.05] * 20, [0.01] * 20, None, r, rate=2.0) for r in range(3)]
    cur = copy.deepcopy(levels)
    for i, lv in enumerate(cur):
        lv["counts"]["steps"] += i  # a wobble, not a change
        lv["kv"]["peak_blocks_used"] += i % 2
    result = run(doc(levels), doc(cur))
    assert row(result, "2/s", "steps").verdict in ("ok", "inconclusive")
    assert "open-loop" in row(result, "2/s", "kv_peak_blocks").note
    assert not row(result, "2/s", "kv_peak_blocks").fails or \
        row(result, "2/s", "kv_peak_blocks").verdict == "inconclusive"


def test_p50_rows_pair_matched_requests_when_runs_ran_the_same_requests():
    base = noisy_doc(40)
    cur = copy.deepcopy(base)
    scale_timings(cur, 1.08)
    r = row(run(base, cur), "c=4", "tpot_p50")
    assert "matched requests" in r.note
    assert r.verdict == "regression" and abs(r.change - 0.08) < 1e-9  # every request +8%
    for lv in cur["levels"]:  # other requests on the current side: p50s of runs paired
        for req in lv["requests"]:
            req["id"] += 10_000
    r = row(run(base, cur), "c=4", "tpot_p50")
    assert "matched requests" not in r.note and r.pairs == 6


def test_a_profile_key_a_later_perfkit_added_compares_at_its_default():
    from perfkit.gate.inputs import profile_diffs

    old = {"workload": {"num_requests": 48}}
    assert profile_diffs(old, {"workload": {"num_requests": 48, "client_delay_steps": 0}}) == []
    diffs = profile_diffs(old, {"workload": {"num_requests": 48, "client_delay_steps": 5}})
    assert diffs == ["workload.client_delay_steps: '(unset)' vs 5"]
    assert profile_diffs(old, {"workload": {"num_requests": 48, "bogus": 0}}) != []
