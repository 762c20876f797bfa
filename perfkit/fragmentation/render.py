"""Renderers of a fragmentation result: rich tables with bars, verdicts, JSON.

One result (`FragReport`, optionally with a `LiveReport`) feeds both. JSON keeps
counts (slot-steps, preemptions, ...) and the shares derived from them apart from
timings (`timings`: seconds, noisy), and is written atomically (temp + rename).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from perfkit.config.profile import profile_sha256
from perfkit.config.units import format_bytes
from perfkit.fragmentation.judgement import limiter, profile_policy, verdict
from perfkit.fragmentation.live import LiveReport
from perfkit.fragmentation.policies import FragReport
from perfkit.fragmentation.render_sharing import render_sharing, sharing_dict
from perfkit.fragmentation.types import KINDS, PolicyResult, Slots
from perfkit.replay.arrivals import ClosedLoop

SCHEMA = "perfkit.fragmentation/1"
BAR_WIDTH = 16
BAR_GLYPHS = {  # kind -> (glyph, style)
    "used": ("█", "green"), "reserved": ("▓", "yellow"), "internal": ("▒", "red"),
    "external": ("░", "magenta"), "free": ("·", "dim"),
}
# PagedAttention (SOSP 2023) Fig. 2, OPT-13B: share of KV memory holding token states.
PAPER_FIG2 = "reserve-max 20.4%, pow2 26.8%, oracle 38.2%, paged 96.3%"


def bar(shares: dict[str, float], width: int = BAR_WIDTH) -> Text:
    """A stacked bar, one glyph per kind; cells by largest remainder (it stays `width`
    long and a sliver of a kind gets no cell)."""
    exact = {kind: shares[kind] * width for kind in KINDS}
    cells = {kind: int(x) for kind, x in exact.items()}
    by_remainder = sorted(KINDS, key=lambda k: exact[k] - cells[k], reverse=True)
    for kind in by_remainder[: width - sum(cells.values())]:
        cells[kind] += 1
    text = Text()
    for kind in KINDS:
        glyph, style = BAR_GLYPHS[kind]
        text.append(glyph * cells[kind], style=style)
    return text


def _pct(x: float) -> str:
    return f"{x:.1%}"


SHORT = {"used": "used", "reserved": "resv", "internal": "intern", "external": "extern",
         "free": "free"}
LEGEND = ("tok/occ = share of occupied memory holding tokens; shares of the pool: used = "
          "token K/V, resv = allocated for tokens still to come, intern = allocated and never "
          "used, extern = free but in holes too small for the next request, free")


def _table(title: str) -> Table:
    return Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False,
                 pad_edge=False, padding=(0, 0, 0, 1))


def _policy_table(policies: list[PolicyResult]) -> Table:
    """Time-averaged shares with a stacked bar; fits 80 columns."""
    table = _table("time-averaged")
    for head in ("policy", "tok/occ", *(SHORT[k] for k in KINDS)):
        table.add_column(head, justify="left" if head == "policy" else "right", no_wrap=True)
    table.add_column("pool", no_wrap=True)
    for p in policies:
        shares = p.totals.shares()
        table.add_row(p.name, _pct(p.totals.used_of_occupied),
                      *(_pct(shares[k]) for k in KINDS), bar(shares))
    return table


def _requests_table(policies: list[PolicyResult]) -> Table:
    table = _table("requests (running = most at once; queued = waited for memory; "
                   "shared = blocks saved by sharing / pool blocks)")
    for head in ("policy", "pool slots", "running", "preempted", "queued", "rejected",
                 "shared"):
        table.add_column(head, justify="left" if head == "policy" else "right", no_wrap=True)
    for p in policies:
        saved = f"{p.shared_saving:.1%}" if p.kind == "paged" else "-"
        table.add_row(p.name, f"{p.pool_slots:,}", str(p.peak_sequences), f"{p.num_preempted:,}",
                      f"{p.num_queued_for_memory:,}", f"{p.num_rejected:,}", saved)
    return table


def _peak_table(policies: list[PolicyResult]) -> Table:
    table = _table("at the peak (the first step with the most memory occupied)")
    for head in ("policy", "step", "tok/occ", *(SHORT[k] for k in KINDS), "frag"):
        table.add_column(head, justify="left" if head == "policy" else "right", no_wrap=True)
    for p in policies:
        shares = p.peak.shares()
        table.add_row(p.name, str(p.peak_step), _pct(p.peak.used_of_occupied),
                      *(_pct(shares[k]) for k in KINDS),
                      _pct(p.free_gap_peak) if p.kind == "contiguous" else "-")
    return table


def _header(rep: FragReport) -> Text:
    prof, tr, b, cfg = rep.profile, rep.trace, rep.budget, rep.config
    model = prof.model.preset or "custom model"
    loop = tr.closed or ClosedLoop(1)  # read only for --arrivals closed
    arrivals = ("all waiting from step 0 (--arrivals saturate)" if cfg.arrivals == "saturate"
                else f"the profile's arrivals at {cfg.step_s * 1e3:g} ms per step"
                if cfg.arrivals == "profile" else
                f"{loop.clients} clients in a closed loop, each next request "
                f"{loop.delay} steps after the step of its answer + 1")
    n = tr.num_requests or 1
    return Text(
        f"perfkit fragmentation: {prof.name} · {model} · KV budget {format_bytes(b.bytes)} "
        f"({b.source}) = {b.slots:,} token slots of {format_bytes(b.kv_bytes_per_token)}\n"
        f"{tr.num_requests:,} requests (mean prompt {sum(tr.prompt_len) / n:.0f}, output "
        f"{sum(tr.max_tokens) / n:.0f} tokens), {arrivals}; FCFS, "
        f"max_num_seqs {prof.engine.max_num_seqs}, max_num_batched_tokens "
        f"{prof.engine.max_num_batched_tokens}, max_model_len {tr.max_model_len}; "
        "shares are of each policy's pool, averaged over the steps that ran a request"
    )


def _delay_range(rep: FragReport) -> str:
    p = profile_policy(rep)
    delay = rep.trace.closed.delay if rep.trace.closed else 0
    return (f"{p.name} preempts {p.num_preempted:,} times at {delay} steps, "
            f"{rep.no_delay_preemptions:,} with none; a front end that hands answers back "
            "in bursts lands between the two")


def render(rep: FragReport, live: LiveReport | None = None) -> RenderableType:
    parts: list[RenderableType] = [_header(rep), Text()]
    policies = list(rep.policies) + ([live.engine, *live.replays] if live else [])
    parts += [Text(LEGEND, style="dim"), _policy_table(policies), _requests_table(policies),
              _peak_table(policies),
              Text("frag = 1 - largest free run / free slots (contiguous)", style="dim"),
              Text()]
    sharing = render_sharing(rep, policies)
    if sharing is not None:
        parts += [sharing, Text()]
    verdicts = Text("verdicts\n", style="bold")
    for p in rep.policies:
        verdicts.append(f"  {p.name}: {verdict(p)}\n")
    parts.append(verdicts)
    rec = rep.recommendation
    parts.append(Text.assemble(("limited by: ", "bold"), f"{limiter(rep)[1]}."))
    if rep.no_delay_preemptions is not None:
        parts.append(Text.assemble(("client delay: ", "bold"), _delay_range(rep) + "."))
    parts.append(Text.assemble(("block size: ", "bold"), f"{rec.block_size} — {rec.reason}."))
    if rep.profile.model.preset == "opt-13b":
        parts.append(Text(f"PagedAttention paper, Fig. 2 (OPT-13B), tokens/occupied: "
                          f"{PAPER_FIG2}.", style="dim"))
    if live is not None:
        parts += [Text(), render_live(live)]
    procs = f"{rep.num_procs} process" + ("es" if rep.num_procs > 1 else "")
    parts.append(Text(f"replayed in {rep.total_s:.2f} s wall "
                      f"({sum(rep.policy_cpu_s.values()):.2f} s CPU in {procs})", style="dim"))
    return Group(*parts)


def _series(values: list[int]) -> str:
    if not values:
        return "-"
    return f"mean {sum(values) / len(values):,.1f}, min {min(values):,}, max {max(values):,}"


def render_live(live: LiveReport) -> RenderableType:
    eng, c, m = live.engine, live.counters, live.memory
    blocks = [b for b, _ in eng.timeline]
    slots = [s for _, s in eng.timeline]
    free = [(eng.num_blocks or 0) - b for b in blocks]
    table = Table(title=f"engine BlockPool over {eng.num_steps} steps "
                  f"({eng.num_blocks} blocks of {eng.block_size})", title_justify="left",
                  show_header=False, show_edge=False, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    lookups = c.hits + c.misses
    rows = [
        ("blocks used", _series(blocks)), ("token slots used", _series(slots)),
        ("blocks free", _series(free)), ("blocks cached, free", _series(live.cached_free)),
        ("prefix hits", f"{c.hits:,} of {lookups:,} block lookups"
         + (f" ({c.hits / lookups:.0%})" if lookups else "")),
        ("counters", f"allocations {c.allocations:,}, frees {c.frees:,}, evictions "
         f"{c.evictions:,}, copy-on-writes {c.copy_on_writes:,}, preemptions "
         f"{eng.num_preempted:,}"),
        ("memory", _memory_line(live)),
    ]
    for a in live.agreements:
        rows.append((f"vs {a.name}", f"{a.num_equal}/{a.num_steps} steps agree "
                     f"(blocks and slots used; replay ran {a.num_replay_steps} steps)"
                     + ("" if a.exact else _divergence_hint(a.name))))
    for key, value in rows:
        table.add_row(key, value)
    return Group(table, Text(f"engine run: {live.wall_s:.2f} s on {m.device}", style="dim"))


def _divergence_hint(name: str) -> str:
    if "fast" in name:
        return ("; the fast replay caches only the workload's shared prefixes, so a "
                "preempted request that hits its own cached blocks in the engine shifts its "
                "steps: set engine.prefix_caching=false to compare step for step")
    return ("; the engine and the scheduler replay should agree (but for beam search, whose "
            "beams the model keeps and drops in the engine and a synthetic distribution in "
            "the replay): please report this")


def _memory_line(live: LiveReport) -> str:
    m = live.memory
    if m.cuda_reserved_bytes is not None:
        return (f"CUDA reserved {format_bytes(m.cuda_reserved_bytes)}, allocated "
                f"{format_bytes(m.cuda_allocated_bytes or 0)}, inactive split "
                f"{format_bytes(m.cuda_inactive_split_bytes or 0)}, peak reserved "
                f"{format_bytes(m.cuda_peak_reserved_bytes or 0)}")
    return f"process RSS peak {format_bytes(m.rss_peak_bytes)}, end {format_bytes(m.rss_end_bytes)}"


# -- JSON ------------------------------------------------------------------------------
def _slots(s: Slots) -> dict[str, Any]:
    return {**s.shares(), "used_of_occupied": s.used_of_occupied}


def policy_dict(p: PolicyResult) -> dict[str, Any]:
    """Shares of the pool (time-averaged at the top level), counts, and raw slot-steps."""
    out: dict[str, Any] = {"name": p.name, "kind": p.kind}
    if p.block_size is not None:
        out["block_size"] = p.block_size
    out.update(_slots(p.totals))
    out.update(
        peak={**_slots(p.peak), "step": p.peak_step, "free_run_gap": p.free_gap_peak},
        free_run_gap=p.mean_free_gap, shared_saving=p.shared_saving,
        shared_saving_blocks={"mean": p.mean_saved_blocks, "peak": p.peak_saved_blocks},
        memory_saving=p.memory_saving,
        shared_blocks={"mean": p.shared_block_steps / p.num_steps if p.num_steps else 0.0,
                       "peak": p.peak_shared_blocks},
        copy_on_writes=p.copy_on_writes,
        peak_sequences=p.peak_sequences, pool_slots=p.pool_slots, num_blocks=p.num_blocks,
        steps=p.num_steps, finished=p.num_finished, rejected=p.num_rejected,
        preempted=p.num_preempted, queued_for_memory=p.num_queued_for_memory,
        queued_for_seqs=p.num_queued_for_seqs, queued_for_budget=p.num_queued_for_budget,
        slot_steps={k: getattr(p.totals, k) for k in KINDS},
    )
    return out


def _live_dict(live: LiveReport) -> dict[str, Any]:
    m = live.memory
    return {
        "engine": policy_dict(live.engine),
        "replays": [policy_dict(r) for r in live.replays],
        "agreement": [{"replay": a.name, "steps": a.num_steps,
                       "replay_steps": a.num_replay_steps, "equal_steps": a.num_equal,
                       "exact": a.exact} for a in live.agreements],
        "counters": vars(live.counters),
        "timeline": [{"blocks_used": b, "slots_used": s, "blocks_cached_free": c}
                     for (b, s), c in zip(live.engine.timeline, live.cached_free)],
        "memory": vars(m),
    }


def to_dict(rep: FragReport, live: LiveReport | None = None) -> dict[str, Any]:
    prof, tr, b, cfg = rep.profile, rep.trace, rep.budget, rep.config
    n = tr.num_requests or 1
    return {
        "schema": SCHEMA,
        "profile": {"name": prof.name, "sha256": profile_sha256(prof),
                    "model": prof.model.preset},
        "budget": {"bytes": b.bytes, "source": b.source, "slots": b.slots,
                   "kv_bytes_per_token": b.kv_bytes_per_token},
        "trace": {"requests": tr.num_requests, "arrivals": cfg.arrivals,
                  "step_s": cfg.step_s, "mean_prompt": sum(tr.prompt_len) / n,
                  "mean_output": sum(tr.max_tokens) / n, "max_model_len": tr.max_model_len,
                  "max_num_seqs": prof.engine.max_num_seqs,
                  "max_num_batched_tokens": prof.engine.max_num_batched_tokens,
                  "clients": tr.closed.clients if tr.closed else None,
                  "client_delay_steps": tr.closed.delay if tr.closed else 0,
                  "no_delay_preemptions": rep.no_delay_preemptions},
        "policies": [policy_dict(p) for p in rep.policies],
        "sharing": sharing_dict(rep),
        "verdicts": {p.name: verdict(p) for p in rep.policies},
        "limited_by": dict(zip(("kind", "reason"), limiter(rep), strict=True)),
        "recommendation": {"block_size": rep.recommendation.block_size,
                           "reason": rep.recommendation.reason},
        "live": _live_dict(live) if live is not None else None,
        "timings": {"total_s": rep.total_s, "policy_cpu_s": rep.policy_cpu_s,
                    "processes": rep.num_procs, "live_wall_s": live.wall_s if live else None},
    }


def write_json(path: Path, doc: dict[str, Any]) -> None:
    """Write atomically (perfkit.files: temp file in the same folder, then rename)."""
    from perfkit.files import atomic_write_text

    atomic_write_text(path, json.dumps(doc, indent=2) + "\n")
