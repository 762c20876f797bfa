"""Stop conditions and logprobs in the engine: stop strings cut the text where a plain
reference (the same request without them) says, streamed text never shows what a stop
string takes back, stop tokens, EOS, ignore_eos and min_tokens; logprobs agree with the
prompt logprobs of the same tokens."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfkit.config.profile import Overrides, load_profile
from perfkit.engine.detokenizer import Detokenizer
from perfkit.engine.engine import Engine, TokenEvent
from perfkit.engine.sampling_params import SamplingParams
from perfkit.workload import RequestSpec

PROMPT = tuple(range(5, 25))


def engine() -> Engine:
    return Engine(load_profile("default", Overrides(sets=("engine.cpu_threads=1",
                                                          'engine.device="cpu"'))))


def run(params: SamplingParams, max_tokens: int = 40, prompt: tuple[int, ...] = PROMPT
        ) -> tuple[list[TokenEvent], str]:
    eng = engine()
    seq, _ = eng.add_request(RequestSpec(0, prompt, max_tokens), params)
    events = []
    while eng.has_work:
        events += eng.step()
    assert seq.detokenizer is not None or not params.detokenize
    return events, seq.detokenizer.text if seq.detokenizer else ""


def reference(max_tokens: int = 40) -> tuple[list[int], str]:
    events, text = run(SamplingParams(output_text=True), max_tokens)
    return [e.token for e in events], text


# -- the detokenizer alone ------------------------------------------------------------------
def test_stop_string_across_tokens_is_cut_and_held_back() -> None:
    d = Detokenizer(("lo w",))
    streamed = []
    for piece in ("hel", "lo", " wor", "ld"):
        matched = d.append(piece)
        streamed.append(d.take(finished=matched is not None))
        if matched:
            break
    assert matched == "lo w" and d.text == "hel" and "".join(streamed) == "hel"
    assert streamed == ["", "he", "l"]  # 3 characters held back until the match decided


def test_include_stop_and_min_tokens() -> None:
    d = Detokenizer(("b",), include_stop=True)
    assert d.append("ab") == "b" and d.text == "ab"
    d = Detokenizer(("a",), min_tokens=2)
    assert d.append("a") is None and d.append("a") is None and d.append("xa") == "a"
    assert d.text == "aax"  # text of the first min_tokens tokens is never searched
    d = Detokenizer(("z",))
    assert d.append("q", stop_token=True) is None and d.text == ""  # a stop token's text


@given(pieces=st.lists(st.text("ab ", min_size=1, max_size=3), min_size=1, max_size=12),
       stops=st.lists(st.text("ab ", min_size=1, max_size=4), min_size=1, max_size=3))
def test_streamed_text_is_the_final_text_cut_at_the_first_stop(pieces, stops) -> None:
    d = Detokenizer(tuple(stops))
    streamed, whole = "", ""
    for piece in pieces:
        whole += piece
        matched = d.append(piece)
        streamed += d.take(finished=matched is not None)
        assert d.text.startswith(streamed)  # nothing shown is ever taken back
        if matched:
            break
    else:
        streamed += d.take(finished=True)
    assert streamed == d.text
    hits = [whole.find(s) for s in stops if s in whole]
    if matched is None:
        assert not hits and d.text == whole
    else:  # cut at a stop string that ends in the last token; none occurred earlier
        start = max(0, len(whole) - len(piece) - len(matched) + 1)
        assert d.text == whole[:whole.find(matched, start)]
        before = whole[:len(whole) - len(piece)]
        assert not any(s in before for s in stops)


# -- in the engine, against the plain reference ---------------------------------------------
@pytest.mark.parametrize("include", [False, True])
def test_stop_strings_cut_where_the_reference_says(include: bool) -> None:
    tokens, text = reference()
    stop = text[len(text) // 2: len(text) // 2 + 6]  # spans a token boundary
    events, cut = run(SamplingParams(stop=("zzz", stop), include_stop_str_in_output=include))
    at = text.find(stop)
    assert cut == (text[:at + len(stop)] if include else text[:at])
    assert "".join(e.text or "" for e in events) == cut
    last = events[-1]
    assert last.finished and last.seq.finish_reason == "stop" and last.seq.stop_reason == stop
    # the request ended at the token that completed the stop string
    assert [e.token for e in events] == tokens[:len(events)]
    assert len("".join(f" t{t}" for t in tokens[:len(events) - 1])) < at + len(stop)


def test_stop_token_ids_eos_ignore_eos_and_min_tokens() -> None:
    tokens, _ = reference()
    j = 6
    stop = tokens[j]
    first = tokens.index(stop)
    events, text = run(SamplingParams(stop_token_ids=(stop,), output_text=True))
    assert [e.token for e in events] == tokens[:first + 1]
    assert events[-1].seq.finish_reason == "stop" and events[-1].seq.stop_reason == stop
    assert not text.endswith(f" t{stop}")  # the stop token's text is not in the output
    eos, _ = run(SamplingParams(eos_token_id=stop))
    assert len(eos) == first + 1 and eos[-1].seq.stop_reason is None
    ignored, _ = run(SamplingParams(eos_token_id=stop, ignore_eos=True))
    assert [e.token for e in ignored] == tokens  # runs to max_tokens
    late, _ = run(SamplingParams(stop_token_ids=(stop,), min_tokens=first + 3))
    assert stop not in [e.token for e in late[:first + 3]]  # banned before min_tokens
    assert len(late) >= first + 3


def test_logprobs_match_the_prompt_logprobs_of_the_same_tokens() -> None:
    events, _ = run(SamplingParams(logprobs=5), max_tokens=8)
    for e in events:
        lp = e.logprobs
        assert lp is not None and lp.token == e.token and lp.rank == 1  # greedy
        assert len(lp.top) == 5 and lp.top[0] == (e.token, lp.logprob)
        assert [v for _, v in lp.top] == sorted((v for _, v in lp.top), reverse=True)
    out = [e.token for e in events]
    eng = engine()
    seq, _ = eng.add_request(RequestSpec(0, PROMPT + tuple(out), 1),
                             SamplingParams(prompt_logprobs=2))
    while eng.has_work:
        eng.step()
    plp = seq.prompt_logprobs
    assert plp is not None and len(plp) == len(PROMPT) + len(out) and plp[0] is None
    for i, e in enumerate(events):
        got = plp[len(PROMPT) + i]
        assert got is not None and got.token == e.token and len(got.top) == 2
        assert e.logprobs is not None
        assert got.logprob == pytest.approx(e.logprobs.logprob, abs=1e-4)
    assert all(p is not None and p.logprob <= 0 and p.rank >= 1 for p in plp[1:])
    total = sum(math.exp(v) for _, v in events[0].logprobs.top)  # type: ignore[union-attr]
    assert 0 < total <= 1 + 1e-5
