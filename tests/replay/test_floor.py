"""replay/ sits under fragmentation/ and over engine/ (docs/architecture.md): it imports
only from below, and fragmentation/ takes its trace, arrival rule and paged kernel from it."""

from __future__ import annotations

import ast
from pathlib import Path

import perfkit

BELOW = ("perfkit.replay", "perfkit.engine", "perfkit.config", "perfkit.workload",
         "perfkit.jit")
ROOT = Path(perfkit.__file__).parent


def _imports(folder: str) -> set[str]:
    found: set[str] = set()
    for path in (ROOT / folder).glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "perfkit":
                found |= {f"perfkit.{alias.name}" for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                found.add(node.module)
            elif isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names}
    return {m for m in found if m.startswith("perfkit")}


def test_replay_imports_only_from_below():
    assert {m for m in _imports("replay") if not m.startswith(BELOW)} == set()


def test_fragmentation_has_no_kernel_of_its_own_but_contiguous():
    assert {p.name for p in (ROOT / "fragmentation").glob("*_kernel.py")} == {
        "contiguous_kernel.py"}
    assert "perfkit.replay.arrivals_kernel" in _imports("fragmentation")
