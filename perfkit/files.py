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
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; results are for sharing
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
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


def check_output(path: Path, force: bool) -> None:
    """Before any work: refuse to replace a file without --force, or to write into a
    folder path or under a file."""
    if path.is_dir():
        raise PerfkitError(f"{path} is a folder; name a file")
    if path.exists() and not force:
        raise PerfkitError(f"{path} exists; pass --force to overwrite it or choose another file")
    if path.parent.exists() and not path.parent.is_dir():
        raise PerfkitError(f"{path.parent} is not a folder")
