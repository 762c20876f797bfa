"""Parsing and printing sizes and durations for humans; integer ceiling division."""

from __future__ import annotations

import re

from perfkit.errors import PerfkitError

_UNITS = {
    "": 1, "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}
_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*$")


def cdiv(a: int, b: int) -> int:
    """Ceiling division of integers (b > 0): blocks for `a` tokens of `b` per block."""
    return -(-a // b)


def parse_size(text: str, what: str = "size") -> int:
    """'12GiB' -> 12884901888. Raises PerfkitError naming `what` on bad input."""
    match = _SIZE.match(text)
    unit = match.group(2).lower() if match else ""
    if not match or unit not in _UNITS:
        raise PerfkitError(
            f"{what}: cannot read {text!r} as a size; write e.g. 12GiB, 512MiB or 80GB"
        )
    return int(float(match.group(1)) * _UNITS[unit])


def format_bytes(num: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(num) < 1024 or unit == "TiB":
            return f"{num:.0f} {unit}" if unit == "B" else f"{num:.1f} {unit}"
        num /= 1024
    return f"{num:.1f} TiB"

