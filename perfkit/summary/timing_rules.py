"""Rules over timings (noisy): GC pauses, CPU oversubscription by perfkit's own threads,
queue time in TTFT, goodput under the SLOs, TTFT at low load.

find_all hands these only the levels the machine did not contend and that hold enough
data (evidence.enough_for_timing); `machine_contended` says what that withheld.
"""

from __future__ import annotations

from perfkit.config.schema import Profile
from perfkit.result.level import LevelResult
from perfkit.result.sweep import Finding
from perfkit.summary.evidence import (
    OTHERS_CORES_MIN,
    by_point,
    contention,
    is_remote,
    set_key,
    trend,
)

GC_TAIL_SHARE = 0.25  # a GC pause (CPU) longer than this share of p99 TPOT shows in the tail
GC_MIN_PAUSE_S = 0.005
GC_TIME_SHARE_MAX = 0.05  # collections' CPU time / level wall
RUNQ_OWN_SHARE_MAX = 0.20  # own threads' run-queue wait / wall, with nobody else busy
QUEUE_SHARE_MAX = 0.5  # mean queue time / mean TTFT
QUEUE_MIN_S = 0.002  # below this queue time is noise, whatever its share
GOODPUT_MIN = 0.9
LOW_LOAD_TTFT_SLO_SHARE = 0.5  # TTFT p50 at the lowest load over the TTFT SLO

Level = LevelResult


def _ms(v: float) -> str:
    return f"{v * 1e3:.1f} ms"


def gc_pauses(levels: list[Level], profile: Profile) -> list[Finding]:
    for lv in levels:
        gc, tpot = lv.gc, lv.latency.tpot.p99
        if not gc.available or lv.remote or lv.cpu.wall_s <= 0:
            continue
        tail = tpot is not None and gc.max_cpu_s > max(GC_MIN_PAUSE_S, GC_TAIL_SHARE * tpot)
        share = gc.total_cpu_s / lv.cpu.wall_s
        if not (tail or share > GC_TIME_SHARE_MAX):
            continue
        text, values = trend(levels, lambda x: x.gc.max_cpu_s * 1e3, lambda v: f"{v:.1f}")
        gen = "?" if gc.max_generation is None else str(gc.max_generation)
        return [Finding(
            "gc_pauses", "warning",
            f"GC pauses reach the tail from {lv.point.label}: longest {_ms(gc.max_cpu_s)} of "
            f"collector CPU time (generation {gen}; wall {_ms(gc.max_s)}), "
            f"{share:.0%} of the level in collections, {gc.count} collections "
            f"{dict(sorted(gc.by_generation.items()))}; p99 TPOT "
            f"{'n/a' if tpot is None else _ms(tpot)}. Longest pause (ms): {text}.",
            {"level": lv.point.label, "gc_max_cpu_s": gc.max_cpu_s, "gc_max_s": gc.max_s,
             "generation": gc.max_generation, "gc_cpu_share": share, "p99_tpot_s": tpot,
             "trend_max_cpu_ms": values},
            "The engine already freezes its start-up objects (gc.freeze()), so these are "
            "objects created while serving: find who allocates them with "
            "`perfkit stacks`; in the serving process raise the thresholds "
            "(gc.set_threshold(50_000, 20, 100)) or freeze long-lived state after loading "
            "it.",
        )]
    return []


def cpu_oversubscribed(levels: list[Level], profile: Profile) -> list[Finding]:
    """perfkit's own threads waited for a CPU while other processes were idle."""
    for lv in levels:
        c, cpu = contention(lv), lv.cpu
        if c is None or c.runq_share is None or c.others_cores >= OTHERS_CORES_MIN:
            continue
        if c.runq_share <= RUNQ_OWN_SHARE_MAX:
            continue
        threads = profile.engine.cpu_threads
        fix = (set_key(False, "engine.cpu_threads", 1) + ": one intra-op thread; small "
               "matmuls gain nothing from more, and spinning threads starve the event loop."
               if threads != 1 else
               f"perfkit runs {cpu.num_threads} threads already at cpu_threads=1: lower "
               "sweep.nvml_hz or run without --stacks to cut the samplers' threads.")
        return [Finding(
            "cpu_oversubscribed", "warning",
            f"perfkit's own threads oversubscribe the CPUs from {lv.point.label}: they "
            f"waited {c.runq_share:.0%} of the level for a CPU while other processes kept "
            f"only {c.others_cores:.1f} cores busy ({cpu.num_threads} threads).",
            {"level": lv.point.label, "run_queue_share": c.runq_share,
             "others_cores": c.others_cores, "num_threads": cpu.num_threads,
             "cpu_threads": threads},
            fix,
        )]
    return []


