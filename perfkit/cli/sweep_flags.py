"""`perfkit sweep`'s options on perfkit's side: the profile's levels and workload, the
output files, stacks and the run's modes (search, lockstep, contention), declared once as
`Annotated` aliases named as the option (--search-max: SearchMax). The command's signature
lists them with the defaults; SweepOptions.check() owns the rules between them. A running
server's options: sweep_target_flags.py."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

Model = Annotated[str | None, typer.Option(
    "--model", help="Model preset (tiny, small, opt-13b, llama3-8b, llama3-70b); with "
    "--target, the served model's name instead (default: the first of GET /models).")]

Concurrency = Annotated[str | None, typer.Option(
    help="Closed-loop levels, e.g. 1,2,4,8 (default: the profile's).")]

Rate = Annotated[str | None, typer.Option(
    help="Open-loop levels in requests/s, e.g. 2,4,8 (poisson, or the profile's bursts).")]

Requests = Annotated[int | None, typer.Option(help="Measured requests per level.")]

Repeats = Annotated[int | None, typer.Option(help="Runs of every level (interleaved).")]

Warmup = Annotated[int | None, typer.Option(
    help="Warm-up requests per level, excluded from every metric.")]

Device = Annotated[str | None, typer.Option(help="auto, cpu or cuda.")]

Seed = Annotated[int | None, typer.Option(help="Workload seed.")]

Percentiles = Annotated[str | None, typer.Option(
    help="Percentiles to report and gate, e.g. 50,90,95,99,99.9 (sweep.percentiles); "
    "the tables show the highest.")]

Search = Annotated[bool, typer.Option(
    "--search", help="Find the highest concurrency (or rate, with --rate) whose goodput "
    "meets the profile's SLOs (slo.*, slo.goodput_share), from the first level up.")]

SearchMax = Annotated[float | None, typer.Option(
    help="With --search: the highest load to try (default 4096 clients or 1e5 req/s).")]

Dataset = Annotated[Path | None, typer.Option(
    help="Requests from a file instead of the generator: ShareGPT .json, JSONL of "
    "prompts, a Mooncake trace (.jsonl) or a BurstGPT .csv (workload.dataset.path).")]

Json = Annotated[Path | None, typer.Option(
    "--json", help="Write the result here (atomically, after every level).")]

Out = Annotated[Path | None, typer.Option(
    help="Folder for result.json, summary.md and levels.csv.")]

Format = Annotated[str, typer.Option(
    "--format", help="stdout format: table, json, markdown or csv.")]

Samplers = Annotated[bool, typer.Option(
    help="Run the CPU/GC/NVML samplers (--no-samplers: wall time only).")]

Force = Annotated[bool, typer.Option(help="Overwrite an existing result file.")]

Stacks = Annotated[bool, typer.Option(
    "--stacks", help="Record flame-graph stacks of each level (py-spy, or a fallback).")]

StackRate = Annotated[float, typer.Option(help="Stack samples per second.")]

Native = Annotated[bool, typer.Option(
    help="With --stacks: add C/C++ frames (py-spy --native).")]

Report = Annotated[bool, typer.Option(
    "--report", help="Also write an HTML report next to the JSON.")]

Contention = Annotated[bool, typer.Option(
    "--contention", help="Trace GIL and lock waits per thread beside each level (eBPF "
    "as root with bpftrace; else sampled thread states) and read CPU counters (perf "
    "stat); names gil_contention / lock_contention.")]

Lockstep = Annotated[Path | None, typer.Option(
    help="Take turns with another perfkit sweep started with the same socket path "
    "(e.g. /tmp/perfkit.sock): in-process, baseline and candidate alternate every 20 "
    "ms (closed-loop levels; pauses are excluded from every timing); with --target "
    "(duet), whole levels alternate between the two servers. See the gate's CI "
    "recipe.")]
