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
