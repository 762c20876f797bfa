"""How a sweep is stopped from outside: SIGINT and SIGTERM, asked before every level."""

from __future__ import annotations

import signal
from types import FrameType

from perfkit.cli.common import err_console


class StopFlag:
    """SIGTERM: stop now (the level in progress is dropped, the finished ones are kept).
    First SIGINT: finish the current level, then stop. Second: stop now.

    Stopping now raises KeyboardInterrupt in the main thread, where the level's event
    loop runs: it wakes from any wait (a far open-loop arrival too), the level's tasks
    are cancelled, and run_sweep writes what was measured (complete=False)."""

    def __init__(self) -> None:
        self.requested = False

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if self.requested or signum == signal.SIGTERM:
            self.requested = True
            err_console.print("[yellow]Stopping now: the level in progress is dropped.[/]")
            raise KeyboardInterrupt
        self.requested = True
        err_console.print("[yellow]Stopping after this level (again to abort now).[/]")

    def install(self) -> None:
        signal.signal(signal.SIGINT, self)
        signal.signal(signal.SIGTERM, self)

    def __bool__(self) -> bool:
        return self.requested
