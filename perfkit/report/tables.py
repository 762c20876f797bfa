"""The summary tables of a sweep result, as rich renderables and as Markdown.

Both read the same columns: (header, cell) pairs over a `LevelResult`. Timings are
noisy; counts are deterministic for profile + seed. A value the level did not measure
prints n/a (see perfkit.report.cells): a remote level has no engine steps, no block or
slot counts and, without scraping, no preemptions; its KV cell is the scraped share.
"""

from __future__ import annotations

from collections.abc import Callable

from rich.console import Group, RenderableType
from rich.text import Text

from perfkit.report.cells import (
    NA,
    TIMING_CELLS,
    aggregate,
    count,
    level_name,
    lv_short,
    ms,
    num,
    pct,
    table,
)
from perfkit.report.client_tail_cols import CLIENT_TAIL
from perfkit.report.client_tail_cols import TITLE as CLIENT_TAIL_TITLE
from perfkit.report.contention_cols import CONTENTION, notes
from perfkit.report.contention_cols import TITLE as CONTENTION_TITLE
from perfkit.report.server_tail_cols import SERVER_TAIL, unavailable_reason
from perfkit.report.server_tail_cols import TITLE as SERVER_TAIL_TITLE
from perfkit.result import GuardSection, LevelResult, SweepResult
from perfkit.result.remote import ClientOverhead

Cell = Callable[[LevelResult], str]
Columns = list[tuple[str, Cell]]


def _gpu(lv: LevelResult) -> str:
    gpu = lv.gpu
    return f"{gpu.peak_used_bytes / 2**30:.1f} GiB" if gpu.available else NA


def _kv_peak(lv: LevelResult) -> str:
    """Blocks in-process; a remote server's scraped usage share (n/a without scraping)."""
    kv = lv.kv
    if lv.remote:
        return pct(kv.usage_peak)
    if kv.peak_blocks_used is None or kv.blocks_total is None:
        return NA
    return f"{kv.peak_blocks_used}/{kv.blocks_total}"


def _cpu(get: Callable[[LevelResult], str]) -> Cell:
    """A CPU cell; n/a when the process sampler did not run (its figures are zeros)."""
    return lambda lv: get(lv) if lv.cpu.available else NA


def _faults(lv: LevelResult) -> str:
    steps = lv.counts.steps
    return NA if steps is None else f"{lv.cpu.num_minor_faults / max(steps, 1):.0f}"


def _goodput(share: float | None) -> str:
    return NA if share is None else num(share * 100, 0) + "%"


def _gc_max(lv: LevelResult) -> str:
    return ms(lv.gc.max_s) if lv.gc.available else NA


TIMINGS: Columns = [
    ("level", level_name),
    *TIMING_CELLS,
    ("goodput", lambda lv: _goodput(lv.goodput.share)),
]
RESOURCES: Columns = [
    ("level", level_name),
    ("user\ns", _cpu(lambda lv: num(lv.cpu.user_s, 2))),
    ("sys\ns", _cpu(lambda lv: num(lv.cpu.system_s, 2))),
    ("sys\nshare", _cpu(lambda lv: pct(lv.cpu.system_share, 1))),
    ("faults\n/step", _cpu(_faults)),
    ("invol.\nctx sw", _cpu(lambda lv: count(lv.cpu.num_involuntary_ctx_switches))),
    ("runq\nwait s", _cpu(lambda lv: num(lv.cpu.run_queue_wait_s, 2))),
    ("GC max\nms", _gc_max),
    ("GPU\npeak", _gpu),
]
COUNTS: Columns = [
    ("level", level_name),
    ("reqs", lambda lv: count(lv.counts.requests)),
    ("out\ntokens", lambda lv: count(lv.counts.output_tokens)),
    ("rej.", lambda lv: count(lv.counts.num_rejected)),
    ("pre-\nempt", lambda lv: count(lv.counts.preemptions)),
    ("KV peak\nblocks", _kv_peak),
    ("KV peak\nslots", lambda lv: count(lv.kv.peak_slots_used)),
    ("run\npeak", lambda lv: count(lv.kv.peak_running)),
    ("prefix\nhit", lambda lv: pct(lv.prefix_hit_rate)),
    ("steps", lambda lv: count(lv.counts.steps)),
]


