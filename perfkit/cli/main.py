"""The `perfkit` app: registers one module per subcommand."""

from __future__ import annotations

from typing import Annotated

import typer

from perfkit import __version__
from perfkit.cli import bench, env, fragmentation, gate, profiles, report, stacks, sweep

app = typer.Typer(
    name="perfkit",
    help="Benchmark and diagnose LLM serving with a paged KV cache.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode="rich",
)
app.add_typer(profiles.app, name="profiles")
app.command("env")(env.env)
app.command("sweep")(sweep.sweep)
app.command("bench")(bench.bench)
app.command("stacks")(stacks.stacks)
app.command("gate")(gate.gate)
app.command("fragmentation")(fragmentation.fragmentation)
app.command("report")(report.report)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"perfkit {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """perfkit: how fast, and why."""


def main() -> None:
    app()
