"""The CPU paged decode kernel (numba), compiled and as plain Python, against the float64
dense reference: shuffled block tables, ragged lengths, GQA groups, head dims; the engine's
greedy tokens with it and with the gather backend."""

from __future__ import annotations

import random

import pytest
import torch
from test_attention import make_case, rel_error

from perfkit.config.profile import Overrides, load_profile
from perfkit.engine.engine import Engine
from perfkit.engine.layers import cpu_decode
from perfkit.engine.layers.attention import PagedAttention, _resolve_backend, dense_reference
from perfkit.jit import jit_disabled, numba_missing, pure
from perfkit.workload import generate

COMPILED = not jit_disabled() and numba_missing() is None
needs_jit = pytest.mark.skipif(not COMPILED, reason="numba is off (PERFKIT_NO_JIT) or missing")
TOL = 1e-5


def decode_case(seed: int, lens: list[int], kv_heads: int, group: int, head_dim: int,
                block_size: int = 16):
    """Cache and block tables (shuffled, padded with a spare block) for one query token per
    sequence; returns the kernel's tensors and the float64 reference output."""
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    num_blocks = sum(-(-n // block_size) for n in lens) + 3
    shape = (num_blocks, block_size, kv_heads, head_dim)
    k_cache, v_cache = torch.randn(*shape, generator=gen), torch.randn(*shape, generator=gen)
    free = list(range(num_blocks))
    rng.shuffle(free)
    tables = [[free.pop() for _ in range(-(-n // block_size))] for n in lens]
    width = max(map(len, tables))
    table = torch.tensor([t + [free[0]] * (width - len(t)) for t in tables])
    q = torch.randn(len(lens), kv_heads * group, head_dim, generator=gen)
    ks = [k_cache[t].reshape(-1, kv_heads, head_dim)[:n] for t, n in zip(tables, lens)]
    vs = [v_cache[t].reshape(-1, kv_heads, head_dim)[:n] for t, n in zip(tables, lens)]
    ref = dense_reference(q.double(), [k.double() for k in ks], [v.double() for v in vs],
                          [1] * len(lens))
    return q, k_cache, v_cache, table, torch.tensor(lens, dtype=torch.int32), ref


def attend(module, kernel: str, case) -> torch.Tensor:
    q, k, v, table, lens, _ = case
    out = torch.full_like(q, float("nan"))  # every row must be written
    fn = getattr(module, kernel)
    fn(q.numpy(), k.numpy(), v.numpy(), table.numpy(), lens.numpy(), q.shape[2] ** -0.5,
       out.numpy())
    return out


def rel(out: torch.Tensor, ref: torch.Tensor) -> float:
    return float((out.double() - ref).norm() / ref.norm())


# a single token, a block's worth less one, several blocks with a partial last one
LENS = [1, 15, 37, 16]


@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize(("kv_heads", "group"), [(2, 1), (2, 4), (1, 8)])
def test_plain_python_kernel_matches_dense_reference(kv_heads, group, head_dim):
    case = decode_case(group * 3 + head_dim, LENS, kv_heads, group, head_dim)
    out = attend(pure(cpu_decode), "decode_serial", case)
    assert rel(out, case[-1]) <= TOL


@needs_jit
@pytest.mark.parametrize("kernel", ["decode_serial", "decode_parallel"])
@pytest.mark.parametrize("block_size", [4, 16])
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize(("kv_heads", "group"), [(2, 1), (2, 4), (1, 8)])
def test_compiled_kernel_matches_dense_reference(kernel, block_size, head_dim, kv_heads, group):
    lens = [1, 5, 37, 70, 16, 129]  # odd remainders of the four-token passes too
    case = decode_case(block_size + group * 3 + head_dim, lens, kv_heads, group, head_dim,
                       block_size)
    out = attend(cpu_decode, kernel, case)
    assert rel(out, case[-1]) <= TOL


@needs_jit
def test_compiled_and_plain_python_agree():
    case = decode_case(7, LENS, 2, 4, 64)
    compiled = attend(cpu_decode, "decode_serial", case)
    plain = attend(pure(cpu_decode), "decode_serial", case)
    assert torch.allclose(compiled, plain, rtol=1e-5, atol=1e-6)


def test_run_reads_torch_tensors_in_place():
    q, k, v, table, lens, ref = decode_case(11, [3, 20], 2, 2, 64)
    out = torch.empty_like(q)
    cpu_decode.run(q, k, v, table, lens, q.shape[2] ** -0.5, out)
    assert rel(out, ref) <= TOL


@pytest.mark.parametrize("seed", range(4))
def test_paged_attention_with_the_numba_backend_matches_dense(seed):
    """The engine's attention layer: decode rows (consecutive or not) through the kernel,
    prefill chunks gathered."""
    rng = random.Random(seed)
    specs = [(rng.randint(0, 40), 1) for _ in range(3)] + [(rng.randint(0, 20), 5), (9, 1)]
    rng.shuffle(specs)
    case = make_case(rng, specs, rng.choice([1, 2, 4]), backend="numba")
    assert case.attn.backend == "numba"
    assert rel_error(case, case.attn.forward(case.q, case.k, case.v, 1, case.meta)) <= TOL


def test_the_numba_backend_attends_all_decode_rows_in_one_group():
    case = make_case(random.Random(5), [(40, 1)] * 6, 2, backend="numba",
                     group_bytes=1)  # a gather budget of one block per group
    plan = case.meta.plan(case.attn.workspace)
    assert len(plan.decode) == 1 and plan.decode[0].num_seqs == 6


def test_backend_choice():
    cpu = torch.device("cpu")
    assert _resolve_backend("auto", cpu, torch.float32) == ("numba" if COMPILED else "gather")
    assert _resolve_backend("auto", cpu, torch.bfloat16) == "gather"
    assert _resolve_backend("gather", cpu, torch.float32) == "gather"
    assert _resolve_backend("numba", cpu, torch.float32) == "numba"  # plain Python if no JIT
    with pytest.raises(ValueError, match="float32 cache on CPU"):
        _resolve_backend("numba", cpu, torch.float16)
    with pytest.raises(ValueError, match="float32 cache on CPU"):
        _resolve_backend("numba", torch.device("cuda"), torch.float32)


def test_a_bad_backend_is_refused():
    case = make_case(random.Random(0), [(3, 1)], 1)
    with pytest.raises(ValueError, match="unknown"):
        PagedAttention(case.kv, case.attn.num_heads, max_num_seqs=2, max_model_len=16,
                       max_num_batched_tokens=16, backend="cpu")


def tokens(backend: str) -> dict[int, list[int]]:
    """A tiny model, one thread, a mixed batch (prefill chunks and decodes of 1..8 rows)."""
    prof = load_profile("default", Overrides(sets=(
        "engine.cpu_threads=1", 'engine.device="cpu"',
        f"engine.attention_backend={backend}",
        "engine.max_num_seqs=8", "engine.max_num_batched_tokens=64",
        "workload.num_requests=12")))
    specs = generate(prof.workload, prof.model.vocab_size, prof.engine.max_model_len, 12)
    return Engine(prof).run_to_completion(specs)


@needs_jit
def test_greedy_tokens_are_the_same_with_the_kernel_and_with_gather():
    assert tokens("numba") == tokens("gather")
