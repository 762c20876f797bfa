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
    min_requests_per_client: int = 0  # closed loop: >= this x concurrency measured
    min_level_s: float = 0.0  # closed loop: keep submitting until the phase lasts this long
    ramp: tuple[str, float] = ("none", 0.0)  # closed loop: clients start over ramp_s seconds
    contention: bool = False  # trace GIL and lock waits beside each level (--contention)

    def requests_at(self, level: LoadPoint) -> int:
        """Measured requests the level submits at least (deterministic)."""
        per_client = self.min_requests_per_client * (level.concurrency or 0)
        return max(self.num_requests, per_client)

    def specs_at(self, level: LoadPoint) -> int:
        """Measured requests generated for the level: with a minimum duration, up to 8x
        more than it submits at least, drawn only if the duration needs them."""
        least = self.requests_at(level)
        return least * 8 if self.min_level_s > 0 and level.concurrency else least

    def schedule(self) -> list[tuple[LoadPoint, int]]:
        """(level, repeat) in run order: repeats interleaved (all levels, then again), so
        slow drift of the machine spreads over every level instead of biasing one."""
        return [(level, r) for r in range(self.repeats) for level in self.levels]


def plan_from_profile(profile: Profile, samplers: bool = True, contention: bool = False
                      ) -> SweepPlan:
    """The profile's [sweep] and [workload] (command-line values are profile overrides)."""
    sw = profile.sweep
    levels = [LoadPoint(concurrency=c) for c in sw.concurrency]
    levels += [LoadPoint(rate=r) for r in sw.rates]
    return SweepPlan(levels=levels, num_requests=profile.workload.num_requests,
                     num_warmup=sw.warmup, repeats=sw.repeats, samplers=samplers,
                     min_requests_per_client=sw.min_requests_per_client,
                     min_level_s=sw.min_level_s,
                     ramp=(profile.workload.arrival.ramp, profile.workload.arrival.ramp_s),
                     contention=contention)
