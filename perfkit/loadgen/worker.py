"""A load-generating worker: connect to the coordinator, then run each level it is given.

    python -m perfkit.loadgen.worker HOST PORT INDEX     (the key in hex on stdin)

The same `serve_coordinator` runs inside a Ray actor on another node. A worker imports
only the client (aiohttp, perfkit.remote, the loops): never torch or the engine.

Threads: a reader thread receives every message (it answers clock pings at once, so the
round trips measure the network, not a busy event loop) and hands the rest over; the
main thread runs each level in a fresh event loop (uvloop where installed), streaming
records back every RECORDS_EVERY_S, which doubles as the heartbeat the coordinator
watches.
"""

from __future__ import annotations

import asyncio
import os
import queue
import socket
import sys
import threading
import time
import traceback
from multiprocessing.connection import Client, Connection
from typing import Any

from perfkit.loadgen.core import loop_name, new_loop, run_share
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
from perfkit.loadgen.overhead import WorkerIdentity
from perfkit.records import RequestRecord

RECORDS_EVERY_S = 0.1
HEAVY = ("torch", "numpy", "tokenizers", "ray", "perfkit.engine")


def boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return f"{socket.gethostname()}:unknown"


class _Channel:
    """The connection, with sends from both threads serialised."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.lock = threading.Lock()

    def send(self, msg: object) -> None:
        with self.lock:
            self.conn.send(msg)


class _Gate:
    """Ready -> the coordinator's Go, converted to this process's clock."""

    def __init__(self, chan: _Channel, offset_s: float) -> None:
        self.chan = chan
        self.offset_s = offset_s
        self.loop = asyncio.get_running_loop()
        self.waiting: asyncio.Future[float] | None = None

    async def begin(self, warmup: bool) -> float:
        self.waiting = self.loop.create_future()
        self.chan.send(Ready(warmup))
        origin = await self.waiting
        return origin + self.offset_s

    def go(self, origin: float) -> None:  # from the reader thread
        def wake() -> None:
            if self.waiting is not None and not self.waiting.done():
                self.waiting.set_result(origin)

        self.loop.call_soon_threadsafe(wake)


class Worker:
    def __init__(self, conn: Connection, index: int) -> None:
        self.chan = _Channel(conn)
        self.index = index
        self.inbox: queue.Queue[object] = queue.Queue()
        self.gate: _Gate | None = None
        self.who = WorkerIdentity(index, socket.gethostname(), os.getpid(), loop_name())

    def _read(self) -> None:
        conn = self.chan.conn
        while True:
            try:
                msg = conn.recv()
            except (EOFError, OSError):
                self.inbox.put(Stop())
                return
            if isinstance(msg, ClockPing):
                self.chan.send(ClockPong(msg.seq, time.perf_counter()))
            elif isinstance(msg, Go):
                if self.gate is not None:
                    self.gate.go(msg.origin)
            else:
                self.inbox.put(msg)
                if isinstance(msg, Stop):
                    return

    def serve(self) -> None:
        self.chan.send(Hello(self.index, self.who.host, self.who.pid, self.who.loop, boot_id(),
                             _heavy()))
        threading.Thread(target=self._read, name="perfkit-worker-reader", daemon=True).start()
        while not isinstance(msg := self.inbox.get(), Stop):
            if isinstance(msg, Start):
                self._level(msg)

    def _level(self, start: Start) -> None:
        loop = new_loop()
        try:
            run = loop.run_until_complete(self._run(start))
            self.chan.send(Done(run, _heavy()))
        except Exception as err:  # the coordinator reports it: the level goes on without us
            last = traceback.extract_tb(err.__traceback__)[-1:]
            where = f" at {last[0].filename}:{last[0].lineno}" if last else ""
            self.chan.send(Failed(f"{type(err).__name__}: {err}{where}"))
        finally:
            self.gate = None
            loop.close()

    async def _run(self, start: Start) -> Any:
        offset = start.offset_s or 0.0
        self.gate = _Gate(self.chan, offset)
        pending: list[RequestRecord] = []
        flusher = asyncio.create_task(self._flush(pending))
        try:
            run = await run_share(start.job, start.t0 + offset, self.who, self.gate,
                                  pending.append, _nothing, time.process_time,
                                  (start.offset_s, start.error_s))
        finally:
            flusher.cancel()
            await asyncio.gather(flusher, return_exceptions=True)
        self.chan.send(Records(list(pending)))
        run.records = []
        return run

    async def _flush(self, pending: list[RequestRecord]) -> None:
        while True:
            await asyncio.sleep(RECORDS_EVERY_S)
            batch = pending[:]
            del pending[:]
            self.chan.send(Records(batch))


def _nothing() -> None:
    pass


def _heavy() -> tuple[str, ...]:
    return tuple(m for m in HEAVY if m in sys.modules)


def serve_coordinator(host: str, port: int, key: bytes, index: int) -> None:
    """Connect and serve until told to stop (or the coordinator goes away)."""
    conn = Client((host, port), family="AF_INET", authkey=key)
    try:
        Worker(conn, index).serve()
    finally:
        conn.close()


def main(argv: list[str]) -> None:
    host, port, index = argv[0], int(argv[1]), int(argv[2])
    key = bytes.fromhex(sys.stdin.readline().strip())
    serve_coordinator(host, port, key, index)


if __name__ == "__main__":
    main(sys.argv[1:])
