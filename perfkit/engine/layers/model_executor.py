"""ModelExecutor: the engine's default executor (see engine/executor.py for the contract).

One step on the tensors:

    copy-on-write block copies -> gather the step's tokens -> SyntheticModel.forward
    (paged attention over the KV cache) -> guard mask on tool-call rows -> sample
    (sampler.py: each row by its sequence's SamplingParams)

The batch is the scheduled sequences in order, each contributing num_new_tokens rows
(a prefill chunk, or 1 for a decode): T rows in all. Logits are computed for the S rows
that sample (each such sequence's last new token), so logits are [S, vocab] and row i
samples sampling[i]; then, for sequences that asked for prompt_logprobs, one row per
prompt position of their chunk not yet recorded (position q predicts prompt token q + 1).
A row of a request with several outputs (engine/group.py) gives more: a group's first n
samples from its one row, or a beam's W best candidates with their log-probabilities
(log_softmax of the row, top W).
"""

from __future__ import annotations

import dataclasses
import time

import torch

from perfkit.config.schema import Profile
from perfkit.engine.device import resolve_device
from perfkit.engine.executor import Executor, ExecutorFactory, ExecutorOutput
from perfkit.engine.group import output_key, row_outputs
from perfkit.engine.guard.guard import Guard
from perfkit.engine.guard.mask import GuardMask
from perfkit.engine.kv_spec import KVSpec
from perfkit.engine.layers.attention import AttentionMetadata, PagedAttention
from perfkit.engine.layers.kv_cache import KVCache
from perfkit.engine.layers.model import SyntheticModel
from perfkit.engine.layers.sampler import build_batch, sample, token_logprobs
from perfkit.engine.scheduler import SchedulerOutput
from perfkit.engine.sequence import Sequence, TokenLogprobs

