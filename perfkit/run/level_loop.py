"""run_sweep: a whole sweep as a library call, in-process (perfkit.sweep) or against a
target (perfkit.remote); it sits above both.

    profile -> plan -> for each (level, repeat), repeats interleaved:
                          [stacks around] run one level -> write the result file
            -> knee, findings -> SweepResult

A UI follows along through `SweepEvents` (progress, per-level summaries); `stop()` is
asked before every level, so a signal handler can end the sweep after the current one.
Interrupted sweeps return what they measured with `complete=False`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from perfkit.config.profile import profile_dict, profile_sha256
from perfkit.config.schema import Profile
from perfkit.errors import PerfkitError
from perfkit.measure.envinfo import collect
from perfkit.records import RequestRecord
from perfkit.remote.options import TargetOptions
from perfkit.result.codec import from_json
from perfkit.result.level import LevelResult, LoadPoint
from perfkit.result.stacks import StacksInfo, paths_relative_to
from perfkit.result.sweep import Plan, ProfileInfo, SweepResult, TargetInfo
from perfkit.summary.findings import find_all
from perfkit.summary.knee_points import knee_of
from perfkit.sweep.plan import SweepPlan, plan_from_profile
from perfkit.sweep.writer import ResultWriter
from perfkit.traces.session import TraceOptions, TraceSession, open_traces

__all__ = ["TraceOptions"]

# Runs one (level, repeat), calling back per request: the in-process engine or a target.
LevelRunner = Callable[[LoadPoint, int, Callable[[RequestRecord], None]], LevelResult]


@dataclass(frozen=True)
class StackOptions:
    out_dir: Path  # level-LABEL.folded / .speedscope.json / .svg go here
    rate_hz: float
    native: bool


class SweepEvents(Protocol):
    """What a UI hears while a sweep runs (all optional to act on)."""

    def level_started(self, index: int, total: int, point: LoadPoint, repeat: int,
                      plan: SweepPlan) -> None: ...
    def request_done(self, record: RequestRecord) -> None: ...
    def level_done(self, level: LevelResult, recording: Any | None, kernels: Any | None
                   ) -> None: ...


class QuietEvents:
    def level_started(self, index: int, total: int, point: LoadPoint, repeat: int,
                      plan: SweepPlan) -> None:
        pass

    def request_done(self, record: RequestRecord) -> None:
        pass

    def level_done(self, level: LevelResult, recording: Any | None, kernels: Any | None
                   ) -> None:
        pass


def _never() -> bool:
    return False


def _in_process(prof: Profile, plan: SweepPlan) -> tuple[LevelRunner, dict[str, Any], None]:
    from perfkit.engine.engine import Engine
    from perfkit.sweep.runner import run_level
    from perfkit.sweep.sizing import check_fits

    check_fits(prof)
    engine = Engine(prof)

    def run_one(point: LoadPoint, repeat: int, tick: Callable[[RequestRecord], None]
                ) -> LevelResult:
        return run_level(engine, prof, plan, point, repeat, tick)

    return run_one, {"device": str(engine.device)}, None


def _remote(prof: Profile, plan: SweepPlan, opts: TargetOptions, stack: ExitStack,
            traces: TraceSession) -> tuple[LevelRunner, dict[str, Any], TargetInfo]:
    from perfkit.remote.driver import RemoteRunner
    from perfkit.remote.target import connect

    remote = replace(connect(opts, prof, plan), traces=traces)
    runner = stack.enter_context(RemoteRunner(remote))  # its workers, if any, until the end
    target = TargetInfo(remote.target.url, remote.target.model, remote.scrape_url)
    # Results of one served model compare with each other, not with in-process runs.
    return runner.level, {"device": "remote", "device_class": f"remote:{target.model}"}, target


def _header(prof: Profile, plan: SweepPlan, where: dict[str, Any],
            target: TargetInfo | None) -> SweepResult:
    env = collect()
    return SweepResult(
        profile=ProfileInfo(prof.name, profile_sha256(prof), profile_dict(prof)),
        environment=env.to_dict() | {"device_class": env.device_class} | where,
        plan=Plan([lv.label for lv in plan.levels], plan.num_requests, plan.num_warmup,
                  plan.repeats, plan.samplers),
        target=target)


def _exporting(run_one: LevelRunner, traces: TraceSession) -> LevelRunner:
    """--otlp-export: each level's own spans go to the collector once it has run."""
    if traces.export_url is None:
        return run_one

    def run(point: LoadPoint, repeat: int, tick: Callable[[RequestRecord], None]
            ) -> LevelResult:
        return traces.export(run_one(point, repeat, tick))

    return run


