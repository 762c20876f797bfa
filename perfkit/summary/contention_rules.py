"""Contention named: the engine thread waited for the GIL, or for a lock, inside its steps.

With --contention each in-process level has the engine thread's waits placed in its
steps (result/contention.py). A finding fires at the first level where the engine thread
spent at least STEP_SHARE of its step time waiting for the GIL (gil_contention) or in a
lock (lock_contention), and at least MIN_PER_STEP_S a step: a share of a few
microseconds is noise, not contention. Each names the waiting thread, the holder (GIL:
the Python threads that ran while it waited; lock: the thread that released it), the
share of the p99 tails' extra time the wait explains (summary/tail_rules.py), and a fix
in the user's terms. Waits are measured directly (not inferred from timings), so these
rules judge levels on a contended machine too: another process's load lengthens the
holder's turn but does not make a thread of this process hold the GIL.
"""

from __future__ import annotations

from perfkit.config.schema import Profile
from perfkit.measure.threads import PERFKIT
from perfkit.result.contention import ContentionSection, Holder, StepGroup
from perfkit.result.level import LevelResult
from perfkit.result.sweep import Finding
from perfkit.summary.tail_rules import explained

STEP_SHARE = 0.10  # of the engine's step time spent waiting
MIN_PER_STEP_S = 0.0002  # and at least this much a step
KIND = {"gil": ("gil_contention", "the GIL", "gil_wait_s"),
        "lock": ("lock_contention", "a lock", "lock_wait_s")}


def _wait(g: StepGroup | None, kind: str) -> float | None:
    return None if g is None else getattr(g, KIND[kind][2])


def _share(sec: ContentionSection, kind: str) -> tuple[float, float] | None:
    """(mean wait per step, its share of the mean step) over all the level's steps."""
    g = sec.step_group("all")
    wait = _wait(g, kind)
    if g is None or wait is None or g.step_s <= 0:
        return None
    return wait, wait / g.step_s


def _tails(lv: LevelResult, kind: str) -> dict[str, float]:
    """metric -> share of its p99 tail's extra time this wait explains."""
    out: dict[str, float] = {}
    sec = lv.tail
    for metric in ("ttft", "tpot"):
        tail = sec.group(metric, "tail") if sec else None
        median = sec.group(metric, "median") if sec else None
        if tail is not None and median is not None:
            share = explained(tail, median).get(kind)
            if share is not None:
                out[metric] = share
    return out


def _holders(sec: ContentionSection, kind: str) -> list[Holder]:
    return sec.gil_holders if kind == "gil" else sec.lock_holders


def _holder_text(sec: ContentionSection, kind: str) -> str:
    rows = _holders(sec, kind)
    if not rows:
        how = ("the holder is not seen without eBPF; `py-spy dump --pid PID` shows which "
               "thread holds the GIL" if sec.source == "sampled" else "no holder was seen")
        return f" ({how})"
    verb = "ran during" if kind == "gil" else "released it after"
    listed = "; ".join(f"{h.name} ({h.role}) {verb} {h.share:.0%} of it" for h in rows[:3])
    return f": {listed}"


def _fix(sec: ContentionSection, kind: str) -> str:
    top = next(iter(_holders(sec, kind)), None)
    who = f"thread {top.name!r}" if top is not None else "the holding thread"
    if top is not None and top.role == PERFKIT:
        return (f"The holder is perfkit's own {top.name}: lower --stack-rate, or run without "
                "--stacks, to cut its turns.")
    if kind == "gil":
        return (f"Move the work of {who} out of the engine's process (a subprocess, "
                "multiprocessing, or a separate service): in-process it holds the GIL the "
                "engine needs between its torch calls; or make it yield (smaller pure-Python "
                "batches, code that releases the GIL).")
    return (f"Shorten the critical section of {who}: no sleep, I/O or slow work while it "
            "holds the lock (copy what it needs, then release); or take the lock out of the "
            "engine's step (hand the data over through a queue).")


def _finding(lv: LevelResult, sec: ContentionSection, kind: str, wait: float,
             share: float) -> Finding:
    fid, what, field = KIND[kind]
    engine = sec.thread(sec.engine_tid)
    name = engine.name if engine else f"tid {sec.engine_tid}"
    tail, median = sec.step_group("tail"), sec.step_group("median")
    tails = _tails(lv, kind)
    explains = "; ".join(f"it explains {v:.0%} of the p99 {m.upper()} tail's extra time"
                         for m, v in tails.items())
    tail_text = "" if tail is None or _wait(tail, kind) is None else (
        f" (its slowest steps: {(_wait(tail, kind) or 0) * 1e3:.2f} of "
        f"{tail.step_s * 1e3:.2f} ms; median steps {(_wait(median, kind) or 0) * 1e3:.2f} of "
        f"{(median.step_s if median else 0) * 1e3:.2f} ms)")
    holders = _holders(sec, kind)
    return Finding(
        fid, "warning",
        f"The engine thread ({name}) waited for {what} {share:.0%} of its step time at "
        f"{lv.point.label}: {wait * 1e3:.2f} ms a step{tail_text}"
        f"{_holder_text(sec, kind)}." + (f" {explains[0].upper()}{explains[1:]}."
                                          if explains else ""),
        {"level": lv.point.label, "waiting_thread": name, "waiting_role":
         engine.role if engine else None, "source": sec.source, "gil_probe": sec.gil_probe,
         "wait_per_step_s": wait, "step_share": share,
         "steps": {g.which: {"num_steps": g.num_steps, "step_s": g.step_s,
                             "wait_s": _wait(g, kind)} for g in sec.steps},
         "holders": [{"name": h.name, "role": h.role, "tid": h.tid, "seconds": h.seconds,
                      "share": h.share} for h in holders],
         "tail_explained_share": tails, field: engine and getattr(engine.times, field)},
        _fix(sec, kind))


def contention(levels: list[LevelResult], profile: Profile) -> list[Finding]:
    found = []
    for kind in ("gil", "lock"):
        for lv in levels:
            sec = lv.contention
            measured = None if sec is None else _share(sec, kind)
            if sec is None or measured is None:
                continue
            wait, share = measured
            if share >= STEP_SHARE and wait >= MIN_PER_STEP_S:
                found.append(_finding(lv, sec, kind, wait, share))
                break
    return found
