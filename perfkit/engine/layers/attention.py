"""Paged attention over the block-table KV cache: gather into a preallocated workspace, then SDPA.

One forward call handles a mixed batch (decode sequences and prefill chunks with a cached
prefix) with GQA: head h reads kv head h // (num_heads // num_kv_heads).

    cache k[layer]  [num_blocks, block_size, kv_heads, head_dim]
        | index_select(block ids, out=workspace)            (no allocation)
        v
    workspace.k     [seqs * blocks, block_size, kv_heads, head_dim]
        | view [seqs, kv_len, kv_heads, head_dim] -> transpose (no copy)
        v
    SDPA keys       [seqs, kv_heads, kv_len, head_dim]

Decode: the G = num_heads // num_kv_heads query heads of a kv head are SDPA's G "queries"
([seqs, kv_heads, G, head_dim]), so SDPA runs plain multi-head attention with no head
expansion. Prefill: SDPA with enable_gqa (CPU) or the same grouping (CUDA, keeps the
mem-efficient kernel usable with a mask), against a view of a bottom-right causal template.

Backends: "gather" (above) everywhere; "triton" (CUDA) and "numba" (CPU, float32) run decode
with a paged kernel that reads K/V in place through the block table (triton_decode.py,
cpu_decode.py; prefill chunks still gather); "auto" picks triton on CUDA when triton imports,
numba on CPU for a float32 cache when numba compiles (not under PERFKIT_NO_JIT=1, where the
kernel would run as plain Python), gather otherwise. FlexAttention was measured and not kept
(see PagedAttention).
"""

from __future__ import annotations

import math
import os
from dataclasses import replace

import torch
import torch.nn.functional as F

from perfkit.config.units import cdiv
from perfkit.engine.layers.kv_cache import KVCache
from perfkit.engine.layers.metadata import (
    AttentionMetadata,
    AttentionPlan,
    DecodeGroup,
    PrefillSeq,
)
from perfkit.engine.layers.workspace import AttentionWorkspace, make_workspace
from perfkit.errors import PerfkitError
from perfkit.jit import jit_disabled, numba_missing

__all__ = ["AttentionMetadata", "AttentionPlan", "AttentionWorkspace", "PagedAttention",
           "dense_reference"]

BACKENDS = ("auto", "gather", "triton", "numba", "flex")
FLEX_UNAVAILABLE = (
    "attention backend 'flex' is not available: FlexAttention over the paged cache, compiled on "
    "CPU (torch 2.13), measured 2-5x slower than gather+SDPA, needs ~10 s of compile per batch "
    "shape and failed to compile without full-block indices; use 'gather' or 'auto'"
)