def _guard(get: Callable[[GuardSection], str]) -> Cell:
    """A guard cell; n/a on a level without a guard section (a remote level)."""
    return lambda lv: NA if lv.guard is None else get(lv.guard)


def _ended(reason: str) -> Cell:
    # `ended` holds the reasons that occurred: a missing one is a measured 0.
    return _guard(lambda g: str(g.counts.ended.get(reason, 0)))


def _client(get: Callable[[ClientOverhead], str]) -> Cell:
    """A load-generator cell; n/a on an in-process level."""
    return lambda lv: NA if lv.client is None else get(lv.client)


GUARD: Columns = [
    ("level", level_name),
    ("tool\ncalls", _guard(lambda g: str(g.counts.tool_calls))),
    ("invalid\ncalls", _guard(lambda g: str(g.counts.invalid_tool_calls))),
    ("ended\nstop", _ended("stop")),
    ("ended\nloop", _ended("loop")),
    ("ended\nlength", _ended("length")),
    ("guard\nµs/step", _guard(lambda g: num(g.timing.us_per_step, 0))),
]
def _delivered(c: ClientOverhead) -> str:
    """Delivered load against the configured one; '!' past 5% (load_not_delivered)."""
    if c.load_error is None:
        return NA
    return f"{1 + c.load_error:.1%}" + ("!" if abs(c.load_error) > 0.05 else "")


def _workers(c: ClientOverhead) -> str:
    return str(c.workers) + (f" ({len(c.lost)} lost)" if c.lost else "")


CLIENT: Columns = [
    ("level", level_name),
    ("errors", lambda lv: NA if lv.errors is None else str(lv.errors.total)),
    ("work-\ners", _client(_workers)),
    ("busiest\nCPU", _client(lambda c: pct(c.cpu_share))),
    ("CPU µs\n/chunk", _client(lambda c: num(None if c.cpu_per_chunk_s is None
                                              else c.cpu_per_chunk_s * 1e6, 0))),
    ("loop lag\np99 ms", _client(lambda c: ms(c.loop_lag.get("p99")))),
    ("sent late\np99 ms", _client(lambda c: ms(c.send_late.get("p99")))),
    ("deliv-\nered", _client(_delivered)),
]


def _per_step(value: float | None) -> str:
    return NA if value is None else num(value, 1)


SHARING: Columns = [
    ("level", level_name),
    ("outputs", lambda lv: count(lv.counts.outputs)),
    ("shared\nmean", lambda lv: _per_step(lv.kv.mean_blocks_shared)),
    ("shared\npeak", lambda lv: count(lv.kv.peak_blocks_shared)),
    ("saved\nmean", lambda lv: _per_step(lv.kv.mean_blocks_saved)),
    ("saved\npeak", lambda lv: count(lv.kv.peak_blocks_saved)),
    ("copy-on-\nwrites", lambda lv: count(lv.counts.pool_copy_on_writes)),
    ("memory\nsaving", lambda lv: pct(lv.kv.memory_saving, 1)),
]
SHARING_TITLE = ("Sharing (counts: blocks in several tables and blocks saved, per step; "
                 "saving = saved / needed without sharing)")
TABLES: list[tuple[str, Columns]] = [
    ("Timings (noisy)", TIMINGS), ("CPU, GC, GPU (noisy)", RESOURCES),
    ("Counts (deterministic)", COUNTS)]


def shared(lv: LevelResult) -> bool:
    """Requests asked for several outputs, or blocks were shared (prefix hits too)."""
    c = lv.counts
    return bool((c.outputs or 0) > c.requests - c.num_rejected or lv.kv.peak_blocks_shared)


def _guard_ran(lv: LevelResult) -> bool:
    return lv.guard is not None and bool(lv.guard.counts.tool_calls
                                         or lv.guard.counts.ended.get("loop"))


def tail_percentile(result: SweepResult) -> float:
    """The highest percentile the sweep chose (sweep.percentiles; 99 by default)."""
    sweep = result.profile.resolved.get("sweep", {})
    qs = sweep.get("percentiles") if isinstance(sweep, dict) else None
    return float(max(qs)) if isinstance(qs, list) and qs else 99.0


