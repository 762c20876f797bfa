"""`perfkit sweep`: options -> check -> profile -> run_sweep or run_search (perfkit.run)
-> exporters. The options are declared in sweep_flags.py and sweep_target_flags.py, the
rules between them in sweep_options.py, the files in sweep_outputs.py."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from perfkit.cli import sweep_flags as flag
from perfkit.cli import sweep_outputs as outputs
from perfkit.cli import sweep_target_flags as target_flag
from perfkit.cli.common import ProfileOpt, SetOpt, err_console, resolve_profile, user_errors
from perfkit.cli.sweep_options import SweepOptions
from perfkit.cli.sweep_stop import StopFlag

if TYPE_CHECKING:
    from perfkit.config.schema import Profile
    from perfkit.result.sweep import SweepResult
    from perfkit.run import StackOptions, SweepEvents


@user_errors
def sweep(
    profile: ProfileOpt = "default", model: flag.Model = None, set_: SetOpt = None,
    concurrency: flag.Concurrency = None, rate: flag.Rate = None,
    requests: flag.Requests = None, repeats: flag.Repeats = None,
    warmup: flag.Warmup = None, device: flag.Device = None, seed: flag.Seed = None,
    percentiles: flag.Percentiles = None, search: flag.Search = False,
    search_max: flag.SearchMax = None, dataset: flag.Dataset = None,
    json_path: flag.Json = None, out: flag.Out = None, fmt: flag.Format = "table",
    samplers: flag.Samplers = True, force: flag.Force = False, stacks: flag.Stacks = False,
    stack_rate: flag.StackRate = 100.0, native: flag.Native = False,
    report: flag.Report = False, contention: flag.Contention = False,
    target: target_flag.Target = None, api_key_env: target_flag.ApiKeyEnv = None,
    timeout: target_flag.Timeout = None, scrape_metrics: target_flag.ScrapeMetrics = None,
    tokenizer: target_flag.Tokenizer = None, endpoint: target_flag.Endpoint = None,
    server_profile: target_flag.ServerProfile = None,
    server_profile_dir: target_flag.ServerProfileDir = None,
    workers: target_flag.Workers = None, ray: target_flag.Ray = None,
    workers_per_node: target_flag.WorkersPerNode = None,
    server_traces: target_flag.ServerTraces = None,
    server_traces_wait: target_flag.ServerTracesWait = 10.0,
    otlp_export: target_flag.OtlpExport = None, lockstep: flag.Lockstep = None,
) -> None:
    """Sweep concurrency (or arrival rate) over the paged KV engine: latency, throughput,
    KV usage, CPU kernel time, GC and GPU memory per level, the knee and findings.
    With --target, the same profiles and levels against a running OpenAI-compatible server."""
    _sweep(SweepOptions(
        profile=profile, model=model, set_=set_, concurrency=concurrency, rate=rate,
        requests=requests, repeats=repeats, warmup=warmup, device=device, seed=seed,
        percentiles=percentiles, dataset=dataset, search=search, search_max=search_max,
        samplers=samplers, contention=contention, lockstep=lockstep, json_path=json_path,
        out=out, fmt=fmt, force=force, report=report, stacks=stacks, stack_rate=stack_rate,
        native=native, target=target, api_key_env=api_key_env, timeout=timeout,
        scrape_metrics=scrape_metrics, tokenizer=tokenizer, endpoint=endpoint,
        server_profile=server_profile, server_profile_dir=server_profile_dir,
        workers=workers, ray=ray, workers_per_node=workers_per_node,
        server_traces=server_traces, server_traces_wait=server_traces_wait,
        otlp_export=otlp_export))


def _sweep(opts: SweepOptions) -> None:
    """Every check before level 1; the result file is rewritten after every level."""
    from perfkit.cli.sweep_progress import ProgressEvents

    opts.check()
    prof = _profile(opts)
    path = outputs.check_result_path(opts)
    stacks = outputs.check_stacks_dir(opts, path)
    stop = StopFlag()
    stop.install()
    with ProgressEvents(quiet=opts.fmt != "table") as events:
        result = _run(opts, prof, path, stacks, events, stop.__bool__)
    outputs.export(result, opts, path)
    _exit_if_cut_short(result, path)


def _profile(opts: SweepOptions) -> Profile:
    """The profile with the command line's values as overrides, checked like the file."""
    prof = resolve_profile(opts.profile, None if opts.target else opts.model,
                           opts.profile_sets())
    opts.check_profile(prof)
    outputs.warn_reused_records(prof)
    return prof


def _run(opts: SweepOptions, prof: Profile, path: Path | None, stacks: StackOptions | None,
         events: SweepEvents, stop: Callable[[], bool]) -> SweepResult:
    from perfkit.run import run_search, run_sweep  # at call time: tests stub run_sweep

    target, traces = opts.target_options(), opts.trace_options()
    if opts.search:
        return run_search(prof, path, cap=opts.search_max, target=target, events=events,
                          stop=stop, traces=traces)
    return run_sweep(prof, path, samplers=opts.samplers, stacks=stacks, target=target,
                     events=events, stop=stop, lockstep=opts.lockstep, traces=traces,
                     contention=opts.contention)


def _exit_if_cut_short(result: SweepResult, path: Path | None) -> None:
    """The finished levels are kept; exit 1 when a rule stopped the sweep, 130 when a
    signal did."""
    if result.complete:
        return
    kept = f"{len(result.levels)} level(s) kept" + (f" in {path}" if path else "")
    if result.stop_reason is not None:
        err_console.print(f"[red]Stopped[/]: {result.stop_reason}; {kept}.")
        raise typer.Exit(1)
    err_console.print(f"Interrupted: {kept}.")
    raise typer.Exit(130)
