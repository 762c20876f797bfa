"""The OTLP wire format: spans decoded from payloads a server's exporter would send (built
with the protobuf classes directly), perfkit's own encoding read back, and the one-line
error when the optional extra is missing."""

from __future__ import annotations

import sys

import pytest
from span_source import payload, span
from typer.testing import CliRunner

from perfkit.cli.main import app
from perfkit.errors import PerfkitError
from perfkit.traces import otlp

TRACE, SPAN, PARENT = "ab" * 16, "cd" * 8, "ef" * 8


def test_decode_reads_ids_attributes_and_service() -> None:
    attrs = {"gen_ai.request.id": "cmpl-x-0", "gen_ai.latency.e2e": 0.25,
             "gen_ai.usage.prompt_tokens": 32, "flag": True}
    [got] = otlp.decode(payload(span(TRACE, SPAN, attrs, PARENT, start_ns=5, end_ns=9)))
    assert (got.trace_id, got.span_id, got.parent_span_id) == (TRACE, SPAN, PARENT)
    assert got.attributes == attrs and got.service == "vllm" and got.name == "llm_request"
    assert (got.start_unix_ns, got.end_unix_ns, got.kind) == (5, 9, otlp.SPAN_KIND_SERVER)


def test_decode_refuses_what_is_not_otlp() -> None:
    with pytest.raises(ValueError, match="not an OTLP"):
        otlp.decode(b"\xff\xff\xff not protobuf")


def test_encode_round_trips() -> None:
    spans = [otlp.Span(TRACE, SPAN, "perfkit.request", 10, 20, PARENT, otlp.SPAN_KIND_CLIENT,
                       {"perfkit.request.id": 3, "x": 1.5, "ok": False, "s": "t"})]
    back = otlp.decode(otlp.encode(spans, "perfkit", "perfkit", "0.1"))
    assert back == [otlp.Span(TRACE, SPAN, "perfkit.request", 10, 20, PARENT,
                              otlp.SPAN_KIND_CLIENT, spans[0].attributes, "perfkit")]


@pytest.fixture
def no_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.proto.collector.trace.v1", None)


@pytest.mark.usefixtures("no_extra")
def test_missing_extra_is_one_line_naming_it() -> None:
    with pytest.raises(PerfkitError, match=r"pip install 'perfkit\[traces\]'"):
        otlp.require("--server-traces")


@pytest.mark.usefixtures("no_extra")
@pytest.mark.parametrize("flag", [["--server-traces", "4318"],
                                  ["--otlp-export", "http://127.0.0.1:4318"]])
def test_cli_without_extra_exits_2(flag: list[str]) -> None:
    # the check comes before the target is reached: none listens at this port
    res = CliRunner().invoke(app, ["sweep", "--target", "http://127.0.0.1:9/v1", *flag])
    assert res.exit_code == 2, res.output
    assert "perfkit[traces]" in res.output and "Traceback" not in res.output
