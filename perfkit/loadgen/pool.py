"""The coordinator's side: N connected workers and one level at a time over them.

Workers are started by a launcher (processes on this host: loadgen/local.py; Ray actors
across a cluster: loadgen/ray_launch.py) and connect back to a listener here with a
random key. Per level:

    Start(job) to each -> every worker Ready(warm-up) -> Go(origin) -> warm-up phase ->
    every worker Ready(measured) -> on_warm() here (samplers, scraper) -> Go(origin) ->
    measured phase, Records streamed back as they end -> Done (its cost) from each

A phase's origin is a moment MARGIN_S ahead, so that every worker has it before it comes.
A worker that exits, fails, closes its connection or falls silent for SILENCE_S (its
records double as a heartbeat every 0.1 s) is lost: what it sent is kept, the level says
it is incomplete, and the barrier goes on without it. The sweep never waits on a dead
worker. Lost workers are started again before the next level.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, Listener, wait
from typing import Protocol

from perfkit.errors import PerfkitError
from perfkit.loadgen.clocks import PROBES, ClockEstimate, estimate
from perfkit.loadgen.core import LevelJob, ShareRun
from perfkit.loadgen.messages import (
    ClockPing,
    ClockPong,
    Done,
    Failed,
    Go,
    Hello,
    Ready,
    Records,
    Start,
    Stop,
)
from perfkit.loadgen.worker import boot_id
from perfkit.records import RequestRecord
from perfkit.result.remote import LostWorker

SILENCE_S = 15.0  # a worker heard from less often than this is lost
HELLO_TIMEOUT_S = 10.0
EXIT_POLLS, EXIT_POLL_S = 20, 0.05  # how long a closed connection waits for the exit status


class Launcher(Protocol):
    """Starts workers that connect to (host, port) with `key`."""

    name: str  # "process" or "ray"
    start_timeout_s: float  # how long a worker may take to connect
    margin_s: float  # how far ahead a phase origin is set

    def bind_host(self) -> str: ...  # where the listener binds
    def connect_host(self) -> str: ...  # where workers connect to
    def start(self, index: int, port: int, key: bytes) -> None: ...
    def exit_reason(self, index: int) -> str | None: ...  # None while it runs
    def stop(self, index: int) -> None: ...
    def close(self) -> None: ...


@dataclass
class _Worker:
    conn: Connection
    hello: Hello
    clock: ClockEstimate | None  # None: the coordinator's own clock


@dataclass
class PoolLevel:
    """What a level over the pool gave."""

    runs: list[ShareRun]  # the workers that finished, in index order
    lost: list[LostWorker]
    records: list[RequestRecord]  # every record received, lost workers' included


@dataclass
class _Barrier:
    ready: dict[bool, set[int]] = field(default_factory=lambda: {True: set(), False: set()})
    released: dict[bool, bool] = field(default_factory=lambda: {True: False, False: False})


class WorkerPool:
    def __init__(self, launcher: Launcher, size: int) -> None:
        self.launcher = launcher
        self.size = size
        self.key = os.urandom(32)
        self.listener = Listener((launcher.bind_host(), 0), family="AF_INET", authkey=self.key)
        self.port = int(self.listener.address[1])
        self.accepted: queue.Queue[Connection] = queue.Queue()
        threading.Thread(target=self._accept, name="perfkit-pool-accept", daemon=True).start()
        self.workers: dict[int, _Worker] = {}
        self.boot_id = boot_id()
        self.heavy: set[str] = set()  # heavy modules any worker reported (tests check torch)
        self.ensure()

    def _accept(self) -> None:
        while True:
            try:
                conn = self.listener.accept()
            except OSError:
                return  # the listener was closed
            except Exception:  # a peer without the key (AuthenticationError): ignore it
                continue
            self.accepted.put(conn)

    def ensure(self) -> int:
        """Start the missing workers and wait until they connect; how many are ready."""
        missing = [i for i in range(self.size) if i not in self.workers]
        for i in missing:
            self.launcher.start(i, self.port, self.key)
        deadline = time.monotonic() + self.launcher.start_timeout_s
        while any(i not in self.workers for i in missing):
            gone = [(i, why) for i in missing if i not in self.workers
                    and (why := self.launcher.exit_reason(i)) is not None]
            if gone:
                raise PerfkitError(f"load-generating worker {gone[0][0]} did not start: "
                                   f"{gone[0][1]}")
            if time.monotonic() > deadline:
                raise PerfkitError(
                    f"{len([i for i in missing if i not in self.workers])} of {len(missing)} "
                    f"load-generating workers ({self.launcher.name}) did not connect within "
                    f"{self.launcher.start_timeout_s:g} s")
            try:
                conn = self.accepted.get(timeout=0.1)
            except queue.Empty:
                continue
            self._welcome(conn)
        return len(self.workers)

    def _welcome(self, conn: Connection) -> None:
        if not conn.poll(HELLO_TIMEOUT_S):
            conn.close()
            return
        hello = conn.recv()
        if not isinstance(hello, Hello):
            conn.close()
            return
        self.heavy.update(hello.heavy)
        clock = None if hello.boot_id == self.boot_id else _probe_clock(conn)
        self.workers[hello.index] = _Worker(conn, hello, clock)

    def run_level(self, jobs: list[LevelJob], t0: float,
                  on_record: Callable[[RequestRecord], None],
                  on_warm: Callable[[], None]) -> PoolLevel:
        """One level: job i to worker i (len(jobs) <= the workers ready)."""
        return _Level(self, jobs, t0, on_record, on_warm).run()

    def lose(self, index: int) -> None:
        worker = self.workers.pop(index, None)
        if worker is not None:
            worker.conn.close()
        self.launcher.stop(index)

    def close(self) -> None:
        for i, worker in list(self.workers.items()):
            with contextlib.suppress(OSError):
                worker.conn.send(Stop())
            worker.conn.close()
            del self.workers[i]
        self.listener.close()
        self.launcher.close()


def _probe_clock(conn: Connection) -> ClockEstimate:
    probes = []
    for seq in range(PROBES):
        a = time.perf_counter()
        conn.send(ClockPing(seq))
        if not conn.poll(HELLO_TIMEOUT_S):
            break
        pong = conn.recv()
        b = time.perf_counter()
        if isinstance(pong, ClockPong) and pong.seq == seq:
            probes.append((a, pong.t, b))
    if not probes:
        raise PerfkitError("a load-generating worker did not answer its clock probes")
    return estimate(probes)


class _Level:
    """The coordinator's loop for one level (see the module docstring)."""

    def __init__(self, pool: WorkerPool, jobs: list[LevelJob], t0: float,
                 on_record: Callable[[RequestRecord], None],
                 on_warm: Callable[[], None]) -> None:
        self.pool, self.jobs, self.t0 = pool, jobs, t0
        self.on_record, self.on_warm = on_record, on_warm
        self.pending = set(range(len(jobs)))
        self.heard = dict.fromkeys(self.pending, time.monotonic())
        self.counts = dict.fromkeys(self.pending, 0)
        self.barrier = _Barrier()
        self.out = PoolLevel([], [], [])
        self.runs: dict[int, ShareRun] = {}

    def run(self) -> PoolLevel:
        try:
            for i, job in enumerate(self.jobs):
                w = self.pool.workers[i]
                off = w.clock.offset_s if w.clock else None
                err = w.clock.error_s if w.clock else None
                self._send(i, Start(job, self.t0, off, err))
            while self.pending:
                self._poll()
        except BaseException:  # interrupted (Ctrl-C): stop every worker, then re-raise
            for i in list(self.pending):
                self._lose(i, "the sweep was interrupted")
            raise
        self.out.runs = [self.runs[i] for i in sorted(self.runs)]
        return self.out

    def _send(self, i: int, msg: object) -> None:
        try:
            self.pool.workers[i].conn.send(msg)
        except (OSError, ValueError) as err:
            self._lose(i, f"connection lost ({err})")

    def _poll(self) -> None:
        conns = {self.pool.workers[i].conn: i for i in self.pending}
        for conn in wait(list(conns), timeout=0.2):
            assert isinstance(conn, Connection)
            i = conns[conn]
            if i not in self.pending:
                continue
            try:
                msg = conn.recv()
            except (EOFError, OSError):
                why = self._exit_reason(i)
                self._lose(i, "connection closed" + (f": {why}" if why else ""))
                continue
            self.heard[i] = time.monotonic()
            self._take(i, msg)
        self._watch()
        self._release()

    def _take(self, i: int, msg: object) -> None:
        if isinstance(msg, Records):
            self.counts[i] += len(msg.batch)
            for rec in msg.batch:
                self.out.records.append(rec)
                self.on_record(rec)
        elif isinstance(msg, Ready):
            self.barrier.ready[msg.warmup].add(i)
        elif isinstance(msg, Done):
            self.pool.heavy.update(msg.heavy)
            self.runs[i] = msg.run
            self.pending.discard(i)
        elif isinstance(msg, Failed):
            self._lose(i, msg.error)

    def _exit_reason(self, i: int) -> str | None:
        """Why worker i ended, waiting a moment for its exit: its connection may close a
        little before the process is reaped."""
        for _ in range(EXIT_POLLS):
            why = self.pool.launcher.exit_reason(i)
            if why is not None:
                return why
            time.sleep(EXIT_POLL_S)
        return None

    def _watch(self) -> None:
        now = time.monotonic()
        for i in list(self.pending):
            why = self.pool.launcher.exit_reason(i)
            if why is not None:
                self._lose(i, why)
            elif now - self.heard[i] > SILENCE_S:
                self._lose(i, f"silent for {now - self.heard[i]:.0f} s")

    def _release(self) -> None:
        """Open each phase once every worker still in the level is ready for it."""
        alive = set(range(len(self.jobs))) - {lw.index for lw in self.out.lost}
        for warmup in (True, False):
            b = self.barrier
            if b.released[warmup] or not alive or not alive <= b.ready[warmup]:
                continue
            if not warmup:
                self.on_warm()
            b.released[warmup] = True
            origin = time.perf_counter() + self.pool.launcher.margin_s
            for i in alive & self.pending:
                self._send(i, Go(origin))

    def _lose(self, i: int, reason: str) -> None:
        if i not in self.pending:
            return
        self.pending.discard(i)
        hello = self.pool.workers[i].hello
        self.out.lost.append(LostWorker(i, hello.host, hello.pid, reason, self.counts[i]))
        self.pool.lose(i)
