"""Stacks of this process during a window: py-spy, or the in-process fallback.

    with record_level(out_dir, "4") as rec:   # one sweep level
        run_level()
    rec.folded_path, rec.to_dict()            # filled after the block

`sampler="auto"` starts `py-spy record --pid <own pid>` (see pyspy.py for the
ptrace handling) and falls back to perfkit's in-process sampler when py-spy is
missing or cannot attach, with a warning that names the sampler used and how
to enable py-spy. Either way the window ends as one folded file
(`NAME.folded`), rendered to `NAME.speedscope.json` and `NAME.svg`. The in-process sampler
(always running, beside py-spy too) also writes `NAME.offcpu.folded`: stacks of threads
that were waiting, not running (stacks/offcpu.py), where this machine can tell.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from perfkit.errors import PerfkitError
from perfkit.measure.envinfo import ptrace_scope, pyspy_path
from perfkit.result.stacks import TailStacksInfo
from perfkit.stacks.folded import Folded, read_folded, write_folded
from perfkit.stacks.pyspy import ENABLE_HINT, PySpyProcess, probe_parent_attach, record_args
from perfkit.stacks.speedscope import write_speedscope
from perfkit.stacks.svg import write_svg
from perfkit.stacks.timed_sampler import TimedSampler

SAMPLERS = ("auto", "py-spy", "thread")
THREAD_LIMITS = "Python frames of this process only, threads that use no CPU left out"


class StacksError(PerfkitError):
    """Stacks were asked for and cannot be recorded (no py-spy, no ptrace permission)."""

    exit_code = 1


@dataclass
class StackRecording:
    sampler_used: str  # "py-spy", "thread" (in-process fallback), or "pending" inside the block
    reason: str  # why not py-spy when sampler_used == "thread"; "" otherwise
    folded_path: Path | None  # the artifact: folded stacks, integer counts
    speedscope_path: Path | None  # speedscope JSON rendered from the folded file
    svg_path: Path | None  # flame graph SVG rendered from the folded file
    num_samples: int  # stack samples: one per busy thread per tick
    duration_s: float  # wall time of the recording window
    rate_hz: float  # ticks per second asked for
    native: bool  # native (C/C++) frames included (py-spy --native only)
    warning: str = ""  # for stderr: fallback used, py-spy trouble; "" when none
    stacks: Folded = field(default_factory=dict, repr=False)  # in memory, not in JSON
    # Timed samples for the tail stacks (stacks/tail.py); in memory, not in JSON.
    timed: TimedSampler | None = field(default=None, repr=False)
    tail: TailStacksInfo | None = None  # set by run._with_stacks; not in JSON (StacksInfo is)
    offcpu_folded_path: Path | None = None  # NAME.offcpu.folded: where threads waited
    offcpu_samples: int = 0  # one per waiting thread per tick
    offcpu_reason: str = ""  # off-CPU stacks unavailable: why; "" when recorded

    @classmethod
    def pending(cls, rate_hz: float, native: bool) -> StackRecording:
        return cls("pending", "", None, None, None, 0, 0.0, rate_hz, native)

    def fill(self, other: StackRecording) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(other, f.name))

    def to_dict(self) -> dict[str, Any]:
        """For the result JSON: paths as strings, no stacks (the folded file has them)."""
        out = {f.name: getattr(self, f.name) for f in fields(self)
               if f.name not in ("stacks", "timed", "tail")}
        for key in ("folded_path", "speedscope_path", "svg_path", "offcpu_folded_path"):
            out[key] = None if out[key] is None else str(out[key])
        return out


def output_paths(out_dir: Path, name: str) -> tuple[Path, Path, Path]:
    """(folded, speedscope, svg) for one recording named NAME."""
    base = Path(out_dir)
    return base / f"{name}.folded", base / f"{name}.speedscope.json", base / f"{name}.svg"


def finish(stacks: Folded, out_dir: Path, name: str, **info: Any) -> StackRecording:
    """Write the folded artifact and render the others from it."""
    folded, speedscope, svg = output_paths(out_dir, name)
    write_folded(folded, stacks)
    write_speedscope(speedscope, stacks, name)
    write_svg(svg, stacks, name)
    return StackRecording(folded_path=folded, speedscope_path=speedscope, svg_path=svg,
                          num_samples=sum(stacks.values()), stacks=stacks, **info)


def offcpu_info(sampler: TimedSampler, out_dir: Path, name: str) -> dict[str, Any]:
    """NAME.offcpu.folded from the sampler's waiting samples, or the reason there is
    none. No file when no thread waited at any tick (flamegraph.pl refuses an empty
    one): the path is None, the count 0 and the reason empty, since it could be told."""
    if sampler.offcpu_reason:
        return {"offcpu_reason": sampler.offcpu_reason}
    if not sampler.offcpu:
        return {"offcpu_samples": 0}
    path = Path(out_dir) / f"{name}.offcpu.folded"
    write_folded(path, dict(sampler.offcpu))
    return {"offcpu_folded_path": path, "offcpu_samples": sum(sampler.offcpu.values())}


def fallback_warning(reason: str, native: bool) -> str:
    lost = "; --native frames are not available" if native else ""
    return (f"stacks: recorded with perfkit's in-process sampler, not py-spy ({reason}): "
            f"{THREAD_LIMITS}{lost}. {ENABLE_HINT[0].upper()}{ENABLE_HINT[1:]}.")


class StackRecorder:
    """start() ... stop() -> StackRecording, for this process; one window per instance."""

    def __init__(self, out_dir: Path, name: str = "stacks", rate_hz: float = 100.0,
                 native: bool = False, sampler: str = "auto") -> None:
        if sampler not in SAMPLERS:
            raise PerfkitError(f"stack sampler must be one of {', '.join(SAMPLERS)}; "
                               f"got {sampler!r}")
        if rate_hz <= 0:
            raise PerfkitError(f"--stack-rate must be > 0 Hz, got {rate_hz:g}")
        self.out_dir, self.name = Path(out_dir), name
        self.rate_hz, self.native, self.sampler = rate_hz, native, sampler
        self._raw = self.out_dir / f".{name}.pyspy.raw"  # py-spy's own output
        self._spy: PySpyProcess | None = None
        self._thread: TimedSampler | None = None  # the whole level's, or the tail's only
        self._reason = ""  # why the thread sampler runs instead of py-spy
        self._t0_s = 0.0

    def start(self) -> None:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self._t0_s = time.monotonic()
        if self.sampler == "thread":
            self._start_thread()
            return
        why = self._start_pyspy()
        if why and self.sampler == "py-spy":
            raise StacksError(f"py-spy cannot record this process: {why}; {ENABLE_HINT}")
        self._reason = why
        self._start_thread()  # beside py-spy: timed samples for the tail stacks

    def _start_pyspy(self) -> str:
        exe = pyspy_path()
        if exe is None:
            return "py-spy not found; pip install py-spy"
        args = record_args(exe, self._raw, self.rate_hz, self.native, pid=os.getpid())
        spy = PySpyProcess(args, target_is_parent=True)
        why = spy.start()
        if why:
            return f"py-spy could not attach: {why}"
        self._spy = spy
        return ""

    def _start_thread(self) -> None:
        self._thread = TimedSampler(self.rate_hz)
        self._thread.start()

    def stop(self) -> StackRecording:
        duration_s = time.monotonic() - self._t0_s
        info: dict[str, Any] = {"duration_s": duration_s, "rate_hz": self.rate_hz}
        assert self._thread is not None, "stop() without start()"
        timed_stacks = self._thread.stop()
        if self._spy is not None:
            stacks, warning = self._stop_pyspy(self._spy)
            info |= {"sampler_used": "py-spy", "reason": "", "native": self.native,
                     "warning": warning}
        else:
            stacks = timed_stacks
            warning = fallback_warning(self._reason, self.native) if self._reason else ""
            info |= {"sampler_used": "thread", "reason": self._reason or "thread sampler chosen",
                     "native": False, "warning": warning}
        return finish(stacks, self.out_dir, self.name, timed=self._thread,
                      **info | offcpu_info(self._thread, self.out_dir, self.name))

    def _stop_pyspy(self, spy: PySpyProcess) -> tuple[Folded, str]:
        why = spy.stop()
        if not self._raw.exists():
            tail = "; ".join(spy.lines[-3:])
            return {}, f"stacks: py-spy wrote no samples ({why or tail})"
        stacks = read_folded(self._raw)
        self._raw.unlink()
        return stacks, (f"stacks: {why}" if why else "")


@contextmanager
def record_level(out_dir: Path, label: str, rate_hz: float = 100.0, native: bool = False,
                 sampler: str = "auto") -> Iterator[StackRecording]:
    """Record this process while the block runs; files `level-LABEL.*` in out_dir.
    The yielded StackRecording is filled when the block exits (also on an exception)."""
    recorder = StackRecorder(out_dir, f"level-{label}", rate_hz, native, sampler)
    holder = StackRecording.pending(rate_hz, native)
    recorder.start()
    try:
        yield holder
    finally:
        holder.fill(recorder.stop())


def stacks_status() -> tuple[bool, str]:
    """Will `--stacks` use py-spy here? (True, how) or (False, what happens instead and why).
    Probes by letting py-spy dump this very process (about half a second)."""
    exe = pyspy_path()
    fallback = f"perfkit falls back to its in-process sampler ({THREAD_LIMITS})"
    if exe is None:
        return False, f"py-spy not found (pip install py-spy); {fallback}"
    scope = ptrace_scope()
    if scope == 3:
        return False, f"kernel.yama.ptrace_scope=3 forbids ptrace; {fallback}"
    why = probe_parent_attach(exe)
    if why:
        return False, f"py-spy cannot attach to perfkit ({why}); {fallback}; {ENABLE_HINT}"
    how = {
        None: "no Yama ptrace restrictions",
        0: "ptrace_scope 0",
        1: "ptrace_scope 1: perfkit allows its py-spy child with PR_SET_PTRACER",
        2: "ptrace_scope 2: this process has CAP_SYS_PTRACE",
    }.get(scope, f"ptrace_scope {scope}")
    return True, f"py-spy can record perfkit's own process ({how})"
