"""Whole runs as library calls: run_sweep (the levels of a profile) and run_search (the
highest load meeting the SLOs), in-process or against a target."""

from perfkit.run.level_loop import (
    QuietEvents,
    StackOptions,
    SweepEvents,
    TargetOptions,
    TraceOptions,
    level_runner,
    run_sweep,
)
from perfkit.run.search import run_search

__all__ = ["QuietEvents", "StackOptions", "SweepEvents", "TargetOptions", "TraceOptions",
           "level_runner", "run_search", "run_sweep"]
