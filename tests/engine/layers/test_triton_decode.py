"""The Triton paged decode kernel, run by Triton's interpreter on CPU, against the float64
dense reference: shuffled block tables, ragged lengths, GQA, partitions, dtypes."""

from __future__ import annotations

import os
import random

import pytest
import torch

os.environ.setdefault("TRITON_INTERPRET", "1")  # before the kernels are decorated
pytest.importorskip("triton", reason="triton is not installed")

from test_attention import make_case, rel_error

from perfkit.engine.layers.attention import (
    PagedAttention,
    _resolve_backend,
    dense_reference,
)

if os.environ.get("TRITON_INTERPRET") != "1" and not torch.cuda.is_available():
    pytest.skip("the kernel needs CUDA or TRITON_INTERPRET=1", allow_module_level=True)

DEVICE = "cuda" if torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1" \
    else "cpu"
TOL = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}


def decode_case(seed: int, lens: list[int], kv_heads: int, group: int, block_size: int,
                dtype: torch.dtype, head_dim: int = 16):
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    num_blocks = sum(-(-n // block_size) for n in lens) + 3
    shape = (num_blocks, block_size, kv_heads, head_dim)
    k_cache = torch.randn(*shape, generator=gen).to(DEVICE, dtype)
    v_cache = torch.randn(*shape, generator=gen).to(DEVICE, dtype)
    free = list(range(num_blocks))
    rng.shuffle(free)
    tables = [[free.pop() for _ in range(-(-n // block_size))] for n in lens]
    width = max(map(len, tables))
    table = torch.tensor([t + [free[0]] * (width - len(t)) for t in tables], device=DEVICE)
    q = torch.randn(len(lens), kv_heads * group, head_dim, generator=gen).to(DEVICE, dtype)
    ks = [k_cache[t].reshape(-1, kv_heads, head_dim)[:n] for t, n in zip(tables, lens)]
    vs = [v_cache[t].reshape(-1, kv_heads, head_dim)[:n] for t, n in zip(tables, lens)]
    ref = dense_reference(q.double(), [k.double() for k in ks], [v.double() for v in vs],
                          [1] * len(lens))
    lens_t = torch.tensor(lens, dtype=torch.int32, device=DEVICE)
    return q, k_cache, v_cache, table, lens_t, ref


def rel(out: torch.Tensor, ref: torch.Tensor) -> float:
    return float((out.double() - ref).norm() / ref.norm())


@pytest.mark.parametrize("splits", [1, 3, None], ids=["one", "three", "auto"])
@pytest.mark.parametrize(("kv_heads", "group"), [(1, 1), (2, 2), (1, 4)])
@pytest.mark.parametrize("block_size", [4, 16])
def test_kernel_matches_dense_reference(splits, kv_heads, group, block_size):
    from perfkit.engine.layers.triton_decode import paged_decode

    lens = [1, 5, 37, 70]  # a single token, partial tiles, several tiles and partitions
    q, k, v, table, lens_t, ref = decode_case(block_size * 7 + group, lens, kv_heads, group,
                                              block_size, torch.float32)
    out = paged_decode(q, k, v, table, lens_t, q.shape[2] ** -0.5, num_splits=splits)
    assert out.shape == q.shape and out.dtype == q.dtype
    assert rel(out, ref) <= TOL[torch.float32]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_caches(dtype):
    from perfkit.engine.layers.triton_decode import paged_decode

    q, k, v, table, lens_t, ref = decode_case(3, [9, 33], 2, 2, 8, dtype)
    out = paged_decode(q, k, v, table, lens_t, q.shape[2] ** -0.5, num_splits=2)
    assert out.dtype == dtype and rel(out, ref) <= TOL[dtype]


def test_more_partitions_than_tokens_and_an_int32_table():
    from perfkit.engine.layers.triton_decode import paged_decode

    q, k, v, table, lens_t, ref = decode_case(5, [2, 3], 1, 2, 4, torch.float32)
    out = paged_decode(q, k, v, table.to(torch.int32), lens_t, q.shape[2] ** -0.5,
                       num_splits=8)  # most partitions are empty: they must weigh nothing
    assert rel(out, ref) <= TOL[torch.float32]


def test_choose_splits_fills_the_device_without_tiny_partitions():
    from perfkit.engine.layers.triton_decode import MIN_TOKENS_PER_SPLIT, choose_splits

    assert choose_splits(100, programs=8) == 1  # short contexts: no split
    assert choose_splits(8192, programs=8) == 8192 // MIN_TOKENS_PER_SPLIT
    assert choose_splits(8192, programs=512) == 1  # the batch already fills the device


@pytest.mark.parametrize("seed", range(4))
def test_paged_attention_with_the_triton_backend_matches_gather(seed):
    """The engine's attention layer: decode rows through the kernel, prefill chunks gathered."""
    rng = random.Random(seed)
    specs = [(rng.randint(0, 40), 1) for _ in range(3)] + [(rng.randint(0, 20), 5), (9, 1)]
    rng.shuffle(specs)  # decode rows need not be consecutive
    case = make_case(rng, specs, rng.choice([1, 2]))
    triton_attn = PagedAttention(case.kv, case.attn.num_heads, max_num_seqs=8,
                                 max_model_len=64, max_num_batched_tokens=64,
                                 backend="triton", workspace=case.attn.workspace)
    assert triton_attn.backend == "triton"
    out = triton_attn.forward(case.q, case.k, case.v, 1, case.meta)
    assert rel_error(case, out) <= 1e-5


def test_auto_is_not_triton_on_cpu_and_triton_is_refused_where_it_cannot_run(monkeypatch):
    cpu = torch.device("cpu")
    assert _resolve_backend("auto", cpu, torch.bfloat16) == "gather"
    assert _resolve_backend("auto", cpu, torch.float32) in ("gather", "numba")
    assert _resolve_backend("gather", cpu, torch.float32) == "gather"
    monkeypatch.delenv("TRITON_INTERPRET")
    with pytest.raises(ValueError, match="needs a CUDA device"):
        _resolve_backend("triton", cpu, torch.float32)
