"""One level's specs dealt to N workers (perfkit.loadgen.deal)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perfkit.loadgen.deal import deal, split_clients
from perfkit.result.point import LoadPoint
from perfkit.workload import RequestSpec


def specs(n: int, turns: int = 1, rate: float | None = None) -> list[RequestSpec]:
    out = []
    for i in range(n):
        conv = i // turns if turns > 1 else None
        out.append(RequestSpec(i, (1, 2, 3), 4, conversation=conv, turn=i % turns,
                               arrival_s=0.0 if rate is None else 1.5 + i / rate))
    return out


def test_split_clients_is_as_even_as_it_goes():
    assert split_clients(10, 3) == [4, 3, 3]
    assert split_clients(2, 4) == [1, 1, 0, 0]
    assert sum(split_clients(513, 7)) == 513


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(0, 60), warm=st.integers(0, 10), workers=st.integers(1, 6),
       clients=st.integers(1, 20), turns=st.integers(1, 3))
def test_every_spec_goes_to_exactly_one_worker_in_level_order(n, warm, workers, clients,
                                                              turns):
    """Whatever N: the same requests, each once; every worker's specs are its warm-up ones
    then its measured ones, each part in level order; a conversation's turns in one phase
    go to one worker."""
    level = specs(n + warm, turns)
    shares = deal(level, warm, LoadPoint(concurrency=clients), workers, least=n)
    dealt = [s for sh in shares for s in sh.specs]
    assert sorted(s.request_id for s in dealt) == list(range(n + warm))
    assert sum(sh.num_warmup for sh in shares) == warm
    assert sum(sh.least for sh in shares) == n
    for sh in shares:
        ids = [s.request_id for s in sh.specs]
        assert ids[:sh.num_warmup] == sorted(ids[:sh.num_warmup])
        assert ids[sh.num_warmup:] == sorted(ids[sh.num_warmup:])
        assert all(s.request_id < warm for s in sh.specs[:sh.num_warmup])
    for warmup in (True, False):
        owners: dict[int, set[int]] = {}
        for sh in shares:
            part = sh.specs[:sh.num_warmup] if warmup else sh.specs[sh.num_warmup:]
            for s in part:
                owners.setdefault(s.conversation, set()).add(sh.index)
        assert all(len(o) == 1 for c, o in owners.items() if c is not None)


def test_closed_loop_balances_requests_per_client():
    shares = deal(specs(100), 0, LoadPoint(concurrency=10), 3, least=100)
    assert [sh.clients for sh in shares] == [4, 3, 3]
    assert [len(sh.specs) for sh in shares] == [40, 30, 30]


def test_a_worker_without_clients_gets_nothing():
    shares = deal(specs(12), 2, LoadPoint(concurrency=2), 4, least=10)
    assert [len(sh.specs) for sh in shares] == [6, 6, 0, 0]


def test_open_loop_rebases_each_phase_to_one_shared_origin():
    """The union of the workers' arrival offsets is the level's schedule, each phase
    starting at 0: workers that start a phase at one origin send exactly that process."""
    level = specs(30, rate=10.0)
    shares = deal(level, 5, LoadPoint(rate=10.0), 4, least=25)
    warm = sorted(s.arrival_s for sh in shares for s in sh.specs[:sh.num_warmup])
    measured = sorted(s.arrival_s for sh in shares for s in sh.specs[sh.num_warmup:])
    assert warm == pytest.approx([s.arrival_s - level[0].arrival_s for s in level[:5]])
    assert measured == pytest.approx([s.arrival_s - level[5].arrival_s for s in level[5:]])
    assert [(sh.num_warmup, len(sh.specs) - sh.num_warmup) for sh in shares] == [
        (2, 7), (1, 6), (1, 6), (1, 6)]


def test_bad_worker_count():
    with pytest.raises(ValueError):
        deal(specs(3), 0, LoadPoint(concurrency=1), 0, least=3)


def test_unchanged_specs_otherwise():
    level = [replace(s, priority=2, tool_call=True) for s in specs(4)]
    shares = deal(level, 0, LoadPoint(concurrency=2), 2, least=4)
    assert {s for sh in shares for s in sh.specs} == set(level)
