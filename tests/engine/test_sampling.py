"""Sampling in the engine: a seeded request gives the same tokens alone and in a batch of
16 with other parameters around it; unseeded random sampling is deterministic for the
profile's seed; greedy stays the default."""

from __future__ import annotations

import pytest

from perfkit.config.profile import Overrides, load_profile
from perfkit.engine.engine import Engine
from perfkit.engine.sampling_params import SamplingParams
from perfkit.workload import RequestSpec

SEEDED = SamplingParams(temperature=1.0, top_p=0.9, top_k=50, repetition_penalty=1.1,
                        presence_penalty=0.3, seed=1234)
OTHERS = [SamplingParams(), SamplingParams(temperature=0.8), SamplingParams(temperature=1.2,
          min_p=0.05, frequency_penalty=0.5), SamplingParams(temperature=1.0, seed=7),
          SamplingParams(temperature=1.0, logit_bias=((9, 5.0),))]


def engine(*sets: str) -> Engine:
    return Engine(load_profile("default", Overrides(sets=("engine.cpu_threads=1",
                                                          'engine.device="cpu"', *sets))))


def prompt(i: int, n: int = 20) -> tuple[int, ...]:
    return tuple(1 + (i * 37 + j * 11) % 500 for j in range(n))


def run(eng: Engine, reqs: list[tuple[RequestSpec, SamplingParams | None]]) -> list[list[int]]:
    seqs = [eng.add_request(spec, params)[0] for spec, params in reqs]
    while eng.has_work:
        eng.step()
    return [s.token_ids[s.num_prompt_tokens:] for s in seqs]


@pytest.mark.parametrize("position", [0, 9, 15])
def test_a_seeded_request_is_the_same_alone_and_in_a_batch_of_16(position: int) -> None:
    target = (RequestSpec(0, prompt(0), 24), SEEDED)
    alone = run(engine(), [target])[0]
    crowd = [(RequestSpec(i, prompt(i, 8 + i), 16 + i), OTHERS[i % len(OTHERS)])
             for i in range(1, 16)]
    crowd.insert(position, target)
    batched = run(engine(), crowd)
    assert batched[position] == alone
    assert len(set(alone)) > 3  # really sampled, not a greedy loop


def test_same_seed_same_tokens_other_seed_other_tokens() -> None:
    spec = RequestSpec(0, prompt(3), 16)
    a, b = run(engine(), [(spec, SEEDED), (spec, SEEDED)])
    c = run(engine(), [(spec, SamplingParams(temperature=1.0, top_p=0.9, top_k=50,
                                             repetition_penalty=1.1, presence_penalty=0.3,
                                             seed=99))])[0]
    assert a == b != c


def test_unseeded_random_is_deterministic_for_the_profile_seed() -> None:
    reqs = [(RequestSpec(i, prompt(i), 12), None) for i in range(6)]
    first = run(engine('engine.sampling="random"'), reqs)
    assert run(engine('engine.sampling="random"'), reqs) == first
    assert run(engine('engine.sampling="random"', "engine.seed=1"), reqs) != first
    assert len({tuple(t) for t in first}) == 6  # every request its own stream


def test_greedy_is_the_default_and_the_argmax() -> None:
    reqs = [(RequestSpec(i, prompt(i), 10), None) for i in range(4)]
    default = run(engine(), reqs)
    explicit = run(engine(), [(spec, SamplingParams(temperature=0, seed=5)) for spec, _ in reqs])
    assert default == explicit
