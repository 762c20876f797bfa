"""Why is p99 high: the cause that explains most of the tail requests' extra time.

For TTFT and TPOT, at each in-process level with a tail breakdown (result/tail.py):
the tail requests' mean window (TPOT: per output token) exceeds the median requests' by
`extra`; each timed cause explains `tail seconds - median seconds` of it. A cause dominates
when it explains at least DOMINANT_SHARE of the extra time and the tail is mostly that
cause: it fills more than MOSTLY of the tail's window, or (prefill interference, a per-step
cause) it is in more than PERVASIVE of the tail's steps. A tail cause that is a share of a
few steps (a clean run: 18-35% of the tail's decode steps carry a 256-token chunk) is
reported with the shares, not named. Queue wait that only the level's start saw (most tail
requests arrived before any request finished, when a closed loop's first arrivals come at
once, and the median requests queue under START_QUEUE of the tail's wait) is the start's
burst, not a steady-state queue: not named either. Nor is an own prefill that the prompts
do not explain: when the tail's prefill took longer per prompt token than the median's,
so that their longer prompts account for under MOSTLY of its extra time, its steps were
stretched (by GC, the run queue, another thread holding the GIL) and the phase is not the
cause; the finding says so with the measured stretch.
One finding per metric: the first level where a cause dominates, with the evidence; where
none does, one info finding with the measured shares (largest level).
A dominant cause is a warning only when the tail matters: the tail requests take at least
TAIL_WARN_RATIO times the median's window, and p99 is beyond the profile's SLO target for
the metric (when one is set); otherwise the same finding is info.
"""

from __future__ import annotations

from perfkit.config.schema import Profile
from perfkit.result.level import LevelResult
from perfkit.result.sweep import Finding
from perfkit.result.tail import TailGroup, TailSection

DOMINANT_SHARE = 0.6  # of the tail's extra time over the median requests
MOSTLY = 0.5  # of the tail requests' window: "mostly X" is more than half of it
PERVASIVE = 0.5  # of the tail requests' steps (prefill interference)
START_QUEUE = 0.1  # median queue wait under this share of the tail's: the start's burst
MIN_REQUESTS = 50  # measured requests in the level: fewer and "p99" is one or two requests
MIN_EXTRA_S = 0.0005  # TTFT: below this the tail is not slower than the median in any sense
MIN_EXTRA_SHARE = 0.05  # TPOT (per output token): the tail at least 5% slower a token
TAIL_WARN_RATIO = 2.0  # tail window / median window for a cause to be a warning
TIMED = ("queue", "own_prefill", "prefill_interference", "gc", "run_queue", "gil", "lock")
# overlap the phases; gc, run queue, gil and lock never count the same time (the engine
# thread runs, waits for a core, for the GIL outside GC pauses, or for a lock)
ROOTS = ("gc", "run_queue", "prefill_interference", "gil", "lock")
PHASES = ("queue", "own_prefill")

FIXES = {
    "queue": "The tail waited in the queue: the level is past what the engine serves at "
             "these settings; lower the load, or raise engine.max_num_seqs (and the KV pool) "
             "to admit more, or engine.max_num_batched_tokens where the token budget limits "
             "admission (the token_budget finding says so).",
    "own_prefill": "The tail requests' own prefill is long: long prompts; enable prefix "
                   "caching for shared prefixes or raise engine.max_num_batched_tokens.",
    "prefill_interference": "Decode steps carry other requests' prefill chunks: tune "
                            "engine.max_num_batched_tokens (smaller chunks delay each decode "
                            "step less; a tiny budget spreads every prefill over many steps) "
                            "or lower engine.max_num_seqs.",
    "gc": "Python's garbage collector paused the process during the tail requests: cut "
          "per-step allocations (see the tail diff flame graph for the allocating frames), "
          "gc.freeze() long-lived objects, or raise gc.set_threshold.",
    "run_queue": "The engine thread waited for a CPU: the machine is oversubscribed; stop "
                 "other load or pin perfkit to its own cores.",
    "gil": "The engine thread waited for the GIL while other threads of its process held "
           "it (gil_contention names them): move that work out of the engine's process "
           "(a subprocess or another service), or make it release the GIL more often.",
    "lock": "The engine thread waited on a lock another thread held (lock_contention names "
            "the holder): shorten the holder's critical section (no I/O or sleep while "
            "holding it), or take the lock out of the engine's step.",
}


