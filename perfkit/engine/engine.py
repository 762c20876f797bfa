"""Engine.step(): schedule -> executor (forward, guard mask, sample) -> append (forks and
beam steps of requests with several outputs, engine/forks.py) -> guard check -> free
finished.

The loop is bookkeeping only (no torch here); the executor (engine/executor.py) is what
runs the step: the synthetic model by default, or the null executor (no tensors). Both see
the same step, so scheduling decisions, block counts and the KV timeline come from this one
loop wherever the engine is driven (sweeps, serve, the fragmentation replays, benchmarks).

Deterministic for a profile and seed: the same scheduling decisions, block counts,
preemptions and (greedy) tokens on every run. Times are stamped with
`clock.now()` when a token is appended.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from dataclasses import dataclass, field

from perfkit import clock
from perfkit.config.profile import usable_blocks
from perfkit.config.schema import Profile
from perfkit.engine import forks
from perfkit.engine.blocks import BlockPool
from perfkit.engine.detokenizer import Detokenizer
from perfkit.engine.executor import Executor, ExecutorFactory, ExecutorOutput
from perfkit.engine.group import SequenceGroup, start_group
from perfkit.engine.guard.dfa import compile_dfa
from perfkit.engine.guard.grammar import Vocabulary
from perfkit.engine.guard.guard import Guard, GuardTally, count_finish
from perfkit.engine.kv_manager import table_tails
from perfkit.engine.kv_spec import KVSpec
from perfkit.engine.outputs import TokenEvent, beam_events, mark_last, output_ended, token_event
from perfkit.engine.sampling_params import GREEDY, RANDOM, SamplingParams, sampling_key
from perfkit.engine.scheduler import Scheduler, SchedulerConfig, SchedulerOutput
from perfkit.engine.sequence import Sequence
from perfkit.engine.text import token_text
from perfkit.workload import RequestSpec


@dataclass
class KvSample:
    """Pool state after one step (counts; the time is the step's end)."""

    time_s: float
    blocks_used: int  # referenced blocks
    slots_used: int  # token slots holding computed K/V (physical, shared blocks once)
    blocks_cached_free: int  # free blocks still holding a prefix
    running: int
    waiting: int
    blocks_shared: int = 0  # used blocks in more than one block table
    blocks_saved: int = 0  # block-table entries beyond the used blocks: what sharing saves


@dataclass
class EngineStats:
    steps: int = 0
    batched_tokens: int = 0  # tokens computed, prefill chunks + decodes
    sampled_tokens: int = 0
    guard: GuardTally = field(default_factory=GuardTally)
    guard_s: float = 0.0  # time in the guard's mask and check (timing, not a count)
    sampler_s: float = 0.0  # time in the sampler (engine/layers/sampler.py; a timing)
    kv_timeline: list[KvSample] = field(default_factory=list)
    # One entry per step that ran, in order (parallel lists: no object per step).
    step_start_s: list[float] = field(default_factory=list)  # perfkit.clock at schedule()
    step_end_s: list[float] = field(default_factory=list)  # perfkit.clock after the append
    step_prefill_tokens: list[int] = field(default_factory=list)  # prompt tokens computed
    step_prefill_seqs: list[int] = field(default_factory=list)  # sequences still prefilling


class Engine:
    """`Engine(profile)` runs the synthetic model on the profile's device (or `device`);
    `Engine(profile, executor=null_executor())` runs the same loop with no tensors."""

    def __init__(self, profile: Profile, device: str | None = None,
                 executor: ExecutorFactory | None = None) -> None:
        if executor is not None and device is not None:
            raise ValueError("Engine: give the device to the executor factory "
                             "(model_executor(device)), not beside it")
        eng, mcfg = profile.engine, profile.model
        self.profile = profile
        self.kv_spec = KVSpec.from_profile(profile)  # the pool's and the cache's shape
        self.max_model_len = eng.max_model_len
        self._scheduler_config = SchedulerConfig(
            eng.max_num_seqs, eng.max_num_batched_tokens, eng.max_model_len, eng.max_waiting,
            eng.admission,
        )
        # the pool hands out ids below usable_blocks; the cache's last block (the null
        # block's place, engine.null_block) is never referenced
        self.pool = BlockPool(usable_blocks(profile), self.kv_spec.block_size,
                              eng.prefix_caching)
        self.scheduler = Scheduler(self._scheduler_config, self.pool)
        self.vocab = Vocabulary(mcfg.vocab_size)  # grammar token texts, to validate tool calls
        self.guard = Guard(compile_dfa(mcfg.vocab_size), eng.max_model_len,
                           eng.guard_loop_ngram, eng.guard_loop_repeats) if eng.guard else None
        if executor is None:
            from perfkit.engine.layers.model_executor import model_executor  # torch loads here

            executor = model_executor(device)
        self.executor: Executor = executor(
            profile, self.kv_spec, self.guard)
        self.device = self.executor.device  # torch.device, or "none" (null executor)
        self.default_params = GREEDY if eng.sampling == "greedy" else RANDOM
        self.stats = EngineStats()
        self.record_timeline = True
        self.on_step: Callable[[SchedulerOutput], None] | None = None
        self._next_id = 0
        # Start-up objects (weights, tables) are never garbage: keep GC from rescanning
        # them in every collection during the run, as serving engines do.
        gc.collect()
        gc.freeze()

    @property
    def block_size(self) -> int:
        return self.kv_spec.block_size

    def reset(self) -> None:
        """Empty pool, prefix cache, queues and stats (weights and KV tensors are kept):
        every sweep level starts from the same state."""
        self.pool = BlockPool(self.pool.num_blocks, self.block_size, self.pool.enable_caching)
        self.scheduler = Scheduler(self._scheduler_config, self.pool)
        self.executor.reset()
        self.reset_stats()
        self._next_id = 0

    def reset_stats(self) -> None:
        """Zero the step stats and pool counters; the cache contents stay (after warm-up)."""
        self.stats = EngineStats()
        self.pool.reset_counters()

    # -- requests ---------------------------------------------------------------------
    def add_request(self, spec: RequestSpec, params: SamplingParams | None = None
                    ) -> tuple[Sequence, str | None]:
        """Queue a request; returns its sequence and the rejection reason (None if queued).
        `params`: how it samples (None: the profile's engine.sampling, greedy by default)."""
        params = params or self.default_params
        seq_id = self._next_id
        key = sampling_key(params.seed, 0) if params.seed is not None else \
            sampling_key(self.profile.engine.seed, 1 + seq_id)
        seq = Sequence(
            seq_id=seq_id, token_ids=list(spec.prompt), num_prompt_tokens=len(spec.prompt),
            max_tokens=spec.max_tokens, priority=spec.priority, tool_call=spec.tool_call,
            params=params, sample_key=key,
        )
        if params.detokenize:
            seq.detokenizer = Detokenizer(params.stop, params.include_stop_str_in_output,
                                          params.min_tokens)
        if params.prompt_logprobs is not None:  # every position computed: no prefix hits
            seq.prompt_logprobs = [None]
        self._next_id += 1
        width = max(spec.n, spec.beam_width)
        if width > 1:
            start_group(seq, "beam" if spec.beam_width > 1 else "sample", width,
                        params.seed, self.profile.engine.block_sharing)
        if self.guard is None:  # structured output needs it (engine.guard = false)
            return seq, "guard_off" if params.grammar is not None else self.scheduler.add(seq)
        self.guard.start(seq)
        too_long = seq.num_prompt_tokens >= self.max_model_len  # the scheduler's reason wins
        return seq, (None if too_long else self.guard.admit(seq)) or self.scheduler.add(seq)

    def cancel(self, seq: Sequence) -> None:
        """End a request (its every output) where it stands."""
        group = seq.group
        if group is None:
            if seq.finish_reason is None:
                self.scheduler.finish(seq, "cancelled")
            return
        for member in [m for m in (group.root, *group.members) if m is not None]:
            self.scheduler.finish(member, "cancelled")
        group.members, group.root = [], None
        seq.finish_reason = "cancelled"

    def _new_id(self) -> int:
        self._next_id += 1
        return self._next_id - 1

    @property
    def has_work(self) -> bool:
        return self.scheduler.has_work

    # -- one step ---------------------------------------------------------------------
    def step(self) -> list[TokenEvent]:
        start_s = clock.now()
        out = self.scheduler.schedule()
        for seq in out.admitted:
            if seq.head.first_scheduled_s is None:
                seq.head.first_scheduled_s = clock.now()
        if self.on_step is not None:
            self.on_step(out)
        if not out.scheduled:
            return []
        sampling = [item.seq for item in out.scheduled if item.samples]
        floor = clock.now()
        result = self.executor.execute(out, sampling)
        clock.reclaim_waits(floor)  # in lockstep: another process's hold on the core
        self.stats.guard_s += result.mask_s
        self.stats.sampler_s += result.sample_s
        for seq, found in result.prompt_logprobs:
            assert seq.prompt_logprobs is not None
            seq.prompt_logprobs.extend(found)
        self.scheduler.commit(out)
        events = self._append(sampling, result)
        self.stats.steps += 1
        self.stats.batched_tokens += out.num_batched_tokens
        if self.record_timeline:
            self._record_kv()
        self._record_step(start_s, out)
        return events

    def _record_step(self, start_s: float, out: SchedulerOutput) -> None:
        prefill = [s.num_new_tokens for s in out.scheduled if not s.samples or s.num_new_tokens > 1]
        stats = self.stats
        stats.step_start_s.append(start_s)
        stats.step_end_s.append(clock.now())
        stats.step_prefill_tokens.append(sum(prefill))
        stats.step_prefill_seqs.append(len(prefill))

    def _append(self, sampling: list[Sequence], result: ExecutorOutput) -> list[TokenEvent]:
        """Append each row's token (a group's first sample forks it, its beams step
        together: forks.advance), end what is done, and stream: one event per new token,
        except beams, whose outputs come when the request ends (a beam can be dropped)."""
        now = clock.now()
        appended, logprobs = forks.advance(self.scheduler, sampling, result, self._new_id)
        reasons = self._guard_check(appended)
        ended: list[SequenceGroup] = []
        texts: list[str | None] = []
        for seq, reason in zip(appended, reasons):
            reason = self._stop_check(seq, seq.token_ids[-1], reason)
            if reason is not None:
                self.scheduler.finish(seq, reason)
                count_finish(self.stats.guard, seq, reason, self.vocab)
                if seq.group is not None and output_ended(seq.group, seq):
                    ended.append(seq.group)
            texts.append(None if seq.detokenizer is None else
                         seq.detokenizer.take(finished=reason is not None))
        self.stats.sampled_tokens += len(appended)
        events = [token_event(seq, now, text, lp)
                  for seq, text, lp in zip(appended, texts, logprobs, strict=True)
                  if seq.group is None or seq.group.kind == "sample"]
        for group in ended:
            if group.kind == "beam":
                events += beam_events(group, now, self.token_text)
        mark_last(events)
        return events

    def _stop_check(self, seq: Sequence, token: int, reason: str | None) -> str | None:
        """vLLM's order after the guard's reason: length (max_tokens, max_model_len); past
        min_tokens, a stop token (EOS unless ignore_eos, stop_token_ids); then the stop
        strings over the text, which win even over length."""
        if reason is None and (seq.num_output_tokens >= seq.max_tokens
                               or seq.num_tokens >= self.max_model_len):
            reason = "length"
        params, stop_token = seq.params, False
        if reason is None and seq.num_output_tokens >= params.min_tokens \
                and token in params.stop_ids:
            reason, stop_token, seq.stop_reason = "stop", True, \
                None if token == params.eos_token_id else token
        if seq.detokenizer is not None:
            matched = seq.detokenizer.append(self.token_text(seq, token), stop_token)
            if matched is not None:
                reason, seq.stop_reason = "stop", matched
        return reason

    def token_text(self, seq: Sequence, token: int) -> str:
        """Its text in this request's output: a grammar's token text while the guard
        constrains it, else ` t<id>` (engine/text.py)."""
        grammar = seq.grammar.vocab if seq.grammar is not None else \
            self.vocab if seq.tool_call else None
        return token_text(token, grammar)

    def _guard_check(self, sampling: list[Sequence]) -> list[str | None]:
        """A finish reason per sequence from the guard ("stop", "loop") or None."""
        if self.guard is None:
            return [None] * len(sampling)
        start = clock.now()
        reasons = self.guard.check(sampling)
        self.stats.guard_s += clock.now() - start
        return reasons

    def _record_kv(self) -> None:
        used = self.pool.num_used_blocks
        running = self.scheduler.running
        tails, entries = table_tails(running, self.block_size)
        self.stats.kv_timeline.append(KvSample(
            clock.now(), used, used * self.block_size - tails,
            self.pool.num_cached_free_blocks, len(running), len(self.scheduler.waiting),
            self.pool.num_shared_blocks, entries - used,
        ))

    def run_to_completion(self, specs: list[RequestSpec]) -> dict[int, list[int]]:
        """Submit all, step until done; output tokens by request id (for tests and replays)."""
        seqs = {spec.request_id: self.add_request(spec)[0] for spec in specs}
        while self.has_work:
            self.step()
        return {rid: s.token_ids[s.num_prompt_tokens:] for rid, s in seqs.items()}
