"""vLLM's null block: one block of a paged pool is never given to a request (vLLM's
BlockPool takes its block 0 as the null block), so a pool of N blocks holds N - 1, in the
engine, its replays and the fragmentation policies alike; engine.null_block=false gives
all N. The KV cache keeps all N blocks."""

from __future__ import annotations

import pytest

from perfkit.config.profile import Overrides, check_pool, load_profile, pool_blocks, usable_blocks
from perfkit.engine.engine import Engine
from perfkit.engine.executor import null_executor
from perfkit.errors import PerfkitError
from perfkit.fragmentation.policies import FragConfig, kv_budget, simulate
from perfkit.workload import RequestSpec


def fixed(name: str, tokens: int) -> tuple[str, ...]:
    return (f'workload.{name}.kind="fixed"', f"workload.{name}.mean={tokens}",
            f"workload.{name}.min={tokens}", f"workload.{name}.max={tokens}")


# a request of 36 + 4 tokens: 10 blocks of 4
NEEDS_TEN = (*fixed("prompt_len", 36), *fixed("output_len", 4))


def profile(*sets: str):
    return load_profile("default", Overrides(sets=(
        "engine.num_blocks=10", "engine.block_size=4", "engine.max_model_len=64",
        *fixed("prompt_len", 8), *fixed("output_len", 4), *sets)))


@pytest.mark.parametrize(("null", "usable"), [("true", 9), ("false", 10)])
def test_the_engine_pool_holds_all_but_the_null_block(null: str, usable: int) -> None:
    prof = profile(f"engine.null_block={null}")
    engine = Engine(prof, executor=null_executor())
    assert (pool_blocks(prof), usable_blocks(prof)) == (10, usable)
    assert engine.kv_spec.num_blocks == 10 and engine.pool.num_blocks == usable
    # a request filling every usable block runs to its end, and uses all of them
    out = engine.run_to_completion([RequestSpec(0, list(range(usable * 4 - 4)), 4)])
    assert len(out[0]) == 4
    assert max(s.blocks_used for s in engine.stats.kv_timeline) == usable


def test_a_pool_short_by_the_null_block_is_refused_with_the_reason() -> None:
    check_pool(profile("engine.null_block=false", *NEEDS_TEN))  # all 10 blocks: it fits
    with pytest.raises(PerfkitError, match=r"9 usable block.*at least 11 blocks.*null_block"):
        check_pool(profile(*NEEDS_TEN))


@pytest.mark.parametrize(("null", "paged4", "paged8"), [("true", 9, 4), ("false", 10, 5)])
def test_each_paged_policy_gives_one_block_to_the_null_block(null: str, paged4: int,
                                                             paged8: int) -> None:
    prof = profile(f"engine.null_block={null}")
    cfg = FragConfig(block_sizes=(4, 8), num_requests=20, jobs=1)
    pools = {p.name: p.num_blocks for p in simulate(prof, kv_budget(prof, None, None),
                                                   cfg).policies}
    assert pools["paged-4"] == paged4 and pools["paged-8"] == paged8  # 40 slots
