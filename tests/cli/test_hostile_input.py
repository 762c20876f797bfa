"""Hostile input, one class at a time: a one-line error and exit 2, never a traceback,
never a file outside the named output (issue 20)."""

from __future__ import annotations

import json
import os
import stat
import sys

import pytest

from perfkit.files import atomic_write_bytes, atomic_write_text

LONG = "a" * 100_000


def one_line_error(result, *needles: str) -> None:
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def _result_doc(tmp_path):
    from tests.gate import gate_fixtures

    path = tmp_path / "r.json"
    path.write_text(json.dumps(gate_fixtures.noisy_doc(1)))
    return path


# -- output paths: impossible, unwritable, a folder for a file, a file for a folder -------
@pytest.mark.parametrize("bad", ["/proc/perfkit-x.json", "/etc/passwd/x.json",
                                 "d/" + "n" * 300 + ".json"])
@pytest.mark.parametrize("command", [
    ["sweep", "--requests", "1", "--concurrency", "1", "--json"],
    ["bench", "--only", "allocator", "--json"],
    ["fragmentation", "--requests", "5", "--json"],
    ["report", "RESULT", "-o"],
    ["gate", "RESULT", "RESULT", "--junit"],
    ["stacks", "--out"],
])
def test_every_output_path_is_checked_before_any_work(cli, tmp_path, command, bad):
    args = [str(_result_doc(tmp_path)) if a == "RESULT" else a for a in command]
    tail = ["--", sys.executable, "-c", "0"] if command[0] == "stacks" else []
    one_line_error(cli(*args, bad, *tail))


def test_a_folder_where_a_file_is_meant_and_a_file_where_a_folder_is(cli, tmp_path):
    doc = str(_result_doc(tmp_path))
    one_line_error(cli("sweep", "--json", str(tmp_path), "--force"), "is a folder")
    one_line_error(cli("gate", doc, doc, "--junit", str(tmp_path)), "is a folder")
    one_line_error(cli("stacks", "--out", doc, "--", sys.executable, "-c", "0"), "is a file")
    one_line_error(cli("report", doc, "-o", str(tmp_path / "r.html"), "--png", doc),
                   "is a file")
    assert not (tmp_path / "r.html").exists()


# -- numbers: huge, non-finite, useless ----------------------------------------------------
@pytest.mark.parametrize("args", [
    ["sweep", "--requests", "1000000000000"],
    ["sweep", "--requests", "99999999999999999999999"],
    ["sweep", "--rate", "nan"], ["sweep", "--rate", "inf"], ["sweep", "--rate", "1e-9"],
    ["sweep", "--concurrency", "99999999999999999999999"],
    ["sweep", "--set", "workload.arrival.rate=inf"],
    ["sweep", "--set", "slo.ttft_s=nan"],
    ["sweep", "--set", "engine.num_blocks=1"],
    ["sweep", "--set", "engine.num_blocks=99999999999999999999999"],
    ["fragmentation", "--requests", "1000000000000"],
    ["fragmentation", "--requests", "99999999999999999999999"],
    ["fragmentation", "--step-ms", "nan"],
    ["stacks", "--rate", "nan", "--", "python", "-c", "0"],
    ["serve", "--drain-timeout", "nan"],
])
def test_numbers_are_checked_where_they_are_parsed(cli, args):
    one_line_error(cli(*args))


def test_a_profile_file_with_huge_or_non_finite_numbers(cli, tmp_path):
    for body, needle in (("[workload]\nnum_requests = 1000000000000\n", "at most"),
                         ("[workload.arrival]\nkind = 'poisson'\nrate = inf\n", "finite"),
                         ("[slo]\nttft_s = nan\n", "finite"),
                         ("[sweep]\nrates = [1e-9]\n", "between")):
        path = tmp_path / "p.toml"
        path.write_text(body)
        one_line_error(cli("sweep", "--profile", str(path)), needle)
        one_line_error(cli("fragmentation", "--profile", str(path)), needle)


