"""The report's inputs: result files read, recognised by content, checked, labelled.

A file is a sweep result (schema "perfkit.sweep/2", or "/1", upgraded on read) decoded
into a `SweepResult`, or a fragmentation result (schema "perfkit.fragmentation/1") kept
as its document. Anything else, or one missing a field the charts read, is a
PerfkitError with one line naming the file and the field.
Invariant after `load_inputs`: labels are unique and non-empty, in file order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from perfkit.errors import PerfkitError
from perfkit.files import read_json
from perfkit.fragmentation.render import SCHEMA as FRAG_SCHEMA
from perfkit.result import SweepResult
from perfkit.result.io import decode_result
from perfkit.result.sweep import SCHEMA as SWEEP_SCHEMA
from perfkit.result.sweep import SCHEMA_V1 as SWEEP_SCHEMA_V1

Kind = Literal["sweep", "fragmentation"]
KINDS_BY_SCHEMA: dict[str, Kind] = {SWEEP_SCHEMA: "sweep", SWEEP_SCHEMA_V1: "sweep",
                                    FRAG_SCHEMA: "fragmentation"}
NUM = (int, float)
# A level's load point, checked before the full decode so the message names the level.
LEVEL_FIELDS: tuple[tuple[str, tuple[type, ...]], ...] = (
    ("concurrency", (int, type(None))), ("rate", (int, float, type(None))), ("repeat", (int,)),
)
POLICY_FIELDS: tuple[tuple[str, tuple[type, ...]], ...] = (
    ("name", (str,)), *((k, NUM) for k in ("used", "reserved", "internal", "external", "free")),
)


@dataclass(frozen=True)
class ReportInput:
    """One input: a typed sweep result or a fragmentation document (exactly one)."""

    label: str  # names this input's series in every chart
    source: Path | None  # the file read; relative stack paths resolve against its folder
    sweep: SweepResult | None = None
    frag: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if (self.sweep is None) == (self.frag is None):
            raise ValueError("a report input is a sweep or a fragmentation result")

    @property
    def kind(self) -> Kind:
        return "sweep" if self.sweep is not None else "fragmentation"

    @property
    def profile(self) -> tuple[str, str]:
        """(profile name, sha256) as the result recorded them."""
        if self.sweep is not None:
            return self.sweep.profile.name, self.sweep.profile.sha256
        prof = (self.frag or {}).get("profile") or {}
        return str(prof.get("name", "?")), str(prof.get("sha256") or "")


def _lookup(obj: Any, dotted: str) -> Any:
    for key in dotted.split("."):
        if not isinstance(obj, dict) or key not in obj:
            raise KeyError(dotted)
        obj = obj[key]
    return obj


def _check(obj: Any, fields: Sequence[tuple[str, tuple[type, ...]]], where: str) -> None:
    for dotted, types in fields:
        try:
            value = _lookup(obj, dotted)
        except KeyError:
            raise PerfkitError(f"{where}: missing field {dotted!r}") from None
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            raise PerfkitError(f"{where}: field {dotted!r} has an unexpected value {value!r}")


def _numbers(values: Any) -> bool:
    return isinstance(values, list) and all(
        isinstance(v, NUM) and not isinstance(v, bool) for v in values)


def _check_level_series(lv: dict[str, Any], where: str) -> None:
    """The plotted series hold numbers (where present: the decode checks the rest)."""
    timeline = (lv.get("kv") or {}).get("timeline") or {}
    if not all(_numbers(timeline.get(k, [])) for k in ("t_s", "blocks_used")):
        raise PerfkitError(f"{where}: kv.timeline holds something other than numbers")
    gpu = lv.get("gpu") or {}
    for point in gpu.get("timeline") or []:
        if not (isinstance(point, dict) and _numbers([point.get("t_s"), point.get("used_bytes")])):
            raise PerfkitError(f"{where}: gpu.timeline has a malformed sample {point!r}")


def _entries(doc: dict[str, Any], kind: Kind, where: str) -> list[Any]:
    key = "levels" if kind == "sweep" else "policies"
    if not isinstance(doc.get(key), list):
        raise PerfkitError(f"{where}: malformed {kind} result ({key!r} is not a list)")
    items = doc[key] if kind == "sweep" else frag_policies(doc)
    if not all(isinstance(x, dict) for x in items):
        raise PerfkitError(f"{where}: malformed {kind} result (an entry of {key!r} "
                           "is not an object)")
    return list(items)


def kind_of(doc: Any, where: str) -> Kind:
    """Recognise a result by its schema; check the fields the charts read by name."""
    schema = doc.get("schema") if isinstance(doc, dict) else None
    if schema not in KINDS_BY_SCHEMA:
        expected = " or ".join(repr(s) for s in KINDS_BY_SCHEMA)
        raise PerfkitError(f"{where}: not a perfkit sweep or fragmentation result "
                           f"(schema {schema!r}; expected {expected})")
    kind = KINDS_BY_SCHEMA[schema]
    assert isinstance(doc, dict)
    for i, item in enumerate(_entries(doc, kind, where)):
        if kind == "sweep":
            _check(item, LEVEL_FIELDS, f"{where}: level {i}")
            _check_level_series(item, f"{where}: level {i}")
        else:
            _check(item, POLICY_FIELDS, f"{where}: policy {i}")
    return kind


def input_of(doc: Any, where: str, label: str, source: Path | None) -> ReportInput:
    """A parsed document as an input: a sweep decoded (v1 upgraded), a fragmentation
    result checked."""
    if kind_of(doc, where) == "sweep":
        return ReportInput(label, source, sweep=decode_result(doc, where))
    return ReportInput(label, source, frag=doc)


def read_doc(path: Path) -> dict[str, Any]:
    if path.is_dir():
        raise PerfkitError(f"{path}: is a folder, not a result file")
    doc = read_json(path)
    if not isinstance(doc, dict):
        raise PerfkitError(f"{path}: not a perfkit sweep or fragmentation result")
    return doc


def dedupe(labels: Sequence[str]) -> list[str]:
    """A '#n' suffix on every label that occurs more than once."""
    seen: dict[str, int] = {}
    out = []
    for lab in labels:
        seen[lab] = seen.get(lab, 0) + 1
        out.append(lab if labels.count(lab) == 1 else f"{lab} #{seen[lab]}")
    return out


def default_labels(paths: Sequence[Path]) -> list[str]:
    """File stems; where two stems collide, 'folder/stem'; then a #n suffix."""
    stems = [p.stem for p in paths]
    return dedupe([f"{p.parent.name}/{p.stem}" if stems.count(p.stem) > 1 and p.parent.name
                   else p.stem for p in paths])


