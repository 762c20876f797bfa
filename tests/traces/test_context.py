"""The traceparent perfkit sends: W3C format, sampled, parent id = the client span's id."""

from __future__ import annotations

import re

from perfkit.traces.context import client_span_id, new_trace_id, traceparent

W3C = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-01$")


def test_traceparent_is_w3c_and_sampled() -> None:
    trace_id = new_trace_id()
    m = W3C.match(traceparent(trace_id))
    assert m is not None
    assert m.group(1) == trace_id and m.group(2) == client_span_id(trace_id)
    assert int(m.group(1), 16) and int(m.group(2), 16)  # all-zero ids are invalid


def test_one_trace_per_request() -> None:
    assert len({new_trace_id() for _ in range(1000)}) == 1000
