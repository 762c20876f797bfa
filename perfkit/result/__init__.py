"""The one result model of a sweep: typed, frozen sections, one JSON codec, a generated schema.

`LevelResult` is one (load point, repeat); `SweepResult` is the document. A value that was
not measured is None here, null in JSON and n/a in every table: never 0.
"""

from perfkit.result.level import (
    Counts,
    Distribution,
    ErrorCounts,
    Goodput,
    GuardCounts,
    GuardSection,
    GuardTiming,
    KvSection,
    KvTimeline,
    Latency,
    LevelResult,
    LoadPoint,
    RequestSample,
    Throughput,
)
from perfkit.result.sweep import (
    SCHEMA,
    Finding,
    Knee,
    KneeReason,
    Plan,
    ProfileInfo,
    SweepResult,
    TargetInfo,
)

__all__ = [
    "SCHEMA", "Counts", "Distribution", "ErrorCounts", "Finding", "Goodput", "GuardCounts",
    "GuardSection", "GuardTiming", "Knee", "KneeReason", "KvSection", "KvTimeline", "Latency",
    "LevelResult", "LoadPoint", "Plan", "ProfileInfo", "RequestSample", "SweepResult",
    "TargetInfo", "Throughput",
]
