"""The remote p99 cause from the server's spans: the dominant part is named with its
numbers and fix, a level where none dominates gets the shares, and a level that joined
too few requests is a warning with the reason."""

from __future__ import annotations

from dataclasses import replace

from levels import level

from perfkit.config.profile import load_profile
from perfkit.result.client_tail import ClientTailGroup, ClientTailSection
from perfkit.result.level import LevelResult
from perfkit.result.server_traces import ServerSplit, ServerTraces
from perfkit.summary.server_findings import server_tail_cause, server_traces_unjoined

PROFILE = load_profile("default")


def split(window: float, queue: float | None = None, prefill: float | None = None,
          decode: float | None = None, api: float = 0.0, out: float = 0.0) -> ServerSplit:
    return ServerSplit(num_joined=2, window_s=window, queue_s=queue, prefill_s=prefill,
                       decode_s=decode, api_server_s=api, outside_server_s=out)


def group(metric: str, which: str, p: float, server: ServerSplit) -> ClientTailGroup:
    return ClientTailGroup(metric, which, p, 2, ttft_s=0.0, decode_s=0.0, median_gap_s=None,
                           num_stalls=0, stall_s=0, server=server)


def traced(c: int, ttft: tuple[ServerSplit, ServerSplit], tpot: tuple[ServerSplit, ServerSplit],
           joined: int = 64, requests: int = 64) -> LevelResult:
    groups = [group("ttft", "tail", ttft[0].window_s, ttft[0]),
              group("ttft", "median", ttft[1].window_s, ttft[1]),
              group("tpot", "tail", tpot[0].window_s, tpot[0]),
              group("tpot", "median", tpot[1].window_s, tpot[1])]
    st = ServerTraces(available=True, reason="", receiver="127.0.0.1:4318", requests=requests,
                      joined=joined, by_trace_id=joined, by_request_id=0, wait_s=0.2,
                      spans=joined, over_client_e2e=0)
    return replace(level({"concurrency": c}), client_tail=ClientTailSection(4.0, 0.002, "token",
                   groups), server_traces=st)


CALM_TPOT = (split(0.010, decode=0.009, out=0.001), split(0.009, decode=0.008, out=0.001))


def test_queue_named_at_the_level_with_the_highest_p99() -> None:
    low = traced(8, (split(0.100, queue=0.010, prefill=0.080, out=0.010),
                     split(0.090, queue=0.0, prefill=0.080, out=0.010)), CALM_TPOT)
    high = traced(64, (split(0.455, queue=0.412, prefill=0.030, api=0.003, out=0.010),
                       split(0.060, queue=0.020, prefill=0.030, out=0.010)), CALM_TPOT)
    found = {f.id: f for f in server_tail_cause([low, high], PROFILE)}
    f = found["server_p99_ttft_queue"]
    assert f.severity == "warning" and f.evidence["level"] == "concurrency 64"
    assert "p99 TTFT at concurrency 64 is mostly the server's queue: 412.0 of 455.0 ms" \
        in f.message
    assert "--max-num-seqs" in f.fix
    assert found["server_p99_tpot_decode"].severity == "info"  # tail not 2x the median


def test_outside_the_engine_splits_api_and_network() -> None:
    lv = traced(2, (split(0.200, queue=0.0, prefill=0.010, api=0.006, out=0.184),
                    split(0.080, queue=0.0, prefill=0.010, api=0.005, out=0.065)),
                (split(0.060, decode=0.008, api=0.0, out=0.052),
                 split(0.045, decode=0.008, out=0.037)))
    found = {f.id: f for f in server_tail_cause([lv], PROFILE)}
    f = found["server_p99_ttft_outside_engine"]
    assert "190.0 of 200.0 ms" in f.message
    assert "API process 6.0 ms, between the server and perfkit 184.0 ms" in f.message
    assert "52.0 of 60.0 ms per output token" in found["server_p99_tpot_outside_engine"].message
    assert "proxy" in f.fix


def test_no_dominant_part_gives_shares() -> None:
    lv = traced(4, (split(0.100, queue=0.040, prefill=0.040, out=0.020),
                    split(0.090, queue=0.030, prefill=0.040, out=0.020)), CALM_TPOT)
    f = next(f for f in server_tail_cause([lv], PROFILE) if "ttft" in f.id)
    assert f.id == "server_p99_ttft_mixed" and f.severity == "info"
    assert "the server's queue 40%" in f.message


def test_too_few_joined_requests_name_nothing() -> None:
    lv = traced(4, (split(0.455, queue=0.412), split(0.06, queue=0.02)), CALM_TPOT, joined=10,
                requests=10)
    assert server_tail_cause([lv], PROFILE) == []


def test_unjoined_level_is_a_warning_with_the_reason() -> None:
    lv = traced(4, (split(0.1, queue=0.05), split(0.1, queue=0.05)), CALM_TPOT, joined=60)
    lv = replace(lv, server_traces=replace(lv.server_traces, reason="4 of 64 requests not "  # type: ignore[type-var]
                                           "joined after waiting 10.0 s: spans arrived late"))
    [f] = server_traces_unjoined([lv], PROFILE)
    assert f.id == "server_traces_unjoined" and "60 of 64 requests" in f.message
    assert "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf" in f.fix
    assert server_traces_unjoined([traced(4, (split(0.1), split(0.1)), CALM_TPOT)],
                                  PROFILE) == []
    off = replace(lv, server_traces=ServerTraces.unavailable("unavailable: no --server-traces"))
    assert server_traces_unjoined([off], PROFILE) == []
