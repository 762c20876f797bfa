"""Resolve `--target`, `--model`, `--api-key-env`, `--timeout` into a reachable Target.

Everything here runs before the first level, and every problem is a PerfkitError
(one line, exit 2): a bad URL, a missing key variable, a target that does not
answer, a model list that cannot be read when no --model was given.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import aiohttp

from perfkit.config.schema import Profile
from perfkit.errors import PerfkitError
from perfkit.loadgen.auto import WorkerChoice, parse_workers
from perfkit.loadgen.client import Target, error_kind
from perfkit.loadgen.text import load_renderer
from perfkit.remote.driver import RemoteSweep
from perfkit.remote.options import TargetOptions
from perfkit.remote.profile import profile_keys
from perfkit.sweep.plan import SweepPlan
from perfkit.urls import check_url

__all__ = ["check_url"]

DEFAULT_TIMEOUT_S = 60.0
ENDPOINTS = ("completions", "chat")
PROBE_TIMEOUT_S = 10.0  # the start-up probe waits at most this long, whatever --timeout


def api_key_from_env(var: str | None) -> str | None:
    if var is None:
        return None
    key = os.environ.get(var)
    if not key:
        raise PerfkitError(f"--api-key-env: environment variable {var} is not set (or empty)")
    return key


async def _get_json(url: str, target: Target) -> tuple[int, Any]:
    timeout = aiohttp.ClientTimeout(total=min(target.timeout_s, PROBE_TIMEOUT_S))
    async with aiohttp.ClientSession(timeout=timeout, headers=target.headers()) as session, \
            session.get(url) as resp:
        if resp.status != 200:
            return resp.status, None
        return 200, await resp.json(content_type=None)


def _first_model(body: Any) -> str | None:
    data = body.get("data") if isinstance(body, dict) else None
    if isinstance(data, list) and data and isinstance(data[0], dict):
        first = data[0].get("id")
        return first if isinstance(first, str) and first else None
    return None


async def _probe(target: Target) -> tuple[int, str | None]:
    """GET {url}/models: its status and the first model's id (None if unreadable)."""
    url = f"{target.url}/models"
    try:
        status, body = await _get_json(url, target)
    except (aiohttp.ClientError, asyncio.TimeoutError, TimeoutError, OSError) as err:
        raise PerfkitError(f"cannot reach {target.url}: {error_kind(err)}") from None
    except ValueError:
        return 200, None  # not JSON: a server without a model list
    if status in (401, 403):
        raise PerfkitError(f"{url}: http {status}; does the server need an API key "
                           "(--api-key-env VAR)?")
    return status, _first_model(body) if status == 200 else None


def resolve_target(url: str, model: str | None, api_key_env: str | None,
                   timeout_s: float) -> Target:
    """Check the options, reach the server once, pick the model."""
    if not timeout_s > 0:
        raise PerfkitError(f"--timeout: expected seconds > 0, got {timeout_s:g}")
    base = check_url(url, "--target")
    target = Target(base, model or "", api_key_from_env(api_key_env), timeout_s)
    status, first = asyncio.run(_probe(target))
    if model:
        return target
    if status == 404:
        raise PerfkitError(f"{base}/models: http 404; is the URL the API's base (it usually "
                           "ends in /v1)? Or pass --model NAME")
    if first is None:
        raise PerfkitError(f"{base}/models lists no model (http {status}); pass --model NAME")
    return Target(base, first, target.api_key, timeout_s)


async def _probe_metrics(url: str) -> str | None:
    """None when the endpoint answers with text; else why not."""
    timeout = aiohttp.ClientTimeout(total=PROBE_TIMEOUT_S)
    try:
        async with aiohttp.ClientSession(timeout=timeout) as session, session.get(url) as resp:
            if resp.status != 200:
                return f"http {resp.status}"
            await resp.text()
    except (aiohttp.ClientError, asyncio.TimeoutError, TimeoutError, OSError) as err:
        return error_kind(err)
    return None


def _workers(opts: TargetOptions) -> tuple[WorkerChoice, Callable[[], object] | None]:
    """--workers, --workers-per-node, --ray: how many workers, and what starts them."""
    if opts.workers_per_node is not None and opts.workers_per_node < 1:
        raise PerfkitError(f"--workers-per-node: expected a whole number >= 1, got "
                           f"{opts.workers_per_node}")
    if opts.ray is None:
        if opts.workers_per_node is not None:
            raise PerfkitError("--workers-per-node needs --ray (workers on a Ray cluster's "
                               "nodes); on this machine use --workers N")
        return parse_workers(opts.workers), None
    from perfkit.loadgen.ray_actors import join_ray

    return join_ray(opts.ray, opts.workers, opts.workers_per_node)


def connect(opts: TargetOptions, profile: Profile, plan: SweepPlan) -> RemoteSweep:
    """Check every remote option and reach the server (and its metrics) once."""
    scrape = None if opts.scrape_url is None else check_url(opts.scrape_url, "--scrape-metrics")
    if opts.endpoint not in ENDPOINTS:
        raise PerfkitError(f"--endpoint: expected completions or chat, got {opts.endpoint!r}")
    render = None if opts.tokenizer is None else load_renderer(opts.tokenizer).render
    timeout_s = DEFAULT_TIMEOUT_S if opts.timeout_s is None else opts.timeout_s
    target = replace(resolve_target(opts.url, opts.model, opts.api_key_env, timeout_s),
                     endpoint=opts.endpoint)
    if scrape is not None:
        why = asyncio.run(_probe_metrics(scrape))
        if why is not None:
            raise PerfkitError(f"--scrape-metrics: cannot read {scrape}: {why}")
    keys = profile_keys(opts.server_profile, plan.levels)
    if opts.server_profile_dir is not None and not keys:
        raise PerfkitError("--server-profile-dir needs --server-profile LEVELS")
    workers, launcher = _workers(opts)
    return RemoteSweep(target, scrape, profile, plan, render, keys, opts.server_profile_dir,
                       workers, launcher)
