"""A kernel split over files keeps a true cache: numba's own stamp is the entry point's
file, so jit stamps an entry's cache with every kernel file it reaches. An edit of a
callee's file recompiles the entry; no edit loads it from the cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from perfkit import jit

pytestmark = pytest.mark.skipif(bool(jit.numba_missing()) or jit.jit_disabled(),
                                reason="needs numba")

_CALLEE = "from perfkit.jit import kernel\n\nSTEP = {step}\n\n\n@kernel\ndef bump(a):\n" \
          "    return a[0] + STEP\n"
_ENTRY = "from kpkg.callee import bump\nfrom perfkit.jit import kernel\n\n\n@kernel\n" \
         "def run(a):\n    return bump(a)\n"
_CALL = ("import json, numpy as np\nfrom kpkg.entry import run\n"
         "print(json.dumps([int(run(np.array([1]))), run.stats.cache_hits[run.signatures[0]]"
         " if run.signatures else 0]))")


def _run(root: Path) -> tuple[int, int]:
    """(run's answer, cache hits) in a fresh interpreter."""
    env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{Path(jit.__file__).parents[1]}"}
    out = subprocess.run([sys.executable, "-c", _CALL], env=env, capture_output=True,
                         text=True, check=True, timeout=120)
    value, hits = json.loads(out.stdout.splitlines()[-1])
    return value, hits


def test_a_callee_edit_recompiles_the_entry(tmp_path):
    pkg = tmp_path / "kpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "entry.py").write_text(_ENTRY)
    (pkg / "callee.py").write_text(_CALLEE.format(step=1))
    assert _run(tmp_path) == (2, 0)  # compiled, written to the cache
    assert _run(tmp_path) == (2, 1)  # loaded from it
    (pkg / "callee.py").write_text(_CALLEE.format(step=2))  # the constant, then the code
    assert _run(tmp_path) == (3, 0)
    (pkg / "callee.py").write_text(_CALLEE.format(step=2).replace("+ STEP", "- STEP"))
    assert _run(tmp_path) == (-1, 0)
    assert _run(tmp_path) == (-1, 1)


def test_the_paged_kernel_stamp_covers_its_files():
    from perfkit.replay import paged_kernel

    names = {Path(f).name for f in jit.kernel_files(paged_kernel.__name__)}
    assert {"paged_kernel.py", "paged_step.py", "paged_schedule.py", "paged_span.py",
            "paged_blocks.py", "paged_layout.py", "arrivals_kernel.py", "arrivals.py",
            "jit.py"} <= names
