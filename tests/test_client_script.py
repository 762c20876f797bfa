"""One ClientScript, two players: the asyncio loops (sweep/loops.py) and the virtual clock's
(predict/loads.py) send the same requests in the same order at the same times.

Both serve every request in a fixed time (SERVICE_S by request id, no two events at one
moment). The asyncio side runs on an event loop whose clock is virtual too (a sleep
advances it, it never waits), so the two timelines are compared exactly, in microseconds.
"""

from __future__ import annotations

import asyncio
import selectors
from dataclasses import replace
from types import SimpleNamespace

import pytest

import perfkit.sweep.loops as loops
from perfkit.client_script import ClientScript, HeldTurns, conversations, level_script
from perfkit.predict.loads import play
from perfkit.predict.virtual_clock import VirtualClock
from perfkit.records import RequestRecord
from perfkit.workload import RequestSpec

SERVICE_S = {i: 0.010 + 0.0031 * (i % 5) for i in range(40)}  # by request id


def _spec(i: int, **kw) -> RequestSpec:
    return RequestSpec(i, (1, 2, 3), 4, **kw)


def _record(spec: RequestSpec, warmup: bool, arrival_s: float) -> RequestRecord:
    return RequestRecord(spec.request_id, arrival_s, prompt_tokens=3, output_tokens=4,
                         warmup=warmup)


class _VirtualSelector(selectors.SelectSelector):
    """Nothing ready: the clock jumps to the next timer instead of waiting for it."""

    def __init__(self, loop: _VirtualTimeLoop) -> None:
        super().__init__()
        self.loop = loop

    def select(self, timeout: float | None = None):  # type: ignore[override]
        ready = super().select(0)
        if not ready and timeout is None:
            raise RuntimeError("nothing scheduled: the loops wait for what never comes")
        if not ready and timeout:
            self.loop.now += timeout
        return ready


class _VirtualTimeLoop(asyncio.SelectorEventLoop):
    def __init__(self) -> None:
        self.now = 0.0
        super().__init__(_VirtualSelector(self))

    def time(self) -> float:
        return self.now


class _FixedServe:
    """A `Serve` whose requests take SERVICE_S; `sent`: (request id, seconds) in order."""

    def __init__(self, loop: _VirtualTimeLoop) -> None:
        self.loop = loop
        self.sent: list[tuple[int, float]] = []

    async def __call__(self, spec: RequestSpec, warmup: bool,
                       arrival_s: float | None = None) -> RequestRecord:
        now = self.loop.time()
        self.sent.append((spec.request_id, now))
        record = _record(spec, warmup, now if arrival_s is None else arrival_s)
        await asyncio.sleep(SERVICE_S[spec.request_id])
        record.finish_s = self.loop.time()
        return record


class _FixedClock(VirtualClock):
    """The virtual clock with no engine: each request ends SERVICE_S after it is sent."""

    def __init__(self) -> None:
        super().__init__(SimpleNamespace(has_work=False), model=None)  # type: ignore[arg-type]
        self.sent: list[tuple[int, float]] = []

    def submit(self, spec, warmup, arrival_s, on_end) -> None:
        self.sent.append((spec.request_id, self.now))
        record = _record(spec, warmup, self.now if arrival_s is None else arrival_s)

        def end() -> None:
            record.finish_s = self.now
            on_end(record)

        self.at(self.now + SERVICE_S[spec.request_id], end)


def _on_asyncio(script: ClientScript, monkeypatch) -> tuple[list, list[RequestRecord]]:
    loop = _VirtualTimeLoop()
    monkeypatch.setattr(loops, "now", loop.time)  # the loops' clock: the loop's
    serve = _FixedServe(loop)
    try:
        if script.concurrency is None:
            run = loops.open_loop(serve, script, 0.0)
        else:
            run = loops.closed_loop(serve, script)
        records = loop.run_until_complete(run)
    finally:
        loop.close()
    return serve.sent, records


def _on_virtual_clock(script: ClientScript) -> tuple[list, list[RequestRecord]]:
    clock = _FixedClock()
    return clock.sent, play(clock, script)


def _same(script: ClientScript, monkeypatch) -> tuple[list, dict[int, RequestRecord]]:
    """Both players' sends (the same, in order) and records by id (the same)."""
    sent, records = _on_asyncio(script, monkeypatch)
    v_sent, v_records = _on_virtual_clock(script)
    assert [i for i, _ in sent] == [i for i, _ in v_sent]
    assert [t for _, t in sent] == pytest.approx([t for _, t in v_sent], abs=1e-6)
    by_id = {r.request_id: r for r in records}
    v_by_id = {r.request_id: r for r in v_records}
    assert sorted(by_id) == sorted(v_by_id)
    for i, r in by_id.items():
        v = v_by_id[i]
        assert r.warmup == v.warmup
        assert (r.arrival_s, r.finish_s) == pytest.approx((v.arrival_s, v.finish_s), abs=1e-6)
    return sent, by_id


