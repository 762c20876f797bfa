"""Renderers of a sweep result: rich table, Markdown, CSV (JSON is the document itself).

All read the same document; none decorates machine output.
"""

from __future__ import annotations

import csv
import io
from typing import Any

from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1e3:.1f}"


def _num(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _level(lv: dict[str, Any]) -> str:
    rep = f" #{lv['repeat']}" if lv.get("repeat") else ""
    return (f"c={lv['concurrency']}" if lv["rate"] is None else f"{lv['rate']:g}/s") + rep


def _gpu(lv: dict[str, Any]) -> str:
    gpu = lv["gpu"]
    return f"{gpu['peak_used_bytes'] / 2**30:.1f} GiB" if gpu.get("available") else "n/a"


def _kv_peak(lv: dict[str, Any]) -> str:
    """Blocks in-process; a remote server's scraped usage share (or n/a without scraping)."""
    kv = lv["kv"]
    if "usage_peak" in kv:
        return "n/a" if kv["usage_peak"] is None else f"{kv['usage_peak']:.0%}"
    return f"{kv['peak_blocks_used']}/{kv['blocks_total']}"


def _faults(lv: dict[str, Any]) -> str:
    return f"{lv['cpu']['num_minor_faults'] / max(lv['counts']['steps'], 1):.0f}"


# (header, getter) per table. Timings are noisy; counts are deterministic for profile + seed.
TIMINGS: list[tuple[str, Any]] = [
    ("level", _level),
    ("req/s", lambda lv: _num(lv["throughput"]["requests_per_s"], 2)),
    ("out\ntok/s", lambda lv: _num(lv["throughput"]["output_tokens_per_s"])),
    ("TTFT\np50 ms", lambda lv: _ms(lv["latency"]["ttft"]["p50"])),
    ("TTFT\np99 ms", lambda lv: _ms(lv["latency"]["ttft"]["p99"])),
    ("TPOT\np50 ms", lambda lv: _ms(lv["latency"]["tpot"]["p50"])),
    ("TPOT\np99 ms", lambda lv: _ms(lv["latency"]["tpot"]["p99"])),
    ("E2E\np99 s", lambda lv: _num(lv["latency"]["e2e"]["p99"], 2)),
    ("goodput", lambda lv: _num((lv["goodput"]["share"] or 0) * 100, 0) + "%"),
]
RESOURCES: list[tuple[str, Any]] = [
    ("level", _level),
    ("user\ns", lambda lv: _num(lv["cpu"]["user_s"], 2)),
    ("sys\ns", lambda lv: _num(lv["cpu"]["system_s"], 2)),
    ("sys\nshare", lambda lv: f"{lv['cpu']['system_share']:.1%}"),
    ("faults\n/step", _faults),
    ("invol.\nctx sw", lambda lv: str(lv["cpu"]["num_involuntary_ctx_switches"])),
    ("runq\nwait s", lambda lv: _num(lv["cpu"].get("run_queue_wait_s"), 2)),
    ("GC max\nms", lambda lv: _ms(lv["gc"].get("max_s"))),
    ("GPU\npeak", _gpu),
]
COUNTS: list[tuple[str, Any]] = [
    ("level", _level),
    ("reqs", lambda lv: str(lv["counts"]["requests"])),
    ("out\ntokens", lambda lv: str(lv["counts"]["output_tokens"])),
    ("rej.", lambda lv: str(sum(lv["counts"]["rejected"].values()))),
    ("pre-\nempt", lambda lv: str(lv["counts"]["preemptions"])),
    ("KV peak\nblocks", lambda lv: _kv_peak(lv)),
    ("KV peak\nslots", lambda lv: str(lv["kv"]["peak_slots_used"])),
    ("prefix\nhit", lambda lv: f"{lv['prefix_hit_rate']:.0%}"),
    ("steps", lambda lv: str(lv["counts"]["steps"])),
]
def _ended(reason: str) -> Any:
    return lambda lv: str(lv.get("guard", {}).get("counts", {}).get("ended", {}).get(reason, 0))


GUARD: list[tuple[str, Any]] = [
    ("level", _level),
    ("tool\ncalls", lambda lv: str(lv["guard"]["counts"]["tool_calls"])),
    ("invalid\ncalls", lambda lv: str(lv["guard"]["counts"]["invalid_tool_calls"])),
    ("ended\nstop", _ended("stop")),
    ("ended\nloop", _ended("loop")),
    ("ended\nlength", _ended("length")),
    ("guard\nµs/step", lambda lv: _num(lv["guard"]["timing"]["us_per_step"], 0)),
]
TABLES = [("Timings (noisy)", TIMINGS), ("CPU, GC, GPU (noisy)", RESOURCES),
          ("Counts (deterministic)", COUNTS)]


CLIENT: list[tuple[str, Any]] = [
    ("level", _level),
    ("errors", lambda lv: str(lv["errors"]["total"])),
    ("client\nCPU", lambda lv: f"{lv['client']['cpu_share']:.0%}"),
    ("CPU ms\n/request", lambda lv: _ms(lv["client"]["cpu_per_request_s"])),
    ("loop lag\np99 ms", lambda lv: _ms(lv["client"]["loop_lag"].get("p99"))),
]


def _tables(doc: dict[str, Any]) -> list[tuple[str, list[tuple[str, Any]]]]:
    """The guard table when some level ran tool calls or cut a loop; the client table
    for a remote target."""
    levels = doc["levels"]
    tables = list(TABLES)
    if any(lv.get("guard", {}).get("counts", {}).get("tool_calls")
           or lv.get("guard", {}).get("counts", {}).get("ended", {}).get("loop")
           for lv in levels):
        tables.append(("Guard (counts; µs/step is a timing)", GUARD))
    if any("client" in lv for lv in levels):
        tables.append(("Remote target: errors (count) and load-generator cost (noisy)", CLIENT))
    return tables


def rows(doc: dict[str, Any], columns: list[tuple[str, Any]]) -> tuple[list[str], list[list[str]]]:
    headers = [h for h, _ in columns]
    return headers, [[get(lv) for _, get in columns] for lv in doc["levels"]]


def _table(doc: dict[str, Any], title: str, columns: list[tuple[str, Any]]) -> Table:
    headers, body = rows(doc, columns)
    table = Table(title=title, title_justify="left", title_style="bold", box=box.SIMPLE_HEAD,
                  pad_edge=False)
    for h in headers:
        table.add_column(h, justify="left" if h == "level" else "right", no_wrap=True)
    for row in body:
        table.add_row(*row)
    return table


def rich_summary(doc: dict[str, Any]) -> Group:
    parts: list[Any] = [Text(f"perfkit sweep: {doc['profile']['name']}", style="bold")]
    parts += [_table(doc, title, cols) for title, cols in _tables(doc)]
    if doc.get("knee"):
        parts.append(Text(f"Knee: {doc['knee']['sentence']}"))
    for f in doc.get("findings", []):
        style = "yellow" if f["severity"] == "warning" else "cyan"
        parts.append(Text.assemble((f"[{f['severity']}] {f['id']}: ", style), f["message"],
                                   ("\n  fix: " + f["fix"], "dim")))
    if not doc.get("findings"):
        parts.append(Text("No findings.", style="green"))
    return Group(*parts)


def markdown(doc: dict[str, Any]) -> str:
    out = [f"## perfkit sweep: {doc['profile']['name']}"]
    for title, cols in _tables(doc):
        headers, body = rows(doc, cols)
        headers = [h.replace("\n", " ") for h in headers]
        out += ["", f"### {title}", "", "| " + " | ".join(headers) + " |",
                "|" + "---|" * len(headers)]
        out += ["| " + " | ".join(r) + " |" for r in body]
    if doc.get("knee"):
        out += ["", f"**Knee:** {doc['knee']['sentence']}"]
    for f in doc.get("findings", []):
        out += [f"- **{f['severity']}** `{f['id']}`: {f['message']} _Fix:_ {f['fix']}"]
    return "\n".join(out) + "\n"


def csv_text(doc: dict[str, Any]) -> str:
    """One row per level in base units (seconds, per second), for spreadsheets."""
    buf = io.StringIO()
    writer = csv.writer(buf)
    stats = ("p50", "p90", "p99", "max", "mean", "stddev")
    header = ["concurrency", "rate", "repeat", "requests_per_s", "output_tokens_per_s",
              "goodput_share"]
    header += [f"{m}_{s}_s" for m in ("ttft", "tpot", "itl", "e2e") for s in stats]
    header += ["preemptions", "peak_blocks_used", "blocks_total", "prefix_hit_rate",
               "user_s", "system_s", "minor_faults"]
    writer.writerow(header)
    for lv in doc["levels"]:
        lat, cpu = lv["latency"], lv["cpu"]
        writer.writerow(
            [lv["concurrency"], lv["rate"], lv["repeat"], lv["throughput"]["requests_per_s"],
             lv["throughput"]["output_tokens_per_s"], lv["goodput"]["share"]]
            + [lat[m][s] for m in ("ttft", "tpot", "itl", "e2e") for s in stats]
            + [lv["counts"]["preemptions"], lv["kv"]["peak_blocks_used"],
               lv["kv"]["blocks_total"], lv["prefix_hit_rate"], cpu["user_s"],
               cpu["system_s"], cpu["num_minor_faults"]]
        )
    return buf.getvalue()
