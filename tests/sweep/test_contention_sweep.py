"""`perfkit sweep --contention` end to end, with planted pathologies in this process: a
GIL hog thread (bursts of pure-Python work) and a lock every engine step takes, held by
a thread that sleeps while holding it. Each is named by its finding with the holder; the
clean control names neither. eBPF needs root and bpftrace (skipped with the reason
otherwise); the sampled fallback runs anywhere with /proc."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import jsonschema
import pytest

from perfkit.engine.scheduler import Scheduler
from perfkit.measure import ebpf

SCHEMA = json.loads((Path(__file__).parents[2] / "perfkit/result/sweep.schema.json").read_text())
EBPF = ebpf.unavailable() or ebpf.tracepoints_reason()
needs_ebpf = pytest.mark.skipif(bool(EBPF), reason=f"eBPF unavailable: {EBPF}")
LEVEL = ["--concurrency", "4", "--requests", "16", "--warmup", "2", "--set",
         "sweep.min_requests_per_client=0", "--set", "engine.cpu_threads=1",
         "--set", "workload.output_len.kind=\"fixed\"", "--set", "workload.output_len.mean=32",
         "--set", "workload.output_len.min=32", "--set", "workload.output_len.max=32"]


def bursts(stop: threading.Event) -> None:
    while not stop.is_set():
        end = time.perf_counter() + 0.02
        while time.perf_counter() < end:
            sum(i * i for i in range(200))
        time.sleep(0.01)


def flusher(lock: threading.Lock, stop: threading.Event) -> None:
    while not stop.is_set():
        time.sleep(0.02)
        with lock:
            time.sleep(0.02)  # a slow write inside the critical section


@contextmanager
def planted(monkeypatch, gil: bool, lock: bool) -> Iterator[None]:
    stop, metrics = threading.Event(), threading.Lock()
    threads = []
    if gil:
        threads.append(threading.Thread(target=bursts, args=(stop,), name="planted-gil-hog",
                                        daemon=True))
    if lock:
        schedule = Scheduler.schedule

        def locked(self: Scheduler):  # type: ignore[no-untyped-def]
            with metrics:
                pass
            return schedule(self)

        monkeypatch.setattr(Scheduler, "schedule", locked)
        threads.append(threading.Thread(target=flusher, args=(metrics, stop),
                                        name="planted-flusher", daemon=True))
    for t in threads:
        t.start()
    try:
        yield
    finally:
        stop.set()
        for t in threads:
            t.join(5)


def sweep(cli, tmp_path: Path) -> tuple[dict, str]:
    path = tmp_path / "r.json"
    result = cli("sweep", *LEVEL, "--contention", "--json", str(path), width=200)
    assert result.exit_code == 0, result.output
    doc = json.loads(path.read_text())
    jsonschema.validate(doc, SCHEMA)
    return doc, result.stdout


def findings(doc: dict) -> dict[str, dict]:
    return {f["id"]: f for f in doc["findings"]}


def engine_row(doc: dict) -> dict:
    sec = doc["levels"][0]["contention"]
    return next(t for t in sec["threads"] if t["tid"] == sec["engine_tid"])


@needs_ebpf
def test_a_planted_gil_hog_is_named(cli, tmp_path, monkeypatch) -> None:
    with planted(monkeypatch, gil=True, lock=False):
        doc, out = sweep(cli, tmp_path)
    found = findings(doc)
    assert "gil_contention" in found, (engine_row(doc), doc["levels"][0]["contention"]
                                       ["gil_holders"])
    gil = found["gil_contention"]
    assert gil["evidence"]["holders"][0]["name"] == "planted-gil-hog"
    assert gil["evidence"]["waiting_role"] == "engine+loadgen"
    assert "lock_contention" not in found
    sec = doc["levels"][0]["contention"]
    assert sec["source"] == "ebpf" and sec["gil_probe"] == "futex"
    assert sec["cost"]["step_share"] < 0.05  # the probes' cost, measured: small
    causes = {c["cause"]: c for c in doc["levels"][0]["tail"]["groups"][0]["causes"]}
    assert causes["gil"]["seconds"] is not None and causes["lock"]["seconds"] is not None
    assert "Contention (--contention" in out and "planted-gil-hog" in out


@needs_ebpf
def test_a_planted_lock_holder_is_named(cli, tmp_path, monkeypatch) -> None:
    with planted(monkeypatch, gil=False, lock=True):
        doc, _ = sweep(cli, tmp_path)
    found = findings(doc)
    assert "lock_contention" in found, engine_row(doc)
    lock = found["lock_contention"]
    assert lock["evidence"]["holders"][0]["name"] == "planted-flusher"
    assert lock["evidence"]["holders"][0]["share"] > 0.8
    assert "gil_contention" not in found


@needs_ebpf
def test_the_clean_control_names_no_contention(cli, tmp_path) -> None:
    doc, _ = sweep(cli, tmp_path)
    assert not {"gil_contention", "lock_contention"} & set(findings(doc))
    engine = next(t for t in doc["levels"][0]["contention"]["threads"]
                  if t["role"] == "engine+loadgen")
    assert engine["times"]["gil_wait_s"] is not None  # measured, and small


def test_without_ebpf_the_fallback_names_the_lock_and_says_why(cli, tmp_path,
                                                                monkeypatch) -> None:
    monkeypatch.setattr(ebpf, "unavailable", lambda: "eBPF needs root (test)")
    with planted(monkeypatch, gil=False, lock=True):
        doc, out = sweep(cli, tmp_path)
    sec = doc["levels"][0]["contention"]
    if sec["source"] != "sampled":
        pytest.skip(f"fallback unavailable here: {sec['unavailable']}")
    assert sec["reason"] == "eBPF needs root (test)"
    assert sec["unavailable"]["syscalls"] == "eBPF needs root (test)"
    assert "contention: eBPF unavailable: eBPF needs root (test)" in out
    engine = engine_row(doc)
    assert engine["counts"]["lock_waits"] is None  # eBPF's count: not measured, not 0
    assert engine["counts"]["lock_wait_ticks"] > 0  # the sampled ticks saw the waits
    times = engine["times"]
    wait, busy = times["lock_wait_s"], times["cpu_s"] + times["lock_wait_s"] + \
        times["gil_wait_s"]
    if wait >= 0.05 and wait / busy >= 0.15:  # the rule's own thresholds (sampled: 10 ms
        lock = findings(doc)["lock_contention"]  # ticks, so a starved sampler sees less)
        assert lock["evidence"]["source"] == "sampled" and lock["evidence"]["holders"] == []
        assert "The holder is not seen without eBPF" in lock["message"]


@pytest.mark.parametrize("extra", [["--target", "http://127.0.0.1:9/v1"],
                                   ["--lockstep", "/tmp/x.sock"], ["--search"]])
def test_contention_refuses_what_it_cannot_trace(cli, extra) -> None:
    result = cli("sweep", *LEVEL, "--contention", *extra)
    assert result.exit_code == 2 and "--contention" in result.output


def test_stacks_contention_needs_a_pid(cli, tmp_path) -> None:
    result = cli("stacks", "--contention", "--out", str(tmp_path), "--", "python", "-c", "1")
    assert result.exit_code == 2 and "give --pid PID" in result.output
