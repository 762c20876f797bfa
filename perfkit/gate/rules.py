"""What the gate compares (the metric catalogue) and the rules it compares them by.

Three kinds of metric, each with its own statistics (see perfkit.gate.compare):
  timing  a percentile of each run's raw per-request samples (seconds)
  repeat  one noisy value per level and run (rates, shares, bytes, CPU per token)
  count   deterministic for profile + seed (tokens, blocks, preemptions, hits)
Readers are typed getters of a LevelResult. None means the level did not measure the
metric (a remote target has no engine steps or KV block counts): "not measured".

Rules come from three layers, later ones winning field by field:
DEFAULT_RULES <- the baseline profile's [gate.rules] <- a --rules TOML file with
[rules.METRIC] tables. Every metric name is checked against the catalogue.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from perfkit.config.schema import GateRule
from perfkit.config.typed import FieldError, build, unknown_key_message
from perfkit.errors import PerfkitError
from perfkit.result.level import LevelResult

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

MetricKind = Literal["timing", "repeat", "count"]
Read = Callable[[LevelResult], float | None]


def _prefix_hits(level: LevelResult) -> int | None:
    """In-process: the pool's block hits; a remote target: the scraped server counter."""
    if level.remote:
        return level.server.prefix_hits if level.server is not None else None
    return level.counts.pool_hits


REMOTE_BLOCKS = "a remote target exports no KV block counts"
SCRAPED = "a remote target's {} are known only with perfkit sweep --scrape-metrics"
NOTHING_FINISHED = "no request finished in the measured window"
REMOTE_CPU = "a remote target's CPU time is the server's, which a client cannot see"


def _cpu_s(level: LevelResult) -> float | None:
    """The process's own CPU seconds (user + system) in the measured window; None for a
    remote target (that is the client's CPU, not the server's)."""
    return None if level.remote else level.cpu.user_s + level.cpu.system_s


def _per(level: LevelResult, num: int | None) -> float | None:
    cpu = _cpu_s(level)
    return None if cpu is None or not num else cpu / num


def cpu_per_token(level: LevelResult) -> float | None:
    return _per(level, level.counts.output_tokens)


def cpu_per_step(level: LevelResult) -> float | None:
    return _per(level, level.counts.steps)


@dataclass(frozen=True)
class Metric:
    name: str
    kind: MetricKind
    unit: str  # "s", "tok/s", "req/s", "share", "bytes", or a count's noun
    help: str
    sample: str | None = None  # timing: the RequestSample field (perfkit.gate.inputs.SAMPLES)
    q: float | None = None  # timing: the percentile, 0..100
    read: Read | None = None  # repeat, count: one level's value; None: not measured there
    sampler: Literal["cpu", "gpu"] | None = None  # the level section that must be available
    scheduled: bool = False  # count that depends on the batch schedule (noisy on open loop)
    unmeasured: str = ""  # why `read` can give None (shown with a "not measured" verdict)


def _timing(name: str, field: str, q: float, what: str) -> Metric:
    """q = 100 is each run's slowest request (its max)."""
    label = "the slowest request's" if q == 100 else f"p{q:g}"
    return Metric(name, "timing", "s", f"{label} {what} over raw samples", sample=field, q=q)


