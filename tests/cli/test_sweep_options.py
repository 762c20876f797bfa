"""SweepOptions: one field per option of `perfkit sweep`, and check() owning the rules
between them, each broken one a PerfkitError with today's text (no profile, no files)."""

from __future__ import annotations

import inspect
from dataclasses import fields, replace
from pathlib import Path

import pytest

from perfkit.cli.sweep import sweep
from perfkit.cli.sweep_options import SweepOptions
from perfkit.errors import PerfkitError
from perfkit.remote.options import TargetOptions


def defaults(**given: object) -> SweepOptions:
    """The options of a bare `perfkit sweep`, then `given`."""
    params = inspect.signature(inspect.unwrap(sweep)).parameters
    opts = SweepOptions(**{name: p.default for name, p in params.items()})
    return replace(opts, **given)


def test_one_field_per_option_named_as_the_parameter():
    params = inspect.signature(inspect.unwrap(sweep)).parameters
    assert sorted(f.name for f in fields(SweepOptions)) == sorted(params)


def test_a_bare_sweep_passes():
    defaults().check()


RULES = [
    ({"fmt": "yaml"}, "--format: expected table, json, markdown or csv, got 'yaml'"),
    ({"report": True}, "--report needs --json FILE or --out DIR (the report goes next to "
                       "the JSON)"),
    ({"stack_rate": 0.0}, "--stack-rate: expected 0 < HZ <= 1000, got 0"),
    ({"stack_rate": 1001.0}, "--stack-rate: expected 0 < HZ <= 1000, got 1001"),
    ({"native": True}, "--native adds C/C++ frames to --stacks' samples: add --stacks "
                       "(or drop --native)"),
    ({"timeout": 5.0}, "--timeout needs --target URL"),
    ({"workers_per_node": 2}, "--workers-per-node needs --target URL"),
    ({"tokenizer": Path("tok")}, "--tokenizer needs --target URL"),
    ({"target": "http://h/v1", "device": "cpu"},
     "--device sets the in-process engine's device; with --target the server chooses its own"),
    ({"server_profile_dir": Path("d")},
     "--server-profile needs --target URL (a server with a profiler)"),
    ({"server_traces": "4318"},
     "--server-traces needs --target URL (a server that exports spans)"),
    ({"lockstep": Path("s"), "search": True, "stacks": True},
     "--lockstep cannot be combined with --search, --stacks: it pairs sweeps level for level "
     "(drop one of them)"),
    ({"contention": True, "target": "http://h/v1"},
     "--contention traces the in-process engine; for a server, run `perfkit stacks --pid "
     "SERVER_PID --contention` on its machine"),
    ({"contention": True, "lockstep": Path("s")},
     "--contention cannot be combined with --lockstep (drop one of them)"),
    ({"search": True, "samplers": False},
     "--search runs its own levels: without --stacks or --no-samplers"),
    ({"search_max": 2e6}, "--search-max: expected 0 < LOAD <= 1e6, got 2e+06"),
]


@pytest.mark.parametrize(("given", "message"), RULES)
def test_each_rule_names_the_flags(given, message):
    with pytest.raises(PerfkitError) as err:
        defaults(**given).check()
    assert str(err.value) == message


def test_tokenizer_with_a_dataset_needs_no_target():
    defaults(tokenizer=Path("tok"), dataset=Path("d.jsonl")).check()


def test_the_profile_overrides_in_order():
    opts = defaults(concurrency="1,2", requests=8, percentiles="99,50,99")
    assert opts.profile_sets() == ["sweep.concurrency=[1, 2]", "sweep.rates=[]",
                                   "workload.num_requests=8",
                                   "sweep.percentiles=[50.0, 99.0]"]
    with pytest.raises(PerfkitError, match=r"--percentiles: each must be in \(0, 100\)"):
        defaults(percentiles="50,100").profile_sets()


def test_target_options_carry_every_companion():
    opts = defaults(target="http://h/v1", model="m", timeout=3.0, workers="2", ray="local",
                    workers_per_node=4)
    assert opts.target_options() == TargetOptions(
        "http://h/v1", model="m", timeout_s=3.0, endpoint="completions", workers="2",
        ray="local", workers_per_node=4)
    assert defaults().target_options() is None


def test_result_path_is_json_else_result_json_in_out():
    assert defaults().result_path() is None
    assert defaults(out=Path("o")).result_path() == Path("o/result.json")
    assert defaults(out=Path("o"), json_path=Path("r.json")).result_path() == Path("r.json")
