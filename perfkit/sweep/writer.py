"""The sweep result, rewritten atomically after every level: an interrupted sweep keeps
every level it measured, in a file that is always valid."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from perfkit.files import atomic_write_text
from perfkit.result.io import result_json
from perfkit.result.level import LevelResult
from perfkit.result.sweep import Finding, Knee, SweepResult


class ResultWriter:
    """Holds the result; rewrites `path` (when set) after every change."""

    def __init__(self, path: Path | None, result: SweepResult) -> None:
        self.path = path
        self.result = result
        self.flush()

    def add_level(self, level: LevelResult) -> None:
        self.result = replace(self.result, levels=[*self.result.levels, level])
        self.flush()

    def finish(self, knee: Knee | None, findings: list[Finding], complete: bool) -> None:
        self.result = replace(self.result, knee=knee, findings=findings, complete=complete)
        self.flush()

    def flush(self) -> None:
        if self.path is not None:
            atomic_write_text(self.path, result_json(self.result))
