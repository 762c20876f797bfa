"""Dataset records -> the requests a sweep sends (RequestSpec), deterministic per seed.

Token ids: a record's own ids are folded into the model's vocabulary (id -> 1 + (id - 1)
mod (vocab - 1): ids the model has are kept, equal ids stay equal, so shared prefixes stay
shared); text goes through the
tokenizer (required: `--tokenizer DIR`); lengths-only records get seeded ids, and a
Mooncake record's blocks get ids seeded by their hash id, so equal hash ids are equal
token blocks and prefix caching sees the trace's reuse. Outputs: the record's length, the
reply's tokens (ShareGPT), or the profile's output length distribution.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from pathlib import Path

from perfkit.config.workload import LengthDist
from perfkit.datasets.records import MOONCAKE_BLOCK, DatasetError, DatasetRecord
from perfkit.workload import FIRST_TOKEN_ID, RequestLengths, RequestSpec, sample_length, stream

Tokenize = Callable[[str], list[int]]


def _rng(seed: int, purpose: str) -> random.Random:
    return stream(seed, f"dataset:{purpose}")


def _random_ids(rng: random.Random, n: int, vocab_size: int) -> list[int]:
    return [rng.randrange(FIRST_TOKEN_ID, vocab_size) for _ in range(n)]


class SpecBuilder:
    """Turns records into specs for one model (vocabulary) and seed."""

    def __init__(self, path: Path, vocab_size: int, output_len: LengthDist, seed: int,
                 tokenizer: Tokenize | None = None) -> None:
        self.path = path
        self.vocab = vocab_size
        self.output_len = output_len
        self.seed = seed
        self.tokenizer = tokenizer
        self._outputs = _rng(seed, "outputs")
        self._blocks: dict[int, list[int]] = {}

    def fold(self, ids: Sequence[int]) -> tuple[int, ...]:
        span = self.vocab - FIRST_TOKEN_ID  # ids already in [1, vocab) are kept as they are
        return tuple(FIRST_TOKEN_ID + (t - FIRST_TOKEN_ID) % span for t in ids)

    def tokens(self, rec: DatasetRecord, what: str, text: str) -> list[int]:
        if self.tokenizer is None:
            raise DatasetError.at(self.path, rec.line, what, "text needs a tokenizer: pass "
                                  "--tokenizer DIR (a folder with a Hugging Face "
                                  "tokenizer.json), or use token ids or lengths")
        return self.tokenizer(text)

    def prompt(self, i: int, rec: DatasetRecord) -> tuple[int, ...]:
        if rec.prompt_ids is not None:
            return self.fold(rec.prompt_ids)
        if rec.prompt_text is not None:
            return self.fold(self.tokens(rec, "prompt", rec.prompt_text))
        assert rec.prompt_len is not None
        ids = [t for h in rec.hash_ids or () for t in self._block(h)]
        if len(ids) < rec.prompt_len:
            ids += _random_ids(_rng(self.seed, f"record:{i}"), rec.prompt_len - len(ids),
                               self.vocab)
        return tuple(ids[: rec.prompt_len])

    def _block(self, hash_id: int) -> list[int]:
        if hash_id not in self._blocks:
            self._blocks[hash_id] = _random_ids(_rng(self.seed, f"hash:{hash_id}"),
                                                MOONCAKE_BLOCK, self.vocab)
        return self._blocks[hash_id]

    def output(self, rec: DatasetRecord) -> int:
        if rec.output_len is not None:
            return rec.output_len
        if rec.output_text is not None and self.tokenizer is not None:
            return max(1, len(self.tokens(rec, "output", rec.output_text)))
        return max(1, sample_length(self.output_len, self._outputs))


def record_lengths(records: Sequence[DatasetRecord], builder: SpecBuilder
                   ) -> list[RequestLengths]:
    """The records as lengths only (no token ids drawn), for the fragmentation replays; a
    Mooncake record whose first block is shared with another record joins that block's
    prefix group (MOONCAKE_BLOCK tokens)."""
    firsts = [r.hash_ids[0] if r.hash_ids else None for r in records]
    shared = _shared(firsts)
    groups = {h: g for g, h in enumerate(sorted(shared))}
    t0 = min((r.timestamp_s for r in records if r.timestamp_s is not None), default=0.0)
    out = []
    for i, rec in enumerate(records):
        length = (rec.prompt_len if rec.prompt_len is not None
                  else len(rec.prompt_ids) if rec.prompt_ids is not None
                  else len(builder.tokens(rec, "prompt", rec.prompt_text or "")))
        first = firsts[i]
        group = groups.get(first) if first is not None and length > MOONCAKE_BLOCK else None
        out.append(RequestLengths(
            request_id=i, prompt_len=length, max_tokens=builder.output(rec),
            arrival_s=0.0 if rec.timestamp_s is None else rec.timestamp_s - t0,
            prefix_group=group))
    return out


def _shared(firsts: list[int | None]) -> set[int]:
    seen: set[int] = set()
    twice: set[int] = set()
    for h in firsts:
        if h is not None:
            (twice if h in seen else seen).add(h)
    return twice


def dataset_specs(records: Sequence[DatasetRecord], builder: SpecBuilder) -> list[RequestSpec]:
    """One spec per record, in file order; arrival_s from the timestamps (relative to the
    first), 0 when the file has none."""
    t0 = min((r.timestamp_s for r in records if r.timestamp_s is not None), default=0.0)
    return [RequestSpec(
        request_id=i, prompt=builder.prompt(i, rec), max_tokens=builder.output(rec),
        arrival_s=0.0 if rec.timestamp_s is None else rec.timestamp_s - t0,
        conversation=rec.conversation, turn=rec.turn)
        for i, rec in enumerate(records)]


def scale_arrivals(specs: list[RequestSpec], rate: float) -> list[RequestSpec]:
    """The trace's arrival pattern (bursts, lulls) compressed or stretched so its mean rate
    is `rate` requests/s; a trace without a time span arrives at `rate` evenly."""
    from dataclasses import replace

    span = max((s.arrival_s for s in specs), default=0.0)
    if span <= 0 or len(specs) < 2:
        return [replace(s, arrival_s=i / rate) for i, s in enumerate(specs)]
    factor = (len(specs) - 1) / span / rate  # trace rate / wanted rate
    return [replace(s, arrival_s=s.arrival_s * factor) for s in specs]