def _share(v: float) -> str:
    """A share as a whole percentage; one that rounds to 0 reads 0%, never -0%."""
    return f"{0.0 if abs(v) < 0.005 else v:.0%}"


def explained(tail: TailGroup, median: TailGroup) -> dict[str, float]:
    """Cause -> share of the tail's extra window time it explains (can be < 0 or > 1)."""
    extra = tail.window_s - median.window_s
    least = MIN_EXTRA_S if tail.metric == "ttft" else MIN_EXTRA_SHARE * median.window_s
    out = {}
    for name in TIMED:
        t, m = tail.cause(name).seconds, median.cause(name).seconds
        if t is not None and m is not None and extra > least:
            out[name] = (t - m) / extra
    return out


def dominant(tail: TailGroup, median: TailGroup) -> str | None:
    """The cause to name, or None. A root cause (something that stretched the steps) goes
    before a phase (queue, own prefill: where the TTFT window went, a partition of it): a
    GC pause inside a tail request's own prefill makes both explain its extra time."""
    shares = explained(tail, median)

    def ok(name: str) -> bool:
        return shares[name] >= DOMINANT_SHARE \
            and (_mostly(tail, name) or _pervasive(tail, name)) \
            and not (name == "queue" and start_burst(tail, median)) \
            and not (name == "own_prefill" and stretched(tail, median))

    for kinds in (ROOTS, PHASES):
        found = [c for c in kinds if c in shares and ok(c)]
        if found:
            return max(found, key=lambda c: shares[c])
    return None


def _mostly(tail: TailGroup, name: str) -> bool:
    return (tail.cause(name).seconds or 0.0) > MOSTLY * tail.window_s


def _pervasive(tail: TailGroup, name: str) -> bool:
    """Interference in more than PERVASIVE of the tail's steps (a count: each step either
    carries another request's prefill chunk or not)."""
    return name == "prefill_interference" and tail.steps > 0 \
        and (tail.cause(name).count or 0.0) > PERVASIVE * tail.steps


def prompt_share(tail: TailGroup, median: TailGroup) -> float | None:
    """Of the tail's extra own-prefill time, the share its longer prompts account for at
    the median requests' time per prompt token (None: no prompt counts, or no extra)."""
    t = tail.cause("own_prefill").seconds or 0.0
    m = median.cause("own_prefill").seconds or 0.0
    if tail.prompt_tokens <= 0 or median.prompt_tokens <= 0 or m <= 0 or t <= m:
        return None
    work = m * max(tail.prompt_tokens / median.prompt_tokens - 1.0, 0.0)
    return work / (t - m)


def stretched(tail: TailGroup, median: TailGroup) -> bool:
    """The tail's own prefill is slow beyond its prompts: stretched steps, not long work."""
    share = prompt_share(tail, median)
    return share is not None and share < MOSTLY


def start_burst(tail: TailGroup, median: TailGroup) -> bool:
    """Most tail requests arrived at the level's start and the median ones hardly queue:
    the queue is the start's burst (one event), not the level's steady state."""
    tail_q, median_q = tail.cause("queue").seconds or 0.0, median.cause("queue").seconds or 0.0
    return 2 * tail.at_start > tail.num_requests and median_q < START_QUEUE * tail_q


