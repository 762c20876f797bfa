"""`perfkit sweep`: options -> profile -> run_sweep (perfkit.run) -> exporters."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from perfkit.cli.common import (
    ProfileOpt,
    SetOpt,
    console,
    dataset_sets,
    err_console,
    load_sets,
    parse_list,
    resolve_profile,
    user_errors,
)
from perfkit.errors import PerfkitError
from perfkit.files import check_output, check_output_dir

if TYPE_CHECKING:
    from perfkit.config.schema import Profile
    from perfkit.result.sweep import SweepResult

FORMATS = ("table", "json", "markdown", "csv")


class StopFlag:
    """SIGTERM: stop now (the level in progress is dropped, the finished ones are kept).
    First SIGINT: finish the current level, then stop. Second: stop now.

    Stopping now raises KeyboardInterrupt in the main thread, where the level's event
    loop runs: it wakes from any wait (a far open-loop arrival too), the level's tasks
    are cancelled, and run_sweep writes what was measured (complete=False)."""

    def __init__(self) -> None:
        self.requested = False

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if self.requested or signum == signal.SIGTERM:
            self.requested = True
            err_console.print("[yellow]Stopping now: the level in progress is dropped.[/]")
            raise KeyboardInterrupt
        self.requested = True
        err_console.print("[yellow]Stopping after this level (again to abort now).[/]")

    def install(self) -> None:
        signal.signal(signal.SIGINT, self)
        signal.signal(signal.SIGTERM, self)

    def __bool__(self) -> bool:
        return self.requested


def _percentile_sets(text: str | None) -> list[str]:
    if text is None:
        return []
    qs = parse_list(text, float, "--percentiles")
    if any(q >= 100 for q in qs):
        raise PerfkitError(f"--percentiles: each must be in (0, 100), got {text!r}")
    return [f"sweep.percentiles={sorted(set(qs))}"]


def _result_path(json_path: Path | None, out_dir: Path | None, force: bool,
                 report: bool) -> Path | None:
    """The result file; every file the sweep will write is checked here, before level 1."""
    from perfkit.report.exporters import OUTPUT_FILES

    path = json_path or (out_dir / "result.json" if out_dir else None)
    if out_dir is not None:
        check_output_dir(out_dir, "--out")
        for name in OUTPUT_FILES:
            check_output(out_dir / name, force, "--out")
    if path is not None:
        check_output(path, force, "--json" if json_path else "--out")
        if report:
            check_output(path.with_suffix(".html"), force, "--report")
    return path


@user_errors
def sweep(
    profile: ProfileOpt = "default",
    model: Annotated[str | None, typer.Option(
        "--model", help="Model preset (tiny, small, opt-13b, llama3-8b, llama3-70b); with "
        "--target, the served model's name instead (default: the first of GET /models).")
    ] = None,
    set_: SetOpt = None,
    concurrency: Annotated[str | None, typer.Option(
        help="Closed-loop levels, e.g. 1,2,4,8 (default: the profile's).")] = None,
    rate: Annotated[str | None, typer.Option(
        help="Open-loop levels in requests/s, e.g. 2,4,8 (poisson, or the profile's bursts).")
    ] = None,
    requests: Annotated[int | None, typer.Option(help="Measured requests per level.")] = None,
    repeats: Annotated[int | None, typer.Option(help="Runs of every level (interleaved).")] = None,
    warmup: Annotated[int | None, typer.Option(
        help="Warm-up requests per level, excluded from every metric.")] = None,
    device: Annotated[str | None, typer.Option(help="auto, cpu or cuda.")] = None,
    seed: Annotated[int | None, typer.Option(help="Workload seed.")] = None,
    percentiles: Annotated[str | None, typer.Option(
        help="Percentiles to report and gate, e.g. 50,90,95,99,99.9 (sweep.percentiles); "
        "the tables show the highest.")] = None,
    search: Annotated[bool, typer.Option(
        "--search", help="Find the highest concurrency (or rate, with --rate) whose goodput "
        "meets the profile's SLOs (slo.*, slo.goodput_share), from the first level up.")
    ] = False,
    search_max: Annotated[float | None, typer.Option(
        help="With --search: the highest load to try (default 4096 clients or 1e5 req/s).")
    ] = None,
    dataset: Annotated[Path | None, typer.Option(
        help="Requests from a file instead of the generator: ShareGPT .json, JSONL of "
        "prompts, a Mooncake trace (.jsonl) or a BurstGPT .csv (workload.dataset.path).")
    ] = None,
    json_path: Annotated[Path | None, typer.Option(
        "--json", help="Write the result here (atomically, after every level).")] = None,
    out: Annotated[Path | None, typer.Option(
        help="Folder for result.json, summary.md and levels.csv.")] = None,
    fmt: Annotated[str, typer.Option(
        "--format", help="stdout format: table, json, markdown or csv.")] = "table",
    samplers: Annotated[bool, typer.Option(
        help="Run the CPU/GC/NVML samplers (--no-samplers: wall time only).")] = True,
    force: Annotated[bool, typer.Option(help="Overwrite an existing result file.")] = False,
    stacks: Annotated[bool, typer.Option(
        "--stacks", help="Record flame-graph stacks of each level (py-spy, or a fallback).")
    ] = False,
    stack_rate: Annotated[float, typer.Option(help="Stack samples per second.")] = 100.0,
    native: Annotated[bool, typer.Option(
        help="With --stacks: add C/C++ frames (py-spy --native).")] = False,
    report: Annotated[bool, typer.Option(
        "--report", help="Also write an HTML report next to the JSON.")] = False,
    contention: Annotated[bool, typer.Option(
        "--contention", help="Trace GIL and lock waits per thread beside each level (eBPF "
        "as root with bpftrace; else sampled thread states) and read CPU counters (perf "
        "stat); names gil_contention / lock_contention.")] = False,
    target: Annotated[str | None, typer.Option(
        help="Sweep a running OpenAI-compatible server instead, e.g. "
        "http://127.0.0.1:8000/v1 (streaming /completions).")] = None,
    api_key_env: Annotated[str | None, typer.Option(
        help="With --target: read the API key from this environment variable.")] = None,
    timeout: Annotated[float | None, typer.Option(
        help="With --target: seconds without a byte from the server before a request "
        "fails as a timeout (default 60).")] = None,
    scrape_metrics: Annotated[str | None, typer.Option(
        help="With --target: the server's Prometheus URL, polled during each level "
        "(KV usage, preemptions, prefix hits; vLLM names).")] = None,
    tokenizer: Annotated[Path | None, typer.Option(
        help="A local Hugging Face tokenizer (DIR/tokenizer.json). With --target: prompts "
        "go as text of exactly the workload's token counts, for servers that take no "
        "token ids; with --dataset: how text records become tokens.")] = None,
    endpoint: Annotated[str | None, typer.Option(
        help="With --target: completions (default) or chat (/v1/chat/completions).")] = None,
    server_profile: Annotated[str | None, typer.Option(
        help="With --target: run the server's own profiler (POST /start_profile, "
        "/stop_profile) around these levels' measured phases, e.g. 8 or 8,rate-4 or all "
        "(vLLM: start it with --profiler-config.profiler=torch "
        "--profiler-config.torch_profiler_dir=DIR).")] = None,
    server_profile_dir: Annotated[Path | None, typer.Option(
        help="With --server-profile: the server's profiler folder, when this machine can "
        "read it; perfkit lists the trace files each profiled level wrote.")] = None,
    workers: Annotated[str | None, typer.Option(
        help="With --target: load-generating processes, each with its own event loop and "
        "share of the clients, N or auto (from the cores and the load; the output says what "
        "it chose). Default: 1, in perfkit's own process.")] = None,
    ray: Annotated[str | None, typer.Option(
        help="With --target: run the workers as Ray actors over a cluster's nodes: local, "
        "auto (the cluster this machine joined) or its address (pip install "
        "'perfkit[ray]').")] = None,
    workers_per_node: Annotated[int | None, typer.Option(
        help="With --ray: workers on each alive node (instead of --workers in all).")
    ] = None,
    server_traces: Annotated[str | None, typer.Option(
        help="With --target: receive the server's OpenTelemetry request spans on "
        "[HOST:]PORT (OTLP/HTTP protobuf; HOST 127.0.0.1 unless given) and join them with "
        "perfkit's requests: the server's queue, prefill, decode and the time outside the "
        "engine, per request and for the p99 requests (vLLM: --otlp-traces-endpoint "
        "http://127.0.0.1:PORT/v1/traces, env OTEL_EXPORTER_OTLP_TRACES_PROTOCOL="
        "http/protobuf). Needs pip install 'perfkit[traces]'.")] = None,
    server_traces_wait: Annotated[float, typer.Option(
        help="With --server-traces: seconds a level waits at most, after its last request, "
        "for spans still on their way (exporters send in batches).")] = 10.0,
    otlp_export: Annotated[str | None, typer.Option(
        help="Send perfkit's own per-request spans (client phases; in-process the engine's "
        "phases and steps) to this OTLP/HTTP collector, e.g. http://127.0.0.1:4318 (Jaeger, "
        "Tempo): a remote request's spans share the trace of the server's. Needs pip "
        "install 'perfkit[traces]'.")] = None,
    lockstep: Annotated[Path | None, typer.Option(
        help="Take turns with another perfkit sweep started with the same socket path "
        "(e.g. /tmp/perfkit.sock): in-process, baseline and candidate alternate every 20 "
        "ms (closed-loop levels; pauses are excluded from every timing); with --target "
        "(duet), whole levels alternate between the two servers. See the gate's CI "
        "recipe.")] = None,
) -> None:
    """Sweep concurrency (or arrival rate) over the paged KV engine: latency, throughput,
    KV usage, CPU kernel time, GC and GPU memory per level, the knee and findings.
    With --target, the same profiles and levels against a running OpenAI-compatible server."""
    from perfkit.remote.target import check_remote_flags
    from perfkit.run import StackOptions, TargetOptions, TraceOptions, run_sweep
    from perfkit.traces.session import check as check_traces

    if fmt not in FORMATS:
        raise PerfkitError(f"--format: expected table, json, markdown or csv, got {fmt!r}")
    check_remote_flags(target, api_key_env, timeout, scrape_metrics, device,
                       tokenizer if dataset is None else None, endpoint, workers, ray,
                       workers_per_node)
    sets = load_sets(set_, concurrency, rate, requests, repeats, warmup, device, seed)
    prof = resolve_profile(profile, None if target else model,
                           sets + dataset_sets(dataset, tokenizer) + _percentile_sets(percentiles))
    if target is None:
        from perfkit.config.profile import check_pool

        check_pool(prof)
    _warn_reused_records(prof)
    path = _result_path(json_path, out, force, report)
    if report and path is None:
        raise PerfkitError("--report needs --json FILE or --out DIR (the report goes next to "
                           "the JSON)")
    if not 0 < stack_rate <= 1000:
        raise PerfkitError(f"--stack-rate: expected 0 < HZ <= 1000, got {stack_rate:g}")
    stack_opts = None
    if stacks:
        base = out if out is not None else (path.parent if path is not None else Path("."))
        check_output_dir(base / "stacks", "--stacks")
        stack_opts = StackOptions(base / "stacks", stack_rate, native)
    if target is None and (server_profile or server_profile_dir):
        raise PerfkitError("--server-profile needs --target URL (a server with a profiler)")
    remote = None if target is None else TargetOptions(
        target, model, api_key_env, timeout, scrape_metrics, tokenizer,
        endpoint or "completions", server_profile, server_profile_dir, workers,
        workers_per_node, ray)
    _check_lockstep(lockstep, target, search, stacks, prof)
    traces = TraceOptions(server_traces, otlp_export, server_traces_wait)
    check_traces(traces, target is not None)
    _check_contention(contention, target, search, lockstep)
    stop = StopFlag()
    stop.install()
    from perfkit.cli.sweep_progress import ProgressEvents

    if search and (stacks or not samplers):
        raise PerfkitError("--search runs its own levels: without --stacks or --no-samplers")
    if search_max is not None and not 0 < search_max <= 1e6:
        raise PerfkitError(f"--search-max: expected 0 < LOAD <= 1e6, got {search_max:g}")
    with ProgressEvents(quiet=fmt != "table") as events:
        if search:
            from perfkit.run import run_search

            result = run_search(prof, path, cap=search_max, target=remote, events=events,
                                stop=stop.__bool__, traces=traces)
        else:
            result = run_sweep(prof, path, samplers=samplers, stacks=stack_opts,
                               target=remote, events=events, stop=stop.__bool__,
                               lockstep=lockstep, traces=traces,
                               contention=contention)
    _export(result, fmt, out)
    if report and path is not None and result.levels:
        from perfkit.report.html import write_report

        err_console.print(f"report: {write_report([result], path.with_suffix('.html'))}")
    if not result.complete:
        kept = f"{len(result.levels)} level(s) kept" + (f" in {path}" if path else "")
        if result.stop_reason is not None:
            err_console.print(f"[red]Stopped[/]: {result.stop_reason}; {kept}.")
            raise typer.Exit(1)
        err_console.print(f"Interrupted: {kept}.")
        raise typer.Exit(130)


def _check_lockstep(path: Path | None, target: str | None, search: bool, stacks: bool,
                    prof: Profile) -> None:
    """--lockstep pairs in-process closed-loop levels run for run."""
    if path is None:
        return
    clash = [flag for flag, on in (("--search", search), ("--stacks", stacks)) if on]
    if clash:
        raise PerfkitError(f"--lockstep cannot be combined with {', '.join(clash)}: it pairs "
                           "sweeps level for level (drop one of them)")
    if prof.sweep.rates and target is None:
        raise PerfkitError("--lockstep pairs closed-loop levels only: drop --rate (or "
                           "sweep.rates), or sweep the rates without --lockstep")


def _warn_reused_records(prof: Profile) -> None:
    """A dataset shorter than a level: say how often its records repeat, before any work."""
    if not prof.workload.dataset.path:
        return
    from perfkit.datasets.slices import reuse_note
    from perfkit.sweep.plan import plan_from_profile

    plan = plan_from_profile(prof)
    need = max((plan.num_warmup + plan.requests_at(lv) for lv in plan.levels), default=0)
    note = reuse_note(prof, need)
    if note:
        err_console.print(f"[yellow]warning:[/] {escape(note)}", highlight=False)


def _check_contention(on: bool, target: str | None, search: bool,
                      lockstep: Path | None) -> None:
    """--contention traces perfkit's own engine, on perf_counter's clock."""
    if not on:
        return
    if target is not None:
        raise PerfkitError("--contention traces the in-process engine; for a server, run "
                           "`perfkit stacks --pid SERVER_PID --contention` on its machine")
    if search or lockstep is not None:
        flag = "--search" if search else "--lockstep"
        raise PerfkitError(f"--contention cannot be combined with {flag} (drop one of them)")


def _export(result: SweepResult, fmt: str, out: Path | None) -> None:
    from perfkit.report.exporters import EXPORTERS, render_table, write_outputs

    if out is not None:
        write_outputs(result, out)
    if fmt == "table":
        console.print(render_table(result))
    else:
        sys.stdout.write(EXPORTERS[fmt](result))
    for f in result.findings:
        if f.severity == "warning" and fmt != "table":
            err_console.print(f"[yellow]warning[/] {f.id}: {f.message} Fix: {f.fix}")
