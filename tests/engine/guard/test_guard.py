"""The guard in the engine: tool calls of the tool-calls profile always validate; a model
forced to repeat is cut with reason `loop` at the token completing the k-th copy; the
guard leaves the tokens of other requests alone; preemption keeps the FSM state."""

from __future__ import annotations

import pytest
import torch

from perfkit.config.profile import Overrides, load_profile
from perfkit.engine.engine import Engine
from perfkit.engine.guard.grammar import validate
from perfkit.engine.sequence import Sequence
from perfkit.workload import RequestSpec, generate

LOOPS = ("engine.guard_loop_ngram=8", "engine.guard_loop_repeats=4")
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def engine(*sets: str, profile: str = "tool-calls") -> Engine:
    return Engine(load_profile(profile, Overrides(sets=("engine.cpu_threads=1", *sets))))


def specs(n: int = 12, seed: int = 0) -> list[RequestSpec]:
    prof = load_profile("tool-calls", Overrides(sets=(f"workload.seed={seed}",)))
    return generate(prof.workload, prof.model.vocab_size, prof.engine.max_model_len,
                    num_requests=n)


def run(eng: Engine, reqs: list[RequestSpec]) -> list[Sequence]:
    seqs = [eng.add_request(spec)[0] for spec in reqs]
    while eng.has_work:
        eng.step()
    return seqs


def output(seq: Sequence) -> list[int]:
    return seq.token_ids[seq.num_prompt_tokens:]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("seed, sampling", [(0, "greedy"), (1, "greedy"), (2, "random"),
                                            (3, "random")])
def test_every_tool_call_validates(seed, sampling, device):
    eng = engine(f'engine.sampling="{sampling}"', f"engine.seed={seed}",
                 f'engine.device="{device}"')
    seqs = run(eng, specs(12, seed))
    calls = [s for s in seqs if s.tool_call]
    assert calls and len(calls) < len(seqs)
    for s in calls:
        text = eng.vocab.detokenize(output(s))
        assert s.finish_reason == "stop" and validate(text) is None, text
    assert all(s.finish_reason in ("length", "loop") for s in seqs if not s.tool_call)
    counts = eng.stats.guard
    assert counts.tool_calls == counts.ended["stop"] == len(calls)
    assert counts.invalid_tool_calls == 0 and sum(counts.ended.values()) == len(seqs)
    assert eng.stats.guard_s > 0


def test_guard_off_tool_calls_are_invalid():
    eng = engine("engine.guard=false")
    seqs = run(eng, specs(8))
    calls = sum(s.tool_call for s in seqs)
    assert eng.stats.guard.tool_calls == eng.stats.guard.invalid_tool_calls == calls > 0
    assert all(s.finish_reason == "length" for s in seqs)


def forced_forward(nxt: dict[int, int], vocab: int):
    """A model forced to repeat: the next token is nxt[last token] (else 1), by a wide margin
    over small seeded noise (so tool-call rows, masked, still pick varied tokens)."""
    noise = torch.randn(4096, vocab, generator=torch.Generator().manual_seed(0))

    def forward(input_ids, positions, meta, logits_index):
        last = input_ids[logits_index].tolist()
        logits = noise[positions[logits_index]].clone()
        for row, token in enumerate(last):
            logits[row, nxt.get(token, 1)] += 100.0
        return logits

    return forward


PREAMBLE = {102: 9, 9: 11, 11: 5}  # prompt ends with 102; output 9, 11, then the cycle


