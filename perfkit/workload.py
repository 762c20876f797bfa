"""Seeded request generation: lengths, shared prefixes, priorities, arrivals.

Everything is drawn from `random.Random` streams seeded by (seed, purpose), so
the same profile and seed give the same requests in every process, and
changing one knob (say the arrival rate) does not reshuffle the lengths.

Token ids have streams of their own ("tokens", "prefixes"), so `generate(...,
tokens=False)` skips them and gives the same lengths, groups, priorities and arrivals
as `generate(...)` (RequestLengths instead of RequestSpec): 100k ShareGPT-like
requests are 16M token draws (~10 s) that memory accounting does not need.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, overload

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
    conversation: int | None = None  # multi-turn datasets: turns of one conversation
    turn: int = 0  # arrive in order, each after the previous one finished
    think_s: float = 0.0  # multi-turn: pause after the previous turn ended

    @property
    def prompt_len(self) -> int:
        return len(self.prompt)

    @property
    def total_tokens(self) -> int:
        return len(self.prompt) + self.max_tokens


@dataclass(frozen=True, slots=True)
class RequestLengths:
    """A request without its token ids: what `generate(..., tokens=False)` gives."""

    request_id: int
    prompt_len: int  # tokens, shared prefix included
    max_tokens: int
    priority: int = 0
    arrival_s: float = 0.0
    prefix_group: int | None = None
    tool_call: bool = False


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


def _sampler(dist: LengthDist, rng: random.Random) -> Callable[[], int]:
    """`sample_length(dist, rng)` with a lognormal's parameters computed once: the same
    draws from `rng` in the same order, the same arithmetic."""
    if dist.kind != "lognormal":
        return lambda: sample_length(dist, rng)
    sigma2 = math.log1p((dist.std / dist.mean) ** 2)
    mu, sigma, lo, hi = math.log(dist.mean) - sigma2 / 2, math.sqrt(sigma2), dist.min, dist.max
    draw = rng.lognormvariate
    return lambda: int(min(max(round(draw(mu, sigma)), lo), hi))


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


def _prefixes(cfg: WorkloadConfig, vocab_size: int, salt: str) -> list[tuple[int, ...]]:
    rng = _rng(cfg.seed, "prefixes" + salt)
    sp = cfg.shared_prefix
    return [
        tuple(rng.randrange(FIRST_TOKEN_ID, vocab_size) for _ in range(sp.length))
        for _ in range(sp.groups)
    ]


def _lengths(cfg: WorkloadConfig, max_model_len: int, num: int,
             rate: float | None) -> list[RequestLengths]:
    """Every draw except token ids, per request in this order: prefix group and priority
    and tool call ("choice"), prompt then output length ("lengths")."""
    lengths, choice = _rng(cfg.seed, "lengths"), _rng(cfg.seed, "choice")
    sp, arrival = cfg.shared_prefix, cfg.arrival
    times = arrival_times(
        arrival.kind, arrival.rate if rate is None else rate, num, arrival.burst_size, cfg.seed
    )
    prios = [p.priority for p in cfg.priorities] or [0]
    weights = [p.weight for p in cfg.priorities] or [1.0]
    prompt_draw, output_draw = _sampler(cfg.prompt_len, lengths), _sampler(cfg.output_len, lengths)
    out = []
    for i in range(num):
        group = None
        if sp.groups and choice.random() < sp.share:
            group = choice.randrange(sp.groups)
        priority = choice.choices(prios, weights)[0]
        tool_call = choice.random() < cfg.tool_call_share
        prompt_len = prompt_draw() + (sp.length if group is not None else 0)
        out_len = output_draw()
        room = max_model_len - prompt_len
        max_tokens = min(out_len, room) if room >= 1 else out_len
        out.append(RequestLengths(i, prompt_len, max_tokens, priority, times[i], group,
                                  tool_call))
    return out


@overload
def generate(cfg: WorkloadConfig, vocab_size: int, max_model_len: int,
             num_requests: int | None = None, rate: float | None = None, *,
             tokens: Literal[True] = True, salt: str = "") -> list[RequestSpec]: ...


@overload
def generate(cfg: WorkloadConfig, vocab_size: int, max_model_len: int,
             num_requests: int | None = None, rate: float | None = None, *,
             tokens: Literal[False], salt: str = "") -> list[RequestLengths]: ...


def generate(
    cfg: WorkloadConfig,
    vocab_size: int,
    max_model_len: int,
    num_requests: int | None = None,
    rate: float | None = None,
    *,
    tokens: bool = True,
    salt: str = "",
) -> list[RequestSpec] | list[RequestLengths]:
    """The profile's requests. Prompt lengths from `prompt_len` (after any shared prefix);
    outputs from `output_len`, clipped so prompt + output <= max_model_len where the
    prompt fits at all (an over-long prompt is kept: admission control rejects it).
    tokens=False: lengths only (the same draws, so the same lengths), no token ids.
    `salt` reseeds the token ids (shared prefixes included) and nothing else: the sweep
    passes the level's name, so every level gets fresh prompts of the same lengths (no
    level reuses another's prompts from a server's prefix cache) and repeats of a level
    get the same ones."""
    num = cfg.num_requests if num_requests is None else num_requests
    shapes = _lengths(cfg, max_model_len, num, rate)
    if not tokens:
        return shapes
    rng = _rng(cfg.seed, "tokens" + salt)
    prefixes = _prefixes(cfg, vocab_size, salt)
    specs = []
    for r in shapes:
        head = prefixes[r.prefix_group] if r.prefix_group is not None else ()
        own = tuple(rng.randrange(FIRST_TOKEN_ID, vocab_size)
                    for _ in range(r.prompt_len - len(head)))
        specs.append(RequestSpec(r.request_id, head + own, r.max_tokens, r.priority,
                                 r.arrival_s, r.prefix_group, r.tool_call))
    return specs
