"""Parallel sampling and beam search on shared blocks, on the tiny model: samples share the
prompt's blocks and copy the partly filled last one on write; beam search equals a plain
dense beam search with no sharing; preemption, chunking, caching and sharing off leave
every output's tokens as they were."""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict

import pytest
import torch

from perfkit.config.profile import Overrides, load_profile
from perfkit.config.units import cdiv
from perfkit.engine.engine import Engine
from perfkit.engine.layers.attention import dense_reference
from perfkit.engine.layers.model import SyntheticModel
from perfkit.engine.sampling_params import SamplingParams
from perfkit.workload import RequestSpec

BASE = ("engine.cpu_threads=1", "engine.max_num_seqs=32")
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def engine(*sets: str, device: str = "cpu") -> Engine:
    return Engine(load_profile("default", Overrides(sets=(*BASE, f'engine.device="{device}"',
                                                          *sets))))


def outputs(eng: Engine, specs: list[RequestSpec]) -> dict[int, dict[int, list[int]]]:
    """request id -> output index -> tokens, from the engine's events; the pool ends empty."""
    ids = {eng.add_request(s)[0].seq_id: s.request_id for s in specs}
    out: dict[int, dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
    done = set()
    while eng.has_work:
        for ev in eng.step():
            assert ev.request.seq_id not in done, "an event after the request's last"
            out[ids[ev.request.seq_id]][ev.index].append(ev.token)
            if ev.finished:
                done.add(ev.request.seq_id)
    assert done == set(ids)
    assert eng.pool.num_free_blocks == eng.pool.num_blocks and eng.pool.num_shared_blocks == 0
    return {r: dict(v) for r, v in out.items()}


PROMPTS = [tuple(range(3, 3 + 37)), tuple(range(50, 50 + 21)), tuple(range(90, 90 + 64))]


def test_parallel_samples_share_the_prompt_and_copy_its_last_block():
    eng = engine()
    out = outputs(eng, [RequestSpec(0, PROMPTS[0], 9, n=3)])
    single = outputs(engine(), [RequestSpec(0, PROMPTS[0], 9)])[0][0]
    assert out[0] == {0: single, 1: single, 2: single}  # greedy: n equal samples
    # 37 tokens = 2 full blocks + 5 in a shared third: the first two writers copy it
    assert eng.pool.counters.copy_on_writes == 2
    tl = eng.stats.kv_timeline
    assert max(s.blocks_shared for s in tl) == 3  # at the fork: all three prompt blocks
    assert tl[-2].blocks_saved == 2 * 2  # later: two samples borrow the 2 full blocks
    assert tl[-2].blocks_used == 2 + 3 * 1  # shared full blocks + each sample's last


def test_a_prompt_of_whole_blocks_forks_without_copies():
    eng = engine()
    outputs(eng, [RequestSpec(0, PROMPTS[2], 4, n=4)])
    assert eng.pool.counters.copy_on_writes == 0


@pytest.mark.parametrize("device", DEVICES)
def test_sharing_off_gives_the_same_tokens_on_more_blocks(device):
    """On the device's KV tensors: every copy-on-write is a block copy there."""
    specs = [RequestSpec(i, p, 12, n=4) for i, p in enumerate(PROMPTS)]
    on, off = engine(device=device), engine("engine.block_sharing=false", device=device)
    assert outputs(on, specs) == outputs(off, specs)
    peak_on = max(s.blocks_used for s in on.stats.kv_timeline)
    peak_off = max(s.blocks_used for s in off.stats.kv_timeline)
    assert peak_off > peak_on
    # without sharing every output copies each prompt block it was forked with
    copies = sum(3 * cdiv(len(p), 16) for p in PROMPTS)
    assert off.pool.counters.copy_on_writes == copies


@pytest.mark.parametrize("sets", [
    ("engine.num_blocks=14",),  # preempts whole groups, which recompute and fork again
    ("engine.max_num_batched_tokens=7",),  # chunked prompts and recomputes
    ("engine.prefix_caching=false",),
])
def test_groups_keep_their_tokens_under(sets):
    specs = [RequestSpec(0, PROMPTS[0], 20, n=3), RequestSpec(1, PROMPTS[1], 18, beam_width=3),
             RequestSpec(2, PROMPTS[2], 16), RequestSpec(3, PROMPTS[1], 15, beam_width=2)]
    ref = outputs(engine(), specs)
    eng = engine(*sets)
    assert outputs(eng, specs) == ref
    if "num_blocks" in sets[0]:
        assert eng.scheduler.num_preemptions > 0


def test_groups_take_their_width_in_batch_seats():
    eng = engine("engine.max_num_seqs=4")
    a, _ = eng.add_request(RequestSpec(0, PROMPTS[0], 5, n=3))
    b, _ = eng.add_request(RequestSpec(1, PROMPTS[1], 5, n=2))
    eng.step()
    assert a.status.value == "running" and b.status.value == "waiting"  # 3 + 2 > 4
    assert eng.add_request(RequestSpec(2, PROMPTS[1], 5, n=5))[1] == "too_many_outputs"


# -- beam search against a plain dense one ---------------------------------------------------
class DenseAttention:
    """Stands in for PagedAttention: one sequence, its whole context, no cache."""

    def __init__(self, device: torch.device) -> None:
        self.device = device

    def forward(self, q, k, v, layer, meta):
        return dense_reference(q, [k], [v], [q.shape[0]])


def dense_beam_search(eng: Engine, prompt: tuple[int, ...], width: int, steps: int
                      ) -> list[tuple[list[int], float]]:
    """Beam search as in vLLM (each beam's best `width` candidates, the best `width` of
    all kept), every step recomputing every beam from scratch with dense attention."""
    prof = eng.profile
    model = SyntheticModel(prof.model, DenseAttention(torch.device("cpu")),  # type: ignore[arg-type]
                           prof.engine.max_model_len, prof.engine.seed, gemm="plain")

    def logprobs(tokens: list[int]) -> torch.Tensor:
        n = len(tokens)
        ids = torch.tensor(tokens)
        logits = model.forward(ids, torch.arange(n), None, torch.tensor([n - 1]))  # type: ignore[arg-type]
        return torch.log_softmax(logits[0].double(), -1)

    beams = [(list(prompt), 0.0)]
    for _ in range(steps):
        cands = []
        for rank, (tokens, cum) in enumerate(beams):
            values, ids = logprobs(tokens).topk(width)
            cands += [(cum + v, rank, k, [*tokens, t])
                      for k, (v, t) in enumerate(zip(values.tolist(), ids.tolist()))]
        cands.sort(key=lambda c: (-c[0], c[1], c[2]))
        beams = [(tokens, cum) for cum, _, _, tokens in cands[:width]]
    return [(tokens[len(prompt):], cum) for tokens, cum in beams]


@pytest.mark.parametrize("width", [2, 4])
def test_beam_search_equals_a_dense_reference(width):
    eng = engine()
    specs = [RequestSpec(i, p, 7, beam_width=width) for i, p in enumerate(PROMPTS[:2])]
    got = outputs(eng, specs)
    for spec in specs:
        ref = dense_beam_search(eng, spec.prompt, width, 7)
        assert [got[spec.request_id][r] for r in range(width)] == [t for t, _ in ref]
    assert eng.pool.counters.copy_on_writes > 0


def test_beam_scores_are_the_reference_log_probabilities():
    eng = engine()
    head, _ = eng.add_request(RequestSpec(0, PROMPTS[1], 6, beam_width=3))
    while eng.has_work:
        eng.step()
    group = head.group
    assert group is not None and len(group.done) == 3
    ref = dense_beam_search(eng, PROMPTS[1], 3, 6)
    best = sorted(group.done, key=lambda s: -s.cum_logprob)
    assert [s.cum_logprob for s in best] == pytest.approx([c for _, c in ref], abs=1e-4)
    assert all(math.isfinite(s.cum_logprob) and s.cum_logprob < 0 for s in best)


def test_seeded_samples_equal_separate_requests_with_those_seeds():
    """vLLM's rule: a request with n samples and seed s samples output i as a request
    with seed s + i would, whatever it is batched with."""
    hot = SamplingParams(temperature=1.0, top_p=0.95)
    eng = engine()
    group, _ = eng.add_request(RequestSpec(0, PROMPTS[0], 12, n=3),
                               dataclasses.replace(hot, seed=7))
    other, _ = eng.add_request(RequestSpec(1, PROMPTS[1], 9, n=2), hot)  # unseeded, batched
    while eng.has_work:
        eng.step()
    assert group.group is not None and other.group is not None
    got = {s.index: s.token_ids[s.num_prompt_tokens:] for s in group.group.done}
    alone = engine()
    seqs = [alone.add_request(RequestSpec(i, PROMPTS[0], 12),
                              dataclasses.replace(hot, seed=7 + i))[0] for i in range(3)]
    while alone.has_work:
        alone.step()
    assert got == {i: s.token_ids[s.num_prompt_tokens:] for i, s in enumerate(seqs)}
    assert len({tuple(t) for t in got.values()}) == 3  # the samples differ
    unseeded = [s.token_ids[s.num_prompt_tokens:] for s in other.group.done]
    assert unseeded[0] != unseeded[1]
