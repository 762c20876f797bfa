"""The knee decided from intervals: sure, undecided, or none."""

from __future__ import annotations

from perfkit.summary.intervals import latency_interval, supported_quantile
from perfkit.summary.knee_rule import LevelPoint, find_knee


def pt(x, t, half=0.0):
    return LevelPoint(x, t, throughput_lo=t * (1 - half), throughput_hi=t * (1 + half))


def test_sure_plateau_is_a_knee():
    knee = find_knee([pt(1, 100, 0.01), pt(2, 195, 0.01), pt(4, 200, 0.01)])
    assert (knee.level, knee.reason) == (4, "throughput-plateau")


def test_plateau_within_the_noise_is_undecided_and_says_what_would_decide():
    knee = find_knee([pt(1, 100, 0.2), pt(2, 195, 0.2), pt(4, 200, 0.2)])
    assert (knee.level, knee.reason) == (None, "undecided")
    assert "--repeats 3" in knee.sentence


def test_latency_needs_the_whole_interval_superlinear():
    noisy = [LevelPoint(1, 100, 0.01, ttft_lo=0.001, ttft_hi=0.05),
             LevelPoint(2, 200, 0.05, ttft_lo=0.01, ttft_hi=0.1)]
    assert find_knee(noisy).reason == "undecided"


def test_quantile_follows_the_sample_count():
    assert supported_quantile(30) == 0.5
    assert supported_quantile(100) == 0.9
    assert supported_quantile(1000) == 0.99
    assert supported_quantile(10) is None


def test_degenerate_latency_is_not_judged():
    assert latency_interval([0.0] * 50, 0.5) is None
    i = latency_interval([0.01 * (1 + k % 5) for k in range(50)], 0.5)
    assert i is not None and i.value is not None and i.low <= i.value <= i.high
