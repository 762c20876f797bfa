import gc
import json
import threading
from dataclasses import asdict

import pytest

from perfkit.measure.gc import GcRecorder


def make_cycles(n: int) -> None:
    for _ in range(n):
        a: list = []
        a.append(a)


def test_forced_collections_are_counted_and_timed():
    r = GcRecorder()
    r.start()
    make_cycles(100)
    for _ in range(3):
        gc.collect()  # full collections: ~0.1 s each with torch loaded
    stats = r.stop()
    assert stats.available
    assert stats.count >= 3
    assert stats.by_generation.get("2", 0) >= 3
    assert sum(stats.by_generation.values()) == stats.count
    assert stats.total_s > 0
    assert 0 < stats.max_s <= stats.total_s
    assert len(stats.pauses_s) == stats.count
    assert sum(stats.pauses_s) == pytest.approx(stats.total_s)
    assert max(stats.pauses_s) == stats.max_s
    assert stats.num_collected >= 100  # the cycles made inside the level


def test_generation_zero_counted_separately():
    r = GcRecorder()
    r.start()
    for _ in range(3):
        gc.collect(0)
    stats = r.stop()
    assert stats.by_generation.get("0", 0) >= 3


def test_callback_removed_after_stop_and_stop_twice_is_safe():
    before = list(gc.callbacks)
    r = GcRecorder()
    r.start()
    assert len(gc.callbacks) == len(before) + 1
    first = r.stop()
    assert gc.callbacks == before
    gc.collect(0)  # after stop: must not be counted
    second = r.stop()
    assert second is first
    assert gc.callbacks == before
    assert first.count == second.count


def test_collections_after_stop_not_counted():
    r = GcRecorder()
    r.start()
    gc.collect(0)
    stats = r.stop()
    n = stats.count
    for _ in range(3):
        gc.collect(0)
    assert stats.count == n


def test_collections_in_other_threads_are_counted():
    r = GcRecorder()
    r.start()
    t = threading.Thread(target=lambda: [gc.collect(0) for _ in range(3)])
    t.start()
    t.join()
    stats = r.stop()
    assert stats.count >= 3


def test_stored_pauses_are_capped_and_dropped_counted():
    r = GcRecorder(max_pauses=3)
    r.start()
    for _ in range(6):
        gc.collect(0)
    stats = r.stop()
    assert len(stats.pauses_s) == 3
    assert stats.num_pauses_dropped == stats.count - 3
    assert stats.count >= 6


def test_restart_resets_and_does_not_double_register():
    before = len(gc.callbacks)
    r = GcRecorder()
    r.start()
    gc.collect(1)
    gc.collect(1)
    r.start()
    assert len(gc.callbacks) == before + 1
    stats = r.stop()
    assert stats.by_generation.get("1", 0) == 0  # the first level's collections are gone
    assert len(gc.callbacks) == before


def test_stop_before_start_and_json():
    stats = GcRecorder().stop()
    assert not stats.available and stats.count == 0
    r = GcRecorder()
    r.start()
    gc.collect(0)
    d = asdict(r.stop())
    json.dumps(d)
    assert type(d["count"]) is int and type(d["total_s"]) is float


def test_negative_cap_rejected():
    with pytest.raises(ValueError):
        GcRecorder(max_pauses=-1)


def test_cpu_pause_and_generation_recorded():
    import gc as _gc

    from perfkit.measure.gc import GcRecorder

    rec = GcRecorder()
    rec.start()
    _gc.collect(2)
    stats = rec.stop()
    assert stats.count >= 1 and stats.max_generation == 2
    assert stats.max_cpu_s >= 0.0 and stats.total_cpu_s <= stats.total_s + 0.01
    assert stats.by_generation_cpu_s.get("2", 0.0) >= 0.0
