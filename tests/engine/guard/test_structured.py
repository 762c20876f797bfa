"""Structured output: JSON Schema -> token DFA -> the guard's mask. Every walk the mask
allows ends in JSON that validates (jsonschema, independent of the compiler); integer
ranges are exact; what cannot be promised is refused with its path; in the engine, random
sampling at temperature 1 gives valid output within the token budget."""

from __future__ import annotations

import json
import random

import jsonschema
import pytest

from perfkit.config.profile import Overrides, load_profile
from perfkit.engine.engine import Engine
from perfkit.engine.executor import null_executor
from perfkit.engine.guard.automaton import token_dfa
from perfkit.engine.guard.json_schema import SchemaError, schema_pattern
from perfkit.engine.guard.json_syntax import int_range
from perfkit.engine.guard.structured import STRUCTURED_TEXTS, compile_grammar
from perfkit.engine.sampling_params import SamplingParams
from perfkit.workload import RequestSpec

WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "minLength": 1, "maxLength": 12},
        "unit": {"enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 14},
        "hourly": {"type": "boolean"},
    },
    "required": ["city"],
    "additionalProperties": False,
}
SCHEMAS = [
    WEATHER,
    {"type": "object"},  # json_object
    {},
    {"type": "array", "items": {"type": "number"}, "minItems": 1, "maxItems": 3},
    {"type": ["string", "null"], "maxLength": 4},
    {"anyOf": [{"type": "integer", "exclusiveMinimum": -3, "maximum": 250}, {"const": "x"}]},
    {"$defs": {"pt": {"type": "object", "properties": {"x": {"type": "number"}},
                      "required": ["x"]}},
     "type": "object", "properties": {"a": {"$ref": "#/$defs/pt"},
                                      "b": {"type": "array", "items": {"$ref": "#/$defs/pt"}}},
     "required": ["b"]},
    {"oneOf": [{"type": "string"}, {"type": "integer"}]},
    {"type": "object", "properties": {"p": {}, "q": {"type": "object", "properties": {
        "r": {"type": "string", "format": "date", "description": "ignored"}}}},
     "required": ["q"]},
]


def walk(dfa, rng: random.Random, budget: int) -> str:
    """A random walk the mask allows, ending where the guard ends it."""
    state, out = dfa.start, ""
    while not dfa.final[state] and budget > 0:
        nxt = dfa.next_state[state]
        legal = [k for k in range(len(nxt)) if nxt[k] >= 0 and dfa.min_to_accept[nxt[k]] < budget]
        assert legal, "the budget rule left no token"
        if dfa.accepting[state] and rng.random() < 0.15:
            break  # a scalar that could go on: the budget may end it here
        k = rng.choice(legal)
        out, state, budget = out + STRUCTURED_TEXTS[k], int(nxt[k]), budget - 1
    assert dfa.accepting[state]
    return out


@pytest.mark.parametrize("index", range(len(SCHEMAS)))
def test_every_allowed_walk_validates(index: int) -> None:
    schema = SCHEMAS[index]
    dfa = token_dfa(schema_pattern(schema), STRUCTURED_TEXTS)
    rng = random.Random(index)
    for _ in range(150):
        budget = int(dfa.min_to_accept[0]) + rng.randint(0, 40)
        text = walk(dfa, rng, budget)
        jsonschema.validate(json.loads(text), schema)


@pytest.mark.parametrize(("lo", "hi"), [(0, 0), (1, 14), (-3, 250), (-120, -7), (95, 1003),
                                        (None, 12), (-5, None)])
def test_integer_ranges_are_exact(lo: int | None, hi: int | None) -> None:
    dfa = token_dfa(int_range(lo, hi), STRUCTURED_TEXTS)
    lo_t, hi_t = (-1500 if lo is None else lo), (1500 if hi is None else hi)

    def accepts(text: str) -> bool:
        state = 0
        for c in text:
            state = int(dfa.next_state[state, STRUCTURED_TEXTS.index(c)])
            if state < 0:
                return False
        return bool(dfa.accepting[state])

    for n in range(-1500, 1501):
        assert accepts(str(n)) == (lo_t <= n <= hi_t or (lo is None and n < -1500)
                                   or (hi is None and n > 1500)), n
    assert not accepts("007") and not accepts("-0")


