"""The guard's logits mask (tensor code): tool-call rows keep only the grammar tokens that
can still complete a valid call within their budget. See guard/guard.py for the rule; the
bookkeeping there (keys, DFA walk) has no torch, this module is what the model executor adds.

    bias  [num_states * num_budgets, K] float32 (the logits' dtype), on the logits' device
          bias[key, k] = 0 if grammar token k is allowed at key (Guard.allowed), else -inf
"""

from __future__ import annotations

import numpy as np
import torch

from perfkit.engine.guard.dfa import INF
from perfkit.engine.guard.guard import Guard
from perfkit.engine.sequence import Sequence


class GuardMask:
    def __init__(self, guard: Guard, device: torch.device | str) -> None:
        self.guard = guard
        self.base = guard.base  # grammar token k is vocab id base + k (the top ids)
        self.bias = self._bias_table(guard).to(device)

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
        """In place on logits [S, vocab], row i samples seqs[i]: tool-call rows keep only
        tokens that can still complete a valid call within their budget."""
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
