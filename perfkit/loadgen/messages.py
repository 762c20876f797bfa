"""What the coordinator and its workers say to each other, over one authenticated
connection each (multiprocessing.connection: pickled objects, HMAC challenge on connect).

    worker -> coordinator   Hello, then per level: Ready(warm-up), Ready(measured),
                            Records (every 0.1 s while a level runs: the heartbeat too),
                            Done (its cost) or Failed; ClockPong to each ClockPing
    coordinator -> worker   ClockPing, Start (a level), Go (a phase's origin), Stop
Times crossing the wire are on the coordinator's perf_counter; a worker on another host
converts with its estimated clock offset (loadgen/clocks.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from perfkit.loadgen.core import LevelJob, ShareRun
from perfkit.records import RequestRecord


@dataclass(frozen=True)
class Hello:
    index: int
    host: str
    pid: int
    loop: str  # "uvloop" or "asyncio"
    boot_id: str  # the kernel's boot id: equal ids share one monotonic clock
    heavy: tuple[str, ...]  # heavy modules loaded in the worker (torch must not be)


@dataclass(frozen=True)
class ClockPing:
    seq: int


@dataclass(frozen=True)
class ClockPong:
    seq: int
    t: float  # the worker's perf_counter when it answered


@dataclass(frozen=True)
class Start:
    job: LevelJob
    t0: float  # the level's origin, coordinator clock
    offset_s: float | None  # worker clock - coordinator clock (None: the same clock)
    error_s: float | None  # bound of that offset


@dataclass(frozen=True)
class Ready:
    warmup: bool  # the phase it is ready to begin


@dataclass(frozen=True)
class Go:
    origin: float  # the phase's origin, coordinator clock


@dataclass(frozen=True)
class Records:
    batch: list[RequestRecord]  # ended since the last batch (may be empty: a heartbeat)


@dataclass(frozen=True)
class Done:
    run: ShareRun  # its records were already streamed: run.records is empty
    heavy: tuple[str, ...]  # heavy modules loaded by the level's end (torch must not be)


@dataclass(frozen=True)
class Failed:
    error: str  # one line: what went wrong in the worker


@dataclass(frozen=True)
class Stop:
    pass
