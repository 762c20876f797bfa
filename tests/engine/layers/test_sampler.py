"""The batched sampler against a plain reference: each parameter alone and all together,
row by row in Python lists (no torch); the counter-based uniform against splitmix64's
published test vector; the draw follows the distribution; greedy stays argmax."""

from __future__ import annotations

import math
import random
from collections import Counter

import pytest
import torch

from perfkit.engine.layers.sampler import build_batch, draw_probs, row_uniform, sample
from perfkit.engine.sampling_params import SamplingParams, mix64, sampling_key
from perfkit.engine.sequence import Sequence

M64 = (1 << 64) - 1
V = 48
CPU = torch.device("cpu")


# -- the plain reference -----------------------------------------------------------------
def splitmix64_next(state: int) -> tuple[int, int]:
    """Vigna's splitmix64.c, as published: (new state, output)."""
    state = (state + 0x9E3779B97F4A7C15) & M64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return state, z ^ (z >> 31)


def softmax(x: list[float]) -> list[float]:
    top = max(x)
    e = [math.exp(v - top) if v != -math.inf else 0.0 for v in x]
    total = sum(e)
    return [v / total for v in e]


def ref_adjust(logits: list[float], p: SamplingParams, prompt: list[int],
               output: list[int]) -> list[float]:
    x = list(logits)
    for token, bias in p.logit_bias:
        x[token] += bias
    seen, counts = set(prompt) | set(output), Counter(output)
    for v in range(V):
        if v in seen:
            x[v] = x[v] / p.repetition_penalty if x[v] > 0 else x[v] * p.repetition_penalty
        x[v] -= p.frequency_penalty * counts[v] + p.presence_penalty * (counts[v] > 0)
    return x


def ref_probs(x: list[float], p: SamplingParams) -> list[float]:
    x = [v / (p.temperature or 1.0) for v in x]
    if p.min_p:
        probs = softmax(x)
        x = [v if q >= p.min_p * max(probs) else -math.inf for v, q in zip(x, probs)]
    if p.top_k > 0:
        kth = sorted(x, reverse=True)[p.top_k - 1]
        x = [v if v >= kth else -math.inf for v in x]
    if p.top_p < 1:  # the smallest set of the largest tokens whose mass reaches top_p
        probs, mass, keep = softmax(x), 0.0, set()
        for v in sorted(range(V), key=lambda v: -x[v]):
            if mass >= p.top_p:
                break
            keep.add(v)
            mass += probs[v]
        x = [v if i in keep else -math.inf for i, v in enumerate(x)]
    return softmax(x)


def ref_token(logits: list[float], seq: Sequence) -> int:
    p = seq.params
    x = ref_adjust(logits, p, seq.token_ids[:seq.num_prompt_tokens],
                   seq.token_ids[seq.num_prompt_tokens:])
    if p.greedy:
        return max(range(V), key=lambda v: x[v])
    probs = ref_probs(x, p)
    target = row_uniform(seq.sample_key, seq.num_output_tokens) * sum(probs)
    cum = 0.0
    for v in range(V):  # the first token whose cumulative probability exceeds the target
        cum += probs[v]
        if cum > target:
            return v
    raise AssertionError("unreachable")


# -- helpers -----------------------------------------------------------------------------
def seq(params: SamplingParams, i: int = 0, rng: random.Random | None = None) -> Sequence:
    rng = rng or random.Random(i)
    prompt = [rng.randrange(V) for _ in range(rng.randint(1, 12))]
    output = [rng.randrange(V) for _ in range(rng.randint(0, 12))]
    s = Sequence(i, prompt + output, len(prompt), 64, params=params,
                 sample_key=sampling_key(params.seed if params.seed is not None else 0, 1 + i))
    return s


