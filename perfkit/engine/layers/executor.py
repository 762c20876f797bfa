"""ModelExecutor: the engine's default executor (see engine/executor.py for the contract).

One step on the tensors:

    copy-on-write block copies -> gather the step's tokens -> SyntheticModel.forward
    (paged attention over the KV cache) -> guard mask on tool-call rows -> sample
    (sampler.py: each row by its sequence's SamplingParams)

The batch is the scheduled sequences in order, each contributing num_new_tokens rows
(a prefill chunk, or 1 for a decode): T rows in all. Logits are computed for the S rows
that sample (each such sequence's last new token), so logits are [S, vocab] and row i
samples sampling[i].
"""

from __future__ import annotations

import time

import torch

from perfkit.config.schema import Profile
from perfkit.engine.device import resolve_device
from perfkit.engine.executor import Executor, ExecutorFactory, ExecutorOutput
from perfkit.engine.guard.guard import Guard
from perfkit.engine.guard.mask import GuardMask
from perfkit.engine.kv_spec import KVSpec
from perfkit.engine.layers.attention import AttentionMetadata, PagedAttention
from perfkit.engine.layers.kv_cache import KVCache
from perfkit.engine.layers.model import SyntheticModel
from perfkit.engine.layers.sampler import build_batch, sample
from perfkit.engine.scheduler import SchedulerOutput
from perfkit.engine.sequence import Sequence


class ModelExecutor:
    def __init__(self, profile: Profile, spec: KVSpec, guard: Guard | None,
                 device: str | None = None) -> None:
        eng, mcfg = profile.engine, profile.model
        self.device = resolve_device(device or eng.device)
        if self.device.type == "cpu" and eng.cpu_threads:
            torch.set_num_threads(eng.cpu_threads)
        self.spec = spec
        self.kv = KVCache(spec, self.device)
        self.attention = PagedAttention(
            self.kv, mcfg.num_heads, max_num_seqs=eng.max_num_seqs,
            max_model_len=eng.max_model_len, max_num_batched_tokens=eng.max_num_batched_tokens,
            backend=eng.attention_backend)
        self.model = SyntheticModel(mcfg, self.attention, eng.max_model_len, eng.seed,
                                    gemm=eng.cpu_gemm, batch_hint=eng.max_num_seqs)
        self.vocab_size = mcfg.vocab_size
        self.mask = GuardMask(guard, self.device) if guard is not None else None

    def reset(self) -> None:
        pass  # sampling is counter-based: no generator state to rewind

    def execute(self, out: SchedulerOutput, sampling: list[Sequence]) -> ExecutorOutput:
        if out.copies:
            self.kv.copy_blocks(out.copies)
        logits = self._forward(out)  # [S, vocab] float32
        mask_s = 0.0
        if self.mask is not None and sampling:
            start = time.perf_counter()
            self.mask.apply(sampling, logits)
            mask_s = time.perf_counter() - start
        if not sampling:  # only mid-prompt chunks: one placeholder row, nothing to sample
            return ExecutorOutput([], mask_s)
        start = time.perf_counter()
        tokens = self._sample(logits, sampling)
        return ExecutorOutput(tokens, mask_s, time.perf_counter() - start)

    def _forward(self, out: SchedulerOutput) -> torch.Tensor:
        ids: list[int] = []  # [T] the step's new tokens, sequence by sequence
        positions: list[int] = []  # [T] their positions in their sequences
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
        meta = AttentionMetadata.build(q_lens, seq_lens, tables, self.spec.block_size, dev)
        return self.model.forward(
            torch.tensor(ids, dtype=torch.long, device=dev),
            torch.tensor(positions, dtype=torch.long, device=dev),
            meta, torch.tensor(logit_rows, dtype=torch.long, device=dev),
        )

    def _sample(self, logits: torch.Tensor, sampling: list[Sequence]) -> list[int]:
        batch = build_batch(sampling, self.vocab_size, self.device)
        return list(sample(logits, batch).tolist())  # .tolist() syncs the device


def model_executor(device: str | None = None) -> ExecutorFactory:
    """The synthetic model on `device` (None: the profile's engine.device)."""

    def make(profile: Profile, spec: KVSpec, guard: Guard | None) -> Executor:
        return ModelExecutor(profile, spec, guard, device)

    return make
