"""Choose the level whose flame graph the report embeds, find its SVG, embed it safely.

A level's key is the name its stack files carry (`level-KEY.svg`): the concurrency
("8"), or "rate-4" for an open-loop level, with "-rN" when the sweep repeated levels.
The SVG goes into a sandboxed `<iframe srcdoc>`: scripts in it never run (no
allow-scripts), it cannot reach the page (no allow-same-origin), and the frame
tooltips (`<title>`) still work, which an `<img>` would lose.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfkit.errors import PerfkitError
from perfkit.report.sweep_charts import Level, SweepIn, level_order, x_of
from perfkit.result.point import slug_of
from perfkit.result.stacks import stack_path_candidates

SVG_SIZE = re.compile(r'<svg\b[^>]*?\bwidth="([0-9.]+)"[^>]*?\bheight="([0-9.]+)"', re.S)
PROLOG = re.compile(r"^\s*(<\?xml[^>]*\?>\s*)?(<!DOCTYPE[^>]*>\s*)?", re.I)


@dataclass(frozen=True)
class Flame:
    label: str  # the input's label
    key: str  # the level's stack name
    svg_path: str  # as recorded in the result
    svg: str | None  # the SVG text; None when it could not be read
    note: str  # why not embedded, when svg is None


def stack_key(lv: Level, repeated: bool) -> str:
    return lv.point.key(lv.repeat, repeated)


def _stack_levels(s: SweepIn) -> dict[str, Level]:
    """Key -> level, for the levels recorded with --stacks (an SVG path present)."""
    repeated = any(lv.repeat for lv in s.levels)
    return {stack_key(lv, repeated): lv for lv in s.levels
            if lv.stacks is not None and lv.stacks.svg_path}


def normalise_key(text: str) -> str:
    """Accept '8', 'c=8', 'concurrency 8', 'level-8' for the key '8' (result.point.slug_of)."""
    return slug_of(text)


def choose_key(sweeps: Sequence[SweepIn], requested: str | None) -> str | None:
    """The requested key (checked), else the highest concurrency with stacks; None if none."""
    found = {key: lv for s in sweeps for key, lv in _stack_levels(s).items()}
    if requested is not None:
        key = normalise_key(requested)
        if key in found:
            return key
        if not found:
            raise PerfkitError(f"--flame {requested}: no result has stacks; record them "
                               "with perfkit sweep --stacks")
        names = ", ".join(sorted(found, key=lambda k: level_order(found[k])))
        raise PerfkitError(f"--flame {requested}: no level with stacks by that name; "
                           f"choose one of {names}")
    if not found:
        return None
    return max(found, key=lambda k: (x_of(found[k])[0] == "concurrency",
                                     level_order(found[k])[1], -found[k].repeat))


def candidates(recorded: str, s: SweepIn, search_dirs: Sequence[Path]) -> list[Path]:
    """The result folder first, then as written, then beside the result or a search dir
    (a moved folder whose old result holds working-directory-relative paths)."""
    found = stack_path_candidates(recorded, s.inp.source)
    if Path(recorded).is_absolute():
        return found
    name = Path(recorded).name
    dirs = ([s.inp.source.parent] if s.inp.source is not None else []) + list(search_dirs)
    return [*found, *(d / recorded for d in search_dirs),
            *(d / "stacks" / name for d in dirs), *(d / name for d in dirs)]


def read_svg(paths: Sequence[Path]) -> tuple[str | None, str]:
    for path in paths:
        try:
            body = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if "<svg" not in body[:4096]:
            return None, f"{path} is not an SVG file"
        return PROLOG.sub("", body, count=1), ""
    return None, f"not found: {paths[0]}"


def flames(sweeps: Sequence[SweepIn], requested: str | None,
           search_dirs: Sequence[Path] = ()) -> list[Flame]:
    """One flame graph per input that recorded stacks at the chosen level."""
    key = choose_key(sweeps, requested)
    out = []
    for s in sweeps:
        lv = _stack_levels(s).get(key) if key is not None else None
        if lv is None or lv.stacks is None or lv.stacks.svg_path is None:
            continue
        recorded = lv.stacks.svg_path
        svg, note = read_svg(candidates(recorded, s, search_dirs))
        out.append(Flame(s.label, key or "", recorded, svg, note))
    return out


def flame_data(items: Sequence[Flame]) -> dict[str, Any]:
    return {"kind": "flame", "inputs": [
        {"label": f.label, "level": f.key, "svg_path": f.svg_path, "embedded": f.svg is not None}
        for f in items]}


def iframe(f: Flame) -> str:
    """The SVG in a sandboxed frame sized to its aspect ratio, or the reason it is missing."""
    if f.svg is None:
        return f'<p class="note">No flame graph for {html.escape(f.label)}: ' \
               f'{html.escape(f.note)}.</p>'
    size = SVG_SIZE.search(f.svg[:4096])
    w, h = (size.group(1), size.group(2)) if size else ("1200", "600")
    doc = ("<!doctype html><meta charset='utf-8'><style>html,body{margin:0;background:#fff}"
           "svg{display:block;width:100%;height:auto}</style>" + f.svg)
    return (f'<iframe class="flame" sandbox title="flame graph: {html.escape(f.label)}, level '
            f'{html.escape(f.key)}" style="aspect-ratio: {w} / {h}" '
            f'srcdoc="{html.escape(doc, quote=True)}"></iframe>')
