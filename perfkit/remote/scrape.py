"""Poll a server's Prometheus endpoint during a level: KV usage, queue, preemptions,
prefix-cache hits, under vLLM's metric names (perfkit serve exports the same).

The scraper runs in its own thread (urllib, one request at a time), apart from the load
generator's event loop, so a busy loop cannot starve it: 10 Hz by default. Gauges become
a timeline; counters become deltas between a baseline taken when the measured phase
starts (mark) and a last scrape after its last request ended (stop). Counter names may
carry the `_total` suffix (prometheus_client adds it) or not; several label sets of one
name (data-parallel engines) are summed, except KV usage, which is averaged. Older vLLM
names are read when the new ones are absent.
"""

from __future__ import annotations

import math
import re
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass

from perfkit.config.units import cdiv
from perfkit.result.remote import ServerMetrics

INTERVAL_S = 0.1
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
    stride = max(1, cdiv(len(snaps), MAX_TIMELINE_POINTS))
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
    """start() -> [mark() at the measured phase] -> stop(): ServerMetrics of the phase.

    Only the scraping thread touches snaps/base/num_failed until stop() has joined it;
    mark() and stop() only set events, so they never block the caller's event loop for
    longer than the join at the end of a level."""

    def __init__(self, url: str, t0: float, interval_s: float = INTERVAL_S) -> None:
        self.url = url
        self.t0 = t0
        self.interval_s = interval_s
        self.snaps: list[Snapshot] = []
        self.base: Snapshot | None = None
        self.last: Snapshot | None = None
        self.num_failed = 0
        self._wake = threading.Event()
        self._marked = threading.Event()
        self._based = threading.Event()  # set once the baseline of the last mark is taken
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="perfkit-scrape", daemon=True)

    def scrape(self) -> Snapshot | None:
        try:
            with urllib.request.urlopen(self.url, timeout=SCRAPE_TIMEOUT_S) as resp:
                text = resp.read().decode("utf-8", errors="replace")
        except (urllib.error.URLError, OSError, ValueError):
            self.num_failed += 1
            return None
        return Snapshot.of(text, time.perf_counter() - self.t0)

    def start(self) -> None:
        self._marked.set()  # the first scrape is the baseline
        self._thread.start()

    def mark(self) -> None:
        """The measured phase starts: a fresh baseline, a fresh timeline. Returns once the
        baseline is taken (await it through asyncio.to_thread), so no measured request
        is counted before it."""
        self._based.clear()
        self._marked.set()
        self._wake.set()
        self._based.wait(SCRAPE_TIMEOUT_S + 1.0)

    def _run(self) -> None:
        while not self._stopped.is_set():
            if self._marked.is_set():
                self._marked.clear()
                self.snaps, self.num_failed = [], 0
                self.base = self.scrape()
                self._based.set()
            else:
                snap = self.scrape()
                if snap is not None:
                    self.snaps.append(snap)
            self._wake.wait(self.interval_s)
            self._wake.clear()
        self.last = self.scrape()
        if self.last is not None:
            self.snaps.append(self.last)

    def stop(self) -> ServerMetrics:
        self._stopped.set()
        self._wake.set()
        self._thread.join()
        return summarise(self.url, self.snaps, self.base, self.last, self.num_failed)