@pytest.mark.parametrize(("schema", "path"), [
    ({"type": "string", "pattern": "^a+$"}, "pattern"),
    ({"type": "object", "properties": {"x": {"type": "number", "multipleOf": 2}}},
     "properties.x.multipleOf"),
    ({"type": "array", "uniqueItems": True}, "uniqueItems"),
    ({"$defs": {"n": {"type": "object", "properties": {"k": {"$ref": "#/$defs/n"}}}},
      "$ref": "#/$defs/n"}, "$defs.n.properties.k.$ref"),
    ({"oneOf": [{"type": "integer"}, {"type": "number"}]}, "oneOf"),
    ({"type": "integer", "minimum": 5, "maximum": 2}, ""),
])
def test_what_cannot_be_promised_is_refused_with_its_path(schema, path: str) -> None:
    with pytest.raises(SchemaError) as err:
        schema_pattern(schema)
    assert err.value.path == path


def engine(*sets: str, executor=None) -> Engine:
    prof = load_profile("default", Overrides(sets=("engine.cpu_threads=1",
                                                   'engine.device="cpu"', *sets)))
    return Engine(prof, executor=executor)


def test_random_sampling_in_the_engine_always_validates() -> None:
    grammar = compile_grammar(schema_pattern(WEATHER), 512, "json_schema")
    eng = engine("engine.guard_loop_ngram=0")
    seqs = [eng.add_request(RequestSpec(i, (5 + i, 9, 13), 48),
                            SamplingParams(temperature=1.0, grammar=grammar,
                                           output_text=True))[0] for i in range(16)]
    while eng.has_work:
        eng.step()
    for s in seqs:
        assert s.detokenizer is not None
        jsonschema.validate(json.loads(s.detokenizer.text), WEATHER)
        assert s.num_output_tokens <= 48
    assert {s.finish_reason for s in seqs} == {"stop"}
    assert len({s.detokenizer.text for s in seqs if s.detokenizer}) > 8  # really sampled
    # too small a budget for the shortest valid object is refused at admission
    _, reason = eng.add_request(RequestSpec(99, (5,), 3), SamplingParams(grammar=grammar))
    assert reason == "structured_budget"


def test_auto_lets_the_first_token_choose_text_and_null_executor_follows_the_grammar() -> None:
    grammar = compile_grammar(schema_pattern(WEATHER), 512, "json_schema")
    eng = engine()
    seq, _ = eng.add_request(RequestSpec(0, (5, 9), 12),
                             SamplingParams(grammar=grammar, grammar_optional=True,
                                            output_text=True))
    while eng.has_work:
        eng.step()
    assert seq.grammar is None and seq.finish_reason == "length"  # greedy chose a text token
    assert seq.detokenizer is not None and seq.detokenizer.text.startswith(" t")
    null = engine(executor=null_executor())
    seq, _ = null.add_request(RequestSpec(0, (5,), 40), SamplingParams(grammar=grammar,
                                                                       output_text=True))
    while null.has_work:
        null.step()
    assert seq.finish_reason == "stop" and seq.detokenizer is not None
    jsonschema.validate(json.loads(seq.detokenizer.text), WEATHER)


def test_the_guard_off_refuses_structured_output() -> None:
    grammar = compile_grammar(schema_pattern({"type": "boolean"}), 512, "json_schema")
    _, reason = engine("engine.guard=false").add_request(
        RequestSpec(0, (5,), 8), SamplingParams(grammar=grammar))
    assert reason == "guard_off"


def test_the_loop_detector_ends_degenerate_structured_output() -> None:
    grammar = compile_grammar(schema_pattern({"type": "object", "properties": {
        "note": {"type": "string"}}, "required": ["note"]}), 512, "json_schema")
    eng = engine("engine.guard_loop_ngram=4", "engine.guard_loop_repeats=4")
    a = grammar.first_id + STRUCTURED_TEXTS.index("a")
    quote = grammar.first_id + STRUCTURED_TEXTS.index('"')
    real = eng.executor.model.forward  # type: ignore[attr-defined]

    def forward(*args, **kw):  # the model opens a string, then keeps choosing "a" in it
        logits = real(*args, **kw).clone()
        logits[:, a] += 100.0
        logits[:, quote] += 50.0
        return logits

    eng.executor.model.forward = forward  # type: ignore[attr-defined]
    seq, _ = eng.add_request(RequestSpec(0, (5, 6), 64),
                             SamplingParams(grammar=grammar, output_text=True))
    while eng.has_work:
        eng.step()
    assert seq.detokenizer is not None, seq
    assert seq.finish_reason == "loop", seq.detokenizer.text
    assert seq.detokenizer.text.endswith('"aaaa') and seq.num_output_tokens < 64
