"""The report's inputs: result files read, recognised by content, checked, labelled.

A file is a sweep result (schema "perfkit.sweep/1") or a fragmentation result
(schema "perfkit.fragmentation/1"); anything else, or one missing a field the
charts read, is a PerfkitError with one line naming the file and the field.
Invariant after `load_inputs`: labels are unique and non-empty, in file order.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from perfkit.errors import PerfkitError
from perfkit.fragmentation.render import SCHEMA as FRAG_SCHEMA
from perfkit.sweep.result import SCHEMA as SWEEP_SCHEMA

Kind = Literal["sweep", "fragmentation"]
KINDS_BY_SCHEMA: dict[str, Kind] = {SWEEP_SCHEMA: "sweep", FRAG_SCHEMA: "fragmentation"}
NUM = (int, float)
OPT_NUM = (int, float, type(None))
# (dotted path inside a level, accepted types): what the sweep charts read.
LEVEL_FIELDS: tuple[tuple[str, tuple[type, ...]], ...] = (
    ("concurrency", (int, type(None))), ("rate", OPT_NUM), ("repeat", (int,)),
    ("throughput.output_tokens_per_s", OPT_NUM),
    *((f"latency.{m}.{k}", OPT_NUM) for m in ("ttft", "tpot", "e2e")
      for k in ("min", "p50", "p90", "p99", "max")),
    ("kv.blocks_total", (int,)), ("kv.timeline.t_s", (list,)),
    ("kv.timeline.blocks_used", (list,)),
    ("cpu.available", (bool,)), ("cpu.user_s", NUM), ("cpu.system_s", NUM),
    ("cpu.num_minor_faults", (int,)), ("cpu.num_major_faults", (int,)),
    ("gpu.available", (bool,)), ("gpu.timeline", (list,)),
)
POLICY_FIELDS: tuple[tuple[str, tuple[type, ...]], ...] = (
    ("name", (str,)), *((k, NUM) for k in ("used", "reserved", "internal", "external", "free")),
)


@dataclass(frozen=True)
class ReportInput:
    label: str  # names this input's series in every chart
    kind: Kind
    doc: dict[str, Any]
    source: Path | None  # the file read; relative stack paths resolve against its folder


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
    """The plotted series hold numbers; a level is closed-loop or open-loop."""
    if lv["concurrency"] is None and lv["rate"] is None:
        raise PerfkitError(f"{where}: has neither a concurrency nor a rate")
    timeline = lv["kv"]["timeline"]
    if not (_numbers(timeline["t_s"]) and _numbers(timeline["blocks_used"])):
        raise PerfkitError(f"{where}: kv.timeline holds something other than numbers")
    for point in lv["gpu"]["timeline"]:
        if not (isinstance(point, dict) and _numbers([point.get("t_s"), point.get("used_bytes")])):
            raise PerfkitError(f"{where}: gpu.timeline has a malformed sample {point!r}")


def kind_of(doc: Any, where: str) -> Kind:
    """Recognise a result by its schema; check the fields the charts read."""
    schema = doc.get("schema") if isinstance(doc, dict) else None
    if schema not in KINDS_BY_SCHEMA:
        expected = " or ".join(repr(s) for s in KINDS_BY_SCHEMA)
        raise PerfkitError(f"{where}: not a perfkit sweep or fragmentation result "
                           f"(schema {schema!r}; expected {expected})")
    kind = KINDS_BY_SCHEMA[schema]
    assert isinstance(doc, dict)
    key = "levels" if kind == "sweep" else "policies"
    if not isinstance(doc.get(key), list):
        raise PerfkitError(f"{where}: malformed {kind} result ({key!r} is not a list)")
    items = doc[key] if kind == "sweep" else frag_policies(doc)
    if not all(isinstance(x, dict) for x in items):
        raise PerfkitError(f"{where}: malformed {kind} result (an entry of {key!r} "
                           "is not an object)")
    fields = LEVEL_FIELDS if kind == "sweep" else POLICY_FIELDS
    for i, item in enumerate(items):
        _check(item, fields, f"{where}: {'level' if kind == 'sweep' else 'policy'} {i}")
        if kind == "sweep":
            _check_level_series(item, f"{where}: level {i}")
    if kind == "sweep":
        _check(doc, (("findings", (list,)), ("knee", (dict, type(None)))), where)
    return kind


def read_doc(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PerfkitError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise PerfkitError(f"{path}: is a folder, not a result file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise PerfkitError(f"{path}: not a readable JSON result ({err})") from None
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
    out = []
    for path, name in zip(paths, names):
        doc = read_doc(path)
        out.append(ReportInput(name, kind_of(doc, str(path)), doc, path))
    return out


def inputs_from_docs(docs: Sequence[dict[str, Any]], labels: Sequence[str] | None = None
                     ) -> list[ReportInput]:
    """Documents already in memory (perfkit sweep --report): labelled by profile name."""
    if not docs:
        raise PerfkitError("no results to report")
    if labels:
        names = check_labels(labels, len(docs))
    else:
        names = dedupe([str((d.get("profile") or {}).get("name") or "result") for d in docs])
    return [ReportInput(n, kind_of(d, f"result {n!r}"), d, None) for d, n in zip(docs, names)]
