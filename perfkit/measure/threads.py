"""Who a thread is: its name and its role, for the tracers that see only thread ids.

A kernel-side tracer (bpftrace, perf) sees thread ids and each thread's `comm`. Python
3.11 does not hand its threads' names to the kernel (every `comm` is the program's), so
perfkit (a) names its own measuring threads for the kernel too (`name_native`: prctl
PR_SET_NAME, 15 bytes, "pk-..."), visible to top -H, perf and bpftrace, and (b) maps
ids to Python names itself: in its own process from `threading.enumerate()` (native_id
-> name), in another process from its `comm`s or, where given, from py-spy's dump.

Roles (ROLES) group threads the way a reader of a wait table thinks of them. In a sweep
the engine's steps and the load generator share one event loop (one thread); in `perfkit
serve` the engine and the HTTP front end do: that thread's role says both.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from collections.abc import Callable
from typing import TypeVar

ENGINE_LOADGEN = "engine+loadgen"  # a sweep: the engine's steps and the load's clients
ENGINE_HTTP = "engine+http"  # perfkit serve: the engine's steps and the HTTP front end
MAIN = "main"  # another program's main thread (stacks --pid of any Python process)
PERFKIT = "perfkit"  # perfkit's own threads: samplers, tracers' readers, the progress bar
NATIVE = "native"  # no Python thread: torch/OpenMP or numba workers, the runtime's own
OTHER = "other"  # any other Python thread (the application's)
ROLES = (ENGINE_LOADGEN, ENGINE_HTTP, MAIN, PERFKIT, NATIVE, OTHER)
_PR_SET_NAME = 15
_OWN_PREFIXES = ("perfkit-", "pk-")


T = TypeVar("T")

def name_native(name: str) -> None:
    """Give the calling thread's kernel name (`comm`, at most 15 bytes); a no-op off Linux."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_NAME, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _per_task(pid: int, name: str, parse: Callable[[str], T]) -> dict[int, T]:
    """tid -> parse(/proc/PID/task/TID/NAME) of each live thread ({} without /proc; a
    thread that exited since the listing, or a file that does not parse, is left out)."""
    out: dict[int, T] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/{name}", encoding="utf-8",
                      errors="replace") as f:
                out[int(tid)] = parse(f.read())
        except (OSError, IndexError, ValueError):
            continue
    return out


def task_comms(pid: int) -> dict[int, str]:
    """tid -> the kernel's name of each live thread of `pid` ({} without /proc)."""
    return _per_task(pid, "comm", str.strip)


def own_thread(thread: threading.Thread) -> bool:
    """perfkit's measuring threads ("perfkit-..."), and the progress bar's refresh thread
    (rich's)."""
    return thread.name.startswith("perfkit-") or type(thread).__module__.startswith("rich.")


def thread_code(thread: threading.Thread) -> str:
    """What the thread runs: its target's module.name, or its class's run(); "" for a
    plain thread (the main thread)."""
    target = getattr(thread, "_target", None)  # threading.Thread keeps it there
    if target is not None:
        return f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', '?')}"
    if type(thread).run is not threading.Thread.run:
        return f"{type(thread).__module__}.{type(thread).__qualname__}.run"
    return ""


def python_names() -> dict[int, str]:
    """tid -> Python name of this process's live threads; perfkit's own named "perfkit-..."
    (the progress bar's refresh thread: "perfkit-progress (rich)")."""
    out = {}
    for t in threading.enumerate():
        if t.native_id is not None:
            own = own_thread(t) and not t.name.startswith("perfkit-")
            out[t.native_id] = f"perfkit-progress ({t.name}, rich)" if own else t.name
    return out


def role_of(name: str, python: bool, engine: bool, engine_role: str) -> str:
    """`python`: the thread runs Python (has a Python name); `engine`: it steps the engine."""
    if engine:
        return engine_role
    if name.startswith(_OWN_PREFIXES):
        return PERFKIT
    return OTHER if python else NATIVE


class ThreadBook:
    """Names and roles of one process's threads, gathered while it runs (threads that
    exit before the level ends keep the name they were last seen with)."""

    def __init__(self, pid: int, engine_tid: int | None, engine_role: str = ENGINE_LOADGEN
                 ) -> None:
        self.pid, self.engine_tid, self.engine_role = pid, engine_tid, engine_role
        self.comm: dict[int, str] = {}  # tid -> kernel name
        self.python: dict[int, str] = {}  # tid -> Python name (threads that run Python)
        self.code: dict[int, str] = {}  # tid -> its target's module.name (this process)

    def look(self, python: dict[int, str] | None = None,
             code: dict[int, str] | None = None) -> None:
        """Note the threads alive now; `python`: tid -> Python name where known, `code`:
        tid -> what it runs (another process: from py-spy's dump)."""
        self.code.update(code or {})
        self.comm.update(task_comms(self.pid))
        if python is None and self.pid == os.getpid():
            python = python_names()
            self.code.update({t.native_id: what for t in threading.enumerate()
                              if t.native_id is not None and (what := thread_code(t))})
        self.python.update(python or {})

    def name(self, tid: int) -> str:
        return self.python.get(tid) or self.comm.get(tid) or f"tid {tid}"

    def role(self, tid: int) -> str:
        return role_of(self.name(tid), tid in self.python, tid == self.engine_tid,
                       self.engine_role)


def thread_stats(pid: int) -> dict[int, tuple[float, float, int]]:
    """tid -> (user s, system s, minor faults) of each live thread, from
    /proc/PID/task/TID/stat (clock ticks: 10 ms resolution); {} without /proc."""
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

    def parse(text: str) -> tuple[float, float, int]:
        rest = text.rsplit(")", 1)[1].split()
        return int(rest[11]) / tick, int(rest[12]) / tick, int(rest[7])

    return _per_task(pid, "stat", parse)