METRICS: dict[str, Metric] = {m.name: m for m in [
    _timing("ttft_p50", "ttft_s", 50, "time to first token"),
    _timing("ttft_p99", "ttft_s", 99, "time to first token"),
    _timing("tpot_p50", "tpot_s", 50, "time per output token"),
    _timing("tpot_p99", "tpot_s", 99, "time per output token"),
    _timing("e2e_p50", "e2e_s", 50, "end-to-end latency"),
    _timing("e2e_p99", "e2e_s", 99, "end-to-end latency"),
    _timing("ttft_max", "ttft_s", 100, "time to first token"),
    _timing("tpot_max", "tpot_s", 100, "time per output token"),
    _timing("e2e_max", "e2e_s", 100, "end-to-end latency"),
    Metric("throughput", "repeat", "tok/s", "output tokens per second",
           read=lambda lv: lv.throughput.output_tokens_per_s, unmeasured=NOTHING_FINISHED),
    Metric("goodput", "repeat", "req/s", "requests per second meeting every SLO target",
           read=lambda lv: lv.goodput.good_per_s, unmeasured=NOTHING_FINISHED),
    Metric("system_share", "repeat", "share", "share of CPU time spent in the kernel",
           read=lambda lv: lv.cpu.system_share, sampler="cpu"),
    Metric("cpu_per_token", "repeat", "s", "process CPU time (user + system) per output "
           "token: run-queue waits do not inflate it", read=cpu_per_token, sampler="cpu",
           unmeasured=REMOTE_CPU),
    Metric("cpu_per_step", "repeat", "s", "process CPU time (user + system) per engine step",
           read=cpu_per_step, sampler="cpu", unmeasured=REMOTE_CPU),
    Metric("gpu_peak_bytes", "repeat", "bytes", "peak device memory in use (NVML)",
           read=lambda lv: lv.gpu.peak_used_bytes, sampler="gpu"),
    Metric("output_tokens", "count", "tokens", "output tokens of served requests",
           read=lambda lv: lv.counts.output_tokens),
    Metric("prompt_tokens", "count", "tokens", "prompt tokens of served requests",
           read=lambda lv: lv.counts.prompt_tokens),
    Metric("cached_tokens", "count", "tokens", "prompt tokens served from the prefix cache",
           read=lambda lv: lv.counts.cached_tokens, scheduled=True),
    Metric("rejected", "count", "requests", "requests rejected by admission control",
           read=lambda lv: lv.counts.num_rejected, scheduled=True),
    Metric("preemptions", "count", "preemptions", "preemptions of served requests",
           read=lambda lv: lv.counts.preemptions, scheduled=True,
           unmeasured=SCRAPED.format("preemptions")),
    Metric("prefix_hits", "count", "blocks", "prefix-cache block lookups that hit",
           read=_prefix_hits, scheduled=True,
           unmeasured=SCRAPED.format("prefix hits") + " (from a server that exports them)"),
    Metric("kv_peak_blocks", "count", "blocks", "peak KV blocks in use",
           read=lambda lv: lv.kv.peak_blocks_used, scheduled=True, unmeasured=REMOTE_BLOCKS),
    Metric("kv_waste_slots", "count", "slots", "mean allocated but empty token slots per step",
           read=lambda lv: lv.kv.waste_slots, scheduled=True, unmeasured=REMOTE_BLOCKS),
    Metric("steps", "count", "steps", "engine steps", read=lambda lv: lv.counts.steps,
           scheduled=True, unmeasured="a client cannot count a remote engine's steps"),
    Metric("outputs", "count", "outputs", "outputs of served requests (n samples or beams)",
           read=lambda lv: lv.counts.outputs),
    Metric("kv_saved_blocks", "count", "blocks", "mean KV blocks per step that sharing saves "
           "(a request's outputs, prefix hits)", read=lambda lv: lv.kv.mean_blocks_saved,
           scheduled=True, unmeasured=REMOTE_BLOCKS),
    Metric("copy_on_writes", "count", "copies", "shared KV blocks copied before a write",
           read=lambda lv: lv.counts.pool_copy_on_writes, scheduled=True,
           unmeasured=REMOTE_BLOCKS),
]}


def _rule(direction: Literal["lower", "higher"], rel: float | None, abs_: float | None = None,
          required: bool = True) -> GateRule:
    return GateRule(direction=direction, rel_tol=rel, abs_tol=abs_, required=required)


# Chosen from same-vs-same and planted-slowdown runs of the CI recipe (docs/gate.md) on a
# loaded 2-core machine (two sweeps in --lockstep, 6 repeats, 100 requests a level):
# TPOT and E2E medians and CPU time per token decide a 10% change (pairs within +-3%);
# a TTFT median is one prefill step per request, about twice as noisy: 10%. A paired
# p99 of 100 samples a run is the second-slowest request, decided only against a wide
# band (+100%), so p99 catches tails that blow up, not a few percent. The max of a run
# (its slowest request) is the one row that sees a single request blow up: +200%; in
# lockstep, with run-queue waits out of the clock, the same code's max pairs stayed
# within +75% at load 4 (docs/validation/gate-power.md). Throughput and
# goodput are means over the level: one stalled request moves them by 10% on a shared
# machine, and at a closed-loop level they follow from the latencies gated here, so
# they are shown, not required. system_share is a share near 0: an absolute band.
DEFAULT_RULES: dict[str, GateRule] = {
    "ttft_p50": _rule("lower", 0.10), "ttft_p99": _rule("lower", 1.0),
    "tpot_p50": _rule("lower", 0.05), "tpot_p99": _rule("lower", 1.0),
    "e2e_p50": _rule("lower", 0.05), "e2e_p99": _rule("lower", 1.0),
    "ttft_max": _rule("lower", 2.0), "tpot_max": _rule("lower", 2.0),
    "e2e_max": _rule("lower", 2.0),
    "throughput": _rule("higher", 0.05, required=False),
    "goodput": _rule("higher", 0.05, required=False),
    "system_share": _rule("lower", None, 0.05),
    "cpu_per_token": _rule("lower", 0.05), "cpu_per_step": _rule("lower", 0.05),
    "gpu_peak_bytes": _rule("lower", 0.05, required=False),
    "output_tokens": _rule("higher", 0.0), "prompt_tokens": _rule("higher", 0.0, required=False),
    "cached_tokens": _rule("higher", 0.0, required=False), "rejected": _rule("lower", 0.0),
    "preemptions": _rule("lower", 0.0), "prefix_hits": _rule("higher", 0.0),
    "kv_peak_blocks": _rule("lower", 0.0), "kv_waste_slots": _rule("lower", 0.0),
    "steps": _rule("lower", 0.0, required=False),
    "outputs": _rule("higher", 0.0, required=False),
    "kv_saved_blocks": _rule("higher", 0.0, required=False),
    "copy_on_writes": _rule("lower", 0.0, required=False),
}


