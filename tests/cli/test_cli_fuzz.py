"""Random argument vectors through every subcommand: no traceback, exit 0 or 2 (issue 20).

The options come from the commands themselves (click's parameters), the values from a
hostile vocabulary. Whatever would run real work (a sweep, the benchmarks, a replay, a
recording, a server, the environment probe) is stubbed to exit 0 once every check passed:
the fuzz drives the parsing and checking, in milliseconds per example.
"""

from __future__ import annotations

import json
import sys

import pytest
import typer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perfkit.cli.main import app

COMMANDS = ["sweep", "fragmentation", "stacks", "bench", "gate", "report", "serve",
            "profiles", "env", "calibrate", "predict"]
VALUES = ["1", "0", "-1", "2", "nan", "inf", "-inf", "1e-9", "1e308", "1000000000000",
          "99999999999999999999999", "abc", "", " ", "1,2", "0,16", "x" * 300, "/proc/x",
          "/etc/passwd/x", "FILE", "DIR", "RESULT", "default", "tiny", "warp.drive=1",
          "engine.num_blocks=1", "slo.ttft_s=nan", "engine.block_size=32", "../../x",
          "auto", "cpu", "json", "[", "\x00"]


def _reached_the_work(*args, **kwargs):
    raise typer.Exit(0)


@pytest.fixture
def stubbed(monkeypatch, tmp_path):
    import perfkit.cli.bench
    import perfkit.fragmentation.policies
    import perfkit.measure.envinfo
    import perfkit.predict.calibrate
    import perfkit.predict.levels
    import perfkit.run
    import perfkit.serve.lifecycle
    import perfkit.stacks.external

    for module, name in ((perfkit.run, "run_sweep"), (perfkit.cli.bench, "run_benches"),
                         (perfkit.fragmentation.policies, "simulate"),
                         (perfkit.stacks.external, "record_command"),
                         (perfkit.stacks.external, "record_pid"),
                         (perfkit.serve.lifecycle, "bind"),
                         (perfkit.measure.envinfo, "collect"),
                         (perfkit.predict.calibrate, "calibrate"),
                         (perfkit.predict.levels, "predict_profile")):
        monkeypatch.setattr(module, name, _reached_the_work)
    monkeypatch.chdir(tmp_path)
    from tests.gate import gate_fixtures

    (tmp_path / "RESULT").write_text(json.dumps(gate_fixtures.noisy_doc(1)))
    (tmp_path / "FILE").write_text("measured")
    (tmp_path / "DIR").mkdir()
    return tmp_path


def _options(name: str) -> list[tuple[str, bool]]:
    """(option, is_flag) of a subcommand, from click's own parameter list."""
    group = typer.main.get_command(app)
    command = group.commands[name]  # type: ignore[attr-defined]
    if not command.params and hasattr(command, "commands"):  # `profiles`: its `show`
        command = command.commands["show"]
    out = []
    for param in command.params:
        for opt in [*param.opts, *param.secondary_opts]:
            if opt.startswith("-") and opt not in ("--help",):
                out.append((opt, bool(getattr(param, "is_flag", False))))
    return out


def _argv(name: str) -> st.SearchStrategy[list[str]]:
    options = _options(name)
    one = st.sampled_from(options).flatmap(
        lambda o: st.just([o[0]]) if o[1] else st.sampled_from(VALUES).map(lambda v: [o[0], v]))
    positional = st.lists(st.sampled_from(VALUES), max_size=2)
    tail = st.sampled_from([[], ["--", sys.executable, "-c", "0"], ["--", "/bin/true"]])
    return st.tuples(st.lists(one, max_size=4), positional, tail).map(
        lambda t: [a for pair in t[0] for a in pair] + t[1] + (t[2] if name == "stacks" else []))


@pytest.mark.parametrize("name", COMMANDS)
def test_random_arguments_never_trace_back(cli, stubbed, name):
    @settings(max_examples=30, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture,
                                     HealthCheck.too_slow])
    @given(_argv(name))
    def run(argv: list[str]) -> None:
        args = [str(stubbed / a) if a in ("FILE", "DIR", "RESULT") else a for a in argv]
        if name == "profiles":
            args = ["show", *args] if args and not args[0].startswith("-") else args
        result = cli(name, *args)
        output = result.stdout + result.stderr
        assert "Traceback" not in output, (argv, output)
        assert result.exit_code in (0, 2), (argv, result.exit_code, output[-2000:])
        if result.exit_code == 2 and result.stderr.strip():
            assert len(result.stderr.strip().splitlines()) == 1, (argv, result.stderr)

    run()
