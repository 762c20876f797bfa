"""A distribution of samples: the one summary every timing in the result model uses."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Distribution:
    """Summary of samples in the samples' unit (seconds here). None when count is 0."""

    count: int
    mean: float | None = None
    stddev: float | None = None  # population standard deviation (ddof=0, as numpy's default)
    min: float | None = None
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    max: float | None = None
    # every percentile the sweep chose (sweep.percentiles): "p95", "p99.9", ...
    quantiles: dict[str, float] = field(default_factory=dict)
