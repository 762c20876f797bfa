"""Preallocated buffers for paged attention, sized once from the engine limits.

Why a workspace: gathering a batch's KV blocks with `k_cache[block_table]` allocates a fresh
buffer every layer of every step (measured on a 2-core CPU: ~16,000 minor page faults per step,
~30% of CPU time in the kernel). Here every gather lands in these buffers with
`index_select(out=...)`, so a step allocates only metadata-sized tensors.

Sizing (documented choice, not a hard limit of the engine):
- K/V gather buffers hold `capacity_blocks` blocks = max(one max_model_len sequence,
  one decode group). A decode group is as many decode sequences as fit in `group_bytes` of
  gathered K+V. On CPU that is 4 MiB: gathering and attending group by group keeps the
  gathered copy in cache; for [heads 32, kv 8, dim 128] decode of 16 x 512 tokens (64 MiB of
  K+V) it measured 1.1-1.3x dense SDPA, versus 1.7-2.0x when gathering the whole batch first
  (2-8 MiB all did about as well).
  On CUDA it is 512 MiB (capped by max_num_seqs x max_model_len), so GPU-sized profiles do not
  reserve max_num_seqs x max_model_len tokens of scratch.
- Prefill chunks are attended in sub-chunks of `mask_queries` queries against a bottom-right
  causal mask template of `mask_bytes` (default 32 MiB).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from perfkit.config.units import cdiv
from perfkit.engine.kv_spec import KVSpec
from perfkit.engine.layers.kv_cache import TORCH_DTYPES

MiB = 1 << 20
CPU_GROUP_BYTES = 4 * MiB
CUDA_GROUP_BYTES = 512 * MiB
MASK_BYTES = 32 * MiB


@dataclass(frozen=True)
class AttentionWorkspace:
    """Buffers one PagedAttention reuses for every layer of every step; never resized."""

    k: torch.Tensor  # [capacity_blocks, block_size, num_kv_heads, head_dim] gathered keys
    v: torch.Tensor  # [capacity_blocks, block_size, num_kv_heads, head_dim] gathered values
    q: torch.Tensor  # [q_rows, num_heads, head_dim] gathered / regrouped queries
    # [mask_queries * mask_rep, max_model_len] additive 0 / -inf; row r is query r // mask_rep of
    # a chunk whose last query sits at the last row; column c is key c - (max_model_len - ctx).
    # Any (q_len <= mask_queries, ctx <= max_model_len) bottom-right causal mask is the view
    # causal_mask[(mask_queries - q_len) * mask_rep:, max_model_len - ctx:].
    causal_mask: torch.Tensor
    group_blocks: int  # decode sequences are gathered in groups of <= this many blocks
    mask_queries: int  # prefill chunks are attended in sub-chunks of <= this many queries
    mask_rep: int  # template rows per query: heads per kv head if grouped_prefill, else 1
    grouped_prefill: bool  # prefill as plain MHA over kv heads (CUDA: keeps mem-efficient SDPA)
    max_model_len: int
    max_num_seqs: int

    @property
    def block_size(self) -> int:
        return self.k.shape[1]

    @property
    def dtype(self) -> torch.dtype:
        return self.k.dtype

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.k, self.v, self.q, self.causal_mask))


def causal_template(rows: int, rep: int, max_model_len: int, dtype: torch.dtype,
                    device: torch.device) -> torch.Tensor:
    """[rows * rep, max_model_len] additive bottom-right causal template (see causal_mask)."""
    query = (torch.arange(rows * rep, device=device) // rep).unsqueeze(1)  # [rows * rep, 1]
    key = torch.arange(max_model_len, device=device) - (max_model_len - rows)  # [max_model_len]
    mask = torch.zeros(rows * rep, max_model_len, dtype=dtype, device=device)
    return mask.masked_fill_(key.unsqueeze(0) > query, float("-inf"))


def make_workspace(spec: KVSpec, num_heads: int, *, max_num_seqs: int, max_model_len: int,
                   max_num_batched_tokens: int, device: torch.device | str,
                   group_bytes: int | None = None, mask_bytes: int = MASK_BYTES,
                   grouped_prefill: bool | None = None) -> AttentionWorkspace:
    """Allocate (zero-filled, so pages are touched now, not mid-step) the buffers for a cache
    of `spec` read by `num_heads` query heads, within the engine's batch limits."""
    device = torch.device(device)
    on_cpu = device.type == "cpu"
    dtype = TORCH_DTYPES[spec.dtype]
    block_size, num_kv_heads, head_dim = spec.block_size, spec.num_kv_heads, spec.head_dim
    elt = torch.empty((), dtype=dtype).element_size()
    block_bytes = 2 * block_size * num_kv_heads * head_dim * elt  # K+V of one block
    seq_blocks = cdiv(max_model_len, block_size)
    budget = group_bytes if group_bytes is not None else (
        CPU_GROUP_BYTES if on_cpu else CUDA_GROUP_BYTES)
    group_blocks = max(1, min(max_num_seqs * seq_blocks, budget // block_bytes))
    capacity = max(seq_blocks, group_blocks)
    grouped = (not on_cpu) if grouped_prefill is None else grouped_prefill
    rep = num_heads // num_kv_heads if grouped else 1
    max_chunk = min(max_num_batched_tokens, max_model_len)
    mask_queries = max(1, min(max_chunk, mask_bytes // (rep * max_model_len * elt)))
    kv_shape = (capacity, block_size, num_kv_heads, head_dim)
    return AttentionWorkspace(
        k=torch.zeros(kv_shape, dtype=dtype, device=device),
        v=torch.zeros(kv_shape, dtype=dtype, device=device),
        q=torch.zeros(max(max_num_seqs, mask_queries), num_heads, head_dim, dtype=dtype,
                      device=device),
        causal_mask=causal_template(mask_queries, rep, max_model_len, dtype, device),
        group_blocks=group_blocks, mask_queries=mask_queries, mask_rep=rep,
        grouped_prefill=grouped, max_model_len=max_model_len, max_num_seqs=max_num_seqs,
    )
