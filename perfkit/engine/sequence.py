"""A request inside the engine: its tokens, progress and KV blocks."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from perfkit.engine.blocks import BlockHash
from perfkit.engine.detokenizer import Detokenizer
from perfkit.engine.sampling_params import GREEDY, SamplingParams

if TYPE_CHECKING:
    from perfkit.engine.group import SequenceGroup
    from perfkit.engine.guard.structured import Grammar


@dataclass(frozen=True)
class TokenLogprobs:
    """One position's log-probabilities, from the logits after the guard's mask and before
    bias, penalties and temperature (vLLM's default, "raw_logprobs")."""

    token: int  # the token taken (sampled, or the prompt's)
    logprob: float
    rank: int  # 1 + the number of tokens more likely than it
    top: tuple[tuple[int, float], ...]  # the N most likely (id, logprob), most likely first


class SeqStatus(enum.Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


@dataclass(eq=False)
class Sequence:
    """There are no prefill/decode phases: `num_computed_tokens` moves toward
    `len(token_ids)`; when it gets there the step samples one more token."""

    seq_id: int
    token_ids: list[int]  # prompt + generated so far
    num_prompt_tokens: int
    max_tokens: int  # output tokens to generate
    priority: int = 0  # lower runs first
    arrival_order: int = 0  # FCFS tie-break, set by the scheduler
    tool_call: bool = False
    params: SamplingParams = GREEDY  # how the next token is picked (engine/layers/sampler.py)
    sample_key: int = 0  # the counter-based draw's key (sampling_params.sampling_key)
    detokenizer: Detokenizer | None = None  # output text and stop strings (params.detokenize)
    # prompt_logprobs: index i holds prompt token i's logprobs (None at 0: nothing before
    # it); the prefix cache is skipped, so every position is computed once at least
    prompt_logprobs: list[TokenLogprobs | None] | None = None
    stop_reason: str | int | None = None  # the stop string or stop token that ended it
    status: SeqStatus = SeqStatus.WAITING
    num_computed_tokens: int = 0  # tokens whose K/V are in the cache
    block_ids: list[int] = field(default_factory=list)  # block table, logical order
    block_hashes: list[BlockHash] = field(default_factory=list)  # full blocks of token_ids
    num_hashed_blocks: int = 0  # leading blocks already registered in the prefix cache
    num_cached_tokens: int = 0  # prefix-cache hit at the first admission
    num_preemptions: int = 0
    finish_reason: str | None = None
    first_scheduled_s: float | None = None  # perfkit.clock of the first admission (queue end)
    # guard state (engine/guard.py); kept across preemption: generated tokens are never redone
    fsm_state: int = 0  # tool calls, structured output: DFA state after the output so far
    grammar: Grammar | None = None  # structured output still constrained (params.grammar)
    loop_start: int | None = None  # finish "loop": output index where the repeated cycle starts
    # several outputs of one request (engine/group.py): n samples or W beams; None: one
    group: SequenceGroup | None = None
    index: int = 0  # the output's place in its group: sample index, or beam rank
    cum_logprob: float = 0.0  # beam search: the log-probability of the output so far

    @property
    def head(self) -> Sequence:
        """The request's sequence (what add_request returned): itself, or its group's."""
        return self if self.group is None else self.group.head

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def num_output_tokens(self) -> int:
        return len(self.token_ids) - self.num_prompt_tokens

    @property
    def num_uncomputed(self) -> int:
        return len(self.token_ids) - self.num_computed_tokens