def queue_dominated_ttft(levels: list[Level], profile: Profile) -> list[Finding]:
    for lv in levels:
        q, t = lv.latency.queue.mean, lv.latency.ttft.mean
        if q is None or t is None or t <= 0 or q < QUEUE_MIN_S or q / t < QUEUE_SHARE_MAX:
            continue
        text, values = trend(levels, lambda x: _share(x.latency.queue.mean, x.latency.ttft.mean),
                             lambda v: f"{v:.0%}")
        cap = profile.engine.max_num_seqs
        pinned = (lv.kv.peak_running or 0) >= cap and (lv.kv.peak_waiting or 0) > 0
        full = (lv.kv.usage_peak or 0.0) >= 0.95
        blocks = 2 * (lv.kv.blocks_total or 0)
        fix = (f"The batch cap holds them back: {set_key(False, 'engine.max_num_seqs', cap * 2)}"
               if pinned and not full else
               f"The KV pool is full: {set_key(False, 'engine.num_blocks', blocks)}"
               if full else
               "The engine is at capacity: keep the load at or below the knee, or scale out.")
        return [Finding(
            "queue_dominated_ttft", "warning",
            f"Queue time dominates TTFT from {lv.point.label}: {q / t:.0%} of TTFT "
            f"({_ms(q)} of {_ms(t)}, means) is waiting for admission. Queue share: {text}.",
            {"level": lv.point.label, "queue_mean_s": q, "ttft_mean_s": t,
             "trend_queue_share": values},
            fix,
        )]
    return []


def _share(part: float | None, whole: float | None) -> float | None:
    return None if part is None or not whole else part / whole


def goodput_falling(levels: list[Level], profile: Profile) -> list[Finding]:
    groups = by_point(levels)
    good = [g for g in groups if (g[0].goodput.share or 0.0) >= GOODPUT_MIN]
    for group in groups:
        lv = group[0]
        share = lv.goodput.share
        if share is None or share >= GOODPUT_MIN:
            continue
        text, values = trend(levels, lambda x: x.goodput.share, lambda v: f"{v:.0%}")
        missed = _slo_misses(lv, profile)
        last_ok = [g[0].point for g in good if g[0].point.x < lv.point.x]
        where = (f"keep the load at or below {last_ok[-1].label} (the last level meeting "
                 f"{GOODPUT_MIN:.0%})" if last_ok else "no level met the SLOs: lower the load")
        remote = is_remote(levels)
        return [Finding(
            "goodput_falling", "warning",
            f"Goodput falls under {GOODPUT_MIN:.0%} from {lv.point.label}: {share:.0%} of "
            f"requests met the SLOs ({missed}). Goodput: {text}.",
            {"level": lv.point.label, "goodput_share": share, "trend": values,
             "slo": {"ttft_s": profile.slo.ttft_s, "tpot_s": profile.slo.tpot_s,
                     "e2e_s": profile.slo.e2e_s}},
            f"{where.capitalize()}; or raise capacity where the other findings point"
            + (" (the server's flags)." if remote else "."),
        )]
    return []


def _slo_misses(lv: Level, profile: Profile) -> str:
    slo, reqs = profile.slo, [r for r in lv.requests if not r.warmup]
    parts = []
    for name, limit, get in (("TTFT", slo.ttft_s, lambda r: r.ttft_s),
                             ("TPOT", slo.tpot_s, lambda r: r.tpot_s),
                             ("E2E", slo.e2e_s, lambda r: r.e2e_s)):
        if limit is None or not reqs:
            continue
        over = sum(1 for r in reqs if (get(r) or 0.0) > limit)
        if over:
            parts.append(f"{over}/{len(reqs)} over the {name} target {_ms(limit)}")
    return "; ".join(parts) or "per-request samples not kept"


def high_ttft_low_load(levels: list[Level], profile: Profile) -> list[Finding]:
    slo = profile.slo.ttft_s
    groups = by_point(levels)
    if slo is None or not groups:
        return []
    lv = groups[0][0]
    ttft = lv.latency.ttft.p50
    if ttft is None or ttft < LOW_LOAD_TTFT_SLO_SHARE * slo:
        return []
    prompt = lv.counts.prompt_tokens / max(lv.counts.completed, 1)
    text, values = trend(levels, lambda x: x.latency.ttft.p50, _ms)
    return [Finding(
        "high_ttft_low_load", "warning",
        f"TTFT is high already at the lowest load ({lv.point.label}): p50 {_ms(ttft)} vs "
        f"the {_ms(slo)} target, for prompts of {prompt:.0f} tokens on average. "
        f"TTFT p50: {text}.",
        {"level": lv.point.label, "ttft_p50_s": ttft, "slo_ttft_s": slo,
         "mean_prompt_tokens": prompt, "trend": values},
        "Prefill itself is slow here, not queueing: shorter prompts, prefix caching for "
        "shared prefixes, a larger token budget if prompts are chunked, or a faster "
        "device / smaller model.",
    )]
