"""The gate's inputs: shape checks, comparability, and each level's samples.

A level is matched across results by (concurrency, rate); its repeats are pooled.
Raw samples follow the warm-up rule of perfkit.summary.latency, applied per
repeat (each repeat has its own clock): a request counts unless it is flagged
`warmup` or arrived before the last warm-up request was last seen. TTFT counts
served requests; TPOT and E2E count completed ones.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfkit.errors import PerfkitError
from perfkit.gate.rules import Metric
from perfkit.records import FAILED_REASONS

LevelKey = tuple[int | None, float | None]  # (concurrency, rate): one of them is set
Request = dict[str, Any]
SAMPLE_FIELDS = ("ttft_s", "tpot_s", "e2e_s")
MAX_DIFFS = 5  # profile differences named in a mismatch message


def level_key(level: dict[str, Any]) -> LevelKey:
    return level.get("concurrency"), level.get("rate")


def level_label(key: LevelKey) -> str:
    concurrency, rate = key
    return f"c={concurrency}" if rate is None else f"{rate:g}/s"


# ---- shape ------------------------------------------------------------------------------


def _need(ok: bool, path: Path, what: str) -> None:
    if not ok:
        raise PerfkitError(f"{path}: malformed sweep result: {what}")


def check_doc(doc: dict[str, Any], path: Path) -> None:
    """What the gate reads must be there; a PerfkitError (exit 2) names what is not."""
    prof, env, levels = doc.get("profile"), doc.get("environment"), doc.get("levels")
    _need(isinstance(prof, dict) and isinstance(prof.get("sha256"), str)
          and isinstance(prof.get("resolved"), dict), path, "profile.sha256/resolved missing")
    _need(isinstance(env, dict) and isinstance(env.get("device_class"), str), path,
          "environment.device_class missing")
    if not isinstance(levels, list):
        raise PerfkitError(f"{path}: malformed sweep result: levels is not a list")
    for i, lv in enumerate(levels):
        _need(isinstance(lv, dict) and isinstance(lv.get("repeat"), int)
              and (lv.get("concurrency") is None) != (lv.get("rate") is None),
              path, f"levels[{i}] needs repeat and one of concurrency/rate")
        reqs = lv.get("requests")
        _need(isinstance(reqs, list) and all(isinstance(r, dict) and _num(r.get("arrival_s"))
                                             is not None for r in reqs or []),
              path, f"levels[{i}].requests must be a list of samples with arrival_s")


def num_repeats(doc: dict[str, Any]) -> int:
    """Runs of the least-repeated level. Counted, not read from `repeat`: results of
    interleaved single-repeat sweeps may be merged by concatenating their levels."""
    runs = Counter(level_key(lv) for lv in doc["levels"])
    return min(runs.values(), default=0)


def side_info(doc: dict[str, Any], path: Path) -> dict[str, Any]:
    return {"path": str(path), "profile": doc["profile"].get("name", "?"),
            "sha256": doc["profile"]["sha256"], "device_class": doc["environment"]["device_class"],
            "complete": bool(doc.get("complete")), "levels": len(doc["levels"]),
            "repeats": num_repeats(doc)}


# ---- comparability ------------------------------------------------------------------------


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(value, dict):
        return {prefix: value}
    out: dict[str, Any] = {}
    for key, item in value.items():
        out |= _flat(item, f"{prefix}.{key}" if prefix else str(key))
    return out


def profile_diffs(base: dict[str, Any], cur: dict[str, Any]) -> list[str]:
    """'key: baseline vs current' for every differing resolved key, [gate] excluded
    (the gate's rules decide how to compare, not what was measured)."""
    flat_b = _flat({k: v for k, v in base.items() if k != "gate"})
    flat_c = _flat({k: v for k, v in cur.items() if k != "gate"})
    keys = sorted(set(flat_b) | set(flat_c))
    return [f"{k}: {flat_b.get(k, '(unset)')!r} vs {flat_c.get(k, '(unset)')!r}"
            for k in keys if flat_b.get(k) != flat_c.get(k)]


def incomparable(base: dict[str, Any], cur: dict[str, Any]) -> list[str]:
    """Reasons the two results cannot be compared; empty when they can."""
    reasons = []
    bd, cd = base["environment"]["device_class"], cur["environment"]["device_class"]
    if bd != cd:
        reasons.append(f"device class differs: baseline {bd!r} vs current {cd!r}")
    bp, cp = base["profile"], cur["profile"]
    diffs = profile_diffs(bp["resolved"], cp["resolved"])
    if bp["sha256"] != cp["sha256"] and diffs:
        shown = "; ".join(diffs[:MAX_DIFFS])
        more = f" (and {len(diffs) - MAX_DIFFS} more)" if len(diffs) > MAX_DIFFS else ""
        reasons.append(f"resolved profile differs (sha256 {bp['sha256'][:12]} vs "
                       f"{cp['sha256'][:12]}): {shown}{more}")
    return reasons


# ---- samples -----------------------------------------------------------------------------


def _num(value: Any) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    return float(value) if ok else None


def _last_seen(r: Request) -> float:
    """Arrival plus the latest offset known (queue, first token, last token, finish)."""
    ttft = _num(r.get("ttft_s"))
    itl = r.get("itl_s")
    gaps = [x for x in itl if _num(x) is not None] if isinstance(itl, list) else []
    last_token = None if ttft is None else ttft + sum(gaps)
    offsets = [_num(r.get("queue_s")), ttft, last_token, _num(r.get("e2e_s"))]
    return float(r["arrival_s"]) + max([o for o in offsets if o is not None] or [0.0])


def measured(requests: list[Request]) -> list[Request]:
    warm = [_last_seen(r) for r in requests if r.get("warmup")]
    cutoff = max(warm) if warm else None
    return [r for r in requests if not r.get("warmup")
            and (cutoff is None or float(r["arrival_s"]) >= cutoff)]


def _completed(r: Request) -> bool:
    return (r.get("rejected") is None and _num(r.get("e2e_s")) is not None
            and r.get("finish_reason") not in FAILED_REASONS)


def repeat_samples(requests: list[Request]) -> dict[str, list[float]]:
    """Measured per-request samples of one repeat: field -> values."""
    served = [r for r in measured(requests) if r.get("rejected") is None]
    completed = [r for r in served if _completed(r)]
    pick = {"ttft_s": served, "tpot_s": completed, "e2e_s": completed}
    return {name: [v for v in (_num(r.get(name)) for r in pick[name]) if v is not None]
            for name in SAMPLE_FIELDS}


@dataclass
class LevelSamples:
    """One level of one result, all repeats."""

    repeats: list[dict[str, Any]] = field(default_factory=list)  # level dicts, file order
    samples: list[dict[str, list[float]]] = field(default_factory=list)  # per repeat

    def add(self, level: dict[str, Any]) -> None:
        self.repeats.append(level)
        self.samples.append(repeat_samples(level["requests"]))

    def timings(self, metric: Metric) -> list[list[float]]:
        """A timing metric's raw samples, one list per repeat."""
        return [s.get(metric.sample or "", []) for s in self.samples]

    def values(self, metric: Metric) -> list[float]:
        """One value per repeat that has it (repeat and count metrics)."""
        assert metric.read is not None
        return [v for v in (metric.read(lv) for lv in self.repeats) if v is not None]


def level_samples(doc: dict[str, Any]) -> dict[LevelKey, LevelSamples]:
    out: dict[LevelKey, LevelSamples] = {}
    for level in doc["levels"]:
        out.setdefault(level_key(level), LevelSamples()).add(level)
    return out
