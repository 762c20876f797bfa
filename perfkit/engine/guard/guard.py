"""The guard: FSM-constrained decoding for tool calls and structured output, loop detection
for everything else.

Two kinds of constrained requests: the seed's tool calls (`tool_call`, the fixed grammar of
grammar.py / dfa.py, below) and structured output (`params.grammar`, a request's own
grammar compiled from tools or a JSON schema: structured.py). Both follow the same budget
rule and end with "stop" when their DFA can take nothing more; structured output is
cyclic (strings of any length), so the loop detector watches it like text.

Where it runs in Engine.step: schedule -> forward -> **mask** -> sample -> append -> **check**.
This module is the bookkeeping half (no torch): admission, the DFA walk, loop detection.
The mask over the logits is tensor code (guard/mask.py), applied by the model executor;
the null executor picks `first_legal` instead, the smallest token the mask would allow.

mask(seqs, logits)  logits [S, vocab], row i samples seqs[i]. Tool-call rows only (R of
    them), in place, four tensor ops and no loop over the vocabulary: one [2, R] index
    tensor (rows, keys), non-grammar ids -> -inf (index_fill_), and the grammar ids get
    `bias[key]` added (index_select + index_add_), where key = (state, clamped budget) and
    bias[key, k] = 0 if grammar token k can still complete a call within the budget, else
    -inf. Other rows are not touched, so their tokens do not depend on the guard.
check(seqs)  after the step's tokens are appended, one reason (or None) per sequence:
    - a tool call advances its DFA state (a host table lookup: the sampled token is
      already on the host) and ends with "stop" when the DFA accepts;
    - any other request runs the loop detector and ends with "loop" on a cycle.

Budget: before sampling, `remaining = min(max_tokens - output, max_model_len - tokens)`.
A token is allowed only if the DFA can still accept in the remaining - 1 tokens after it,
so a tool call never runs out of budget mid-call and every finished call validates. A
tool call whose budget cannot hold the shortest call is rejected at admission
("tool_call_budget"). Tool calls are exempt from loop detection: their DFA is acyclic,
so they end within the grammar's longest call, and a repeat inside a value (`1111`) is
content, not a loop.

Loop: the last n * k output tokens are k copies of one n-gram, for some n in
[1, loop_ngram] (k = loop_repeats). Checked after every token, so the request ends at
the token that completes the k-th copy (it has streamed; nothing streamed is taken
back); the smallest such n names the cycle, and `seq.loop_start` is the output index
where its first copy begins: output[:loop_start] is what came before the loop. Cost
per token: one int compare per n (the newest token against the one n before); only on
a match is the window compared (W[:-n] == W[n:] <=> W is k copies of W[:n]).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from perfkit.engine.guard.dfa import ToolCallDFA
from perfkit.engine.guard.grammar import Vocabulary, validate
from perfkit.engine.guard.structured import Grammar
from perfkit.engine.sequence import Sequence

GUARD_REASONS = ("stop", "loop", "length")


@dataclass
class GuardTally:
    """The engine's running count of guard outcomes (result.GuardCounts is the level's
    frozen copy). Integers, deterministic for profile + seed (the guard's time is
    EngineStats.guard_s)."""

    # finished requests by the reason the engine ended them: stop (a tool call accepted),
    # loop (loop detector), length (max_tokens or max_model_len: runaway output)
    ended: dict[str, int] = field(default_factory=lambda: dict.fromkeys(GUARD_REASONS, 0))
    tool_calls: int = 0  # tool-call requests that finished (cancelled ones are not counted)
    invalid_tool_calls: int = 0  # of those, outputs that fail validate(): 0 with the guard on


def count_finish(counts: GuardTally, seq: Sequence, reason: str, vocab: Vocabulary) -> None:
    """Account one finished request (not for cancellations: the client left)."""
    if reason in counts.ended:
        counts.ended[reason] += 1
    if seq.tool_call:
        counts.tool_calls += 1
        if validate(vocab.detokenize(seq.token_ids[seq.num_prompt_tokens:])) is not None:
            counts.invalid_tool_calls += 1


class Guard:
    def __init__(self, dfa: ToolCallDFA, max_model_len: int, loop_ngram: int,
                 loop_repeats: int) -> None:
        self.dfa = dfa
        self.base = dfa.vocab.base  # grammar token k is vocab id base + k (the top ids)
        self.max_model_len = max_model_len
        self.loop_ngram = loop_ngram  # longest cycle looked for; 0 = loop detection off
        self.loop_repeats = loop_repeats
        # a budget >= max_len allows every legal token: keys clamp the budget there
        self.num_budgets = dfa.max_len + 1
        self._first_legal: dict[int, int] = {}  # key -> smallest allowed vocab id

    def allowed(self, key: int) -> list[bool]:
        """[K] for the bias table's row `key` = state * num_budgets + b: grammar token k is
        legal in `state` and the DFA can still accept in the b - 1 tokens after it."""
        state, budget = divmod(key, self.num_budgets)
        dist = self.dfa.min_to_accept
        return [n >= 0 and dist[n] < budget for n in self.dfa.next_state[state]]

    # -- per request --------------------------------------------------------------------
    def budget(self, seq: Sequence) -> int:
        """Tokens the request may still generate."""
        return min(seq.max_tokens - seq.num_output_tokens, self.max_model_len - seq.num_tokens)

    def admit(self, seq: Sequence) -> str | None:
        """Why a tool call or structured output can never complete within its budget."""
        if seq.tool_call and self.budget(seq) < self.dfa.min_to_accept[self.dfa.start]:
            return "tool_call_budget"
        grammar = seq.grammar  # optional (tool_choice auto): too short a budget leaves text
        if grammar is not None and not seq.params.grammar_optional \
                and self.budget(seq) < grammar.dfa.min_to_accept[seq.fsm_state]:
            return "structured_budget"
        return None

    def start(self, seq: Sequence) -> None:
        grammar = seq.params.grammar
        seq.grammar = grammar
        seq.fsm_state = self.dfa.start if grammar is None else grammar.dfa.start

    # -- per step -----------------------------------------------------------------------
    def key(self, seq: Sequence) -> int:
        """Row of the bias table for a tool call's next token."""
        n = len(seq.token_ids)  # budget() inlined: this runs per tool call per step
        budget = min(seq.max_tokens + seq.num_prompt_tokens - n, self.max_model_len - n,
                     self.num_budgets - 1)
        return seq.fsm_state * self.num_budgets + budget

    def first_legal(self, seq: Sequence) -> int:
        """The smallest vocab id the mask leaves finite for a tool call's next token (what
        the null executor samples); one per key, computed once."""
        key = self.key(seq)
        token = self._first_legal.get(key)
        if token is None:
            legal = self.allowed(key)
            if True not in legal:  # admission and the budget rule make this unreachable
                raise RuntimeError(f"tool call {seq.seq_id}: no legal token in DFA state "
                                   f"{seq.fsm_state}")
            token = self._first_legal[key] = self.base + legal.index(True)
        return token

    def first_legal_structured(self, seq: Sequence) -> int:
        """The smallest grammar token the mask leaves finite (the null executor's pick)."""
        grammar = seq.grammar
        assert grammar is not None
        dfa, budget = grammar.dfa, self.budget(seq)
        nxt = dfa.next_state[seq.fsm_state]
        legal = (nxt >= 0) & (dfa.min_to_accept[nxt] < budget)
        if not legal.any():  # admission and the budget rule make this unreachable
            raise RuntimeError(f"request {seq.seq_id}: no legal token in its grammar")
        return grammar.first_id + int(legal.argmax())

    def check(self, seqs: list[Sequence]) -> list[str | None]:
        """After each sequence's newest token is appended: a finish reason or None."""
        return [self._advance(s) if s.tool_call else
                self._advance_structured(s) if s.grammar is not None else self._loop(s)
                for s in seqs]

    def _advance_structured(self, seq: Sequence) -> str | None:
        grammar: Grammar = seq.grammar  # type: ignore[assignment]
        k = seq.token_ids[-1] - grammar.first_id
        if k < 0 and seq.params.grammar_optional and seq.num_output_tokens == 1:
            seq.grammar = None  # tool_choice auto: the model chose text
            return self._loop(seq)
        state = int(grammar.dfa.next_state[seq.fsm_state, k]) if k >= 0 else -1
        if state < 0:
            raise RuntimeError(f"request {seq.seq_id}: token {seq.token_ids[-1]} is illegal "
                               f"in its {grammar.name} grammar (the mask should forbid it)")
        seq.fsm_state = state
        return "stop" if grammar.dfa.final[state] else self._loop(seq)

    def _advance(self, seq: Sequence) -> str | None:
        k = seq.token_ids[-1] - self.base
        state = self.dfa.next_state[seq.fsm_state][k] if k >= 0 else -1
        if state < 0:
            raise RuntimeError(f"tool call {seq.seq_id}: token {seq.token_ids[-1]} is illegal "
                               f"in DFA state {seq.fsm_state} (the mask should forbid it)")
        seq.fsm_state = state
        return "stop" if state == self.dfa.accept else None

    def _loop(self, seq: Sequence) -> str | None:
        toks, k = seq.token_ids, self.loop_repeats
        out = len(toks) - seq.num_prompt_tokens
        last = toks[-1]
        for n in range(1, min(self.loop_ngram, out // k) + 1):  # windows inside the output
            if toks[-1 - n] == last and toks[-n * k:-n] == toks[-n * (k - 1):]:
                seq.loop_start = out - n * k
                return "loop"
        return None
