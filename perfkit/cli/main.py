"""The `perfkit` app: registers one module per subcommand."""

from __future__ import annotations

from typing import Annotated

import typer

from perfkit import __version__
from perfkit.cli import (
    bench,
    calibrate,
    env,
    fragmentation,
    gate,
    predict,
    profiles,
    report,
    serve,
    stacks,
    sweep,
)
from perfkit.cli.common import OneLineErrors

app = typer.Typer(
    name="perfkit",
    cls=OneLineErrors,
    help="Benchmark and diagnose LLM serving with a paged KV cache.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode="rich",
)
app.add_typer(profiles.app, name="profiles")
app.command("env", short_help="What this machine is: versions, GPU/NVML, py-spy, CPU.")(env.env)
app.command("sweep", short_help="Concurrency/rate sweep: latency, KV, CPU, GPU, knee, findings.")(
    sweep.sweep
)
app.command("bench", short_help="Engine microbenchmarks against their targets.")(bench.bench)
app.command("stacks", short_help="Flame-graph stacks of any Python process.")(stacks.stacks)
app.command("gate", short_help="CI regression gate: baseline vs current sweep.")(gate.gate)
app.command(
    "fragmentation", short_help="KV memory waste by kind under allocation policies."
)(fragmentation.fragmentation)
app.command(
    "calibrate", short_help="Fit the step-time model from a short live run (for predict)."
)(calibrate.calibrate)
app.command(
    "predict", short_help="Predicted TTFT, TPOT, throughput per level from a calibration."
)(predict.predict)
app.command("report", short_help="One self-contained HTML report with plots.")(report.report)
app.command(
    "serve", short_help="The engine behind an OpenAI-compatible HTTP server."
)(serve.serve)


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
