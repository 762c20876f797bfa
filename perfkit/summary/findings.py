"""Rules that turn a sweep's measurements into named diagnoses with evidence and a fix.

Each rule looks at the levels (typed, perfkit.result) and the profile, and returns
findings: id, severity ("warning" | "info"), message, evidence, fix. A value that was
not measured (None) never trips a rule. Every finding names the first level it holds at
and the trend across levels; fixes name profile keys in-process and the server's own
flags against a target (summary/evidence.py).

Rules over counts (config_rules, prefix_rules) judge every level. Rules over timings
(timing_rules, kernel time) judge only levels with enough data where the machine was
not contended; `machine_contended` says which levels and which verdicts that withheld.
Thresholds are module constants so a reader can see exactly what fires.
"""

from __future__ import annotations

from collections.abc import Callable

from perfkit.config.schema import Profile
from perfkit.result.codec import to_json
from perfkit.result.level import LevelResult
from perfkit.result.sweep import Finding, Knee
from perfkit.summary.client_rules import CLIENT_RULES
from perfkit.summary.config_rules import (
    batch_cap,
    guard_off,
    internal_fragmentation,
    kv_pressure,
    token_budget,
)
from perfkit.summary.contention_rules import contention as thread_contention
from perfkit.summary.evidence import Contention, contended, contention, enough_for_timing
from perfkit.summary.kernel_detail import kernel_detail
from perfkit.summary.prefix_rules import prefix_caching
from perfkit.summary.remote_findings import burst_delivery, unplanned_prefix_hits
from perfkit.summary.server_findings import server_tail_cause, server_traces_unjoined
from perfkit.summary.sharing_rules import outputs_not_shared, outputs_share_blocks
from perfkit.summary.tail_rules import tail_cause
from perfkit.summary.timing_rules import (
    cpu_oversubscribed,
    gc_pauses,
    goodput_falling,
    high_ttft_low_load,
    queue_dominated_ttft,
)

SYSTEM_SHARE_MAX = 0.10  # system CPU / total CPU
FAULTS_PER_STEP_MAX = 50  # minor page faults per engine step
NVML_NEAR_LIMIT = 0.95
MIN_CPU_S = 0.2  # below this the process CPU split is too coarse (10 ms ticks) to judge

__all__ = ["find_all", "kv_pressure"]

Level = LevelResult
Rule = Callable[[list[Level], Profile], list[Finding]]
_QUIET = Contention(0.0, 0.0, None, False)


def kernel_time(levels: list[Level], profile: Profile) -> list[Finding]:
    for lv in levels:
        cpu, steps = lv.cpu, max(lv.counts.steps or 0, 1)
        faults = cpu.num_minor_faults / steps
        busy = cpu.user_s + cpu.system_s
        if cpu.available and busy >= MIN_CPU_S and (
            cpu.system_share > SYSTEM_SHARE_MAX or faults > FAULTS_PER_STEP_MAX
        ):
            detail, where = kernel_detail(lv)
            return [Finding(
                "high_kernel_time", "warning",
                f"High kernel time at {lv.point.label}: {cpu.system_share:.0%} of CPU time in "
                f"the kernel, {faults:.0f} minor page faults per step." + detail,
                {"level": lv.point.label, "system_share": cpu.system_share,
                 "minor_faults_per_step": faults} | where,
                "Look for per-step allocations of large buffers (preallocate, reuse); "
                "record stacks with --native to see the kernel entry points.",
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


def saturation(levels: list[Level], profile: Profile, knee: Knee | None) -> list[Finding]:
    if knee is None or knee.level is None:
        return []
    where = ("the server's --max-num-seqs" if any(lv.remote for lv in levels)
             else "--set engine.max_num_seqs or the sweep's concurrency")
    return [Finding("saturation", "info", knee.sentence, {"knee": to_json(knee)},
                    f"Load beyond the knee only adds queueing: cap concurrency there "
                    f"({where}) or scale out.")]


def machine_contended(levels: list[Level], withheld: dict[str, list[str]]) -> list[Finding]:
    """The machine, not perfkit: other processes (or the hypervisor) took CPU time."""
    hit = [lv for lv in levels if contended(lv)]
    if not hit:
        return []
    worst = max(hit, key=lambda lv: (contention(lv) or _QUIET).others_cores)
    first = contention(hit[0])
    assert first is not None
    labels = [lv.point.label for lv in hit]
    held = "; ".join(f"{rule} (at {', '.join(at)})" for rule, at in withheld.items())
    verdicts = (f" Timing verdicts withheld for those levels: {held}." if held else
                " Timing findings judge only the other levels; the knee is discounted.")
    return [Finding(
        "machine_contended", "info",
        f"The machine was contended during {len(hit)} of {len(levels)} levels (first "
        f"{hit[0].point.label}: {first.words()}); their timings (latency, throughput, "
        f"CPU) are not perfkit's alone.{verdicts}",
        {"levels": labels, "others_cores": {lv.point.label: (contention(lv) or _QUIET)
                                            .others_cores for lv in hit},
         "worst": worst.point.label, "withheld": withheld},
        "Rerun on a quiet machine (stop the other load, or pin perfkit with taskset to "
        "cores nobody else uses); counts are unaffected and stay valid.",
    )]


RULES: list[Rule] = [
    kv_pressure, batch_cap, token_budget, prefix_caching, internal_fragmentation,
    guard_off, nvml_near_limit, tail_cause, thread_contention, outputs_not_shared,
    outputs_share_blocks,
]
# Judged only on uncontended levels with enough data.
TIMING_RULES: list[Rule] = [
    kernel_time, cpu_oversubscribed, gc_pauses, queue_dominated_ttft, goodput_falling,
    high_ttft_low_load,
]
# A remote target: the engine's internals are not visible, the client's cost is.
REMOTE_RULES: list[Rule] = [kv_pressure, prefix_caching, *CLIENT_RULES, http_errors,
                            burst_delivery, unplanned_prefix_hits, server_traces_unjoined,
                            server_tail_cause]
REMOTE_TIMING_RULES: list[Rule] = [goodput_falling, high_ttft_low_load]


def find_all(levels: list[Level], profile: Profile, knee: Knee | None) -> list[Finding]:
    remote = any(lv.remote for lv in levels)
    rules, timing = (REMOTE_RULES, REMOTE_TIMING_RULES) if remote else (RULES, TIMING_RULES)
    found = [f for rule in rules for f in rule(levels, profile)]
    sized = [lv for lv in levels if enough_for_timing(lv)]
    quiet = [lv for lv in sized if not contended(lv)]
    withheld: dict[str, list[str]] = {}
    for rule in timing:
        judged = rule(quiet, profile)
        found += judged
        if not judged and len(quiet) < len(sized):
            for f in rule(sized, profile):
                withheld[f.id] = [str(f.evidence.get("level", "?"))]
    found += machine_contended(levels, withheld)
    return found + saturation(levels, profile, knee)

