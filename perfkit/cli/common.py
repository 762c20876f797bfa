"""Options shared by several commands, declared once; the user-error wrapper."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.console import Console

from perfkit.errors import PerfkitError

if TYPE_CHECKING:
    from perfkit.config.schema import Profile

F = TypeVar("F", bound=Callable[..., Any])

console = Console()
err_console = Console(stderr=True)

ProfileOpt = Annotated[
    str, typer.Option("--profile", "-p", help="Built-in profile name or path to a .toml file.")
]
ModelOpt = Annotated[
    str | None,
    typer.Option("--model", help="Model preset: tiny, small, opt-13b, llama3-8b, llama3-70b."),
]
SetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        help="Override one profile key, SECTION.KEY=VALUE (repeatable), "
        "e.g. --set engine.block_size=32.",
    ),
]


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print one clear error line to stderr; return the Exit to raise."""
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


def user_errors(func: F) -> F:
    """Turn PerfkitError (bad input) into one line on stderr and exit code 2."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except PerfkitError as err:
            raise fail(str(err), err.exit_code) from None
        except BrokenPipeError:  # `perfkit ... | head`
            sys.stderr.close()
            raise typer.Exit(0) from None

    return wrapper  # type: ignore[return-value]


def resolve_profile(profile: str, model: str | None, sets: list[str] | None) -> Profile:
    from perfkit.config.profile import Overrides, load_profile  # not needed for --help

    return load_profile(profile, Overrides(model=model, sets=tuple(sets or ())))


def parse_list(text: str, kind: type, what: str) -> list[Any]:
    """'1,2,4' -> [1, 2, 4]; a clear error naming the option otherwise."""
    try:
        values = [kind(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise PerfkitError(
            f"{what}: cannot read {text!r}; expected comma-separated "
            f"{'integers' if kind is int else 'numbers'}, e.g. 1,2,4"
        ) from None
    if not values or any(v <= 0 for v in values):
        raise PerfkitError(f"{what}: expected positive values, got {text!r}")
    return values
