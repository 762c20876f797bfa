"""Poll a server's Prometheus endpoint during a level: KV usage, queue, preemptions,
prefix-cache hits, under vLLM's metric names (perfkit serve exports the same).

Gauges become a timeline (~2 Hz); counters become deltas between a baseline taken
when the measured phase starts and a last scrape after its last request ended.
Counter names may carry the `_total` suffix (prometheus_client adds it) or not;
several label sets of one name (data-parallel engines) are summed, except KV
usage, which is averaged. Older vLLM names are read when the new ones are absent.
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import aiohttp

INTERVAL_S = 0.5
SCRAPE_TIMEOUT_S = 2.0
MAX_TIMELINE_POINTS = 200

KV_USAGE = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")  # share in [0, 1]
RUNNING = ("vllm:num_requests_running",)
WAITING = ("vllm:num_requests_waiting",)
PREEMPTIONS = ("vllm:num_preemptions",)
PREFIX_QUERIES = ("vllm:prefix_cache_queries", "vllm:gpu_prefix_cache_queries")  # tokens
PREFIX_HITS = ("vllm:prefix_cache_hits", "vllm:gpu_prefix_cache_hits")  # tokens
WANTED = KV_USAGE + RUNNING + WAITING + PREEMPTIONS + PREFIX_QUERIES + PREFIX_HITS

# name{labels} value [timestamp]; label values may hold anything, so `{...}` is greedy.
_LINE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{.*\})?\s+(\S+)(?:\s+\S+)?\s*$")


def parse_metrics(text: str, wanted: tuple[str, ...] = WANTED) -> dict[str, list[float]]:
    """Values of the wanted names (`_total` dropped), one per label set."""
    prefixes = tuple(wanted)
    out: dict[str, list[float]] = {}
    for line in text.splitlines():
        if not line.startswith(prefixes):
            continue
        match = _LINE.match(line)
        if match is None:
            continue
        name = match.group(1).removesuffix("_total")
        try:
            value = float(match.group(2))
        except ValueError:
            continue
        if name in wanted and math.isfinite(value):
            out.setdefault(name, []).append(value)
    return out


def _pick(values: dict[str, list[float]], names: tuple[str, ...],
          mean: bool = False) -> float | None:
    for name in names:
        got = values.get(name)
        if got:
            return sum(got) / len(got) if mean else sum(got)
    return None


@dataclass(frozen=True)
class Snapshot:
    t_s: float  # since the level started
    kv_usage: float | None
    running: float | None
    waiting: float | None
    preemptions: float | None
    prefix_queries: float | None
    prefix_hits: float | None

    @classmethod
    def of(cls, text: str, t_s: float) -> Snapshot:
        v = parse_metrics(text)
        return cls(t_s, _pick(v, KV_USAGE, mean=True), _pick(v, RUNNING), _pick(v, WAITING),
                   _pick(v, PREEMPTIONS), _pick(v, PREFIX_QUERIES), _pick(v, PREFIX_HITS))


@dataclass
class ServerMetrics:
    """One level's server-side figures; None where the server did not export a metric."""

    available: bool
    reason: str  # why not, when unavailable
    url: str | None
    num_scrapes: int = 0
    num_failed: int = 0
    kv_usage_peak: float | None = None  # share of KV blocks in use, [0, 1]
    kv_usage_mean: float | None = None  # over the scrapes of the measured phase
    peak_running: int | None = None
    peak_waiting: int | None = None
    preemptions: int | None = None  # counter deltas over the measured phase
    prefix_queries: int | None = None
    prefix_hits: int | None = None
    prefix_hit_rate: float | None = None  # hits / queries (tokens)
    timeline: dict[str, list[Any]] = field(default_factory=dict)

    @classmethod
    def unavailable(cls, reason: str) -> ServerMetrics:
        return cls(False, reason, None)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _delta(base: Snapshot | None, last: Snapshot | None, name: str) -> int | None:
    """A counter's increase; None when missing or reset (the server restarted)."""
    first = None if base is None else getattr(base, name)
    end = None if last is None else getattr(last, name)
    if first is None or end is None or end < first:
        return None
    return round(end - first)


def _peak(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def summarise(url: str, snaps: list[Snapshot], base: Snapshot | None, last: Snapshot | None,
              num_failed: int) -> ServerMetrics:
    """Gauges over `snaps`; counters from `base` to `last`."""
    if not snaps and last is None:
        return ServerMetrics(False, f"no scrape of {url} succeeded", url, 0, num_failed)
    kv = [s.kv_usage for s in snaps if s.kv_usage is not None]
    running, waiting = _peak([s.running for s in snaps]), _peak([s.waiting for s in snaps])
    queries = _delta(base, last, "prefix_queries")
    hits = _delta(base, last, "prefix_hits")
    stride = max(1, -(-len(snaps) // MAX_TIMELINE_POINTS))
    points = snaps[::stride]
    return ServerMetrics(
        True, "", url, len(snaps), num_failed,
        kv_usage_peak=max(kv) if kv else None,
        kv_usage_mean=sum(kv) / len(kv) if kv else None,
        peak_running=None if running is None else round(running),
        peak_waiting=None if waiting is None else round(waiting),
        preemptions=_delta(base, last, "preemptions"),
        prefix_queries=queries, prefix_hits=hits,
        prefix_hit_rate=hits / queries if queries and hits is not None else None,
        timeline={"t_s": [round(s.t_s, 3) for s in points],
                  "kv_usage": [s.kv_usage for s in points],
                  "running": [s.running for s in points],
                  "waiting": [s.waiting for s in points]},
    )


class Scraper:
    """start() -> [mark() at the measured phase] -> stop(): ServerMetrics of the phase."""

    def __init__(self, url: str, t0: float, interval_s: float = INTERVAL_S) -> None:
        self.url = url
        self.t0 = t0
        self.interval_s = interval_s
        self.snaps: list[Snapshot] = []
        self.base: Snapshot | None = None
        self.num_failed = 0
        self._session: aiohttp.ClientSession | None = None
        self._task: asyncio.Task[None] | None = None

    async def scrape(self) -> Snapshot | None:
        assert self._session is not None
        try:
            async with self._session.get(self.url) as resp:
                if resp.status != 200:
                    raise aiohttp.ClientResponseError(resp.request_info, (), status=resp.status)
                text = await resp.text()
        except (aiohttp.ClientError, asyncio.TimeoutError, TimeoutError, OSError, ValueError):
            self.num_failed += 1
            return None
        return Snapshot.of(text, time.perf_counter() - self.t0)

    async def start(self) -> None:
        timeout = aiohttp.ClientTimeout(total=SCRAPE_TIMEOUT_S)
        self._session = aiohttp.ClientSession(
            timeout=timeout, connector=aiohttp.TCPConnector(limit=1))
        await self.mark()
        self._task = asyncio.create_task(self._poll())

    async def mark(self) -> None:
        """The measured phase starts: a fresh baseline, a fresh timeline."""
        self.snaps, self.num_failed = [], 0
        self.base = await self.scrape()

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            snap = await self.scrape()
            if snap is not None:
                self.snaps.append(snap)

    async def stop(self) -> ServerMetrics:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        last = await self.scrape()
        if last is not None:
            self.snaps.append(last)
        assert self._session is not None
        await self._session.close()
        return summarise(self.url, self.snaps, self.base, last, self.num_failed)
