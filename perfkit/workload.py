"""Seeded request generation: lengths, shared prefixes, priorities, arrivals.

Everything is drawn from `random.Random` streams seeded by (seed, purpose), so
the same profile and seed give the same requests in every process, and
changing one knob (say the arrival rate) does not reshuffle the lengths.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from perfkit.config.schema import LengthDist, WorkloadConfig

# Token id 0 is never generated in prompts (reserved as padding by the model).
FIRST_TOKEN_ID = 1


@dataclass(frozen=True)
class RequestSpec:
    """One request as a client would send it."""

    request_id: int
    prompt: tuple[int, ...]  # token ids; a shared prefix, if any, comes first
    max_tokens: int  # output tokens to generate (the engine ignores EOS)
    priority: int = 0  # lower runs first
    arrival_s: float = 0.0  # offset from the start of the level (open loop); 0 for closed
    prefix_group: int | None = None  # which shared system prompt, if any
    tool_call: bool = False

    @property
    def total_tokens(self) -> int:
        return len(self.prompt) + self.max_tokens


def _rng(seed: int, purpose: str) -> random.Random:
    return random.Random(f"perfkit:{seed}:{purpose}")  # str seeds are stable across processes


def sample_length(dist: LengthDist, rng: random.Random) -> int:
    """One length from `dist`, rounded and clipped to [min, max]."""
    if dist.kind == "fixed":
        value = dist.mean
    elif dist.kind == "uniform":
        value = rng.randint(dist.min, dist.max)
    elif dist.kind == "normal":
        value = rng.gauss(dist.mean, dist.std)
    else:  # lognormal parameterised by the mean and std of the lengths themselves
        sigma2 = math.log1p((dist.std / dist.mean) ** 2)
        value = rng.lognormvariate(math.log(dist.mean) - sigma2 / 2, math.sqrt(sigma2))
    return int(min(max(round(value), dist.min), dist.max))


def arrival_times(
    kind: str, rate: float, num: int, burst_size: int = 8, seed: int = 0
) -> list[float]:
    """Open-loop arrival offsets in seconds: poisson at `rate`, or bursts of `burst_size`
    requests every burst_size / rate seconds. `closed` (or rate 0) -> all at 0."""
    if kind == "closed" or rate <= 0:
        return [0.0] * num
    if kind == "burst":
        return [(i // burst_size) * burst_size / rate for i in range(num)]
    rng = _rng(seed, "arrivals")
    times, now = [], 0.0
    for _ in range(num):
        times.append(now)
        now += rng.expovariate(rate)
    return times


def _prefixes(cfg: WorkloadConfig, vocab_size: int) -> list[tuple[int, ...]]:
    rng = _rng(cfg.seed, "prefixes")
    sp = cfg.shared_prefix
    return [
        tuple(rng.randrange(FIRST_TOKEN_ID, vocab_size) for _ in range(sp.length))
        for _ in range(sp.groups)
    ]


def generate(
    cfg: WorkloadConfig,
    vocab_size: int,
    max_model_len: int,
    num_requests: int | None = None,
    rate: float | None = None,
) -> list[RequestSpec]:
    """The profile's requests. Prompt lengths from `prompt_len` (after any shared prefix);
    outputs from `output_len`, clipped so prompt + output <= max_model_len where the
    prompt fits at all (an over-long prompt is kept: admission control rejects it)."""
    num = cfg.num_requests if num_requests is None else num_requests
    lengths, tokens, choice = (_rng(cfg.seed, p) for p in ("lengths", "tokens", "choice"))
    prefixes = _prefixes(cfg, vocab_size)
    arrival = cfg.arrival
    times = arrival_times(
        arrival.kind, arrival.rate if rate is None else rate, num, arrival.burst_size, cfg.seed
    )
    prios = [p.priority for p in cfg.priorities] or [0]
    weights = [p.weight for p in cfg.priorities] or [1.0]
    specs = []
    for i in range(num):
        group = None
        if prefixes and choice.random() < cfg.shared_prefix.share:
            group = choice.randrange(len(prefixes))
        priority = choice.choices(prios, weights)[0]
        tool_call = choice.random() < cfg.tool_call_share
        prompt_len = sample_length(cfg.prompt_len, lengths)
        out_len = sample_length(cfg.output_len, lengths)
        own = tuple(tokens.randrange(FIRST_TOKEN_ID, vocab_size) for _ in range(prompt_len))
        prompt = (prefixes[group] if group is not None else ()) + own
        room = max_model_len - len(prompt)
        max_tokens = min(out_len, room) if room >= 1 else out_len
        specs.append(
            RequestSpec(i, prompt, max_tokens, priority, times[i], group, tool_call)
        )
    return specs
