"""Requests with several outputs (workload.n, workload.beam_width) in the replays, and the
PagedAttention paper's memory saving to compare with.

- Paged policies replay the real Engine with the null executor (`exact.replay_engine`:
  forks on shared blocks, copy-on-write, beams kept and dropped, groups preempted whole),
  its pool sized and ruled as the policy's. The fast kernel (replay/paged_kernel.py) replays one
  output per request and is not used for such traces. Prompts are made up from the
  trace's lengths (`trace_specs`: a shared prefix's tokens, then tokens of the request's
  own, so only shared prefixes hit the cache).
- Contiguous policies reserve every output's whole length, as a system without paging
  must: each output is its own reservation (`expand`: a request becomes its outputs, in
  its place in the queue; their counts are of outputs).
- Beam search keeps and drops beams by the model's log-probabilities: the replay's come
  from the null executor's synthetic next-token distribution (engine/executor.py,
  `synthetic_logprobs`, mean top-1 probability --beam-top1), so its beam-search saving
  is that distribution's; parallel sampling's depends on lengths only.

Memory saving (§6.3, Fig. 15) = blocks saved by sharing / blocks needed without sharing,
summed over the steps (`PolicyResult.memory_saving`).
"""

from __future__ import annotations

import dataclasses

from perfkit.config.schema import Profile
from perfkit.engine.sampling_params import mix64
from perfkit.fragmentation.exact import replay_engine
from perfkit.fragmentation.types import PolicyResult
from perfkit.replay.arrivals import OpenLoop
from perfkit.replay.trace import Trace
from perfkit.workload import RequestSpec

# Fig. 15 (OPT-13B on one A100-40GB, widths 2, 4 and 6), memory saving ranges in §6.3:
# dataset -> kind -> (low, high)
PAPER_FIG15 = {
    "alpaca": {"parallel sampling": (0.061, 0.098), "beam search": (0.376, 0.552)},
    "sharegpt": {"parallel sampling": (0.162, 0.305), "beam search": (0.443, 0.663)},
}


def group_kind(trace: Trace) -> str | None:
    """"beam search", "parallel sampling", or None when every request has one output."""
    if any(w > 1 for w in trace.beam_width):
        return "beam search"
    if any(n > 1 for n in trace.n):
        return "parallel sampling"
    return None


def paper_range(profile: Profile, trace: Trace) -> tuple[str, tuple[float, float]] | None:
    """(what, (low, high)) from Fig. 15 for an alpaca- or sharegpt-named profile with the
    OPT-13B shape and several outputs per request; None otherwise."""
    kind = group_kind(trace)
    dataset = next((d for d in PAPER_FIG15 if profile.name.startswith(d)), None)
    if kind is None or dataset is None or profile.model.preset != "opt-13b":
        return None
    return f"{dataset} {kind}", PAPER_FIG15[dataset][kind]


def expand(trace: Trace) -> Trace:
    """Each request's outputs as requests of its lengths, one after another in its place
    (what contiguous allocation must reserve: no block to share)."""
    idx = [i for i in range(trace.num_requests) for _ in range(trace.width(i))]

    def take(col: list[int]) -> list[int]:
        return [col[i] for i in idx]

    return dataclasses.replace(
        trace, prompt_len=take(trace.prompt_len), max_tokens=take(trace.max_tokens),
        priority=take(trace.priority), prefix_group=take(trace.prefix_group),
        arrivals=OpenLoop(tuple(take(list(trace.arrivals.steps))))
        if isinstance(trace.arrivals, OpenLoop) else trace.arrivals, n=[], beam_width=[])


def trace_specs(trace: Trace, vocab_size: int) -> list[RequestSpec]:
    """Requests of the trace's lengths: a shared prefix's tokens are its group's, every
    other token the request's own (a hash of request and position)."""
    span = vocab_size - 1
    prefixes: dict[int, tuple[int, ...]] = {}
    specs = []
    for i in range(trace.num_requests):
        g, plen = trace.prefix_group[i], trace.prompt_len[i]
        head: tuple[int, ...] = ()
        if g >= 0:
            head = prefixes.setdefault(g, tuple(1 + mix64(~g << 24 ^ j) % span
                                                for j in range(trace.prefix_len)))
        own = tuple(1 + mix64(i << 24 ^ j) % span for j in range(len(head), plen))
        specs.append(RequestSpec(
            i, head + own, trace.max_tokens[i], trace.priority[i],
            prefix_group=None if g < 0 else g,
            n=trace.n[i] if trace.n else 1,
            beam_width=trace.beam_width[i] if trace.beam_width else 1))
    return specs


def replay_paged(profile: Profile, trace: Trace, name: str, block_size: int,
                 num_blocks: int, caching: bool, top1_mean: float) -> PolicyResult:
    """The Engine (null executor) over the trace on `num_blocks` usable blocks of
    `block_size`, the profile's scheduling rules, prefix caching as `caching`."""
    eng = dataclasses.replace(
        profile.engine, block_size=block_size, kv_memory=None,
        num_blocks=num_blocks + int(profile.engine.null_block), prefix_caching=caching)
    return replay_engine(dataclasses.replace(profile, engine=eng),
                         trace_specs(trace, profile.model.vocab_size), trace.arrivals,
                         name=name, top1_mean=top1_mean).result
