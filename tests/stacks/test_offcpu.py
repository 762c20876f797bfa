"""Off-CPU stacks: a thread blocked on a lock is where it waits (level-X.offcpu.folded),
never on-CPU; a thread burning CPU is on-CPU, never waiting; where the machine cannot
tell, the reason instead."""

from __future__ import annotations

import threading
import time

import pytest
from flamegraph_rule import check_folded_file

from perfkit.stacks import offcpu
from perfkit.stacks.record import StackRecorder
from perfkit.stacks.summary import offcpu_lines
from perfkit.stacks.timed_sampler import TimedSampler

CAN_TELL = offcpu.offcpu_reason()
needs_offcpu = pytest.mark.skipif(bool(CAN_TELL), reason=f"off-CPU unavailable: {CAN_TELL}")


def planted_waiter(lock: threading.Lock) -> None:
    with lock:  # blocks until the test releases it
        pass


def planted_burner(stop: threading.Event) -> int:
    n = 0
    while not stop.is_set():
        n += sum(i * i for i in range(200))
    return n


def share(stacks: dict[str, int], name: str) -> float:
    total = sum(stacks.values())
    return sum(n for s, n in stacks.items() if f"{name} (" in s) / total if total else 0.0


@needs_offcpu
def test_a_thread_blocked_on_a_lock_is_off_cpu_and_a_burner_on_cpu(tmp_path):
    lock, stop = threading.Lock(), threading.Event()
    lock.acquire()
    threads = [threading.Thread(target=planted_waiter, args=(lock,), daemon=True),
               threading.Thread(target=planted_burner, args=(stop,), daemon=True)]
    for t in threads:
        t.start()
    rec = StackRecorder(tmp_path, "level-1", rate_hz=200, sampler="thread")
    rec.start()
    time.sleep(0.8)
    out = rec.stop()
    stop.set()
    lock.release()
    for t in threads:
        t.join(5)
    assert out.offcpu_reason == "" and out.offcpu_folded_path == tmp_path / "level-1.offcpu.folded"
    waits = check_folded_file(out.offcpu_folded_path)
    oncpu = check_folded_file(out.folded_path)
    assert out.offcpu_samples == sum(waits.values())
    # the waiter is in about half the off-CPU samples (the other half: this thread asleep)
    assert share(waits, "planted_waiter") >= 0.3 and share(oncpu, "planted_waiter") == 0.0
    assert share(oncpu, "planted_burner") >= 0.5 and share(waits, "planted_burner") == 0.0
    assert "planted_waiter" in str(offcpu_lines(out))
    assert "offcpu_folded_path" in out.to_dict()


def test_a_machine_that_cannot_tell_says_why(tmp_path, monkeypatch):
    monkeypatch.setattr(offcpu, "offcpu_reason", lambda: "no /proc/self/task (test)")
    sampler = TimedSampler(100.0)
    assert sampler.offcpu_reason == "no /proc/self/task (test)"
    rec = StackRecorder(tmp_path, "level-2", rate_hz=100, sampler="thread")
    rec.start()
    time.sleep(0.1)
    out = rec.stop()
    assert out.offcpu_folded_path is None and out.offcpu_samples == 0
    assert out.offcpu_reason == "no /proc/self/task (test)"
    assert str(offcpu_lines(out)) == "off-CPU stacks unavailable: no /proc/self/task (test)"
    assert not (tmp_path / "level-2.offcpu.folded").exists()


def test_first_tick_and_runnable_threads_count_for_neither(monkeypatch):
    states = offcpu.CpuStates(0.01)
    me, native = threading.get_ident(), threading.get_native_id()
    assert states.state(me, native) is None  # nothing to compare with yet
    monkeypatch.setattr(offcpu, "read_state", lambda tid: "R")
    assert states.state(me, native) in (None, "on")  # runnable is never off-CPU
    assert offcpu.read_state(native) in ("R", "S", "D") or CAN_TELL


def test_no_thread_waited_writes_no_offcpu_file(tmp_path):
    from perfkit.stacks.record import offcpu_info
    sampler = TimedSampler(100.0)
    if sampler.offcpu_reason:
        pytest.skip(sampler.offcpu_reason)
    assert offcpu_info(sampler, tmp_path, "level-3") == {"offcpu_samples": 0}
    assert not (tmp_path / "level-3.offcpu.folded").exists()
