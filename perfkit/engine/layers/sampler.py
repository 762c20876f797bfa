"""The batched sampler: logits [S, vocab] -> one token per row, each row by its own
SamplingParams (engine/sampling_params.py), in tensor ops over the whole batch: no Python
loop over tokens or vocabulary (a loop over the S rows builds the step's parameter
tensors, as vLLM's input batch does).

Order (vLLM v1's Sampler): logit_bias -> presence / frequency / repetition penalties ->
greedy rows: argmax -> temperature -> min_p -> top_k / top_p -> the draw.

The draw is inverse-CDF sampling (what torch.multinomial does for one sample): the row's
first token whose cumulative probability exceeds u * total, u uniform in [0, 1). u is
counter-based: row_uniform(key, k) hashes the sequence's sampling key and its output
index k (splitmix64), so a row's token depends only on its own logits and parameters,
never on the rest of the batch or on a generator's state. One random number per row: no
per-token noise to generate (a per-(row, token) hash, as an exponential race needs, cost
10x more here).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from perfkit.engine.sampling_params import mix64
from perfkit.engine.sequence import Sequence, TokenLogprobs


def row_uniform(key: int, counter: int) -> float:
    """u in [0, 1) with 53 random bits for a sequence's `counter`-th output token."""
    return (mix64(key ^ counter) >> 11) * (1.0 / (1 << 53))


@dataclass(frozen=True)
class Penalties:
    """Rows with a penalty; every tensor is on the logits' device."""

    rows: torch.Tensor  # [R] long: rows of the batch
    seen_rows: torch.Tensor  # [N] long: row (0..R-1) of each prompt or output token
    seen_ids: torch.Tensor  # [N] long: the tokens themselves
    out_rows: torch.Tensor  # [M] long: row of each output token
    out_ids: torch.Tensor  # [M] long
    presence: torch.Tensor  # [R, 1] float32
    frequency: torch.Tensor  # [R, 1] float32
    repetition: torch.Tensor  # [R, 1] float32


@dataclass(frozen=True)
class SamplingBatch:
    """One step's parameters as tensors, row i for sampling[i]."""

    greedy: torch.Tensor  # [S] bool
    all_greedy: bool
    temperature: torch.Tensor  # [S, 1] float32; 1 on greedy rows (never divides by 0)
    min_p: torch.Tensor | None  # [S, 1] float32; None when no row uses it
    top_k: torch.Tensor | None  # [S] long, 0 on rows without it; None when no row has it
    max_top_k: int  # the largest k of the batch (0: none)
    top_p: torch.Tensor | None  # [S, 1] float32, 1 on rows without it; None when none has it
    uniform: torch.Tensor  # [S, 1] float64: row_uniform (unused on greedy rows)
    bias: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None  # (rows, ids, values)
    penalties: Penalties | None
    banned: tuple[torch.Tensor, torch.Tensor] | None  # (rows, ids) -> -inf: min_tokens


def _tensor(values: list[Any], dtype: type, device: torch.device) -> torch.Tensor:
    """A host list as a tensor: through numpy, 5-10x cheaper than torch.tensor(list)."""
    return torch.from_numpy(np.array(values, dtype=dtype)).to(device)


def build_batch(seqs: list[Sequence], vocab_size: int,
                device: torch.device) -> SamplingBatch | None:
    """The step's parameters; None when every row is plain greedy (argmax of the logits)."""
    params = [s.params for s in seqs]
    banned = [(i, t) for i, s in enumerate(seqs) if s.num_output_tokens < s.params.min_tokens
              for t in s.params.stop_ids]
    if not banned and all(p.plain_greedy for p in params):
        return None
    # [S, 3] float32 (temperature, min_p, top_p), [S] int64 top_k, [S, 1] float64 u
    floats = _tensor([(p.temperature or 1.0, p.min_p, p.top_p) for p in params],
                     np.float32, device)
    ks = [max(p.top_k, 0) for p in params]
    top_k = _tensor(ks, np.int64, device) if any(ks) else None
    uniform = _tensor([row_uniform(s.sample_key, s.num_output_tokens) for s in seqs],
                      np.float64, device)
    greedy = [p.greedy for p in params]
    return SamplingBatch(
        greedy=_tensor(greedy, np.bool_, device), all_greedy=all(greedy),
        temperature=floats[:, 0:1],
        min_p=floats[:, 1:2] if any(p.min_p for p in params) else None,
        top_k=top_k, max_top_k=max(ks),
        top_p=floats[:, 2:3] if any(p.top_p < 1 for p in params) else None,
        uniform=uniform.unsqueeze(1),
        bias=_bias(seqs, device), penalties=_penalties(seqs, device),
        banned=(_tensor([i for i, _ in banned], np.int64, device),
                _tensor([t for _, t in banned], np.int64, device)) if banned else None,
    )


