"""Paged attention against a float64 dense reference over random block tables and batches."""

import random
import resource
from dataclasses import dataclass

import pytest
import torch

from perfkit.bench.attention import AttentionShape, bench_attention
from perfkit.engine.kv_spec import KVSpec
from perfkit.engine.layers.attention import AttentionMetadata, PagedAttention, dense_reference
from perfkit.engine.layers.kv_cache import KVCache
from perfkit.engine.layers.workspace import make_workspace
from perfkit.jit import jit_disabled, numba_missing

HEAD_DIM, BLOCK, NUM_BLOCKS, MAX_LEN, MAX_SEQS = 16, 4, 96, 64, 8
CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
# decode gathered + SDPA, and read in place by the numba kernel (plain Python under
# PERFKIT_NO_JIT=1); prefill chunks are gathered by both
CPU_BACKENDS = ["gather", "numba"]
AUTO_CPU = "gather" if jit_disabled() or numba_missing() else "numba"  # float32


@dataclass
class Case:
    attn: PagedAttention
    kv: KVCache
    meta: AttentionMetadata
    q: torch.Tensor  # [T, heads, d]
    k: torch.Tensor  # [T, kv_heads, d] new tokens
    v: torch.Tensor
    k_ctx: list[torch.Tensor]  # per sequence [seq_len, kv_heads, d]: cached prefix + new
    v_ctx: list[torch.Tensor]


