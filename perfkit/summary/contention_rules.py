"""Contention named: the engine thread waited for the GIL, or for a lock.

With --contention each in-process level has the engine thread's waits (result/
contention.py). A finding fires at the first level where the engine thread spent at
least BUSY_SHARE of its busy time (on a CPU, or asleep waiting for the GIL or a lock; not
idle, not waiting for a core) waiting for the GIL (gil_contention; GC pauses left out: a
collecting thread holds the GIL, and the GC findings name that) or in a lock
(lock_contention), and at least MIN_WAIT_S in all. Busy time, not the level's length: a
loaded machine stretches the level with run-queue waits and would dilute the share (a GIL
hog measured 37% of busy time both on a quiet machine and beside 1.7 busy cores, 24% and
10% of the level). The wait counts between steps too: the engine thread runs the event
loop there, and a wait delays the next step as much as one inside it. The steps' share
(inside the slowest and the median steps) is evidence. A GIL wait is named only when
threads of the process were seen running during at least HELD_SHARE of it: a holder that
lost its core while holding the GIL is the machine's load (the run queue), not a hog
(measured beside 1.8 busy cores: 19% of busy time, holders seen in 10% of it). Each finding
names the waiting thread, the holder (GIL: the Python threads that ran while it waited;
lock: the thread that released it), the share of the p99 tails' extra time the wait
explains (summary/tail_rules.py), and a fix in the user's terms. Waits are measured
directly (not inferred from timings), so these rules judge levels on a contended machine
too: another process's load lengthens the holder's turn, but it does not make a thread of
this process hold the GIL (a woken waiter's wait for a core is the run queue's).
"""

from __future__ import annotations

from perfkit.config.schema import Profile
from perfkit.measure.threads import NATIVE, PERFKIT
from perfkit.result.contention import ContentionSection, Holder, StepGroup
from perfkit.result.level import LevelResult
from perfkit.result.sweep import Finding
from perfkit.summary.tail_rules import explained

BUSY_SHARE = 0.15  # of the engine thread's busy time spent waiting (clean runs: 2-7%)
MIN_WAIT_S = 0.05  # and at least this much in all
HELD_SHARE = 0.25  # GIL: Python threads seen running during at least this share of it
KIND = {"gil": ("gil_contention", "the GIL", "gil_wait_s"),
        "lock": ("lock_contention", "a lock", "lock_wait_s")}


def _wait(g: StepGroup | None, kind: str) -> float | None:
    return None if g is None else getattr(g, KIND[kind][2])


def _waits(sec: ContentionSection) -> tuple[float | None, float | None, float | None]:
    """The engine thread's (GIL wait outside GC pauses, lock wait, busy time): busy is its
    CPU time plus both waits (None where /proc gave no CPU time: then the phase's
    length stands in)."""
    engine = sec.thread(sec.engine_tid)
    if engine is None:
        return None, None, None
    t = engine.times
    gil = None if t.gil_wait_s is None else max(0.0, t.gil_wait_s - (sec.gil_in_gc_s or 0.0))
    busy = None if t.cpu_s is None else t.cpu_s + (gil or 0.0) + (t.lock_wait_s or 0.0)
    return gil, t.lock_wait_s, busy


def _share(sec: ContentionSection, kind: str) -> tuple[float, float, float] | None:
    """(the engine thread's wait, its busy time, the wait's share of it)."""
    gil, lock, busy = _waits(sec)
    wait = gil if kind == "gil" else lock
    base = busy if busy else sec.window_s
    if wait is None or base <= 0:
        return None
    return wait, base, wait / base


def _held(sec: ContentionSection) -> float:
    """Of the engine's GIL wait, the share Python threads were seen running."""
    return sum(h.share for h in sec.gil_holders if h.role != NATIVE)


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


MIN_HOLDER_SHARE = 0.01  # holders below this share are left out of the message


def _who(h: Holder) -> str:
    return f"{h.name} ({h.role}{', ' + h.code if h.code else ''})"


