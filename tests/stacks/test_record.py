"""Stack recording: the in-process fallback (forced and automatic), py-spy end to end,
the ptrace handling, the engine's own functions in the stacks, torch.profiler on CPU."""

import os
import re
import stat
import threading
import time
from pathlib import Path

import pytest
from flamegraph_rule import check_folded_file

from perfkit.stacks import pyspy as pyspy_mod
from perfkit.stacks import record as stacks_mod
from perfkit.stacks import torch_kernels
from perfkit.stacks.pyspy import PySpyProcess, failure_line, record_args
from perfkit.stacks.record import (
    StackRecorder,
    StackRecording,
    StacksError,
    record_level,
    stacks_status,
)
from perfkit.stacks.thread_sampler import ThreadSampler, short_filename
from perfkit.stacks.torch_kernels import (
    cuda_kernel_profile,
    folded_device_time,
    torch_frame,
)

PYSPY_OK, PYSPY_WHY = stacks_status()
needs_pyspy = pytest.mark.skipif(not PYSPY_OK, reason=f"py-spy cannot record here: {PYSPY_WHY}")


def burn_cpu(seconds: float) -> int:
    end, n = time.perf_counter() + seconds, 0
    while time.perf_counter() < end:
        n += sum(i * i for i in range(200))
    return n


def check_outputs(rec: StackRecording) -> dict[str, int]:
    stacks = check_folded_file(rec.folded_path)
    assert rec.num_samples == sum(stacks.values()) > 0
    assert rec.speedscope_path.exists() and rec.svg_path.exists()
    assert rec.duration_s > 0
    assert "stacks" not in rec.to_dict() and rec.to_dict()["folded_path"] == str(rec.folded_path)
    return stacks


def fake_pyspy(tmp_path: Path, body: str) -> str:
    path = tmp_path / "py-spy"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_forced_thread_sampler_writes_folded_speedscope_svg(tmp_path):
    rec = StackRecorder(tmp_path, "t", rate_hz=200, sampler="thread")
    rec.start()
    burn_cpu(0.3)
    out = rec.stop()
    assert out.sampler_used == "thread" and out.warning == "" and not out.native
    stacks = check_outputs(out)
    assert any("burn_cpu (" in s and "test_record.py:" in s for s in stacks)
    assert not any("perfkit-stack-sampler" in s or "ThreadSampler._run" in s for s in stacks)


def test_auto_falls_back_when_pyspy_is_missing(tmp_path, monkeypatch):
    monkeypatch.setattr(stacks_mod, "pyspy_path", lambda: None)
    with record_level(tmp_path, "2", rate_hz=200, native=True) as rec:
        assert rec.sampler_used == "pending"
        burn_cpu(0.2)
    assert rec.sampler_used == "thread" and "py-spy not found" in rec.reason
    assert "in-process sampler" in rec.warning and "SYS_PTRACE" in rec.warning
    assert "--native" in rec.warning
    assert rec.folded_path == tmp_path / "level-2.folded"
    check_outputs(rec)


def test_auto_falls_back_when_pyspy_cannot_attach(tmp_path, monkeypatch):
    exe = fake_pyspy(tmp_path, 'echo "Permission Denied: Try running again with sudo" >&2; exit 1')
    monkeypatch.setattr(stacks_mod, "pyspy_path", lambda: exe)
    rec = StackRecorder(tmp_path, "x", rate_hz=200)
    t0 = time.monotonic()
    rec.start()
    assert time.monotonic() - t0 < 3  # the failure is seen at once, not after a timeout
    burn_cpu(0.2)
    out = rec.stop()
    assert out.sampler_used == "thread" and "Permission Denied" in out.reason
    check_outputs(out)


def test_forced_pyspy_that_cannot_attach_is_an_error(tmp_path, monkeypatch):
    exe = fake_pyspy(tmp_path, 'echo "Permission Denied" >&2; exit 1')
    monkeypatch.setattr(stacks_mod, "pyspy_path", lambda: exe)
    with pytest.raises(StacksError, match=r"Permission Denied.*SYS_PTRACE"):
        StackRecorder(tmp_path, "x", sampler="py-spy").start()


@needs_pyspy
def test_pyspy_records_its_own_parent_end_to_end(tmp_path):
    rec = StackRecorder(tmp_path, "p", rate_hz=200, sampler="py-spy")
    rec.start()
    burn_cpu(0.5)
    out = rec.stop()
    assert out.sampler_used == "py-spy" and out.reason == ""
    stacks = check_outputs(out)
    assert any("burn_cpu (" in s for s in stacks)
    assert not list(tmp_path.glob(".*.raw"))  # py-spy's own file is folded in and removed


def test_ptracer_is_granted_to_the_child_before_it_runs_and_cleared(tmp_path, monkeypatch):
    calls: list[int] = []
    monkeypatch.setattr(pyspy_mod, "ptrace_scope", lambda: 1)
    monkeypatch.setattr(pyspy_mod, "set_ptracer", lambda pid: calls.append(pid) or "")
    marker = tmp_path / "ran"
    exe = fake_pyspy(tmp_path, f'touch {marker}; echo "Permission Denied"; exit 1')
    spy = PySpyProcess([exe, "record"], target_is_parent=True)
    assert spy.start() == "Permission Denied"
    assert calls == [spy.proc.pid, 0]  # named before the gate opened, cleared after
    assert marker.exists()


