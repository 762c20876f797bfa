"""A worker's clock against the coordinator's, from round trips.

Latencies never need it: TTFT, ITL and E2E are differences on one worker's own monotonic
clock. It lines up the timelines (arrivals, level windows) of workers on other hosts, and
converts the coordinator's phase origins into each worker's clock.

Each probe: the coordinator's send time a, the worker's clock w when it answered, the
coordinator's receive time b. If the two legs took equally long, offset = w - (a + b) / 2;
whatever their asymmetry, the truth lies within (b - a) / 2 of it. The probe with the
shortest round trip gives the tightest bound (NTP's rule). Workers whose kernel has the
coordinator's boot id read the very same CLOCK_MONOTONIC: no estimate, offset None.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

PROBES = 8


@dataclass(frozen=True)
class ClockEstimate:
    offset_s: float  # worker clock - coordinator clock
    error_s: float  # |true offset - offset_s| <= error_s
    round_trip_s: float  # the best probe's


def estimate(probes: Sequence[tuple[float, float, float]]) -> ClockEstimate:
    """From (coordinator send, worker clock, coordinator receive) triples."""
    if not probes:
        raise ValueError("no clock probes")
    a, w, b = min(probes, key=lambda p: p[2] - p[0])
    return ClockEstimate(w - (a + b) / 2, (b - a) / 2, b - a)