# -- files: the one overwrite rule ------------------------------------------------------------
@pytest.mark.parametrize("command", [
    ["fragmentation", "--requests", "5", "--block-sizes", "16"],
    ["gate", "RESULT", "RESULT"],
])
def test_an_existing_output_needs_force(cli, tmp_path, command):
    out = tmp_path / "out.json"
    out.write_text("measured")
    args = [str(_result_doc(tmp_path)) if a == "RESULT" else a for a in command]
    one_line_error(cli(*args, "--json", str(out)), "--force")
    assert out.read_text() == "measured"
    assert cli(*args, "--json", str(out), "--force").exit_code == 0
    assert out.read_text() != "measured"


def test_bench_json_existing_needs_force(cli, tmp_path):
    out = tmp_path / "b.json"
    out.write_text("measured")
    one_line_error(cli("bench", "--only", "allocator", "--json", str(out)), "--force")
    assert out.read_text() == "measured"


def test_stacks_name_cannot_leave_out(cli, tmp_path):
    out = tmp_path / "a" / "b"
    for name in ("../../x", "/tmp/x", "..", "x/y", " x"):
        one_line_error(cli("stacks", "--out", str(out), "--name", name, "--",
                           sys.executable, "-c", "0"), "--name")
    assert not any(tmp_path.rglob("x*"))


def test_written_files_are_shared_not_private(tmp_path):
    old = os.umask(0o022)
    try:
        atomic_write_bytes(tmp_path / "c.png", b"\x89PNG")
        atomic_write_text(tmp_path / "r.json", "{}")
    finally:
        os.umask(old)
    for name in ("c.png", "r.json"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o644


# -- messages ---------------------------------------------------------------------------------
def test_a_profile_that_is_not_a_file_says_what_it_is(cli, tmp_path):
    (tmp_path / "d.toml").mkdir()
    os.mkfifo(tmp_path / "f.toml")
    (tmp_path / "loop.toml").symlink_to(tmp_path / "loop.toml")
    for name, needle in (("d.toml", "is a folder"), ("f.toml", "FIFO"),
                         ("loop.toml", "symbolic links")):
        one_line_error(cli("profiles", "show", str(tmp_path / name)), needle)
    one_line_error(cli("profiles", "show", LONG), "100000 characters")


def test_set_blames_the_override_not_the_file(cli):
    one_line_error(cli("profiles", "show", "default", "--set", "warp.drive=1"), "--set warp")


def test_a_non_python_command_has_no_python_stacks(cli, tmp_path):
    one_line_error(cli("stacks", "--out", str(tmp_path), "--", "/bin/sleep", "1"),
                   "not a Python program")
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("args", [["sweep", "--bogus"], ["gate"], ["nope"],
                                  ["sweep", "--requests", "abc"], ["report"]])
def test_click_usage_errors_are_one_line(cli, args):
    one_line_error(cli(*args), "--help")


@pytest.mark.parametrize(("sets", "needle"), [
    (("engine.attention_backend=numba", "engine.device=cpu", "model.dtype=bfloat16"),
     "'numba' runs a float32 cache on CPU"),
    (("engine.attention_backend=triton", "engine.device=cpu"), "'triton' needs a CUDA device"),
])
def test_an_attention_kernel_that_cannot_run_here_is_one_line(cli, sets, needle, monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    args = [x for s in sets for x in ("--set", s)]
    one_line_error(cli("sweep", "--requests", "4", "--concurrency", "1", *args), needle)


def test_a_pid_that_runs_no_python_is_one_line(cli):
    import subprocess

    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        one_line_error(cli("stacks", "--pid", str(sleeper.pid), "--duration", "1"),
                       f"--pid {sleeper.pid}", "is not a Python process")
    finally:
        sleeper.kill()
        sleeper.wait()