def test_record_args():
    args = record_args("py-spy", Path("o.raw"), 99.6, native=False, pid=7)
    assert args[:8] == ["py-spy", "record", "--rate", "100", "--format", "raw", "--output",
                        "o.raw"]
    assert "--nonblocking" in args and args[-2:] == ["--pid", "7"]
    native = record_args("py-spy", Path("o"), 100, native=True, command=["python", "x.py"])
    assert "--native" in native and "--nonblocking" not in native
    assert native[-3:] == ["--", "python", "x.py"]


def test_failure_line_picks_the_reason():
    out = "py-spy> Sampling\nError: Failed to get process executable name.\n\nCaused by:\n x"
    assert failure_line(out) == "Error: Failed to get process executable name."
    assert failure_line("") == "py-spy exited without output"


def test_thread_sampler_skips_idle_threads_and_names_frames_like_pyspy():
    stop = threading.Event()
    sleeper = threading.Thread(target=stop.wait, name="sleeper", daemon=True)
    sleeper.start()
    sampler = ThreadSampler(rate_hz=200)
    sampler.start()
    burn_cpu(0.3)
    stacks = sampler.stop()
    stop.set()
    assert sampler.num_ticks > 10
    assert not any("Event.wait" in s for s in stacks), "sleeping thread was counted"
    leaf = next(s for s in stacks if "burn_cpu" in s).split(";")
    assert re.fullmatch(r"burn_cpu \(.*test_record\.py:\d+\)", next(f for f in leaf
                                                                 if f.startswith("burn_cpu")))
    assert short_filename(threading.__file__, ["/nowhere", os.path.dirname(threading.__file__)]
                          ) == "threading.py"


def test_stacks_status_without_pyspy(monkeypatch):
    monkeypatch.setattr(stacks_mod, "pyspy_path", lambda: None)
    ok, why = stacks_status()
    assert not ok and "py-spy not found" in why and "in-process sampler" in why


@pytest.fixture(scope="module")
def engine_workload():
    try:
        from perfkit.engine.engine import Engine
    except ImportError as err:  # the engine is still being written
        pytest.skip(f"perfkit.engine.engine not importable yet: {err}")
    from perfkit.config.profile import load_profile
    from perfkit.workload import generate

    profile = load_profile("default")
    engine = Engine(profile)
    specs = generate(profile.workload, profile.model.vocab_size, profile.engine.max_model_len)
    return engine, specs[:2]


@pytest.mark.parametrize("sampler", ["thread", pytest.param("py-spy", marks=needs_pyspy)])
def test_stacks_contain_engine_functions_when_the_engine_ran(tmp_path, sampler, engine_workload):
    engine, specs = engine_workload
    engine.reset()
    with record_level(tmp_path, "1", rate_hz=200, sampler=sampler) as rec:
        engine.run_to_completion(specs)
    assert rec.sampler_used == sampler
    stacks = check_outputs(rec)
    frames = {f for s in stacks for f in s.split(";")}
    assert any(f.startswith("Engine.step (perfkit/engine/engine.py:") for f in frames)
    assert any("(perfkit/engine/layers/model.py:" in f for f in frames)


def test_cuda_kernel_profile_on_cpu_says_why(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("CUDA present: the CPU path does not apply")
    with cuda_kernel_profile(tmp_path / "k.folded") as kp:
        pass
    assert not kp.available and "CUDA" in kp.reason and kp.rows == []
    assert not (tmp_path / "k.folded").exists()


@pytest.mark.gpu
def test_cuda_kernel_profile_on_cuda(tmp_path):
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    with cuda_kernel_profile(tmp_path / "k.folded") as kp:
        x = torch.randn(512, 512, device="cuda")
        (x @ x).sum().item()
    assert kp.available, kp.reason
    assert kp.rows and kp.rows[0].device_time_us > 0
    check_folded_file(kp.folded_path)


class _Evt:
    def __init__(self, name, stack, us):
        self.name, self.stack, self.self_device_time_total = name, stack, us


def test_torch_stacks_fold_like_pyspy(monkeypatch):
    prefixes = ["/venv/site-packages"]
    assert torch_frame("/venv/site-packages/perfkit/engine/layers/model.py(88): forward", prefixes
                       ) == "forward (perfkit/engine/layers/model.py:88)"
    events = [
        _Evt("aten::mm", ["/venv/site-packages/perfkit/engine/layers/model.py(88): forward",
                          "app.py(3): <module>"], 12.7),
        _Evt("aten::mm", ["/venv/site-packages/perfkit/engine/layers/model.py(88): forward",
                          "app.py(3): <module>"], 5.2),
        _Evt("aten::add", [], 9.0),  # no Python stack: left out
        _Evt("aten::relu", ["app.py(3): <module>"], 0.0),  # no device time: left out
    ]
    monkeypatch.setattr(torch_kernels, "path_prefixes", lambda: prefixes)
    folded = folded_device_time(events)
    stack = "<module> (app.py:3);forward (perfkit/engine/layers/model.py:88);aten::mm"
    assert folded == {stack: 17}
