"""Bounds of profile values: signs, shares and ranges (the pool check is config.profile's).

Every bound is a clear error naming the field, never an allocation that fails later.
"""

from __future__ import annotations

from perfkit.config.typed import FieldError


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
MAX_OUTPUTS = 256  # parallel samples or beams of one request (vLLM's n has no cap but memory)


def share(name: str, value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise FieldError(name, f"must be a share between 0 and 1, got {value}")
