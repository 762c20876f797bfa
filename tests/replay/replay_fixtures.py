"""Tiny traces, their token prompts, an engine profile of the same rules, and random
cases of both: shared by tests/replay and tests/fragmentation
(tests/fragmentation/conftest.py puts this folder on the path)."""

from __future__ import annotations

import random
from dataclasses import dataclass

from hypothesis import strategies as st

from perfkit.config.profile import Overrides, load_profile
from perfkit.replay.arrivals import ClosedLoop, open_loop
from perfkit.replay.paged import PagedPool
from perfkit.replay.trace import Trace
from perfkit.workload import RequestSpec

NO_BUDGET = 100_000  # a token budget no tiny trace's step reaches (a valid profile value)


def trace(requests: list[tuple[int, int]], mml: int = 8, arrivals: list[int] | None = None,
          groups: list[int] | None = None, prefix_len: int = 0) -> Trace:
    """requests: (prompt, max_tokens) each; an open loop (all at step 0 by default)."""
    n = len(requests)
    return Trace([p for p, _ in requests], [m for _, m in requests], [0] * n,
                 groups or [-1] * n, prefix_len, open_loop(arrivals or [0] * n), mml)


def specs_for(tr: Trace, seed: int = 0) -> list[RequestSpec]:
    """Token prompts for a trace: group prefixes shared, the rest distinct."""
    rng = random.Random(seed)
    prefixes = {g: tuple(rng.randrange(2, 1 << 30) for _ in range(tr.prefix_len))
                for g in set(tr.prefix_group) if g >= 0}
    specs = []
    for i in range(tr.num_requests):
        g = tr.prefix_group[i]
        head = prefixes[g] if g >= 0 else ()
        own = tuple(rng.randrange(2, 1 << 30) for _ in range(tr.prompt_len[i] - len(head)))
        specs.append(RequestSpec(i, head + own, tr.max_tokens[i], tr.priority[i],
                                 prefix_group=None if g < 0 else g))
    return specs


def engine_profile(bs: int, blocks: int, mml: int, seqs: int = 64, budget: int = NO_BUDGET,
                   admission: str = "full_prompt", caching: bool = False):
    """The default profile with a pool of `blocks` usable blocks and these rules."""
    return load_profile("default", Overrides(sets=(
        f"engine.block_size={bs}", f"engine.num_blocks={blocks + 1}",  # + the null block
        f"engine.max_model_len={mml}", f"engine.max_num_seqs={seqs}",
        f"engine.prefix_caching={str(caching).lower()}",
        f"engine.max_num_batched_tokens={budget}", f"engine.admission={admission}")))


@dataclass(frozen=True)
class Case:
    """One trace and the rules both replays run it under."""

    trace: Trace
    bs: int
    blocks: int  # usable blocks
    seqs: int
    budget: int
    admission: str
    caching: bool

    def pool(self) -> PagedPool:
        return PagedPool(self.blocks, self.bs, self.seqs, self.budget,
                         self.admission == "full_prompt", self.caching)

    def profile(self):
        return engine_profile(self.bs, self.blocks, self.trace.max_model_len, self.seqs,
                              self.budget, self.admission, self.caching)


@st.composite
def cases(draw, prefix: bool = False, pressure: bool = False) -> Case:
    """Random traces: open loops (gaps, priorities) and closed ones (clients, a delay);
    pools from tight (preemptions, queueing) to ample; budgets from a few tokens (chunked
    prefill) to unlimited; both admission rules. `prefix`: a shared prefix of whole blocks
    (two groups, prefix caching on), on an ample pool and budget unless `pressure`: there
    the kernel only approximates the Engine (see replay.paged)."""
    reqs = draw(st.lists(st.tuples(st.integers(1, 60), st.integers(1, 30)), min_size=1,
                         max_size=16))
    n, bs = len(reqs), draw(st.sampled_from([1, 2, 4, 8, 16]))
    tr = trace(reqs, mml=96)
    if draw(st.booleans()):
        tr.priority = draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
    if draw(st.booleans()):
        tr.arrivals = ClosedLoop(draw(st.integers(1, 6)), draw(st.integers(0, 8)))
    else:
        tr.arrivals = open_loop(sorted(draw(st.lists(st.integers(0, 20), min_size=n,
                                                     max_size=n))))
    blocks = draw(st.integers(4, 40))
    budget = draw(st.sampled_from([draw(st.integers(1, 48)), NO_BUDGET]))
    if prefix:
        tr.prefix_len = bs * draw(st.integers(1, 3))
        tr.prefix_group = draw(st.lists(st.integers(-1, 1), min_size=n, max_size=n))
        tr.prompt_len = [p + tr.prefix_len if g >= 0 else p
                         for p, g in zip(tr.prompt_len, tr.prefix_group)]
        if pressure:  # the largest request fits, with 16 blocks to spare at most
            ends = [min(p + m, tr.max_model_len) for p, m in zip(tr.prompt_len,
                                                                 tr.max_tokens)]
            blocks = -(-max(ends) // bs) + draw(st.integers(0, 16))
        else:
            blocks, budget = 96 * n, NO_BUDGET
    return Case(tr, bs, blocks, draw(st.integers(1, 8)), budget,
                draw(st.sampled_from(["full_prompt", "first_chunk"])), prefix)
