"""Executors: what runs one scheduled step and returns the sampled tokens.

Engine.step() is the same loop whatever the executor:

    schedule -> executor.execute(out, sampling) -> commit -> append -> free finished

The executor sees the step before commit: scheduled sequence `item.seq` computes tokens
token_ids[num_computed_tokens : num_computed_tokens + item.num_new_tokens] into its block
table. It must make the copy-on-write copies in `out.copies` before anything reads those
blocks, and return exactly one token per sampling sequence, in order.

- ModelExecutor (engine/layers/model_executor.py, the default): the synthetic model over the
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

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from perfkit.config.schema import Profile
from perfkit.engine.group import row_outputs
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
_OUT_STRIDE = 15485863  # a group's output i, prime: the outputs' tokens differ
TOP1_MEAN = 0.5  # the null executor's beam candidates: mean top-1 probability (see below)


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
    # rows of a request with several outputs (engine/group.py row_outputs): row -> its
    # (token, log-probability) outputs: a group's first n samples, a beam row's best W
    # candidates, best first, or an output's one token. token_ids[row] is multi[row][0]'s
    # token; a row left out has log-probability 0 (the null executor's samples).
    multi: dict[int, list[tuple[int, float]]] = field(default_factory=dict)


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


def null_executor(token: int | None = None, top1_mean: float = TOP1_MEAN) -> ExecutorFactory:
    """The null executor; `token`: one fixed token for every non-tool-call sequence;
    `top1_mean`: its beam candidates' mean top-1 probability (NullExecutor)."""

    def make(profile: Profile, spec: KVSpec, guard: Guard | None) -> Executor:
        return NullExecutor(profile, spec, guard, token, top1_mean)

    return make


def _unit(a: int, b: int) -> float:
    """A uniform number in (0, 1) from two ints (splitmix64: stable across processes)."""
    z = (a * 0x9E3779B97F4A7C15 + b * 0xBF58476D1CE4E5B9 + 0x94D049BB133111EB) & (2**64 - 1)
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & (2**64 - 1)
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & (2**64 - 1)
    return ((z ^ (z >> 31)) + 0.5) / 2**64


def synthetic_logprobs(u: float, width: int, vocab_size: int, top1_mean: float) -> list[float]:
    """The `width` best log-probabilities of a synthetic next-token distribution: the top
    token's probability p1 = u ** (1 / a), a Beta(a, 1) draw of mean top1_mean
    (a = top1_mean / (1 - top1_mean): 0.5 is uniform), and the rest of the mass Zipf(1)
    over ranks 2 .. vocab_size (as word frequencies fall). What beam search keeps or drops
    depends on these; a real model's come from its logits."""
    p1 = u ** ((1 - top1_mean) / top1_mean)
    rest = math.log(max(1.0 - p1, 1e-300)) - math.log(
        math.log(vocab_size) + 0.5772156649 - 1)  # sum of 1/k for k in 2 .. V
    return [math.log(max(p1, 1e-300))] + [rest - math.log(k) for k in range(2, width + 1)]


class NullExecutor:
    """No model, no tensors: the next token is `token` when given, else a cheap function
    of (seq_id, position) (see _POS_STRIDE). With the guard, a tool call takes the smallest
    token the guard's mask would allow (Guard.first_legal), so every call validates."""

    device = "none"

    def __init__(self, profile: Profile, spec: KVSpec, guard: Guard | None,
                 token: int | None = None, top1_mean: float = TOP1_MEAN) -> None:
        vocab_size = profile.model.vocab_size
        if token is not None and not 0 <= token < vocab_size:
            raise ValueError(f"NullExecutor: token {token} outside the vocabulary "
                             f"[0, {vocab_size})")
        if not 0 < top1_mean < 1:
            raise ValueError(f"NullExecutor: top1_mean must be in (0, 1), got {top1_mean}")
        self.spec = spec
        self.guard = guard
        self.token = token
        self.top1_mean = top1_mean
        self.vocab_size = vocab_size
        self._span = vocab_size - 1  # tokens 1 .. vocab_size - 1 (0 is padding)

    def execute(self, out: SchedulerOutput, sampling: list[Sequence]) -> ExecutorOutput:
        guard, token = self.guard, self.token
        if token is not None and guard is None:
            tokens = [token] * len(sampling)
        else:
            tokens = []
            for seq in sampling:
                if guard is not None and seq.tool_call:
                    tokens.append(guard.first_legal(seq))
                elif guard is not None and seq.grammar is not None:
                    tokens.append(guard.first_legal_structured(seq))
                else:
                    tokens.append(self._token(seq, 0))
        result = ExecutorOutput(tokens)
        for row, seq in enumerate(sampling):
            kind, width = row_outputs(seq)
            if kind != "token":
                result.multi[row] = self._outputs(seq, kind, width, tokens[row])
                tokens[row] = result.multi[row][0][0]
        return result

    def _token(self, seq: Sequence, output: int) -> int:
        if self.token is not None:
            return self.token
        key = seq.seq_id * _SEQ_STRIDE + output * _OUT_STRIDE + seq.num_tokens * _POS_STRIDE
        return 1 + key % self._span

    def _outputs(self, seq: Sequence, kind: str, width: int, first: int
                 ) -> list[tuple[int, float]]:
        """A group row's outputs: n samples, or W beam candidates whose log-probabilities
        come from `synthetic_logprobs`, drawn per (sequence, position)."""
        tokens = [first] + [self._token(seq, i) for i in range(1, width)]
        if kind == "samples":
            return [(t, 0.0) for t in tokens]
        u = _unit(seq.seq_id, seq.num_tokens)
        return list(zip(tokens, synthetic_logprobs(u, width, self.vocab_size,
                                                    self.top1_mean), strict=True))

    def reset(self) -> None:
        pass  # stateless
