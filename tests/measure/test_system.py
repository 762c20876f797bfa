"""The machine-wide CPU sampler: /proc/stat parsing and other processes' share."""

from __future__ import annotations

from perfkit.measure.system import CpuTimes, SystemSampler, parse_stat, system_delta

STAT = ("cpu  100 5 20 800 10 1 2 30 0 0\ncpu0 50 2 10 400 5 0 1 15 0 0\n"
        "cpu1 50 3 10 400 5 1 1 15 0 0\nintr 1\n")


def test_parse_stat_counts_cpus_and_states():
    num, busy, idle, steal = parse_stat(STAT)
    assert num == 2
    assert busy * 100 == 128 and idle * 100 == 810 and steal * 100 == 30


def test_parse_stat_rejects_garbage():
    assert parse_stat("") is None and parse_stat("cpu0 1 2\n") is None


def test_others_are_busy_minus_own():
    a = CpuTimes(0.0, busy_s=10.0, idle_s=0.0, steal_s=0.0, own_s=1.0)
    b = CpuTimes(2.0, busy_s=14.0, idle_s=0.0, steal_s=0.2, own_s=2.0)
    s = system_delta(2, a, b, 3.0)
    assert s.others_s == 3.0 and s.others_cores == 1.5
    assert abs(s.steal_share - 0.05) < 1e-9


def test_sampler_reads_this_machine():
    sampler = SystemSampler()
    sampler.start()
    sum(range(200_000))
    s = sampler.stop()
    assert s.available and s.num_cpus >= 1 and s.others_s >= 0.0 and s.wall_s > 0


def test_unreadable_stat_is_unavailable(tmp_path):
    sampler = SystemSampler(str(tmp_path / "missing"))
    sampler.start()
    s = sampler.stop()
    assert not s.available and "unreadable" in s.reason
