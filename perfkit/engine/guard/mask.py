"""The guard's logits mask (tensor code): tool-call and structured-output rows keep only the
grammar tokens that can still complete a valid output within their budget. See
guard/guard.py for the rule; the bookkeeping there (keys, DFA walk) has no torch, this
module is what the model executor adds.

Seed tool calls (one fixed grammar): a precomputed table,
    bias  [num_states * num_budgets, K] float32 (the logits' dtype), on the logits' device
          bias[key, k] = 0 if grammar token k is allowed at key (Guard.allowed), else -inf
Structured output (a grammar per request, any number of states): per grammar in the step,
its rows R gather their next states and those states' min_to_accept,
    allowed [R, K] = min_to_accept[next_state[state]] < budget   (-1 -> INF: illegal)
so no table grows with the budget; the grammar's tensors are moved to the device once.
"""

from __future__ import annotations

import weakref

import numpy as np
import torch

from perfkit.engine.guard.dfa import INF
from perfkit.engine.guard.guard import Guard
from perfkit.engine.guard.structured import Grammar
from perfkit.engine.sequence import Sequence


class GuardMask:
    def __init__(self, guard: Guard, device: torch.device | str) -> None:
        self.guard = guard
        self.base = guard.base  # grammar token k is vocab id base + k (the top ids)
        self.bias = self._bias_table(guard).to(device)
        self.device = torch.device(device)
        # grammar -> (next_state [S, K] long, min_to_accept [S + 1] long, INF last: index -1)
        self._tables: weakref.WeakKeyDictionary[Grammar, tuple[torch.Tensor, torch.Tensor]] = \
            weakref.WeakKeyDictionary()

    @staticmethod
    def _bias_table(guard: Guard) -> torch.Tensor:
        """bias[state * num_budgets + b, k] = 0 if grammar token k is legal in `state` and
        the DFA can still accept in the b - 1 tokens after it, else -inf."""
        dfa, dist = guard.dfa, guard.dfa.min_to_accept
        # [num_states, K]: fewest tokens to accept after taking token k (INF if illegal)
        after = torch.tensor([[dist[n] if n >= 0 else INF for n in row]
                              for row in dfa.next_state])
        budgets = torch.arange(guard.num_budgets)
        allowed = after.unsqueeze(1) < budgets[None, :, None]  # [num_states, num_budgets, K]
        bias = torch.zeros(allowed.shape).masked_fill_(~allowed, float("-inf"))
        return bias.flatten(0, 1)

    @torch.inference_mode()
    def apply(self, seqs: list[Sequence], logits: torch.Tensor) -> None:
        """In place on logits [S, vocab], row i samples seqs[i]: tool-call and structured
        rows keep only tokens that can still complete a valid output within their budget."""
        groups: dict[Grammar, list[int]] = {}
        for i, s in enumerate(seqs):
            if s.grammar is not None:
                groups.setdefault(s.grammar, []).append(i)
        for grammar, rows in groups.items():
            self._apply_structured(grammar, rows, seqs, logits)
        self._apply_tool_calls(seqs, logits)

    def _apply_tool_calls(self, seqs: list[Sequence], logits: torch.Tensor) -> None:
        rows = [i for i, s in enumerate(seqs) if s.tool_call]
        if not rows:
            return
        keys = [self.guard.key(seqs[i]) for i in rows]
        dev = logits.device
        rows_t = torch.from_numpy(np.array(rows, np.int64)).to(dev)  # [R]; 5x cheaper than
        keys_t = torch.from_numpy(np.array(keys, np.int64)).to(dev)  # [R]   torch.tensor(list)
        logits.narrow(1, 0, self.base).index_fill_(0, rows_t, float("-inf"))
        logits.narrow(1, self.base, self.bias.shape[1]).index_add_(
            0, rows_t, self.bias.index_select(0, keys_t))

    def _device_tables(self, grammar: Grammar) -> tuple[torch.Tensor, torch.Tensor]:
        tables = self._tables.get(grammar)
        if tables is None:
            dfa = grammar.dfa
            dist = np.append(dfa.min_to_accept.astype(np.int64), INF)  # [S + 1]
            tables = (torch.from_numpy(dfa.next_state.astype(np.int64)).to(self.device),
                      torch.from_numpy(dist).to(self.device))
            self._tables[grammar] = tables
        return tables

    def _apply_structured(self, grammar: Grammar, rows: list[int], seqs: list[Sequence],
                          logits: torch.Tensor) -> None:
        table, dist = self._device_tables(grammar)
        first, width = grammar.first_id, grammar.num_tokens
        states = [seqs[i].fsm_state for i in rows]
        budgets = [self.guard.budget(seqs[i]) for i in rows]
        # tool_choice auto, first token: text stays open beside the grammar's tokens
        free = [i for i, r in enumerate(rows)
                if seqs[r].params.grammar_optional and seqs[r].num_output_tokens == 0]
        dev = logits.device
        rows_t = torch.from_numpy(np.array(rows, np.int64)).to(dev)
        allowed = dist[table[torch.from_numpy(np.array(states, np.int64)).to(dev)]] \
            < torch.from_numpy(np.array(budgets, np.int64)).to(dev).unsqueeze(1)  # [R, K]
        sub = logits.index_select(0, rows_t)  # [R, vocab]
        text = sub[:, :first]
        kept = text[free].clone() if free else None
        text.fill_(float("-inf"))
        if kept is not None:
            text[free] = kept
        sub[:, first:first + width].masked_fill_(~allowed, float("-inf"))
        logits.index_copy_(0, rows_t, sub)
