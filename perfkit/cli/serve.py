"""`perfkit serve`: the profile's engine behind an OpenAI-compatible HTTP server."""

from __future__ import annotations

import ipaddress
import sys
from typing import TYPE_CHECKING, Annotated

import typer

from perfkit.cli.common import (
    ModelOpt,
    ProfileOpt,
    SetOpt,
    err_console,
    fail,
    resolve_profile,
    user_errors,
)
from perfkit.errors import PerfkitError

if TYPE_CHECKING:
    from perfkit.serve.lifecycle import Server


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _announce(server: Server) -> None:
    p = server.profile
    print(f"perfkit serve: model {p.name!r} ({p.model.preset or 'custom'} shapes) at "
          f"{server.url}/v1  (Ctrl-C or SIGTERM drains and stops)", flush=True)


def _say(line: str) -> None:
    err_console.print(f"[dim]perfkit serve:[/] {line}", highlight=False, soft_wrap=True)


def _check_options(port: int, max_queued_tokens: int | None, drain_timeout: float,
                   eos_token_id: int | None, vocab_size: int) -> None:
    if not 0 <= port <= 65535:
        raise PerfkitError(f"--port must be between 0 and 65535, got {port}")
    if max_queued_tokens is not None and max_queued_tokens < 0:
        raise PerfkitError(f"--max-queued-tokens must be >= 0 (0: no quota), "
                           f"got {max_queued_tokens}")
    if not drain_timeout >= 0:
        raise PerfkitError(f"--drain-timeout must be >= 0 seconds, got {drain_timeout}")
    if eos_token_id is not None and not 0 <= eos_token_id < vocab_size:
        raise PerfkitError(f"--eos-token-id must be a token id in [0, {vocab_size}), "
                           f"got {eos_token_id}")


@user_errors
def serve(
    profile: ProfileOpt = "default",
    model: ModelOpt = None,
    set_: SetOpt = None,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port (0: any free one).")] = 8000,
    max_queued_tokens: Annotated[int | None, typer.Option(
        help="Token quota: prompt + max_tokens of all unfinished requests; beyond it "
        "429 (default: twice the KV pool's token slots; 0: no quota).")] = None,
    drain_timeout: Annotated[float, typer.Option(
        help="On SIGTERM/SIGINT: seconds in-flight requests may run before they "
        "are cancelled.")] = 10.0,
    eos_token_id: Annotated[int | None, typer.Option(
        help="Treat this token as the model's end of sequence (requests stop there "
        "unless ignore_eos). Default: none, as the synthetic model has no EOS.")] = None,
) -> None:
    """Serve the profile's engine over HTTP: OpenAI /v1/completions and
    /v1/chat/completions (streaming too), /v1/models, /health, /metrics (Prometheus)."""
    # imported here: asyncio, aiohttp, torch and the engine load only for this command
    import asyncio

    from perfkit.serve.lifecycle import ServeOptions, Server, bind, serve_until_signal
    from perfkit.sweep.sizing import check_fits

    prof = resolve_profile(profile, model, set_)
    _check_options(port, max_queued_tokens, drain_timeout, eos_token_id, prof.model.vocab_size)
    check_fits(prof)
    sock = bind(host, port)
    if not _is_loopback(host):
        _say(f"[yellow]listening on {host}: no authentication; anyone who can reach it "
             "can use it[/]")
    options = ServeOptions(max_queued_tokens=max_queued_tokens, drain_timeout_s=drain_timeout,
                           eos_token_id=eos_token_id)
    server = Server(prof, options, sock, say=_say)
    asyncio.run(serve_until_signal(server, _announce))
    sys.stdout.flush()
    if server.state is not None and server.state.engine_error is not None:
        raise fail(f"the engine loop failed: {server.state.engine_error}", 1)
    _say("stopped")
