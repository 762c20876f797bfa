"""Engine.step(): schedule -> forward -> guard mask -> sample -> append -> guard check
-> free finished.

Deterministic for a profile and seed: the same scheduling decisions, block
counts, preemptions and (greedy) tokens on every run. Times are stamped with
`time.perf_counter()` when a token is appended.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from perfkit.config.profile import pool_blocks
from perfkit.config.schema import Profile
from perfkit.engine.blocks import BlockPool
from perfkit.engine.guard.dfa import compile_dfa
from perfkit.engine.guard.grammar import Vocabulary
from perfkit.engine.guard.guard import Guard, GuardCounts, count_finish
from perfkit.engine.layers.attention import AttentionMetadata, PagedAttention
from perfkit.engine.layers.kv_cache import KVCache
from perfkit.engine.layers.model import TORCH_DTYPES, SyntheticModel
from perfkit.engine.scheduler import Scheduler, SchedulerConfig, SchedulerOutput
from perfkit.engine.sequence import Sequence
from perfkit.errors import PerfkitError
from perfkit.workload import RequestSpec


def resolve_device(requested: str) -> torch.device:
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if requested == "cuda" and not torch.cuda.is_available():
        raise PerfkitError(
            "device 'cuda' requested but torch.cuda.is_available() is False; "
            "use --device cpu (or auto), or install a CUDA build of torch on a GPU machine"
        )
    return torch.device(requested)


@dataclass
class TokenEvent:
    seq: Sequence
    token: int
    time_s: float  # perf_counter when appended
    finished: bool


@dataclass
class KvSample:
    """Pool state after one step (counts; the time is the step's end)."""

    time_s: float
    blocks_used: int  # referenced blocks
    slots_used: int  # token slots holding computed K/V (physical, shared blocks once)
    blocks_cached_free: int  # free blocks still holding a prefix
    running: int
    waiting: int


@dataclass
class EngineStats:
    steps: int = 0
    batched_tokens: int = 0  # tokens computed, prefill chunks + decodes
    sampled_tokens: int = 0
    guard: GuardCounts = field(default_factory=GuardCounts)
    guard_s: float = 0.0  # time in the guard's mask and check (timing, not a count)
    kv_timeline: list[KvSample] = field(default_factory=list)


class Engine:
    def __init__(self, profile: Profile, device: str | None = None) -> None:
        eng, mcfg = profile.engine, profile.model
        self.profile = profile
        self.device = resolve_device(device or eng.device)
        if self.device.type == "cpu" and eng.cpu_threads:
            torch.set_num_threads(eng.cpu_threads)
        self.max_model_len = eng.max_model_len
        self.block_size = eng.block_size
        self._scheduler_config = SchedulerConfig(
            eng.max_num_seqs, eng.max_num_batched_tokens, eng.max_model_len, eng.max_waiting
        )
        self.pool = BlockPool(pool_blocks(profile), eng.block_size, eng.prefix_caching)
        self.scheduler = Scheduler(self._scheduler_config, self.pool)
        dtype = TORCH_DTYPES[mcfg.dtype]
        self.kv = KVCache(mcfg.num_layers, self.pool.num_blocks, eng.block_size,
                          mcfg.num_kv_heads, mcfg.head_dim, dtype, self.device)
        self.attention = PagedAttention(
            mcfg.num_heads, mcfg.num_kv_heads, mcfg.head_dim, eng.block_size, eng.max_num_seqs,
            eng.max_model_len, eng.max_num_batched_tokens, dtype, self.device,
            eng.attention_backend,
        )
        self.model = SyntheticModel(mcfg, self.kv, self.attention, eng.max_model_len,
                                    self.device, eng.seed)
        self.greedy = eng.sampling == "greedy"
        self.generator = torch.Generator(device=self.device).manual_seed(eng.seed)
        self.vocab = Vocabulary(mcfg.vocab_size)  # grammar token texts, to validate tool calls
        self.guard = Guard(compile_dfa(mcfg.vocab_size), self.device, eng.max_model_len,
                           eng.guard_loop_ngram, eng.guard_loop_repeats) if eng.guard else None
        self.stats = EngineStats()
        self.record_timeline = True
        self.on_step: Callable[[SchedulerOutput], None] | None = None
        self._next_id = 0
        # Start-up objects (weights, tables) are never garbage: keep GC from rescanning
        # them in every collection during the run, as serving engines do.
        gc.collect()
        gc.freeze()

    def reset(self) -> None:
        """Empty pool, prefix cache, queues and stats (weights and KV tensors are kept):
        every sweep level starts from the same state."""
        self.pool = BlockPool(self.pool.num_blocks, self.block_size, self.pool.enable_caching)
        self.scheduler = Scheduler(self._scheduler_config, self.pool)
        self.generator.manual_seed(self.profile.engine.seed)
        self.reset_stats()
        self._next_id = 0

    def reset_stats(self) -> None:
        """Zero the step stats and pool counters; the cache contents stay (after warm-up)."""
        self.stats = EngineStats()
        self.pool.reset_counters()

    # -- requests ---------------------------------------------------------------------
    def add_request(self, spec: RequestSpec) -> tuple[Sequence, str | None]:
        """Queue a request; returns its sequence and the rejection reason (None if queued)."""
        seq = Sequence(
            seq_id=self._next_id, token_ids=list(spec.prompt), num_prompt_tokens=len(spec.prompt),
            max_tokens=spec.max_tokens, priority=spec.priority, tool_call=spec.tool_call,
        )
        self._next_id += 1
        if self.guard is None:
            return seq, self.scheduler.add(seq)
        self.guard.start(seq)
        too_long = seq.num_prompt_tokens >= self.max_model_len  # the scheduler's reason wins
        return seq, (None if too_long else self.guard.admit(seq)) or self.scheduler.add(seq)

    def cancel(self, seq: Sequence) -> None:
        if seq.finish_reason is None:
            self.scheduler.finish(seq, "cancelled")

    @property
    def has_work(self) -> bool:
        return self.scheduler.has_work

    # -- one step ---------------------------------------------------------------------
    def step(self) -> list[TokenEvent]:
        out = self.scheduler.schedule()
        for seq in out.admitted:
            if seq.first_scheduled_s is None:
                seq.first_scheduled_s = time.perf_counter()
        if self.on_step is not None:
            self.on_step(out)
        if not out.scheduled:
            return []
        if out.copies:
            self.kv.copy_blocks(out.copies)
        sampling = [item.seq for item in out.scheduled if item.samples]
        tokens = self._forward(out, sampling)
        self.scheduler.commit(out)
        events = self._append(sampling, tokens)
        self.stats.steps += 1
        self.stats.batched_tokens += out.num_batched_tokens
        if self.record_timeline:
            self._record_kv()
        return events

    def _forward(self, out: SchedulerOutput, sampling: list[Sequence]) -> list[int]:
        ids: list[int] = []
        positions: list[int] = []
        q_lens, seq_lens, tables, logit_rows = [], [], [], []
        for item in out.scheduled:
            seq, start, n = item.seq, item.seq.num_computed_tokens, item.num_new_tokens
            ids.extend(seq.token_ids[start:start + n])
            positions.extend(range(start, start + n))
            q_lens.append(n)
            seq_lens.append(start + n)
            tables.append(seq.block_ids)
            if item.samples:
                logit_rows.append(len(ids) - 1)
        if not logit_rows:  # only prefill chunks that end mid-prompt
            logit_rows = [len(ids) - 1]
        dev = self.device
        meta = AttentionMetadata.build(q_lens, seq_lens, tables, self.block_size, dev)
        logits = self.model.forward(
            torch.tensor(ids, dtype=torch.long, device=dev),
            torch.tensor(positions, dtype=torch.long, device=dev),
            meta, torch.tensor(logit_rows, dtype=torch.long, device=dev),
        )
        if self.guard is not None and sampling:
            t0 = time.perf_counter()
            self.guard.mask(sampling, logits)  # row i of logits samples sampling[i]
            self.stats.guard_s += time.perf_counter() - t0
        return self._sample(logits)

    def _sample(self, logits: torch.Tensor) -> list[int]:
        if self.greedy:
            return list(logits.argmax(dim=-1).tolist())
        probs = torch.softmax(logits, dim=-1)
        return list(torch.multinomial(probs, 1, generator=self.generator).squeeze(1).tolist())

    def _append(self, sampling: list[Sequence], tokens: list[int]) -> list[TokenEvent]:
        now = time.perf_counter()
        for seq, token in zip(sampling, tokens):
            seq.token_ids.append(token)
        reasons = self._guard_check(sampling)
        events = []
        for seq, token, reason in zip(sampling, tokens, reasons):
            if reason is None and (seq.num_output_tokens >= seq.max_tokens
                                   or seq.num_tokens >= self.max_model_len):
                reason = "length"
            if reason is not None:
                self.scheduler.finish(seq, reason)
                count_finish(self.stats.guard, seq, reason, self.vocab)
            events.append(TokenEvent(seq, token, now, reason is not None))
        self.stats.sampled_tokens += len(events)
        return events

    def _guard_check(self, sampling: list[Sequence]) -> list[str | None]:
        """A finish reason per sequence from the guard ("stop", "loop") or None."""
        if self.guard is None:
            return [None] * len(sampling)
        start = time.perf_counter()
        reasons = self.guard.check(sampling)
        self.stats.guard_s += time.perf_counter() - start
        return reasons

    def _record_kv(self) -> None:
        bs = self.block_size
        running = self.scheduler.running
        empty_tail = sum(len(s.block_ids) * bs - s.num_computed_tokens for s in running)
        used = self.pool.num_used_blocks
        self.stats.kv_timeline.append(KvSample(
            time.perf_counter(), used, used * bs - empty_tail, self.pool.num_cached_free_blocks,
            len(running), len(self.scheduler.waiting),
        ))

    def run_to_completion(self, specs: list[RequestSpec]) -> dict[int, list[int]]:
        """Submit all, step until done; output tokens by request id (for tests and replays)."""
        seqs = {spec.request_id: self.add_request(spec)[0] for spec in specs}
        while self.has_work:
            self.step()
        return {rid: s.token_ids[s.num_prompt_tokens:] for rid, s in seqs.items()}
