"""What every rule needs beside its threshold: levels grouped by load point, the trend of
a value across them, whether the machine was contended, and a fix in the user's terms.

Fixes name perfkit's profile keys in-process (`--set engine.max_num_seqs=32`) and the
server's own flags against a remote target (vLLM: `--max-num-seqs 32`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from perfkit.result.level import LevelResult

# Contention: other processes kept >= this many cores busy on average ...
OTHERS_CORES_MIN = 0.25
# ... and this process's threads waited on the run queue >= this share of the wall time
# (or, without schedstat, everybody's demand came within 80% of the cores).
RUNQ_SHARE_CONTENDED = 0.05
DEMAND_SHARE_CONTENDED = 0.8
STEAL_SHARE_MAX = 0.05  # the hypervisor took >= 5% of our CPUs
# Timing rules judge a level only with this much data.
MIN_TIMING_S = 0.5
MIN_TIMING_REQUESTS = 16

# perfkit profile key -> vLLM server flag
VLLM_FLAGS = {
    "engine.max_num_seqs": "--max-num-seqs",
    "engine.max_num_batched_tokens": "--max-num-batched-tokens",
    "engine.num_blocks": "--num-gpu-blocks-override",
    "engine.prefix_caching": "--enable-prefix-caching",
    "engine.block_size": "--block-size",
}


def set_key(remote: bool, key: str, value: object) -> str:
    """`--set engine.max_num_seqs=32` in-process; the server's flag for a target."""
    if not remote:
        text = str(value).lower() if isinstance(value, bool) else str(value)
        return f"--set {key}={text}"
    flag = VLLM_FLAGS.get(key, key)
    if isinstance(value, bool):
        return f"the server's {flag}" if value else f"the server's --no-{flag[2:]}"
    return f"the server's {flag} {value} (vLLM)"


def is_remote(levels: Sequence[LevelResult]) -> bool:
    return any(lv.remote for lv in levels)


def by_point(levels: Sequence[LevelResult]) -> list[list[LevelResult]]:
    """Repeats of one load point together, in load order (concurrency, then rate)."""
    groups: dict[tuple[int, float], list[LevelResult]] = {}
    for lv in levels:
        key = (0, float(lv.concurrency)) if lv.concurrency is not None else (1, lv.rate or 0.0)
        groups.setdefault(key, []).append(lv)
    return [groups[k] for k in sorted(groups)]


def mean_of(group: Sequence[LevelResult], get: Callable[[LevelResult], float | None]
            ) -> float | None:
    values = [v for v in (get(lv) for lv in group) if v is not None]
    return sum(values) / len(values) if values else None


def trend(levels: Sequence[LevelResult], get: Callable[[LevelResult], float | None],
          fmt: Callable[[float], str] = lambda v: f"{v:g}") -> tuple[str, dict[str, float]]:
    """'c=1 0 -> c=2 3 -> c=4 7' (repeats averaged; unmeasured points left out)."""
    parts, values = [], {}
    for group in by_point(levels):
        value = mean_of(group, get)
        if value is not None:
            label = group[0].point.label
            parts.append(f"{group[0].point.short} {fmt(value)}")
            values[label] = value
    return " -> ".join(parts), values


@dataclass(frozen=True)
class Contention:
    others_cores: float  # cores other processes kept busy
    steal_share: float
    runq_share: float | None  # this process's run-queue wait / wall
    contended: bool

    def words(self) -> str:
        runq = "" if self.runq_share is None else \
            f", perfkit's threads waited {self.runq_share:.0%} of the time for a CPU"
        steal = (f", {self.steal_share:.0%} stolen by the hypervisor"
                 if self.steal_share >= 0.005 else "")
        return f"other processes kept {self.others_cores:.1f} cores busy{runq}{steal}"


def contention(lv: LevelResult) -> Contention | None:
    """None when the machine was not measured (older results, samplers off)."""
    sysm, cpu = lv.system, lv.cpu
    if sysm is None or not sysm.available or sysm.wall_s <= 0:
        return None
    runq = None
    if cpu.available and cpu.run_queue_wait_s is not None and cpu.wall_s > 0:
        runq = cpu.run_queue_wait_s / cpu.wall_s
    demand = (sysm.busy_s / sysm.wall_s) / max(sysm.num_cpus, 1)
    hurt = runq >= RUNQ_SHARE_CONTENDED if runq is not None else \
        demand >= DEMAND_SHARE_CONTENDED
    contended = sysm.steal_share >= STEAL_SHARE_MAX or (
        sysm.others_cores >= OTHERS_CORES_MIN and hurt)
    return Contention(sysm.others_cores, sysm.steal_share, runq, contended)


def contended(lv: LevelResult) -> bool:
    c = contention(lv)
    return c is not None and c.contended


def enough_for_timing(lv: LevelResult) -> bool:
    """A timing verdict needs MIN_TIMING_S of measured time and MIN_TIMING_REQUESTS."""
    window = lv.throughput.window_s or (lv.cpu.wall_s if lv.cpu.available else 0.0)
    return window >= MIN_TIMING_S and lv.counts.completed >= MIN_TIMING_REQUESTS
