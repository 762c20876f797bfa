"""`perfkit sweep`: options -> profile -> run levels -> write after each -> summary."""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import FrameType
from typing import Annotated, Any, Literal

import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from perfkit.cli.common import (
    ProfileOpt,
    SetOpt,
    console,
    err_console,
    parse_list,
    resolve_profile,
    user_errors,
)
from perfkit.config.profile import profile_dict, profile_sha256
from perfkit.config.schema import Profile
from perfkit.engine.engine import Engine
from perfkit.errors import PerfkitError
from perfkit.measure.envinfo import collect
from perfkit.records import RequestRecord
from perfkit.remote.driver import run_remote_level
from perfkit.remote.target import RemoteOptions, check_remote_flags, connect, remote_header
from perfkit.report import sweep as render
from perfkit.report.html import write_report
from perfkit.stacks.record import record_level
from perfkit.stacks.summary import kernels_renderable, summary_renderable
from perfkit.stacks.torch_kernels import cuda_kernel_profile
from perfkit.summary.findings import find_all
from perfkit.sweep.load import OnRecord
from perfkit.sweep.result import ResultWriter, atomic_write_text, dumps, knee_of
from perfkit.sweep.runner import Level, SweepPlan, plan_from_profile, run_level, schedule
from perfkit.sweep.sizing import check_fits

Format = Literal["table", "json", "markdown", "csv"]


class StopFlag:
    """First SIGINT/SIGTERM: finish the current level, then stop. Second: stop now."""

    def __init__(self) -> None:
        self.requested = False

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        err_console.print("[yellow]Stopping after this level (again to abort now).[/]")

    def install(self) -> None:
        signal.signal(signal.SIGINT, self)
        signal.signal(signal.SIGTERM, self)


def _sets(sets: list[str] | None, concurrency: str | None, rate: str | None,
          requests: int | None, repeats: int | None, warmup: int | None,
          device: str | None, seed: int | None) -> list[str]:
    """Command-line values become profile overrides: the resolved profile (and its hash)
    describes the run exactly, and they are validated like the file."""
    out = list(sets or [])
    if concurrency is not None:
        out.append(f"sweep.concurrency={parse_list(concurrency, int, '--concurrency')}")
    if rate is not None:
        out.append(f"sweep.rates={parse_list(rate, float, '--rate')}")
    if (concurrency is None) != (rate is None):
        out.append("sweep.rates=[]" if rate is None else "sweep.concurrency=[]")
    for key, value in (("workload.num_requests", requests), ("sweep.repeats", repeats),
                       ("sweep.warmup", warmup), ("workload.seed", seed)):
        if value is not None:
            out.append(f"{key}={value}")
    if device is not None:
        out.append(f'engine.device="{device}"')
    return out


def _outputs(json_path: Path | None, out_dir: Path | None, force: bool) -> Path | None:
    path = json_path or (out_dir / "result.json" if out_dir else None)
    if path is not None and path.exists() and not force:
        raise PerfkitError(f"{path} exists; pass --force to overwrite it or choose another file")
    if path is not None and path.parent.exists() and not path.parent.is_dir():
        raise PerfkitError(f"{path.parent} is not a folder")
    return path


@dataclass(frozen=True)
class StackOptions:
    out_dir: Path
    rate_hz: float
    native: bool


def _stack_label(level: Level, repeat: int, repeats: int) -> str:
    base = str(level.concurrency) if level.rate is None else f"rate-{level.rate:g}"
    return base + (f"-r{repeat}" if repeats > 1 else "")


# Runs one (level, repeat), calling back per request; the in-process engine or a target.
LevelRunner = Callable[[Level, int, OnRecord], dict[str, Any]]


def _level_with_stacks(run_one: LevelRunner, plan: SweepPlan, level: Level,
                       repeat: int, tick: Any, stacks: StackOptions | None,
                       quiet: bool) -> dict[str, Any]:
    if stacks is None:
        return run_one(level, repeat, tick)
    label = _stack_label(level, repeat, plan.repeats)
    with record_level(stacks.out_dir, label, stacks.rate_hz, stacks.native) as rec, \
            cuda_kernel_profile(stacks.out_dir / f"level-{label}.kernels.folded") as kernels:
        result = run_one(level, repeat, tick)
    result["stacks"] = rec.to_dict() | {"kernels": kernels.to_dict()}
    if rec.warning:
        err_console.print(f"[yellow]warning:[/] {rec.warning}", soft_wrap=True)
    if not quiet:
        err_console.print(summary_renderable(rec))
        if kernels.available:
            err_console.print(kernels_renderable(kernels))
    return result


