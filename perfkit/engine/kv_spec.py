"""KVSpec: the shape of the paged KV cache, one frozen value the engine's parts share.

The block pool (bookkeeping), the cache tensors and paged attention (engine/layers/) must
agree on these numbers. They are checked once, here; the parts keep the spec instead of
copies of its fields, so nothing re-checks them per step or per layer.

The cache it describes (engine/layers/kv_cache.py):

    [2 (k, v), num_layers, num_blocks, block_size, num_kv_heads, head_dim] of `dtype`

Torch-free: `dtype` is a name, mapped to a torch dtype only by the tensor code.
"""

from __future__ import annotations

from dataclasses import dataclass

from perfkit.config.presets import DTYPE_BYTES
from perfkit.config.profile import pool_blocks
from perfkit.config.schema import Profile

_COUNTS = ("num_blocks", "block_size", "num_layers", "num_kv_heads", "head_dim")


@dataclass(frozen=True)
class KVSpec:
    num_blocks: int  # physical blocks in the pool
    block_size: int  # token slots per block
    num_layers: int
    num_kv_heads: int
    head_dim: int
    dtype: str = "float32"  # a key of config.presets.DTYPE_BYTES

    def __post_init__(self) -> None:
        for name in _COUNTS:
            value = getattr(self, name)
            if value < 1:
                raise ValueError(f"KVSpec: {name} must be >= 1, got {value}")
        if self.dtype not in DTYPE_BYTES:
            raise ValueError(f"KVSpec: dtype {self.dtype!r} unknown; "
                             f"choose from {', '.join(DTYPE_BYTES)}")

    @classmethod
    def from_profile(cls, profile: Profile) -> KVSpec:
        m = profile.model
        return cls(pool_blocks(profile), profile.engine.block_size, m.num_layers,
                   m.num_kv_heads, m.head_dim, m.dtype)

    @property
    def num_slots(self) -> int:
        """Token slots in the pool: slot = block_id * block_size + offset."""
        return self.num_blocks * self.block_size

    @property
    def bytes_per_block(self) -> int:
        """K and V of one block for every layer."""
        return (2 * self.num_layers * self.block_size * self.num_kv_heads * self.head_dim
                * DTYPE_BYTES[self.dtype])

    @property
    def nbytes(self) -> int:
        return self.num_blocks * self.bytes_per_block
