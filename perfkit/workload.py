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

import dataclasses
import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, TypeVar, overload

from perfkit.config.workload import Arrival, LengthDist, WorkloadConfig

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
    n: int = 1  # outputs: parallel samples of the prompt (sharing its KV blocks)
    beam_width: int = 1  # beam search of this width (its beams are the outputs); 1: off

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
    n: int = 1  # parallel samples
    beam_width: int = 1  # beam search width; 1: off


def stream(seed: int, purpose: str) -> random.Random:
    """The seeded random stream of one purpose (lengths, choice, outputs, arrivals...)."""
    return random.Random(f"perfkit:{seed}:{purpose}")  # str seeds are stable across processes


def sample_length(dist: LengthDist, rng: random.Random) -> int:
    """One length from `dist`: fixed, its mean; drawn, rounded and clipped to [min, max]."""
    if dist.kind == "fixed":  # the value itself: min and max bound the drawn kinds only
        return max(1, round(dist.mean))
    value: float
    if dist.kind == "uniform":
        value = rng.randint(dist.min, dist.max)
    elif dist.kind == "normal":
        value = rng.gauss(dist.mean, dist.std)
    else:  # lognormal parameterised by the mean and std of the lengths themselves
        sigma2 = math.log1p((dist.std / dist.mean) ** 2)
        value = rng.lognormvariate(math.log(dist.mean) - sigma2 / 2, math.sqrt(sigma2))
    return int(min(max(round(value), dist.min), dist.max))


def length_sampler(dist: LengthDist, rng: random.Random) -> Callable[[], int]:
    """`sample_length(dist, rng)` with a lognormal's parameters computed once: the same
    draws from `rng` in the same order, the same arithmetic (the generator and the
    million-request fragmentation columns both draw through it)."""
    if dist.kind != "lognormal":
        return lambda: sample_length(dist, rng)
    sigma2 = math.log1p((dist.std / dist.mean) ** 2)
    mu, sigma, lo, hi = math.log(dist.mean) - sigma2 / 2, math.sqrt(sigma2), dist.min, dist.max
    draw = rng.lognormvariate

    def one() -> int:
        v = round(draw(mu, sigma))
        return lo if v < lo else hi if v > hi else v

    return one


def output_counts(cfg: WorkloadConfig, num: int) -> tuple[list[int], list[int]]:
    """(n, beam_width) of each of `num` requests: the profile's fixed values, or draws
    from their distributions on a stream of their own ("outputs"), so asking for several
    outputs moves no other draw."""
    rng = stream(cfg.seed, "outputs")

    def counts(value: int | LengthDist) -> list[int]:
        if isinstance(value, int):
            return [value] * num
        draw = length_sampler(value, rng)
        return [draw() for _ in range(num)]

    return counts(cfg.n), counts(cfg.beam_width)


SpecT = TypeVar("SpecT", RequestSpec, RequestLengths)


def with_outputs(specs: list[SpecT], cfg: WorkloadConfig) -> list[SpecT]:
    """Requests from elsewhere (a dataset) with the profile's n and beam_width."""
    ns, widths = output_counts(cfg, len(specs))
    if all(x == 1 for x in ns) and all(x == 1 for x in widths):
        return specs
    return [dataclasses.replace(s, n=n, beam_width=w) for s, n, w in zip(specs, ns, widths)]