def timing_columns(q: float) -> Columns:
    """TIMINGS with its tail columns at percentile q (p99 unless the sweep chose higher)."""
    if q == 99.0:
        return TIMINGS
    key = f"p{q:g}"

    def at(section: str, cell: Callable[[float | None], str]) -> Cell:
        return lambda lv: cell(getattr(lv.latency, section).quantiles.get(key))

    tail = {"TTFT\np99 ms": (f"TTFT\n{key} ms", at("ttft", ms)),
            "TPOT\np99 ms": (f"TPOT\n{key} ms", at("tpot", ms)),
            "E2E\np99 s": (f"E2E\n{key} s", at("e2e", lambda v: num(v, 2)))}
    return [tail.get(head, (head, get)) for head, get in TIMINGS]


def tables_of(result: SweepResult) -> list[tuple[str, Columns]]:
    """The three tables; the guard table when some level ran tool calls or cut a loop;
    the client and client-view tail tables for a remote target. Timings show the sweep's
    highest percentile."""
    tables = list(TABLES)
    tables[0] = (tables[0][0], timing_columns(tail_percentile(result)))
    if any(_guard_ran(lv) for lv in result.levels):
        tables.append(("Guard (counts; µs/step is a timing)", GUARD))
    if any(shared(lv) for lv in result.levels):
        tables.append((SHARING_TITLE, SHARING))
    if any(lv.remote for lv in result.levels):
        tables.append(("Remote target: errors (count); the load generator's cost and error "
                       "(noisy)", CLIENT))
    if any(lv.client_tail is not None for lv in result.levels):
        why = unavailable_reason(result.levels)
        tables.append((CLIENT_TAIL_TITLE + (f"\nserver timings {why}" if why else ""),
                       CLIENT_TAIL))
    if any(lv.server_traces is not None and lv.server_traces.available
           for lv in result.levels):
        tables.append((SERVER_TAIL_TITLE, SERVER_TAIL))
    if any(lv.contention is not None for lv in result.levels):
        tables.append((CONTENTION_TITLE, CONTENTION))
    return tables


def rows(result: SweepResult, columns: Columns) -> tuple[list[str], list[list[str]]]:
    """One row per load point: repeats aggregated (see `aggregate`), in first-run order."""
    headers = [h for h, _ in columns]
    groups: dict[str, list[LevelResult]] = {}
    for lv in result.levels:
        groups.setdefault(lv.point.label, []).append(lv)
    body = []
    for group in groups.values():
        if len(group) == 1:
            body.append([cell(group[0]) for _, cell in columns])
        else:
            body.append([f"{lv_short(group[0])} ({len(group)} runs)" if h == "level"
                         else aggregate([cell(lv) for lv in group]) for h, cell in columns])
    return headers, body


def rich_summary(result: SweepResult) -> RenderableType:
    parts: list[RenderableType] = [Text(f"perfkit sweep: {result.profile.name}", style="bold")]
    parts += [table(title, *rows(result, cols)) for title, cols in tables_of(result)]
    parts += [Text(line, style="dim") for line in notes(result)]
    if result.knee is not None:
        parts.append(Text(f"Knee: {result.knee.sentence}"))
    if result.search is not None:
        parts.append(Text(f"Search: {result.search.sentence}"))
    for f in result.findings:
        style = "yellow" if f.severity == "warning" else "cyan"
        parts.append(Text.assemble((f"[{f.severity}] {f.id}: ", style), f.message,
                                   ("\n  fix: " + f.fix, "dim")))
    if not result.findings:
        parts.append(Text("No findings.", style="green"))
    return Group(*parts)


def markdown(result: SweepResult) -> str:
    out = [f"## perfkit sweep: {result.profile.name}"]
    for title, cols in tables_of(result):
        headers, body = rows(result, cols)
        headers = [h.replace("\n", " ") for h in headers]
        out += ["", f"### {title}", "", "| " + " | ".join(headers) + " |",
                "|" + "---|" * len(headers)]
        out += ["| " + " | ".join(r) + " |" for r in body]
    out += [f"\n_{line}_" for line in notes(result)]
    if result.knee is not None:
        out += ["", f"**Knee:** {result.knee.sentence}"]
    if result.search is not None:
        out += ["", f"**Search:** {result.search.sentence}"]
    for f in result.findings:
        out += [f"- **{f.severity}** `{f.id}`: {f.message} _Fix:_ {f.fix}"]
    return "\n".join(out) + "\n"
