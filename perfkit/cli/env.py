"""`perfkit env`: what this machine is, and what perfkit can measure on it."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from perfkit.cli.common import console, user_errors
from perfkit.config.units import format_bytes

if TYPE_CHECKING:
    from perfkit.measure.envinfo import Environment


def _yes(ok: bool | None) -> str:
    return {True: "[green]yes[/]", False: "[red]no[/]", None: "not probed"}[ok]


def _stacks(status: dict[str, object] | None) -> str:
    if status is None:
        return "not probed"
    return ("[green]py-spy[/]: " if status["py_spy"] else "[yellow]fallback[/]: ") + str(
        status["detail"])


def render(env: Environment) -> Table:
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    gpu, nvml, spy = env.gpu, env.nvml, env.pyspy
    rows = [
        ("perfkit", env.perfkit),
        ("python", f"{env.python} ({env.platform})"),
        ("torch", f"{env.torch}, CUDA {env.torch_cuda}"),
        ("GPU", f"{gpu.name}, {format_bytes(gpu.memory_total_bytes)} x{gpu.count}"
         if gpu.available else f"[red]unavailable[/]: {gpu.reason}"),
        ("NVML", f"[green]available[/], driver {nvml.driver}" if nvml.available
         else f"[red]unavailable[/]: {nvml.reason}"),
        ("py-spy", f"{spy.version} ({spy.path})" if spy.installed
         else f"[red]missing[/]: {spy.reason}"),
        ("py-spy attach", _yes(spy.can_attach) + (f": {spy.reason}" if spy.reason else "")),
        ("ptrace_scope", "n/a (no Yama)" if spy.ptrace_scope is None else str(spy.ptrace_scope)),
        ("stacks", _stacks(env.extra.get("stacks"))),
        ("CPU", f"{env.cpu_model}, {env.cpu_physical_cores} physical / "
         f"{env.cpu_logical_cores} logical cores"),
        ("memory", format_bytes(env.memory_total_bytes)),
    ]
    for key, value in rows:
        table.add_row(key, value)
    return table


@user_errors
def env(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """Report versions, GPU/NVML status, py-spy and CPU: what to know before trusting a number."""
    # imported here: collect() imports torch (its version, CUDA) only when env runs
    from perfkit.measure.envinfo import collect
    from perfkit.stacks.record import stacks_status

    info = collect(probe_pyspy=True)
    ok, how = stacks_status()
    info.extra["stacks"] = {"py_spy": ok, "detail": how}
    if as_json:
        typer.echo(json.dumps(info.to_dict(), indent=2))
    else:
        console.print(render(info))
