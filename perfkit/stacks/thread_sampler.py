"""In-process stack sampler: the fallback when py-spy is missing or may not attach.

A daemon thread wakes `rate_hz` times a second, reads every other thread's
Python stack with `sys._current_frames()` and counts folded stacks in
py-spy's naming (`qualname (short/file.py:line)`, root -> leaf, file names
shortened against sys.path as py-spy does), so both samplers group the same way.

Like py-spy without `--idle`, threads that used no CPU since the last tick
(blocked in sleep, select, a lock) are not counted: each thread's CPU clock
(`pthread_getcpuclockid`) must have advanced by IDLE_SHARE of the interval.
Limits against py-spy: Python frames only (no `--native`), and the sampler
needs the GIL, so a tick can land late while C code holds it.

This file imports only the standard library: `python thread_sampler.py --out F
--rate HZ -- ARGS` runs a Python program (`-c CODE`, `-m MODULE` or a script)
under the sampler, for `perfkit stacks -- python ...` without py-spy.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from types import CodeType, FrameType

IDLE_SHARE = 0.05  # a thread counts as busy if it ran >= 5% of the sampling interval
_HERE = os.path.abspath(__file__)


def path_prefixes() -> list[str]:
    """sys.path entries as absolute directories, longest first ('' is the cwd)."""
    dirs = {os.path.abspath(p or os.getcwd()) for p in sys.path if isinstance(p, str)}
    return sorted(dirs, key=len, reverse=True)


def short_filename(filename: str, prefixes: list[str]) -> str:
    """'/venv/lib/python3.11/site-packages/torch/nn/functional.py' -> 'torch/nn/functional.py'
    (the longest sys.path entry is cut off, as py-spy shortens; other paths stay whole)."""
    if os.path.isabs(filename):
        for prefix in prefixes:
            if filename.startswith(prefix + os.sep):
                return filename[len(prefix) + 1:]
    return filename


class ThreadSampler:
    """start() ... stop() -> {folded stack: count}; one instance, one window."""

    def __init__(self, rate_hz: float = 100.0, idle: bool = False,
                 drop_root_files: tuple[str, ...] = ()) -> None:
        if rate_hz <= 0:
            raise ValueError(f"rate_hz must be > 0, got {rate_hz}")
        self.interval_s = 1.0 / rate_hz
        self.idle = idle  # True: count sleeping threads too (py-spy --idle)
        self.counts: Counter[str] = Counter()  # folded stack -> samples
        self.num_ticks = 0  # wake-ups that sampled
        self._drop_root = {f if f.startswith("<") else os.path.abspath(f)  # bootstrap frames
                           for f in drop_root_files}
        self._prefixes = path_prefixes()
        self._labels: dict[tuple[CodeType, int], str] = {}  # (code, line) -> frame label
        self._files: dict[str, str] = {}  # co_filename -> short name
        self._cpu_ns: dict[int, int] = {}  # thread ident -> CPU clock at the last tick
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="perfkit-stack-sampler",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> dict[str, int]:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        return dict(self.counts)

    def _run(self) -> None:
        next_s = time.monotonic()
        while not self._stop.wait(max(0.0, next_s - time.monotonic())):
            self.sample_once()
            next_s = max(next_s + self.interval_s, time.monotonic())  # late ticks don't burst

    def sample_once(self) -> None:
        me = threading.get_ident()
        self.num_ticks += 1
        for ident, frame in sys._current_frames().items():
            if ident == me or not (self.idle or self._busy(ident)):
                continue
            stack = self.fold(frame)
            if stack:
                self.counts[stack] += 1

    def _busy(self, ident: int) -> bool:
        try:
            now = time.clock_gettime_ns(time.pthread_getcpuclockid(ident))
        except (AttributeError, OSError):
            return True  # no per-thread CPU clock here: count every thread
        before = self._cpu_ns.get(ident)
        self._cpu_ns[ident] = now
        return before is not None and now - before >= IDLE_SHARE * self.interval_s * 1e9

    def fold(self, frame: FrameType | None) -> str:
        labels: list[str] = []
        while frame is not None:
            labels.append(self._label(frame))
            frame = frame.f_back
        labels.reverse()
        while labels and self._is_bootstrap(labels[0]):
            labels.pop(0)
        return ";".join(labels)

    def _is_bootstrap(self, label: str) -> bool:
        return bool(self._drop_root) and label.rsplit(" (", 1)[-1].split(":")[0] in self._drop_root

    def _label(self, frame: FrameType) -> str:
        code, line = frame.f_code, frame.f_lineno or 0
        label = self._labels.get((code, line))
        if label is None:
            name = getattr(code, "co_qualname", code.co_name)
            label = f"{name} ({self._short(code.co_filename)}:{line})"
            self._labels[(code, line)] = label
        return label

    def _short(self, filename: str) -> str:
        short = self._files.get(filename)
        if short is None:
            short = filename
            if os.path.isabs(filename) and os.path.abspath(filename) in self._drop_root:
                short = os.path.abspath(filename)  # kept whole so fold() can drop it
            else:
                short = short_filename(filename, self._prefixes)
            self._files[filename] = short
        return short


def write_folded_plain(path: str, counts: dict[str, int]) -> None:
    """The folded format without perfkit imports (see perfkit.stacks.folded)."""
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.writelines(f"{stack} {n}\n" for stack, n in sorted(counts.items()) if n > 0)
    os.replace(tmp, path)


def _prepare_python(args: list[str]) -> Callable[[], object]:
    """Set sys.argv and sys.path[0] as `python ARGS` would; return what runs the program."""
    import runpy

    if args[0] == "-c" and len(args) >= 2:
        sys.argv, sys.path[0] = ["-c", *args[2:]], ""
        code = compile(args[1], "<string>", "exec")
        return lambda: exec(code, {"__name__": "__main__", "__builtins__": __builtins__})
    if args[0] == "-m" and len(args) >= 2:
        sys.argv, sys.path[0] = [args[1], *args[2:]], os.getcwd()
        return lambda: runpy.run_module(args[1], run_name="__main__", alter_sys=True)
    if not args[0].startswith("-"):
        sys.argv, sys.path[0] = list(args), os.path.dirname(os.path.abspath(args[0]))
        return lambda: runpy.run_path(args[0], run_name="__main__")
    raise SystemExit(f"perfkit thread sampler: unsupported python arguments {args!r} "
                     "(use -c CODE, -m MODULE or a script path)")


def main(argv: list[str]) -> None:
    """thread_sampler.py --out FILE --rate HZ -- PYTHON-ARGS..."""
    if len(argv) < 6 or argv[0] != "--out" or argv[2] != "--rate" or argv[4] != "--":
        raise SystemExit("usage: thread_sampler.py --out FILE --rate HZ -- PYTHON-ARGS...")
    import runpy

    out, rate = argv[1], float(argv[3])
    run = _prepare_python(argv[5:])
    sampler = ThreadSampler(rate, drop_root_files=(_HERE, runpy.__file__, "<frozen runpy>"))
    sampler.start()
    try:
        run()
    finally:
        write_folded_plain(out, sampler.stop())


if __name__ == "__main__":
    main(sys.argv[1:])