def arrival_times(
    kind: str, rate: float, num: int, burst_size: int = 8, seed: int = 0,
    burstiness: float = 1.0,
) -> list[float]:
    """Open-loop arrival offsets in seconds: poisson at `rate`; gamma inter-arrival times
    of shape `burstiness` and mean 1 / rate (vLLM's --burstiness: 1 is poisson, smaller is
    burstier); or bursts of `burst_size` requests every burst_size / rate seconds.
    `closed` (or rate 0) -> all at 0."""
    if kind == "closed" or rate <= 0:
        return [0.0] * num
    if kind == "burst":
        return [(i // burst_size) * burst_size / rate for i in range(num)]
    rng = stream(seed, "arrivals")
    gap: Callable[[], float] = (lambda: rng.expovariate(rate)) if kind == "poisson" \
        else (lambda: rng.gammavariate(burstiness, 1.0 / (rate * burstiness)))
    times, now = [], 0.0
    for _ in range(num):
        times.append(now)
        now += gap()
    return times


def ramp_times(times: list[float], rate: float, ramp: str, ramp_s: float) -> list[float]:
    """Arrivals of a steady rate re-timed so the rate ramps up over `ramp_s` seconds:
    linear from 0, or exponential from 1/64 of it (doubling every ramp_s / 6). The same
    arrivals in the same order; after the ramp, the steady rate."""
    if ramp == "none" or ramp_s <= 0 or rate <= 0:
        return times
    return [_ramp_one(t * rate, rate, ramp, ramp_s) for t in times]


def _ramp_one(u: float, rate: float, ramp: str, ramp_s: float) -> float:
    """The time by which the ramped rate has delivered `u` arrivals (its cumulative
    intensity inverted); u = rate * steady time."""
    if ramp == "linear":  # r(t) = rate * t / T: u(t) = rate t^2 / 2T until T
        u_ramp = rate * ramp_s / 2
        return math.sqrt(2 * ramp_s * u / rate) if u < u_ramp else ramp_s + (u - u_ramp) / rate
    low = 1 / 64  # r(t) = rate * 64^(t/T - 1): u(t) = rate T (64^(t/T-1) - 1/64) / ln 64
    ln = math.log(64)
    u_ramp = rate * ramp_s * (1 - low) / ln
    if u >= u_ramp:
        return ramp_s + (u - u_ramp) / rate
    return ramp_s * (1 + math.log(u * ln / (rate * ramp_s) + low) / ln)


def level_arrivals(arrival: Arrival, rate: float, num: int, seed: int) -> list[float]:
    """A rate level's offsets: the profile's process at the level's rate (poisson unless
    it bursts or is gamma), then its ramp."""
    kind = arrival.kind if arrival.kind in ("burst", "gamma") else "poisson"
    times = arrival_times(kind, rate, num, arrival.burst_size, seed, arrival.burstiness)
    return ramp_times(times, rate, arrival.ramp, arrival.ramp_s)


def _prefixes(cfg: WorkloadConfig, vocab_size: int, salt: str) -> list[tuple[int, ...]]:
    rng = stream(cfg.seed, "prefixes" + salt)
    sp = cfg.shared_prefix
    return [
        tuple(rng.randrange(FIRST_TOKEN_ID, vocab_size) for _ in range(sp.length))
        for _ in range(sp.groups)
    ]


def _lengths(cfg: WorkloadConfig, max_model_len: int, num: int,
             rate: float | None) -> list[RequestLengths]:
    """Every draw except token ids, per request in this order: prefix group and priority
    and tool call ("choice"), prompt then output length ("lengths")."""
    lengths, choice = stream(cfg.seed, "lengths"), stream(cfg.seed, "choice")
    sp, arrival = cfg.shared_prefix, cfg.arrival
    at = arrival.rate if rate is None else rate
    times = arrival_times(arrival.kind, at, num, arrival.burst_size, cfg.seed,
                          arrival.burstiness)
    times = ramp_times(times, at, arrival.ramp, arrival.ramp_s)
    prios = [p.priority for p in cfg.priorities] or [0]
    weights = [p.weight for p in cfg.priorities] or [1.0]
    prompt_draw = length_sampler(cfg.prompt_len, lengths)
    output_draw = length_sampler(cfg.output_len, lengths)
    ns, widths = output_counts(cfg, num)
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
                                  tool_call, ns[i], widths[i]))
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
    rng = stream(cfg.seed, "tokens" + salt)
    prefixes = _prefixes(cfg, vocab_size, salt)
    specs = []
    for r in shapes:
        head = prefixes[r.prefix_group] if r.prefix_group is not None else ()
        own = tuple(rng.randrange(FIRST_TOKEN_ID, vocab_size)
                    for _ in range(r.prompt_len - len(head)))
        specs.append(RequestSpec(r.request_id, head + own, r.max_tokens, r.priority,
                                 r.arrival_s, r.prefix_group, r.tool_call, n=r.n,
                                 beam_width=r.beam_width))
    return specs