@pytest.mark.parametrize("cycle, repeats, ngram, reason, length, loop_start", [
    ((5, 6, 7), 4, 8, "loop", 2 + 3 * 4, 2),  # cut at the token completing the 4th copy
    ((5, 6, 7), 3, 8, "loop", 2 + 3 * 3, 2),
    ((5,), 4, 8, "loop", 2 + 4, 2),
    ((5, 6, 7), 4, 2, "length", 40, None),  # cycle longer than the n-grams looked for
    ((5, 6, 7), 4, 0, "length", 40, None),  # loop detection off
])
def test_forced_repeat_is_cut_at_the_right_token(cycle, repeats, ngram, reason, length,
                                                 loop_start):
    eng = engine(f"engine.guard_loop_ngram={ngram}", f"engine.guard_loop_repeats={repeats}")
    nxt = PREAMBLE | {a: b for a, b in zip(cycle, cycle[1:] + cycle[:1])}
    eng.executor.model.forward = forced_forward(nxt, eng.profile.model.vocab_size)  # type: ignore
    loop, call = run(eng, [RequestSpec(0, (100, 101, 102), 40),
                           RequestSpec(1, (100, 101, 102), 40, tool_call=True)])
    out = output(loop)
    assert out[:3] == [9, 11, 5] and loop.finish_reason == reason
    assert len(out) == length and loop.loop_start == loop_start
    if loop_start is not None:  # what came before, then `repeats` copies of the cycle
        assert out[loop_start:] == list(cycle) * repeats
    assert call.finish_reason == "stop" and validate(eng.vocab.detokenize(output(call))) is None


def test_guard_off_runs_a_forced_repeat_to_length():
    eng = engine("engine.guard=false")
    eng.executor.model.forward = forced_forward({102: 5, 5: 5}, 512)  # type: ignore
    (seq,) = run(eng, [RequestSpec(0, (100, 101, 102), 40)])
    assert seq.finish_reason == "length" and output(seq) == [5] * 40


def first_loop_end(out: list[int], ngram: int, k: int) -> int | None:
    """Reference detector: length of the output when a k-repeat of an n-gram first ends it."""
    for end in range(1, len(out) + 1):
        for n in range(1, ngram + 1):
            if end >= n * k and out[end - n * k:end] == out[end - n:end] * k:
                return end
    return None


def test_guard_does_not_change_other_requests_tokens():
    reqs = specs(12)
    off = run(engine("engine.guard=false"), reqs)
    fsm_only = run(engine("engine.guard=true", "engine.guard_loop_ngram=0"), reqs)
    with_loops = run(engine("engine.guard=true", *LOOPS), reqs)
    plain = [i for i, r in enumerate(reqs) if not r.tool_call]
    assert any(with_loops[i].finish_reason == "loop" for i in plain)
    for i in plain:
        assert output(fsm_only[i]) == output(off[i])
        end = first_loop_end(output(off[i]), 8, 4)
        expect = output(off[i])[:end]  # cut exactly where the loop completes, else the same
        assert output(with_loops[i]) == expect
        assert with_loops[i].finish_reason == ("loop" if end is not None else "length")


def test_preemption_keeps_fsm_state():
    reqs = specs(16)
    big, small = engine("engine.num_blocks=1024"), engine("engine.num_blocks=40")
    mid_call: list[int] = []  # tool calls preempted after some of their output
    small.on_step = lambda out: mid_call.extend(
        s.seq_id for s in out.preempted if s.tool_call and s.num_output_tokens > 0)
    out_big, out_small = run(big, reqs), run(small, reqs)
    assert mid_call and big.scheduler.num_preemptions == 0
    assert [output(s) for s in out_big] == [output(s) for s in out_small]
    assert small.stats.guard.invalid_tool_calls == 0
    assert small.pool.num_free_blocks == small.pool.num_blocks


def test_budget_is_bounded_by_max_tokens_and_model_len():
    eng = engine("engine.max_model_len=512")
    fits = RequestSpec(0, (1, 2, 3), 13, tool_call=True)  # the shortest call is 13 tokens
    short = RequestSpec(1, (1, 2, 3), 12, tool_call=True)
    room = RequestSpec(2, tuple(range(1, 500)), 64, tool_call=True)  # 512 - 499 = 13 left
    no_room = RequestSpec(3, tuple(range(1, 501)), 64, tool_call=True)
    too_long = RequestSpec(4, tuple(range(1, 513)), 64, tool_call=True)
    got = [eng.add_request(s) for s in (fits, short, room, no_room, too_long)]
    assert [r for _, r in got] == [None, "tool_call_budget", None, "tool_call_budget",
                                   "prompt_too_long"]
    while eng.has_work:
        eng.step()
    for seq in (got[0][0], got[2][0]):
        assert seq.finish_reason == "stop" and len(output(seq)) == 13
        assert validate(eng.vocab.detokenize(output(seq))) is None
