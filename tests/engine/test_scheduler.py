"""Scheduler decisions on tiny exact setups, with a null forward (no tensors)."""

from __future__ import annotations

from perfkit.engine.blocks import BlockPool
from perfkit.engine.scheduler import Scheduler, SchedulerConfig
from perfkit.engine.sequence import SeqStatus, Sequence


def make(num_blocks=16, block_size=4, max_seqs=8, budget=64, max_len=64, max_waiting=100,
         caching=True, admission="full_prompt"):
    cfg = SchedulerConfig(max_seqs, budget, max_len, max_waiting, admission)
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


def test_full_prompt_admission_waits_for_the_whole_prompt():
    # 6 blocks of 4, budget 8: a holds 3 blocks; b's 20-token prompt needs 5 of the 3
    # free, its first chunk (7 tokens beside a's decode) 2.
    for admission, admitted in (("full_prompt", False), ("first_chunk", True)):
        s = make(num_blocks=6, block_size=4, budget=8, admission=admission)
        s.add(seq(0, 8, max_tokens=8))
        step(s)
        s.add(seq(1, 20, start=100))
        out = step(s)
        assert any(q.seq_id == 1 for q in out.admitted) is admitted, admission


def test_blocks_registered_at_schedule_time_hit_in_the_same_step():
    # four requests with one 12-token prompt admitted together: the first computes its 3
    # full blocks, the others hit 2 of them (a hit stops short of the last token).
    s = make(num_blocks=16, block_size=4, budget=64)
    for i in range(4):
        s.add(seq(i, 12))
    out = step(s)
    assert len(out.admitted) == 4
    assert s.pool.counters.hits == 3 * 2
    assert [q.num_new_tokens for q in out.scheduled] == [12, 4, 4, 4]
    assert s.pool.num_used_blocks == 3 + 3 * 1


def test_a_preempted_scheduled_block_is_not_left_in_the_cache():
    from perfkit.engine.kv_manager import KVManager

    pool = BlockPool(8, 4)
    kv = KVManager(pool)
    a = seq(0, 8)
    assert kv.admit(a, 8)  # registers both blocks for this step
    assert len(pool.cached) == 2
    kv.free(a)  # preempted before the step ran: nothing was written
    assert not pool.cached and pool.num_free_blocks == 8
