"""Options shared by several commands, declared once; the user-error wrapper."""

from __future__ import annotations

import functools
import json
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperGroup

from perfkit.config.bounds import MAX_CONCURRENCY, MAX_RATE, MAX_REPEATS, MAX_REQUESTS, MIN_RATE
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
    line = " ".join(message.split())  # one line, whatever the message holds
    err_console.print(f"[bold red]error:[/] {escape(line)}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


def user_errors(func: F) -> F:
    """Turn PerfkitError (bad input) into one line on stderr and exit code 2."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except PerfkitError as err:
            raise fail(str(err), err.exit_code) from None
        except KeyboardInterrupt:
            raise fail("interrupted", 130) from None
        except BrokenPipeError:  # `perfkit ... | head`
            sys.stderr.close()
            raise typer.Exit(0) from None
        except OSError as err:  # the net under the checks: a file the OS refused
            where = f"{err.filename}: " if err.filename else ""
            raise fail(f"{where}{err.strerror or err}") from None

    return wrapper  # type: ignore[return-value]


class OneLineErrors(TyperGroup):
    """Click's usage errors (unknown option, bad value, missing argument) as one line on
    stderr, exit 2, in place of a boxed usage block."""

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None,
             complete_var: str | None = None, standalone_mode: bool = True,
             windows_expand_args: bool = True, **extra: Any) -> Any:
        try:
            code = super().main(args, prog_name, complete_var, False, windows_expand_args,
                                **extra)
        except typer.TyperException as err:
            if type(err).__name__ == "NoArgsIsHelpError":  # bare `perfkit`: the help
                err.show()  # type: ignore[attr-defined]
            else:
                ctx = getattr(err, "ctx", None)
                hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
                fail(f"{err.format_message()}{hint}")
            code = err.exit_code
        except typer.Abort:
            err_console.print("Aborted.")
            code = 130
        if not standalone_mode:
            return code
        sys.exit(code if isinstance(code, int) else 0)


def resolve_profile(profile: str, model: str | None, sets: list[str] | None) -> Profile:
    from perfkit.config.profile import Overrides, load_profile  # not needed for --help

    return load_profile(profile, Overrides(model=model, sets=tuple(sets or ())))


def parse_list(text: str, kind: type, what: str,
               bounds: tuple[float, float] | None = None) -> list[Any]:
    """'1,2,4' -> [1, 2, 4]; a clear error naming the option otherwise. Values are finite,
    positive and (with `bounds`) within [low, high]."""
    try:
        values = [kind(part) for part in text.split(",") if part.strip()]
    except (ValueError, OverflowError):
        raise PerfkitError(
            f"{what}: cannot read {text[:80]!r}; expected comma-separated "
            f"{'integers' if kind is int else 'numbers'}, e.g. 1,2,4"
        ) from None
    if not values or any(not math.isfinite(v) or v <= 0 for v in values):
        raise PerfkitError(f"{what}: expected finite positive values, got {text[:80]!r}")
    low, high = bounds or (0, 1 << 63)
    outside = [v for v in values if not low <= v <= high]
    if outside:
        raise PerfkitError(f"{what}: {outside[0]:g} is outside [{low:g}, {high:g}]")
    return values


def dataset_sets(dataset: Path | None, tokenizer: Path | None = None) -> list[str]:
    """--dataset FILE (and its --tokenizer DIR for text records) as profile overrides."""
    if dataset is None:
        return []
    out = [f"workload.dataset.path={json.dumps(str(dataset))}"]
    if tokenizer is not None:
        out.append(f"workload.dataset.tokenizer={json.dumps(str(tokenizer))}")
    return out


def load_sets(sets: list[str] | None, concurrency: str | None, rate: str | None,
              requests: int | None, repeats: int | None, warmup: int | None,
              device: str | None, seed: int | None) -> list[str]:
    """Command-line values become profile overrides: the resolved profile (and its hash)
    describes the run exactly, and they are validated like the file."""
    out = list(sets or [])
    if concurrency is not None:
        levels = parse_list(concurrency, int, "--concurrency", bounds=(1, MAX_CONCURRENCY))
        out.append(f"sweep.concurrency={levels}")
    if rate is not None:
        rates = parse_list(rate, float, "--rate", bounds=(MIN_RATE, MAX_RATE))
        out.append(f"sweep.rates={rates}")
    if (concurrency is None) != (rate is None):
        out.append("sweep.rates=[]" if rate is None else "sweep.concurrency=[]")
    for key, value, limit in (("--requests", requests, MAX_REQUESTS),
                              ("--repeats", repeats, MAX_REPEATS),
                              ("--warmup", warmup, MAX_REQUESTS)):
        if value is not None and not (0 if key == "--warmup" else 1) <= value <= limit:
            raise PerfkitError(f"{key}: expected {'0' if key == '--warmup' else '1'} to "
                               f"{limit:,}, got {str(value)[:40]}")
    for key, value in (("workload.num_requests", requests), ("sweep.repeats", repeats),
                       ("sweep.warmup", warmup), ("workload.seed", seed)):
        if value is not None:
            out.append(f"{key}={value}")
    if device is not None:
        out.append(f'engine.device="{device}"')
    return out
