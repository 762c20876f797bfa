"""One level's requests dealt out to N load-generating workers.

The level's specs are drawn once, by the coordinator, exactly as for one process (same
seed, same requests whatever N is); this only decides which worker sends which:

  closed loop  the concurrency is split (worker i gets C // N clients, one more for the
               first C % N); each phase's conversations go, in order, to the worker with
               the fewest requests per client so far (ties: the lower index), so every
               worker runs out of work at about the same time. A worker with no client
               gets no request.
  open loop    each phase's conversations go round-robin; arrival offsets are re-based so
               that the phase's first arrival of the whole level is 0 and every worker
               starts its phase at one shared origin: the aggregate is exactly the level's
               schedule (poisson, gamma, bursts or a trace's timestamps).
A conversation (multi-turn) is never split. Warm-up and measured phases are dealt apart,
so each worker's specs are its warm-up ones, then its measured ones, in level order.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from perfkit.client_script import conversations
from perfkit.result.point import LoadPoint
from perfkit.workload import RequestSpec


@dataclass(frozen=True)
class Share:
    """One worker's part of one level."""

    index: int  # the worker
    clients: int | None  # closed loop: its clients; None: open loop
    specs: list[RequestSpec]  # its warm-up specs, then its measured ones, level order
    num_warmup: int  # how many of `specs` are warm-up
    least: int  # measured requests it submits at least (its part of the level's first N)


def split_clients(concurrency: int, workers: int) -> list[int]:
    """C clients over N workers, as evenly as they go (the first C % N get one more)."""
    return [concurrency // workers + (i < concurrency % workers) for i in range(workers)]


def _deal_phase(phase: list[RequestSpec], weights: list[int]) -> list[list[RequestSpec]]:
    """Conversations in order, each to the worker least loaded per unit of weight."""
    out: list[list[RequestSpec]] = [[] for _ in weights]
    live = [i for i, w in enumerate(weights) if w > 0]
    for turns in conversations(iter(phase)):
        i = min(live, key=lambda j: (len(out[j]) / weights[j], j))
        out[i].extend(turns)
    return out


def _rebased(phase: list[RequestSpec]) -> list[RequestSpec]:
    if not phase or phase[0].arrival_s == 0.0:
        return phase
    first = phase[0].arrival_s
    return [replace(s, arrival_s=s.arrival_s - first) for s in phase]


def deal(specs: list[RequestSpec], num_warmup: int, level: LoadPoint, workers: int,
         least: int) -> list[Share]:
    """The level's `specs` (warm-up first) over `workers`; `least`: the measured requests
    the level submits at least (the first `least` measured specs)."""
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if level.concurrency is not None:
        clients: list[int | None] = list(split_clients(level.concurrency, workers))
        weights = [c or 0 for c in clients]
    else:
        clients, weights = [None] * workers, [1] * workers
    warm, measured = specs[:num_warmup], specs[num_warmup:]
    if level.concurrency is None:
        warm, measured = _rebased(warm), _rebased(measured)
    first_ids = {s.request_id for s in measured[:least]}
    shares = []
    for i, (w, m) in enumerate(zip(_deal_phase(warm, weights), _deal_phase(measured, weights))):
        shares.append(Share(i, clients[i], w + m, len(w),
                            sum(s.request_id in first_ids for s in m)))
    return shares
