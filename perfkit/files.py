"""Files: atomic writes, JSON dumps, reading sweep results, output-path checks.

Every file perfkit writes goes through atomic_write_text (temp file in the same folder,
then rename: a reader never sees half a file), mode 0666 less the umask.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

from perfkit.errors import PerfkitError


def atomic_write_text(path: Path, text: str) -> None:
    """Write via a temp file in the same folder + rename: readers never see half a file."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """The one atomic write: temp file in the same folder, mode 0666 less the umask
    (mkstemp makes 0600; results are for sharing), then rename over `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _clean(value: Any) -> Any:
    """NaN/inf -> None: JSON has neither."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def dumps(doc: Any) -> str:
    """JSON text of a document (dicts, lists, numbers); NaN/inf written as null."""
    return json.dumps(_clean(doc), indent=1, allow_nan=False) + "\n"


def read_json(path: Path) -> Any:
    """Parsed JSON; a PerfkitError naming the file for anything unreadable."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PerfkitError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise PerfkitError(f"{path}: not a readable JSON result ({err})") from None


def check_output(path: Path, force: bool, what: str = "") -> None:
    """Before any work: the one overwrite rule. Refuse to replace a file that has content
    without --force (an empty one, e.g. $GITHUB_STEP_SUMMARY, holds nothing to lose), a
    folder, FIFO or device where a file is meant, a name too long for the file system, and
    a place perfkit cannot create the file in (a file above it, no permission)."""
    label = f"{what} {path}" if what else str(path)
    check_name(path, label)
    if path.is_dir():
        raise PerfkitError(f"{label}: is a folder; name a file")
    if path.exists() or path.is_symlink():
        if not path.is_file():
            raise PerfkitError(f"{label}: exists and is not a regular file")
        if not force and path.stat().st_size > 0:
            raise PerfkitError(f"{label}: exists; pass --force to overwrite it or choose "
                               "another file")
    check_writable_dir(path.parent, label)


def check_output_dir(path: Path, what: str = "") -> None:
    """Before any work: `path` is (or can be made) a folder perfkit can write in."""
    label = f"{what} {path}" if what else str(path)
    check_name(path, label)
    if path.exists() and not path.is_dir():
        raise PerfkitError(f"{label}: is a file; name a folder")
    check_writable_dir(path, label)


def check_name(path: Path, label: str) -> None:
    """Every component (and the temp file next to it) fits the file system's name limit."""
    if len(os.fsencode(str(path))) > PATH_MAX:
        raise PerfkitError(f"{_short(label)}: path is longer than {PATH_MAX} bytes")
    for part in path.parts:
        if len(os.fsencode(part)) > NAME_MAX - TEMP_SUFFIX:
            raise PerfkitError(f"{_short(label)}: file name is longer than "
                               f"{NAME_MAX - TEMP_SUFFIX} bytes")


def check_writable_dir(folder: Path, label: str) -> None:
    """The nearest existing folder at or above `folder` is a folder we may create in."""
    probe = folder
    while not probe.exists() and probe != probe.parent:
        if probe.is_symlink():
            raise PerfkitError(f"{label}: {probe} is a dangling link")
        probe = probe.parent
    if not probe.is_dir():
        raise PerfkitError(f"{label}: {probe} is not a folder")
    try:  # O_TMPFILE where the OS has it: nothing with a name is created
        with tempfile.TemporaryFile(dir=probe):
            pass
    except OSError as err:
        raise PerfkitError(f"{label}: cannot write in {probe} ({err.strerror})") from None


def _short(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


PATH_MAX = 4096
NAME_MAX = 255
TEMP_SUFFIX = 10  # atomic_write_text's temp name: ".NAME." + 8 random characters
