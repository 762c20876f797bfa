"""What a step's cost is modelled on: its batched tokens, sequences and context.

The same function reads the step in the live calibration run and on the virtual clock
(both from Engine.on_step, i.e. before commit), so a fitted model and its use cannot
disagree on what a feature counts.
"""

from __future__ import annotations

from dataclasses import dataclass

from perfkit.engine.scheduler import SchedulerOutput


@dataclass(frozen=True, slots=True)
class StepFeatures:
    prefill_tokens: int  # prompt tokens computed (chunks, re-prefills after preemption)
    decode_seqs: int  # sequences computing exactly one token and sampling it
    context_tokens: int  # KV tokens the step's sequences attend to, summed over them


def step_features(out: SchedulerOutput) -> StepFeatures:
    """One scheduled step, read before commit. A sequence is prefilling (as the engine's
    step records count it) when it does not sample or computes more than one token; its
    context is every token it attends to: computed so far plus this step's."""
    prefill = decode = context = 0
    for item in out.scheduled:
        n = item.num_new_tokens
        context += item.seq.num_computed_tokens + n
        if not item.samples or n > 1:
            prefill += n
        else:
            decode += 1
    return StepFeatures(prefill, decode, context)
