"""The engine's device: "auto" -> cuda when available, else cpu (torch loads only here)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from perfkit.errors import PerfkitError

if TYPE_CHECKING:
    import torch


def resolve_device(requested: str) -> torch.device:
    """"auto" -> cuda when available, else cpu. Imports torch (only here, when called)."""
    import torch

    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if requested == "cuda" and not torch.cuda.is_available():
        raise PerfkitError(
            "device 'cuda' requested but torch.cuda.is_available() is False; "
            "use --device cpu (or auto), or install a CUDA build of torch on a GPU machine"
        )
    return torch.device(requested)
