"""Tail stacks: the samples that fell in the level's slowest steps, against its median ones.

    tail, median = cut_tail_stacks(sample_s, sample_stack, stacks, start_s, end_s)

Samples carry a time (TimedSampler), steps a start and an end (Engine.stats); a sample
belongs to the step whose [start, end] holds it (bisect on the sorted starts). Samples
between steps (the event loop, clients) belong to no step and to neither file. Steps are
split as the tail breakdown splits them (result/tail.step_groups): slower than
the p99 step time, and p45..p55 around the median.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from pathlib import Path

from perfkit.result.stacks import FrameGrowth, TailStacksInfo
from perfkit.result.tail import step_groups
from perfkit.stacks.diffsvg import write_diff_svg
from perfkit.stacks.folded import Folded, inclusive_counts, write_folded
from perfkit.stacks.timed_sampler import TimedSampler


def step_of_samples(sample_s: list[float], start_s: list[float], end_s: list[float]
                    ) -> list[int]:
    """Per sample: the index of the step it fell in, or -1."""
    out = []
    for t in sample_s:
        i = bisect_right(start_s, t) - 1
        out.append(i if i >= 0 and t <= end_s[i] else -1)
    return out


def cut_stacks(sample_stack: list[int], steps: list[int], stacks: list[str],
               wanted: set[int]) -> Folded:
    counts: Counter[str] = Counter()
    for sid, step in zip(sample_stack, steps):
        if step in wanted:
            counts[stacks[sid]] += 1
    return dict(counts)


def growing_frames(tail: Folded, median: Folded, top: int = 5) -> list[FrameGrowth]:
    """Functions whose share of samples grows most from the median steps to the tail."""
    t_total, m_total = sum(tail.values()), sum(median.values())
    if not t_total:
        return []
    t_incl, m_incl = inclusive_counts(tail), inclusive_counts(median)
    rows = [FrameGrowth(f, n / t_total, m_incl.get(f, 0) / m_total if m_total else 0.0)
            for f, n in t_incl.items()]
    rows = [r for r in rows if r.growth > 0]
    rows.sort(key=lambda r: (-r.growth, r.frame))
    return rows[:top]


def write_tail_stacks(sampler: TimedSampler, start_s: list[float], end_s: list[float],
                      out_dir: Path, name: str) -> TailStacksInfo | None:
    """NAME.tail.folded, NAME.median.folded and NAME.tail-diff.svg in out_dir; None when
    no step ran. Step times on perf_counter, as the sampler stamps."""
    if not start_s:
        return None
    tail_idx, median_idx, _, p99 = step_groups([e - s for s, e in zip(start_s, end_s)])
    steps = step_of_samples(sampler.sample_s, start_s, end_s)
    stacks = sampler.stacks_by_id()
    tail = cut_stacks(sampler.sample_stack, steps, stacks, set(tail_idx))
    median = cut_stacks(sampler.sample_stack, steps, stacks, set(median_idx))
    base = Path(out_dir)
    paths = [_written(base / f"{name}.{part}.folded", stacks)
             for part, stacks in (("tail", tail), ("median", median))]
    svg = base / f"{name}.tail-diff.svg"
    write_diff_svg(svg, tail, median, f"{name}: steps > p99 ({p99 * 1e3:.2f} ms) vs median")
    return TailStacksInfo(paths[0], paths[1], str(svg), len(tail_idx),
                          len(median_idx), sum(tail.values()), sum(median.values()), p99,
                          growing_frames(tail, median))


def _written(path: Path, stacks: Folded) -> str | None:
    """Write a folded file with at least one sample (flamegraph.pl refuses an empty one:
    "No stack counts found") and return its path; None when there is nothing to write."""
    if not stacks:
        return None
    write_folded(path, stacks)
    return str(path)
