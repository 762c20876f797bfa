"""One side of the gate: several runs, from one file, several files or a directory.

A side is a result file, a directory (every `result.json` beneath it, as `perfkit sweep
--out DIR` writes them, or else its `*.json` files) or a glob pattern (quote it:
'out/base-*/result.json'). Files are taken in natural name order (base-2 before base-10),
which is the order an interleaving loop wrote them; within a file, the r-th occurrence
of a load point is its run r (`--repeats` interleaves them). The files' levels are
concatenated into one SweepResult, so run i of a side is the i-th occurrence of each
load point across its files.
"""

from __future__ import annotations

import dataclasses
import glob
import re
from pathlib import Path

from perfkit.errors import PerfkitError
from perfkit.gate.inputs import incomparable, load
from perfkit.result.sweep import SweepResult


def _natural(path: Path) -> list[object]:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", str(path))]


def resolve(spec: Path) -> list[Path]:
    """The result files a side names, in natural order; PerfkitError when none."""
    if spec.is_dir():
        found = list(spec.rglob("result.json")) or list(spec.glob("*.json"))
        if not found:
            raise PerfkitError(f"{spec}: no result.json beneath it and no *.json in it")
        return sorted(found, key=_natural)
    if not spec.exists() and glob.has_magic(str(spec)):
        matches = [Path(p) for p in glob.glob(str(spec), recursive=True)]
        if not matches:
            raise PerfkitError(f"{spec}: no file matches this pattern")
        return sorted(matches, key=_natural)
    return [spec]


def merge(results: list[SweepResult], paths: list[Path]) -> SweepResult:
    """The runs of several results as one: levels concatenated in file order. Every file
    must be comparable with the first (same resolved profile and device class)."""
    first = results[0]
    for result, path in zip(results[1:], paths[1:]):
        reasons = incomparable(first, result)
        if reasons:
            raise PerfkitError(f"{path} is not a run of the same sweep as {paths[0]}: "
                               + "; ".join(reasons))
    if len(results) == 1:
        return first
    return dataclasses.replace(first, levels=[lv for r in results for lv in r.levels],
                               complete=all(r.complete for r in results))


def load_side(spec: Path) -> tuple[SweepResult, str]:
    """The side's runs as one result, and how to name the side in messages."""
    paths = resolve(spec)
    result = merge([load(p) for p in paths], paths)
    name = str(paths[0]) if len(paths) == 1 else f"{spec} ({len(paths)} files)"
    return result, name
