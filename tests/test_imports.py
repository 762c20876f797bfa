"""torch loads only for what runs tensors: `perfkit --help`, every `perfkit X --help`,
`gate`, `report`, `fragmentation --simulate`, `predict` and `profiles` leave it out of
sys.modules.

Each check runs the real app in a fresh interpreter (this test process may have torch
loaded already) and, when torch did load, names the chain of perfkit modules that
imported it.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

_HERE = Path(__file__).parent


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gate_fixtures = _load("gate_fixtures", _HERE / "gate" / "gate_fixtures.py")
report_fixtures = _load("report_fixtures", _HERE / "report" / "report_fixtures.py")
predict_fixtures = _load("predict_fixtures", _HERE / "predict" / "predict_fixtures.py")

# In the child: note who imports torch first, import the real app, then run each case's
# `perfkit ARGS` in turn, noting the first case after which torch is loaded.
# With stub_sweep, perfkit.cli.sweep is a bare stand-in: every other module alone.
_PROBE = r"""
import json, sys, traceback, types

cases, stub_sweep = json.loads(sys.argv[1]), json.loads(sys.argv[2])
chain = []

class Watch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" and not chain:
            names = [f.f_globals.get("__name__", "?") for f, _ in traceback.walk_stack(None)]
            for mod in reversed(names):
                if mod.startswith("perfkit") and (not chain or chain[-1] != mod):
                    chain.append(mod)
            chain.append("torch")
        return None

sys.meta_path.insert(0, Watch())
if stub_sweep:
    fake = types.ModuleType("perfkit.cli.sweep")
    def sweep() -> None:
        "stand-in"
    fake.sweep = sweep
    sys.modules["perfkit.cli.sweep"] = fake

from typer.testing import CliRunner
from perfkit.cli.main import app

out = {"torch_at": None, "chain": chain, "failed": None}
for case, args in cases:
    if args is not None:
        result = CliRunner().invoke(app, args, catch_exceptions=False)
        if result.exit_code != 0:
            out["failed"] = [case, result.exit_code, result.output[-2000:]]
            break
    if "torch" in sys.modules:
        out["torch_at"] = case
        break
print(json.dumps(out))
"""

COMMANDS = ("profiles", "env", "sweep", "bench", "stacks", "gate", "fragmentation",
            "report", "serve", "calibrate", "predict")

def _cases(tmp: Path) -> list[tuple[str, list[str] | None]]:
    """(case, perfkit's arguments; None: import perfkit.cli.main only), inputs in tmp."""
    result = tmp / "result.json"
    result.write_text(json.dumps(gate_fixtures.noisy_doc(1)))
    sweep = report_fixtures.write(tmp / "sweep.json", report_fixtures.sweep_doc())
    frag = report_fixtures.write(tmp / "frag.json", report_fixtures.frag_doc())
    cal = predict_fixtures.write(tmp / "cal.json")
    return [
        ("import perfkit.cli.main", None),
        ("--help", ["--help"]),
        *((f"{c} --help", [c, "--help"]) for c in COMMANDS),
        ("profiles show --help", ["profiles", "show", "--help"]),
        ("profiles", ["profiles"]),
        ("profiles show", ["profiles", "show", "default"]),
        ("gate", ["gate", str(result), str(result)]),
        ("report", ["report", str(sweep), str(frag), "-o", str(tmp / "report.html")]),
        ("fragmentation --simulate", ["fragmentation", "--simulate", "--requests", "20",
                                      "--block-sizes", "16", "--jobs", "1"]),
        ("predict", ["predict", "-c", str(cal), "--concurrency", "1,2", "--requests", "8"]),
    ]


def probe(tmp: Path, stub_sweep: bool) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(_cases(tmp)), json.dumps(stub_sweep)],
        capture_output=True, text=True, cwd=tmp, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.splitlines()[-1])
    assert out["failed"] is None, "perfkit {} exited {}:\n{}".format(*out["failed"])
    return out


def assert_torch_free(out: dict) -> None:
    assert out["torch_at"] is None, (
        f"torch was imported after {out['torch_at']!r}: {' -> '.join(out['chain'])}")


def test_help_and_tensor_free_commands_leave_torch_unloaded(tmp_path):
    assert_torch_free(probe(tmp_path, stub_sweep=False))


def test_every_module_but_sweep_leaves_torch_unloaded(tmp_path):
    """perfkit.cli.sweep a stand-in: the other commands are checked on their own, also
    while a change to sweep imports torch."""
    assert_torch_free(probe(tmp_path, stub_sweep=True))
