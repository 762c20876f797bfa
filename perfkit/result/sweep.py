"""The sweep document: what ran (profile, environment, plan, target), its levels in run
order, the knee, the findings, and whether every level ran."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from perfkit.result.level import LevelResult
from perfkit.result.search import SearchResult

SCHEMA = "perfkit.sweep/2"
SCHEMA_V1 = "perfkit.sweep/1"  # still read: upgraded on load (perfkit.result.upgrade)

KneeReason = Literal["throughput-plateau", "latency-superlinear", "both", "none", "too-few-levels",
                     "undecided"]


@dataclass(frozen=True)
class Knee:
    level: float | None  # x at the knee; None when none was found
    reason: KneeReason
    sentence: str  # one sentence for humans, with the numbers
    throughput_gain_per_doubling: list[float | None]  # per level vs its reference; [0] is None
    # Levels the machine was contended at (other processes' CPU): the verdict is discounted.
    contended: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Finding:
    id: str
    severity: str  # "warning" or "info"
    message: str
    evidence: dict[str, Any]
    fix: str


@dataclass(frozen=True)
class ProfileInfo:
    name: str
    sha256: str  # of the resolved profile: equal hashes, equal runs
    resolved: dict[str, Any]  # every key, defaults filled in


@dataclass(frozen=True)
class Plan:
    levels: list[str]  # load point labels, in order
    requests: int  # measured requests per level
    warmup: int
    repeats: int
    samplers: bool


@dataclass(frozen=True)
class LockstepInfo:
    """sweep --lockstep: this run took turns with a peer sweep (perfkit.sweep.lockstep);
    every timing excludes the pauses."""

    quantum_s: float  # how long a turn lasts before it is passed
    handoffs: int  # turns passed to the peer
    paused_s: float  # seconds this process waited for the peer, taken out of every timing
    alone_s: float  # seconds run after the peer ended (or died): unpaired in time. Near 0
    # when both ran the same plan to the end; large when the peer failed early
    cpu: int | None = None  # the core both sides' engine threads ran on; None: not pinned
    # seconds the engine thread waited in the run queue (another process held its
    # core), taken out of every timing like the pauses; None: not measured (no
    # schedstat, or a result from before this field)
    run_queue_s: float | None = None


@dataclass(frozen=True)
class TargetInfo:
    url: str
    model: str
    scrape_metrics: str | None


@dataclass(frozen=True, kw_only=True)
class SweepResult:
    schema: str = SCHEMA
    kind: str = "sweep"
    profile: ProfileInfo
    environment: dict[str, Any]  # versions, CPU, GPU, device, device_class (see measure.envinfo)
    plan: Plan
    target: TargetInfo | None = None  # remote sweeps only
    levels: list[LevelResult] = field(default_factory=list)  # run order, repeats interleaved
    knee: Knee | None = None
    findings: list[Finding] = field(default_factory=list)
    complete: bool = False  # False until the last level is written
    stop_reason: str | None = None  # why it ended before its last level (None: it did not)
    search: SearchResult | None = None  # sweep --search: the highest load meeting the SLOs
    lockstep: LockstepInfo | None = None  # sweep --lockstep: turns taken with a peer sweep

    @property
    def device_class(self) -> str:
        return str(self.environment.get("device_class", ""))
