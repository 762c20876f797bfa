"""The engine end to end on the tiny model: tokens are invariant to caching, preemption
and chunking; admission control rejects with reasons; the async front door streams."""

from __future__ import annotations

import asyncio

import pytest
import torch

from perfkit.config.profile import Overrides, load_profile
from perfkit.engine.async_engine import AsyncEngine
from perfkit.engine.engine import Engine
from perfkit.workload import RequestSpec, generate

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def engine(*sets: str, profile: str = "shared-prefix", device: str = "cpu") -> Engine:
    base = ("engine.cpu_threads=1", f'engine.device="{device}"')
    return Engine(load_profile(profile, Overrides(sets=base + sets)))


def specs(profile: str = "shared-prefix", n: int = 12) -> list[RequestSpec]:
    prof = load_profile(profile)
    return generate(prof.workload, prof.model.vocab_size, prof.engine.max_model_len,
                    num_requests=n)


@pytest.mark.parametrize("device", DEVICES)
def test_prefix_caching_does_not_change_tokens(device):
    reqs = specs()
    on = engine("engine.prefix_caching=true", device=device)
    off = engine("engine.prefix_caching=false", device=device)
    out_on = on.run_to_completion(reqs)
    out_off = off.run_to_completion(reqs)
    assert on.pool.counters.hits > 0 and off.pool.counters.hits == 0
    assert out_on == out_off
    assert all(len(t) == s.max_tokens for t, s in zip(out_on.values(), reqs))


@pytest.mark.parametrize("device", DEVICES)
def test_preemption_does_not_change_tokens(device):
    reqs = specs(n=16)
    big = engine("engine.num_blocks=1024", device=device)
    small = engine("engine.num_blocks=40", device=device)
    out_big = big.run_to_completion(reqs)
    out_small = small.run_to_completion(reqs)
    assert small.scheduler.num_preemptions > 0 and big.scheduler.num_preemptions == 0
    assert out_big == out_small
    assert small.pool.num_free_blocks == small.pool.num_blocks  # nothing leaks


def test_chunk_size_does_not_change_tokens():
    reqs = specs(n=6)
    a = engine("engine.max_num_batched_tokens=512").run_to_completion(reqs)
    b = engine("engine.max_num_batched_tokens=37").run_to_completion(reqs)
    assert a == b


def test_deterministic_counts_and_tokens():
    reqs = specs(n=10)
    e1, e2 = engine("engine.num_blocks=48"), engine("engine.num_blocks=48")
    assert e1.run_to_completion(reqs) == e2.run_to_completion(reqs)
    assert e1.pool.counters == e2.pool.counters
    assert e1.stats.steps == e2.stats.steps
    assert [s.blocks_used for s in e1.stats.kv_timeline] == \
        [s.blocks_used for s in e2.stats.kv_timeline]


def test_admission_rejections_never_crash():
    eng = engine("engine.max_model_len=512", "engine.num_blocks=8", "engine.max_waiting=2")
    too_long = RequestSpec(0, tuple(range(1, 600)), 4)
    too_big = RequestSpec(1, tuple(range(1, 100)), 100)  # 199 tokens > 8 blocks x 16
    assert eng.add_request(too_long)[1] == "prompt_too_long"
    assert eng.add_request(too_big)[1] == "exceeds_kv_pool"
    ok = [eng.add_request(RequestSpec(i, (5, 6, 7), 2)) for i in range(2, 5)]
    assert [r for _, r in ok] == [None, None, "queue_full"]
    while eng.has_work:
        eng.step()
    assert all(s.num_output_tokens == 2 for s, r in ok if r is None)


def test_async_stream_and_cancel():
    eng = engine(profile="default")
    short = RequestSpec(0, (3, 4, 5, 6), 5)
    long = RequestSpec(1, (7, 8, 9), 40)

    async def main():
        async with AsyncEngine(eng) as aeng:
            first, second = aeng.submit(short), aeng.submit(long)
            cancelled = []
            async for ev in second:
                cancelled.append(ev.token)
                aeng.cancel(second)
            got = [ev.token async for ev in first]
            return got, cancelled, second.seq.finish_reason

    got, cancelled, reason = asyncio.run(main())
    assert len(got) == 5
    assert len(cancelled) == 1 and reason == "cancelled"
    assert eng.pool.num_free_blocks == eng.pool.num_blocks
