"""The guard: FSM-constrained decoding for tool calls, loop detection for everything else.

Where it runs in Engine.step: schedule -> forward -> **mask** -> sample -> append -> **check**.

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

import numpy as np
import torch

from perfkit.engine.guard.dfa import INF, ToolCallDFA
from perfkit.engine.guard.grammar import Vocabulary, validate
from perfkit.engine.sequence import Sequence

GUARD_REASONS = ("stop", "loop", "length")


@dataclass
class GuardCounts:
    """Integers, deterministic for profile + seed (the guard's time is EngineStats.guard_s)."""

    # finished requests by the reason the engine ended them: stop (a tool call accepted),
    # loop (loop detector), length (max_tokens or max_model_len: runaway output)
    ended: dict[str, int] = field(default_factory=lambda: dict.fromkeys(GUARD_REASONS, 0))
    tool_calls: int = 0  # tool-call requests that finished (cancelled ones are not counted)
    invalid_tool_calls: int = 0  # of those, outputs that fail validate(): 0 with the guard on


def count_finish(counts: GuardCounts, seq: Sequence, reason: str, vocab: Vocabulary) -> None:
    """Account one finished request (not for cancellations: the client left)."""
    if reason in counts.ended:
        counts.ended[reason] += 1
    if seq.tool_call:
        counts.tool_calls += 1
        if validate(vocab.detokenize(seq.token_ids[seq.num_prompt_tokens:])) is not None:
            counts.invalid_tool_calls += 1


class Guard:
    def __init__(self, dfa: ToolCallDFA, device: torch.device, max_model_len: int,
                 loop_ngram: int, loop_repeats: int) -> None:
        self.dfa = dfa
        self.base = dfa.vocab.base  # grammar token k is vocab id base + k (the top ids)
        self.max_model_len = max_model_len
        self.loop_ngram = loop_ngram  # longest cycle looked for; 0 = loop detection off
        self.loop_repeats = loop_repeats
        # a budget >= max_len allows every legal token: keys clamp the budget there
        self.num_budgets = dfa.max_len + 1
        # [num_states * num_budgets, K] float32, the dtype of the model's logits
        self.bias = self._bias_table(dfa).to(device)

    def _bias_table(self, dfa: ToolCallDFA) -> torch.Tensor:
        """bias[state * num_budgets + b, k] = 0 if grammar token k is legal in `state` and
        the DFA can still accept in the b - 1 tokens after it, else -inf."""
        dist = dfa.min_to_accept
        # [num_states, K]: fewest tokens to accept after taking token k (INF if illegal)
        after = torch.tensor([[dist[n] if n >= 0 else INF for n in row]
                              for row in dfa.next_state])
        budgets = torch.arange(self.num_budgets)
        allowed = after.unsqueeze(1) < budgets[None, :, None]  # [num_states, num_budgets, K]
        bias = torch.zeros(allowed.shape).masked_fill_(~allowed, float("-inf"))
        return bias.flatten(0, 1)

    # -- per request --------------------------------------------------------------------
    def budget(self, seq: Sequence) -> int:
        """Tokens the request may still generate."""
        return min(seq.max_tokens - seq.num_output_tokens, self.max_model_len - seq.num_tokens)

    def admit(self, seq: Sequence) -> str | None:
        """Why a tool call can never complete within its budget, else None."""
        if seq.tool_call and self.budget(seq) < self.dfa.min_to_accept[self.dfa.start]:
            return "tool_call_budget"
        return None

    def start(self, seq: Sequence) -> None:
        seq.fsm_state = self.dfa.start

    # -- per step -----------------------------------------------------------------------
    def key(self, seq: Sequence) -> int:
        """Row of the bias table for a tool call's next token."""
        n = len(seq.token_ids)  # budget() inlined: this runs per tool call per step
        budget = min(seq.max_tokens + seq.num_prompt_tokens - n, self.max_model_len - n,
                     self.num_budgets - 1)
        return seq.fsm_state * self.num_budgets + budget

    @torch.inference_mode()
    def mask(self, seqs: list[Sequence], logits: torch.Tensor) -> None:
        """In place on logits [S, vocab]: tool-call rows keep only tokens that can still
        complete a valid call within their budget."""
        rows = [i for i, s in enumerate(seqs) if s.tool_call]
        if not rows:
            return
        keys = [self.key(seqs[i]) for i in rows]
        dev = logits.device
        rows_t = torch.from_numpy(np.array(rows, np.int64)).to(dev)  # [R]; 5x cheaper than
        keys_t = torch.from_numpy(np.array(keys, np.int64)).to(dev)  # [R]   torch.tensor(list)
        logits.narrow(1, 0, self.base).index_fill_(0, rows_t, float("-inf"))
        logits.narrow(1, self.base, self.bias.shape[1]).index_add_(
            0, rows_t, self.bias.index_select(0, keys_t))

    def check(self, seqs: list[Sequence]) -> list[str | None]:
        """After each sequence's newest token is appended: a finish reason or None."""
        return [self._advance(s) if s.tool_call else self._loop(s) for s in seqs]

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
