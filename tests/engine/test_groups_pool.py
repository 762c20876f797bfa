"""Groups on any pool: whatever the pool size, chunking, caching and sharing, every step
reads the K/V its sequences wrote (a shadow cache checks each read), no block is written
while shared (but for the step that first fills a full block whose hash a request
admitted in the same step already hit; a partly filled block has no hash), and when the
requests end no block is left referenced."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from perfkit.config.profile import load_profile
from perfkit.engine.engine import Engine
from perfkit.engine.executor import ExecutorOutput, NullExecutor
from perfkit.engine.scheduler import SchedulerOutput
from perfkit.engine.sequence import Sequence
from perfkit.workload import RequestSpec

BS = 4


class CheckingExecutor(NullExecutor):
    """The null executor over a shadow cache: block -> the token whose K/V each slot holds."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.content: dict[int, list[int | None]] = {}
        self.pool = None  # set by the test: the engine's BlockPool

    def execute(self, out: SchedulerOutput, sampling: list[Sequence]) -> ExecutorOutput:
        ref = self.pool.ref_count
        dst = [d for _, d in out.copies]
        assert len(set(dst)) == len(dst)
        for _, d in out.copies:  # copy-on-write: all sources read before any write
            assert ref[d] == 1
        snapshot = {s: list(self.content.get(s, [None] * BS)) for s, _ in out.copies}
        for src, d in out.copies:
            self.content[d] = list(snapshot[src])
        for item in out.scheduled:
            seq, start = item.seq, item.seq.num_computed_tokens
            for pos in range(start, start + item.num_new_tokens):
                block = seq.block_ids[pos // BS]
                first_fill = self.pool.block_hash[block] is not None  # registered this step
                assert ref[block] == 1 or first_fill, f"block {block} written while shared"
                self.content.setdefault(block, [None] * BS)[pos % BS] = seq.token_ids[pos]
        for item in out.scheduled:  # what attention reads: the whole context
            seq = item.seq
            for pos in range(seq.num_computed_tokens + item.num_new_tokens):
                slot = self.content[seq.block_ids[pos // BS]][pos % BS]
                assert slot == seq.token_ids[pos], (seq.seq_id, pos)
        return super().execute(out, sampling)


def build(num_blocks: int, budget: int, caching: bool, sharing: bool) -> Engine:
    prof = load_profile("default")
    eng = dataclasses.replace(
        prof.engine, block_size=BS, num_blocks=num_blocks, max_num_batched_tokens=budget,
        max_num_seqs=8, max_model_len=64, prefix_caching=caching, block_sharing=sharing,
        guard=False, null_block=False)
    profile = dataclasses.replace(prof, engine=eng)
    made: list[CheckingExecutor] = []

    def factory(p, spec, guard):
        made.append(CheckingExecutor(p, spec, guard))
        return made[0]

    engine = Engine(profile, executor=factory)
    made[0].pool = engine.pool
    return engine


request = st.tuples(st.integers(1, 13), st.integers(1, 9), st.sampled_from(["one", "n", "beam"]),
                    st.integers(2, 4), st.integers(1, 3))


@settings(max_examples=60, deadline=None)
@given(st.lists(request, min_size=1, max_size=6), st.integers(4, 40), st.integers(4, 24),
       st.booleans(), st.booleans())
def test_any_pool_reads_what_it_wrote_and_leaks_nothing(reqs, num_blocks, budget, caching,
                                                       sharing):
    eng = build(num_blocks, budget, caching, sharing)
    heads = []
    for i, (plen, out, kind, width, alphabet) in enumerate(reqs):
        prompt = tuple(1 + (i * j) % alphabet for j in range(plen))  # repeats: cache hits
        spec = RequestSpec(i, prompt, out, n=width if kind == "n" else 1,
                           beam_width=width if kind == "beam" else 1)
        head, reason = eng.add_request(spec)
        if reason is None:
            heads.append((head, spec))
    ended = set()
    for _ in range(2000):
        if not eng.has_work:
            break
        for ev in eng.step():
            if ev.finished:
                ended.add(ev.request.seq_id)
    assert not eng.has_work, "no progress"
    assert ended == {h.seq_id for h, _ in heads}
    assert eng.pool.num_free_blocks == eng.pool.num_blocks
    assert eng.pool.num_shared_blocks == 0 and not any(eng.pool.ref_count)
    for head, spec in heads:
        group = head.group
        outputs = group.done if group is not None else [head]
        assert len(outputs) == max(spec.n, spec.beam_width)
        assert all(s.num_output_tokens == spec.max_tokens for s in outputs)
