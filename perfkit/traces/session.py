"""OpenTelemetry around one sweep: the receiver of the server's spans (--server-traces),
started before level 1 and stopped after the last, and the export of perfkit's own spans
(--otlp-export) after each level.

    with open_traces(options, remote=True) as traces:      # run/level_loop.py, run/search.py
        ... a remote level runs ...
        traces.join(records, percentiles) -> LevelTraces   # remote/driver.py, after a level
        traces.export(level) -> LevelResult                # run/level_loop.py, after a level
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace

from perfkit import clock
from perfkit.errors import PerfkitError
from perfkit.records import RequestRecord
from perfkit.result.level import LevelResult
from perfkit.traces import otlp
from perfkit.traces.join import WAIT_S, LevelTraces, join_level
from perfkit.traces.receiver import Receiver, parse_address
from perfkit.urls import check_url

NO_TRACES = ("unavailable: no --server-traces (start the server with OpenTelemetry tracing "
             "to an OTLP/HTTP endpoint and pass --server-traces PORT)")
MAX_WAIT_S = 600.0


@dataclass(frozen=True)
class TraceOptions:
    """The sweep's OpenTelemetry options, as given."""

    server_traces: str | None = None  # --server-traces [HOST:]PORT
    otlp_export: str | None = None  # --otlp-export URL
    wait_s: float = WAIT_S  # --server-traces-wait: the bound on waiting for late spans


class TraceSession:
    def __init__(self, receiver: Receiver | None, export_url: str | None, wait_s: float
                 ) -> None:
        self.receiver = receiver
        self.export_url = export_url
        self.wait_s = wait_s
        self._spans_seen = 0  # the store's request-span count after the last join

    def join(self, records: Sequence[RequestRecord], percentiles: Sequence[float] = ()
             ) -> LevelTraces | None:
        """None without a receiver (the level says why: NO_TRACES)."""
        if self.receiver is None:
            return None
        store = self.receiver.store
        out = join_level(records, store, self.receiver.address, self.wait_s, percentiles,
                         self._spans_seen)
        self._spans_seen = store.request_spans
        return out

    def export(self, level: LevelResult) -> LevelResult:
        if self.export_url is None:
            return level
        from perfkit.traces.export import export_level

        sent = export_level(level, self.export_url, time.time() - clock.now())
        return replace(level, otlp_export=sent)


def check(opts: TraceOptions, remote: bool) -> None:
    """Every problem before level 1, one line each (exit 2)."""
    if opts.server_traces is not None and not remote:
        raise PerfkitError("--server-traces needs --target URL (a server that exports spans)")
    if not 0 <= opts.wait_s <= MAX_WAIT_S:
        raise PerfkitError(f"--server-traces-wait: expected 0..{MAX_WAIT_S:g} seconds, got "
                           f"{opts.wait_s:g}")
    if opts.otlp_export is not None:
        check_url(opts.otlp_export, "--otlp-export")
        otlp.require("--otlp-export")
    if opts.server_traces is not None:
        parse_address(opts.server_traces)
        otlp.require("--server-traces")


@contextmanager
def open_traces(opts: TraceOptions | None, remote: bool) -> Iterator[TraceSession]:
    """A session whose receiver (when asked for) listens until the block ends."""
    opts = opts or TraceOptions()
    check(opts, remote)
    receiver = None
    if opts.server_traces is not None:
        receiver = Receiver(*parse_address(opts.server_traces)).start()
    try:
        yield TraceSession(receiver, opts.otlp_export, opts.wait_s)
    finally:
        if receiver is not None:
            receiver.stop()

