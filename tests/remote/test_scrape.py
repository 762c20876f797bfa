"""Prometheus text -> the vLLM metrics a remote level reads; gauges, counter deltas."""

from __future__ import annotations

import asyncio
import time

from perfkit.remote.scrape import Scraper, Snapshot, parse_metrics, summarise

TEXT = """\
# HELP vllm:num_preemptions_total Preemptions.
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{model_name="m",engine="0"} 3
vllm:num_preemptions_total{model_name="m",engine="1"} 2.0
vllm:num_preemptions_created{model_name="m"} 1.7e9
vllm:kv_cache_usage_perc{model_name="a {b} c",engine="0"} 0.5
vllm:kv_cache_usage_perc{model_name="m",engine="1"} 0.25 1712345678000
vllm:prefix_cache_queries_total{model_name="m"} 100
vllm:prefix_cache_hits{model_name="m"} 40
vllm:num_requests_running 4
vllm:num_requests_waiting NaN
vllm:other_metric 9
"""


def test_parse_metrics_names_labels_and_suffixes():
    values = parse_metrics(TEXT)
    assert values["vllm:num_preemptions"] == [3.0, 2.0]  # `_total` dropped, one per label set
    assert values["vllm:kv_cache_usage_perc"] == [0.5, 0.25]  # braces inside a label value
    assert values["vllm:prefix_cache_queries"] == [100.0]
    assert values["vllm:prefix_cache_hits"] == [40.0]
    assert "vllm:num_requests_waiting" not in values  # NaN dropped
    assert "vllm:other_metric" not in values and "vllm:num_preemptions_created" not in values


def test_snapshot_sums_counters_and_averages_kv_usage():
    snap = Snapshot.of(TEXT, 1.5)
    assert snap.preemptions == 5 and snap.kv_usage == 0.375 and snap.running == 4
    assert snap.waiting is None and snap.prefix_queries == 100 and snap.prefix_hits == 40


def test_old_vllm_names_are_read():
    snap = Snapshot.of("vllm:gpu_cache_usage_perc 0.9\nvllm:gpu_prefix_cache_hits_total 7\n", 0)
    assert snap.kv_usage == 0.9 and snap.prefix_hits == 7


def snap(t, kv, pre, queries, hits):
    return Snapshot(t, kv, 1.0, 0.0, pre, queries, hits)


def test_summarise_deltas_and_gauges():
    base = snap(0, 0.1, 2, 100, 10)
    snaps = [snap(0.5, 0.6, 3, 150, 20), snap(1.0, 0.9, 4, 300, 70)]
    m = summarise("u", snaps, base, snaps[-1], 0)
    assert m.available and m.preemptions == 2 and m.prefix_queries == 200
    assert m.prefix_hits == 60 and m.prefix_hit_rate == 0.3
    assert m.kv_usage_peak == 0.9 and abs(m.kv_usage_mean - 0.75) < 1e-12
    assert m.timeline["t_s"] == [0.5, 1.0] and m.peak_running == 1


def test_summarise_counter_reset_and_nothing_scraped():
    m = summarise("u", [snap(1, 0.1, 0, 0, 0)], snap(0, 0.1, 5, 9, 9), snap(1, 0.1, 0, 0, 0), 0)
    assert m.preemptions is None and m.prefix_hit_rate is None  # the server restarted
    dead = summarise("u", [], None, None, 3)
    assert not dead.available and dead.num_failed == 3 and "no scrape" in dead.reason


def _counting_metrics(server_stub):
    counter = {"n": 0}

    def metrics() -> str:
        counter["n"] += 1
        return (f"vllm:num_preemptions_total {counter['n']}\n"
                f"vllm:kv_cache_usage_perc {counter['n'] / 10}\n")

    server = server_stub(metrics=metrics)
    return counter, server.url.removesuffix("/v1") + "/metrics"


def test_scraper_polls_a_live_endpoint(stub):
    counter, url = _counting_metrics(stub)
    scraper = Scraper(url, time.perf_counter(), interval_s=0.05)
    scraper.start()  # baseline: n = 1
    time.sleep(0.3)
    m = scraper.stop()
    assert m.available and m.num_failed == 0 and m.num_scrapes >= 3
    assert m.preemptions == counter["n"] - 1
    assert m.kv_usage_peak == counter["n"] / 10


def test_scraper_keeps_its_rate_while_the_event_loop_is_blocked(stub):
    """Its own thread: a load generator busy in its event loop cannot starve it."""
    _, url = _counting_metrics(stub)

    async def busy_loop() -> None:
        time.sleep(0.5)  # blocks the loop, as a saturated client does

    scraper = Scraper(url, time.perf_counter(), interval_s=0.05)
    scraper.start()
    asyncio.run(busy_loop())
    m = scraper.stop()
    assert m.num_scrapes >= 5  # ~10 at 20 Hz; an in-loop poller gets 1


def test_mark_restarts_the_baseline_and_timeline(stub):
    counter, url = _counting_metrics(stub)
    scraper = Scraper(url, time.perf_counter(), interval_s=0.05)
    scraper.start()
    time.sleep(0.2)
    scraper.mark()
    time.sleep(0.2)
    before_stop = counter["n"]
    m = scraper.stop()
    assert 0 < m.preemptions < before_stop  # counted from the mark, not from the start
