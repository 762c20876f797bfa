"""Scheduler decisions on tiny exact setups, with a null forward (no tensors)."""

from __future__ import annotations

from perfkit.engine.blocks import BlockPool
from perfkit.engine.scheduler import Scheduler, SchedulerConfig
from perfkit.engine.sequence import SeqStatus, Sequence


def make(num_blocks=16, block_size=4, max_seqs=8, budget=64, max_len=64, max_waiting=100,
         caching=True):
    cfg = SchedulerConfig(max_seqs, budget, max_len, max_waiting)
    return Scheduler(cfg, BlockPool(num_blocks, block_size, caching))


def seq(sid, prompt_len, max_tokens=4, priority=0, start=1):
    toks = list(range(start, start + prompt_len))
    return Sequence(sid, toks, prompt_len, max_tokens, priority=priority)


def step(s: Scheduler):
    """schedule -> commit -> append token 7 for sampling sequences -> finish at max_tokens."""
    out = s.schedule()
    s.commit(out)
    for item in out.scheduled:
        if item.samples:
            item.seq.token_ids.append(7)
            if item.seq.num_output_tokens >= item.seq.max_tokens:
                s.finish(item.seq, "length")
    return out


def test_rejections_carry_reasons():
    s = make(num_blocks=4, block_size=4, max_len=32, max_waiting=1)
    assert s.add(seq(0, 40)) == "prompt_too_long"
    assert s.add(seq(1, 10, max_tokens=20)) == "exceeds_kv_pool"  # 30 tokens > 16 slots
    assert s.add(seq(2, 4)) is None
    assert s.add(seq(3, 4)) == "queue_full"


def test_chunked_prefill_within_token_budget():
    s = make(budget=8)
    s.add(seq(0, 20))
    chunks = []
    while not step(s).scheduled[0].samples:
        chunks.append(s.running[0].num_computed_tokens)
    assert chunks == [8, 16]  # 8 + 8, then the last 4 tokens sample


def test_continuous_batching_mixes_decode_and_prefill():
    s = make(budget=10)
    s.add(seq(0, 4))
    step(s)  # seq 0 prefilled, sampled
    s.add(seq(1, 30, start=100))
    out = step(s)
    assert [(i.seq.seq_id, i.num_new_tokens) for i in out.scheduled] == [(0, 1), (1, 9)]


def test_batch_cap():
    s = make(max_seqs=2)
    for i in range(3):
        s.add(seq(i, 4, start=10 * i + 1))
    out = step(s)
    assert len(out.scheduled) == 2 and len(s.waiting) == 1


def test_priority_then_fcfs():
    s = make(max_seqs=1)
    s.add(seq(0, 4, priority=1))
    s.add(seq(1, 4, priority=0, start=50))
    s.add(seq(2, 4, priority=0, start=90))
    out = step(s)
    assert out.scheduled[0].seq.seq_id == 1


def test_preemption_frees_newest_lowest_priority_and_completes():
    s = make(num_blocks=6, block_size=4, budget=64)
    a, b = seq(0, 8, max_tokens=8), seq(1, 8, max_tokens=8, start=50)
    s.add(a)
    s.add(b)
    for _ in range(100):
        if not s.has_work:
            break
        out = step(s)
        if out.preempted:
            assert out.preempted[0] is b  # newest, same priority
    assert a.status is SeqStatus.FINISHED and b.status is SeqStatus.FINISHED
    assert b.num_preemptions >= 1 and s.num_preemptions >= 1
    assert s.pool.num_free_blocks == 6  # nothing leaks


def test_preempted_sequence_hits_its_own_cached_blocks():
    s = make(num_blocks=6, block_size=4)
    a, b = seq(0, 8, max_tokens=8), seq(1, 8, max_tokens=8, start=50)
    s.add(a)
    s.add(b)
    hits_before = s.pool.counters.hits
    while s.has_work:
        step(s)
    assert s.pool.counters.hits > hits_before  # recompute reused cached prefix blocks
