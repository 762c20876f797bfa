"""Folded stacks -> a speedscope file (https://www.speedscope.app/file-format-schema.json).

One "sampled" profile: each distinct stack is one sample (frame indices,
root first) weighted by its count, so the file stays as small as the folded
text. Frames are shared: `{name, file, line}` once per distinct frame.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from perfkit.stacks.folded import Folded, parse_frame, split_stack

SCHEMA_URL = "https://www.speedscope.app/file-format-schema.json"


def _frame_entry(frame: str) -> dict[str, Any]:
    parsed = parse_frame(frame)
    entry: dict[str, Any] = {"name": parsed.name}
    if parsed.file:
        entry["file"] = parsed.file
        entry["line"] = parsed.line
    return entry


def to_speedscope(stacks: Folded, name: str, exporter: str = "perfkit") -> dict[str, Any]:
    """Samples are sorted by stack so the same folded input gives the same file."""
    index: dict[str, int] = {}
    frames: list[dict[str, Any]] = []
    samples: list[list[int]] = []
    weights: list[int] = []
    for stack in sorted(stacks):
        ids = []
        for frame in split_stack(stack):
            if frame not in index:
                index[frame] = len(frames)
                frames.append(_frame_entry(frame))
            ids.append(index[frame])
        samples.append(ids)
        weights.append(int(stacks[stack]))
    profile = {
        "type": "sampled",
        "name": name,
        "unit": "none",  # weights are sample counts
        "startValue": 0,
        "endValue": sum(weights),
        "samples": samples,
        "weights": weights,
    }
    return {
        "$schema": SCHEMA_URL,
        "shared": {"frames": frames},
        "profiles": [profile],
        "name": name,
        "activeProfileIndex": 0,
        "exporter": exporter,
    }


def write_speedscope(path: Path, stacks: Folded, name: str) -> None:
    from perfkit.files import atomic_write_text

    atomic_write_text(Path(path), json.dumps(to_speedscope(stacks, name), separators=(",", ":")))