def _evidence(lv: LevelResult, tail: TailGroup, median: TailGroup, tail_section: TailSection
              ) -> dict[str, object]:
    ev: dict[str, object] = {
        "level": lv.point.label, "metric": tail.metric, "p99_s": tail.threshold_s,
        "num_tail_requests": tail.num_requests,
        "tail_window_s": tail.window_s, "median_window_s": median.window_s,
        "tail_steps": tail.steps, "median_steps": median.steps,
        "tail_at_start": tail.at_start, "median_at_start": median.at_start,
        "tail_prompt_tokens": tail.prompt_tokens, "median_prompt_tokens": median.prompt_tokens,
        "explained_share": {k: round(v, 3) for k, v in explained(tail, median).items()},
        "not_measured_share": _round(not_measured(tail, median)),
        "tail": {c.cause: {"count": c.count, "seconds": c.seconds} for c in tail.causes},
        "median": {c.cause: {"count": c.count, "seconds": c.seconds} for c in median.causes},
    }
    steps = tail_section.steps
    if steps is not None:
        ev |= {"tail_steps_with_prefill": steps.tail_prefill_share,
               "median_steps_with_prefill": steps.median_prefill_share,
               "tail_steps_with_gc": steps.tail_gc_share,
               "median_steps_with_gc": steps.median_gc_share}
    return ev


def _round(v: float | None) -> float | None:
    return None if v is None else round(v, 3)


def _message(metric: str, cause: str, lv: LevelResult, tail: TailGroup, median: TailGroup
             ) -> str:
    c = tail.cause(cause)
    share = explained(tail, median)[cause]
    n = c.count or 0.0
    what = {"prefill_interference": f"{n:.1f} steps shared with other requests' "
                                    "prefill chunks",
            "gc": f"{n:.1f} GC pauses", "queue": "queue wait",
            "own_prefill": "their own prefill", "run_queue": "waiting for a CPU",
            "gil": f"{n:.1f} waits for the GIL", "lock": f"{n:.1f} waits for a lock"}[cause]
    per = " per output token" if metric == "tpot" else ""  # TPOT groups: per decode interval
    where = (f" ({n / tail.steps:.0%} of their {'decode' if metric == 'tpot' else 'own'}"
             " steps carry other requests' prefill chunks)"
             if cause == "prefill_interference" and tail.steps > 0 else "")
    return (f"p99 {metric.upper()} at {lv.point.label} is mostly {cause.replace('_', ' ')}: "
            f"the {tail.num_requests} tail requests spent {(c.seconds or 0) * 1e3:.2f} ms of "
            f"their {tail.window_s * 1e3:.2f} ms{per} in {what}{where} (median requests "
            f"{(median.cause(cause).seconds or 0) * 1e3:.2f} ms of "
            f"{median.window_s * 1e3:.2f} ms); it explains {share:.0%} of the tail's extra "
            "time.")


def _why_mixed(tail: TailGroup, median: TailGroup) -> str:
    """Why the largest cause is not named: the start's burst, or a share of a few steps."""
    shares = explained(tail, median)
    if not shares:
        return ""
    name = max(shares, key=lambda c: shares[c])
    c, label = tail.cause(name), name.replace("_", " ")
    if name == "queue" and start_burst(tail, median):
        return (f" {tail.at_start} of the {tail.num_requests} tail requests arrived at the "
                "level's start (before any request finished; a closed loop's first arrivals "
                f"come at once) and queued {(c.seconds or 0) * 1e3:.2f} ms behind each other's "
                f"prefill, while the median requests queued "
                f"{(median.cause('queue').seconds or 0) * 1e3:.2f} ms: the start's burst, not "
                "a steady-state queue.")
    if name == "own_prefill" and stretched(tail, median):
        return _why_stretched(tail, median, shares)
    if shares[name] < DOMINANT_SHARE:
        return ""
    steps = (f" and is in {(c.count or 0.0) / tail.steps:.0%} of their steps"
             if name == "prefill_interference" and tail.steps > 0 else "")
    return (f" The largest, {label}, fills {(c.seconds or 0) / tail.window_s:.0%} of the tail "
            f"requests' window{steps}: a share of a few slow steps, not what the tail mostly "
            "is.")


