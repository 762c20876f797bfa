"""Tool-call vocabulary, validation and DFA: legal walks stay legal and always accept
within the budget-aware bound; the guard's bias table and mask agree with the DFA."""

from __future__ import annotations

import json

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from perfkit.engine.guard.dfa import compile_dfa
from perfkit.engine.guard.grammar import TOKEN_TEXTS, Vocabulary, validate
from perfkit.engine.guard.guard import Guard
from perfkit.engine.guard.mask import GuardMask
from perfkit.engine.sequence import Sequence

VOCAB = 512
DFA = compile_dfa(VOCAB)
V = DFA.vocab


def tokens(*texts: str) -> list[int]:
    return V.ids(texts)


CALL = tokens("{", '"name"', ":", '"get_weather"', ",", '"arguments"', ":", "{",
              '"city"', ":", '"', "paris", " ", '"', ",", '"days"', ":", "1", "0", "}", "}")


def test_vocabulary_is_the_top_of_the_vocab():
    assert V.base == VOCAB - len(TOKEN_TEXTS) and V.num_tokens == len(TOKEN_TEXTS)
    assert V.id("{") == V.base and V.ids(TOKEN_TEXTS)[-1] == VOCAB - 1
    assert V.detokenize(CALL) == '{"name":"get_weather","arguments":{"city":"paris ","days":10}}'
    assert V.detokenize([7]) == "<7>"
    assert Vocabulary(64).base == 64 - len(TOKEN_TEXTS)


@pytest.mark.parametrize("text", [
    '{"name":"search","arguments":{"query":"x"}}',
    '{"name":"get_weather","arguments":{"city":"a","unit":"celsius","days":0}}',
    '{"arguments":{"seconds":5},"name":"set_timer"}',
])
def test_validate_accepts(text):
    assert validate(text) is None


@pytest.mark.parametrize("text, needle", [
    ('{"name":"search","arguments":{"query":"x"}', "not JSON"),
    ('{"name":"fly","arguments":{}}', "unknown tool"),
    ('{"name":"search","arguments":{}}', "missing argument 'query'"),
    ('{"name":"search","arguments":{"query":"x","page":1}}', "unknown argument 'page'"),
    ('{"name":"search","arguments":{"query":"x","limit":true}}', "limit: expected integer"),
    ('{"name":"get_weather","arguments":{"city":"a","unit":"kelvin"}}', "unit: expected enum"),
    ('{"name":"search","arguments":{"query":""}}', "query: expected string"),
    ('{"name":"search","arguments":[],"x":1}', "exactly 'name' and 'arguments'"),
])
def test_validate_rejects(text, needle):
    err = validate(text)
    assert err is not None and needle in err


def test_dfa_accepts_a_valid_call_and_rejects_near_misses():
    assert DFA.walk(CALL) == DFA.accept
    assert DFA.walk(CALL[:-1]) not in (-1, DFA.accept)
    trailing_comma = CALL[:-2] + tokens(",", "}", "}")
    leading_zero = CALL[:17] + tokens("0", "1", "}", "}")
    skip_required = tokens("{", '"name"', ":", '"search"', ",", '"arguments"', ":", "{", "}")
    out_of_order = CALL[:8] + tokens('"days"', ":", "1", ",", '"city"')
    for bad in (trailing_comma, leading_zero, skip_required, out_of_order, [5]):
        assert DFA.walk(bad) == -1


def test_dfa_shape_and_distances():
    assert DFA.num_states < 100 and DFA.min_to_accept[DFA.start] == 13  # shortest: set_timer
    assert DFA.min_to_accept[DFA.accept] == 0 and max(DFA.next_state[DFA.accept]) == -1
    for s, row in enumerate(DFA.next_state):
        if s != DFA.accept:  # the distance is realised by some legal token
            assert DFA.min_to_accept[s] == 1 + min(DFA.min_to_accept[n] for n in row if n >= 0)


def random_walk(data, budget: int | None) -> list[int]:
    """Tokens chosen among those the guard allows (budget-aware when budget is set)."""
    state, out = DFA.start, []
    while state != DFA.accept:
        left = (budget - len(out)) if budget is not None else DFA.max_len + 1
        legal = [k for k, n in enumerate(DFA.next_state[state])
                 if n >= 0 and DFA.min_to_accept[n] < left]
        assert legal, f"stuck in state {state} with {left} tokens left"
        k = data.draw(st.sampled_from(legal))
        out.append(V.base + k)
        state = DFA.next_state[state][k]
    return out


@settings(max_examples=150, deadline=None)
@given(st.data(), st.integers(min_value=13, max_value=40))
def test_budget_aware_walks_accept_within_budget_and_validate(data, budget):
    out = random_walk(data, budget)
    assert len(out) <= min(budget, DFA.max_len)
    text = V.detokenize(out)
    assert validate(text) is None, text
    assert json.loads(text)["name"] in ("get_weather", "search", "set_timer")


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_unbounded_legal_walks_end_within_max_len(data):
    out = random_walk(data, None)
    assert len(out) <= DFA.max_len and validate(V.detokenize(out)) is None


def make_guard() -> Guard:
    return Guard(DFA, 1024, 0, 4)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, DFA.num_states - 1), st.integers(1, 60))
def test_bias_table_matches_the_dfa(state, budget):
    guard = make_guard()
    seq = Sequence(0, [1], 1, budget, tool_call=True, fsm_state=state)
    allowed = (GuardMask(guard, "cpu").bias[guard.key(seq)] == 0).tolist()
    assert allowed == [n >= 0 and DFA.min_to_accept[n] < budget for n in DFA.next_state[state]]
    assert allowed == guard.allowed(guard.key(seq))  # the torch-free rule, the same rows
    if True in allowed:  # what the null executor samples: the first token the mask keeps
        assert guard.first_legal(seq) == V.base + allowed.index(True)


def test_mask_touches_only_tool_call_rows():
    guard = make_guard()
    seqs = [Sequence(i, [1, 2], 2, 20, tool_call=i % 2 == 1) for i in range(4)]
    for s in seqs:
        guard.start(s)
    logits = torch.randn(4, VOCAB, generator=torch.Generator().manual_seed(0))
    before = logits.clone()
    GuardMask(guard, "cpu").apply(seqs, logits)
    assert torch.equal(logits[0], before[0]) and torch.equal(logits[2], before[2])
    for row in (1, 3):
        finite = torch.isfinite(logits[row]).nonzero().flatten().tolist()
        assert finite == [V.id("{")]  # the only legal first token
        assert logits[row, V.id("{")] == before[row, V.id("{")]
