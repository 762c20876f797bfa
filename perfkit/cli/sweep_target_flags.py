"""`perfkit sweep`'s options for a running server (--target, its companions, the server's
traces), declared once as `Annotated` aliases named as the option; perfkit's side:
sweep_flags.py. Most of them need --target (SweepOptions.check()); --tokenizer also reads
--dataset's text, --otlp-export also sends an in-process sweep's spans."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

Target = Annotated[str | None, typer.Option(
    help="Sweep a running OpenAI-compatible server instead, e.g. "
    "http://127.0.0.1:8000/v1 (streaming /completions).")]

ApiKeyEnv = Annotated[str | None, typer.Option(
    help="With --target: read the API key from this environment variable.")]

Timeout = Annotated[float | None, typer.Option(
    help="With --target: seconds without a byte from the server before a request "
    "fails as a timeout (default 60).")]

ScrapeMetrics = Annotated[str | None, typer.Option(
    help="With --target: the server's Prometheus URL, polled during each level "
    "(KV usage, preemptions, prefix hits; vLLM names).")]

Tokenizer = Annotated[Path | None, typer.Option(
    help="A local Hugging Face tokenizer (DIR/tokenizer.json). With --target: prompts "
    "go as text of exactly the workload's token counts, for servers that take no "
    "token ids; with --dataset: how text records become tokens.")]

Endpoint = Annotated[str | None, typer.Option(
    help="With --target: completions (default) or chat (/v1/chat/completions).")]

ServerProfile = Annotated[str | None, typer.Option(
    help="With --target: run the server's own profiler (POST /start_profile, "
    "/stop_profile) around these levels' measured phases, e.g. 8 or 8,rate-4 or all "
    "(vLLM: start it with --profiler-config.profiler=torch "
    "--profiler-config.torch_profiler_dir=DIR).")]

ServerProfileDir = Annotated[Path | None, typer.Option(
    help="With --server-profile: the server's profiler folder, when this machine can "
    "read it; perfkit lists the trace files each profiled level wrote.")]

Workers = Annotated[str | None, typer.Option(
    help="With --target: load-generating processes, each with its own event loop and "
    "share of the clients, N or auto (from the cores and the load; the output says what "
    "it chose). Default: 1, in perfkit's own process.")]

Ray = Annotated[str | None, typer.Option(
    help="With --target: run the workers as Ray actors over a cluster's nodes: local, "
    "auto (the cluster this machine joined) or its address (pip install "
    "'perfkit[ray]').")]

WorkersPerNode = Annotated[int | None, typer.Option(
    help="With --ray: workers on each alive node (instead of --workers in all).")]

ServerTraces = Annotated[str | None, typer.Option(
    help="With --target: receive the server's OpenTelemetry request spans on "
    "[HOST:]PORT (OTLP/HTTP protobuf; HOST 127.0.0.1 unless given) and join them with "
    "perfkit's requests: the server's queue, prefill, decode and the time outside the "
    "engine, per request and for the p99 requests (vLLM: --otlp-traces-endpoint "
    "http://127.0.0.1:PORT/v1/traces, env OTEL_EXPORTER_OTLP_TRACES_PROTOCOL="
    "http/protobuf). Needs pip install 'perfkit[traces]'.")]

ServerTracesWait = Annotated[float, typer.Option(
    help="With --server-traces: seconds a level waits at most, after its last request, "
    "for spans still on their way (exporters send in batches).")]

OtlpExport = Annotated[str | None, typer.Option(
    help="Send perfkit's own per-request spans (client phases; in-process the engine's "
    "phases and steps) to this OTLP/HTTP collector, e.g. http://127.0.0.1:4318 (Jaeger, "
    "Tempo): a remote request's spans share the trace of the server's. Needs pip "
    "install 'perfkit[traces]'.")]
