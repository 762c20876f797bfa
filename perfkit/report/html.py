"""One self-contained HTML report from sweep and fragmentation results.

The page has no scripts and loads nothing: CSS is inline, charts are inline
SVG, the flame graph (and the tail view's differential one) sits in a sandboxed srcdoc
frame. Its only outside addresses are links a reader may follow: each finding id links
to its entry in the findings catalogue (perfkit.docs_site). Every chart is a
`<figure class="chart" id="chart-ID" data-chart="JSON">` whose JSON holds exactly
the numbers it plots (raw units), for tests and for anyone who wants the data.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from perfkit import __version__
from perfkit.docs_site import finding_url
from perfkit.files import atomic_write_text
from perfkit.report import flame_embed
from perfkit.report.charts import Chart, color_of
from perfkit.report.report_inputs import InMemory, ReportInput, inputs_from_results, load_inputs
from perfkit.report.resource_charts import cpu_charts, frag_chart, gpu_chart, kv_chart
from perfkit.report.sweep_charts import distribution_charts, load_charts, sweeps_of
from perfkit.report.tables import SHARING, SHARING_TITLE, rows, shared
from perfkit.report.tail_view import tail_view

CSS = """
:root{color-scheme:light}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#24292f;
 background:#f6f8fa;margin:0}
