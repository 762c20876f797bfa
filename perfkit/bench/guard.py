"""Microbenchmark: the guard's cost per decode step, guard on vs off.

A batch of BATCH decoding sequences, half of them tool calls (the seed's grammar), or
half of them structured output (tool calls compiled from a JSON Schema: the grammar
tool_choice "required" builds), over the profile's vocabulary. One step is what the
engine does after the forward pass: fresh logits [BATCH, vocab] -> (guard mask) ->
greedy sample -> append -> (guard check: DFA advance, loop detection) -> length check;
a finished sequence is replaced by a new one of the same kind. The model is left out
(it costs the same either way), so on - off is the guard's cost. On and off run in
alternating rounds; medians per step.
"""

from __future__ import annotations

import statistics
import time

import torch

from perfkit.config.schema import Profile
from perfkit.engine.guard.automaton import Lit, Repeat, Seq
from perfkit.engine.guard.dfa import compile_dfa
from perfkit.engine.guard.guard import Guard, GuardTally, count_finish
from perfkit.engine.guard.json_schema import schema_pattern
from perfkit.engine.guard.mask import GuardMask
from perfkit.engine.guard.structured import Grammar, compile_grammar, vocab_problem
from perfkit.engine.sampling_params import SamplingParams
from perfkit.engine.sequence import Sequence

BATCH = 16
MAX_TOKENS = 64
LOOP_NGRAM, LOOP_REPEATS = 8, 4
NUM_LOGITS = 32  # distinct random logit batches, cycled
# a tool as clients describe one: what tool_choice "required" compiles (serve/structured.py)
WEATHER = {"type": "object", "properties": {
    "city": {"type": "string", "maxLength": 12},
    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
    "days": {"type": "integer", "minimum": 1, "maximum": 14}}, "required": ["city"]}


def tools_grammar(vocab_size: int) -> Grammar:
    call = Seq((Lit('{"name":"get_weather","arguments":'), schema_pattern(WEATHER), Lit("}")))
    pattern = Seq((Lit("["), call, Repeat(Seq((Lit(","), call)), 0, None), Lit("]")))
    return compile_grammar(pattern, vocab_size, "tool calls")


class _Pipeline:
    """The post-forward half of Engine.step on BATCH sequences, with or without the guard."""

    def __init__(self, guard: Guard | None, vocab_size: int, device: torch.device,
                 grammar: Grammar | None = None) -> None:
        self.guard = guard
        self.grammar = grammar  # structured rows instead of the seed's tool calls
        self.mask = GuardMask(guard, device) if guard is not None else None
        self.vocab = compile_dfa(vocab_size).vocab
        gen = torch.Generator().manual_seed(0)
        self.pool = torch.randn(NUM_LOGITS, BATCH, vocab_size, generator=gen).to(device)
        self.logits = torch.empty(BATCH, vocab_size, device=device)
        self.counts = GuardTally()
        self.next_id = 0
        self.seqs = [self._new(i % 2 == 0) for i in range(BATCH)]

    def _new(self, tool_call: bool) -> Sequence:
        structured = tool_call and self.grammar is not None
        seq = Sequence(self.next_id, [1 + self.next_id % 7] * 8, 8, MAX_TOKENS,
                       tool_call=tool_call and not structured,
                       params=SamplingParams(grammar=self.grammar if structured else None))
        self.next_id += 1
        if self.guard is not None:
            self.guard.start(seq)
        return seq

    def step(self, i: int) -> None:
        self.logits.copy_(self.pool[i % NUM_LOGITS])
        if self.mask is not None:
            self.mask.apply(self.seqs, self.logits)
        tokens = self.logits.argmax(dim=-1).tolist()
        for seq, token in zip(self.seqs, tokens):
            seq.token_ids.append(token)
        reasons = self.guard.check(self.seqs) if self.guard else [None] * BATCH
        for j, (seq, reason) in enumerate(zip(self.seqs, reasons)):
            if reason is None and seq.num_output_tokens >= seq.max_tokens:
                reason = "length"
            if reason is not None:
                count_finish(self.counts, seq, reason, self.vocab)
                self.seqs[j] = self._new(seq.tool_call)

    def round(self, steps: int) -> float:
        """Seconds per step over `steps` steps."""
        start = time.perf_counter()
        for i in range(steps):
            self.step(i)
        if self.logits.device.type == "cuda":
            torch.cuda.synchronize(self.logits.device)
        return (time.perf_counter() - start) / steps


def bench_guard(profile: Profile, device: str = "cpu", steps: int = 200,
                rounds: int = 7) -> dict[str, float]:
    dev = torch.device(device)
    vocab_size = profile.model.vocab_size
    dfa = compile_dfa(vocab_size)
    guard = Guard(dfa, MAX_TOKENS + 64, LOOP_NGRAM, LOOP_REPEATS)
    on, off = _Pipeline(guard, vocab_size, dev), _Pipeline(None, vocab_size, dev)
    on.round(steps // 4), off.round(steps // 4)  # warm-up
    times: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(rounds):
        times[True].append(on.round(steps))
        times[False].append(off.round(steps))
    us_on, us_off = (statistics.median(times[k]) * 1e6 for k in (True, False))
    return _structured(profile, dev, steps, rounds) | {
        "us_per_step_on": us_on,
        "us_per_step_off": us_off,
        "overhead_us_per_step": us_on - us_off,
        "batch": BATCH,
        "tool_call_rows": BATCH // 2,
        "dfa_states": dfa.num_states,
        "grammar_tokens": dfa.vocab.num_tokens,
        "invalid_tool_calls": on.counts.invalid_tool_calls,
        "tool_calls": on.counts.tool_calls,
    }


def _structured(profile: Profile, dev: torch.device, steps: int,
                rounds: int) -> dict[str, float]:
    """The same on vs off, half the rows structured (tools compiled from WEATHER)."""
    vocab_size = profile.model.vocab_size
    if vocab_problem(vocab_size) is not None:
        return {}
    grammar = tools_grammar(vocab_size)
    guard = Guard(compile_dfa(vocab_size), MAX_TOKENS + 64, LOOP_NGRAM, LOOP_REPEATS)
    on = _Pipeline(guard, vocab_size, dev, grammar)
    off = _Pipeline(None, vocab_size, dev)
    on.round(steps // 4), off.round(steps // 4)
    t_on, t_off = [], []
    for _ in range(rounds):
        t_on.append(on.round(steps))
        t_off.append(off.round(steps))
    us_on, us_off = statistics.median(t_on) * 1e6, statistics.median(t_off) * 1e6
    return {"structured_us_per_step_on": us_on,
            "structured_overhead_us_per_step": us_on - us_off,
            "structured_states": grammar.dfa.num_states,
            "structured_tokens": grammar.num_tokens}
