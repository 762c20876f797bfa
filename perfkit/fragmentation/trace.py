"""The profile's request trace as lengths only, for replays of 100,000 requests.

`workload.generate` draws every prompt token (100k ShareGPT-like requests are
16M draws, ~10 s). Memory accounting needs only lengths, prefix groups,
priorities and arrivals, which `generate` draws from streams of their own
("lengths", "choice", "arrivals"); `lengths_trace` replays exactly those draws
in the same order and skips the token stream. tests/analysis check that both
give the same lengths for several profiles.

Arrivals become steps. `saturate` (the default of `perfkit fragmentation`):
every request waits from step 0, so the queue is never empty while requests
remain and the pool stays full (the PagedAttention paper's Fig. 2 setting).
`profile`: the profile's arrival process, arrival_s // step_s.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable

from perfkit.config.schema import LengthDist, Profile
from perfkit.fragmentation.types import Arrivals, Trace
from perfkit.workload import RequestSpec, _rng, arrival_times, sample_length


def _sampler(dist: LengthDist, rng: random.Random) -> Callable[[], int]:
    """`sample_length(dist, rng)` with a lognormal's parameters computed once: the same
    draws from `rng` in the same order (tests compare with `generate`)."""
    if dist.kind != "lognormal":
        return lambda: sample_length(dist, rng)
    sigma2 = math.log1p((dist.std / dist.mean) ** 2)
    mu, sigma, lo, hi = math.log(dist.mean) - sigma2 / 2, math.sqrt(sigma2), dist.min, dist.max
    draw = rng.lognormvariate
    return lambda: int(min(max(round(draw(mu, sigma)), lo), hi))


def _steps(times: list[float], arrivals: Arrivals, step_s: float) -> list[int]:
    if arrivals == "saturate":
        return [0] * len(times)
    if step_s <= 0:
        raise ValueError("step_s must be > 0")
    return [int(t // step_s) for t in times]


def lengths_trace(
    profile: Profile, num_requests: int, arrivals: Arrivals = "saturate", step_s: float = 0.025
) -> Trace:
    """The trace `workload.generate(profile.workload, ...)` would give, without token ids."""
    cfg, mml = profile.workload, profile.engine.max_model_len
    lengths, choice = _rng(cfg.seed, "lengths"), _rng(cfg.seed, "choice")
    sp, arr = cfg.shared_prefix, cfg.arrival
    times = arrival_times(arr.kind, arr.rate, num_requests, arr.burst_size, cfg.seed)
    prios = [p.priority for p in cfg.priorities] or [0]
    weights = [p.weight for p in cfg.priorities] or [1.0]
    prompt, out, prio, group = [], [], [], []
    prompt_draw, output_draw = _sampler(cfg.prompt_len, lengths), _sampler(cfg.output_len, lengths)
    for _ in range(num_requests):
        g = -1
        if sp.groups and choice.random() < sp.share:
            g = choice.randrange(sp.groups)
        prio.append(choice.choices(prios, weights)[0])
        choice.random()  # tool_call draw: keeps the stream aligned with generate()
        own = prompt_draw()
        out_len = output_draw()
        p = own + (sp.length if g >= 0 else 0)
        room = mml - p
        prompt.append(p)
        out.append(min(out_len, room) if room >= 1 else out_len)
        group.append(g)
    return Trace(prompt, out, prio, group, sp.length, _steps(times, arrivals, step_s), mml)


def specs_trace(
    specs: list[RequestSpec], prefix_len: int, max_model_len: int,
    arrivals: Arrivals = "saturate", step_s: float = 0.025,
) -> Trace:
    """A trace from generated requests (tests, and the live replay's own specs)."""
    return Trace(
        [len(s.prompt) for s in specs], [s.max_tokens for s in specs],
        [s.priority for s in specs],
        [-1 if s.prefix_group is None else s.prefix_group for s in specs],
        prefix_len, _steps([s.arrival_s for s in specs], arrivals, step_s), max_model_len,
    )


def arrival_steps(specs: list[RequestSpec], arrivals: Arrivals, step_s: float) -> list[int]:
    return _steps([s.arrival_s for s in specs], arrivals, step_s)
