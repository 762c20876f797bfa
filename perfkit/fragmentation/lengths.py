"""`workload.generate(..., tokens=False)`'s lengths as columns, for million-request traces.

The same streams, draws and arithmetic as `workload.generate` (tests/fragmentation check
equality for every built-in profile), without a RequestLengths object per request, with
a lognormal's parameters computed once, one priority drawn as the single random() call
`choices` makes, and no arrival times when the trace does not use them (they have a
stream of their own, so the other draws do not move).
"""

from __future__ import annotations

from dataclasses import dataclass

from perfkit.config.workload import WorkloadConfig
from perfkit.workload import length_sampler, stream


@dataclass
class Columns:
    prompt_len: list[int]
    max_tokens: list[int]
    priority: list[int]
    prefix_group: list[int]  # -1: none


def length_columns(cfg: WorkloadConfig, max_model_len: int, num: int) -> Columns:
    """Prompt and output lengths, priorities and prefix groups of `num` requests."""
    lengths, choice = stream(cfg.seed, "lengths"), stream(cfg.seed, "choice")
    sp = cfg.shared_prefix
    prios = [p.priority for p in cfg.priorities] or [0]
    weights = [p.weight for p in cfg.priorities] or [1.0]
    prompt_draw = length_sampler(cfg.prompt_len, lengths)
    output_draw = length_sampler(cfg.output_len, lengths)
    rand, pick = choice.random, choice.choices
    one_prio, tool_share = prios[0] if len(prios) == 1 else None, cfg.tool_call_share
    cols = Columns([0] * num, [0] * num, [0] * num, [-1] * num)
    for i in range(num):
        group = -1
        if sp.groups and rand() < sp.share:
            group = choice.randrange(sp.groups)
        if one_prio is None:
            cols.priority[i] = pick(prios, weights)[0]
        else:
            rand()  # what choices() draws for one class
            cols.priority[i] = one_prio
        rand() < tool_share  # noqa: B015  the tool-call draw, kept for the stream's order
        prompt_len = prompt_draw() + (sp.length if group >= 0 else 0)
        out_len = output_draw()
        room = max_model_len - prompt_len
        cols.prompt_len[i] = prompt_len
        cols.max_tokens[i] = min(out_len, room) if room >= 1 else out_len
        cols.prefix_group[i] = group
    return cols
