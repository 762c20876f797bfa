"""Charts of a written HTML report -> one PNG each (for CI artifacts and PR comments).

Rendered by headless Chromium from the report itself, so a PNG shows exactly
what the page shows. File names are the chart ids: throughput.png, ttft.png, ...
"""

from __future__ import annotations

from pathlib import Path

from perfkit.errors import PerfkitError
from perfkit.files import atomic_write_bytes
from perfkit.report.browser import INSTALL_HINT, capture, find_chromium

PNG_SCALE = 2.0  # device pixels per CSS pixel: sharp on high-density screens


def export_png(report: Path, out_dir: Path, scale: float = PNG_SCALE) -> list[Path]:
    """Write DIR/<chart>.png for every chart of `report`; the paths, in page order."""
    exe = find_chromium()
    if exe is None:
        raise PerfkitError(f"--png needs {INSTALL_HINT}; the HTML report was written to "
                           f"{report}")
    if out_dir.exists() and not out_dir.is_dir():
        raise PerfkitError(f"--png: {out_dir} is not a folder")
    out_dir.mkdir(parents=True, exist_ok=True)
    shots = capture(report, scale=scale, exe=exe).shots
    paths = []
    for element_id, png in shots.items():
        path = out_dir / f"{element_id.removeprefix('chart-')}.png"
        atomic_write_bytes(path, png)
        paths.append(path)
    return paths
