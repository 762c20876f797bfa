"""The report's tail view: why p99 is high at the chosen level.

The level is the flame graph's (`--flame`, else the highest concurrency recorded with
stacks); a result without stacks falls back to its knee, else its highest level. Per input:
- the differential flame graph (level-X.tail-diff.svg: steps slower than p99 against the
  median steps), embedded as the flame graph is (sandboxed srcdoc frame);
- in-process: the tail breakdown, the p99 TTFT / TPOT requests against the median ones,
  each cause as a mean count and time per request (result/tail.py);
- remote: the client's view, first-token time and stalls between chunks
  (result/client_tail.py);
- where the level's threads waited (off-CPU stacks) or why that is unknown.
A level with neither breakdown gives one line, "tail view unavailable: <reason>".
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from perfkit.report import flame_embed
from perfkit.report.cells import ms, num
from perfkit.report.sweep_charts import Level, SweepIn, level_order
from perfkit.result.client_tail import ClientTailSection
from perfkit.result.server_traces import ServerSplit
from perfkit.result.tail import CAUSES, TailGroup, TailSection

CAUSE_NAMES = {"queue": "queue wait", "own_prefill": "own prefill (steps)",
               "prefill_interference": "interference (steps with others' prefill)",
               "preemption": "preemptions", "gc": "GC pauses", "run_queue": "run-queue wait",
               "page_faults": "page faults", "gil": "GIL waits (engine thread)",
               "lock": "lock waits (engine thread)"}
COLUMNS = (("ttft", "tail"), ("ttft", "median"), ("tpot", "tail"), ("tpot", "median"))
# --server-traces: the window split by the server's spans (TPOT: per output token)
SERVER_LINES: list[tuple[str, Callable[[ServerSplit], str]]] = [
    ("server: joined requests", lambda s: str(s.num_joined)),
    ("server: queue ms", lambda s: ms(s.queue_s)),
    ("server: prefill ms", lambda s: ms(s.prefill_s)),
    ("server: decode ms", lambda s: ms(s.decode_s)),
    ("server: API process ms", lambda s: ms(s.api_server_s)),
    ("outside the server ms", lambda s: ms(s.outside_server_s))]


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def chosen_level(s: SweepIn, key: str | None) -> Level | None:
    """The level of the flame graph's key; without one, the knee level, else the highest."""
    levels = s.levels
    if not levels:
        return None
    repeated = any(lv.repeat for lv in levels)
    if key is not None:
        return next((lv for lv in levels if flame_embed.stack_key(lv, repeated) == key), None)
    knee = s.result.knee
    at_knee = [lv for lv in levels if knee is not None and lv.point.x == knee.level
               and lv.point.closed]
    return at_knee[0] if at_knee else max(levels, key=level_order)


