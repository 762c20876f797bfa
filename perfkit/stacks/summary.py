"""Terminal summary of one stack recording: where the time went, without the SVG.

Three small tables from the folded stacks: time by perfkit component, top
functions by self time (leaf), top functions by inclusive time (anywhere on
the stack); then the files. Shares are of all stack samples in the window.
"""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from perfkit.stacks.folded import Folded, FrameShare, has_perfkit_frames, summarize

BAR_WIDTH = 20


def _bar(share: float) -> str:
    full = round(share * BAR_WIDTH)
    return "█" * full + "·" * (BAR_WIDTH - full)


def _table(title: str, rows: list[FrameShare], first: str, bar: bool = False) -> Table:
    table = Table(title=title, title_justify="left", box=None, pad_edge=False)
    table.add_column("share", justify="right")
    table.add_column("samples", justify="right")
    if bar:
        table.add_column("")
    table.add_column(first, overflow="fold")
    for row in rows:
        cells = [f"{row.share * 100:5.1f}%", str(row.samples)]
        table.add_row(*cells, *([_bar(row.share)] if bar else []), row.frame)
    return table


def stacks_tables(stacks: Folded, top: int = 8) -> list[Table]:
    """Component table only when perfkit code ran (a foreign program has none)."""
    summary = summarize(stacks, top)
    tables = [
        _table("top functions by self time", summary.top_self, "function"),
        _table("top functions by inclusive time", summary.top_inclusive, "function"),
    ]
    if has_perfkit_frames(stacks):
        tables.insert(0, _table("time by perfkit component", summary.components,
                                "component", bar=True))
    return tables


def headline(recording: Any) -> Text:
    rate = f"{recording.rate_hz:g} Hz"
    native = ", native frames" if recording.native else ""
    return Text(
        f"stacks: {recording.num_samples} samples in {recording.duration_s:.1f} s at {rate} "
        f"({recording.sampler_used}{native})", style="bold")


def files_line(recording: Any) -> Text:
    paths = [p for p in (recording.folded_path, recording.svg_path, recording.speedscope_path,
                         getattr(recording, "offcpu_folded_path", None)) if p is not None]
    return Text("files: " + "  ".join(str(p) for p in paths), style="dim")


def summary_renderable(recording: Any, top: int = 8) -> Group:
    """A StackRecording -> headline, the three tables, the file paths.
    (Typed loosely so the report layer does not import the measuring layer.)"""
    if recording.num_samples == 0:
        return Group(headline(recording), Text("no samples: nothing ran on the CPU in Python "
                                               "during the window"), files_line(recording))
    parts: list[Any] = [headline(recording)]
    for table in stacks_tables(recording.stacks, top):
        parts += [Text(""), table]
    tail = getattr(recording, "tail", None)
    if tail is not None:
        parts += [Text(""), tail_lines(tail)]
    parts += [Text(""), offcpu_lines(recording), Text(""), files_line(recording)]
    return Group(*parts)


def tail_lines(tail: Any, top: int = 3) -> Text:
    """A TailStacksInfo -> the frames that grow most from the median steps to the tail."""
    head = (f"tail stacks: {tail.num_tail_steps} steps > p99 ({tail.step_p99_s * 1e3:.2f} ms), "
            f"{tail.num_tail_samples} samples, vs {tail.num_median_samples} in "
            f"{tail.num_median_steps} median steps")
    if not tail.num_tail_samples:
        return Text(head + "; no sample fell in a tail step: raise --stack-rate (no "
                    "tail.folded written)")
    if not tail.growing:
        return Text(head + "; no frame grows in the tail")
    rows = [f"  {g.tail_share:6.1%} tail vs {g.median_share:6.1%} median  {g.frame}"
            for g in tail.growing[:top]]
    return Text("\n".join([head + "; growing in the tail:", *rows,
                           f"  diff: {tail.diff_svg_path}"]))


def offcpu_lines(recording: Any, top: int = 3) -> Text:
    """Where threads waited (off-CPU samples by leaf function), or why that is unknown."""
    reason = getattr(recording, "offcpu_reason", "")
    if reason:
        return Text(f"off-CPU stacks unavailable: {reason}", style="dim")
    timed = getattr(recording, "timed", None)
    waits = summarize(dict(timed.offcpu) if timed is not None else {}, top)
    if not waits.total:
        return Text("off-CPU: no thread waited at a tick")
    rows = [f"  {r.share:6.1%}  {r.frame}" for r in waits.top_self]
    return Text("\n".join([f"off-CPU: {waits.total} samples of waiting threads; waiting in:",
                           *rows]))


def kernels_renderable(profile: Any) -> Table | Text:
    """A KernelProfile (torch.profiler on CUDA) -> top kernels by device time."""
    if not profile.available:
        return Text(f"kernels: {profile.reason}", style="dim")
    table = Table(title="top CUDA kernels by device time", title_justify="left", box=None,
                  pad_edge=False)
    for col, justify in (("share", "right"), ("device ms", "right"), ("calls", "right"),
                         ("kernel", "left")):
        table.add_column(col, justify=justify, overflow="fold")  # type: ignore[arg-type]
    for row in profile.rows:
        table.add_row(f"{row.share * 100:5.1f}%", f"{row.device_time_us / 1e3:.2f}",
                      str(row.calls), row.name)
    return table
