"""The virtual clock is exact: steps priced by a known model give hand-computed latencies.

EXACT (predict_fixtures): 1 ms a step + 10 µs a prompt token + 100 µs a decoding sequence +
1 ns a context token. A 32-token prompt with 4 output tokens, alone:
    step 1: prefill 32, context 32           -> 1.320032 ms (its first token)
    steps 2-4: 1 decode, context 33, 34, 35  -> 1.100033, 1.100034, 1.100035 ms
"""

from __future__ import annotations

import pytest
from predict_fixtures import EXACT, calibration, fixed_profile

from perfkit.client_script import ClientScript
from perfkit.engine.engine import Engine
from perfkit.engine.executor import null_executor
from perfkit.predict.levels import predict_level, predict_profile
from perfkit.predict.loads import closed_loop, open_loop
from perfkit.predict.virtual_clock import VirtualClock
from perfkit.result.level import LoadPoint
from perfkit.sweep.plan import plan_from_profile
from perfkit.workload import RequestSpec

PREFILL_32 = 1e-3 + 32e-5 + 32e-9
DECODE_MEAN = 1e-3 + 1e-4 + 34e-9  # steps 2-4 of one request


def _spec(i: int, **kw) -> RequestSpec:
    return RequestSpec(i, tuple(range(1 + 40 * i, 33 + 40 * i)), 4, **kw)


def test_closed_loop_one_client_matches_the_hand_computed_times():
    profile = fixed_profile()
    pred = predict_profile(profile, calibration(profile), "cal.json", [])
    (level,) = pred.levels
    lat = level.latency
    assert lat.ttft.count == 3
    assert lat.ttft.min == pytest.approx(PREFILL_32, rel=1e-12)
    assert lat.ttft.max == pytest.approx(PREFILL_32, rel=1e-12)
    assert lat.tpot.p50 == pytest.approx(DECODE_MEAN, rel=1e-12)
    assert lat.e2e.p50 == pytest.approx(PREFILL_32 + 3 * DECODE_MEAN, rel=1e-12)
    assert level.counts.steps == 12 and level.counts.output_tokens == 12
    assert level.throughput.window_s == pytest.approx(3 * (PREFILL_32 + 3 * DECODE_MEAN))
    assert level.busy_share == pytest.approx(1.0)
    assert level.goodput.share == 1.0


def test_two_clients_share_the_prefill_step():
    profile = fixed_profile(32, 4, "sweep.concurrency=[2]", "workload.num_requests=4")
    plan = plan_from_profile(profile, samplers=False)
    engine = Engine(profile, executor=null_executor())
    level = predict_level(engine, calibration(profile), profile, plan, LoadPoint(concurrency=2))
    both = 1e-3 + 64e-5 + 64e-9  # one step prefills both prompts
    assert level.latency.ttft.min == pytest.approx(both, rel=1e-12)
    assert level.latency.ttft.max == pytest.approx(both, rel=1e-12)
    # then both decode together: 1 ms + 2 x 100 µs + (2 x 34) ns on average
    assert level.latency.tpot.p50 == pytest.approx(1e-3 + 2e-4 + 68e-9, rel=1e-12)


def test_warm_up_runs_first_and_is_left_out():
    profile = fixed_profile(32, 4, "sweep.warmup=2")
    (level,) = predict_profile(profile, calibration(profile), "cal.json", []).levels
    assert level.counts.requests == 3 and level.counts.warmup_excluded == 2
    assert level.counts.steps == 12  # the measured phase's only


def test_open_loop_arrivals_are_the_specs_offsets():
    profile = fixed_profile()
    engine = Engine(profile, executor=null_executor())
    clock = VirtualClock(engine, EXACT)
    specs = [_spec(i, arrival_s=0.5 * i) for i in range(3)]
    records = sorted(open_loop(clock, ClientScript(specs, 0, None)), key=lambda r: r.request_id)
    assert [r.arrival_s for r in records] == [0.0, 0.5, 1.0]
    for r in records:  # an idle engine: each request alone, at its arrival
        assert r.ttft_s == pytest.approx(PREFILL_32, rel=1e-9)
        assert r.scheduled_s == r.arrival_s


def test_a_later_turn_follows_its_think_time():
    profile = fixed_profile()
    engine = Engine(profile, executor=null_executor())
    clock = VirtualClock(engine, EXACT)
    specs = [_spec(0, conversation=7, turn=0), _spec(1, conversation=7, turn=1, think_s=0.25)]
    first, second = closed_loop(clock, ClientScript(specs, 0, 1))
    assert first.finish_s == pytest.approx(PREFILL_32 + 3 * DECODE_MEAN, rel=1e-12)
    assert second.arrival_s == pytest.approx(first.finish_s + 0.25, rel=1e-12)


def test_admission_rejections_end_at_once():
    profile = fixed_profile(32, 4, "engine.max_model_len=40", "workload.prompt_len.max=64",
                            "workload.prompt_len.mean=48")
    (level,) = predict_profile(profile, calibration(profile), "cal.json", []).levels
    assert level.counts.rejected == {"prompt_too_long": 3}
    assert level.latency.ttft.count == 0 and level.counts.steps == 0