def _why_stretched(tail: TailGroup, median: TailGroup, shares: dict[str, float]) -> str:
    t, m = tail.cause("own_prefill").seconds or 0.0, median.cause("own_prefill").seconds or 0.0
    per_token = (t / tail.prompt_tokens) / (m / median.prompt_tokens)
    roots = ", ".join(f"{c.replace('_', ' ')} {_share(shares[c])}" for c in ROOTS if c in shares)
    rest = not_measured(tail, median)
    what = ("a slower core, a wait no probe saw" if "gil" in shares and "lock" in shares
            else "another thread holding the GIL or a lock: run with --contention; "
            "a slower core")
    return (f" The largest, own prefill, is not the prompts: the tail requests' own prefill "
            f"took {t * 1e3:.2f} ms for {tail.prompt_tokens:.0f} prompt tokens against "
            f"{m * 1e3:.2f} ms for {median.prompt_tokens:.0f} ({per_token:.1f}x per token), "
            f"so their longer prompts account for {prompt_share(tail, median) or 0.0:.0%} of "
            f"its extra time: its steps were stretched. Measured causes that stretch steps "
            f"explain {roots or 'none'} of the tail's extra time; the rest"
            + ("" if rest is None else f" ({rest:.0%})")
            + f" was not measured ({what}).")


def not_measured(tail: TailGroup, median: TailGroup) -> float | None:
    """The share of the tail's extra time no measured root cause explains: 1 less the
    root causes' shares (each clipped to 0..1; they never count the same time, except
    prefill interference, a per-step cost), at least 0. None: no extra time."""
    shares = explained(tail, median)
    if not shares:
        return None
    return max(0.0, 1.0 - sum(min(1.0, max(0.0, shares[c])) for c in ROOTS if c in shares))


def _mixed(lv: LevelResult, tail: TailGroup, median: TailGroup, sec: TailSection) -> Finding:
    metric = tail.metric
    shares = ", ".join(f"{k.replace('_', ' ')} {_share(v)}"
                       for k, v in explained(tail, median).items())
    return Finding(
        f"p99_{metric}_mixed", "info",
        f"p99 {metric.upper()} at {lv.point.label} has no single dominant cause; shares of "
        f"the tail's extra time: {shares or 'tail no slower than median'}."
        + _why_mixed(tail, median),
        _evidence(lv, tail, median, sec),
        "Look at the tail diff flame graph (level-X.tail-diff.svg) for what the slowest "
        "steps do differently.")


def serious(metric: str, tail: TailGroup, median: TailGroup, profile: Profile) -> bool:
    """The tail matters: much slower than the median, and past the SLO where one is set."""
    target = profile.slo.ttft_s if metric == "ttft" else profile.slo.tpot_s
    slow = tail.window_s >= TAIL_WARN_RATIO * median.window_s
    return slow and (target is None or tail.threshold_s > target)


def tail_cause(levels: list[LevelResult], profile: Profile) -> list[Finding]:
    found: list[Finding] = []
    for metric in ("ttft", "tpot"):
        last: tuple[LevelResult, TailGroup, TailGroup, TailSection] | None = None
        for lv in levels:
            sec = lv.tail
            tail, median = (sec.group(metric, "tail"), sec.group(metric, "median")) \
                if sec else (None, None)
            measured = sum(1 for r in lv.requests if not r.warmup)
            if sec is None or tail is None or median is None or measured < MIN_REQUESTS:
                continue
            last = (lv, tail, median, sec)
            cause = dominant(tail, median)
            if cause is not None:
                severity = "warning" if serious(metric, tail, median, profile) else "info"
                found.append(Finding(f"p99_{metric}_{cause}", severity,
                                     _message(metric, cause, lv, tail, median),
                                     _evidence(lv, tail, median, sec), FIXES[cause]))
                break
        else:
            if last is not None:
                found.append(_mixed(*last))
    return found
