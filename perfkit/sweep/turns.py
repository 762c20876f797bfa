"""One side of a lockstep pair (lockstep.py meets the peer): it runs engine steps for
QUANTUM_S, passes the turn and blocks until the turn comes back.

A turn is one 4-byte message, the sender's barrier count (the levels it has started).
The holder passes the turn when it has run QUANTUM_S and reaches the next step
boundary. At a level's start a side passes the turn straight back until the peer has
started that level too (a barrier), so level i of one side runs interleaved with level
i of the other, never with its neighbour. A peer that ends or dies closes the socket:
the other runs alone from then on (counted in `alone_s`).
"""

from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass

from perfkit import clock
from perfkit.result.sweep import LockstepInfo

QUANTUM_S = 0.02  # a turn: ~10-20 engine steps of a CPU profile; handing over costs ~0.1 ms
_MESSAGE = struct.Struct("!I")  # a turn: the sender's barrier count


@dataclass
class LockstepStats:
    handoffs: int = 0
    paused_s: float = 0.0
    left_at: float | None = None  # perf_counter when the peer ended (or died) first
    alone_s: float = 0.0  # seconds run alone after that, until close()


class Lockstep:
    """One side of a lockstep pair; `take_turns` and `barrier` are perfkit.clock's
    TurnTaker. Every message passes the turn and carries the sender's barrier count
    (levels started), so a side at a level's start knows whether its peer got there."""

    def __init__(self, sock: socket.socket, first: bool, quantum_s: float = QUANTUM_S) -> None:
        self._sock = sock
        self._quantum_s = quantum_s
        self._turn_start = time.perf_counter()
        self._alone = False
        self._mine = 0  # barriers (level starts) this side has reached
        self._theirs = 0  # the peer's count, as its last message said
        self.first = first
        self.cpu: int | None = None  # the core the engine thread is pinned to
        self.waits_measured = False  # its run-queue waits are taken out (perfkit.clock)
        self._reclaimed_at = clock.reclaimed_s()
        self.stats = LockstepStats()

    def take_turns(self) -> bool:
        if self._alone or time.perf_counter() - self._turn_start < self._quantum_s:
            return False
        self._pass()
        return True

    def barrier(self) -> None:
        """At the start of a level: hand the turn back and forth until the peer has
        started the same level, so the pair's levels run side by side in time (the
        faster side waits here for the slower one to finish its previous level)."""
        self._mine += 1
        while not self._alone and self._theirs < self._mine:
            self._pass()

    def wait_turn(self) -> None:
        """Block until the peer passes the turn (the second side, before its first step)."""
        self._receive()
        self._turn_start = time.perf_counter()

    def _pass(self) -> None:
        start = time.perf_counter()
        try:
            self._sock.sendall(_MESSAGE.pack(self._mine))
        except OSError:
            self._go_alone()
        self._receive()
        self._turn_start = time.perf_counter()
        self.stats.handoffs += 1
        self.stats.paused_s += self._turn_start - start

    def _receive(self) -> None:
        data = b""
        try:
            while not self._alone and len(data) < _MESSAGE.size:
                chunk = self._sock.recv(_MESSAGE.size - len(data))
                if not chunk:
                    break
                data += chunk
        except OSError:
            pass
        if len(data) == _MESSAGE.size:
            (self._theirs,) = _MESSAGE.unpack(data)
        else:
            self._go_alone()

    def _go_alone(self) -> None:
        if not self._alone:
            self._alone = True
            self.stats.left_at = time.perf_counter()

    def close(self) -> None:
        """Leave the pair: the peer gets end-of-file and runs alone."""
        self._alone = True
        self._sock.close()
        if self.stats.left_at is not None:
            self.stats.alone_s = time.perf_counter() - self.stats.left_at

    def info(self) -> LockstepInfo:
        s = self.stats
        waited = clock.reclaimed_s() - self._reclaimed_at if self.waits_measured else None
        return LockstepInfo(self._quantum_s, s.handoffs, round(s.paused_s, 6), round(s.alone_s, 6),
                            self.cpu, None if waited is None else round(waited, 6))