TIMED = (("ttft", "ttft_s", "time to first token"), ("tpot", "tpot_s", "time per output token"),
         ("e2e", "e2e_s", "end-to-end latency"))


def metrics_for(resolved: dict[str, Any]) -> dict[str, Metric]:
    """The catalogue plus TTFT/TPOT/E2E at every percentile the run chose (sweep.percentiles,
    e.g. ttft_p95, tpot_p99.9): those are gated too, optional unless a rule says required."""
    sweep = resolved.get("sweep", {}) if isinstance(resolved, dict) else {}
    qs = sweep.get("percentiles", []) if isinstance(sweep, dict) else []
    out = dict(METRICS)
    for q in qs if isinstance(qs, list) else []:
        if isinstance(q, (int, float)) and not isinstance(q, bool) and 0 < q < 100:
            for base, field, what in TIMED:
                name = f"{base}_p{q:g}"
                out.setdefault(name, _timing(name, field, float(q), what))
    return out


def default_rules(metrics: dict[str, Metric]) -> dict[str, GateRule]:
    """DEFAULT_RULES, and for a chosen percentile the band of p50 (q <= 90) or p99 (above)."""
    out = dict(DEFAULT_RULES)
    for name, metric in metrics.items():
        if name not in out and metric.q is not None:
            like = DEFAULT_RULES[f"{name.split('_')[0]}_{'p50' if metric.q <= 90 else 'p99'}"]
            out[name] = dataclasses.replace(like, required=False)
    return out


def _merge(rules: dict[str, GateRule], tables: Any, where: str) -> dict[str, GateRule]:
    """Each table's fields replace those of the rule it names; FieldError on bad input."""
    if not isinstance(tables, dict):
        raise FieldError(where, "expected a table of [METRIC] tables")
    out = dict(rules)
    for name, table in tables.items():
        if name not in rules:
            message = unknown_key_message(name, list(rules)).replace("key", "metric", 1)
            raise FieldError(f"{where}.{name}", message)
        if not isinstance(table, dict):
            raise FieldError(f"{where}.{name}", "expected a table (direction, rel_tol, ...)")
        out[name] = build(GateRule, dataclasses.asdict(out[name]) | table, f"{where}.{name}")
    return out


def profile_rules(resolved: dict[str, Any], who: str) -> tuple[dict[str, GateRule], list[str]]:
    """DEFAULT_RULES with a result's resolved [gate.rules] applied; warnings beside.

    A rule that flips a metric's natural direction gets a warning."""
    tables = resolved.get("gate", {}).get("rules", {}) if isinstance(resolved, dict) else {}
    defaults = default_rules(metrics_for(resolved))
    try:
        rules = _merge(defaults, tables, "gate.rules")
    except FieldError as err:
        raise PerfkitError(f"{who} profile: {err}") from None
    warnings = [
        f"{who} profile gate.rules.{name}: direction {rules[name].direction!r} is the "
        f"opposite of {name}'s natural {defaults[name].direction!r}; set it explicitly "
        "if that is not what you meant"
        for name in tables
        if rules[name].direction != defaults[name].direction
    ]
    return rules, warnings


def read_rules_file(path: Path, rules: dict[str, GateRule]) -> dict[str, GateRule]:
    """`rules` with a TOML file's [rules.METRIC] tables applied."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PerfkitError(f"--rules {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise PerfkitError(f"--rules {path}: cannot read it ({err})") from None
    except tomllib.TOMLDecodeError as err:
        raise PerfkitError(f"--rules {path}: TOML syntax error: {err}") from None
    try:
        for key in data:
            if key != "rules":
                raise FieldError(key, unknown_key_message(key, ["rules"]))
        return _merge(rules, data.get("rules", {}), "rules")
    except FieldError as err:
        raise PerfkitError(f"--rules {path}: {err}") from None


def tolerance(rule: GateRule, baseline: float) -> float:
    """Half-width of the band of accepted change, in the metric's unit: the larger of
    rel_tol * |baseline| and abs_tol (either may be unset)."""
    return max((rule.rel_tol or 0.0) * abs(baseline), rule.abs_tol or 0.0)
