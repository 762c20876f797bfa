"""The paged KV cache tensors: one allocation, viewed per layer as blocks of token slots.

Layout (one tensor, allocated and zero-filled once, so its pages are faulted in up front):

    data: [2 (k, v), num_layers, num_blocks, block_size, num_kv_heads, head_dim]
    k[layer] = data[0, layer]   v[layer] = data[1, layer]

A token's slot is `block_id * block_size + offset`; viewing a layer as
[num_blocks * block_size, num_kv_heads, head_dim] turns a slot into a row index.
Zero fill matters for correctness too: attention reads whole blocks (and padding block 0),
and masked positions must hold finite numbers, since 0 * NaN is NaN.
"""

from __future__ import annotations

import torch

from perfkit.engine.kv_spec import KVSpec

TORCH_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


class KVCache:
    def __init__(self, spec: KVSpec, device: torch.device | str) -> None:
        self.spec = spec  # checked on its construction
        self.dtype = TORCH_DTYPES[spec.dtype]
        self.device = torch.device(device)
        n, kvh, d = spec.num_layers, spec.num_kv_heads, spec.head_dim
        # [2, num_layers, num_blocks, block_size, num_kv_heads, head_dim]
        self.data = torch.zeros(2, n, spec.num_blocks, spec.block_size, kvh, d,
                                dtype=self.dtype, device=self.device)
        # each [num_blocks, block_size, num_kv_heads, head_dim], views into `data`
        self.k: list[torch.Tensor] = list(self.data[0].unbind(0))
        self.v: list[torch.Tensor] = list(self.data[1].unbind(0))
        # each [num_blocks * block_size, num_kv_heads, head_dim]: row = slot
        self._k_slots = [t.view(-1, kvh, d) for t in self.k]
        self._v_slots = [t.view(-1, kvh, d) for t in self.v]

    @property
    def num_layers(self) -> int:
        return self.spec.num_layers

    @property
    def num_blocks(self) -> int:
        return self.spec.num_blocks

    @property
    def block_size(self) -> int:
        return self.spec.block_size

    @property
    def num_slots(self) -> int:
        return self.spec.num_slots
    def write(self, layer: int, slot_mapping: torch.Tensor, k: torch.Tensor,
              v: torch.Tensor) -> None:
        """Store new tokens' keys and values. slot_mapping: int64 [T] (distinct slots);
        k, v: [T, num_kv_heads, head_dim] in the cache dtype, on the cache device."""
        self._k_slots[layer].index_copy_(0, slot_mapping, k)
        self._v_slots[layer].index_copy_(0, slot_mapping, v)

    def copy_blocks(self, pairs: list[tuple[int, int]]) -> None:
        """Copy-on-write: for every layer, k and v, block src -> block dst. All sources are read
        before any destination is written; destinations must be distinct."""
        if not pairs:
            return
        src = [s for s, _ in pairs]
        dst = [d for _, d in pairs]
        if len(set(dst)) != len(dst):
            raise ValueError(f"copy_blocks: duplicate destination blocks in {pairs}")
        for b in (*src, *dst):
            if not 0 <= b < self.num_blocks:
                raise ValueError(f"copy_blocks: block {b} out of range [0, {self.num_blocks})")
        src_t = torch.tensor(src, dtype=torch.int64, device=self.device)
        dst_t = torch.tensor(dst, dtype=torch.int64, device=self.device)
        blocks = self.data.view(2 * self.num_layers, self.num_blocks, -1)  # [2L, blocks, slots*h*d]
        blocks.index_copy_(1, dst_t, blocks.index_select(1, src_t))

    def nbytes(self) -> int:
        return self.data.numel() * self.data.element_size()
