"""The answer of an SLO search (sweep --search): the highest load whose goodput meets the
SLOs, with every decision it rests on and that decision's uncertainty."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Decision = Literal["meets", "fails", "uncertain"]


@dataclass(frozen=True)
class SearchStep:
    x: float  # the load tried: concurrency or requests/s
    runs: int  # level runs pooled for this decision
    requests: int  # measured requests over those runs
    good: int  # of them meeting every SLO target
    share: float | None  # good / requests
    low: float  # 95% Wilson interval of the share
    high: float
    decision: Decision  # meets: low >= target; fails: high < target; else uncertain
    contended: bool = False  # other processes took CPU during a run: the share may move


@dataclass(frozen=True)
class SearchResult:
    axis: Literal["concurrency", "rate"]
    target_share: float  # a load meets the SLOs when this share of requests meets them
    slo: dict[str, float | None]  # the targets (ttft_s, tpot_s, e2e_s)
    best: float | None  # the highest load that met them; None: not even the first
    first_fail: float | None  # the lowest load that failed (or stayed uncertain)
    sentence: str
    steps: list[SearchStep] = field(default_factory=list)  # in the order they ran
