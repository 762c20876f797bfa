"""Refuse, with a clear message, a profile whose model + KV cannot fit this machine."""

from __future__ import annotations

import psutil
import torch

from perfkit.config.presets import DTYPE_BYTES
from perfkit.config.profile import pool_blocks
from perfkit.config.schema import Profile
from perfkit.config.units import format_bytes
from perfkit.engine.engine import resolve_device
from perfkit.engine.layers.model import num_parameters
from perfkit.errors import PerfkitError

HEADROOM = 0.8  # use at most this share of the free memory


def footprint_bytes(profile: Profile) -> int:
    """Weights + KV cache (activations and workspaces are small next to them)."""
    m = profile.model
    weights = num_parameters(m) * DTYPE_BYTES[m.dtype]
    kv = pool_blocks(profile) * profile.engine.block_size * m.kv_bytes_per_token
    return weights + kv


def check_fits(profile: Profile) -> None:
    device = resolve_device(profile.engine.device)
    need = footprint_bytes(profile)
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        where = "GPU memory free"
    else:
        free = psutil.virtual_memory().available
        where = "memory available"
    if need > HEADROOM * free:
        raise PerfkitError(
            f"profile {profile.name!r} needs {format_bytes(need)} for weights and KV cache, "
            f"but this machine has {format_bytes(free)} {where}; use a smaller --model "
            "(e.g. tiny) or a smaller pool (--set engine.num_blocks=... / engine.kv_memory), "
            "or run it on a GPU machine"
        )