def _table(head: list[str], rows: list[list[str]]) -> str:
    cells = "".join(f"<th>{_esc(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{_esc(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f'<table class="tail"><tr>{cells}</tr>{body}</table>'


def _cause_cell(g: TailGroup | None, cause: str) -> str:
    if g is None:
        return "n/a"
    c = g.cause(cause)
    if c.count is None:
        return "n/a"
    return f"{c.count:.1f}" + ("" if c.seconds is None else f" / {ms(c.seconds)} ms")


def breakdown_table(sec: TailSection) -> str:
    groups = [sec.group(m, w) for m, w in COLUMNS]
    head = ["per request (mean)"] + [
        f"{m.upper()} {'p99' if w == 'tail' else 'median'} requests"
        f" (n={g.num_requests if g else 0})" for (m, w), g in zip(COLUMNS, groups)]
    rows = [["window ms"] + [ms(g.window_s) if g else "n/a" for g in groups]]
    rows += [[CAUSE_NAMES[c]] + [_cause_cell(g, c) for g in groups] for c in CAUSES]
    note = ("Counts, then time (ms) where a cause has one. The TTFT window is arrival to "
            "first token, the TPOT window first token to finish; causes overlap.")
    if sec.counters_reason:
        note += f" Run-queue wait and page faults: {sec.counters_reason}."
    if sec.waits_reason:
        note += f" GIL and lock waits: {sec.waits_reason}."
    return _table(head, rows) + f'<p class="note">{_esc(note)}</p>'


def client_table(sec: ClientTailSection) -> str:
    groups = [sec.group(m, w) for m, w in COLUMNS]
    head = ["per request (mean)"] + [
        f"{m.upper()} {'p99' if w == 'tail' else 'median'} requests"
        f" (n={g.num_requests if g else 0})" for (m, w), g in zip(COLUMNS, groups)]
    lines: list[tuple[str, Callable[[Any], str]]] = [
        ("first token ms (queue + prefill)", lambda g: ms(g.ttft_s)),
        ("decode ms", lambda g: ms(g.decode_s)), ("median gap ms", lambda g: ms(g.median_gap_s)),
        ("stalls", lambda g: num(g.num_stalls)), ("stall ms", lambda g: ms(g.stall_s))]
    rows = [[name] + [get(g) if g else "n/a" for g in groups] for name, get in lines]
    rows += [[name] + [get(g.server) if g and g.server else "n/a" for g in groups]
             for name, get in SERVER_LINES]
    tail = sec.group("tpot", "tail")
    where = [f"request {r.request_id}: " + (", ".join(f"{s.index} ({ms(s.gap_s)} ms)"
                                                      for s in r.stalls) or "none")
             for r in (tail.requests if tail else [])]
    note = (f"As the client saw it: a stall is a gap between chunks over "
            f"{sec.stall_factor:g}x the request's median gap (and {ms(sec.min_stall_s)} ms). "
            f"Stalls of the p99 TPOT requests at {sec.itl_unit} index: " + "; ".join(where))
    return _table(head, rows) + f'<p class="note">{_esc(note)}</p>'


def _offcpu_line(lv: Level) -> str:
    st = lv.stacks
    if st is None:
        return ""
    if st.offcpu_reason:
        return f'<p class="note">off-CPU stacks unavailable: {_esc(st.offcpu_reason)}</p>'
    if st.offcpu_folded_path:
        return (f'<p class="note">off-CPU: {st.offcpu_samples} samples of waiting threads in '
                f"<code>{_esc(st.offcpu_folded_path)}</code> (flamegraph.pl input).</p>")
    return ""


def _diff(s: SweepIn, lv: Level, key: str, search_dirs: Sequence[Path]) -> tuple[str, dict]:
    info = lv.stacks.tail if lv.stacks is not None else None
    if info is None or info.diff_svg_path is None:
        why = "recorded without --stacks" if lv.stacks is None else "no engine steps"
        return f'<p class="note">No differential flame graph: {why}.</p>', {}
    svg, note = flame_embed.read_svg(flame_embed.candidates(info.diff_svg_path, s, search_dirs))
    frame = flame_embed.Flame(s.label, key, info.diff_svg_path, svg, note)
    head = (f'<p class="note">{info.num_tail_steps} steps slower than p99 '
            f"({ms(info.step_p99_s)} ms) against {info.num_median_steps} median steps; red "
            "grows in the tail, blue shrinks.</p>")
    return head + flame_embed.iframe(frame), {"diff_svg_path": info.diff_svg_path,
                                              "embedded": svg is not None}


def tail_view(sweeps: Sequence[SweepIn], key: str | None, search_dirs: Sequence[Path] = ()
              ) -> tuple[str, list[dict[str, Any]]]:
    """(HTML, one data record per input with tail data) for the report's section."""
    parts, data = [], []
    for s in sweeps:
        lv = chosen_level(s, key)
        head = f"<h3>{_esc(s.label)}</h3>" if len(sweeps) > 1 else ""
        if lv is None or (lv.tail is None and lv.client_tail is None):
            why = ("no level" if lv is None else f"{lv.point.label} has no tail breakdown "
                   "(a remote level without completed requests, or an older result)")
            parts.append(f'{head}<p class="note">tail view unavailable: {_esc(why)}</p>')
            continue
        lkey = flame_embed.stack_key(lv, any(x.repeat for x in s.levels))
        diff, record = _diff(s, lv, lkey, search_dirs)
        table = breakdown_table(lv.tail) if lv.tail is not None else client_table(
            lv.client_tail)  # type: ignore[arg-type]
        parts.append(f"{head}<p>At {_esc(lv.point.label)}:</p>{diff}{table}{_offcpu_line(lv)}")
        data.append({"label": s.label, "level": lkey, "remote": lv.tail is None, **record})
    return "".join(parts), data
