"""Executors: what runs one scheduled step and returns the sampled tokens.

Engine.step() is the same loop whatever the executor:

    schedule -> executor.execute(out, sampling) -> commit -> append -> free finished

The executor sees the step before commit: scheduled sequence `item.seq` computes tokens
token_ids[num_computed_tokens : num_computed_tokens + item.num_new_tokens] into its block
table. It must make the copy-on-write copies in `out.copies` before anything reads those
blocks, and return exactly one token per sampling sequence, in order.

- ModelExecutor (engine/layers/executor.py, the default): the synthetic model over the
  paged KV cache, the guard's logits mask, the batched sampler (engine/layers/sampler.py:
  each sequence's SamplingParams, greedy by default). The only executor
  that imports torch, and it does so only when it is built.
- NullExecutor (here): bookkeeping only, no tensors, deterministic tokens. Scheduling,
  block counts, preemptions and the KV timeline are those of the model engine whenever
  they do not depend on token values: they do only through the guard (a tool call stops
  when its DFA accepts, a loop ends a request) and through prefix hits on generated
  tokens, which no other request shares.

Engine(profile, executor=...) takes a factory, (profile, spec, guard) -> executor: the
engine builds the KV spec and the guard first, and the executor is built against them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from perfkit.config.schema import Profile
from perfkit.engine.guard.guard import Guard
from perfkit.engine.kv_spec import KVSpec
from perfkit.engine.scheduler import SchedulerOutput
from perfkit.engine.sequence import Sequence, TokenLogprobs

if TYPE_CHECKING:
    import torch

# NullExecutor tokens: 1 + (seq_id * _SEQ_STRIDE + position * _POS_STRIDE) % (vocab_size - 1).
# _POS_STRIDE is prime and larger than any preset vocabulary, so a sequence's tokens cycle
# with period vocab_size - 1: loop detection (n-grams of at most guard_loop_ngram tokens)
# never fires on them while guard_loop_ngram < vocab_size - 1.
_SEQ_STRIDE, _POS_STRIDE = 7919, 104729


@dataclass
class ExecutorOutput:
    token_ids: list[int]  # [len(sampling)]: token_ids[i] is sampling[i]'s next token
    mask_s: float = 0.0  # seconds in the guard's logits mask (a timing, not a count)
    sample_s: float = 0.0  # seconds in the sampler, logprobs included (a timing)
    # [len(sampling)] when any sequence asked for logprobs (None for those that did not)
    logprobs: list[TokenLogprobs | None] | None = None
    # prompt positions computed this step, for sequences that asked for prompt_logprobs:
    # (sequence, its prompt positions' logprobs in order, from the first not yet recorded)
    prompt_logprobs: list[tuple[Sequence, list[TokenLogprobs]]] = field(default_factory=list)


class Executor(Protocol):
    @property
    def device(self) -> str | torch.device:
        """Where the step's tensors live; "none" when there are none."""
        ...

    def execute(self, out: SchedulerOutput, sampling: list[Sequence]) -> ExecutorOutput:
        """Run the step `out` (before commit); `sampling` are the sequences of
        out.scheduled with `samples` set, in order."""
        ...

    def reset(self) -> None:
        """Back to the start state (sampling seed); weights and KV tensors are kept."""
        ...


ExecutorFactory = Callable[[Profile, KVSpec, Guard | None], Executor]


def null_executor(token: int | None = None) -> ExecutorFactory:
    """The null executor; `token`: one fixed token for every non-tool-call sequence."""

    def make(profile: Profile, spec: KVSpec, guard: Guard | None) -> Executor:
        return NullExecutor(profile, spec, guard, token)

    return make


class NullExecutor:
    """No model, no tensors: the next token is `token` when given, else a cheap function
    of (seq_id, position) (see _POS_STRIDE). With the guard, a tool call takes the smallest
    token the guard's mask would allow (Guard.first_legal), so every call validates."""

    device = "none"

    def __init__(self, profile: Profile, spec: KVSpec, guard: Guard | None,
                 token: int | None = None) -> None:
        vocab_size = profile.model.vocab_size
        if token is not None and not 0 <= token < vocab_size:
            raise ValueError(f"NullExecutor: token {token} outside the vocabulary "
                             f"[0, {vocab_size})")
        self.spec = spec
        self.guard = guard
        self.token = token
        self._span = vocab_size - 1  # tokens 1 .. vocab_size - 1 (0 is padding)

    def execute(self, out: SchedulerOutput, sampling: list[Sequence]) -> ExecutorOutput:
        guard, token, span = self.guard, self.token, self._span
        if token is not None and guard is None:
            return ExecutorOutput([token] * len(sampling))
        tokens = []
        for seq in sampling:
            if guard is not None and seq.tool_call:
                tokens.append(guard.first_legal(seq))
            elif guard is not None and seq.grammar is not None:
                tokens.append(guard.first_legal_structured(seq))
            elif token is not None:
                tokens.append(token)
            else:
                tokens.append(1 + (seq.seq_id * _SEQ_STRIDE + seq.num_tokens * _POS_STRIDE) % span)
        return ExecutorOutput(tokens)

    def reset(self) -> None:
        pass  # stateless
