"""Worker processes on this host: `python -m perfkit.loadgen.worker`, one per worker.

Each runs in a session of its own, so a Ctrl-C at the terminal reaches perfkit alone (the
coordinator stops its workers itself); its stderr goes to a file whose last line names
why it died, if it does.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from typing import IO

STOP_WAIT_S = 2.0


class LocalLauncher:
    name = "process"
    start_timeout_s = 30.0
    margin_s = 0.02

    def __init__(self) -> None:
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.logs: dict[int, IO[bytes]] = {}

    def bind_host(self) -> str:
        return "127.0.0.1"

    def connect_host(self) -> str:
        return "127.0.0.1"

    def start(self, index: int, port: int, key: bytes) -> None:
        log = tempfile.TemporaryFile()  # noqa: SIM115 (closed in stop(): it outlives this call)
        proc = subprocess.Popen(
            [sys.executable, "-m", "perfkit.loadgen.worker", self.connect_host(), str(port),
             str(index)],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=log,
            start_new_session=True)
        assert proc.stdin is not None
        proc.stdin.write(key.hex().encode() + b"\n")
        proc.stdin.close()
        self.procs[index], self.logs[index] = proc, log

    def exit_reason(self, index: int) -> str | None:
        proc = self.procs.get(index)
        if proc is None or proc.poll() is None:
            return None
        tail = _last_line(self.logs[index])
        return f"worker process {proc.pid} exited with status {proc.returncode}" + (
            f" ({tail})" if tail else "")

    def stop(self, index: int) -> None:
        proc = self.procs.pop(index, None)
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(STOP_WAIT_S)
        log = self.logs.pop(index, None)
        if log is not None:
            log.close()

    def close(self) -> None:
        for proc in self.procs.values():
            try:
                proc.wait(STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(STOP_WAIT_S)
        for index in list(self.procs):
            self.stop(index)


def _last_line(log: IO[bytes]) -> str:
    log.seek(0)
    lines = [ln.strip() for ln in log.read().decode(errors="replace").splitlines()
             if ln.strip()]
    return lines[-1][:200] if lines else ""

