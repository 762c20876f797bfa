"""Per-step attention metadata and the plan that splits a mixed batch for the gather backend.

There are no prefill or decode phases in the batch, only sequences that add q_len tokens to a
context of seq_len. The plan sorts them into two kinds of work:
- decode groups: sequences with q_len == 1, attended as a padded batch (one SDPA call per group,
  the heads of a kv head stacked as its queries); groups are cut so their gathered K+V fits the
  workspace's group budget;
- prefill sequences: q_len > 1 (a prompt chunk after an optional cached prefix), one at a time.
The plan is built once per step (per workspace and dtype) and shared by all layers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from perfkit.config.units import cdiv
from perfkit.engine.layers.workspace import AttentionWorkspace


@dataclass(frozen=True)
class DecodeGroup:
    """Decode sequences gathered and attended together."""

    token_start: int | None  # their q/out rows are token_start.. +num_seqs-1; None: see token_idx
    token_idx: torch.Tensor  # int64 [num_seqs] their q/out rows
    block_ids: torch.Tensor  # int64 [num_seqs * num_blocks] block table rows padded with block 0
    num_seqs: int
    num_blocks: int  # blocks gathered per sequence (max over the group)
    kv_len: int  # keys per sequence fed to SDPA (max seq_len in the group)
    mask: torch.Tensor | None  # additive [num_seqs, 1, 1, kv_len]; None when all seq_lens equal
    seq_lens: torch.Tensor  # int32 [num_seqs] context lengths (the Triton kernel's bounds)


@dataclass(frozen=True)
class PrefillSeq:
    """One sequence with q_len > 1: its new tokens are the last q_len of seq_len."""

    token_start: int  # first q/out row of its chunk
    q_len: int
    seq_len: int
    block_ids: torch.Tensor  # int64 [cdiv(seq_len, block_size)] its block table


@dataclass(frozen=True)
class AttentionPlan:
    decode: list[DecodeGroup]
    prefill: list[PrefillSeq]


@dataclass
class AttentionMetadata:
    """Built once per engine step, shared by all layers. The batch is B sequences; sequence i
    contributes q_lens[i] new query tokens (a prefill chunk, or 1 for decode), flattened in order
    into T = sum(q_lens) tokens. Its context after this step is seq_lens[i] tokens
    (= tokens already in the cache + q_lens[i]); the new tokens are the LAST q_lens[i] positions
    of the context and attend causally (token j of the chunk sees context positions
    < seq_lens[i] - q_lens[i] + j + 1)."""

    q_lens: list[int]  # python ints, len B, each >= 1
    seq_lens: list[int]  # python ints, len B, seq_lens[i] >= q_lens[i]
    block_tables: torch.Tensor  # int64 [B, max_blocks_per_seq] on device, padded with 0
    slot_mapping: torch.Tensor  # int64 [T] cache slot of each new token's K/V
    query_start_loc: list[int]  # python ints, len B + 1: sequence i owns rows [qsl[i], qsl[i+1])
    block_size: int
    # plans cached per (block_size, group_blocks, dtype) of a workspace: one per step, not per
    # layer
    _plans: dict[tuple[int, int, torch.dtype], AttentionPlan] = field(default_factory=dict,
                                                                      repr=False)

    @property
    def num_tokens(self) -> int:
        return self.query_start_loc[-1]

    @classmethod
    def build(cls, q_lens: list[int], seq_lens: list[int], block_tables: list[list[int]],
              block_size: int, device: torch.device | str,
              workspace: AttentionWorkspace | None = None) -> AttentionMetadata:
        """Validate the batch and compute slot_mapping from the block tables (on the host, one
        copy to the device). With a workspace the plan is built now rather than at layer 0."""
        _validate(q_lens, seq_lens, block_tables, block_size)
        device = torch.device(device)
        width = max([1, *map(len, block_tables)])
        table = torch.tensor([row + [0] * (width - len(row)) for row in block_tables],
                             dtype=torch.int64).view(len(block_tables), width)  # [B, width]
        q_t = torch.tensor(q_lens, dtype=torch.int64)
        starts = torch.cumsum(q_t, 0) - q_t  # [B] first row of each sequence
        seq = torch.repeat_interleave(torch.arange(len(q_lens)), q_t)  # [T] sequence of a row
        offset = torch.tensor(seq_lens, dtype=torch.int64) - q_t  # [B] cached prefix length
        pos = torch.arange(seq.numel()) - starts[seq] + offset[seq]  # [T] position in context
        slots = table[seq, pos // block_size] * block_size + pos % block_size  # [T]
        qsl = [0]
        for n in q_lens:
            qsl.append(qsl[-1] + n)
        meta = cls(list(q_lens), list(seq_lens), table.to(device), slots.to(device), qsl,
                   block_size)
        if workspace is not None:
            meta.plan(workspace)
        return meta

    def plan(self, ws: AttentionWorkspace) -> AttentionPlan:
        key = (ws.block_size, ws.group_blocks, ws.dtype)
        if key not in self._plans:
            self._plans[key] = _make_plan(self, ws)
        return self._plans[key]


def _validate(q_lens: list[int], seq_lens: list[int], block_tables: list[list[int]],
              block_size: int) -> None:
    if not len(q_lens) == len(seq_lens) == len(block_tables):
        raise ValueError(f"AttentionMetadata: q_lens, seq_lens, block_tables lengths differ: "
                         f"{len(q_lens)}, {len(seq_lens)}, {len(block_tables)}")
    for i, (q, s, row) in enumerate(zip(q_lens, seq_lens, block_tables, strict=True)):
        if not 1 <= q <= s:
            raise ValueError(f"AttentionMetadata: sequence {i} needs 1 <= q_len <= seq_len, "
                             f"got q_len={q} seq_len={s}")
        if len(row) * block_size < s:
            raise ValueError(f"AttentionMetadata: sequence {i} has {len(row)} blocks of "
                             f"{block_size}, too few for seq_len={s}")


def _make_plan(meta: AttentionMetadata, ws: AttentionWorkspace) -> AttentionPlan:
    """Checks the batch against the workspace once per step (the layers reuse the plan)."""
    if meta.block_size != ws.block_size:
        raise ValueError(f"attention: block sizes differ: metadata {meta.block_size}, "
                         f"cache and workspace {ws.block_size}")
    if len(meta.q_lens) > ws.max_num_seqs:
        raise ValueError(f"attention: batch of {len(meta.q_lens)} sequences exceeds "
                         f"max_num_seqs={ws.max_num_seqs}")
    if meta.seq_lens and max(meta.seq_lens) > ws.max_model_len:
        raise ValueError(f"attention: seq_len {max(meta.seq_lens)} exceeds "
                         f"max_model_len={ws.max_model_len}")
    decode = [i for i, q in enumerate(meta.q_lens) if q == 1]
    prefill = [
        PrefillSeq(meta.query_start_loc[i], q, meta.seq_lens[i],
                   meta.block_tables[i, :cdiv(meta.seq_lens[i], meta.block_size)])
        for i, q in enumerate(meta.q_lens) if q > 1
    ]
    groups = [_decode_group(meta, ids, ws.dtype) for ids in _cut_groups(meta, decode, ws)]
    return AttentionPlan(groups, prefill)


def _cut_groups(meta: AttentionMetadata, seqs: list[int], ws: AttentionWorkspace
                ) -> list[list[int]]:
    """Greedy in batch order: a group grows while its padded block count fits group_blocks
    (a group always takes at least one sequence; one sequence always fits the buffers)."""
    groups: list[list[int]] = []
    current: list[int] = []
    widest = 0
    for i in seqs:
        blocks = cdiv(meta.seq_lens[i], meta.block_size)
        wider = max(widest, blocks)
        if current and (len(current) + 1) * wider > ws.group_blocks:
            groups.append(current)
            current, wider = [], blocks
        current.append(i)
        widest = wider
    if current:
        groups.append(current)
    return groups


def _decode_group(meta: AttentionMetadata, seqs: list[int], dtype: torch.dtype) -> DecodeGroup:
    device = meta.block_tables.device
    lens = [meta.seq_lens[i] for i in seqs]
    kv_len = max(lens)
    num_blocks = cdiv(kv_len, meta.block_size)
    rows = [meta.query_start_loc[i] for i in seqs]
    consecutive = rows == list(range(rows[0], rows[0] + len(rows)))
    seq_idx = torch.tensor(seqs, dtype=torch.int64, device=device)
    block_ids = meta.block_tables.index_select(0, seq_idx)[:, :num_blocks].reshape(-1)
    mask = None
    if min(lens) != kv_len:
        lens_t = torch.tensor(lens, device=device).view(-1, 1, 1, 1)
        hidden = torch.arange(kv_len, device=device) >= lens_t  # [g, 1, 1, kv_len]
        mask = torch.zeros(hidden.shape, dtype=dtype, device=device)
        mask.masked_fill_(hidden, float("-inf"))
    return DecodeGroup(rows[0] if consecutive else None,
                       torch.tensor(rows, dtype=torch.int64, device=device),
                       block_ids.contiguous(), len(seqs), num_blocks, kv_len, mask,
                       torch.tensor(lens, dtype=torch.int32, device=device))