def logits_rows(n: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(n, V, generator=torch.Generator().manual_seed(seed)) * 3


PARAMS = {
    "temperature": SamplingParams(temperature=0.7),
    "hot": SamplingParams(temperature=2.5),
    "top_k": SamplingParams(temperature=1.0, top_k=5),
    "top_p": SamplingParams(temperature=1.0, top_p=0.6),
    "min_p": SamplingParams(temperature=1.0, min_p=0.08),
    "presence": SamplingParams(temperature=1.0, presence_penalty=1.5),
    "frequency": SamplingParams(temperature=1.0, frequency_penalty=-0.8),
    "repetition": SamplingParams(temperature=1.0, repetition_penalty=1.7),
    "logit_bias": SamplingParams(temperature=1.0, logit_bias=((3, 8.0), (7, -100.0))),
    "all": SamplingParams(temperature=0.9, top_k=12, top_p=0.9, min_p=0.02,
                          presence_penalty=0.4, frequency_penalty=0.3,
                          repetition_penalty=1.3, logit_bias=((1, 2.0),), seed=11),
    "greedy+penalties": SamplingParams(repetition_penalty=2.0, frequency_penalty=1.0,
                                       logit_bias=((5, 3.0),)),
}


@pytest.mark.parametrize("name", sorted(PARAMS))
def test_each_parameter_matches_the_reference(name: str) -> None:
    params = PARAMS[name]
    seqs = [seq(params, i) for i in range(6)]
    logits = logits_rows(len(seqs), seed=len(name))
    plain = logits.tolist()
    batch = build_batch(seqs, V, CPU)
    assert batch is not None
    tokens = sample(logits.clone(), batch).tolist()
    assert tokens == [ref_token(row, s) for row, s in zip(plain, seqs)]
    if not params.greedy:  # the distribution itself, row by row
        adjusted = torch.tensor([ref_adjust(row, params, s.token_ids[:s.num_prompt_tokens],
                                            s.token_ids[s.num_prompt_tokens:])
                                 for row, s in zip(plain, seqs)], dtype=torch.float32)
        want = torch.tensor([ref_probs(row, params) for row in adjusted.tolist()],
                            dtype=torch.float64)
        got = draw_probs(adjusted, batch)
        assert torch.allclose(got.double(), want, atol=1e-5)


def test_a_mixed_batch_is_each_row_alone() -> None:
    rng = random.Random(5)
    seqs = [seq(PARAMS[name], i, rng) for i, name in enumerate(sorted(PARAMS) * 2)]
    seqs.append(seq(SamplingParams(), 99))  # plain greedy among them
    logits = logits_rows(len(seqs), seed=3)
    together = sample(logits.clone(), build_batch(seqs, V, CPU)).tolist()
    alone = [sample(logits[i:i + 1].clone(), build_batch([s], V, CPU)).item()
             for i, s in enumerate(seqs)]
    assert together == alone == [ref_token(r, s) for r, s in zip(logits.tolist(), seqs)]


def test_plain_greedy_is_argmax_without_a_batch() -> None:
    seqs = [seq(SamplingParams(), i) for i in range(4)]
    assert build_batch(seqs, V, CPU) is None
    logits = logits_rows(4)
    assert sample(logits.clone(), None).tolist() == logits.argmax(-1).tolist()


def test_the_uniform_is_splitmix64() -> None:
    state, outputs = 1234567, []  # the reference C code's first outputs from seed 1234567
    for _ in range(3):
        state, out = splitmix64_next(state)
        outputs.append(out)
    assert outputs == [6457827717110365317, 3203168211198807973, 9817491932198370423]
    # mix64(x) is splitmix64's output from state x: row_uniform takes its top 53 bits
    assert mix64(1234567) == outputs[0]
    assert row_uniform(1234567, 0) == (outputs[0] >> 11) / 2**53
    us = [row_uniform(sampling_key(5, s), c) for s in range(50) for c in range(200)]
    assert min(us) >= 0 and max(us) < 1 and sum(us) / len(us) == pytest.approx(0.5, abs=0.01)


def test_draws_follow_the_distribution() -> None:
    params = SamplingParams(temperature=1.0, top_p=0.95)
    logits = torch.randn(V, generator=torch.Generator().manual_seed(1)).mul_(1.5)
    n = 6000
    seqs = [Sequence(i, [1], 1, 8, params=params, sample_key=sampling_key(3, i)) for i in range(n)]
    tokens = sample(logits.expand(n, V).clone(), build_batch(seqs, V, CPU))
    freq = torch.bincount(tokens, minlength=V).double() / n
    want = torch.tensor(ref_probs(logits.tolist(), params), dtype=torch.float64)
    assert (freq[want == 0] == 0).all()  # nothing outside top-p is ever drawn
    # within 4.5 standard errors, token by token
    assert ((freq - want).abs() <= 4.5 * (want * (1 - want) / n).sqrt() + 1e-9).all()


def test_seeds_and_keys() -> None:
    assert sampling_key(1) == sampling_key(1 + 2**64) != sampling_key(2)
    assert sampling_key(1, 0) != sampling_key(1, 1)
    assert len({mix64(i) for i in range(10000)}) == 10000
    for bad in ({"temperature": -1}, {"top_p": 0}, {"top_k": -2}, {"min_p": 1.5},
                {"repetition_penalty": 0}, {"presence_penalty": 3}, {"temperature": math.nan}):
        with pytest.raises(ValueError, match="SamplingParams"):
            SamplingParams(**bad)  # type: ignore[arg-type]
