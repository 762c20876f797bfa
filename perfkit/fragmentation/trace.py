"""The profile's request trace as lengths only, for replays of 100,000 requests.

`workload.generate` draws every prompt token (100k ShareGPT-like requests are
16M draws, ~10 s). Memory accounting needs only lengths, prefix groups,
priorities and arrivals: `lengths_trace` is `generate(..., tokens=False)`, the same
draws without the token streams (as columns, `lengths`, when no arrival time is
used). tests/fragmentation check that both give the same trace for several profiles.

Arrivals become steps. `saturate` (the default of `perfkit fragmentation`):
every request waits from step 0, so the queue is never empty while requests
remain and the pool stays full (the PagedAttention paper's Fig. 2 setting).
`profile`: the profile's arrival process, arrival_s // step_s. `closed`: `clients`
clients, each sending its next request workload.client_delay_steps steps after the
step its previous one finished in (the replays assign those arrivals as they run).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from perfkit.config.schema import Profile
from perfkit.fragmentation.lengths import length_columns
from perfkit.fragmentation.types import Arrivals
from perfkit.replay.arrivals import ClosedLoop, OpenLoop
from perfkit.replay.trace import Trace
from perfkit.workload import RequestLengths, RequestSpec, generate, output_counts, with_outputs


def _steps(times: list[float], arrivals: Arrivals, step_s: float) -> list[int]:
    if arrivals != "profile":  # saturate; closed: assigned by the replay
        return [0] * len(times)
    if step_s <= 0:
        raise ValueError("step_s must be > 0")
    return [int(t // step_s) for t in times]


def lengths_trace(
    profile: Profile, num_requests: int, arrivals: Arrivals = "saturate",
    step_s: float = 0.025, clients: int = 0,
) -> Trace:
    """The trace `workload.generate(profile.workload, ...)` would give, without token ids;
    `clients` for arrivals "closed"."""
    mml = profile.engine.max_model_len
    if profile.workload.dataset.path:
        trace = _dataset_trace(profile, num_requests, arrivals, step_s)
    elif arrivals != "profile":  # no arrival times needed: the columns at once
        c = length_columns(profile.workload, mml, num_requests)
        ns, widths = output_counts(profile.workload, num_requests)
        trace = Trace(c.prompt_len, c.max_tokens, c.priority, c.prefix_group,
                      profile.workload.shared_prefix.length, OpenLoop((0,) * num_requests), mml,
                      n=ns, beam_width=widths)
    else:
        shapes = generate(profile.workload, profile.model.vocab_size, mml, num_requests,
                          tokens=False)
        trace = specs_trace(shapes, profile.workload.shared_prefix.length, mml, arrivals,
                            step_s)
    return closed_loop(trace, clients, profile.workload.client_delay_steps) \
        if arrivals == "closed" else trace


def closed_loop(trace: Trace, clients: int, delay_steps: int) -> Trace:
    """The same requests sent by `clients` clients, `delay_steps` after each answer."""
    return dataclasses.replace(trace, arrivals=ClosedLoop(clients, delay_steps))


def _dataset_trace(profile: Profile, num_requests: int, arrivals: Arrivals,
                   step_s: float) -> Trace:
    """The profile's dataset (its first `num_requests` records, or all of them) as lengths;
    Mooncake records sharing a first block share a MOONCAKE_BLOCK-token prefix."""
    from perfkit.datasets.records import MOONCAKE_BLOCK
    from perfkit.datasets.slices import load_tokenizer, records_of
    from perfkit.datasets.specs import SpecBuilder, record_lengths

    ds, wl = profile.workload.dataset, profile.workload
    records = records_of(profile)[:num_requests]
    builder = SpecBuilder(Path(ds.path), profile.model.vocab_size, wl.output_len, wl.seed,
                          load_tokenizer(ds.tokenizer) if ds.tokenizer else None)
    shapes = with_outputs(record_lengths(records, builder), wl)
    prefix = MOONCAKE_BLOCK if any(s.prefix_group is not None for s in shapes) else 0
    return specs_trace(shapes, prefix, profile.engine.max_model_len, arrivals, step_s)


def specs_trace(
    specs: Sequence[RequestSpec | RequestLengths], prefix_len: int, max_model_len: int,
    arrivals: Arrivals = "saturate", step_s: float = 0.025,
) -> Trace:
    """A trace from generated requests, with or without token ids."""
    return Trace(
        [s.prompt_len for s in specs], [s.max_tokens for s in specs],
        [s.priority for s in specs],
        [-1 if s.prefix_group is None else s.prefix_group for s in specs],
        prefix_len, OpenLoop(tuple(_steps([s.arrival_s for s in specs], arrivals, step_s))),
        max_model_len,
        n=[s.n for s in specs], beam_width=[s.beam_width for s in specs],
    )


def arrival_steps(specs: list[RequestSpec], arrivals: Arrivals, step_s: float) -> list[int]:
    return _steps([s.arrival_s for s in specs], arrivals, step_s)
