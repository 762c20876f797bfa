import mmap
import os
import threading
import time
from dataclasses import asdict

import pytest

from perfkit.measure.proc import (
    ProcSampler,
    ProcSnapshot,
    SchedStat,
    delta,
    read_schedstat,
    schedstat_delta,
    snapshot,
)

PAGE = mmap.PAGESIZE
HAS_SCHEDSTAT = os.path.exists("/proc/self/schedstat")


def burn_cpu(seconds: float) -> int:
    """Run for `seconds` of this thread's CPU time (not wall time: robust on a loaded box)."""
    end, n = time.thread_time() + seconds, 0
    while time.thread_time() < end:
        n += sum(range(200))
    return n


def do_syscalls(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        for _ in range(50):
            os.stat("/proc/self/stat")
            with open("/proc/self/stat", "rb") as f:
                f.read()


def touch_fresh_pages(num_bytes: int) -> mmap.mmap:
    """Anonymous memory, small pages only, every page written once."""
    m = mmap.mmap(-1, num_bytes)
    if hasattr(mmap, "MADV_NOHUGEPAGE"):
        m.madvise(mmap.MADV_NOHUGEPAGE)  # one fault per 4 KiB page, not per 2 MiB
    for off in range(0, num_bytes, PAGE):
        m[off] = 1
    return m


def measure(work, *args):
    s = ProcSampler()
    s.start()
    keep = work(*args)
    stats = s.stop()
    return stats, keep


def test_cpu_burn_counts_as_user_time():
    stats, _ = measure(burn_cpu, 0.3)
    assert stats.available
    assert stats.user_s >= 0.1
    assert 0.25 <= stats.wall_s < 5
    assert 0.0 <= stats.system_share <= 1.0
    assert stats.cpu_per_wall > 0.2


def test_syscalls_count_as_system_time():
    stats, _ = measure(do_syscalls, 0.4)
    assert stats.system_s > 0.02
    assert 0.0 < stats.system_share <= 1.0
    assert stats.system_share == pytest.approx(stats.system_s / (stats.user_s + stats.system_s))


def test_touching_64_mib_counts_minor_faults_and_rss():
    size = 64 * 1024 * 1024
    stats, m = measure(touch_fresh_pages, size)
    try:
        num_pages = size // PAGE
        assert stats.num_minor_faults >= num_pages * 3 // 4
        assert stats.num_major_faults >= 0
        assert stats.rss_end_bytes - stats.rss_start_bytes >= size // 2
        assert stats.peak_rss_bytes >= stats.rss_end_bytes * 0.9
    finally:
        m.close()


def test_sleeping_counts_voluntary_switches_all_threads():
    def sleeper():
        for _ in range(30):
            time.sleep(0.001)

    s = ProcSampler()
    s.start()
    t = threading.Thread(target=sleeper)
    t.start()
    t.join()
    stats = s.stop()
    # The switches happen in a worker thread: a main-thread-only source would see ~0.
    assert stats.num_voluntary_ctx_switches >= 25
    assert stats.num_involuntary_ctx_switches >= 0


@pytest.mark.skipif(not HAS_SCHEDSTAT, reason="kernel without schedstat")
def test_schedstat_sums_threads_alive_at_stop():
    done, release = threading.Event(), threading.Event()

    def worker():
        burn_cpu(0.25)
        done.set()
        release.wait(5)

    t = threading.Thread(target=worker)
    s = ProcSampler()
    s.start()
    t.start()
    done.wait(5)
    stats = s.stop()
    release.set()
    t.join()
    assert stats.on_cpu_s is not None and stats.run_queue_wait_s is not None
    assert stats.on_cpu_s >= 0.2  # the worker's CPU, not only the (idle) main thread's
    assert stats.run_queue_wait_s >= 0.0
    assert stats.num_timeslices is not None and stats.num_timeslices >= 1
    assert stats.num_threads >= 2


def test_schedstat_delta_handles_new_and_reused_threads():
    a = SchedStat(0, 0, 0, {1: (100, 10, 2), 2: (500, 50, 5)})
    b = SchedStat(0, 0, 0, {1: (150, 30, 3), 2: (40, 4, 1), 3: (70, 7, 1)})
    # tid 1 grew by (50, 20, 1); tid 2 restarted (reused) counts whole; tid 3 is new.
    assert schedstat_delta(a, b) == (50 + 40 + 70, 20 + 4 + 7, 1 + 1 + 1)


def test_read_schedstat_missing_dir_is_none(tmp_path):
    assert read_schedstat(str(tmp_path / "nope")) is None
    (tmp_path / "7").mkdir()
    (tmp_path / "7" / "schedstat").write_text("10 20 3\n")
    got = read_schedstat(str(tmp_path))
    assert got is not None and (got.on_cpu_ns, got.run_queue_wait_ns, got.num_timeslices) == (
        10,
        20,
        3,
    )


def test_snapshot_delta_per_step():
    a = snapshot()
    burn_cpu(0.15)
    touch_fresh_pages(4 * 1024 * 1024).close()
    b = snapshot()
    d = delta(a, b)
    assert d.user_s > 0.05
    assert d.wall_s >= 0.15
    assert d.num_minor_faults >= (4 * 1024 * 1024 // PAGE) * 3 // 4
    assert all(isinstance(getattr(d, f), int) for f in vars(d) if f.startswith("num_"))


def test_delta_is_b_minus_a():
    a = ProcSnapshot(1.0, 2.0, 3.0, 4, 5, 6, 7)
    b = ProcSnapshot(2.5, 2.5, 3.25, 14, 5, 9, 8)
    d = delta(a, b)
    assert (d.wall_s, d.user_s, d.system_s) == (1.5, 0.5, 0.25)
    assert (d.num_minor_faults, d.num_major_faults) == (10, 0)
    assert (d.num_voluntary_ctx_switches, d.num_involuntary_ctx_switches) == (3, 1)


def test_stop_before_start_is_unavailable_not_a_crash():
    stats = ProcSampler().stop()
    assert not stats.available and "before start" in stats.reason


def test_counts_are_ints_and_timings_floats():
    stats, _ = measure(burn_cpu, 0.02)
    d = asdict(stats)
    for name, value in d.items():
        if name.startswith("num_"):
            assert type(value) is int or value is None, name
        if name.endswith("_s"):
            assert type(value) is float or value is None, name
        if name.endswith("_bytes"):
            assert type(value) is int, name


def _burn_pinned(cpu: int, seconds: float) -> None:
    os.sched_setaffinity(0, {cpu})
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity here")
def test_thread_waits_reads_the_calling_threads_run_queue_wait():
    from perfkit.measure.proc import ThreadWaits
    waits = ThreadWaits.open()
    if waits is None:
        pytest.skip("no schedstat on this kernel")
    before_affinity = os.sched_getaffinity(0)
    cpu = max(before_affinity)
    try:
        os.sched_setaffinity(0, {cpu})
        start = waits()
        rival = threading.Thread(target=_burn_pinned, args=(cpu, 0.4))
        rival.start()
        _burn_pinned(cpu, 0.3)  # both runnable on one core: each waits about half
        rival.join()
        waited = waits() - start
    finally:
        os.sched_setaffinity(0, before_affinity)
        waits.close()
    assert 0.05 < waited < 0.4
