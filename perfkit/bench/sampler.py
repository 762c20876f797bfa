"""Microbenchmark: the sampler's cost per decode step, by sampling parameters.

A batch of the profile's max_num_seqs sequences (64 prompt + 128 output tokens each, the
history the penalties read) over the profile's vocabulary. One step is what the model
executor does after the forward pass and the guard: build the step's parameter tensors
from the sequences, sample, copy the tokens to the host. Each configuration runs on fresh
copies of the same logits; the configurations take turns in rounds; medians per step.
The model is left out: it costs the same whatever the sampler does.
"""

from __future__ import annotations

import statistics
import time

import torch

from perfkit.config.schema import Profile
from perfkit.engine.layers.sampler import build_batch, sample
from perfkit.engine.sampling_params import SamplingParams, sampling_key
from perfkit.engine.sequence import Sequence

PROMPT, OUTPUT = 64, 128
NUM_LOGITS = 8  # distinct random logit batches, cycled

CONFIGS: dict[str, SamplingParams] = {
    "greedy": SamplingParams(),  # the default: argmax, no parameter tensors
    "random": SamplingParams(temperature=1.0),
    "top_k_top_p": SamplingParams(temperature=0.8, top_k=50, top_p=0.9),
    "penalties": SamplingParams(temperature=1.0, repetition_penalty=1.1,
                                frequency_penalty=0.2, presence_penalty=0.2),
    "all": SamplingParams(temperature=0.8, top_k=50, top_p=0.9, min_p=0.01,
                          repetition_penalty=1.1, frequency_penalty=0.2, presence_penalty=0.2,
                          logit_bias=((1, 1.0), (2, -1.0)), seed=0),
}


def _batch(params: SamplingParams, batch: int, vocab: int) -> list[Sequence]:
    seqs = []
    for i in range(batch):
        tokens = [1 + (i * 131 + j * 17) % (vocab - 1) for j in range(PROMPT + OUTPUT)]
        seqs.append(Sequence(i, tokens, PROMPT, OUTPUT * 2, params=params,
                             sample_key=sampling_key(0, 1 + i)))
    return seqs


def _round(seqs: list[Sequence], pool: torch.Tensor, steps: int) -> float:
    """Seconds per step: parameter tensors + sample + tokens to the host."""
    vocab, device = pool.shape[-1], pool.device
    logits = torch.empty_like(pool[0])
    total = 0.0
    for i in range(steps):
        logits.copy_(pool[i % NUM_LOGITS])
        start = time.perf_counter()
        sample(logits, build_batch(seqs, vocab, device)).tolist()
        total += time.perf_counter() - start
    return total / steps


def bench_sampler(profile: Profile, device: str = "cpu", steps: int = 100,
                  rounds: int = 5) -> dict[str, float]:
    dev = torch.device(device)
    vocab, batch = profile.model.vocab_size, profile.engine.max_num_seqs
    gen = torch.Generator().manual_seed(0)
    pool = (torch.randn(NUM_LOGITS, batch, vocab, generator=gen) * 3).to(dev)
    seqs = {name: _batch(p, batch, vocab) for name, p in CONFIGS.items()}
    times: dict[str, list[float]] = {name: [] for name in CONFIGS}
    for name in CONFIGS:  # warm-up
        _round(seqs[name], pool, max(1, steps // 4))
    for _ in range(rounds):
        for name in CONFIGS:
            times[name].append(_round(seqs[name], pool, steps))
    out: dict[str, float] = {f"us_per_step_{name}": statistics.median(t) * 1e6
                             for name, t in times.items()}
    out |= {"batch": batch, "vocab": vocab, "history_tokens": PROMPT + OUTPUT}
    return out
