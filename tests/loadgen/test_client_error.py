"""The client's own error: delivered concurrency and rate, lateness, coalesced chunks, and
the findings that read them."""

from __future__ import annotations

from dataclasses import replace

import pytest
from levels import level as typed_level

from perfkit.config.profile import Overrides, load_profile
from perfkit.loadgen.overhead import achieved_concurrency, level_overhead
from perfkit.records import RequestRecord
from perfkit.remote.stream import stream_stats
from perfkit.result.level import LevelResult
from perfkit.result.point import LoadPoint
from perfkit.result.remote import LostWorker, WorkerCost
from perfkit.summary.client_rules import client_bound, load_not_delivered, workers_needed
from perfkit.summary.latency import level_latency


def rec(rid: int, sent: float, end: float, due: float | None = None,
        times: list[float] | None = None, coalesced: int = 0) -> RequestRecord:
    r = RequestRecord(rid, arrival_s=sent if due is None else due, prompt_tokens=3,
                      output_tokens=len(times or [end]), sent_s=sent, finish_s=end,
                      finish_reason="length", coalesced_chunks=coalesced)
    r.token_times_s = times or [end]
    r.first_token_s = r.token_times_s[0]
    return r


def test_achieved_concurrency_counts_in_flight_between_the_cth_send_and_the_last():
    # two clients; client A: [0, 1] then [1, 2]; client B: [0.5, 2.5] -> window [0.5, 1]
    recs = [rec(0, 0.0, 1.0), rec(1, 0.5, 2.5), rec(2, 1.0, 2.0)]
    assert achieved_concurrency(recs, 2) == pytest.approx(2.0)
    # a gap of 0.25 s before A's second request: 1.75 in flight on average over [0.5, 1.25]
    recs = [rec(0, 0.0, 1.0), rec(1, 0.5, 2.5), rec(2, 1.25, 2.0)]
    assert achieved_concurrency(recs, 2) == pytest.approx(1.0 + 0.5 / 0.75)
    assert achieved_concurrency(recs[:2], 2) is None  # no window: fewer than C + 1 sends
    assert achieved_concurrency(recs, None) is None  # an open loop has no configured C


def cost(**kw) -> WorkerCost:
    base = dict(index=0, host="h", pid=7, loop="uvloop", clients=4, requests=10, chunks=100,
                cpu_s=0.2, wall_s=1.0, cpu_share=0.2, cpu_per_chunk_s=0.002,
                loop_lag={"p99": 0.001}, send_late={"p99": 0.001}, achieved_concurrency=4.0,
                coalesced_chunks=0, clock_offset_s=None, clock_error_s=None)
    return WorkerCost(**(base | kw))


def level(point: LoadPoint, costs: list[WorkerCost], records=(), lost=()) -> LevelResult:
    lv = typed_level({"concurrency": point.concurrency, "rate": point.rate, "repeat": 0,
                      "counts": {"preemptions": 0}})
    return replace(lv, client=level_overhead(point, costs, list(records), [0.001], "",
                                             lost, cores=2))


def test_client_bound_names_the_worker_and_the_workers_that_would_not():
    point = LoadPoint(concurrency=512)
    lv = level(point, [cost(cpu_share=0.99, loop_lag={"p99": 0.045}, clients=512)])
    [f] = client_bound([lv], load_profile("default", Overrides()))
    assert "worker 0 of 1 (pid 7 on h) used 99% of a core" in f.message
    assert "45.0 ms late" in f.message
    assert "--workers 2" in f.fix and "--ray" not in f.fix
    assert f.evidence["workers_needed"] == 2
    hot = level(point, [cost(cpu_share=0.99), cost(index=1, cpu_share=0.9)])
    assert workers_needed(hot.client) == 4  # 1.89 cores at half a core each
    assert "more than the 2 cores" in client_bound([hot], load_profile("default",
                                                                         Overrides()))[0].fix
    calm = level(point, [cost(), cost(index=1)])
    assert client_bound([calm], load_profile("default", Overrides())) == []


def test_load_not_delivered_past_five_percent():
    prof = load_profile("default", Overrides())
    short = level(LoadPoint(concurrency=4), [cost(achieved_concurrency=3.6)])
    [f] = load_not_delivered([short], prof)
    assert "3.6 requests in flight on average against 4 clients: -10.0%" in f.message
    assert load_not_delivered([level(LoadPoint(concurrency=4),
                                     [cost(achieved_concurrency=3.9)])], prof) == []


def test_open_loop_rate_against_its_schedule():
    recs = [rec(i, 0.002 + i * 0.11, 1.0 + i, due=i * 0.1) for i in range(11)]
    lv = level(LoadPoint(rate=10.0), [cost(clients=None, achieved_concurrency=None)], recs)
    c = lv.client
    assert c.scheduled_rate == pytest.approx(10.0) and c.achieved_rate == pytest.approx(1 / 0.11)
    assert c.load_error == pytest.approx(10 / 11 - 1)
    assert c.send_late["max"] == pytest.approx(0.102)  # the last: 1.102 s for 1.0 s


def test_lost_workers_make_the_level_incomplete():
    lv = level(LoadPoint(concurrency=4), [cost()], lost=[LostWorker(1, "h", 9, "gone", 3)])
    assert lv.client.workers == 2 and not lv.client.complete


def test_coalesced_gaps_leave_itl_and_past_five_percent_void_it():
    """Chunks one read returned share its time: their zero gaps are not ITL samples; when
    too many gaps were untimed, the level reports no ITL and says whose doing it was."""
    fine = rec(0, 0.0, 0.04, times=[0.01, 0.02, 0.03, 0.04])
    read_together = rec(1, 0.0, 0.05, times=[0.01, 0.05, 0.05, 0.05], coalesced=2)
    itl = level_latency([fine, read_together]).itl
    assert itl.count == 4 and itl.min == pytest.approx(0.01)  # the two zero gaps left out
    st = stream_stats([fine, read_together], lag_p99_s=0.04)
    assert st.coalesced_chunks == 2 and st.coalesced_share == pytest.approx(2 / 6)
    assert not st.itl_measured and "add --workers" in st.itl_reason
    assert "the server" in stream_stats([fine, read_together], 0.0001).itl_reason
    assert stream_stats([fine]).itl_measured
