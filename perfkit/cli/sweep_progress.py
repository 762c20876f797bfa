"""The sweep's terminal companion: a progress bar per level with the running tok/s
estimate, stack summaries, the server profile's outcome and warnings on stderr
(perfkit.run.SweepEvents)."""

from __future__ import annotations

import time
from typing import Any

from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from perfkit.cli.common import err_console
from perfkit.records import RequestRecord
from perfkit.result.level import LevelResult, LoadPoint
from perfkit.sweep.plan import SweepPlan


class ProgressEvents:
    """Use as a context manager around run_sweep; `quiet` shows warnings only."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.bar = Progress(TextColumn("{task.description}"), BarColumn(),
                            TextColumn("{task.fields[est]}"), TimeElapsedColumn(),
                            console=err_console, disable=quiet, transient=True)
        self._task: TaskID | None = None
        self._start = 0.0
        self._tokens = 0

    def __enter__(self) -> ProgressEvents:
        self.bar.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.__exit__(None, None, None)

    def level_started(self, index: int, total: int, point: LoadPoint, repeat: int,
                      plan: SweepPlan) -> None:
        rep = f" (repeat {repeat + 1}/{plan.repeats})" if plan.repeats > 1 else ""
        count = f"{index + 1}/{total}" if total else f"search {index + 1}"
        self._task = self.bar.add_task(f"[{count}] {point.label}{rep}",
                                       total=plan.num_requests + plan.num_warmup, est="")
        self._start, self._tokens = time.perf_counter(), 0

    def request_done(self, record: RequestRecord) -> None:
        self._tokens += record.output_tokens
        rate = self._tokens / max(time.perf_counter() - self._start, 1e-9)
        if self._task is not None:
            self.bar.update(self._task, advance=1, est=f"~{rate:.0f} tok/s")

    def level_done(self, level: LevelResult, recording: Any | None, kernels: Any | None
                   ) -> None:
        if self._task is not None:
            self.bar.remove_task(self._task)
            self._task = None
        client = level.client
        if client is not None and not self.quiet and (client.workers > 1 or client.lost
                                                      or client.workers_chosen.startswith("a")):
            lost = f", {len(client.lost)} lost" if client.lost else ""
            err_console.print(f"load generator, {level.point.label}: {client.workers} "
                              f"worker(s){lost} ({client.workers_chosen})", soft_wrap=True,
                              highlight=False)
        prof = level.server_profile
        if prof is not None:  # --server-profile: where the trace went, or why none
            line = f"server profile, {level.point.label}: {prof.message}"
            err_console.print(line if prof.written else f"[yellow]warning:[/] {line}",
                              soft_wrap=True, highlight=False)
        if recording is None:
            return
        from perfkit.stacks.summary import kernels_renderable, summary_renderable

        if recording.warning:
            err_console.print(f"[yellow]warning:[/] {recording.warning}", soft_wrap=True)
        if not self.quiet:
            err_console.print(summary_renderable(recording))
            if kernels is not None and kernels.available:
                err_console.print(kernels_renderable(kernels))
