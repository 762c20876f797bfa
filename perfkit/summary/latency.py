"""Latency distributions, throughput, goodput and counts for one sweep level.

Warm-up rule (applied by every public function here): a record is *measured*
unless
  1. it is flagged `warmup=True`, or
  2. it arrived strictly before `warmup_end_s`, the moment the last warm-up
     request was last seen (its finish, or its latest recorded time if it never
     finished). Such a request overlapped the warm-up, so it ran against a
     cold system.
`warmup_end_s=None` (the default) derives that moment from the flagged records
passed in; pass a number to override it. With no warm-up records, rule 2 is off.

Which measured records feed which number:
  - TTFT, ITL, queue: every served request (not rejected) where the time exists.
  - E2E, TPOT, requests/s and goodput: completed requests only (served, finished,
    not cancelled or errored), since a failed request's end is not a completion.
  - Token throughput and token counts: every served request (tokens really processed).
Times are seconds; missing statistics are None (JSON-safe), never NaN.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from typing import Protocol

from perfkit.records import RequestRecord
from perfkit.result.level import Counts, Distribution, Goodput, Latency, Throughput
from perfkit.stats import quantile


def distribution(values: Iterable[float], percentiles: Sequence[float] = ()) -> Distribution:
    """count, mean, stddev, min, p50/p90/p99, max, and `quantiles` at each of `percentiles`."""
    ordered = sorted(values)
    if any(math.isnan(v) for v in ordered):
        raise ValueError("distribution of values containing NaN")
    if not ordered:
        return Distribution(count=0)
    mean = math.fsum(ordered) / len(ordered)
    variance = math.fsum((v - mean) ** 2 for v in ordered) / len(ordered)
    return Distribution(
        count=len(ordered),
        mean=min(max(mean, ordered[0]), ordered[-1]),  # fsum rounding can step outside
        stddev=math.sqrt(variance),
        min=ordered[0],
        p50=quantile(ordered, 0.50, presorted=True),
        p90=quantile(ordered, 0.90, presorted=True),
        p99=quantile(ordered, 0.99, presorted=True),
        max=ordered[-1],
        quantiles={f"p{q:g}": quantile(ordered, q / 100, presorted=True) for q in percentiles},
    )


# ---- warm-up exclusion -------------------------------------------------------------


def warmup_end(records: Iterable[RequestRecord]) -> float | None:
    """When the last warm-up request was last seen; None without warm-up records."""
    ends = [r.last_seen_s for r in records if r.warmup]
    return max(ends) if ends else None


def is_measured(record: RequestRecord, warmup_end_s: float | None) -> bool:
    if record.warmup:
        return False
    return warmup_end_s is None or record.arrival_s >= warmup_end_s


def measured_records(
    records: Sequence[RequestRecord], warmup_end_s: float | None = None
) -> list[RequestRecord]:
    """The records every metric is computed over (see the module docstring)."""
    cutoff = warmup_end(records) if warmup_end_s is None else warmup_end_s
    return [r for r in records if is_measured(r, cutoff)]


# ---- latency -------------------------------------------------------------------------


def timed_gaps(records: Iterable[RequestRecord]) -> Iterator[float]:
    """Every gap between consecutive chunks that was timed: a remote client stamps each read
    once, so a gap of exactly 0 in a record with coalesced chunks is two chunks from one
    read, not a measurement (remote/stream.py), and is left out."""
    for r in records:
        if r.coalesced_chunks:
            yield from (gap for gap in r.itl_s if gap > 0.0)
        else:
            yield from r.itl_s


def _present(values: Iterable[float | None]) -> list[float]:
    return [v for v in values if v is not None]


def level_latency(
    records: Sequence[RequestRecord], warmup_end_s: float | None = None,
    percentiles: Sequence[float] = (),
) -> Latency:
    measured = measured_records(records, warmup_end_s)
    served = [r for r in measured if r.served]
    completed = [r for r in served if r.completed]
    q = percentiles
    return Latency(
        ttft=distribution(_present(r.ttft_s for r in served), q),
        tpot=distribution(_present(r.tpot_s for r in completed), q),
        itl=distribution(timed_gaps(served), q),
        e2e=distribution(_present(r.e2e_s for r in completed), q),
        queue=distribution(_present(r.queue_s for r in served), q),
    )


# ---- throughput and goodput --------------------------------------------------------


def measured_window(
    records: Sequence[RequestRecord], warmup_end_s: float | None = None
) -> tuple[float, float] | None:
    """(first measured arrival, last measured finish of a served request), or None."""
    measured = measured_records(records, warmup_end_s)
    finishes = [r.finish_s for r in measured if r.served and r.finish_s is not None]
    if not finishes:
        return None
    return min(r.arrival_s for r in measured), max(finishes)


def _window_s(
    records: Sequence[RequestRecord], window_s: float | None, warmup_end_s: float | None
) -> float | None:
    """The given window (must be > 0) or the measured one; None if empty or zero-length."""
    if window_s is not None:
        if not window_s > 0:
            raise ValueError(f"window_s must be > 0, got {window_s}")
        return window_s
    window = measured_window(records, warmup_end_s)
    if window is None or window[1] <= window[0]:
        return None
    return window[1] - window[0]


def _per_s(amount: float, window_s: float | None) -> float | None:
    return None if window_s is None else amount / window_s


def throughput(
    records: Sequence[RequestRecord],
    window_s: float | None = None,
    warmup_end_s: float | None = None,
) -> Throughput:
    """Rates over `window_s`, or over `measured_window(records)` when it is None."""
    window = _window_s(records, window_s, warmup_end_s)
    served = [r for r in measured_records(records, warmup_end_s) if r.served]
    output = sum(r.output_tokens for r in served)
    prompt = sum(r.prompt_tokens for r in served)
    return Throughput(
        window_s=window,
        requests_per_s=_per_s(sum(r.completed for r in served), window),
        output_tokens_per_s=_per_s(output, window),
        total_tokens_per_s=_per_s(output + prompt, window),
    )


class SloTargets(Protocol):
    """Any object with these (e.g. perfkit.config.schema.SloConfig); None means no target."""

    @property
    def ttft_s(self) -> float | None: ...
    @property
    def tpot_s(self) -> float | None: ...
    @property
    def e2e_s(self) -> float | None: ...


def _within(value: float | None, target: float | None) -> bool:
    return target is None or (value is not None and value <= target)


def meets_slo(record: RequestRecord, slo: SloTargets) -> bool:
    """Completed and within every set target. A request with < 2 output tokens has
    no TPOT and meets a TPOT target trivially; a missing TTFT or E2E fails its target."""
    if not record.completed:
        return False
    tpot_ok = record.output_tokens < 2 or _within(record.tpot_s, slo.tpot_s)
    return tpot_ok and _within(record.ttft_s, slo.ttft_s) and _within(record.e2e_s, slo.e2e_s)


def goodput(
    records: Sequence[RequestRecord],
    slo: SloTargets,
    window_s: float | None = None,
    warmup_end_s: float | None = None,
) -> Goodput:
    measured = measured_records(records, warmup_end_s)
    good = sum(meets_slo(r, slo) for r in measured)
    window = _window_s(records, window_s, warmup_end_s)
    return Goodput(
        requests=len(measured),
        good_requests=good,
        share=good / len(measured) if measured else None,
        good_per_s=_per_s(good, window),
        window_s=window,
    )


# ---- counts --------------------------------------------------------------------------


def level_counts(
    records: Sequence[RequestRecord], warmup_end_s: float | None = None
) -> Counts:
    measured = measured_records(records, warmup_end_s)
    served = [r for r in measured if r.served]
    return Counts(
        requests=len(measured),
        completed=sum(r.completed for r in served),
        rejected=dict(Counter(r.rejected for r in measured if r.rejected is not None)),
        finish_reasons=dict(Counter(r.finish_reason or "unfinished" for r in served)),
        preemptions=sum(r.num_preemptions for r in served),
        prompt_tokens=sum(r.prompt_tokens for r in served),
        output_tokens=sum(r.output_tokens for r in served),
        cached_tokens=sum(r.cached_tokens for r in served),
        warmup_excluded=len(records) - len(measured),
        outputs=sum(r.num_outputs for r in served),
    )
