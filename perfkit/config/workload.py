"""The profile's [workload] section: the requests a sweep sends, as typed sections that
check themselves on construction (lengths, shared prefixes, priorities, arrivals, outputs
per request). The rest of a profile is in schema.py; a file of requests in dataset.py.

Every field has a default, so a profile file states only what differs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from perfkit.config.bounds import MAX_COUNT, MAX_OUTPUTS, MAX_REQUESTS
from perfkit.config.bounds import at_most as _at_most
from perfkit.config.bounds import positive as _positive
from perfkit.config.bounds import rate as _rate
from perfkit.config.bounds import share as _share
from perfkit.config.dataset import DatasetConfig
from perfkit.config.typed import FieldError


@dataclass
class LengthDist:
    """Token-length distribution: fixed is exactly `mean` (rounded, at least 1); the drawn
    kinds (uniform, normal, lognormal) are clipped to [min, max]."""

    kind: Literal["fixed", "uniform", "normal", "lognormal"] = "fixed"
    mean: float = 64.0  # fixed value, or the mean of normal/lognormal
    std: float = 0.0  # normal/lognormal spread (of the lengths, not of their log)
    min: int = 1
    max: int = 1 << 20

    def check(self) -> None:
        _positive("mean", self.mean)
        _positive("std", self.std, allow_zero=True)
        _positive("min", self.min)
        _at_most("min", self.min, MAX_COUNT)
        if self.max < self.min:
            raise FieldError("max", f"must be >= min ({self.min}), got {self.max}")
        if self.kind == "uniform" and self.max == 1 << 20:
            raise FieldError("max", "a uniform distribution needs an explicit max")
        if self.kind in ("normal", "lognormal") and not self.min <= self.mean <= self.max:
            # every length is clipped to [min, max]: a mean outside asks for what never comes
            side, bound = ("max", self.max) if self.mean > self.max else ("min", self.min)
            raise FieldError("mean", f"{self.mean:g} lies {'above' if side == 'max' else 'below'} "
                             f"{side} ({bound}), which clips every length to it: set {side} "
                             f"with it (e.g. {side}={round(self.mean)})")


@dataclass
class SharedPrefix:
    """`groups` system prompts of `length` tokens; `share` of requests start with one."""

    groups: int = 0
    length: int = 0
    share: float = 0.0

    def check(self) -> None:
        _positive("groups", self.groups, allow_zero=True)
        _at_most("groups", self.groups, MAX_COUNT)
        _positive("length", self.length, allow_zero=True)
        _share("share", self.share)


@dataclass
class PriorityClass:
    priority: int = 0  # lower runs first
    weight: float = 1.0

    def check(self) -> None:
        _positive("weight", self.weight)


@dataclass
class Arrival:
    kind: Literal["closed", "poisson", "burst", "gamma"] = "closed"
    rate: float = 0.0  # requests per second (poisson, burst, gamma); 0 = all at once
    burst_size: int = 8  # burst: requests per burst
    burstiness: float = 1.0  # gamma: shape of the inter-arrival times (1 = poisson, < 1 bursty)
    # the load's start: rate levels ramp their arrival rate, closed-loop levels their clients
    ramp: Literal["none", "linear", "exponential"] = "none"
    ramp_s: float = 0.0  # seconds to reach the level's full load

    def check(self) -> None:
        _rate("rate", self.rate, allow_zero=True)
        _positive("burst_size", self.burst_size)
        _at_most("burst_size", self.burst_size, MAX_REQUESTS)
        if not 0.01 <= self.burstiness <= 100:
            raise FieldError("burstiness", f"must be in [0.01, 100], got {self.burstiness}")
        if not 0 <= self.ramp_s <= 3600:
            raise FieldError("ramp_s", f"must be in [0, 3600] s, got {self.ramp_s}")
        if self.ramp != "none" and self.ramp_s == 0:
            raise FieldError("ramp_s", f"a {self.ramp} ramp needs ramp_s > 0")


@dataclass
class WorkloadConfig:
    num_requests: int = 64
    prompt_len: LengthDist = field(default_factory=lambda: LengthDist(mean=64))
    output_len: LengthDist = field(default_factory=lambda: LengthDist(mean=32))
    shared_prefix: SharedPrefix = field(default_factory=SharedPrefix)
    dataset: DatasetConfig = field(default_factory=DatasetConfig)  # a file instead
    tool_call_share: float = 0.0
    priorities: list[PriorityClass] = field(default_factory=list)
    arrival: Arrival = field(default_factory=Arrival)
    seed: int = 0
    # fragmentation replays, closed loop: engine steps from a request's finish to its
    # client's next arrival, beyond the next step (a real client's round trip; 0 = next)
    client_delay_steps: int = 0
    # outputs of each request, a fixed value or a distribution (a table like prompt_len):
    # n parallel samples of the prompt, or beam search of width beam_width (its beams
    # are the outputs); they share the prompt's KV blocks (engine.block_sharing)
    n: int | LengthDist = 1
    beam_width: int | LengthDist = 1

    def check(self) -> None:
        _positive("num_requests", self.num_requests)
        _at_most("num_requests", self.num_requests, MAX_REQUESTS)
        _share("tool_call_share", self.tool_call_share)
        _positive("client_delay_steps", self.client_delay_steps, allow_zero=True)
        _at_most("client_delay_steps", self.client_delay_steps, MAX_COUNT)
        for name in ("n", "beam_width"):
            _outputs_check(name, getattr(self, name))
        if self.n != 1 and self.beam_width != 1:
            raise FieldError("beam_width", "give workload.n (parallel samples) or "
                             "workload.beam_width (beam search), not both")


def _outputs_check(name: str, value: int | LengthDist) -> None:
    """Outputs per request: 1 to MAX_OUTPUTS, fixed or drawn."""
    low, high = (value, value) if isinstance(value, int) else (value.min, value.max)
    if not 1 <= low <= high <= MAX_OUTPUTS:
        what = "" if isinstance(value, int) else "a distribution's min and max "
        raise FieldError(name, f"{what}must be between 1 and {MAX_OUTPUTS}, got "
                         f"{low if isinstance(value, int) else f'{low} to {high}'}")