@contextmanager
def level_runner(prof: Profile, plan: SweepPlan, target: TargetOptions | None,
                 traces: TraceOptions | None = None
                 ) -> Iterator[tuple[LevelRunner, SweepResult]]:
    """What runs one level (the in-process engine, or the target), and the result's header;
    what the runner holds (a target's worker processes; with `traces` --server-traces'
    receiver, listening from before level 1) ends with the block."""
    with ExitStack() as stack:
        session = stack.enter_context(open_traces(traces, target is not None))
        run_one, where, info = (_in_process(prof, plan) if target is None
                                else _remote(prof, plan, target, stack, session))
        yield _exporting(run_one, session), _header(prof, plan, where, info)


def _with_stacks(run_one: LevelRunner, point: LoadPoint, repeat: int, plan: SweepPlan,
                 stacks: StackOptions, events: SweepEvents,
                 result_path: Path | None) -> LevelResult:
    from perfkit.stacks.record import record_level
    from perfkit.stacks.torch_kernels import cuda_kernel_profile

    label = point.key(repeat, plan.repeats > 1)
    with record_level(stacks.out_dir, label, stacks.rate_hz, stacks.native) as rec, \
            cuda_kernel_profile(stacks.out_dir / f"level-{label}.kernels.folded") as kernels:
        level = run_one(point, repeat, events.request_done)
    info = from_json(StacksInfo, rec.to_dict() | {"kernels": kernels.to_dict()}, "stacks")
    if level.tail is not None and rec.timed is not None:  # in-process: the slow steps' stacks
        from perfkit.stacks.tail import write_tail_stacks

        info = replace(info, tail=write_tail_stacks(rec.timed, level.tail.step_start_s,
                                                    level.tail.step_end_s, stacks.out_dir,
                                                    f"level-{label}"))
        rec.tail = info.tail
    info = paths_relative_to(info, None if result_path is None else result_path.parent)
    events.level_done(replace(level, stacks=info), rec, kernels)
    return replace(level, stacks=info)


class TargetDown(Exception):
    """The target refused every connection: no level after this one can measure anything."""


def check_target(level: LevelResult) -> None:
    """Raise TargetDown after a level whose target stopped answering."""
    if level.client is not None and level.client.target_down is not None:
        raise TargetDown(f"the target stopped answering at {level.point.label}: "
                         f"{level.client.target_down}")


def _levels(run_one: LevelRunner, plan: SweepPlan, writer: ResultWriter,
            stacks: StackOptions | None, events: SweepEvents, stop: Callable[[], bool]) -> bool:
    """Every (level, repeat); True when all ran; TargetDown after a level whose target
    stopped answering (that level written)."""
    runs = plan.schedule()
    for i, (point, repeat) in enumerate(runs):
        if stop():
            return False
        events.level_started(i, len(runs), point, repeat, plan)
        if stacks is None:
            level = run_one(point, repeat, events.request_done)
            events.level_done(level, None, None)
        else:
            level = _with_stacks(run_one, point, repeat, plan, stacks, events, writer.path)
        writer.add_level(level)
        check_target(level)
    return True


def run_sweep(prof: Profile, path: Path | None = None, *, samplers: bool = True,
              stacks: StackOptions | None = None, target: TargetOptions | None = None,
              events: SweepEvents | None = None, stop: Callable[[], bool] = _never,
              lockstep: Path | None = None, traces: TraceOptions | None = None,
              contention: bool = False) -> SweepResult:
    """Run every level of `prof` (its [sweep] and [workload]); the result file at `path`
    is rewritten after every level. KeyboardInterrupt ends the sweep after writing what
    was measured (complete=False). With `lockstep` (a socket path) the levels run in
    turns with a peer sweep, which this waits for once the engine is built. `traces`:
    --server-traces and --otlp-export (traces/session.py). With `contention`
    (in-process) GIL and lock waits are traced beside every level."""
    from perfkit.sweep.lockstep import in_lockstep

    if contention and (lockstep is not None or target is not None):
        raise PerfkitError("contention tracing runs on the in-process engine alone (its "
                           "tracer's clock is perf_counter's; lockstep pauses perfkit's)")
    plan = plan_from_profile(prof, samplers, contention)
    with level_runner(prof, plan, target, traces) as (run_one, header):
        writer = ResultWriter(path, header)
        with in_lockstep(lockstep, plan) as side:
            try:
                complete = _levels(run_one, plan, writer, stacks, events or QuietEvents(),
                                   stop)
            except KeyboardInterrupt:
                complete = False
            except TargetDown as down:
                complete = False
                writer.result = replace(writer.result, stop_reason=str(down))
    if side is not None:
        writer.result = replace(writer.result, lockstep=side.info())
    return conclude(writer, prof, complete)


def conclude(writer: ResultWriter, prof: Profile, complete: bool) -> SweepResult:
    """The knee and findings over every level written; the file's last rewrite."""
    levels = writer.result.levels
    knee = knee_of(levels) if levels else None
    writer.finish(knee, find_all(levels, prof, knee), complete)
    return writer.result
