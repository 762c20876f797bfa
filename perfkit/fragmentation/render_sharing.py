"""The fragmentation report's sharing part, for requests with several outputs: per paged
policy the blocks shared and saved and the memory saving, beside the PagedAttention
paper's Fig. 15 range (an alpaca- or sharegpt-named profile on the OPT-13B shape).
"""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from perfkit.fragmentation.groups import group_kind, paper_range
from perfkit.fragmentation.judgement import profile_policy
from perfkit.fragmentation.policies import FragReport
from perfkit.fragmentation.types import PolicyResult
from perfkit.replay.trace import Trace


def mean_outputs(trace: Trace) -> float:
    n = trace.num_requests
    return sum(trace.width(i) for i in range(n)) / n if n else 0.0


def _mean(total: int, p: PolicyResult) -> str:
    return f"{total / p.num_steps:,.1f}" if p.num_steps else "-"


def sharing_table(policies: list[PolicyResult]) -> Table:
    table = Table(title="sharing (blocks in several tables; saved = table entries beyond the "
                  "used blocks; saving = saved / needed without sharing)",
                  title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False,
                  padding=(0, 0, 0, 1))
    for head in ("policy", "shared", "peak", "saved", "peak", "CoW", "saving"):
        table.add_column(head, justify="left" if head == "policy" else "right", no_wrap=True)
    for p in policies:
        if p.kind != "paged":
            continue
        saving = p.memory_saving
        table.add_row(p.name, _mean(p.shared_block_steps, p), f"{p.peak_shared_blocks:,}",
                      _mean(p.saved_block_steps, p), f"{p.peak_saved_blocks:,}",
                      "-" if p.copy_on_writes is None else f"{p.copy_on_writes:,}",
                      "-" if saving is None else f"{saving:.1%}")
    return table


def paper_line(rep: FragReport) -> Text | None:
    """The profile's block size's saving beside Fig. 15's range, when there is one."""
    found = paper_range(rep.profile, rep.trace)
    if found is None:
        return None
    what, (low, high) = found
    p = profile_policy(rep)
    saving = p.memory_saving or 0.0
    where = "inside" if low <= saving <= high else \
        f"{(low - saving if saving < low else saving - high) * 100:.1f} points outside"
    return Text(f"PagedAttention paper, Fig. 15 (OPT-13B, {what}, widths 2-6): memory saving "
                f"{low:.1%}-{high:.1%}; {p.name} here {saving:.1%} at {mean_outputs(rep.trace):g} "
                f"outputs per request ({where}).", style="dim")


def render_sharing(rep: FragReport, policies: list[PolicyResult]) -> RenderableType | None:
    kind = group_kind(rep.trace)
    if kind is None:
        return None
    parts: list[RenderableType] = [sharing_table(policies)]
    parts.append(Text(f"{kind}: {mean_outputs(rep.trace):g} outputs per request on average; "
                      "contiguous policies reserve each output's whole length (counts of "
                      "outputs); paged ones share the prompt's blocks"
                      + (" and a beam's past, copying a shared block when written"
                         if kind == "beam search" else ", copying a shared block when written"),
                      style="dim"))
    line = paper_line(rep)
    if line is not None:
        parts.append(line)
    return Group(*parts)


def sharing_dict(rep: FragReport) -> dict[str, Any] | None:
    """JSON: what was shared, the profile's paged saving, and the paper's range."""
    kind = group_kind(rep.trace)
    if kind is None:
        return None
    found = paper_range(rep.profile, rep.trace)
    return {
        "kind": kind, "mean_outputs": mean_outputs(rep.trace),
        "memory_saving": profile_policy(rep).memory_saving,
        "paper_fig15": None if found is None else
        {"what": found[0], "low": found[1][0], "high": found[1][1]},
    }
