"""`perfkit bench`: engine microbenchmarks against references and the targets."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from perfkit.cli.common import ModelOpt, ProfileOpt, SetOpt, console, resolve_profile, user_errors
from perfkit.errors import PerfkitError

SECTIONS = ("attention", "allocator", "scheduler", "step", "guard")

# (section, key, label, target text, passes(value) -> bool)
TARGETS: list[tuple[str, str, str, str, Any]] = [
    ("attention", "ratio", "paged / dense decode", "<= 1.1x", lambda v: v <= 1.1),
    ("attention_prefill", "ratio", "paged / dense prefill", "<= 1.25x", lambda v: v <= 1.25),
    # engine trace: a prompt's blocks per call at admission, then one per decode boundary;
    # decode trace: every block one per call (the worst case for per-call overhead)
    ("allocator", "blocks_per_s_engine", "blocks/s, hashing, engine trace", ">= 1,000,000",
     lambda v: v >= 1e6),
    ("allocator", "blocks_per_s", "blocks/s, hashing, decode trace", ">= 1,000,000",
     lambda v: v >= 1e6),
    ("allocator", "blocks_per_s_nohash", "blocks/s, no hash, decode trace", "", None),
    ("scheduler", "us_per_seq_step", "µs per seq per step @256", "<= 10", lambda v: v <= 10),
    ("step", "minor_faults_per_step", "minor faults per step", "<= 50", lambda v: v <= 50),
    ("step", "system_share", "system CPU share", "< 5%", lambda v: v < 0.05),
    ("step", "ms_per_step", "ms per decode step", "", None),
    ("guard", "us_per_step_on", "µs per step, guard on @16", "", None),
    ("guard", "us_per_step_off", "µs per step, guard off @16", "", None),
    ("guard", "overhead_us_per_step", "guard µs per decode step", "", None),
]


def run_benches(only: list[str], profile: Any, device: str) -> dict[str, Any]:
    import torch

    from perfkit.bench.allocator import bench_allocator
    from perfkit.bench.attention import bench_attention
    from perfkit.bench.guard import bench_guard
    from perfkit.bench.scheduler import bench_scheduler
    from perfkit.bench.step import bench_step

    out: dict[str, Any] = {}
    if profile.engine.cpu_threads and device == "cpu":
        torch.set_num_threads(profile.engine.cpu_threads)  # as the profile's engine runs
    out["threads"] = torch.get_num_threads()
    if "attention" in only:
        with console.status("attention: paged vs dense SDPA ..."):
            out.update(bench_attention(device))
    if "allocator" in only:
        with console.status("allocator: engine and decode traces ..."):
            out["allocator"] = bench_allocator()
    if "scheduler" in only:
        with console.status("scheduler: 256 running sequences ..."):
            out["scheduler"] = bench_scheduler()
    if "step" in only:
        with console.status(f"step: steady decode of {profile.name} ..."):
            out["step"] = bench_step(profile)
    if "guard" in only:
        with console.status("guard: mask + sample + check, on vs off ..."):
            out["guard"] = bench_guard(profile, device)
    return out


def _fmt(value: float) -> str:
    if value >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3g}" if value < 1 else f"{value:.2f}"


def render(results: dict[str, Any]) -> Table:
    table = Table(title="perfkit bench", title_justify="left")
    for col in ("benchmark", "value", "target", "met"):
        table.add_column(col, justify="left" if col == "benchmark" else "right")
    for section, key, label, target, ok in TARGETS:
        if section not in results:
            continue
        value = results[section][key]
        met = "" if ok is None else ("[green]yes[/]" if ok(value) else "[red]no[/]")
        table.add_row(f"{section}: {label}", _fmt(value), target, met)
    att = results.get("attention")
    if att:
        table.add_row("attention: achieved / copy GB/s",
                      f"{att['achieved_gbps']:.1f} / {att['copy_gbps']:.1f}", "", "")
    return table


@user_errors
def bench(
    profile: ProfileOpt = "default",
    model: ModelOpt = None,
    set_: SetOpt = None,
    only: Annotated[str | None, typer.Option(
        help="Comma-separated subset: attention, allocator, scheduler, step, guard.")] = None,
    device: Annotated[str, typer.Option(help="auto, cpu or cuda (attention).")] = "auto",
    json_path: Annotated[Path | None, typer.Option("--json", help="Write results here.")] = None,
    force: Annotated[bool, typer.Option(help="Overwrite an existing --json file.")] = False,
) -> None:
    """Microbenchmarks of the engine: paged vs dense attention, allocator, scheduler, decode step
    (the step benchmark runs the profile's engine), tool-call guard cost per step."""
    # imported here: torch and the engine load only when the benchmarks run, not for --help
    from perfkit.engine.device import resolve_device
    from perfkit.files import atomic_write_text, check_output, dumps
    from perfkit.measure.envinfo import collect

    chosen = SECTIONS if only is None else [s.strip() for s in only.split(",") if s.strip()]
    unknown = [s for s in chosen if s not in SECTIONS]
    if unknown or not chosen:
        raise PerfkitError(f"--only: unknown benchmark {unknown[0] if unknown else only!r}; "
                           f"choose from {', '.join(SECTIONS)}")
    if device not in ("auto", "cpu", "cuda"):
        raise PerfkitError(f"--device: expected auto, cpu or cuda, got {device!r}")
    if json_path is not None:
        check_output(json_path, force, "--json")
    prof = resolve_profile(profile, model, set_)
    dev = str(resolve_device(device))
    results = run_benches(list(chosen), prof, dev)
    env = collect()
    results["environment"] = env.to_dict() | {"device": dev}
    results["schema"] = "perfkit.bench/1"
    console.print(render(results))
    if json_path is not None:
        atomic_write_text(json_path, dumps(results))
