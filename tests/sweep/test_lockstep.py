"""sweep --lockstep: two sides meet at a socket, take turns, and pause out of their timings."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from perfkit.errors import PerfkitError
from perfkit.sweep.lockstep import join

PLAN = {"levels": ["c=1"], "repeats": 1, "requests": 4, "warmup": 0}


def _both(path: Path, scenarios, plans=(PLAN, PLAN), timeout_s: float = 20.0) -> list:
    """Each side joins and plays its scenario in its own thread (side 0 arrives first):
    what each scenario returned, or the PerfkitError its join raised."""
    out: list = [None, None]

    def side(i: int) -> None:
        try:
            joined = join(path, plans[i], timeout_s=timeout_s, quantum_s=0.0)
        except PerfkitError as exc:
            out[i] = exc
            return
        out[i] = scenarios[i](joined)

    threads = [threading.Thread(target=side, args=(i,), daemon=True) for i in (0, 1)]
    threads[0].start()
    threads[0].join(0.2)  # side 0 listens first
    threads[1].start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    return out


def test_sides_alternate_turn_for_turn(tmp_path):
    order: list[str] = []

    def play(name: str):
        def scenario(side):
            for _ in range(5):
                order.append(name)
                side.take_turns()
            side.close()
            return side
        return scenario

    a, b = _both(tmp_path / "s.sock", (play("A"), play("B")))
    assert (a.first, b.first) == (True, False)
    assert order[:9] == list("ABABABABA")  # strict alternation while both are in
    assert a.stats.handoffs >= 4 and b.stats.handoffs >= 4
    assert not (tmp_path / "s.sock").exists()


def test_a_peer_that_leaves_lets_the_other_run_alone(tmp_path):
    def stays(side):
        turns = [side.take_turns(), side.take_turns()]
        side.close()
        return turns, side.info()

    def leaves(side):
        side.close()

    (turns, info), _ = _both(tmp_path / "s.sock", (stays, leaves))
    assert turns == [True, False]  # finds the peer gone, then runs alone
    assert info.alone_s >= 0.0


def test_different_plans_are_refused_on_both_sides(tmp_path):
    other = PLAN | {"repeats": 3}
    a, b = _both(tmp_path / "s.sock", (None, None), plans=(PLAN, other))
    for err in (a, b):
        assert isinstance(err, PerfkitError)
        assert "another plan" in str(err)
        assert {"repeats: 1 here, 3 there", "repeats: 3 here, 1 there"} & {
            m for m in ("repeats: 1 here, 3 there", "repeats: 3 here, 1 there") if m in str(err)}


def test_no_peer_is_a_clear_error(tmp_path):
    with pytest.raises(PerfkitError, match=r"no peer joined within 0\.3 s"):
        join(tmp_path / "s.sock", PLAN, timeout_s=0.3)


def test_a_path_that_is_a_regular_file_is_refused(tmp_path):
    path = tmp_path / "s.sock"
    path.write_text("x")
    with pytest.raises(PerfkitError, match="exists and is not a socket"):
        join(path, PLAN, timeout_s=1.0)


def test_a_too_long_socket_path_is_refused(tmp_path):
    with pytest.raises(PerfkitError, match="under 100 bytes"):
        join(tmp_path / ("x" * 120), PLAN, timeout_s=1.0)


def _sweep(tiny: list[str], sock: Path, out: Path) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "perfkit", "sweep", *tiny, "--repeats", "2", "--lockstep",
           str(sock), "--json", str(out), "--format", "json"]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def test_two_sweeps_in_lockstep_pair_run_for_run(tiny, tmp_path):
    sock = tmp_path / "l.sock"
    procs = [_sweep(tiny, sock, tmp_path / f"{n}.json") for n in ("a", "b")]
    for p in procs:
        assert p.wait(timeout=300) == 0, p.stderr.read() if p.stderr else ""
    docs = [json.loads((tmp_path / f"{n}.json").read_text()) for n in ("a", "b")]
    for doc in docs:
        info = doc["lockstep"]
        assert info["handoffs"] > 0 and info["paused_s"] > 0 and info["quantum_s"] == 0.02
        assert info["run_queue_s"] is not None and info["run_queue_s"] >= 0  # Linux: schedstat
        assert doc["complete"] and len(doc["levels"]) == 4
    # both engine threads ran on one core (Linux has thread affinity)
    assert docs[0]["lockstep"]["cpu"] == docs[1]["lockstep"]["cpu"] is not None
    # the same deterministic counts on both sides, level for level
    counts = [[(lv["concurrency"], lv["repeat"], lv["counts"]["output_tokens"],
                lv["counts"]["steps"]) for lv in d["levels"]] for d in docs]
    assert counts[0] == counts[1]


def test_a_pause_is_not_latency():
    """A turn taker pausing 100 ms every 4th step: counted, TPOT would be >= 25 ms."""
    from perfkit import clock
    from perfkit.cli.common import resolve_profile
    from perfkit.run import run_sweep

    class EveryFourth:
        calls = 0

        def take_turns(self) -> bool:
            self.calls += 1
            if self.calls % 4:
                return False
            threading.Event().wait(0.1)
            return True

        def barrier(self) -> None:
            pass

    prof = resolve_profile("default", None, ["sweep.concurrency=[1]", "workload.num_requests=3",
                                             "sweep.warmup=0", "sweep.min_requests_per_client=0",
                                             "workload.output_len.kind=\"fixed\"",
                                             "workload.output_len.mean=16"])
    clock.install(EveryFourth())
    try:
        result = run_sweep(prof, samplers=True)
    finally:
        clock.install(None)
    (level,) = result.levels
    assert level.latency.tpot.quantiles["p50"] < 0.015


@pytest.mark.parametrize(("extra", "message"), [
    (["--rate", "2"], "closed-loop levels only"),
    (["--search"], "cannot be combined with --search"),
    (["--stacks"], "cannot be combined with --stacks"),
])
def test_lockstep_refuses_what_it_cannot_pair(cli, tiny, tmp_path, extra, message):
    result = cli("sweep", *tiny, "--lockstep", str(tmp_path / "s.sock"), *extra)
    assert result.exit_code == 2
    assert message in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "s.sock").exists()


def test_a_level_starts_only_when_the_peer_starts_it_too(tmp_path):
    """Side A races through two levels' worth of turns; side B is slow to reach level 1:
    A's level 2 must not start before B's level 1 has."""
    events: list[str] = []

    def fast(side):
        for level in (1, 2):
            side.barrier()
            events.append(f"A{level}")
            side.take_turns()
        side.close()

    def slow(side):
        for _ in range(3):  # work before its first level, in turns
            events.append("b")
            side.take_turns()
        for level in (1, 2):
            side.barrier()
            events.append(f"B{level}")
            side.take_turns()
        side.close()

    _both(tmp_path / "s.sock", (fast, slow))
    assert events.index("A2") > events.index("B1")
    assert events.index("B2") > events.index("A1")


def _meet_at_once(path: Path) -> list:
    """Both sides join at the same instant: for each, whether it arrived first, or the
    PerfkitError its join raised. The first closes at once, which lets the second run."""
    out: list = [None, None]
    start = threading.Barrier(2)

    def side(i: int) -> None:
        start.wait()
        try:
            joined = join(path, PLAN, timeout_s=5.0, quantum_s=0.0)
        except PerfkitError as exc:
            out[i] = exc
            return
        out[i] = joined.first
        joined.close()

    threads = [threading.Thread(target=side, args=(i,), daemon=True) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return out


def test_two_sides_that_look_at_once_still_meet(tmp_path, monkeypatch):
    """The CI recipe starts both sides together: both find no listener, and the later one
    used to unlink the earlier one's fresh socket as stale (both then waited out the
    timeout). Here both look for a listener at the same moment, every time."""
    import perfkit.sweep.lockstep as lockstep

    real = lockstep._connect
    both_looked = threading.Barrier(2, timeout=0.5)

    def at_once(path: Path):
        with contextlib.suppress(threading.BrokenBarrierError):
            both_looked.wait()
        return real(path)

    monkeypatch.setattr(lockstep, "_connect", at_once)
    for attempt in range(3):
        both_looked.reset()
        out = _meet_at_once(tmp_path / f"s{attempt}.sock")
        assert sorted(out) == [False, True], out
        assert not (tmp_path / f"s{attempt}.sock.lock").exists()


def test_a_stale_socket_of_a_crashed_run_is_replaced(tmp_path):
    path = tmp_path / "s.sock"
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(path))
    stale.close()  # the file stays; nobody listens
    assert sorted(_meet_at_once(path)) == [False, True]


def test_a_folder_that_cannot_hold_the_socket_is_refused_at_once(tmp_path):
    with pytest.raises(PerfkitError, match="writable folder"):
        join(tmp_path / "missing" / "s.sock", PLAN, timeout_s=60.0)
