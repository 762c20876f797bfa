"""Bounds of profile values: signs, shares, ranges, and a pool that can serve anything.

Every bound is a clear error naming the field, never an allocation that fails later.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from perfkit.config.typed import FieldError
from perfkit.errors import PerfkitError

if TYPE_CHECKING:
    from perfkit.config.schema import LengthDist, Profile


def positive(name: str, value: float | None, allow_zero: bool = False) -> None:
    if value is None:
        return
    if value < 0 or (value == 0 and not allow_zero):
        raise FieldError(name, f"must be {'>= 0' if allow_zero else '> 0'}, got {value}")


def at_most(name: str, value: float | None, limit: float) -> None:
    if value is not None and value > limit:
        raise FieldError(name, f"must be at most {limit:,}, got {value:,}")


def rate(name: str, value: float, allow_zero: bool = False) -> None:
    """Requests per second: a level that waits hours for its next arrival is a mistake."""
    if allow_zero and value == 0:
        return
    if not MIN_RATE <= value <= MAX_RATE:
        zero = "0 or " if allow_zero else ""
        raise FieldError(name, f"must be {zero}between {MIN_RATE:g} and {MAX_RATE:g} "
                               f"requests/s, got {value:g}")


MAX_REQUESTS = 1_000_000  # requests per level (and warm-up): generated up front
MAX_CONCURRENCY = 65_536
MAX_REPEATS = 1_000
MIN_RATE, MAX_RATE = 1e-3, 1e6  # requests/s
MAX_COUNT = 1 << 24  # blocks, tokens, queue slots: far above any real engine


def share(name: str, value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise FieldError(name, f"must be a share between 0 and 1, got {value}")


def smallest_request(dist: LengthDist) -> int:
    if dist.kind == "fixed":
        return min(max(round(dist.mean), dist.min), dist.max)
    return dist.min


def check_pool(profile: Profile) -> None:
    """A pool that cannot hold the workload's smallest request rejects every request: a
    sweep or a server on it measures nothing. (The fragmentation replays take any pool.)"""
    from perfkit.config.profile import pool_blocks
    from perfkit.config.units import cdiv

    eng, work = profile.engine, profile.workload
    tokens = min(smallest_request(work.prompt_len) + smallest_request(work.output_len),
                 eng.max_model_len)
    need, have = cdiv(tokens, eng.block_size), pool_blocks(profile)
    if have < need:
        key = "engine.kv_memory" if eng.kv_memory is not None else "engine.num_blocks"
        raise PerfkitError(
            f"profile {profile.name!r}: {key}: a pool of {have} block(s) of {eng.block_size} "
            f"tokens cannot hold the workload's smallest request ({tokens} tokens, {need} "
            f"blocks): every request would be rejected; give at least {need} blocks")
