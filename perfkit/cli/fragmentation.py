"""`perfkit fragmentation`: how much KV memory each allocation policy wastes, and how.

Options -> budget -> replays (and the live engine with --live) -> table -> JSON.
--simulate is the default: it needs no tensors, so GPU-sized profiles run anywhere.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, cast

import typer

from perfkit.cli.common import (
    ModelOpt,
    ProfileOpt,
    SetOpt,
    console,
    dataset_sets,
    parse_list,
    resolve_profile,
    user_errors,
)
from perfkit.config.bounds import MAX_REQUESTS
from perfkit.config.presets import GPU_MEMORY
from perfkit.config.units import format_bytes
from perfkit.engine.executor import TOP1_MEAN
from perfkit.errors import PerfkitError
from perfkit.files import check_output

if TYPE_CHECKING:
    from perfkit.config.schema import Profile
    from perfkit.fragmentation.policies import Budget
    from perfkit.fragmentation.types import Arrivals

SIMULATE_REQUESTS = 10_000  # default --requests for --simulate: long enough to average
# with several outputs per request the paged policies replay the Engine (null executor),
# ~10x slower than the compiled kernel: 1,000 requests keep a run within a minute or two
GROUP_REQUESTS = 1_000
MAX_BLOCK_SIZE = 1024  # as engine.block_size


def _block_sizes(text: str) -> tuple[int, ...]:
    sizes = parse_list(text, int, "--block-sizes")
    too_big = [s for s in sizes if s > MAX_BLOCK_SIZE]
    if too_big:
        raise PerfkitError(f"--block-sizes: {too_big[0]} is larger than {MAX_BLOCK_SIZE}")
    return tuple(sorted(set(sizes)))


def _check_loop(arrivals: str, concurrency: int | None, live_: bool) -> None:
    if arrivals not in ("saturate", "profile", "closed"):
        raise PerfkitError(f"--arrivals: expected saturate, profile or closed, got {arrivals!r}")
    if arrivals == "closed" and live_:
        raise PerfkitError("--arrivals closed: the replays only (--simulate), not --live")
    if (arrivals == "closed") != (concurrency is not None):
        raise PerfkitError("--concurrency: give it with --arrivals closed (the clients), "
                           "and only then")
    if concurrency is not None and not 1 <= concurrency <= MAX_REQUESTS:
        raise PerfkitError(f"--concurrency: expected 1 to {MAX_REQUESTS:,} clients, got "
                           f"{str(concurrency)[:40]}")


def _check(simulate_: bool, live_: bool, requests: int | None, step_ms: float,
           jobs: int, gpu: str | None, arrivals: str, json_out: Path | None,
           force: bool) -> None:
    """Every option error before any work, each naming its option."""
    if simulate_ and live_:
        raise PerfkitError("--simulate and --live exclude each other; give one of them")
    if requests is not None and not 1 <= requests <= MAX_REQUESTS:
        raise PerfkitError(f"--requests: expected 1 to {MAX_REQUESTS:,}, got "
                           f"{str(requests)[:40]}")
    if not 0 < step_ms <= 3.6e6:
        raise PerfkitError(f"--step-ms: expected a finite number in (0, 3600000], got "
                           f"{step_ms:g}")
    if not 1 <= jobs <= 256:
        raise PerfkitError(f"--jobs: expected 1 to 256 processes, got {str(jobs)[:40]}")
    if gpu is not None and gpu not in GPU_MEMORY:
        raise PerfkitError(f"--gpu: unknown GPU {gpu!r}; choose one of {', '.join(GPU_MEMORY)}")
    if json_out is not None:
        check_output(json_out, force, "--json")


def _live_profile(profile: Profile, budget: Budget, explicit: bool) -> Profile:
    """The engine's profile: its pool is the budget when one was given. Refused when the
    weights and KV tensors would not fit in half the memory the device has free."""
    from perfkit.fragmentation.live import available_bytes
    from perfkit.fragmentation.policies import weight_bytes

    room, where = available_bytes(profile)
    weights = weight_bytes(profile.model)
    if weights + budget.bytes > room // 2:
        raise PerfkitError(
            f"--live would allocate {format_bytes(weights)} of weights and "
            f"{format_bytes(budget.bytes)} of KV tensors, and {where} has {format_bytes(room)} "
            "available; use --simulate, a smaller --kv-memory or a smaller --model")
    if not explicit:
        return profile
    engine = dataclasses.replace(profile.engine, kv_memory=f"{budget.bytes}B")
    return dataclasses.replace(profile, engine=engine)


@user_errors
def fragmentation(
    profile: ProfileOpt = "default",
    model: ModelOpt = None,
    set_: SetOpt = None,
    block_sizes: Annotated[str, typer.Option(
        "--block-sizes", help="Paged block sizes to replay, comma-separated.")] = "8,16,32,64,128",
    kv_memory: Annotated[str | None, typer.Option(
        "--kv-memory", help="KV budget shared by every policy, e.g. 120GiB.")] = None,
    gpu: Annotated[str | None, typer.Option(
        "--gpu", help="KV budget from a GPU: h200, h100, a100-80g, a100-40g "
        "(x 0.9 utilization, minus the weights).")] = None,
    requests: Annotated[int | None, typer.Option(
        "--requests", help=f"Requests to replay [default: {SIMULATE_REQUESTS:,} simulated "
        f"({GROUP_REQUESTS:,} with several outputs per request), the profile's "
        "workload.num_requests live].")] = None,
    simulate_: Annotated[bool, typer.Option(
        "--simulate", help="Replay without tensors (the default).")] = False,
    live_: Annotated[bool, typer.Option(
        "--live", help="Also run the real engine and report its BlockPool over time.")] = False,
    arrivals: Annotated[str, typer.Option(
        "--arrivals", help="saturate: every request waits from step 0 (the pool stays full); "
        "profile: the profile's arrival process; closed: --concurrency clients, each "
        "sending its next request when the previous one finished.")] = "saturate",
    concurrency: Annotated[int | None, typer.Option(
        "--concurrency", help="Clients of --arrivals closed.")] = None,
    client_delay_steps: Annotated[int | None, typer.Option(
        "--client-delay-steps", help="--arrivals closed: engine steps from a request's "
        "finish to its client's next arrival, beyond the next step (a real client's round "
        "trip) [default: the profile's workload.client_delay_steps, 0].")] = None,
    step_ms: Annotated[float, typer.Option(
        "--step-ms", help="Milliseconds per engine step, to turn --arrivals profile "
        "into steps.")] = 25.0,
    jobs: Annotated[int, typer.Option(
        "--jobs", help="Processes replaying policies in parallel.")] = 2,
    json_out: Annotated[Path | None, typer.Option(
        "--json", help="Also write the result as JSON to this file.")] = None,
    force: Annotated[bool, typer.Option(help="Overwrite an existing --json file.")] = False,
    dataset: Annotated[Path | None, typer.Option(
        help="Replay a dataset or trace file's requests (as sweep --dataset).")] = None,
    no_jit: Annotated[bool, typer.Option(
        "--no-jit", help="Run the replays as plain Python, not compiled (the reference; "
        "also PERFKIT_NO_JIT=1).")] = False,
    beam_top1: Annotated[float, typer.Option(
        "--beam-top1", help="Beam search replays (workload.beam_width): the simulated "
        "model's mean top-1 next-token probability, which decides how often beams fork "
        "and drop.")] = TOP1_MEAN,
) -> None:
    """Replay the profile's requests through contiguous and paged KV allocation on one
    memory budget: token states, reserved, internal and external fragmentation, free."""
    # imported here: the replays (and the engine, for --live) load only when they run
    from perfkit.fragmentation.policies import FragConfig, kv_budget, simulate
    from perfkit.fragmentation.render import render, to_dict, write_json
    from perfkit.jit import numba_missing

    _check(simulate_, live_, requests, step_ms, jobs, gpu, arrivals, json_out, force)
    _check_loop(arrivals, concurrency, live_)
    sizes = _block_sizes(block_sizes)
    delay = [] if client_delay_steps is None \
        else [f"workload.client_delay_steps={client_delay_steps}"]
    prof = resolve_profile(profile, model, [*(set_ or []), *dataset_sets(dataset), *delay])
    budget = kv_budget(prof, kv_memory, gpu)
    if not 0.01 <= beam_top1 <= 0.99:
        raise PerfkitError(f"--beam-top1: expected a probability in [0.01, 0.99], got "
                           f"{beam_top1:g}")
    groups = prof.workload.n != 1 or prof.workload.beam_width != 1
    num = requests or (prof.workload.num_requests if live_ else
                       GROUP_REQUESTS if groups else SIMULATE_REQUESTS)
    note = None if no_jit else numba_missing()
    if note is not None:
        typer.echo(f"note: {note}", err=True)
    cfg = FragConfig(sizes, num, cast("Arrivals", arrivals), step_ms / 1e3, jobs,
                     concurrency or 0, not no_jit, beam_top1)
    live_prof = _live_profile(prof, budget, kv_memory is not None or gpu is not None) \
        if live_ else None
    report = simulate(prof, budget, cfg)  # before the engine starts threads: it may fork
    live_report = None
    if live_prof is not None:
        from perfkit.fragmentation.live import live

        live_report = live(live_prof, num, cfg.arrivals, cfg.step_s)
    console.print(render(report, live_report))
    if json_out is not None:
        write_json(json_out, to_dict(report, live_report))
        console.print(f"wrote {json_out}", style="dim")
