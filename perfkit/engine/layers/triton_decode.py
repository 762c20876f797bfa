"""Paged decode attention in Triton: K/V read in place through the block table.

Flash-decoding: the context of each sequence is cut into `num_splits` partitions; one
program per (sequence, kv head, partition) runs an online softmax over its tokens for all
G = num_heads // num_kv_heads query heads of that kv head (GQA: K/V are loaded once for
the group), and a second kernel merges the partitions. Nothing is gathered: a tile of
TILE token positions computes each token's page (pos // block_size), its physical block
from the block table and its slot, and loads K/V from the cache directly.

    q            [S, H, D]            one query token per sequence
    k/v cache    [num_blocks, block_size, KVH, D]  (one layer)
    block_table  [S, max_blocks]      int32/int64, padded with any valid block id
    seq_lens     [S]                  int32, >= 1; tokens of sequence s: positions < seq_lens[s]
    partials     acc [S, KVH, P, GP, DP] fp32 (unnormalised), m/l [S, KVH, P, GP]
    out          [S, H, D]            q's dtype

Shapes are padded to powers of two (GP >= 16 rows for tl.dot, DP >= 16); padding rows and
columns are masked. fp32, fp16 and bf16 caches are read as stored and accumulated in fp32.
Runs on a GPU, and on CPU under TRITON_INTERPRET=1 (the tests: against a float64 reference).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from perfkit.config.units import cdiv

TILE = 32  # token positions per inner iteration (any block size)
MIN_TOKENS_PER_SPLIT = 256  # below this a partition costs more to merge than it saves


@triton.jit
def _split_kernel(Q, K, V, BT, LENS, ACC, M, L, scale,
                  stride_qs, stride_qh, stride_kb, stride_kt, stride_kh, stride_bs,
                  stride_as, stride_ah, stride_ap, stride_ag, stride_ms, stride_mh, stride_mp,
                  part_len,
                  G: tl.constexpr, GP: tl.constexpr, D: tl.constexpr, DP: tl.constexpr,
                  BLOCK_SIZE: tl.constexpr, TILE_N: tl.constexpr):
    s = tl.program_id(0)
    kvh = tl.program_id(1)
    p = tl.program_id(2)
    seq_len = tl.load(LENS + s)
    g = tl.arange(0, GP)
    d = tl.arange(0, DP)
    g_ok = g < G
    d_ok = d < D
    q = tl.load(Q + s * stride_qs + (kvh * G + g)[:, None] * stride_qh + d[None, :],
                mask=g_ok[:, None] & d_ok[None, :], other=0.0).to(tl.float32)  # [GP, DP]
    m_i = tl.full([GP], float("-inf"), tl.float32)
    l_i = tl.zeros([GP], tl.float32)
    acc = tl.zeros([GP, DP], tl.float32)
    start = p * part_len
    end = tl.minimum(start + part_len, seq_len)
    for t0 in range(start, end, TILE_N):
        pos = t0 + tl.arange(0, TILE_N)
        t_ok = pos < end
        block = tl.load(BT + s * stride_bs + pos // BLOCK_SIZE, mask=t_ok, other=0)
        slot = block.to(tl.int64) * stride_kb + (pos % BLOCK_SIZE) * stride_kt + kvh * stride_kh
        kv_mask = t_ok[:, None] & d_ok[None, :]
        k = tl.load(K + slot[:, None] + d[None, :], mask=kv_mask, other=0.0).to(tl.float32)
        scores = tl.dot(q, tl.trans(k), input_precision="ieee") * scale  # [GP, TILE_N]
        scores = tl.where(t_ok[None, :], scores, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(scores, 1))
        alpha = tl.exp(m_i - m_new)
        probs = tl.exp(scores - m_new[:, None])
        l_i = l_i * alpha + tl.sum(probs, 1)
        v = tl.load(V + slot[:, None] + d[None, :], mask=kv_mask, other=0.0).to(tl.float32)
        acc = acc * alpha[:, None] + tl.dot(probs, v, input_precision="ieee")
        m_i = m_new
    base = s * stride_as + kvh * stride_ah + p * stride_ap
    tl.store(ACC + base + g[:, None] * stride_ag + d[None, :], acc)
    ml = s * stride_ms + kvh * stride_mh + p * stride_mp + g
    tl.store(M + ml, m_i)
    tl.store(L + ml, l_i)


@triton.jit
def _merge_kernel(ACC, M, L, OUT, num_splits,
                  stride_as, stride_ah, stride_ap, stride_ag, stride_ms, stride_mh, stride_mp,
                  stride_os, stride_oh,
                  G: tl.constexpr, GP: tl.constexpr, D: tl.constexpr, DP: tl.constexpr):
    s = tl.program_id(0)
    kvh = tl.program_id(1)
    g = tl.arange(0, GP)
    d = tl.arange(0, DP)
    ml = s * stride_ms + kvh * stride_mh + g
    m_max = tl.full([GP], float("-inf"), tl.float32)
    for p in range(0, num_splits):
        m_max = tl.maximum(m_max, tl.load(M + ml + p * stride_mp))
    num = tl.zeros([GP, DP], tl.float32)
    den = tl.zeros([GP], tl.float32)
    for p in range(0, num_splits):
        m_p = tl.load(M + ml + p * stride_mp)
        w = tl.where(m_p == float("-inf"), 0.0, tl.exp(m_p - m_max))  # empty partitions: 0
        den += tl.load(L + ml + p * stride_mp) * w
        acc = tl.load(ACC + s * stride_as + kvh * stride_ah + p * stride_ap
                      + g[:, None] * stride_ag + d[None, :])
        num += acc * w[:, None]
    o = num / den[:, None]
    o_mask = (g < G)[:, None] & (d < D)[None, :]
    tl.store(OUT + s * stride_os + (kvh * G + g)[:, None] * stride_oh + d[None, :],
             o.to(OUT.dtype.element_ty), mask=o_mask)


def _pow2(n: int, least: int = 16) -> int:
    return max(least, triton.next_power_of_2(n))


def choose_splits(max_seq_len: int, programs: int, target_programs: int = 264) -> int:
    """Partitions per sequence: enough programs to fill the device (264 = 2 per SM on an
    H200), never partitions shorter than MIN_TOKENS_PER_SPLIT tokens."""
    by_length = max(1, max_seq_len // MIN_TOKENS_PER_SPLIT)
    by_device = max(1, cdiv(target_programs, max(programs, 1)))
    return max(1, min(by_length, by_device))


def paged_decode(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                 block_table: torch.Tensor, seq_lens: torch.Tensor, scale: float,
                 out: torch.Tensor | None = None, num_splits: int | None = None,
                 max_seq_len: int | None = None) -> torch.Tensor:
    """Decode attention of one query token per sequence over its paged context (see the
    module docstring for shapes). `max_seq_len` (a host int) avoids a device sync."""
    num_seqs, num_heads, head_dim = q.shape
    _, block_size, num_kv_heads, _ = k_cache.shape
    group = num_heads // num_kv_heads
    if max_seq_len is None:
        max_seq_len = int(seq_lens.max().item()) if num_seqs else 0
    splits = num_splits or choose_splits(max_seq_len, num_seqs * num_kv_heads)
    part_len = cdiv(cdiv(max(max_seq_len, 1), splits), TILE) * TILE
    gp, dp = _pow2(group), _pow2(head_dim)
    acc = torch.empty((num_seqs, num_kv_heads, splits, gp, dp), dtype=torch.float32,
                      device=q.device)
    m = torch.empty((num_seqs, num_kv_heads, splits, gp), dtype=torch.float32, device=q.device)
    lse = torch.empty_like(m)
    if out is None:
        out = torch.empty_like(q)
    if num_seqs == 0:
        return out
    _split_kernel[(num_seqs, num_kv_heads, splits)](
        q, k_cache, v_cache, block_table, seq_lens, acc, m, lse, scale,
        q.stride(0), q.stride(1), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        block_table.stride(0), *acc.stride()[:4], *m.stride()[:3], part_len,
        G=group, GP=gp, D=head_dim, DP=dp, BLOCK_SIZE=block_size, TILE_N=TILE)
    _merge_kernel[(num_seqs, num_kv_heads)](
        acc, m, lse, out, splits, *acc.stride()[:4], *m.stride()[:3], out.stride(0),
        out.stride(1), G=group, GP=gp, D=head_dim, DP=dp)
    return out