def _holder_text(sec: ContentionSection, kind: str) -> str:
    rows = [h for h in _holders(sec, kind) if h.share >= MIN_HOLDER_SHARE][:3]
    if not rows:
        how = ("The holder is not seen without eBPF: the off-CPU stacks (--stacks) show "
               "where threads wait" + ("; `py-spy dump --pid PID` shows which thread holds "
                                       "the GIL" if kind == "gil" else "")
               if sec.source == "sampled" else "No holder was seen")
        return f". {how}"
    if kind == "gil":
        return ". Held by (ran while it waited): " + ", ".join(
            f"{_who(h)} {h.share:.0%}" for h in rows)
    return ". Held by (released it, ending the wait): " + ", ".join(
        f"{_who(h)} {h.share:.0%}" for h in rows)


def _fix(sec: ContentionSection, kind: str) -> str:
    top = next(iter(_holders(sec, kind)), None)
    who = ("the holding thread" if top is None else f"thread {top.name!r}"
           + (f" ({top.code})" if top.code else ""))
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


def _steps_text(sec: ContentionSection, kind: str) -> str:
    parts = []
    for which, label in (("all", "a step"), ("tail", "in its slowest steps"),
                         ("median", "in the median ones")):
        g = sec.step_group(which)
        wait = _wait(g, kind)
        if g is not None and wait is not None:
            parts.append(f"{wait * 1e3:.2f} of {g.step_s * 1e3:.2f} ms {label}")
    return f"; inside the steps {', '.join(parts)}" if parts else ""


def _gc_text(sec: ContentionSection, kind: str) -> str:
    gc = sec.gil_in_gc_s
    return f", besides {gc:.2f} s in GC pauses" if kind == "gil" and gc and gc >= 0.005 \
        else ""


MIN_TAIL_SHARE = 0.05  # a tail share under this is not worth a sentence


def _tails_text(tails: dict[str, float]) -> str:
    shown = {m: v for m, v in tails.items() if v >= MIN_TAIL_SHARE}
    if not shown:
        return (" It explains under 5% of the p99 tails' extra time: they are something "
                "else's." if tails else "")
    shares = " and ".join(f"{v:.0%} of the p99 {m.upper()} tail's" for m, v in shown.items())
    return f" It explains {shares} extra time."


def _finding(lv: LevelResult, sec: ContentionSection, kind: str, wait: float, busy: float,
             share: float) -> Finding:
    _, what, _ = KIND[kind]
    engine = sec.thread(sec.engine_tid)
    name = engine.name if engine else f"tid {sec.engine_tid}"
    tails = _tails(lv, kind)
    parts = (
        "warning",
        f"The engine thread ({name}) waited for {what} {share:.0%} of its busy time at "
        f"{lv.point.label}: {wait:.2f} s of {busy:.2f} s on a CPU or waiting"
        f"{_gc_text(sec, kind)} ({wait / sec.window_s:.0%} of the {sec.window_s:.2f} s "
        f"level{_steps_text(sec, kind)}){_holder_text(sec, kind)}.{_tails_text(tails)}",
        {"level": lv.point.label, "waiting_thread": name,
         "waiting_role": engine.role if engine else None, "source": sec.source,
         "gil_probe": sec.gil_probe, "wait_s": wait, "busy_s": busy,
         "window_s": sec.window_s, "busy_share": share, "level_share": wait / sec.window_s,
         "gil_in_gc_s": sec.gil_in_gc_s if kind == "gil" else None,
         "steps": {g.which: {"num_steps": g.num_steps, "step_s": g.step_s,
                             "wait_s": _wait(g, kind)} for g in sec.steps},
         "holders": [{"name": h.name, "role": h.role, "code": h.code, "tid": h.tid,
                      "seconds": h.seconds, "share": h.share} for h in _holders(sec, kind)],
         "tail_explained_share": tails},
        _fix(sec, kind))
    return Finding("gil_contention", *parts) if kind == "gil" else \
        Finding("lock_contention", *parts)


def contention(levels: list[LevelResult], profile: Profile) -> list[Finding]:
    found = []
    for kind in ("gil", "lock"):
        for lv in levels:
            sec = lv.contention
            measured = None if sec is None else _share(sec, kind)
            if sec is None or measured is None:
                continue
            wait, busy, share = measured
            held = kind == "lock" or _held(sec) >= HELD_SHARE
            if share >= BUSY_SHARE and wait >= MIN_WAIT_S and held:
                found.append(_finding(lv, sec, kind, wait, busy, share))
                break
    return found