class PagedAttention:
    """One per model, bound to its KV cache; owns the workspace buffers shared by all layers.
    The cache's KVSpec (block size, kv heads, head dim, dtype) sizes the workspace, so they
    agree by construction; a given workspace is checked against it once, here."""

    def __init__(self, kv: KVCache, num_heads: int, *, max_num_seqs: int, max_model_len: int,
                 max_num_batched_tokens: int, backend: str = "auto",
                 workspace: AttentionWorkspace | None = None) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"attention backend {backend!r} unknown; choose from {BACKENDS}")
        if backend == "flex":
            raise ValueError(FLEX_UNAVAILABLE)
        spec = kv.spec
        if num_heads % spec.num_kv_heads:
            raise ValueError(f"num_heads={num_heads} is not a multiple of "
                             f"num_kv_heads={spec.num_kv_heads}")
        self.backend = _resolve_backend(backend, kv.device, kv.dtype)
        self.kv = kv
        self.num_heads = num_heads
        self.num_kv_heads = spec.num_kv_heads
        self.head_dim = spec.head_dim
        self.group = num_heads // spec.num_kv_heads  # query heads per kv head
        self.scale = 1.0 / math.sqrt(spec.head_dim)
        self.device = kv.device
        self.dtype = kv.dtype
        self.workspace = workspace or make_workspace(
            spec, num_heads, max_num_seqs=max_num_seqs, max_model_len=max_model_len,
            max_num_batched_tokens=max_num_batched_tokens, device=self.device)
        ws = self.workspace
        if ws.block_size != spec.block_size or ws.dtype != self.dtype:
            raise ValueError(f"attention: workspace (block size {ws.block_size}, {ws.dtype}) "
                             f"does not match the cache (block size {spec.block_size}, "
                             f"{self.dtype})")
        if self.backend == "numba":
            self.workspace = _one_decode_group(ws)

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layer: int,
                meta: AttentionMetadata, out: torch.Tensor | None = None) -> torch.Tensor:
        """q: [T, num_heads, head_dim]; k, v: [T, num_kv_heads, head_dim] (new tokens, RoPE'd).
        Writes k/v into the cache at meta.slot_mapping, attends over the cache, returns
        [T, num_heads, head_dim] (into `out` when given; it must be contiguous)."""
        self._check(q, k, v, meta, out)
        plan = meta.plan(self.workspace)  # built (and checked) at layer 0, reused by the others
        kv = self.kv
        kv.write(layer, meta.slot_mapping, k, v)
        if out is None:
            out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
        k_cache, v_cache = kv.k[layer], kv.v[layer]
        for group in plan.decode:
            self._decode(q, k_cache, v_cache, group, out)
        for seq in plan.prefill:
            self._prefill(q, k_cache, v_cache, seq, out)
        return out

    def _check(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
               meta: AttentionMetadata, out: torch.Tensor | None) -> None:
        t, h, kvh, d = meta.num_tokens, self.num_heads, self.num_kv_heads, self.head_dim
        if q.shape != (t, h, d) or k.shape != (t, kvh, d) or v.shape != (t, kvh, d):
            raise ValueError(f"attention: expected q [{t}, {h}, {d}], k/v [{t}, {kvh}, {d}]; "
                             f"got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
        if q.dtype != self.dtype:
            raise ValueError(f"attention: q dtype {q.dtype} != workspace dtype {self.dtype}")
        if out is not None and (out.shape != q.shape or not out.is_contiguous()):
            raise ValueError(f"attention: out must be contiguous {tuple(q.shape)}")

    def _gather(self, cache: torch.Tensor, buf: torch.Tensor,
                block_ids: torch.Tensor) -> torch.Tensor:
        """cache [num_blocks, bs, kvh, d] -> buf[:n] [n, bs, kvh, d] for n = len(block_ids)."""
        dst = buf[: block_ids.numel()]
        torch.index_select(cache, 0, block_ids, out=dst)
        return dst

    def _decode(self, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                g: DecodeGroup, out: torch.Tensor) -> None:
        if self.backend in ("triton", "numba"):
            self._decode_in_place(q, k_cache, v_cache, g, out)
            return
        ws, kvh, d = self.workspace, self.num_kv_heads, self.head_dim
        keys = self._gather(k_cache, ws.k, g.block_ids).view(g.num_seqs, -1, kvh, d)
        vals = self._gather(v_cache, ws.v, g.block_ids).view(g.num_seqs, -1, kvh, d)
        keys = keys[:, : g.kv_len].transpose(1, 2)  # [g, kvh, kv_len, d]
        vals = vals[:, : g.kv_len].transpose(1, 2)
        if g.token_start is not None:
            rows = q.narrow(0, g.token_start, g.num_seqs)  # [g, h, d]
        else:
            rows = torch.index_select(q, 0, g.token_idx, out=ws.q[: g.num_seqs])
        queries = rows.unflatten(1, (kvh, self.group))  # [g, kvh, G, d]
        o = F.scaled_dot_product_attention(queries, keys, vals, attn_mask=g.mask,
                                           scale=self.scale)  # [g, kvh, G, d]
        o = o.flatten(1, 2)  # [g, h, d]
        if g.token_start is not None:
            out.narrow(0, g.token_start, g.num_seqs).copy_(o)
        else:
            out.index_copy_(0, g.token_idx, o)

    def _decode_in_place(self, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                         g: DecodeGroup, out: torch.Tensor) -> None:
        """Decode through a kernel that reads K/V via the block table (triton on CUDA, numba
        on CPU): the group's query rows [g, h, d] are a slice of q when consecutive, else
        gathered into the workspace, and their output is scattered back."""
        table = g.block_ids.view(g.num_seqs, g.num_blocks)  # [g, blocks]
        if g.token_start is not None:
            rows = q.narrow(0, g.token_start, g.num_seqs)
            o = out.narrow(0, g.token_start, g.num_seqs)
        else:
            rows = torch.index_select(q, 0, g.token_idx, out=self.workspace.q[: g.num_seqs])
            o = torch.empty_like(rows)
        if self.backend == "triton":
            from perfkit.engine.layers.triton_decode import paged_decode

            paged_decode(rows, k_cache, v_cache, table, g.seq_lens, self.scale, out=o,
                         max_seq_len=g.kv_len)
        else:
            from perfkit.engine.layers import cpu_decode

            cpu_decode.run(rows, k_cache, v_cache, table, g.seq_lens, self.scale, o)
        if g.token_start is None:
            out.index_copy_(0, g.token_idx, o)

    def _prefill(self, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                 s: PrefillSeq, out: torch.Tensor) -> None:
        ws, kvh, d = self.workspace, self.num_kv_heads, self.head_dim
        keys = self._gather(k_cache, ws.k, s.block_ids).view(-1, kvh, d)  # [ctx_pad, kvh, d]
        vals = self._gather(v_cache, ws.v, s.block_ids).view(-1, kvh, d)
        prefix = s.seq_len - s.q_len
        for j0 in range(0, s.q_len, ws.mask_queries):
            j1 = min(j0 + ws.mask_queries, s.q_len)
            ctx = prefix + j1  # keys visible to the sub-chunk's last query
            k_sub = keys[:ctx].transpose(0, 1).unsqueeze(0)  # [1, kvh, ctx, d]
            v_sub = vals[:ctx].transpose(0, 1).unsqueeze(0)
            rows = slice(s.token_start + j0, s.token_start + j1)
            if ws.grouped_prefill:
                self._prefill_grouped(q[rows], k_sub, v_sub, ctx, out[rows])
            else:
                self._prefill_gqa(q[rows], k_sub, v_sub, ctx, out[rows])

    def _mask(self, n: int, ctx: int) -> torch.Tensor:
        """[n * rep, ctx] bottom-right causal view of the template (no copy)."""
        ws = self.workspace
        return ws.causal_mask[(ws.mask_queries - n) * ws.mask_rep:, ws.max_model_len - ctx:]

    def _prefill_gqa(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, ctx: int,
                     out: torch.Tensor) -> None:
        """q, out: [n, h, d]; k, v: [1, kvh, ctx, d]."""
        n = q.shape[0]
        o = F.scaled_dot_product_attention(
            q.transpose(0, 1).unsqueeze(0), k, v, attn_mask=self._mask(n, ctx),
            scale=self.scale, enable_gqa=self.group > 1)  # [1, h, n, d]
        out.copy_(o[0].transpose(0, 1))

    def _prefill_grouped(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, ctx: int,
                         out: torch.Tensor) -> None:
        """Queries regrouped to [1, kvh, n * G, d] (row = query * G + head in group)."""
        n, kvh, grp, d = q.shape[0], self.num_kv_heads, self.group, self.head_dim
        regrouped = self.workspace.q.view(-1)[: n * kvh * grp * d].view(kvh, n, grp, d)
        regrouped.copy_(q.unflatten(1, (kvh, grp)).transpose(0, 1))
        o = F.scaled_dot_product_attention(
            regrouped.view(1, kvh, n * grp, d), k, v, attn_mask=self._mask(n, ctx),
            scale=self.scale)  # [1, kvh, n * G, d]
        out.unflatten(1, (kvh, grp)).copy_(o.view(kvh, n, grp, d).transpose(0, 1))


def _one_decode_group(ws: AttentionWorkspace) -> AttentionWorkspace:
    """The same buffers, with a group budget that takes every decode sequence of a batch: a
    kernel that reads K/V in place gathers nothing, so groups (sized for the gather copy to
    stay in cache) would only split its call and its threads' work."""
    return replace(ws, group_blocks=ws.max_num_seqs * cdiv(ws.max_model_len, ws.block_size))


def _resolve_backend(backend: str, device: torch.device, dtype: torch.dtype) -> str:
    """auto -> triton on CUDA when triton imports, numba on CPU for float32 when it compiles,
    else gather; a kernel asked for where it cannot run is an error naming why."""
    if backend == "gather":
        return "gather"
    if backend == "numba" or (backend == "auto" and device.type != "cuda"):
        return _resolve_numba(backend, device, dtype)  # triton is not even imported (1 s)
    available = device.type == "cuda" or os.environ.get("TRITON_INTERPRET") == "1"
    try:
        import triton  # noqa: F401
    except ImportError:
        available = False
    if backend == "auto":
        return "triton" if available and device.type == "cuda" else "gather"
    if not available:
        raise PerfkitError("engine.attention_backend: 'triton' needs a CUDA device and the "
                           "triton package (or TRITON_INTERPRET=1 to run its kernel on CPU for "
                           "tests); use 'gather' or 'auto'")
    return "triton"


def _resolve_numba(backend: str, device: torch.device, dtype: torch.dtype) -> str:
    """numba asked for runs even uncompiled (plain Python: tests); auto takes it compiled only."""
    fits = device.type == "cpu" and dtype == torch.float32
    if backend == "auto":
        return "numba" if fits and not jit_disabled() and numba_missing() is None else "gather"
    if not fits:
        raise PerfkitError(f"engine.attention_backend: 'numba' runs a float32 cache on CPU, "
                           f"not {dtype} on {device.type}; use 'gather' or 'auto'")
    return "numba"


def dense_reference(q: torch.Tensor, k_ctx: list[torch.Tensor], v_ctx: list[torch.Tensor],
                    q_lens: list[int]) -> torch.Tensor:
    """Per-sequence causal attention in float64 over contiguous contexts (tests, benchmark).
    q: [T, h, d]; k_ctx[i], v_ctx[i]: [seq_len_i, kvh, d]. Returns [T, h, d] in q's dtype."""
    outs = []
    start = 0
    for n, k, v in zip(q_lens, k_ctx, v_ctx, strict=True):
        qi = q[start:start + n].double()  # [n, h, d]
        grp = q.shape[1] // k.shape[1]
        ki = k.double().repeat_interleave(grp, dim=1)  # [ctx, h, d]
        vi = v.double().repeat_interleave(grp, dim=1)
        ctx = k.shape[0]
        scores = torch.einsum("qhd,khd->hqk", qi, ki) / math.sqrt(q.shape[2])  # [h, n, ctx]
        last_visible = torch.arange(ctx - n, ctx, device=q.device).unsqueeze(1)  # [n, 1]
        hidden = torch.arange(ctx, device=q.device).unsqueeze(0) > last_visible  # [n, ctx]
        scores.masked_fill_(hidden, float("-inf"))
        outs.append(torch.einsum("hqk,khd->qhd", scores.softmax(-1), vi))
        start += n
    if not outs:
        return q.new_empty(q.shape)
    return torch.cat(outs).to(q.dtype)
