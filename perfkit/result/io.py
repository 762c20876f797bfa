"""Sweep results to and from JSON text and files (v1 files are upgraded on read)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from perfkit.errors import PerfkitError
from perfkit.files import dumps, read_json
from perfkit.result.codec import from_json, to_json
from perfkit.result.sweep import SCHEMA, SCHEMA_V1, SweepResult
from perfkit.result.upgrade import upgrade_v1


def result_json(result: SweepResult) -> str:
    return dumps(to_json(result))


def decode_result(doc: Any, where: str) -> SweepResult:
    """A parsed document as a SweepResult; PerfkitError naming `where` otherwise."""
    if not isinstance(doc, dict) or doc.get("schema") not in (SCHEMA, SCHEMA_V1):
        raise PerfkitError(f"{where}: not a perfkit sweep result (expected schema {SCHEMA!r})")
    if doc["schema"] == SCHEMA_V1:
        doc = upgrade_v1(doc)
    try:
        return from_json(SweepResult, doc, "result")
    except PerfkitError as err:
        raise PerfkitError(f"{where}: malformed sweep result: {err}") from None


def load_result(path: Path) -> SweepResult:
    """Read a sweep result file (perfkit.sweep/2 or /1)."""
    return decode_result(read_json(path), str(path))
