"""The load generator measured against a server of known timing (loadgen/stream_server.py).

The server streams every response at a fixed pace: its first chunk `ttft_s` after the
request, then one every `gap_s`. Whatever a client reads beyond that pace is error: its
own (a busy event loop, late sends) or the server's (it measures how late it wrote each
chunk, and says so). For each concurrency x workers cell, one closed-loop level through
`perfkit sweep --target`'s own path, and:

  TTFT and ITL p50/p99 against the known ttft and gap (ITL: none when the client read too
  many chunks together to time their gaps), delivered concurrency, chunks per client
  CPU-second and client CPU per chunk (measured phase only: start-up left out), the
  server's own lateness, and whether the cell is within the bounds:
    TTFT p50 <= 1.6 x ttft, TTFT p99 <= 2.5 x ttft, ITL p50 within 5% of gap,
    ITL p99 <= 1.6 x gap, delivered concurrency within 5%
  (at ttft 20 ms and gap 10 ms: 32 / 50 ms, 10 +- 0.5 ms, 16 ms). They leave room for the
  server's own timers on the same cores: a minimal compiled client against a server of
  this timing at c=256 on 2 cores read TTFT 29 / 41.5 ms and ITL p99 13.8 ms.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from perfkit.loadgen.stream_server import Timing

TTFT_P50_X, TTFT_P99_X, ITL_P50_TOL, ITL_P99_X, LOAD_TOL = 1.6, 2.5, 0.05, 1.6, 0.05
PROMPT_TOKENS = 32


@dataclass(frozen=True)
class Cell:
    """One concurrency x workers run against the server (times in seconds)."""

    concurrency: int
    workers: str  # as asked: "1", "2", "auto"
    workers_used: int
    ttft_p50_s: float | None
    ttft_p99_s: float | None
    itl_p50_s: float | None  # None: ITL not measured (chunks read together)
    itl_p99_s: float | None
    coalesced_share: float | None
    delivered: float | None  # achieved / configured concurrency
    chunks: int
    chunks_per_cpu_s: float | None
    cpu_per_chunk_s: float | None
    busiest_cpu_share: float
    server_late_p50_s: float | None
    server_late_p99_s: float | None
    within: bool
    misses: list[str]  # the bounds it missed, in words


def misses(cell: dict[str, Any], timing: Timing) -> list[str]:
    """The bounds a cell's figures miss (empty: within every bound)."""
    out = []
    ttft, gap = timing.ttft_s, timing.gap_s
    checks = [("TTFT p50", cell["ttft_p50_s"], lambda v: v <= TTFT_P50_X * ttft),
              ("TTFT p99", cell["ttft_p99_s"], lambda v: v <= TTFT_P99_X * ttft),
              ("ITL p50", cell["itl_p50_s"], lambda v: abs(v / gap - 1) <= ITL_P50_TOL),
              ("ITL p99", cell["itl_p99_s"], lambda v: v <= ITL_P99_X * gap),
              ("delivered", cell["delivered"], lambda v: abs(v - 1) <= LOAD_TOL)]
    for name, value, ok in checks:
        if value is None:
            out.append(f"{name} not measured")
        elif not ok(value):
            out.append(name)
    return out


class KnownTimingServer:
    """The stream server in a process of its own (as a real server would be)."""

    def __init__(self, timing: Timing) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "perfkit.loadgen.stream_server", "--port", "0",
             "--ttft", str(timing.ttft_s), "--gap", str(timing.gap_s),
             "--tokens", str(timing.tokens)],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().decode()
        if not line.startswith("listening on "):
            self.proc.kill()
            raise RuntimeError(f"the stream server did not start: {line!r}")
        self.root = "http://" + line.split()[-1]
        self.pid = self.proc.pid

    def call(self, method: str, path: str) -> dict[str, Any]:
        req = urllib.request.Request(self.root + path, method=method,
                                     data=b"" if method == "POST" else None)
        with urllib.request.urlopen(req, timeout=10) as resp:
            return dict(json.loads(resp.read()))

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait(5)


def _profile(concurrency: int, tokens: int, per_client: int) -> Any:
    from perfkit.config.profile import Overrides, load_profile

    sets = (f"sweep.concurrency=[{concurrency}]", "sweep.rates=[]",
            f"sweep.warmup={concurrency}", f"sweep.min_requests_per_client={per_client}",
            f"workload.num_requests={concurrency * per_client}",
            f"workload.prompt_len={{kind='fixed', mean={PROMPT_TOKENS}, "
            f"min={PROMPT_TOKENS}, max={PROMPT_TOKENS}}}",
            f"workload.output_len={{kind='fixed', mean={tokens}, min={tokens}, max={tokens}}}",
            f"engine.max_model_len={PROMPT_TOKENS + tokens}")
    return load_profile("default", Overrides(sets=sets))


def run_cell(server: KnownTimingServer, timing: Timing, concurrency: int, workers: str,
             per_client: int) -> Cell:
    from perfkit.remote.options import TargetOptions
    from perfkit.run import run_sweep

    server.call("POST", "/stats/reset")
    result = run_sweep(_profile(concurrency, timing.tokens, per_client), samplers=False,
                       target=TargetOptions(server.root + "/v1", workers=workers))
    late = server.call("GET", "/stats")
    lv = result.levels[0]
    client, stream, lat = lv.client, lv.stream, lv.latency
    assert client is not None and stream is not None
    fig: dict[str, Any] = {
        "ttft_p50_s": lat.ttft.p50, "ttft_p99_s": lat.ttft.p99,
        "itl_p50_s": lat.itl.p50 if lat.itl.count else None,
        "itl_p99_s": lat.itl.p99 if lat.itl.count else None,
        "delivered": None if client.load_error is None else 1 + client.load_error}
    missed = misses(fig, timing)
    return Cell(concurrency, workers, client.workers, coalesced_share=stream.coalesced_share,
                chunks=client.chunks or 0,
                chunks_per_cpu_s=(client.chunks / client.cpu_s if client.chunks and
                                  client.cpu_s > 0 else None),
                cpu_per_chunk_s=client.cpu_per_chunk_s, busiest_cpu_share=client.cpu_share,
                server_late_p50_s=late.get("late_p50_s"),
                server_late_p99_s=late.get("late_p99_s"),
                within=not missed, misses=missed, **fig)


def bench_loadgen(concurrencies: list[int], workers: list[str], timing: Timing,
                  per_client: int = 4, progress: Callable[[str], None] = print
                  ) -> dict[str, Any]:
    """Every concurrency x workers cell against one known-timing server."""
    from perfkit.result.codec import to_json

    server = KnownTimingServer(timing)
    cells = []
    try:
        for c in concurrencies:
            for w in workers:
                progress(f"loadgen: concurrency {c}, --workers {w} ...")
                cells.append(run_cell(server, timing, c, w, per_client))
    finally:
        server.close()
    passing = [cell.concurrency for cell in cells if cell.within]
    return {"timing": {"ttft_s": timing.ttft_s, "gap_s": timing.gap_s,
                       "tokens": timing.tokens},
            "cells": [to_json(cell) for cell in cells],
            "highest_within": max(passing, default=None)}
