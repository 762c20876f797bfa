"""`perfkit stacks --pid PID --contention`: another Python process's GIL and lock waits.

The same probe as `sweep --contention` (measure/contention.py: bpftrace as root, else the
sampled thread states), on a running process for the recording's duration. Its threads
are named from py-spy's dump (Python names and the function each runs) where py-spy can
attach, else from the kernel (`comm`, the main thread as MainThread). The waiting thread
whose holders are looked for is the main thread: in `perfkit serve` it steps the engine
and serves HTTP (role engine+http); in another program it is its main thread.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from perfkit.measure.contention import ContentionProbe
from perfkit.measure.envinfo import pyspy_path
from perfkit.measure.threads import ENGINE_HTTP, MAIN
from perfkit.result.contention import ContentionSection
from perfkit.summary.contention import contention_section

_BOOT = ("threading.py", "<frozen")


def _entry(frames: list[dict[str, object]]) -> str:
    """The thread's own function: the outermost frame that is not threading's machinery
    (py-spy lists frames leaf first)."""
    for frame in reversed(frames):
        if not str(frame.get("short_filename", "")).startswith(_BOOT):
            return f"{frame.get('short_filename')}:{frame.get('name')}"
    return ""


def pyspy_threads(pid: int) -> tuple[dict[int, str], dict[int, str]]:
    """(tid -> Python name, tid -> the function it runs) from `py-spy dump --json`;
    ({pid: "MainThread"}, {}) where py-spy is missing or may not attach."""
    exe = pyspy_path()
    names: dict[int, str] = {pid: "MainThread"}
    if exe is None:
        return names, {}
    try:
        out = subprocess.run([exe, "dump", "--pid", str(pid), "--json"], capture_output=True,
                             text=True, timeout=30).stdout
        threads = json.loads(out)
    except (OSError, subprocess.SubprocessError, ValueError):
        return names, {}
    code = {}
    for t in threads if isinstance(threads, list) else []:
        tid = t.get("os_thread_id")
        if isinstance(tid, int):
            names[tid] = str(t.get("thread_name") or f"tid {tid}")
            code[tid] = _entry(t.get("frames") or [])
    return names, {k: v for k, v in code.items() if v}


def is_perfkit_serve(pid: int) -> bool:
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    words = [Path(a.decode(errors="replace")).name for a in args]
    return "serve" in words and any(w == "perfkit" or w.startswith("perfkit") for w in words)


def start_probe(pid: int) -> ContentionProbe:
    """Started (bpftrace attaches in a second or two, before the recording starts)."""
    names, code = pyspy_threads(pid)
    role = ENGINE_HTTP if is_perfkit_serve(pid) else MAIN
    probe = ContentionProbe(pid, engine_tid=pid, engine_role=role, python_names=names,
                            thread_code=code)
    probe.start()
    return probe


def finish_probe(probe: ContentionProbe) -> ContentionSection:
    return contention_section(probe.stop(), [], [], 0.0, output_tokens=0)