def frag_policies(doc: dict[str, Any]) -> list[Any]:
    """The replayed policies, then (with --live) the engine and its replays."""
    live = doc.get("live")
    extra: list[Any] = []
    if isinstance(live, dict):
        replays = live.get("replays")
        extra = [live.get("engine"), *(replays if isinstance(replays, list) else [])]
    return [*doc["policies"], *extra]


def check_labels(labels: Sequence[str], count: int) -> list[str]:
    if len(labels) != count:
        raise PerfkitError(f"--label: got {len(labels)} labels for {count} result files; "
                           "give one per file, in order")
    if any(not lab.strip() for lab in labels) or len(set(labels)) != len(labels):
        raise PerfkitError(f"--label: labels must be non-empty and differ, got {list(labels)}")
    return list(labels)


def load_inputs(paths: Sequence[Path], labels: Sequence[str] | None = None
                ) -> list[ReportInput]:
    if not paths:
        raise PerfkitError("give at least one result file (perfkit sweep --json / "
                           "perfkit fragmentation --json)")
    names = check_labels(labels, len(paths)) if labels else default_labels(paths)
    return [input_of(read_doc(path), str(path), name, path) for path, name in zip(paths, names)]


InMemory = SweepResult | dict[str, Any]  # a typed sweep, or a document (fragmentation)


def _profile_name(result: InMemory) -> str:
    if isinstance(result, SweepResult):
        return result.profile.name or "result"
    return str((result.get("profile") or {}).get("name") or "result")


def inputs_from_results(results: Sequence[InMemory], labels: Sequence[str] | None = None
                        ) -> list[ReportInput]:
    """Results already in memory (perfkit sweep --report): labelled by profile name.
    A document (a dict) is recognised by its schema, as a file would be."""
    if not results:
        raise PerfkitError("no results to report")
    names = (check_labels(labels, len(results)) if labels
             else dedupe([_profile_name(r) for r in results]))
    return [ReportInput(n, None, sweep=r) if isinstance(r, SweepResult)
            else input_of(r, f"result {n!r}", n, None) for r, n in zip(results, names)]
