"""Sweep and fragmentation results -> the resource charts: KV usage and NVML
memory over time, CPU user/system seconds and page faults per level, and KV
waste by allocation policy.

Timelines: one series per (input, level); the input's colour, lighter for lower
levels (the highest level is the full colour).
"""

from __future__ import annotations

from collections.abc import Sequence

from perfkit.fragmentation.types import KINDS
from perfkit.report.cells import level_name
from perfkit.report.chart_axes import Axis
from perfkit.report.chart_bars import Stack, stacked_bars
from perfkit.report.charts import Chart, Series, line_chart, tint
from perfkit.report.report_inputs import ReportInput, frag_policies
from perfkit.report.sweep_charts import Level, SweepIn, level_order, level_rows, named

GIB = float(2**30)
KIND_COLORS = {"used": "#2da44e", "reserved": "#d4a72c", "internal": "#cf222e",
               "external": "#a475f9", "free": "#d0d7de"}
TIME_AXIS = Axis("time in level (s)")


def _shade(s: SweepIn, rank: int, count: int) -> str:
    """Full colour for the last (highest) level, lighter towards the first."""
    return tint(s.color, 0.0 if count <= 1 else 0.6 * (count - 1 - rank) / (count - 1))


def _per_level(s: SweepIn) -> list[tuple[Level, str]]:
    levels = sorted(s.levels, key=level_order)
    return [(lv, _shade(s, i, len(levels))) for i, lv in enumerate(levels)]


def kv_chart(sweeps: Sequence[SweepIn]) -> Chart:
    many = len(sweeps) > 1
    series = [Series(named(s, level_name(lv), many), list(lv.kv.timeline.t_s),
                     list(lv.kv.timeline.blocks_used), color, markers=False)
              for s in sweeps for lv, color in _per_level(s)]
    totals = sorted({f"{lv.kv.blocks_total:,}" for s in sweeps for lv in s.levels
                     if lv.kv.blocks_total is not None})
    pool = (f"The pool holds {' / '.join(totals)} blocks; one point per sampled engine step "
            "(up to 200 per level)." if totals else
            "No engine block pool: a remote server exports its KV usage as a share only.")
    return line_chart("kv-usage", "KV blocks used over time, per level", series, TIME_AXIS,
                      Axis("KV blocks used"), (), pool)


def gpu_chart(sweeps: Sequence[SweepIn]) -> Chart:
    many = len(sweeps) > 1
    series = []
    reasons = set()
    for s in sweeps:
        for lv, color in _per_level(s):
            gpu = lv.gpu
            if not gpu.available or not gpu.samples:
                reasons.add(gpu.reason or "no samples")
                continue
            series.append(Series(named(s, level_name(lv), many),
                                 [float(p.t_s) for p in gpu.samples],
                                 [p.used_bytes for p in gpu.samples], color, markers=False))
    note = ("NVML unavailable" + (f": {'; '.join(sorted(reasons))}" if reasons else "")
            if not series else "Device memory in use, all processes (NVML, ~10 Hz).")
    return line_chart("gpu-memory", "GPU memory over time (NVML), per level", series,
                      TIME_AXIS, Axis("device memory used (GiB)", unit=GIB), (), note)


def _bar_stacks(sweeps: Sequence[SweepIn], keys: tuple[str, str], names: tuple[str, str]
                ) -> tuple[list[str], list[Stack]]:
    """Categories (input, level) and per input two stacks: keys[0] full colour,
    keys[1] lighter; None where the level is another input's or has no CPU data."""
    rows = level_rows(sweeps)
    many = len(sweeps) > 1
    cats = [level_name(lv) + (f"\n{s.label}" if many else "") for s, lv in rows]
    stacks = []
    for s in sweeps:
        for key, name, shade in zip(keys, names, (0.0, 0.55)):
            values = [float(getattr(lv.cpu, key)) if t is s and lv.cpu.available else None
                      for t, lv in rows]
            stacks.append(Stack(named(s, name, many), values, tint(s.color, shade)))
    return cats, stacks


def cpu_charts(sweeps: Sequence[SweepIn]) -> list[Chart]:
    cats, stacks = _bar_stacks(sweeps, ("user_s", "system_s"), ("user", "system"))
    cpu = stacked_bars("cpu-time", "CPU time per level (this process)", cats, stacks,
                       Axis("CPU seconds"), horizontal=False,
                       caption="User and system (kernel) CPU seconds of the perfkit process "
                       "during each level.")
    cats, stacks = _bar_stacks(sweeps, ("num_major_faults", "num_minor_faults"),
                               ("major", "minor"))
    faults = stacked_bars("page-faults", "Page faults per level", cats, stacks,
                          Axis("page faults"), horizontal=False,
                          caption="Major (disk) and minor page faults during each level.")
    return [cpu, faults]


def frag_chart(inputs: Sequence[ReportInput]) -> Chart:
    """Time-averaged share of each policy's pool, by kind of waste."""
    frags = [inp for inp in inputs if inp.kind == "fragmentation"]
    many = len(frags) > 1
    rows = [(inp, p) for inp in frags for p in frag_policies(inp.frag or {})]
    cats = [str(p["name"]) + (f" · {inp.label}" if many else "") for inp, p in rows]
    stacks = [Stack(kind, [float(p[kind]) for _, p in rows], KIND_COLORS[kind])
              for kind in KINDS]
    return stacked_bars("fragmentation", "KV memory by kind, per allocation policy", cats,
                        stacks, Axis("share of the KV pool", percent=True), horizontal=True,
                        caption="used: token K/V; reserved: allocated for tokens still to come;"
                        " internal: allocated, never used; external: free but in holes too "
                        "small for the next request; free: the rest. Time-averaged.")
