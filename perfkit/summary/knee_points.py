"""The knee of a sweep's levels: closed-loop points with intervals (summary/intervals.py),
the latency quantile their sample counts support, and contention named."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from perfkit.result.level import LevelResult
from perfkit.result.sweep import Knee
from perfkit.stats import Interval
from perfkit.summary.evidence import contended, contention
from perfkit.summary.intervals import (
    latency_interval,
    supported_quantile,
    throughput_interval,
    union,
)
from perfkit.summary.knee_rule import LevelPoint, find_knee


def _latency(group: Sequence[LevelResult], q: float, name: str) -> Interval | None:
    per = []
    for g in group:
        values = [v for r in g.requests if not r.warmup
                  for v in ((r.ttft_s,) if name == "ttft" else (r.tpot_s,)) if v is not None]
        if values:
            per.append(latency_interval(values, q, seed=g.repeat))
        else:  # no samples kept (crafted or trimmed results): the stored p99, exact
            p99 = (g.latency.ttft if name == "ttft" else g.latency.tpot).p99
            per.append(None if p99 is None else Interval(p99, p99, p99))
    return union(per)


def _parts(i: Interval | None) -> tuple[float | None, float | None, float | None]:
    return (None, None, None) if i is None else (i.low, i.value, i.high)


def _count(group: Sequence[LevelResult]) -> int:
    return min((sum(1 for r in g.requests if not r.warmup) for g in group), default=0)


def knee_of(levels: Sequence[LevelResult]) -> Knee:
    """Knee over the closed-loop levels (x order, repeats pooled into one interval); a
    level whose throughput was not measured (nothing finished) is left out, never read
    as 0. All points use one quantile: the highest every level's sample count supports."""
    by_x: dict[float, list[LevelResult]] = {}
    for lv in levels:
        if lv.concurrency is not None:
            by_x.setdefault(float(lv.concurrency), []).append(lv)
    counts = [_count(g) for g in by_x.values() if any(x.requests for x in g)]
    q = supported_quantile(min(counts)) if counts else 0.99
    points = []
    for x in sorted(by_x):
        group = by_x[x]
        thr = union([throughput_interval(g) for g in group])
        if thr is None:
            continue
        assert thr.value is not None  # a level's intervals carry their estimate
        ttft = _latency(group, q, "ttft") if q is not None else None
        # a server that delivered whole responses in one burst: TPOT is degenerate there
        burst = any(g.stream is not None and g.stream.degenerate for g in group)
        tpot = _latency(group, q, "tpot") if q is not None and not burst else None
        t_lo, t_v, t_hi = _parts(ttft)
        p_lo, p_v, p_hi = _parts(tpot)
        points.append(LevelPoint(
            x=x, throughput=thr.value, throughput_lo=thr.low, throughput_hi=thr.high,
            p99_ttft_s=t_v, ttft_lo=t_lo, ttft_hi=t_hi, p99_tpot_s=p_v, tpot_lo=p_lo,
            tpot_hi=p_hi, latency_q="P99" if q is None else f"P{q * 100:.0f}"))
    knee = find_knee(points, x_name="concurrency")
    return _discounted(knee, [lv for lv in levels if lv.concurrency is not None])


def _discounted(knee: Knee, levels: Sequence[LevelResult]) -> Knee:
    hit = [lv for lv in levels if contended(lv)]
    if not hit:
        return knee
    labels = list(dict.fromkeys(lv.point.label for lv in hit))
    worst = max((contention(lv) for lv in hit), key=lambda c: c.others_cores if c else 0.0)
    busy = "" if worst is None else f" (other processes kept up to {worst.others_cores:.1f} " \
        "cores busy)"
    note = (f" Discounted: the machine was contended at {', '.join(labels)}{busy}; "
            "rerun on a quiet machine before acting on this.")
    return replace(knee, sentence=knee.sentence + note, contended=labels)