def make_case(rng: random.Random, specs: list[tuple[int, int]], ratio: int, *,
              device: str = "cpu", dtype: torch.dtype = torch.float32, backend: str = "auto",
              **ws_options: object) -> Case:
    """specs: (cached prefix, q_len) per sequence. Blocks are shuffled; prefixes are written
    through slots computed here, independently of AttentionMetadata."""
    kvh = rng.choice([1, 2])
    heads = kvh * ratio
    dev = torch.device(device)
    gen = torch.Generator().manual_seed(rng.randrange(1 << 30))

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=gen).to(dev, dtype)

    spec = KVSpec(NUM_BLOCKS, BLOCK, 2, kvh, HEAD_DIM, str(dtype).removeprefix("torch."))
    kv = KVCache(spec, dev)
    kv.data.copy_(randn(*kv.data.shape))  # stale garbage in unused slots, never zeros
    free = list(range(NUM_BLOCKS))
    rng.shuffle(free)
    tables, k_ctx, v_ctx = [], [], []
    for prefix, q_len in specs:
        table = [free.pop() for _ in range(-(-(prefix + q_len) // BLOCK))]
        slots = torch.tensor([table[p // BLOCK] * BLOCK + p % BLOCK for p in range(prefix)],
                             dtype=torch.int64, device=dev)
        k_pre, v_pre = randn(prefix, kvh, HEAD_DIM), randn(prefix, kvh, HEAD_DIM)
        kv.write(1, slots, k_pre, v_pre)
        tables.append(table)
        k_ctx.append(k_pre)
        v_ctx.append(v_pre)
    t = sum(q for _, q in specs)
    q, k, v = randn(t, heads, HEAD_DIM), randn(t, kvh, HEAD_DIM), randn(t, kvh, HEAD_DIM)
    start = 0
    for i, (_, q_len) in enumerate(specs):
        k_ctx[i] = torch.cat([k_ctx[i], k[start:start + q_len]])
        v_ctx[i] = torch.cat([v_ctx[i], v[start:start + q_len]])
        start += q_len
    limits = dict(max_num_seqs=MAX_SEQS, max_model_len=MAX_LEN, max_num_batched_tokens=MAX_LEN)
    ws = make_workspace(spec, heads, device=dev, **limits, **ws_options)  # type: ignore[arg-type]
    attn = PagedAttention(kv, heads, **limits, workspace=ws, backend=backend)
    meta = AttentionMetadata.build([q for _, q in specs], [p + q for p, q in specs], tables,
                                   BLOCK, dev)
    return Case(attn, kv, meta, q, k, v, k_ctx, v_ctx)


def rel_error(case: Case, out: torch.Tensor) -> float:
    ref = dense_reference(case.q.double(), [k.double() for k in case.k_ctx],
                          [v.double() for v in case.v_ctx], case.meta.q_lens)
    return float((out.double() - ref).norm() / ref.norm())


def run(case: Case) -> torch.Tensor:
    return case.attn.forward(case.q, case.k, case.v, 1, case.meta)


def random_specs(rng: random.Random) -> list[tuple[int, int]]:
    specs = []
    for _ in range(rng.randint(1, MAX_SEQS)):
        if rng.random() < 0.5:
            specs.append((rng.randint(0, MAX_LEN - 1), 1))  # decode (or a 1-token prompt)
        else:
            q_len = rng.randint(2, 24)
            specs.append((rng.randint(0, MAX_LEN - q_len), q_len))  # prefill chunk
    return specs


# workspace variants: defaults; tiny group budget (many padded decode groups); tiny mask
# template (prefill split in sub-chunks); the CUDA-style grouped prefill on CPU
WORKSPACES = {
    "default": {},
    "small_groups": {"group_bytes": 2 * BLOCK * 2 * HEAD_DIM * 4 * 20},
    "sub_chunks": {"mask_bytes": 5 * MAX_LEN * 4},
    "grouped": {"grouped_prefill": True, "mask_bytes": 7 * 4 * MAX_LEN * 4},
}


@pytest.mark.parametrize("backend", CPU_BACKENDS)
@pytest.mark.parametrize("variant", list(WORKSPACES))
@pytest.mark.parametrize("seed", range(12))
def test_random_mixed_batches_match_dense(seed, variant, backend):
    rng = random.Random(seed * 31 + len(variant))
    case = make_case(rng, random_specs(rng), rng.choice([1, 2, 4]), backend=backend,
                     **WORKSPACES[variant])
    assert rel_error(case, run(case)) <= 1e-5


@pytest.mark.parametrize("group_bytes", [None, 24 * 1024], ids=["one_group", "groups"])
@pytest.mark.parametrize("ratio", [1, 2, 4])
@pytest.mark.parametrize("specs", [
    [(17, 1)] * 5,  # decode, equal lengths: no padding mask
    [(3, 1), (40, 1), (0, 1), (21, 1)],  # decode, ragged: padding mask
    [(0, 20)],  # first chunk of a prompt
    [(33, 9), (12, 1), (0, 7), (5, 1)],  # mixed: decode rows are not consecutive
], ids=["decode_equal", "decode_ragged", "prefill", "mixed"])
@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_shapes_match_dense(specs, ratio, group_bytes, backend):
    case = make_case(random.Random(ratio), specs, ratio, backend=backend,
                     group_bytes=group_bytes)
    assert rel_error(case, run(case)) <= 1e-5


def test_forward_writes_new_tokens_into_cache():
    case = make_case(random.Random(0), [(6, 1), (0, 5)], 2)
    run(case)
    k_slots = case.kv.k[1].reshape(-1, *case.k.shape[1:])
    assert torch.equal(k_slots[case.meta.slot_mapping], case.k)


def test_workspace_is_reused_not_grown():
    case = make_case(random.Random(1), [(30, 1), (9, 1), (20, 6)], 2)
    ws = case.attn.workspace
    ptrs = [t.data_ptr() for t in (ws.k, ws.v, ws.q, ws.causal_mask)]
    nbytes = ws.nbytes()
    out = torch.empty_like(case.q)
    first = case.attn.forward(case.q, case.k, case.v, 1, case.meta, out=out).clone()
    second = case.attn.forward(case.q, case.k, case.v, 1, case.meta, out=out)
    assert second.data_ptr() == out.data_ptr()
    assert torch.equal(first, second)
    assert [t.data_ptr() for t in (ws.k, ws.v, ws.q, ws.causal_mask)] == ptrs
    assert ws.nbytes() == nbytes


@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_forward_takes_no_page_faults(backend):
    # 8 seqs x 256 tokens x 4 kv heads x 64 dims, fp32: a fresh 4 MiB K+V gather per call
    # (k_cache[block_table]) would fault ~1,000 pages per forward
    heads, kvh, d, bs = 8, 4, 64, 16
    kv = KVCache(KVSpec(8 * 16, bs, 1, kvh, d), "cpu")
    attn = PagedAttention(kv, heads, max_num_seqs=8, max_model_len=256,
                          max_num_batched_tokens=256, backend=backend)
    tables = [list(range(i, 128, 8)) for i in range(8)]
    meta = AttentionMetadata.build([1] * 8, [256] * 8, tables, bs, "cpu", attn.workspace)
    q, k, v = torch.randn(8, heads, d), torch.randn(8, kvh, d), torch.randn(8, kvh, d)
    out = torch.empty_like(q)
    for _ in range(3):
        attn.forward(q, k, v, 0, meta, out=out)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(5):
        attn.forward(q, k, v, 0, meta, out=out)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    assert faults < 5 * 50


def test_plan_is_built_once_per_step():
    case = make_case(random.Random(2), [(30, 1), (9, 4)], 2)
    assert case.meta.plan(case.attn.workspace) is case.meta.plan(case.attn.workspace)


def test_slot_mapping_from_block_tables():
    meta = AttentionMetadata.build([1, 3], [6, 3], [[7, 2], [4]], 4, "cpu")
    # seq 0: position 5 -> block 2 offset 1; seq 1: positions 0..2 of block 4
    assert meta.slot_mapping.tolist() == [9, 16, 17, 18]
    assert meta.query_start_loc == [0, 1, 4]
    assert meta.block_tables.tolist() == [[7, 2], [4, 0]]


@pytest.mark.parametrize("q_lens, seq_lens, tables", [
    ([2], [1], [[0]]),  # q_len > seq_len
    ([0], [3], [[0]]),  # empty chunk
    ([1], [9], [[0, 1]]),  # too few blocks
    ([1, 1], [1], [[0]]),  # ragged lists
])
def test_metadata_rejects_bad_batches(q_lens, seq_lens, tables):
    with pytest.raises(ValueError):
        AttentionMetadata.build(q_lens, seq_lens, tables, 4, "cpu")


def test_rejects_batches_beyond_workspace_limits():
    case = make_case(random.Random(3), [(1, 1)], 1)
    too_long = AttentionMetadata.build([1], [MAX_LEN + 1], [list(range(17))], BLOCK, "cpu")
    with pytest.raises(ValueError, match="max_model_len"):
        too_long.plan(case.attn.workspace)
    too_many = AttentionMetadata.build([1] * (MAX_SEQS + 1), [1] * (MAX_SEQS + 1),
                                       [[i] for i in range(MAX_SEQS + 1)], BLOCK, "cpu")
    with pytest.raises(ValueError, match="max_num_seqs"):
        too_many.plan(case.attn.workspace)


def test_rejects_mismatched_block_size():
    case = make_case(random.Random(4), [(5, 1)], 1)
    meta = AttentionMetadata.build([1], [6], [[0, 1, 2]], BLOCK // 2, "cpu")
    with pytest.raises(ValueError, match="block sizes"):
        case.attn.forward(case.q, case.k, case.v, 1, meta)


def test_workspace_is_checked_against_the_cache_once_at_construction():
    kv = KVCache(KVSpec(8, 4, 1, 2, 16), "cpu")
    limits = dict(max_num_seqs=2, max_model_len=32, max_num_batched_tokens=32)
    other = make_workspace(KVSpec(8, 8, 1, 2, 16), 4, device="cpu", **limits)
    with pytest.raises(ValueError, match="block size"):
        PagedAttention(kv, 4, **limits, workspace=other)


def test_backends():
    kv = KVCache(KVSpec(8, 4, 1, 2, 16), "cpu")
    limits = dict(max_num_seqs=2, max_model_len=32, max_num_batched_tokens=32)
    assert PagedAttention(kv, 4, **limits).backend == AUTO_CPU
    assert PagedAttention(kv, 4, **limits, backend="gather").backend == "gather"
    assert PagedAttention(kv, 4, **limits, backend="numba").backend == "numba"
    with pytest.raises(ValueError, match="not available"):
        PagedAttention(kv, 4, **limits, backend="flex")
    with pytest.raises(ValueError, match="unknown"):
        PagedAttention(kv, 4, **limits, backend="nope")


def test_bench_attention_smoke():
    tiny = AttentionShape(2, 40, 1, 4, 2, 16, 8)
    result = bench_attention("cpu", repeats=1, decode=tiny,
                             prefill=AttentionShape(2, 40, 12, 4, 2, 16, 8))
    for key in ("attention", "attention_prefill"):
        r = result[key]
        assert r["paged_ms"] > 0 and r["dense_ms"] > 0 and r["copy_gbps"] > 0
        assert r["ratio"] == pytest.approx(r["paged_ms"] / r["dense_ms"])
        assert r["achieved_gbps"] > 0 and r["backend"] == AUTO_CPU
    assert result["attention_prefill"]["shape"]["q_len"] == 12


def test_dense_reference_single_token_is_value():
    q, k, v = torch.randn(1, 2, 4), torch.randn(1, 1, 4), torch.randn(1, 1, 4)
    assert torch.allclose(dense_reference(q, [k], [v], [1]), v.expand(1, 2, 4))


@pytest.mark.gpu
@CUDA
@pytest.mark.parametrize("variant", ["default", "grouped", "small_groups"])
@pytest.mark.parametrize("seed", range(6))
def test_cuda_bf16_matches_dense(seed, variant):
    rng = random.Random(seed)
    options = dict(WORKSPACES[variant])
    options.setdefault("grouped_prefill", variant == "grouped")
    case = make_case(rng, random_specs(rng), rng.choice([1, 2, 4]), device="cuda",
                     dtype=torch.bfloat16, **options)
    assert rel_error(case, run(case)) <= 1e-2
