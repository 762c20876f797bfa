"""`perfkit stacks --pid PID --contention`: another Python process's threads, named from
py-spy's dump, with their GIL waits and who ran meanwhile (eBPF as root; otherwise the
fallback or the reasons), written to NAME.contention.json."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from perfkit.measure import ebpf
from perfkit.stacks.contention_pid import finish_probe, is_perfkit_serve, start_probe

EBPF = ebpf.unavailable() or ebpf.tracepoints_reason()
CHILD = """
import threading, time
def bursts():
    while True:
        end = time.perf_counter() + 0.02
        while time.perf_counter() < end:
            sum(i * i for i in range(200))
        time.sleep(0.005)
threading.Thread(target=bursts, name="child-hog", daemon=True).start()
print("ready", flush=True)
while True:
    sum(range(100))
    time.sleep(0.0005)  # releases the GIL, then waits for it behind the hog
"""


@pytest.fixture
def child() -> Iterator[int]:
    proc = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    try:
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.skipif(bool(EBPF), reason=f"eBPF unavailable: {EBPF}")
def test_another_process_main_thread_waits_behind_its_hog(child: int) -> None:
    probe = start_probe(child)
    time.sleep(1.0)
    sec = finish_probe(probe)
    assert sec.source == "ebpf" and sec.engine_tid == child
    main = sec.thread(child)
    assert main is not None and main.name == "MainThread" and main.role == "main"
    assert (main.times.gil_wait_s or 0) > 0.05 and (main.counts.gil_waits or 0) > 5
    names = {t.name for t in sec.threads}
    if "child-hog" in names:  # py-spy could name the threads
        assert sec.gil_holders[0].name == "child-hog"
        assert sec.gil_holders[0].code.endswith(":bursts")


def test_the_cli_writes_the_section_or_says_why(cli, child: int, tmp_path) -> None:
    result = cli("stacks", "--pid", str(child), "--contention", "--duration", "0.5",
                 "--out", str(tmp_path), width=120)
    if result.exit_code != 0 and "py-spy" in result.output:
        pytest.skip(f"py-spy cannot record another process here: {result.output[-200:]}")
    assert result.exit_code == 0, result.output
    doc = json.loads((tmp_path / f"pid-{child}.contention.json").read_text())
    assert doc["engine_tid"] == child
    if doc["source"] == "":  # neither eBPF nor the fallback: every wait says why
        assert doc["unavailable"]["gil_wait"] and doc["unavailable"]["lock_wait"]
    assert "contention:" in result.stdout


def test_perfkit_serve_is_told_by_its_command_line(child: int) -> None:
    assert not is_perfkit_serve(child)
    assert not is_perfkit_serve(2**22 + 99)
