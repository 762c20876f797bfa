"""A local Hugging Face tokenizer file (tokenizer.json, through the `tokenizers` library):
read once here for every place that takes one (--tokenizer, workload.dataset.tokenizer)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from perfkit.errors import PerfkitError


def read_tokenizer(path: Path, what: str = "--tokenizer") -> Any:
    """DIR/tokenizer.json (or the file itself); a PerfkitError naming `what` otherwise."""
    file = path / "tokenizer.json" if path.is_dir() else path
    if not file.is_file():
        raise PerfkitError(f"{what}: no tokenizer.json in {path}")
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise PerfkitError(f"{what} needs the `tokenizers` package: "
                           "pip install tokenizers") from None
    try:
        return Tokenizer.from_file(str(file))
    except Exception as err:  # the library raises its own Exception type on a bad file
        raise PerfkitError(f"{what}: cannot read {file}: {err}") from None