def _level() -> list[RequestSpec]:
    """2 warm-up singles, then a 3-turn conversation (think 25 ms), singles, a 2-turn one
    (think 7 ms)."""
    return [_spec(0), _spec(1),
            _spec(2, conversation=5, turn=0), _spec(3, conversation=5, turn=1, think_s=0.025),
            _spec(4, conversation=5, turn=2, think_s=0.025),
            _spec(5), _spec(6),
            _spec(7, conversation=6, turn=0), _spec(8, conversation=6, turn=1, think_s=0.007),
            _spec(9), _spec(10)]


def _warm_up_ends_first(sent: list[tuple[int, float]], records: dict[int, RequestRecord]) -> None:
    warm_end = max(r.finish_s for r in records.values() if r.warmup)
    first_measured = min(t for i, t in sent if not records[i].warmup)
    assert first_measured >= warm_end


def test_closed_loop_plays_the_same_on_both_clocks(monkeypatch):
    script = level_script(_level(), 2, 2, ramp=("linear", 0.004))
    assert script.starts == [0.0, 0.002]
    sent, records = _same(script, monkeypatch)
    _warm_up_ends_first(sent, records)
    at = dict(sent)
    assert at[3] == pytest.approx(records[2].finish_s + 0.025)  # think time after the end
    assert at[4] == pytest.approx(records[3].finish_s + 0.025)
    assert at[8] == pytest.approx(records[7].finish_s + 0.007)
    warm_end = max(records[0].finish_s, records[1].finish_s)
    assert at[2] == pytest.approx(warm_end)  # client 0 at once, client 1 2 ms in (the ramp)
    assert at[5] == pytest.approx(warm_end + 0.002)


def test_closed_loop_least_stops_the_feed_on_both_clocks(monkeypatch):
    specs = [_spec(i) for i in range(12)]
    script = level_script(specs, 0, 2, least=(4, 0.05))
    sent, _ = _same(script, monkeypatch)
    assert 4 <= len(sent) < 12


def test_open_loop_plays_the_same_on_both_clocks(monkeypatch):
    offsets = [0.0, 0.004, 0.100, 0.102, 0.103, 0.110, 0.150, 0.151, 0.160, 0.200, 0.230]
    specs = [replace(s, arrival_s=t) for s, t in zip(_level(), offsets)]
    sent, records = _same(ClientScript(specs, 2, None), monkeypatch)
    _warm_up_ends_first(sent, records)
    at = dict(sent)
    # turn 1 was due 2 ms after turn 0 began: held, sent 25 ms after turn 0 ended
    assert at[3] == pytest.approx(records[2].finish_s + 0.025)
    assert records[3].arrival_s == pytest.approx(at[3])
    assert at[5] - at[2] == pytest.approx(0.110 - 0.100)  # a single at its offset
    assert at[10] - at[2] == pytest.approx(0.230 - 0.100)  # its offset, not held


def test_a_turn_whose_earlier_turns_are_not_in_the_level_goes_at_its_offset(monkeypatch):
    """A level's slice of a multi-turn file may start inside a conversation."""
    specs = [_spec(0, conversation=3, turn=2, arrival_s=0.0),
             _spec(1, conversation=3, turn=3, arrival_s=0.001, think_s=0.02),
             _spec(2, arrival_s=0.003)]
    sent, records = _same(ClientScript(specs, 0, None), monkeypatch)
    assert [i for i, _ in sent] == [0, 2, 1]
    assert dict(sent)[1] == pytest.approx(records[0].finish_s + 0.02)


def test_conversations_keep_their_turns_together():
    specs = _level()
    assert [[s.request_id for s in g] for g in conversations(iter(specs))] == [
        [0], [1], [2, 3, 4], [5], [6], [7, 8], [9], [10]]


def test_held_turns_release_the_next_turn_once_the_previous_ends():
    specs = _level()
    held: HeldTurns[str] = HeldTurns(specs)
    assert not held.waits(specs[2]) and held.waits(specs[3])
    held.hold(specs[3], "turn 1")
    assert held.end(specs[2]) == "turn 1"
    assert not held.waits(specs[3]) and held.end(specs[3]) is None
