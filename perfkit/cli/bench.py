"""`perfkit bench`: engine microbenchmarks against references and the targets."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Group
from rich.table import Table

from perfkit.cli.common import ModelOpt, ProfileOpt, SetOpt, console, resolve_profile, user_errors
from perfkit.errors import PerfkitError

SECTIONS = ("attention", "allocator", "scheduler", "step", "guard", "sampler")
OPT_IN = ("loadgen",)  # run only when named in --only: a server and minutes of load

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
    ("step", "sampler_us_per_step", "µs per step in the sampler", "", None),
    ("step", "mask_us_per_step", "µs per step in the guard", "", None),
    ("guard", "us_per_step_on", "µs per step, guard on @16", "", None),
    ("guard", "us_per_step_off", "µs per step, guard off @16", "", None),
    ("guard", "overhead_us_per_step", "guard µs per decode step", "", None),
    ("guard", "structured_us_per_step_on", "µs per step, JSON-schema tools @16", "", None),
    ("guard", "structured_overhead_us_per_step", "structured mask µs per step", "", None),
    ("sampler", "us_per_step_greedy", "µs per step, greedy", "", None),
    ("sampler", "us_per_step_random", "µs per step, temperature 1", "", None),
    ("sampler", "us_per_step_top_k_top_p", "µs per step, top-k + top-p", "", None),
    ("sampler", "us_per_step_penalties", "µs per step, 3 penalties", "", None),
    ("sampler", "us_per_step_all", "µs per step, every parameter", "", None),
]


def run_benches(only: list[str], profile: Any, device: str) -> dict[str, Any]:
    if not set(only) & set(SECTIONS):
        return {}
    import torch

    from perfkit.bench.allocator import bench_allocator
    from perfkit.bench.attention import bench_attention
    from perfkit.bench.guard import bench_guard
    from perfkit.bench.sampler import bench_sampler
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
    if "sampler" in only:
        with console.status("sampler: parameters -> tokens, by configuration ..."):
            out["sampler"] = bench_sampler(profile, device)
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
        value = results[section].get(key)
        if value is None:  # not measured (a vocabulary too small for structured output)
            continue
        met = "" if ok is None else ("[green]yes[/]" if ok(value) else "[red]no[/]")
        table.add_row(f"{section}: {label}", _fmt(value), target, met)
    att = results.get("attention")
    if att:
        table.add_row("attention: achieved / copy GB/s",
                      f"{att['achieved_gbps']:.1f} / {att['copy_gbps']:.1f}", "", "")
    return table


def _loadgen_table(out: dict[str, Any]) -> Group:
    from rich import box
    from rich.console import Group
    from rich.text import Text

    t = out["timing"]
    table = Table(title=f"Load generator against a server of known timing: TTFT "
                  f"{t['ttft_s'] * 1e3:g} ms, a chunk every {t['gap_s'] * 1e3:g} ms, "
                  f"{t['tokens']} chunks (times in ms)", title_justify="left",
                  box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    heads = ("c", "workers", "TTFT\np50", "TTFT\np99", "ITL\np50", "ITL\np99", "deliv-\nered",
             "chunks\n/CPU-s", "CPU µs\n/chunk", "server\nlate p99", "in\nbounds")
    for head in heads:
        table.add_column(head, justify="right", no_wrap=True)

    def ms(v: float | None) -> str:
        return "n/a" if v is None else f"{v * 1e3:.1f}"

    notes = []
    for c in out["cells"]:
        per, rate = c["cpu_per_chunk_s"], c["chunks_per_cpu_s"]
        table.add_row(
            str(c["concurrency"]), f"{c['workers']}: {c['workers_used']}",
            ms(c["ttft_p50_s"]), ms(c["ttft_p99_s"]), ms(c["itl_p50_s"]), ms(c["itl_p99_s"]),
            "n/a" if c["delivered"] is None else f"{c['delivered']:.1%}",
            "n/a" if rate is None else f"{rate:,.0f}",
            "n/a" if per is None else f"{per * 1e6:.1f}", ms(c["server_late_p99_s"]),
            "yes" if c["within"] else "no")
        if c["misses"]:
            share = c["coalesced_share"]
            read = ("" if c["itl_p50_s"] is not None or share is None
                    else f" ({share:.0%} of chunk gaps read together: not timed)")
            notes.append(f"c={c['concurrency']}, --workers {c['workers']}: missed "
                         f"{', '.join(c['misses'])}{read}")
    best = out["highest_within"]
    notes.append("highest concurrency within every bound: "
                 + ("none of these" if best is None else str(best)))
    return Group(table, *(Text(n) for n in notes))


def _loadgen(concurrency: str | None, workers: str | None, ttft: float, gap: float,
             tokens: int, per_client: int) -> dict[str, Any]:
    from perfkit.bench.loadgen import bench_loadgen
    from perfkit.cli.common import parse_list
    from perfkit.loadgen.auto import parse_workers
    from perfkit.loadgen.stream_server import Timing

    levels = parse_list(concurrency or "64,256,512", int, "--concurrency")
    if any(c < 1 for c in levels):
        raise PerfkitError(f"--concurrency: expected whole numbers >= 1, got {concurrency!r}")
    chosen = [w.strip() for w in (workers or "1,auto").split(",") if w.strip()]
    for w in chosen:
        parse_workers(w)  # one-line error for a bad value
    if not (ttft > 0 and gap > 0 and tokens >= 2):
        raise PerfkitError("--ttft and --gap: seconds > 0; --tokens: at least 2")
    if per_client < 1:
        raise PerfkitError(f"--per-client: expected a whole number >= 1, got {per_client}")
    return bench_loadgen(levels, chosen, Timing(ttft, gap, tokens), per_client,
                         progress=lambda text: console.print(f"[dim]{text}[/]"))


@user_errors
def bench(
    profile: ProfileOpt = "default",
    model: ModelOpt = None,
    set_: SetOpt = None,
    only: Annotated[str | None, typer.Option(
        help="Comma-separated subset: attention, allocator, scheduler, step, guard, "
        "sampler; and loadgen (the load generator against a server of known timing: only "
        "when named).")] = None,
    device: Annotated[str, typer.Option(help="auto, cpu or cuda (attention).")] = "auto",
    json_path: Annotated[Path | None, typer.Option("--json", help="Write results here.")] = None,
    force: Annotated[bool, typer.Option(help="Overwrite an existing --json file.")] = False,
    concurrency: Annotated[str | None, typer.Option(
        help="loadgen: closed-loop concurrencies (default 64,256,512).")] = None,
    workers: Annotated[str | None, typer.Option(
        help="loadgen: --workers values to try at each, e.g. 1,2,auto (default 1,auto).")
    ] = None,
    ttft: Annotated[float, typer.Option(help="loadgen: the server's TTFT, seconds.")] = 0.02,
    gap: Annotated[float, typer.Option(
        help="loadgen: the server's gap between chunks, seconds.")] = 0.01,
    tokens: Annotated[int, typer.Option(help="loadgen: chunks per response.")] = 128,
    per_client: Annotated[int, typer.Option(
        help="loadgen: measured requests per client at each cell (after one warm-up each).")
    ] = 4,
) -> None:
    """Microbenchmarks of the engine: paged vs dense attention, allocator, scheduler, decode step
    (the step benchmark runs the profile's engine), tool-call guard and sampler cost per step;
    and, when asked (--only loadgen), the load generator's own error against a server of
    known timing."""
    # imported here: torch and the engine load only when the benchmarks run, not for --help
    from perfkit.engine.device import resolve_device
    from perfkit.files import atomic_write_text, check_output, dumps
    from perfkit.measure.envinfo import collect

    chosen = SECTIONS if only is None else [s.strip() for s in only.split(",") if s.strip()]
    unknown = [s for s in chosen if s not in SECTIONS + OPT_IN]
    if unknown or not chosen:
        raise PerfkitError(f"--only: unknown benchmark {unknown[0] if unknown else only!r}; "
                           f"choose from {', '.join(SECTIONS + OPT_IN)}")
    if device not in ("auto", "cpu", "cuda"):
        raise PerfkitError(f"--device: expected auto, cpu or cuda, got {device!r}")
    if json_path is not None:
        check_output(json_path, force, "--json")
    prof = resolve_profile(profile, model, set_)
    dev = str(resolve_device(device))
    results = run_benches(list(chosen), prof, dev)
    if "loadgen" in chosen:
        results["loadgen"] = _loadgen(concurrency, workers, ttft, gap, tokens, per_client)
    env = collect()
    results["environment"] = env.to_dict() | {"device": dev}
    results["schema"] = "perfkit.bench/1"
    if set(chosen) & set(SECTIONS):
        console.print(render(results))
    if "loadgen" in results:
        console.print(_loadgen_table(results["loadgen"]))
    if json_path is not None:
        atomic_write_text(json_path, dumps(results))
