import random
from collections.abc import Callable

import pytest

from perfkit.result.codec import to_json
from perfkit.summary.knee_rule import LevelPoint, find_knee

DOUBLINGS = [1, 2, 4, 8, 16, 32, 64, 128, 256]
FINE = list(range(1, 17))


def curve(xs: list[int], tput: Callable[[float], float], seed: int | None = None,
          ttft: Callable[[float], float] | None = None) -> list[LevelPoint]:
    """Points on a throughput curve, with seeded multiplicative noise of +/-3% if seed is set."""
    rng = random.Random(seed)

    def noisy(value: float) -> float:
        return value if seed is None else value * rng.uniform(0.97, 1.03)

    return [LevelPoint(x, noisy(tput(x)), noisy(ttft(x)) if ttft else None) for x in xs]


def saturating(x: float) -> float:
    return 50 * x / (1 + x / 8)


def hard_saturating(x: float) -> float:
    return 50 * min(x, 8)


def linear(x: float) -> float:
    return 50 * x


def test_saturating_curve_knee_where_gain_drops_under_ten_percent() -> None:
    # x/(1+x/8) gains 8 / (8 + 2x) per doubling from x: under 10% once x > 36, so 64 -> 128.
    knee = find_knee(curve(DOUBLINGS, saturating))
    assert knee.level == 128
    assert knee.reason == "throughput-plateau"
    assert saturating(128) / 400 > 0.9  # past 90% of the asymptote
    assert knee.throughput_gain_per_doubling[1] == pytest.approx(0.8)
    assert knee.sentence == (
        "Throughput stops growing at concurrency 128: 376 tok/s, +6% from 64 -> 128 "
        "(under 10% per doubling)."
    )


@pytest.mark.parametrize("seed", range(20))
def test_noisy_saturating_curves(seed: int) -> None:
    assert find_knee(curve(DOUBLINGS, saturating, seed)).level in (64, 128, 256)
    assert find_knee(curve(DOUBLINGS, hard_saturating, seed)).level == 16
    assert find_knee(curve(FINE, hard_saturating, seed)).level in range(9, 13)


def test_linear_curve_has_no_knee() -> None:
    knee = find_knee(curve([1, 2, 4, 8, 16], linear))
    assert (knee.level, knee.reason) == (None, "none")
    assert knee.sentence == (
        "No knee up to concurrency 16: throughput still grows 100% per doubling."
    )


@pytest.mark.parametrize("seed", range(200))
def test_noise_alone_gives_no_false_knee(seed: int) -> None:
    flat_ttft = lambda x: 0.05  # noqa: E731 - closed loop on a linear curve: latency constant
    assert find_knee(curve(DOUBLINGS, linear, seed, flat_ttft)).level is None
    assert find_knee(curve(FINE, linear, seed, flat_ttft)).level is None


def test_latency_superlinear_before_throughput_plateau() -> None:
    points = curve(DOUBLINGS, linear, ttft=lambda x: 0.1 * max(1.0, (x / 8) ** 2))
    knee = find_knee(points)
    assert (knee.level, knee.reason) == (16, "latency-superlinear")
    assert knee.sentence == (
        "Latency grows faster than load at concurrency 16: P99 TTFT grows 4.0x for 2x "
        "concurrency, while throughput still gains +100% per doubling (800 tok/s)."
    )


def test_both_rules_at_once() -> None:
    points = curve(DOUBLINGS, hard_saturating, ttft=lambda x: 0.1 * max(1.0, (x / 8) ** 2))
    knee = find_knee(points)
    assert (knee.level, knee.reason) == (16, "both")
    assert knee.sentence.endswith("while P99 TTFT grows 4.0x for 2x concurrency.")


def test_tpot_counts_too_and_latency_just_linear_does_not() -> None:
    linear_tpot = [LevelPoint(x, linear(x), p99_tpot_s=0.01 * x) for x in DOUBLINGS]
    assert find_knee(linear_tpot).level is None
    steep_tpot = [LevelPoint(x, linear(x), p99_tpot_s=0.01 * x**1.5) for x in DOUBLINGS]
    knee = find_knee(steep_tpot)
    assert (knee.level, knee.reason) == (2, "latency-superlinear")
    assert "P99 TPOT grows 2.8x" in knee.sentence


def test_non_doubling_steps_are_normalized() -> None:
    points = [LevelPoint(x, t) for x, t in [(2, 100.0), (3, 150.0), (4, 200.0), (6, 204.0)]]
    knee = find_knee(points, x_name="rate", unit="req/s")
    assert knee.throughput_gain_per_doubling[1] == pytest.approx(1.0)  # 1.5x for 1.5x
    assert knee.level == 6
    assert knee.sentence == (
        "Throughput stops growing at rate 6: 204 req/s, +2% from 4 -> 6 "
        "(+3% per doubling, under 10%)."
    )


def test_falling_throughput_is_a_plateau() -> None:
    points = [LevelPoint(1, 100.0), LevelPoint(2, 190.0), LevelPoint(4, 150.0)]
    assert find_knee(points).level == 4


def test_too_few_levels() -> None:
    for points in ([], [LevelPoint(1, 10.0)]):
        knee = find_knee(points)
        assert (knee.level, knee.reason) == (None, "too-few-levels")
        assert "at least 2 levels" in knee.sentence


def test_unsorted_or_non_positive_levels_rejected() -> None:
    with pytest.raises(ValueError, match="sorted"):
        find_knee([LevelPoint(2, 1.0), LevelPoint(1, 2.0)])
    with pytest.raises(ValueError, match="> 0"):
        find_knee([LevelPoint(0, 1.0), LevelPoint(1, 2.0)])


def test_zero_throughput_reference_is_not_judged() -> None:
    knee = find_knee([LevelPoint(1, 0.0), LevelPoint(2, 0.0)])
    assert knee.level is None
    assert knee.throughput_gain_per_doubling == [None, None]
    assert knee.sentence == "No knee up to concurrency 2."
    assert to_json(knee)["reason"] == "none"
