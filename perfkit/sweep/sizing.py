"""Refuse, with a clear message, a profile whose model + KV cannot fit this machine."""

from __future__ import annotations

import psutil

from perfkit.config.schema import Profile
from perfkit.config.units import format_bytes
from perfkit.engine.device import resolve_device
from perfkit.engine.kv_spec import KVSpec
from perfkit.errors import PerfkitError

HEADROOM = 0.8  # use at most this share of the free memory


def footprint_bytes(profile: Profile) -> int:
    """Weights + KV cache (activations and workspaces are small next to them)."""
    m = profile.model
    return m.weight_bytes + KVSpec.from_profile(profile).nbytes


def check_fits(profile: Profile) -> None:
    device = resolve_device(profile.engine.device)
    need = footprint_bytes(profile)
    if device.type == "cuda":
        import torch  # resolve_device has imported it

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