# one sequence's prompt positions this step: (sequence, first position q, their targets)
PromptRows = list[tuple[Sequence, int, list[int]]]


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
        prompt_rows: PromptRows = []
        logits = self._forward(out, prompt_rows)  # [S + prompt rows, vocab] float32
        result = ExecutorOutput([])
        if prompt_rows:
            result.prompt_logprobs = self._prompt_logprobs(logits[-sum(
                len(t) for _, _, t in prompt_rows):], prompt_rows)
        logits = logits[:len(sampling)]
        if self.mask is not None and sampling:
            start = time.perf_counter()
            self.mask.apply(sampling, logits)
            result.mask_s = time.perf_counter() - start
        if sampling:  # else only mid-prompt chunks (one placeholder row): nothing to sample
            start = time.perf_counter()
            groups = [(row, seq, *row_outputs(seq)) for row, seq in enumerate(sampling)
                      if seq.group is not None]
            # the sampler adjusts logits in place: a group's rows are kept as they came
            raw = logits[[row for row, *_ in groups]].clone() if groups else None
            result.token_ids, result.logprobs = self._sample(logits, sampling)
            if raw is not None:
                self._group_outputs(raw, groups, result)
            result.sample_s = time.perf_counter() - start
        return result

    def _group_outputs(self, raw: torch.Tensor, groups: list[tuple[int, Sequence, str, int]],
                       result: ExecutorOutput) -> None:
        """Each group row's outputs with their log-probabilities (raw: [G, vocab], the rows
        as they came, as vLLM's logprobs): a sampled output's token and its own, a group's
        first n samples (output i drawn with the key its fork will have: group.output_key;
        output 0 is the row's own token), or a beam's W best candidates, best first."""
        logp = torch.log_softmax(raw.float(), dim=-1)  # [G, vocab]
        tokens = torch.tensor([result.token_ids[row] for row, *_ in groups], device=raw.device)
        own = logp.gather(1, tokens.unsqueeze(1)).squeeze(1).tolist()  # [G]
        for g, (row, seq, kind, width) in enumerate(groups):
            first = result.token_ids[row]
            if kind == "beam":
                values, ids = logp[g].topk(width)
                result.multi[row] = list(zip(ids.tolist(), values.tolist(), strict=True))
                result.token_ids[row] = result.multi[row][0][0]
                continue
            outputs = [(first, own[g])]
            if kind == "samples":
                group = seq.group
                assert group is not None
                others = [dataclasses.replace(seq, sample_key=output_key(group, i))
                          for i in range(1, width)]
                more, _ = self._sample(raw[g].repeat(width - 1, 1), others)
                outputs += [(t, lp) for t, lp in zip(more, logp[g, more].tolist(), strict=True)]
            result.multi[row] = outputs

    def _forward(self, out: SchedulerOutput, prompt_rows: PromptRows) -> torch.Tensor:
        """Logits of the sampling rows, then of the prompt rows it appends to prompt_rows."""
        ids: list[int] = []  # [T] the step's new tokens, sequence by sequence
        positions: list[int] = []  # [T] their positions in their sequences
        q_lens, seq_lens, tables, logit_rows = [], [], [], []
        extra: list[int] = []  # [P] prompt rows (their index in T)
        for item in out.scheduled:
            seq, start, n = item.seq, item.seq.num_computed_tokens, item.num_new_tokens
            if seq.prompt_logprobs is not None:  # positions q predict prompt token q + 1
                first = max(start, len(seq.prompt_logprobs) - 1)
                last = min(start + n, seq.num_prompt_tokens - 1)
                if first < last:
                    extra.extend(range(len(ids) + first - start, len(ids) + last - start))
                    prompt_rows.append((seq, first, seq.token_ids[first + 1:last + 1]))
            ids.extend(seq.token_ids[start:start + n])
            positions.extend(range(start, start + n))
            q_lens.append(n)
            seq_lens.append(start + n)
            tables.append(seq.block_ids)
            if item.samples:
                logit_rows.append(len(ids) - 1)
        if not logit_rows and not extra:  # only prefill chunks that end mid-prompt
            logit_rows = [len(ids) - 1]
        dev = self.device
        meta = AttentionMetadata.build(q_lens, seq_lens, tables, self.spec.block_size, dev)
        return self.model.forward(
            torch.tensor(ids, dtype=torch.long, device=dev),
            torch.tensor(positions, dtype=torch.long, device=dev),
            meta, torch.tensor(logit_rows + extra, dtype=torch.long, device=dev),
        )

    def _sample(self, logits: torch.Tensor, sampling: list[Sequence]
                ) -> tuple[list[int], list[TokenLogprobs | None] | None]:
        want = [i for i, s in enumerate(sampling) if s.params.logprobs is not None]
        raw = logits[want] if want else None  # a copy, before the sampler changes logits
        batch = build_batch(sampling, self.vocab_size, self.device)
        tokens = sample(logits, batch)
        if raw is None:
            return list(tokens.tolist()), None  # .tolist() syncs the device
        found = token_logprobs(raw, tokens[want],
                               [sampling[i].params.logprobs or 0 for i in want])
        logprobs: list[TokenLogprobs | None] = [None] * len(sampling)
        for i, lp in zip(want, found):
            logprobs[i] = lp
        return list(tokens.tolist()), logprobs

    def _prompt_logprobs(self, logits: torch.Tensor, rows: PromptRows
                         ) -> list[tuple[Sequence, list[TokenLogprobs]]]:
        targets = [t for _, _, ts in rows for t in ts]
        tops = [seq.params.prompt_logprobs or 0 for seq, _, ts in rows for _ in ts]
        found = token_logprobs(logits, torch.tensor(targets, device=logits.device), tops)
        out, at = [], 0
        for seq, _, ts in rows:
            out.append((seq, found[at:at + len(ts)]))
            at += len(ts)
        return out


def model_executor(device: str | None = None) -> ExecutorFactory:
    """The synthetic model on `device` (None: the profile's engine.device)."""

    def make(profile: Profile, spec: KVSpec, guard: Guard | None) -> Executor:
        return ModelExecutor(profile, spec, guard, device)

    return make