def _run(run_one: LevelRunner, plan: SweepPlan, writer: ResultWriter,
         stop: StopFlag, quiet: bool, stacks: StackOptions | None) -> bool:
    """Every level; returns True when all ran."""
    runs = schedule(plan)
    total = plan.num_requests + plan.num_warmup
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[est]}"),
                  TimeElapsedColumn(), console=err_console, disable=quiet, transient=True) as bar:
        for i, (level, repeat) in enumerate(runs):
            if stop.requested:
                return False
            rep = f" (repeat {repeat + 1}/{plan.repeats})" if plan.repeats > 1 else ""
            task = bar.add_task(f"[{i + 1}/{len(runs)}] {level.label}{rep}", total=total, est="")
            start, tokens = time.perf_counter(), [0]

            def tick(rec: RequestRecord, task: Any = task, start: float = start,
                     tokens: list[int] = tokens) -> None:
                tokens[0] += rec.output_tokens
                rate = tokens[0] / max(time.perf_counter() - start, 1e-9)
                bar.update(task, advance=1, est=f"~{rate:.0f} tok/s")

            writer.add_level(
                _level_with_stacks(run_one, plan, level, repeat, tick, stacks, quiet)
            )
            bar.remove_task(task)
    return True


def _in_process(prof: Profile, plan: SweepPlan) -> tuple[LevelRunner, dict[str, Any]]:
    engine = Engine(prof)

    def run_one(level: Level, repeat: int, tick: OnRecord) -> dict[str, Any]:
        return run_level(engine, prof, plan, level, repeat, tick)

    return run_one, {"environment": {"device": str(engine.device)}}


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
) -> None:
    """Sweep concurrency (or arrival rate) over the paged KV engine: latency, throughput,
    KV usage, CPU kernel time, GC and GPU memory per level, the knee and findings.
    With --target, the same profiles and levels against a running OpenAI-compatible server."""
    if fmt not in ("table", "json", "markdown", "csv"):
        raise PerfkitError(f"--format: expected table, json, markdown or csv, got {fmt!r}")
    check_remote_flags(target, api_key_env, timeout, scrape_metrics, device)
    prof = resolve_profile(profile, None if target else model,
                           _sets(set_, concurrency, rate, requests, repeats, warmup, device, seed))
    path = _outputs(json_path, out, force)
    if report and path is None:
        raise PerfkitError("--report needs --json FILE or --out DIR (the report goes next to "
                           "the JSON)")
    if target is None:
        check_fits(prof)
    if not 0 < stack_rate <= 1000:
        raise PerfkitError(f"--stack-rate: expected 0 < HZ <= 1000, got {stack_rate:g}")
    stack_opts = None
    if stacks:
        base = out if out is not None else (path.parent if path is not None else Path("."))
        stack_opts = StackOptions(base / "stacks", stack_rate, native)
    plan = plan_from_profile(prof)
    if not samplers:
        plan = SweepPlan(plan.levels, plan.num_requests, plan.num_warmup, plan.repeats, False)
    if target is None:
        run_one, where = _in_process(prof, plan)
    else:
        remote = connect(RemoteOptions(target, model, api_key_env, timeout, scrape_metrics),
                         prof, plan)
        run_one, where = partial(run_remote_level, remote), remote_header(remote)
    env = collect()
    writer = ResultWriter(path, {
        "kind": "sweep",
        "profile": {"name": prof.name, "sha256": profile_sha256(prof),
                    "resolved": profile_dict(prof)},
        "environment": env.to_dict() | {"device_class": env.device_class} | where["environment"],
        "plan": {"levels": [lv.label for lv in plan.levels], "requests": plan.num_requests,
                 "warmup": plan.num_warmup, "repeats": plan.repeats, "samplers": plan.samplers},
        **({"target": where["target"]} if "target" in where else {}),
    })
    stop = StopFlag()
    stop.install()
    try:
        complete = _run(run_one, plan, writer, stop, fmt != "table", stack_opts)
    except KeyboardInterrupt:
        complete = False
    _finish(writer, prof, complete, fmt, out)
    if report and path is not None and writer.doc["levels"]:
        err_console.print(f"report: {write_report([writer.doc], path.with_suffix('.html'))}")
    if not complete:
        err_console.print(f"Interrupted: {len(writer.doc['levels'])} level(s) kept"
                          + (f" in {path}" if path else "") + ".")
        raise typer.Exit(130)


def _finish(writer: ResultWriter, prof: Profile, complete: bool, fmt: str,
            out: Path | None) -> None:
    levels = writer.doc["levels"]
    knee = knee_of(levels) if levels else None
    writer.finish(knee, find_all(levels, prof, knee), complete)
    doc = writer.doc
    if out is not None:
        atomic_write_text(out / "summary.md", render.markdown(doc))
        atomic_write_text(out / "levels.csv", render.csv_text(doc))
    if fmt == "json":
        sys.stdout.write(dumps(doc))
    elif fmt == "markdown":
        sys.stdout.write(render.markdown(doc))
    elif fmt == "csv":
        sys.stdout.write(render.csv_text(doc))
    else:
        console.print(render.rich_summary(doc))
    for f in doc["findings"]:
        if f["severity"] == "warning" and fmt != "table":
            err_console.print(f"[yellow]warning[/] {f['id']}: {f['message']} Fix: {f['fix']}")
