"""`perfkit profiles` and `perfkit profiles show NAME|PATH`."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from perfkit.cli.common import ModelOpt, SetOpt, console, resolve_profile, user_errors

app = typer.Typer(help="List built-in profiles or show one fully resolved.", no_args_is_help=False)


@app.callback(invoke_without_command=True)
@user_errors
def list_profiles(ctx: typer.Context) -> None:
    """List the built-in profiles with a one-line description each."""
    if ctx.invoked_subcommand is not None:
        return
    from perfkit.config.profile import builtin_names, describe  # not needed for --help

    table = Table(show_header=True, header_style="bold", box=None)
    table.add_column("profile")
    table.add_column("description")
    for name in builtin_names():
        table.add_row(name, describe(name))
    console.print(table)
    console.print("\nShow one resolved: [bold]perfkit profiles show NAME|PATH[/]")


@app.command("show")
@user_errors
def show(
    profile: Annotated[str, typer.Argument(help="Built-in profile name or path to a .toml file.")],
    model: ModelOpt = None,
    set_: SetOpt = None,
) -> None:
    """Print the fully resolved profile (extends, presets and overrides applied) as TOML."""
    from perfkit.config import toml_out as tomlout
    from perfkit.config.profile import profile_dict

    resolved = resolve_profile(profile, model, set_)
    typer.echo(tomlout.dumps(profile_dict(resolved)), nl=False)