def _bias(seqs: list[Sequence], device: torch.device
          ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
    entries = [(i, token, value) for i, s in enumerate(seqs)
               for token, value in s.params.logit_bias]
    if not entries:
        return None
    rows, ids, values = zip(*entries)
    return (_tensor(list(rows), np.int64, device), _tensor(list(ids), np.int64, device),
            _tensor(list(values), np.float32, device))


def _penalties(seqs: list[Sequence], device: torch.device) -> Penalties | None:
    picked = [(i, s) for i, s in enumerate(seqs) if s.params.has_penalties]
    if not picked:
        return None
    lens = np.array([s.num_tokens for _, s in picked])
    total = int(lens.sum())
    # every row's prompt + output as one array (copied in C: no loop over tokens here)
    seen = np.fromiter(itertools.chain.from_iterable(s.token_ids for _, s in picked),
                       np.int64, total)
    rows = np.repeat(np.arange(len(picked)), lens)
    position = np.arange(total) - np.repeat(np.cumsum(lens) - lens, lens)
    is_out = position >= np.repeat([s.num_prompt_tokens for _, s in picked], lens)
    per_row = _tensor([(s.params.presence_penalty, s.params.frequency_penalty,
                        s.params.repetition_penalty) for _, s in picked], np.float32, device)

    def moved(a: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(a).to(device)

    return Penalties(
        rows=_tensor([i for i, _ in picked], np.int64, device),
        seen_rows=moved(rows), seen_ids=moved(seen),
        out_rows=moved(rows[is_out]), out_ids=moved(seen[is_out]),
        presence=per_row[:, 0:1], frequency=per_row[:, 1:2], repetition=per_row[:, 2:3],
    )


def apply_penalties(logits: torch.Tensor, p: Penalties) -> None:
    """In place, vLLM's rule: repetition on tokens of the prompt or output (divide a
    positive logit, multiply a negative one), then frequency * count and presence * (count
    > 0) subtracted over the output's tokens."""
    sub = logits.index_select(0, p.rows)  # [R, V]
    counts = torch.zeros_like(sub)
    counts.index_put_((p.out_rows, p.out_ids), torch.ones_like(p.out_ids, dtype=sub.dtype),
                      accumulate=True)
    seen = torch.zeros_like(sub, dtype=torch.bool)
    seen[p.seen_rows, p.seen_ids] = True
    penalised = torch.where(sub > 0, sub / p.repetition, sub * p.repetition)
    sub = torch.where(seen, penalised, sub)
    sub -= p.frequency * counts + p.presence * (counts > 0)
    logits.index_copy_(0, p.rows, sub)


def apply_min_p(logits: torch.Tensor, min_p: torch.Tensor) -> None:
    probs = logits.softmax(dim=-1)
    logits.masked_fill_(probs < min_p * probs.amax(dim=-1, keepdim=True), float("-inf"))


def apply_top_k(logits: torch.Tensor, k: torch.Tensor, max_k: int) -> None:
    """In place: keep every logit >= the row's k-th largest (ties at the k-th kept); rows
    with k = 0 keep everything."""
    largest = logits.topk(min(max_k, logits.shape[1]), dim=-1).values  # [S, max k], desc.
    kth = largest.gather(1, (k - 1).clamp_(0, largest.shape[1] - 1).unsqueeze(1))
    kth.masked_fill_((k == 0).unsqueeze(1), float("-inf"))
    logits.masked_fill_(logits < kth, float("-inf"))


def apply_top_k_top_p(logits: torch.Tensor, k: torch.Tensor | None,
                      p: torch.Tensor) -> torch.Tensor:
    """vLLM's apply_top_k_top_p: one ascending sort serves both. Top-k keeps every logit
    >= the k-th largest; top-p drops the smallest tokens while their total probability
    stays <= 1 - p (the largest token always stays)."""
    ordered, index = logits.sort(dim=-1)
    if k is not None:  # k = 0 (off): the smallest logit is the threshold, nothing drops
        vocab = ordered.shape[1]
        kth = ordered.gather(1, (vocab - torch.where(k > 0, k, vocab)).clamp_(min=0)
                             .unsqueeze(1))
        ordered.masked_fill_(ordered < kth, float("-inf"))
    cum = ordered.softmax(dim=-1).cumsum_(dim=-1)
    drop = cum <= 1 - p
    drop[:, -1] = False
    ordered.masked_fill_(drop, float("-inf"))
    return torch.empty_like(logits).scatter_(1, index, ordered)


def apply_logit_adjustments(logits: torch.Tensor, batch: SamplingBatch) -> None:
    """In place: stop tokens banned before min_tokens, logit_bias, then the penalties (what
    greedy rows take the argmax of)."""
    if batch.banned is not None:
        logits.index_put_(batch.banned, torch.tensor(float("-inf"), device=logits.device))
    if batch.bias is not None:
        logits.index_put_(batch.bias[:2], batch.bias[2], accumulate=True)
    if batch.penalties is not None:
        apply_penalties(logits, batch.penalties)


def draw_probs(logits: torch.Tensor, batch: SamplingBatch) -> torch.Tensor:
    """The distribution each random row draws from, [S, V], from adjusted logits:
    temperature, min_p, top-k / top-p (in place on logits until the last step)."""
    logits.div_(batch.temperature)
    if batch.min_p is not None:
        apply_min_p(logits, batch.min_p)
    if batch.top_p is not None:  # a sort serves top-k too
        logits = apply_top_k_top_p(logits, batch.top_k, batch.top_p)
    elif batch.top_k is not None:  # the same kept set, without sorting the vocabulary
        apply_top_k(logits, batch.top_k, batch.max_top_k)
    return logits.softmax(dim=-1)


def draw(probs: torch.Tensor, uniform: torch.Tensor) -> torch.Tensor:
    """[S] long: per row, the first token whose cumulative probability exceeds u * total;
    a token of probability 0 is never drawn."""
    cdf = probs.cumsum(dim=-1)  # [S, V] float32
    target = (uniform * cdf[:, -1:]).to(cdf.dtype)
    index = torch.searchsorted(cdf, target, right=True).clamp_(max=cdf.shape[1] - 1)
    # rounding can put the target at or past the total: fall back to the most likely token
    ok = probs.gather(1, index) > 0
    return torch.where(ok, index, probs.argmax(dim=-1, keepdim=True)).squeeze(1)


@torch.inference_mode()
def sample(logits: torch.Tensor, batch: SamplingBatch | None) -> torch.Tensor:
    """[S] long: one token per row of logits [S, V] (modified in place)."""
    if batch is None:
        return logits.argmax(dim=-1)
    apply_logit_adjustments(logits, batch)
    if batch.all_greedy:
        return logits.argmax(dim=-1)
    greedy = logits.argmax(dim=-1)  # taken on every row, kept on the greedy ones
    drawn = draw(draw_probs(logits, batch), batch.uniform)
    return torch.where(batch.greedy, greedy, drawn)


def token_logprobs(logits: torch.Tensor, tokens: torch.Tensor,
                   num_top: list[int]) -> list[TokenLogprobs]:
    """Per row of logits [R, V] (raw: after the guard's mask, before the sampler's
    changes): the token's logprob and rank, and the row's num_top[i] most likely tokens."""
    logprobs = logits.log_softmax(dim=-1)
    taken = logprobs.gather(1, tokens.unsqueeze(1))  # [R, 1]
    rank = (logprobs > taken).sum(dim=-1).add_(1)
    k = min(max(num_top, default=0), logprobs.shape[1])
    values, ids = logprobs.topk(k, dim=-1) if k else (taken[:, :0], tokens[:, None][:, :0])
    rows = zip(tokens.tolist(), taken.squeeze(1).tolist(), rank.tolist(), values.tolist(),
               ids.tolist(), num_top)
    return [TokenLogprobs(t, lp, r, tuple(zip(i[:n], v[:n]))) for t, lp, r, v, i, n in rows]
