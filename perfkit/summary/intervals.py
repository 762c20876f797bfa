"""Uncertainty of a level's figures, for verdicts that must not follow noise.

- Throughput: batch means. The measured window is cut into NUM_SLICES equal slices;
  the spread of their token rates gives a ~95% interval of the level's rate,
  rate x (1 +/- 2 sd / (sqrt(k) mean)). Over repeats: the union of their intervals.
- Latency: the quantile a level's sample count supports (QUANTILES: at least
  MIN_TAIL samples beyond it, so never the p99 of 30 requests), with a seeded
  percentile-bootstrap interval (deterministic for the same samples).
- Degenerate: a latency whose median is under DEGENERATE_S (a server that delivers a
  whole response in one burst has TPOT ~ 0) is not judged at all.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

from perfkit.result.level import LevelResult, RequestSample
from perfkit.stats import Interval, quantile

NUM_SLICES = 8
MIN_TOKENS_PER_SLICE = 4
QUANTILES = (0.99, 0.9, 0.5)
MIN_TAIL = 10  # samples beyond the chosen quantile
NUM_RESAMPLES = 200
DEGENERATE_S = 1e-4


def _token_times(reqs: Sequence[RequestSample]) -> list[float]:
    times = []
    for r in reqs:
        if r.warmup or r.ttft_s is None:
            continue
        t = r.arrival_s + r.ttft_s
        times.append(t)
        for gap in r.itl_s:
            t += gap
            times.append(t)
    return sorted(times)


def throughput_interval(lv: LevelResult) -> Interval | None:
    """Output tok/s of the level with a batch-means interval; None without enough tokens."""
    value = lv.throughput.output_tokens_per_s
    if value is None:
        return None
    times = _token_times(lv.requests)
    if len(times) < NUM_SLICES * MIN_TOKENS_PER_SLICE or times[-1] <= times[0]:
        return Interval(value, value, value) if not lv.requests else None
    start, width = times[0], (times[-1] - times[0]) / NUM_SLICES
    counts = [0] * NUM_SLICES
    for t in times:
        counts[min(int((t - start) / width), NUM_SLICES - 1)] += 1
    mean = sum(counts) / NUM_SLICES
    sd = math.sqrt(sum((c - mean) ** 2 for c in counts) / (NUM_SLICES - 1))
    half = 2 * sd / (math.sqrt(NUM_SLICES) * mean) if mean > 0 else 1.0
    return Interval(value * max(1 - half, 0.0), value * (1 + half), value)


def supported_quantile(n: int) -> float | None:
    """The highest of QUANTILES with MIN_TAIL samples beyond it; None below 2 x MIN_TAIL."""
    for q in QUANTILES:
        if n * (1 - q) >= MIN_TAIL - 1e-9:  # 100 x (1 - 0.9) is 9.999...9
            return q
    return None


def latency_interval(values: Sequence[float], q: float, seed: int = 0) -> Interval | None:
    """The q-quantile with a percentile-bootstrap ~95% interval; None if degenerate."""
    if not values or quantile(values, 0.5) < DEGENERATE_S:
        return None
    rng = random.Random(seed)
    n = len(values)
    boots = sorted(quantile([values[rng.randrange(n)] for _ in range(n)], q)
                   for _ in range(NUM_RESAMPLES))
    return Interval(boots[int(0.025 * NUM_RESAMPLES)], boots[int(0.975 * NUM_RESAMPLES) - 1],
                    quantile(values, q))


def union(intervals: Sequence[Interval | None]) -> Interval | None:
    present = [i for i in intervals if i is not None]
    if not present:
        return None
    return Interval(min(i.low for i in present), max(i.high for i in present),
                    sum(i.value or 0.0 for i in present) / len(present))