main{max-width:820px;margin:0 auto;padding:16px 20px 48px}
h1{font-size:22px;margin:8px 0 4px}h2{font-size:17px;margin:28px 0 8px;
 border-bottom:1px solid #d0d7de;padding-bottom:4px}h3{font-size:14px;margin:0 0 6px}
figure.chart{background:#fff;border:1px solid #d0d7de;border-radius:6px;margin:12px 0;
 padding:12px 12px 8px}
figure.chart svg{display:block;max-width:100%;height:auto}
figcaption,.note{color:#57606a;font-size:12.5px;margin-top:4px}
iframe.flame{display:block;width:100%;border:0;margin:6px 0 10px}
table{border-collapse:collapse;font-size:13px;background:#fff}
td,th{border:1px solid #d0d7de;padding:3px 8px;text-align:left;vertical-align:top}
.swatch{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:6px}
.sev{font-weight:600;text-transform:uppercase;font-size:11px;padding:1px 5px;border-radius:3px;
 margin-right:6px}.sev-warning,.sev-error{background:#fff1e5;color:#953800}
.sev-info{background:#ddf4ff;color:#0969da}.sev-critical{background:#ffebe9;color:#cf222e}
table.tail{margin:8px 0}a.finding{color:inherit}
li{margin:6px 0}details{font-size:12px;color:#57606a}pre{white-space:pre-wrap;margin:2px 0}
"""


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def figure(chart_id: str, title: str, body: str, data: dict[str, Any], caption: str) -> str:
    attr = _esc(json.dumps(data, separators=(",", ":"), allow_nan=False))
    note = f"<figcaption>{_esc(caption)}</figcaption>" if caption else ""
    return (f'<figure class="chart" id="chart-{_esc(chart_id)}" data-chart="{attr}">'
            f"<h3>{_esc(title)}</h3>{body}{note}</figure>")


def chart_figure(chart: Chart) -> str:
    return figure(chart.id, chart.title, chart.svg, chart.data, chart.caption)


def _describe(inp: ReportInput) -> str:
    if inp.sweep is not None:
        result, env = inp.sweep, inp.sweep.environment
        knee = (result.knee.sentence if result.knee else "") or "no knee found"
        done = "" if result.complete else " (incomplete: interrupted)"
        return (f"{len(result.levels)} levels on {_esc(env.get('device_class', '?'))}, "
                f"perfkit {_esc(env.get('perfkit', '?'))}{done}. {_esc(knee)}")
    doc = inp.frag or {}
    budget = doc.get("budget") or {}
    rec = doc.get("recommendation") or {}
    advice = f" Block size {rec['block_size']}: {rec.get('reason', '')}." if rec.get(
        "block_size") else ""
    return (f"{len(doc['policies'])} policies on {_esc(budget.get('slots', '?'))} token "
            f"slots.{_esc(advice)}")


def inputs_table(inputs: Sequence[ReportInput]) -> str:
    rows = []
    for i, inp in enumerate(inputs):
        name, sha = inp.profile
        rows.append(f'<tr><td><span class="swatch" style="background:{color_of(i)}"></span>'
                    f"{_esc(inp.label)}</td><td>{inp.kind}</td>"
                    f"<td>{_esc(name)} <code>{_esc(sha[:12])}</code></td>"
                    f"<td>{_describe(inp)}</td></tr>")
    return ("<table><tr><th>input</th><th>kind</th><th>profile</th><th>summary</th></tr>"
            + "".join(rows) + "</table>")


def sharing_html(inputs: Sequence[ReportInput]) -> str:
    """The Sharing table (report/tables.py) of every sweep whose requests asked for
    several outputs or shared blocks; '' when none did."""
    parts = []
    many = sum(inp.kind == "sweep" for inp in inputs) > 1
    for inp in inputs:
        if inp.sweep is None or not any(shared(lv) for lv in inp.sweep.levels):
            continue
        headers, body = rows(inp.sweep, SHARING)
        head = "".join(f"<th>{_esc(h.replace(chr(10), ' '))}</th>" for h in headers)
        cells = "".join("<tr>" + "".join(f"<td>{_esc(c)}</td>" for c in r) + "</tr>"
                        for r in body)
        parts.append((f"<h3>{_esc(inp.label)}</h3>" if many else "")
                     + f"<table><tr>{head}</tr>{cells}</table>")
    return "".join(parts) + ('<p class="note">' + _esc(SHARING_TITLE) + "</p>" if parts else "")


def findings_html(inputs: Sequence[ReportInput]) -> str:
    parts = []
    many = sum(inp.kind == "sweep" for inp in inputs) > 1
    for inp in inputs:
        if inp.sweep is None:
            continue
        items = []
        for f in inp.sweep.findings:
            sev = _esc(f.severity)
            evidence = _esc(json.dumps(f.evidence, indent=1))
            items.append(f'<li><span class="sev sev-{sev}">{sev}</span>'
                         f'<a class="finding" href="{_esc(finding_url(f.id))}">'
                         f"<b>{_esc(f.id)}</b></a>: {_esc(f.message)}"
                         f"<br><i>Fix:</i> {_esc(f.fix)}"
                         f"<details><summary>evidence</summary><pre>{evidence}</pre>"
                         "</details></li>")
        head = f"<h3>{_esc(inp.label)}</h3>" if many else ""
        parts.append(head + (f"<ul>{''.join(items)}</ul>" if items
                             else '<p class="note">No findings.</p>'))
    return "".join(parts)


def _section(anchor: str, title: str, body: str) -> str:
    return f'<section id="{anchor}"><h2>{_esc(title)}</h2>{body}</section>'


def _flame_section(inputs: Sequence[ReportInput], flame: str | None,
                   search_dirs: Sequence[Path]) -> str:
    items = flame_embed.flames(sweeps_of(inputs), flame, search_dirs)
    if not items:
        return '<p class="note">No level was recorded with stacks (perfkit sweep --stacks).</p>'
    key = items[0].key
    body = "".join(f"<h3>{_esc(f.label)}</h3>" * (len(items) > 1) + flame_embed.iframe(f)
                   for f in items)
    return figure("flame-graph", f"Flame graph, level {key}", body, flame_embed.flame_data(items),
                  "Where the process spent its time at this level (hover a frame for its "
                  "samples). Choose another level with --flame.")


def _tail_section(inputs: Sequence[ReportInput], flame: str | None,
                  search_dirs: Sequence[Path]) -> str:
    """The chosen level's tail view: the flame graph's level, else the knee's."""
    sweeps = sweeps_of(inputs)
    key = flame_embed.choose_key(sweeps, flame)
    body, data = tail_view(sweeps, key, search_dirs)
    if not data:
        return body
    return figure("tail-view", f"Tail view, level {data[0]['level']}", body,
                  {"kind": "tail", "inputs": data},
                  "The p99 requests against the median ones at this level, and the engine "
                  "steps slower than p99 against the median steps. Choose the level with "
                  "--flame.")


def charts_of(inputs: Sequence[ReportInput]) -> list[tuple[str, str, list[Chart]]]:
    """(anchor, section title, charts) in page order; sections without data left out."""
    sweeps = sweeps_of(inputs)
    out: list[tuple[str, str, list[Chart]]] = []
    if sweeps:
        out += [("load", "Throughput and latency", load_charts(sweeps)),
                ("distributions", "Latency distributions", distribution_charts(sweeps)),
                ("kv", "KV cache", [kv_chart(sweeps)]),
                ("cpu", "CPU", cpu_charts(sweeps)),
                ("gpu", "GPU memory", [gpu_chart(sweeps)])]
    if any(inp.kind == "fragmentation" for inp in inputs):
        out.append(("fragmentation", "KV fragmentation", [frag_chart(inputs)]))
    return out


def render_html(inputs: Sequence[ReportInput], flame: str | None = None,
                search_dirs: Sequence[Path] = ()) -> str:
    """The whole page. Raises PerfkitError for an unknown --flame level."""
    flame_html = _flame_section(inputs, flame, search_dirs) if sweeps_of(inputs) else ""
    sections = [_section("inputs", "Inputs", inputs_table(inputs))]
    for anchor, title, charts in charts_of(inputs):
        body = "".join(chart_figure(c) for c in charts)
        if anchor == "kv":
            body += sharing_html(inputs)
        sections.append(_section(anchor, title, body))
    if sweeps_of(inputs):
        sections.append(_section("findings", "Findings", findings_html(inputs)))
        sections.append(_section("flame", "Flame graph", flame_html))
        sections.append(_section("tail", "Why is p99 high?",
                                 _tail_section(inputs, flame, search_dirs)))
    title = "perfkit report: " + ", ".join(inp.label for inp in inputs)
    return ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{_esc(title)}</title><style>{CSS}</style></head><body><main>"
            f"<h1>{_esc(title)}</h1><p class=\"note\">perfkit {_esc(__version__)}; "
            "self-contained: no scripts, nothing loaded from the network.</p>"
            + "".join(sections) + "</main></body></html>\n")


def write_report(results: Sequence[InMemory], out_path: Path,
                 labels: Sequence[str] | None = None, flame_level: str | None = None) -> Path:
    """Report on results already in memory (perfkit sweep --report: SweepResults;
    fragmentation results as their documents); relative stack paths also resolve
    against the report's folder. Written atomically."""
    inputs = inputs_from_results(results, labels)
    atomic_write_text(out_path, render_html(inputs, flame_level, [out_path.parent]))
    return out_path


def write_report_files(paths: Sequence[Path], out_path: Path,
                       labels: Sequence[str] | None = None, flame_level: str | None = None
                       ) -> Path:
    """Report on result files (perfkit report)."""
    inputs = load_inputs(paths, labels)
    atomic_write_text(out_path, render_html(inputs, flame_level, [out_path.parent]))
    return out_path
