"""perfkit.clock: pauses for a lockstep peer are taken out of time and of CPU time."""

from __future__ import annotations

import threading
import time

import pytest

from perfkit import clock


class _Pausing:
    """A turn taker that pauses `pause_s` on every call (with `burn`, also until a
    second thread has burnt 0.1 s of CPU meanwhile, as the sampler threads do)."""

    def __init__(self, pause_s: float, burn: bool = False) -> None:
        self.pause_s = pause_s
        self.burn = burn
        self.seen_during: list[float] = []

    def take_turns(self) -> bool:
        worker = threading.Thread(target=_burn, args=(0.1,)) if self.burn else None
        if worker is not None:
            worker.start()
        self.seen_during.append(clock.now())
        time.sleep(self.pause_s)
        self.seen_during.append(clock.now())
        if worker is not None:
            worker.join()
        return True

    def barrier(self) -> None:
        pass


def _burn(cpu_s: float) -> None:
    end = time.thread_time() + cpu_s
    while time.thread_time() < end:
        pass


@pytest.fixture(autouse=True)
def _no_taker():
    yield
    clock.install(None)


def test_alone_the_clock_is_perf_counter_and_never_pauses():
    before = clock.paused_s()
    clock.between_steps()
    assert clock.paused_s() == before
    assert abs((time.perf_counter() - clock.now()) - before) < 1e-3


def test_a_pause_is_taken_out_of_time():
    taker = _Pausing(0.2)
    clock.install(taker)
    start, paused = clock.now(), clock.paused_s()
    clock.between_steps()
    elapsed = clock.now() - start
    assert clock.paused_s() - paused >= 0.2
    assert elapsed < 0.05  # 0.2 s paused, milliseconds on the measurement clock
    # frozen during the pause: another thread reading the clock sees it stand still
    assert taker.seen_during[1] - taker.seen_during[0] < 1e-6


def test_cpu_burnt_during_a_pause_is_counted_as_paused():
    clock.install(_Pausing(0.05, burn=True))
    user, system = clock.paused_cpu_s()
    clock.between_steps()
    user2, system2 = clock.paused_cpu_s()
    assert (user2 - user) + (system2 - system) >= 0.09  # the burning thread's 0.1 s


class _Never(_Pausing):
    """A turn taker that never pauses (the peer is slower to ask)."""

    def take_turns(self) -> bool:
        return False


class _Waits:
    """A fake run-queue wait counter the test moves by hand."""

    def __init__(self) -> None:
        self.s = 0.0

    def __call__(self) -> float:
        return self.s


def test_a_run_queue_wait_during_a_step_is_taken_out_and_the_clock_stays_monotonic():
    waits = _Waits()
    clock.install(_Never(0.0), waits)
    floor = clock.now()
    time.sleep(0.05)  # the step: 50 ms, of which the OS held the core for 30
    waits.s += 0.03
    before, reclaimed = clock.paused_s(), clock.reclaimed_s()
    clock.reclaim_waits(floor)
    assert clock.paused_s() - before == pytest.approx(0.03)
    assert clock.reclaimed_s() - reclaimed == pytest.approx(0.03)
    assert clock.now() - floor == pytest.approx(0.02, abs=0.01)


def test_a_reclaimed_wait_never_goes_back_past_the_floor():
    waits = _Waits()
    clock.install(_Never(0.0), waits)
    time.sleep(0.01)
    floor = clock.now()
    waits.s += 5.0  # more wait than the step lasted (some of it came before the floor)
    clock.reclaim_waits(floor)
    assert clock.now() >= floor


def test_waits_during_a_pause_or_a_barrier_are_not_taken_out_again():
    waits = _Waits()

    class WaitingTaker(_Pausing):
        def take_turns(self) -> bool:
            waits.s += 0.5  # waking up: waiting for the core the peer leaves
            return super().take_turns()

        def barrier(self) -> None:
            waits.s += 0.5

    clock.install(WaitingTaker(0.0), waits)
    floor = clock.now()
    clock.between_steps()
    clock.level_starts()
    time.sleep(0.02)
    reclaimed = clock.reclaimed_s()
    clock.reclaim_waits(floor)
    assert clock.reclaimed_s() == reclaimed


def test_alone_or_without_a_wait_counter_nothing_is_reclaimed():
    reclaimed = clock.reclaimed_s()
    clock.reclaim_waits(clock.now() - 1.0)  # no taker
    clock.install(_Never(0.0))  # a taker, no counter (no schedstat)
    clock.reclaim_waits(clock.now() - 1.0)
    assert clock.reclaimed_s() == reclaimed
