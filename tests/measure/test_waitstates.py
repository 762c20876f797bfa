"""The fallback without eBPF: a thread asleep in a futex on the GIL's words waits for the
GIL, in any other futex for a lock; a sleeper is idle; a thread whose CPU time rose ran;
the threads that ran while the engine thread waited for the GIL are the holder's
candidates. The rules on a fake /proc (exact); a live lock waiter and spinner (the GIL
waits of live threads depend on the machine's load: on a loaded one a woken waiter sits
in the run queue, which is not the GIL's)."""

from __future__ import annotations

import os
import threading
import time

import pytest

from perfkit.measure.elfsyms import GilImage, find_gil
from perfkit.measure.waitstates import WaitSampler

GIL, _ = find_gil(os.getpid()) if os.path.exists("/proc/self/maps") else (None, "")
CHECK = WaitSampler(os.getpid(), GIL).check() if GIL else "no /proc"
needs_proc = pytest.mark.skipif(bool(CHECK) or GIL is None, reason=f"fallback unavailable: "
                                f"{CHECK}")


def spin(stop: threading.Event) -> None:
    while not stop.is_set():
        sum(i * i for i in range(300))  # pure Python: holds the GIL


def write_task(root, tid: int, cpu_ns: int, state: str, syscall: str) -> None:
    task = root / "100" / "task" / str(tid)
    task.mkdir(parents=True, exist_ok=True)
    (task / "schedstat").write_text(f"{cpu_ns} 0 1\n")
    (task / "stat").write_text(f"{tid} (py thread) {state} 1 2 3\n")
    (task / "syscall").write_text(syscall + "\n")


def test_states_from_proc(tmp_path) -> None:
    gil = GilImage("/lib/libpython3.11.so", [(0x7F00_0000, 0x7F00_1000)])
    futex = "202" if os.uname().machine == "x86_64" else "98"
    rows = {101: (0, "S", f"{futex} 0x7f000750 0x89 0x0"),  # the GIL's word
            102: (0, "S", f"{futex} 0x55aa0010 0x80 0x0"),  # a heap lock's
            103: (0, "S", "230 0x1 0x0 0x7ffc"),  # clock_nanosleep
            104: (0, "R", "running"),  # runnable: waiting for a core
            105: (0, "S", "running")}
    for tid, (cpu, state, call) in rows.items():
        write_task(tmp_path, tid, cpu, state, call)
    write_task(tmp_path, 100, 0, "S", "232 0x3")
    sampler = WaitSampler(100, gil, rate_hz=100, engine_tid=101, proc=str(tmp_path))
    assert sampler.check() == ""
    sampler.sample_once()  # first tick: nothing to compare the CPU clocks with
    assert sampler.data.counts == {}
    write_task(tmp_path, 105, 5_000_000, "S", "running")  # ran 5 ms of the 10 ms tick
    sampler.sample_once()
    got = {tid: next(iter(c)) for tid, c in sampler.data.counts.items()}
    assert got == {100: "idle", 101: "gil", 102: "lock", 103: "idle", 104: "runnable",
                   105: "on"}
    assert sampler.data.gil_ran == {105: 1}  # it ran while the engine waited for the GIL
    assert sorted((tid, kind) for tid, _, kind in sampler.data.waits) == [(101, "gil"),
                                                                     (102, "lock")]
    sampler.mark()
    assert sampler.data.counts == {} and sampler.data.ticks == 0


@needs_proc
def test_a_live_lock_waiter_waits_for_a_lock_and_a_spinner_runs() -> None:
    lock, stop = threading.Lock(), threading.Event()
    lock.acquire()
    ids: list[int] = []
    waiter = threading.Thread(target=lambda: (ids.append(threading.get_native_id()),
                                              lock.acquire()), daemon=True)
    spinner = threading.Thread(target=spin, args=(stop,), daemon=True, name="spinner")
    for t in (waiter, spinner):
        t.start()
    time.sleep(0.05)
    sampler = WaitSampler(os.getpid(), GIL, rate_hz=200)
    assert sampler.start() == ""
    t0 = time.monotonic()  # 0.6 s at least, then until 21 ticks (a loaded machine gets
    while (elapsed := time.monotonic() - t0) < 0.6 or (  # fewer a second), 10 s at most
            sampler.data.ticks <= 20 and elapsed < 10):
        time.sleep(0.05)
    data = sampler.stop()
    stop.set()
    lock.release()
    for t in (waiter, spinner):
        t.join(5)
    locked, busy = data.counts[ids[0]], data.counts[spinner.native_id]
    assert locked["lock"] >= 0.8 * sum(locked.values())  # always in the lock's futex
    assert locked["gil"] == locked["on"] == 0
    assert busy["on"] > 0 and busy["lock"] == 0
    assert data.cpu_s > 0 and data.ticks > 20


def test_unreadable_proc_is_a_reason_not_a_zero() -> None:
    sampler = WaitSampler(2**22 + 4321, None)
    assert sampler.start() == "no /proc/PID/task/*/schedstat on this machine"
    assert sampler.stop().counts == {} and sampler.data.reason
