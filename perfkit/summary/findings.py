"""Rules that turn a sweep's measurements into named diagnoses with evidence and a fix.

Each rule looks at the levels (typed, perfkit.result) and the profile, and returns
findings: id, severity ("warning" | "info"), message, evidence, fix. A value that was
not measured (None) never trips a rule.
Thresholds are module constants so a reader can see exactly what fires.
"""

from __future__ import annotations

from collections.abc import Callable

from perfkit.config.schema import Profile
from perfkit.result.codec import to_json
from perfkit.result.level import KvSection, LevelResult
from perfkit.result.sweep import Finding, Knee

KV_FULL_SHARE = 0.95  # pool share counted as "full"
SYSTEM_SHARE_MAX = 0.10  # system CPU / total CPU
FAULTS_PER_STEP_MAX = 50  # minor page faults per engine step
RUNQ_WAIT_SHARE_MAX = 0.20  # run-queue wait / wall
GC_TAIL_SHARE = 0.25  # a GC pause longer than this share of p99 TPOT shows in the tail
GC_MIN_PAUSE_S = 0.005
SLOT_FILL_MIN = 0.75  # token slots used / slots in used blocks
NVML_NEAR_LIMIT = 0.95
MIN_CPU_S = 0.2  # below this the process CPU split is too coarse (10 ms ticks) to judge
CLIENT_CPU_SHARE_MAX = 0.5  # remote: event-loop CPU / wall; the client has one core
CLIENT_LAG_P99_MAX_S = 0.010  # remote: p99 event-loop wake-up delay (token stamps late)


Level = LevelResult


def _kv_full(kv: KvSection) -> bool:
    return kv.usage_peak is not None and kv.usage_peak >= KV_FULL_SHARE


def _kv_peak(kv: KvSection) -> str:
    if kv.peak_blocks_used is None or kv.blocks_total is None:
        peak = kv.usage_peak
        return "peak KV usage " + ("unknown" if peak is None else f"{peak:.0%}")
    return f"peak {kv.peak_blocks_used}/{kv.blocks_total} blocks"


def _of(value: int | None) -> str:
    return "an unknown number of" if value is None else str(value)


def kv_pressure(levels: list[Level], profile: Profile) -> list[Finding]:
    for lv in levels:
        kv, pre = lv.kv, lv.counts.preemptions
        if (pre or 0) > 0 or (_kv_full(kv) and (kv.peak_waiting or 0) > 0):
            return [Finding(
                "kv_pressure", "warning",
                f"KV cache pressure at {lv.point.label}: {_of(pre)} preemptions, "
                f"{_kv_peak(kv)}, up to {_of(kv.peak_waiting)} requests waiting.",
                {"level": lv.point.label, "preemptions": pre,
                 "peak_blocks_used": kv.peak_blocks_used, "blocks_total": kv.blocks_total,
                 "usage_peak": kv.usage_peak},
                "Give the pool more blocks (engine.num_blocks / engine.kv_memory), lower "
                "engine.max_num_seqs, or serve long requests elsewhere.",
            )]
    return []


def saturation(levels: list[Level], profile: Profile, knee: Knee | None) -> list[Finding]:
    if knee is None or knee.level is None:
        return []
    return [Finding("saturation", "info", knee.sentence, {"knee": to_json(knee)},
                    "Load beyond the knee only adds queueing: cap concurrency there or scale out.")]


def kernel_time(levels: list[Level], profile: Profile) -> list[Finding]:
    for lv in levels:
        cpu, steps = lv.cpu, max(lv.counts.steps or 0, 1)
        faults = cpu.num_minor_faults / steps
        busy = cpu.user_s + cpu.system_s
        if cpu.available and busy >= MIN_CPU_S and (
            cpu.system_share > SYSTEM_SHARE_MAX or faults > FAULTS_PER_STEP_MAX
        ):
            return [Finding(
                "high_kernel_time", "warning",
                f"High kernel time at {lv.point.label}: {cpu.system_share:.0%} of CPU time in "
                f"the kernel, {faults:.0f} minor page faults per step.",
                {"level": lv.point.label, "system_share": cpu.system_share,
                 "minor_faults_per_step": faults},
                "Look for per-step allocations of large buffers (preallocate, reuse); "
                "record stacks with --native to see the kernel entry points.",
            )]
    return []


def cpu_contention(levels: list[Level], profile: Profile) -> list[Finding]:
    for lv in levels:
        cpu = lv.cpu
        wait, wall = cpu.run_queue_wait_s, cpu.wall_s
        if cpu.available and wait is not None and wall > 0 and wait / wall > RUNQ_WAIT_SHARE_MAX:
            return [Finding(
                "cpu_contention", "warning",
                f"CPU contention at {lv.point.label}: threads waited {wait:.2f} s on the run queue "
                f"in {wall:.2f} s ({cpu.num_involuntary_ctx_switches} involuntary switches).",
                {"level": lv.point.label, "run_queue_wait_s": wait, "wall_s": wall,
                 "involuntary_ctx_switches": cpu.num_involuntary_ctx_switches},
                "Use fewer threads than cores (torch.set_num_threads), stop other load, "
                "or pin the process.",
            )]
    return []


def gc_pauses(levels: list[Level], profile: Profile) -> list[Finding]:
    for lv in levels:
        gc, tpot = lv.gc, lv.latency.tpot.p99
        if gc.available and tpot and gc.max_s > max(GC_MIN_PAUSE_S, GC_TAIL_SHARE * tpot):
            return [Finding(
                "gc_pauses", "warning",
                f"GC pauses reach the tail at {lv.point.label}: longest {gc.max_s * 1e3:.1f} ms "
                f"vs p99 TPOT {tpot * 1e3:.1f} ms ({gc.count} collections).",
                {"level": lv.point.label, "gc_max_s": gc.max_s, "p99_tpot_s": tpot},
                "Call gc.freeze() after start-up and raise gc thresholds in the serving process.",
            )]
    return []


