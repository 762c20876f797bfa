"""Microbenchmark: paged attention (the engine's backend) against dense SDPA on the same shapes.

Dense is SDPA over contiguous K/V [seqs, kv_heads, ctx, head_dim], i.e. what attention would cost
with no paging. Its decode call uses the same formulation as the paged path (the query heads
of a kv head as SDPA's queries, no mask), the fastest dense decode measured on CPU, so the ratio
isolates the cost of paging. Timings are medians over `repeats` after warm-up, paged and dense
interleaved so background load hits both alike; CUDA is synchronized before each clock read.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F

from perfkit.config.units import cdiv
from perfkit.engine.kv_spec import KVSpec
from perfkit.engine.layers.attention import AttentionMetadata, PagedAttention
from perfkit.engine.layers.kv_cache import KVCache

WARMUP = 3
COPY_BYTES = 256 << 20


@dataclass(frozen=True)
class AttentionShape:
    num_seqs: int
    context_len: int  # tokens per sequence after the step (cached prefix + q_len)
    q_len: int  # new tokens per sequence: 1 = decode, > 1 = a prefill chunk after a prefix
    num_heads: int
    num_kv_heads: int
    head_dim: int
    block_size: int = 16


# Llama-3-8B attention heads; decode batch 16 at context 512; prefill 2 chunks of 256 after a
# 256-token cached prefix
DECODE = AttentionShape(16, 512, 1, 32, 8, 128)
PREFILL = AttentionShape(2, 512, 256, 32, 8, 128)


def bench_attention(device: str = "cpu", repeats: int = 10, *, decode: AttentionShape = DECODE,
                    prefill: AttentionShape = PREFILL) -> dict:
    """{"attention": decode result, "attention_prefill": prefill result}, each with paged_ms,
    dense_ms, ratio (paged / dense), achieved_gbps, copy_gbps, shape, backend. The "auto"
    backend runs (decode through the Triton kernel on CUDA when triton imports, the numba
    kernel on CPU); on CUDA the gather backend's decode is measured beside it as
    "attention_gather"."""
    dev = torch.device(device)
    copy = copy_gbps(dev, repeats)
    out = {
        "attention": {**_bench_shape(decode, dev, repeats), "copy_gbps": copy},
        "attention_prefill": {**_bench_shape(prefill, dev, repeats), "copy_gbps": copy},
    }
    if dev.type == "cuda" and out["attention"]["backend"] != "gather":
        out["attention_gather"] = {**_bench_shape(decode, dev, repeats, "gather"),
                                   "copy_gbps": copy}
    return out


def copy_gbps(device: torch.device, repeats: int = 5) -> float:
    """This machine's copy bandwidth: bytes read + written by dst.copy_(src) of 256 MiB."""
    src = torch.ones(COPY_BYTES // 4, dtype=torch.float32, device=device)
    dst = torch.zeros_like(src)
    seconds = _median_seconds(lambda: dst.copy_(src), device, max(3, repeats // 2))
    return 2 * COPY_BYTES / seconds / 1e9


def _median_seconds(fn: Callable[[], object], device: torch.device, repeats: int) -> float:
    return statistics.median(_interleaved([fn], device, repeats)[0])


def _interleaved(fns: list[Callable[[], object]], device: torch.device,
                 repeats: int) -> list[list[float]]:
    """Seconds per call of each fn, calls alternating, after WARMUP rounds."""
    times: list[list[float]] = [[] for _ in fns]
    for rnd in range(WARMUP + repeats):
        for fn, samples in zip(fns, times, strict=True):
            _sync(device)
            start = time.perf_counter()
            fn()
            _sync(device)
            if rnd >= WARMUP:
                samples.append(time.perf_counter() - start)
    return times


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@dataclass
class _Setup:
    paged: Callable[[], torch.Tensor]
    dense: Callable[[], torch.Tensor]  # same numbers in [seqs * q_len, heads, head_dim] order
    bytes_moved: int  # K+V context read + q read + out written
    backend: str


def _bench_shape(shape: AttentionShape, device: torch.device, repeats: int,
                 backend: str = "auto") -> dict:
    dtype = torch.float32 if device.type == "cpu" else torch.bfloat16
    setup = _setup(shape, device, dtype, backend)
    with torch.inference_mode():
        paged, dense = setup.paged(), setup.dense()
        err = float((paged.double() - dense.double()).norm() / dense.double().norm())
        if err > (1e-4 if dtype == torch.float32 else 2e-2):
            raise RuntimeError(f"paged attention disagrees with dense SDPA: rel error {err:.2e}")
        paged_s, dense_s = _interleaved([setup.paged, setup.dense], device, repeats)
    paged_ms = statistics.median(paged_s) * 1e3
    dense_ms = statistics.median(dense_s) * 1e3
    return {
        "paged_ms": paged_ms,
        "dense_ms": dense_ms,
        "ratio": paged_ms / dense_ms,
        "achieved_gbps": setup.bytes_moved / (paged_ms * 1e-3) / 1e9,
        "shape": {**asdict(shape), "dtype": str(dtype).removeprefix("torch.")},
        "backend": setup.backend,
    }


def _setup(s: AttentionShape, device: torch.device, dtype: torch.dtype,
           backend: str = "auto") -> _Setup:
    """Random cache with shuffled, non-contiguous block tables, and its contiguous twin."""
    gen = torch.Generator().manual_seed(0)
    blocks_per_seq = cdiv(s.context_len, s.block_size)
    spec = KVSpec(s.num_seqs * blocks_per_seq + 1, s.block_size, 1, s.num_kv_heads, s.head_dim,
                  str(dtype).removeprefix("torch."))
    kv = KVCache(spec, device)
    kv.data.copy_(torch.randn(kv.data.shape, generator=gen).to(dtype))
    free = list(range(kv.num_blocks))
    random.Random(0).shuffle(free)
    tables = [[free.pop() for _ in range(blocks_per_seq)] for _ in range(s.num_seqs)]
    t = s.num_seqs * s.q_len

    def randn(*size: int) -> torch.Tensor:
        return torch.randn(*size, generator=gen).to(device, dtype)

    q, k_new, v_new = (randn(t, s.num_heads, s.head_dim), randn(t, s.num_kv_heads, s.head_dim),
                       randn(t, s.num_kv_heads, s.head_dim))
    attn = PagedAttention(kv, s.num_heads, max_num_seqs=s.num_seqs, max_model_len=s.context_len,
                          max_num_batched_tokens=max(t, s.context_len), backend=backend)
    meta = AttentionMetadata.build([s.q_len] * s.num_seqs, [s.context_len] * s.num_seqs, tables,
                                   s.block_size, device, attn.workspace)
    kv.write(0, meta.slot_mapping, k_new, v_new)
    table = torch.tensor(tables, device=device)
    # contiguous twins [seqs, kv_heads, ctx, head_dim]
    k_dense, v_dense = (c[table].flatten(1, 2)[:, : s.context_len].transpose(1, 2).contiguous()
                        for c in (kv.k[0], kv.v[0]))
    out = torch.empty_like(q)
    elt = q.element_size()
    return _Setup(
        paged=lambda: attn.forward(q, k_new, v_new, 0, meta, out=out),
        dense=_dense_fn(s, q, k_dense, v_dense),
        bytes_moved=(k_dense.numel() + v_dense.numel() + 2 * q.numel()) * elt,
        backend=attn.backend,
    )


def _dense_fn(s: AttentionShape, q: torch.Tensor, k: torch.Tensor,
              v: torch.Tensor) -> Callable[[], torch.Tensor]:
    grp = s.num_heads // s.num_kv_heads
    if s.q_len == 1:
        queries = q.view(s.num_seqs, s.num_kv_heads, grp, s.head_dim)
        return lambda: F.scaled_dot_product_attention(queries, k, v).flatten(1, 2)
    queries = q.view(s.num_seqs, s.q_len, s.num_heads, s.head_dim).transpose(1, 2)
    hidden = (torch.arange(s.context_len, device=q.device)
              > torch.arange(s.context_len - s.q_len, s.context_len, device=q.device)[:, None])
    mask = torch.zeros(hidden.shape, dtype=q.dtype, device=q.device)
    mask.masked_fill_(hidden, float("-inf"))  # [q_len, ctx] bottom-right causal
    return lambda: (F.scaled_dot_product_attention(queries, k, v, attn_mask=mask,
                                                   enable_gqa=grp > 1)
                    .transpose(1, 2).flatten(0, 1))
