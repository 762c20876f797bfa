"""How one request picks its next token: `SamplingParams` (no torch; the sampler that applies
them to the logits is engine/layers/sampler.py).

The fields and their meaning are vLLM's (vllm.SamplingParams), so a request carries the
same values through perfkit serve as through a vLLM server. Greedy is the default: a
request that sets nothing samples exactly as the engine always did.

Random draws are counter-based: the noise for a request's k-th output token is a hash of
(its sampling key, k, token id), never the state of a shared generator. So a seeded
request gives the same tokens whatever it is batched with, on any device, after
preemption, and a fork (parallel sampling) needs only a new key, not a copied generator.
`sampling_key` derives the key: from the request's own seed, or, unseeded, from the
engine's seed and the request's id (deterministic for a profile and seed, different for
every request).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from perfkit.engine.guard.structured import Grammar

_M64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15  # 2^64 / golden ratio: splitmix64's increment


def mix64(x: int) -> int:
    """splitmix64's finalizer (Steele et al., 2014): a bijection on 64-bit integers whose
    outputs pass BigCrush for consecutive inputs."""
    x = (x + _GOLDEN) & _M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _M64
    return x ^ (x >> 31)


def sampling_key(seed: int, stream: int = 0) -> int:
    """The 64-bit key of one sampled sequence: `seed` (any integer, taken mod 2^64) and a
    `stream` that tells apart sequences sharing a seed (0 for a request's own seed; the
    engine's unseeded requests use 1 + their id, parallel samples their index)."""
    return mix64(mix64(seed & _M64) ^ (stream & _M64))


@dataclass(frozen=True)
class SamplingParams:
    """One request's sampling, applied in vLLM's order: logit_bias -> penalties -> (greedy:
    argmax) -> temperature -> min_p -> top_k / top_p -> a draw from what is left."""

    # 0: greedy (argmax after bias and penalties); > 0 divides the logits before the draw
    temperature: float = 0.0
    top_k: int = 0  # keep the k largest logits (ties at the k-th kept); 0 or -1: off
    top_p: float = 1.0  # keep the smallest set of top tokens whose probability reaches p
    min_p: float = 0.0  # drop tokens whose probability is below min_p * the largest one
    seed: int | None = None  # None: a key from the engine's seed and the request's id
    presence_penalty: float = 0.0  # subtracted once from every token already in the output
    frequency_penalty: float = 0.0  # subtracted per occurrence of the token in the output
    # > 1 discourages tokens of the prompt or output: a positive logit is divided by it,
    # a negative one multiplied (CTRL, Keskar et al. 2019, as vLLM applies it); 1: off
    repetition_penalty: float = 1.0
    logit_bias: tuple[tuple[int, float], ...] = ()  # (token id, added to its logit), sorted
    # -- stop conditions (checked after each token, vLLM's order: length, then these) --
    stop: tuple[str, ...] = ()  # stop strings: the output is cut where one begins
    include_stop_str_in_output: bool = False  # keep the stop string (or stop token's text)
    stop_token_ids: tuple[int, ...] = ()  # the output ends at any of these tokens
    eos_token_id: int | None = None  # the model's end of sequence; None: it has none
    ignore_eos: bool = False  # do not stop at eos_token_id
    min_tokens: int = 0  # stop tokens and stop strings take effect only after this many
    # -- what comes back beside the tokens --
    logprobs: int | None = None  # per output token: its logprob and the top N; None: off
    prompt_logprobs: int | None = None  # the same for every prompt token but the first
    output_text: bool = False  # render the output's text (stop strings imply it)
    # -- structured output (engine/guard/structured.py) --
    grammar: Grammar | None = None  # the output must be a string of this grammar
    grammar_optional: bool = False  # the first token may leave it for text (tool_choice auto)

    def __post_init__(self) -> None:
        problem = self.problem()
        if problem is not None:
            raise ValueError(f"SamplingParams: {problem}")

    def problem(self) -> str | None:
        """The first field outside vLLM's ranges, with why; None when all are valid."""
        numbers = (self.temperature, self.top_p, self.min_p, self.presence_penalty,
                   self.frequency_penalty, self.repetition_penalty,
                   *(b for _, b in self.logit_bias))
        if not all(math.isfinite(x) for x in numbers):
            return "every number must be finite"
        checks = (
            (self.temperature >= 0, f"temperature must be >= 0, got {self.temperature}"),
            (self.top_k >= -1, f"top_k must be -1, 0 (off) or >= 1, got {self.top_k}"),
            (0 < self.top_p <= 1, f"top_p must be in (0, 1], got {self.top_p}"),
            (0 <= self.min_p <= 1, f"min_p must be in [0, 1], got {self.min_p}"),
            (-2 <= self.presence_penalty <= 2, "presence_penalty must be in [-2, 2]"),
            (-2 <= self.frequency_penalty <= 2, "frequency_penalty must be in [-2, 2]"),
            (self.repetition_penalty > 0, "repetition_penalty must be > 0"),
            (self.min_tokens >= 0, f"min_tokens must be >= 0, got {self.min_tokens}"),
            (all(self.stop), "stop strings must not be empty"),
            ((self.logprobs or 0) >= 0 and (self.prompt_logprobs or 0) >= 0,
             "logprobs and prompt_logprobs must be >= 0"),
        )
        return next((why for ok, why in checks if not ok), None)

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    @property
    def uses_top_k(self) -> bool:
        return self.top_k > 0

    @property
    def has_penalties(self) -> bool:
        return (self.presence_penalty != 0 or self.frequency_penalty != 0
                or self.repetition_penalty != 1)

    @property
    def plain_greedy(self) -> bool:
        """Argmax of the raw logits: nothing to apply (the sampler's fast path), once
        min_tokens no longer masks stop tokens."""
        return self.greedy and not self.has_penalties and not self.logit_bias

    @functools.cached_property
    def stop_ids(self) -> frozenset[int]:
        """Tokens that end the output (after min_tokens): stop_token_ids and EOS."""
        eos = () if self.ignore_eos or self.eos_token_id is None else (self.eos_token_id,)
        return frozenset((*self.stop_token_ids, *eos))

    @property
    def detokenize(self) -> bool:
        return self.output_text or bool(self.stop)


GREEDY = SamplingParams()
RANDOM = SamplingParams(temperature=1.0)  # profile engine.sampling = "random"
