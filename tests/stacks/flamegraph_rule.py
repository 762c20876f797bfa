"""flamegraph.pl's rule for a folded line, and a check of a whole file against it
(a helper for the stacks tests, not a test module)."""

from __future__ import annotations

import re
from pathlib import Path

from perfkit.stacks.folded import read_folded

# flamegraph.pl's line rule, as the issue states it (integer counts only)
FLAMEGRAPH_LINE = re.compile(r"^(.*)\s+(\d+)$")


def check_folded_file(path: Path, allow_empty: bool = False) -> dict[str, int]:
    """Every line a stack and a positive integer count; the stacks as read back."""
    lines = Path(path).read_text().splitlines()
    assert lines or allow_empty, f"{path} is empty"
    for line in lines:
        match = FLAMEGRAPH_LINE.match(line)
        assert match, line
        assert int(match.group(2)) > 0 and match.group(2).isdigit()
    return read_folded(path)