def prefix_missed(levels: list[Level], profile: Profile) -> list[Finding]:
    sp, eng = profile.workload.shared_prefix, profile.engine
    if sp.groups == 0 or sp.share == 0 or sp.length == 0:
        return []
    if not eng.prefix_caching:
        return [Finding(
            "prefix_caching_missed", "warning",
            f"{sp.share:.0%} of requests share one of {sp.groups} prefixes of {sp.length} "
            "tokens, but prefix caching is off.",
            {"shared_prefix_length": sp.length, "share": sp.share},
            "Turn it on: --set engine.prefix_caching=true.",
        )]
    if sp.length < eng.block_size:
        return [Finding(
            "prefix_caching_missed", "warning",
            f"The shared prefix ({sp.length} tokens) is shorter than one block "
            f"({eng.block_size}): only full blocks are cached, so it is never reused.",
            {"shared_prefix_length": sp.length, "block_size": eng.block_size},
            f"Use a block size <= {sp.length}, or a longer shared prefix.",
        )]
    return []


def internal_fragmentation(levels: list[Level], profile: Profile) -> list[Finding]:
    for lv in levels:
        kv = lv.kv
        if kv.mean_blocks_used is None or kv.block_size is None or kv.mean_slots_used is None:
            continue
        held = kv.mean_blocks_used * kv.block_size
        if held > 0 and kv.mean_slots_used / held < SLOT_FILL_MIN:
            fill = kv.mean_slots_used / held
            return [Finding(
                "internal_fragmentation", "warning",
                f"Heavy internal fragmentation at {lv.point.label}: only {fill:.0%} of the slots "
                f"in used blocks hold tokens (block size {kv.block_size}).",
                {"level": lv.point.label, "slot_fill": fill, "block_size": kv.block_size},
                "Use a smaller block size; `perfkit fragmentation` compares them.",
            )]
    return []


def nvml_near_limit(levels: list[Level], profile: Profile) -> list[Finding]:
    for lv in levels:
        gpu = lv.gpu
        total = gpu.memory_total_bytes or 0
        if gpu.available and total and gpu.peak_used_bytes / total > NVML_NEAR_LIMIT:
            share = gpu.peak_used_bytes / total
            return [Finding(
                "gpu_memory_near_limit", "warning",
                f"GPU memory near its limit at {lv.point.label}: {share:.0%} of the device used.",
                {"level": lv.point.label, "peak_used_bytes": gpu.peak_used_bytes,
                 "memory_total_bytes": total},
                "Lower engine.kv_memory or max_num_batched_tokens to leave headroom.",
            )]
    return []


def client_bound(levels: list[Level], profile: Profile) -> list[Finding]:
    """Remote levels: the load generator's own event loop was busy or late."""
    for lv in levels:
        client = lv.client
        if client is None:
            continue
        lag = client.loop_lag.get("p99") or 0.0
        if client.cpu_share > CLIENT_CPU_SHARE_MAX or lag > CLIENT_LAG_P99_MAX_S:
            return [Finding(
                "client_bound", "warning",
                f"The load generator may be a bottleneck at {lv.point.label}: its event loop "
                f"used {client.cpu_share:.0%} of a core and woke up to "
                f"{lag * 1e3:.1f} ms late (p99); measured latencies include that delay.",
                {"level": lv.point.label, "cpu_share": client.cpu_share,
                 "loop_lag_p99_s": lag, "cpu_per_request_s": client.cpu_per_request_s},
                "Run the client on its own cores or machine (away from the server), split "
                "the load over several client processes, or lower the concurrency.",
            )]
    return []


def http_errors(levels: list[Level], profile: Profile) -> list[Finding]:
    """Remote levels: requests the server refused or that failed on the way."""
    failed = [lv for lv in levels if lv.errors is not None and lv.errors.total]
    if not failed:
        return []
    kinds: dict[str, int] = {}
    for lv in failed:
        assert lv.errors is not None
        for kind, n in lv.errors.by_kind.items():
            kinds[kind] = kinds.get(kind, 0) + n
    total = sum(kinds.values())
    listed = ", ".join(f"{k}: {n}" for k, n in sorted(kinds.items(), key=lambda kv: -kv[1]))
    return [Finding(
        "http_errors", "warning",
        f"{total} requests failed or were refused over {len(failed)} level(s) ({listed}); "
        f"first at {failed[0].point.label}.",
        {"by_kind": kinds, "levels": [lv.point.label for lv in failed]},
        "http 429/400: the server's admission control refused them (lower the load or "
        "raise its queue limits); timeouts: raise --timeout or lower the load; broken "
        "streams, 5xx, connection refused: check the server's log (it may have restarted).",
    )]


RULES: list[Callable[[list[Level], Profile], list[Finding]]] = [
    kv_pressure, kernel_time, cpu_contention, gc_pauses, prefix_missed,
    internal_fragmentation, nvml_near_limit,
]
# A remote target: the engine's internals are not visible, the client's cost is.
REMOTE_RULES: list[Callable[[list[Level], Profile], list[Finding]]] = [
    kv_pressure, client_bound, http_errors,
]


def find_all(levels: list[Level], profile: Profile, knee: Knee | None) -> list[Finding]:
    remote = any(lv.remote for lv in levels)
    found = [f for rule in (REMOTE_RULES if remote else RULES) for f in rule(levels, profile)]
    return found + saturation(levels, profile, knee)
