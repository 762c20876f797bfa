"""The gate's inputs: loading, comparability, and each level's samples and values.

A level is matched across results by its load point; its runs (repeats, in the order
they were taken) are kept apart for pairing and pooled for display. Raw
samples follow the warm-up rule of perfkit.summary.latency, applied per repeat (each
repeat has its own clock): a request counts unless it is flagged `warmup` or arrived
before the last warm-up request was last seen. TTFT counts served requests; TPOT and
E2E count completed ones.
"""

from __future__ import annotations

import dataclasses
import typing
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfkit.config.schema import Profile
from perfkit.errors import PerfkitError
from perfkit.files import read_json
from perfkit.gate.rules import Metric
from perfkit.records import FAILED_REASONS
from perfkit.result.io import decode_result
from perfkit.result.level import LevelResult, RequestSample
from perfkit.result.point import LoadPoint
from perfkit.result.sweep import SweepResult

SAMPLES: dict[str, Callable[[RequestSample], float | None]] = {
    "ttft_s": lambda r: r.ttft_s, "tpot_s": lambda r: r.tpot_s, "e2e_s": lambda r: r.e2e_s}
MAX_DIFFS = 5  # profile differences named in a mismatch message


# ---- loading ----------------------------------------------------------------------------


def decode(doc: Any, where: str) -> SweepResult:
    """A parsed document as a SweepResult (perfkit.sweep/2 or /1); PerfkitError naming
    `where` when malformed. `levels` has a default in the model, but a document without
    it is broken, not empty: the gate would compare against nothing."""
    result = decode_result(doc, where)
    if "levels" not in doc:
        raise PerfkitError(f"{where}: malformed sweep result: missing 'levels'")
    return result


def load(path: Path) -> SweepResult:
    return decode(read_json(path), str(path))


def num_repeats(result: SweepResult) -> int:
    """Runs of the least-repeated level. Counted, not read from `repeat`: results of
    interleaved single-repeat sweeps may be merged by concatenating their levels."""
    runs = Counter(lv.point for lv in result.levels)
    return min(runs.values(), default=0)


def side_info(result: SweepResult, path: Path | str) -> dict[str, Any]:
    return {"path": str(path), "profile": result.profile.name or "?",
            "sha256": result.profile.sha256, "device_class": result.device_class,
            "complete": result.complete, "levels": len(result.levels),
            "repeats": num_repeats(result)}


# ---- comparability ------------------------------------------------------------------------


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(value, dict):
        return {prefix: value}
    out: dict[str, Any] = {}
    for key, item in value.items():
        out |= _flat(item, f"{prefix}.{key}" if prefix else str(key))
    return out


IGNORED_KEYS = ("name", "description", "gate")  # say what a profile is, not what it measures


def profile_diffs(base: dict[str, Any], cur: dict[str, Any]) -> list[str]:
    """'key: baseline vs current' for every differing resolved key but the name, the
    description and [gate] (the gate's rules decide how to compare, not what was
    measured)."""
    flat_b = _flat({k: v for k, v in base.items() if k not in IGNORED_KEYS})
    flat_c = _flat({k: v for k, v in cur.items() if k not in IGNORED_KEYS})
    keys = sorted(set(flat_b) | set(flat_c))
    return [f"{k}: {flat_b.get(k, '(unset)')!r} vs {flat_c.get(k, '(unset)')!r}"
            for k in keys if flat_b.get(k) != flat_c.get(k)
            and not _unset_is_default(k, flat_b, flat_c)]


_NO_DEFAULT = object()


def _unset_is_default(key: str, flat_b: dict[str, Any], flat_c: dict[str, Any]) -> bool:
    """A key only one side has (a field a later perfkit added) at the value this
    perfkit defaults it to: the other side ran with that value too."""
    if (key in flat_b) == (key in flat_c):
        return False
    value = flat_b.get(key, flat_c.get(key))
    return _schema_default(key) == value


def _schema_default(key: str) -> Any:
    """The Profile schema's default for a dotted key; _NO_DEFAULT when it has none."""
    kind: Any = Profile
    default: Any = _NO_DEFAULT
    for part in key.split("."):
        if not dataclasses.is_dataclass(kind):
            return _NO_DEFAULT
        found = {f.name: f for f in dataclasses.fields(kind)}.get(part)
        if found is None:
            return _NO_DEFAULT
        hints = typing.get_type_hints(kind)
        kind = hints.get(part)
        if found.default is not dataclasses.MISSING:
            default = found.default
        elif found.default_factory is not dataclasses.MISSING:
            default = found.default_factory()
        else:
            default = _NO_DEFAULT
    return default


def incomparable(base: SweepResult, cur: SweepResult) -> list[str]:
    """Reasons the two results cannot be compared; empty when they can."""
    reasons = []
    bd, cd = base.device_class, cur.device_class
    if bd != cd:
        reasons.append(f"device class differs: baseline {bd!r} vs current {cd!r}")
    bp, cp = base.profile, cur.profile
    diffs = profile_diffs(bp.resolved, cp.resolved)
    if bp.sha256 != cp.sha256 and diffs:
        shown = "; ".join(diffs[:MAX_DIFFS])
        more = f" (and {len(diffs) - MAX_DIFFS} more)" if len(diffs) > MAX_DIFFS else ""
        reasons.append(f"resolved profile differs (sha256 {bp.sha256[:12]} vs "
                       f"{cp.sha256[:12]}): {shown}{more}")
    return reasons


