"""The sweep result document and its atomic, level-by-level writer.

Top level: schema, kind, profile {name, sha256, resolved}, environment, plan,
levels [...], knee, findings, complete (False until the last level is written).
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

from perfkit.errors import PerfkitError
from perfkit.summary.knee import LevelPoint, find_knee

SCHEMA = "perfkit.sweep/1"


def atomic_write_text(path: Path, text: str) -> None:
    """Write via a temp file in the same folder + rename: readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; results are for sharing
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _clean(value: Any) -> Any:
    """NaN/inf -> None: JSON has neither."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def dumps(doc: dict[str, Any]) -> str:
    return json.dumps(_clean(doc), indent=1, allow_nan=False) + "\n"


def knee_of(levels: list[dict[str, Any]]) -> dict[str, Any]:
    """Knee over the closed-loop levels (first repeat's x order, repeats averaged)."""
    by_x: dict[float, list[dict[str, Any]]] = {}
    for lv in levels:
        if lv["concurrency"] is not None:
            by_x.setdefault(float(lv["concurrency"]), []).append(lv)
    points = []
    for x in sorted(by_x):
        group = by_x[x]
        points.append(LevelPoint(
            x=x,
            throughput=_mean([g["throughput"]["output_tokens_per_s"] for g in group]),
            p99_ttft_s=_mean([g["latency"]["ttft"]["p99"] for g in group]),
            p99_tpot_s=_mean([g["latency"]["tpot"]["p99"] for g in group]),
        ))
    return find_knee(points, x_name="concurrency").to_dict()


def _mean(values: list[Any]) -> Any:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def load_result(path: Path) -> dict[str, Any]:
    """Read a sweep result; a clear PerfkitError for anything that is not one."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PerfkitError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise PerfkitError(f"{path}: not a readable JSON result ({err})") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise PerfkitError(f"{path}: not a perfkit sweep result (expected schema {SCHEMA!r})")
    return doc


class ResultWriter:
    """Holds the document; rewrites the file atomically after every level."""

    def __init__(self, path: Path | None, header: dict[str, Any]) -> None:
        self.path = path
        self.doc: dict[str, Any] = {"schema": SCHEMA, **header, "levels": [],
                                    "knee": None, "findings": [], "complete": False}

    def add_level(self, level: dict[str, Any]) -> None:
        self.doc["levels"].append(level)
        self.flush()

    def finish(self, knee: dict[str, Any] | None, findings: list[dict[str, Any]],
               complete: bool) -> None:
        self.doc.update(knee=knee, findings=findings, complete=complete)
        self.flush()

    def flush(self) -> None:
        if self.path is not None:
            atomic_write_text(self.path, dumps(self.doc))
