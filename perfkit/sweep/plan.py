"""What a sweep runs: its load points, requests per level, warm-up and repeats."""

from __future__ import annotations

from dataclasses import dataclass

from perfkit.config.schema import Profile
from perfkit.result.level import LoadPoint


@dataclass(frozen=True)
class SweepPlan:
    levels: list[LoadPoint]
    num_requests: int  # measured requests per level
    num_warmup: int
    repeats: int
    samplers: bool = True  # False: wall time only (to measure the samplers' cost)

    def schedule(self) -> list[tuple[LoadPoint, int]]:
        """(level, repeat) in run order: repeats interleaved (all levels, then again), so
        slow drift of the machine spreads over every level instead of biasing one."""
        return [(level, r) for r in range(self.repeats) for level in self.levels]


def plan_from_profile(profile: Profile, samplers: bool = True) -> SweepPlan:
    """The profile's [sweep] and [workload] (command-line values are profile overrides)."""
    sw = profile.sweep
    levels = [LoadPoint(concurrency=c) for c in sw.concurrency]
    levels += [LoadPoint(rate=r) for r in sw.rates]
    return SweepPlan(levels=levels, num_requests=profile.workload.num_requests,
                     num_warmup=sw.warmup, repeats=sw.repeats, samplers=samplers)