# ---- samples -----------------------------------------------------------------------------


def _last_seen(r: RequestSample) -> float:
    """Arrival plus the latest offset known (queue, first token, last token, finish)."""
    last_token = None if r.ttft_s is None else r.ttft_s + sum(r.itl_s)
    offsets = [r.queue_s, r.ttft_s, last_token, r.e2e_s]
    return r.arrival_s + max([o for o in offsets if o is not None] or [0.0])


def measured(requests: list[RequestSample]) -> list[RequestSample]:
    warm = [_last_seen(r) for r in requests if r.warmup]
    cutoff = max(warm) if warm else None
    return [r for r in requests if not r.warmup and (cutoff is None or r.arrival_s >= cutoff)]


def _completed(r: RequestSample) -> bool:
    return r.rejected is None and r.e2e_s is not None and r.finish_reason not in FAILED_REASONS


def _picked(requests: list[RequestSample]) -> dict[str, list[RequestSample]]:
    """The measured requests each sample field counts: TTFT served ones, TPOT and E2E
    completed ones."""
    served = [r for r in measured(requests) if r.rejected is None]
    completed = [r for r in served if _completed(r)]
    return {"ttft_s": served, "tpot_s": completed, "e2e_s": completed}


def repeat_samples(requests: list[RequestSample],
                   pick: dict[str, list[RequestSample]] | None = None) -> dict[str, list[float]]:
    """Measured per-request samples of one repeat: field -> values."""
    pick = pick or _picked(requests)
    return {name: [v for v in map(get, pick[name]) if v is not None]
            for name, get in SAMPLES.items()}


RequestKey = tuple[int, int, int]  # (id, prompt tokens, output tokens): the same request


def repeat_keyed(requests: list[RequestSample], pick: dict[str, list[RequestSample]] | None = None
                 ) -> dict[str, dict[RequestKey, float]]:
    """Measured per-request samples of one repeat keyed by request: field -> {key: value}.
    For a profile and seed the same key is the same work on both sides of a gate."""
    pick = pick or _picked(requests)
    out: dict[str, dict[RequestKey, float]] = {}
    for name, get in SAMPLES.items():
        values = ((r, get(r)) for r in pick[name])
        out[name] = {(r.id, r.prompt_tokens, r.output_tokens): v for r, v in values
                     if v is not None and v > 0}
    return out


def sampler_reason(metric: Metric, level: LevelResult) -> str:
    """Why the sampler the metric needs did not run at this level; '' when it did."""
    if metric.sampler is None:
        return ""
    section = level.cpu if metric.sampler == "cpu" else level.gpu
    return "" if section.available else f"{metric.sampler}: {section.reason or 'unavailable'}"


@dataclass
class LevelSamples:
    """One level of one side, every run in the order taken."""

    repeats: list[LevelResult] = field(default_factory=list)  # file order
    samples: list[dict[str, list[float]]] = field(default_factory=list)  # per repeat
    keyed_samples: list[dict[str, dict[RequestKey, float]]] = field(default_factory=list)

    def add(self, level: LevelResult) -> None:
        self.repeats.append(level)
        pick = _picked(level.requests)  # once: both views count the same requests
        self.samples.append(repeat_samples(level.requests, pick))
        self.keyed_samples.append(repeat_keyed(level.requests, pick))

    @property
    def remote(self) -> bool:
        return any(lv.remote for lv in self.repeats)

    def keyed(self, metric: Metric) -> list[dict[RequestKey, float]]:
        """A timing metric's samples keyed by request, one dict per repeat."""
        return [k.get(metric.sample or "", {}) for k in self.keyed_samples]

    def timings(self, metric: Metric) -> list[list[float]]:
        """A timing metric's raw samples, one list per repeat."""
        return [s.get(metric.sample or "", []) for s in self.samples]

    def values(self, metric: Metric) -> list[float | None]:
        """One value per repeat whose sampler ran (repeat and count metrics); None where
        the repeat did not measure it."""
        assert metric.read is not None
        values = [metric.read(lv) for lv in self.repeats if not sampler_reason(metric, lv)]
        return [None if v is None else float(v) for v in values]

    def by_run(self, metric: Metric) -> list[float | None]:
        """One value per run, in run order (repeat and count metrics), for pairing; None
        where the run did not measure it or its sampler did not run."""
        assert metric.read is not None
        values = [None if sampler_reason(metric, lv) else metric.read(lv) for lv in self.repeats]
        return [None if v is None else float(v) for v in values]

    def unavailable(self, metric: Metric) -> str:
        """Why the metric's sampler did not run (the first repeat's reason); ''."""
        return next(filter(None, (sampler_reason(metric, lv) for lv in self.repeats)), "")


def level_samples(result: SweepResult) -> dict[LoadPoint, LevelSamples]:
    out: dict[LoadPoint, LevelSamples] = {}
    for level in result.levels:
        out.setdefault(level.point, LevelSamples()).add(level)
    return out
