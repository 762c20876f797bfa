"""Two sweeps in lockstep: baseline and candidate take turns on the machine.

On a shared machine the speed of the CPU drifts by 10-30% from one second to the
next (other processes, other tenants of the host), so two runs of the same code made
one after the other, or side by side on different cores, differ by more than most
regressions. In lockstep two perfkit processes (each its own checkout) meet at a
UNIX socket and alternate: one runs engine steps for QUANTUM_S, passes the turn and
blocks until it comes back. Both see the same machine, a few milliseconds apart, so
the drift hits both sides of every pair alike and the gate's paired ratios cancel it.
The pauses are taken out of every timing (perfkit.clock), so latencies are those of
a process running alone at that machine speed.

Protocol (a 4-byte message a turn, after a JSON hello line each way):
  the first process to arrive listens at PATH and holds the turn; the second
  connects, exchanges hellos and waits for the turn. Arriving is decided under an
  exclusive lock on PATH.lock (connect, else bind and listen), so two sides started
  at the same instant cannot both listen (the later one would take the earlier one's
  socket for a stale file and unlink it: both then waited out the join timeout).
  This module meets the peer and sets the pair up for a sweep; the turns, and the
  barrier at every level's start, are turns.py's (Lockstep).
Against --target (duet mode for deployments) no engine steps run here, so turns pass
only at the barriers: whole levels alternate, ABBA (B1 A1 A2 B2 B3 A3 ...), each
side's level i beside the other's, one server measured at a time.
The hello carries the plan; a peer with other levels, repeats or requests cannot be
paired and both refuse to start (PerfkitError, exit 2, before anything is measured).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from perfkit import clock
from perfkit.errors import PerfkitError
from perfkit.measure.proc import ThreadWaits
from perfkit.sweep.plan import SweepPlan
from perfkit.sweep.turns import QUANTUM_S, Lockstep

JOIN_TIMEOUT_S = 300.0  # the peer may still be installing or importing torch


def _hello(plan: dict[str, Any]) -> bytes:
    return (json.dumps({"perfkit_lockstep": 1, "plan": plan}, sort_keys=True) + "\n").encode()


def _read_hello(sock: socket.socket, path: Path) -> dict[str, Any]:
    data = b""
    while not data.endswith(b"\n"):
        chunk = sock.recv(1)  # byte by byte: the peer's first turn may follow at once
        if not chunk or len(data) > 65536:
            raise PerfkitError(f"--lockstep {path}: the peer closed the socket before it said "
                               "hello (is it a perfkit sweep with --lockstep?)")
        data += chunk
    try:
        doc = json.loads(data)
        return dict(doc["plan"])
    except (ValueError, KeyError, TypeError):
        raise PerfkitError(f"--lockstep {path}: the peer is not a perfkit sweep") from None


def _check_plans(mine: dict[str, Any], theirs: dict[str, Any], path: Path) -> None:
    diffs = [f"{k}: {mine.get(k)!r} here, {theirs.get(k)!r} there"
             for k in sorted(set(mine) | set(theirs)) if mine.get(k) != theirs.get(k)]
    if diffs:
        raise PerfkitError(f"--lockstep {path}: the peer runs another plan ({'; '.join(diffs)}):"
                           " give both sides the same levels, repeats and requests")


def _connect(path: Path) -> socket.socket | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(path))
        return sock
    except (FileNotFoundError, ConnectionRefusedError):
        sock.close()
        return None


def _listen(path: Path) -> socket.socket | None:
    """Listen at `path`; None when someone else bound it first (then connect to them)."""
    if path.exists() and not path.is_socket():
        raise PerfkitError(f"--lockstep {path}: exists and is not a socket; give a new path "
                           "(for example /tmp/perfkit-lockstep.sock)")
    if path.is_socket():
        path.unlink(missing_ok=True)  # refused a connection above: a stale socket
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind(str(path))
    except OSError:
        server.close()
        return None
    server.listen(1)
    return server


def _lock_path(path: Path) -> Path:
    return path.with_name(path.name + ".lock")


def _arrive(path: Path) -> tuple[socket.socket | None, socket.socket | None]:
    """(peer, None) when the other side listens at `path`; (None, server) when this side
    now listens; (None, None) when it can do neither yet. Under an exclusive lock: the
    first side binds and listens before the second may look, so the second connects."""
    try:
        lock = _lock_path(path).open("a")
    except OSError as err:
        raise PerfkitError(f"--lockstep {path}: cannot create {_lock_path(path)} "
                           f"({err.strerror}); give a path in a writable folder, such as "
                           "/tmp/perfkit-lockstep.sock") from None
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        peer = _connect(path)
        return (peer, None) if peer is not None else (None, _listen(path))


def _accept(server: socket.socket, path: Path, left_s: float, timeout_s: float
            ) -> socket.socket:
    server.settimeout(left_s)
    try:
        sock, _ = server.accept()
    except TimeoutError:
        raise PerfkitError(f"--lockstep {path}: no peer joined within {timeout_s:g} s; start "
                           "the other side's perfkit sweep with the same --lockstep path"
                           ) from None
    finally:
        server.close()
        path.unlink(missing_ok=True)
        _lock_path(path).unlink(missing_ok=True)  # both sides have arrived, or none will
    sock.settimeout(None)
    return sock


def join(path: Path, plan: dict[str, Any], timeout_s: float = JOIN_TIMEOUT_S,
         quantum_s: float = QUANTUM_S) -> Lockstep:
    """Meet the peer at `path` (whichever arrives first listens) and agree on the plan.
    The first side returns holding the turn; the second returns once it has it."""
    if len(os.fsencode(path)) > 100:
        raise PerfkitError(f"--lockstep {path}: a socket path must be under 100 bytes; "
                           "use a short one such as /tmp/perfkit-lockstep.sock")
    deadline = time.monotonic() + timeout_s
    while True:
        sock, server = _arrive(path)
        first = sock is None
        if sock is None:
            if server is None:
                if time.monotonic() > deadline:
                    raise PerfkitError(f"--lockstep {path}: cannot listen there or connect")
                time.sleep(0.05)
                continue
            sock = _accept(server, path, max(deadline - time.monotonic(), 0.1), timeout_s)
        break
    sock.sendall(_hello(plan))
    _check_plans(plan, _read_hello(sock, path), path)
    side = Lockstep(sock, first, quantum_s)
    if not first:
        side.wait_turn()
    return side


def plan_hello(plan: SweepPlan) -> dict[str, Any]:
    """What both sides must share to be paired run for run."""
    return {"levels": [lv.label for lv in plan.levels], "repeats": plan.repeats,
            "requests": plan.num_requests, "warmup": plan.num_warmup}


@contextlib.contextmanager
def in_lockstep(path: Path | None, plan: SweepPlan) -> Iterator[Lockstep | None]:
    """Take turns with the peer at `path` for the duration (None: run alone)."""
    if path is None:
        yield None
        return
    side = join(path, plan_hello(plan))
    waits = ThreadWaits.open()  # this is the engine's thread: its run-queue waits
    side.waits_measured = waits is not None
    clock.install(side, waits)
    before = _pin_engine_thread(side)
    try:
        yield side
    finally:
        if before is not None:
            os.sched_setaffinity(0, before)
        clock.install(None)
        if waits is not None:
            waits.close()
        side.close()


def _pin_engine_thread(side: Lockstep) -> set[int] | None:
    """Pin this (the engine's) thread to the highest CPU both sides may use, so the two
    sides' turns run on the same core, beside the same neighbours: two sides on
    different cores differ by whatever load each core carries. Only this thread: the
    samplers keep every core. Returns the affinity to restore; None where the platform
    has no affinity (then the sides float)."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    before = os.sched_getaffinity(0)
    cpu = max(before)
    os.sched_setaffinity(0, {cpu})
    side.cpu = cpu
    return before
