"""`perfkit stacks`: bad input exits 2 with one line; commands and pids end to end."""

import re
import subprocess
import sys
import time

import pytest

from perfkit.cli.stacks import default_name
from perfkit.stacks import external as stacks_external
from perfkit.stacks.folded import read_folded
from perfkit.stacks.record import stacks_status

FLAMEGRAPH_LINE = re.compile(r"^(.*)\s+(\d+)$")
PYSPY_OK, PYSPY_WHY = stacks_status()
needs_pyspy = pytest.mark.skipif(not PYSPY_OK, reason=f"py-spy cannot record here: {PYSPY_WHY}")
BUSY = "def busy():\n s = 0\n for i in range(3_000_000): s += i\nbusy()\n"


@pytest.fixture
def run(cli):
    """`perfkit stacks ARGS` on the real app."""
    return lambda *args: cli("stacks", *args)


@pytest.mark.parametrize(("args", "message"), [
    ((), "nothing to record"),
    (("--pid", "1", "--", "python", "-c", "0"), "not both"),
    (("--pid", "999999999"), "no such process"),
    (("--pid", "-3"), "no such process"),
    (("--pid", "1", "--duration", "0"), "--duration must be > 0"),
    (("--rate", "0", "--", "python", "-c", "0"), "--rate must be > 0"),
    (("--sampler", "gdb", "--", "python", "-c", "0"), "--sampler must be one of"),
    (("--pid", "1", "--sampler", "thread"), "needs py-spy"),
])
def test_bad_input_exits_2_with_one_line(run, args, message):
    result = run(*args)
    assert result.exit_code == 2
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def check_outputs(out, name):
    folded = out / f"{name}.folded"
    for line in folded.read_text().splitlines():
        match = FLAMEGRAPH_LINE.match(line)
        assert match and int(match.group(2)) > 0
    assert (out / f"{name}.speedscope.json").exists() and (out / f"{name}.svg").exists()
    return read_folded(folded)


@needs_pyspy
def test_command_end_to_end_with_pyspy(run, tmp_path):
    result = run("--out", str(tmp_path), "--rate", "200", "--", sys.executable, "-c", BUSY)
    assert result.exit_code == 0, result.stderr
    assert "(py-spy)" in result.stdout
    assert "top functions by self time" in result.stdout and "busy (<string>)" in result.stdout
    assert "time by perfkit component" not in result.stdout  # no perfkit code in that program
    stacks = check_outputs(tmp_path, "python-c")
    assert any(s.endswith(("busy (<string>:3)", "busy (<string>:2)")) for s in stacks)


def test_command_with_thread_sampler_keeps_exit_code(run, tmp_path):
    code = BUSY + "import sys; sys.exit(3)\n"
    result = run("--out", str(tmp_path), "--sampler", "thread", "--name", "t",
                 "--", sys.executable, "-c", code)
    assert result.exit_code == 3
    assert "(thread)" in result.stdout and "exited with code 3" in result.stderr
    stacks = check_outputs(tmp_path, "t")
    assert any("busy (<string>:" in s for s in stacks)
    assert not any("thread_sampler.py" in s or "runpy" in s for s in stacks)


def test_command_falls_back_without_pyspy(run, tmp_path, monkeypatch):
    monkeypatch.setattr(stacks_external, "pyspy_path", lambda: None)
    script = tmp_path / "app.py"
    script.write_text(BUSY)
    result = run("--out", str(tmp_path), "--", sys.executable, str(script))
    assert result.exit_code == 0
    assert "in-process sampler" in result.stderr and "py-spy not found" in result.stderr
    assert any("busy (app.py:" in s for s in check_outputs(tmp_path, "app"))


def test_non_python_command_without_pyspy_is_refused(run, tmp_path, monkeypatch):
    monkeypatch.setattr(stacks_external, "pyspy_path", lambda: None)
    result = run("--out", str(tmp_path), "--", "true")
    assert result.exit_code == 2 and "not a Python program" in result.stderr


def test_existing_files_need_force(run, tmp_path):
    (tmp_path / "t.svg").write_text("old")
    args = ("--out", str(tmp_path), "--name", "t", "--sampler", "thread",
            "--", sys.executable, "-c", "0")
    result = run(*args)
    assert result.exit_code == 2 and "--force" in result.stderr
    assert run("--force", *args).exit_code == 0


@needs_pyspy
def test_pid_end_to_end(run, tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "while True:\n sum(range(1000))\n"])
    try:
        time.sleep(0.3)
        result = run("--pid", str(child.pid), "--duration", "0.5", "--out", str(tmp_path))
    finally:
        child.kill()
        child.wait()
    assert result.exit_code == 0, result.stderr
    assert sum(check_outputs(tmp_path, f"pid-{child.pid}").values()) > 0


def test_default_names():
    assert default_name(42, []) == "pid-42"
    assert default_name(None, ["python3", "bench/run.py", "-x"]) == "run"
    assert default_name(None, ["python", "-m", "pkg.mod"]) == "pkg.mod"
    assert default_name(None, ["/usr/bin/python3.11", "-c", "0"]) == "python-c"
    assert default_name(None, ["./serve"]) == "serve"
