"""A request's several outputs on shared blocks: n parallel samples or a beam of width W.

The life of a group (PagedAttention, SOSP 2023, §4.4), all of it bookkeeping:

    root: the request's one sequence waits and prefills its prompt (one block table)
      -> its first sample forks it (engine/forks.py): the n samples (or W beams) share
         every block of the prompt by reference count, the partly filled last one too;
         a member's first write into a shared block copies it (copy-on-write,
         KVManager.allocate: a block copy on the device)
    samples then decode on their own; beams step together: each step keeps the best W of
    all live beams' candidates by cumulative log-probability, a parent that keeps several
    children is forked, and one that keeps none is dropped and frees its blocks.
    Preemption takes the whole group (recompute): its members' blocks are freed and a
    root holding their common prefix waits; once that prefix is computed again it forks
    into the members, which recompute their own tails (the fork point moves, the tokens
    do not).

Invariants: a group's members share its head's priority and arrival order (the scheduler
treats them as one request); before the first fork `members` is empty and `root` is the
head; once forked `root` is None, except while a preempted group waits or recomputes
its common prefix (`resuming`).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Literal

from perfkit.engine.sampling_params import sampling_key
from perfkit.engine.sequence import SeqStatus, Sequence

GroupKind = Literal["sample", "beam"]
LENGTH_PENALTY = 1.0  # vLLM's beam search default: score = cum_logprob / len ** penalty


@dataclass(eq=False)
class SequenceGroup:
    kind: GroupKind  # "sample": n independent samples; "beam": beam search
    width: int  # n samples or W beams (>= 2)
    head: Sequence  # the request's sequence (add_request's): output 0 once forked
    root: Sequence | None  # waits or prefills before a fork (see module doc); else None
    members: list[Sequence] = field(default_factory=list)  # live outputs, by index / rank
    done: list[Sequence] = field(default_factory=list)  # outputs that ended, in order
    seed: int | None = None  # output i samples with seed + i (vLLM's rule, output_key)
    share: bool = True  # False: a fork copies every block it shares (the unshared cost)

    @property
    def forked(self) -> bool:
        return bool(self.members) or bool(self.done)

    @property
    def resuming(self) -> bool:
        """Preempted after its fork: `root` recomputes the members' common prefix."""
        return self.root is not None and self.forked

    @property
    def seats(self) -> int:
        """Running sequences it takes against max_num_seqs: its width until it forks,
        then its live members."""
        return len(self.members) if self.forked else self.width

    @property
    def finished(self) -> bool:
        return self.forked and not self.members and self.root is None


def start_group(seq: Sequence, kind: GroupKind, width: int, seed: int | None = None,
                share: bool = True) -> SequenceGroup:
    """Make `seq` (a new request) the head and root of a group of `width` outputs."""
    if width < 2:
        raise ValueError(f"a group needs at least 2 outputs, got {width}")
    group = SequenceGroup(kind, width, seq, seq, seed=seed, share=share)
    seq.sample_key = output_key(group, 0)
    seq.group = group
    return group


def output_key(group: SequenceGroup, index: int) -> int:
    """Output `index`'s sampling key: a seeded request's output i samples as a request
    with seed + i would (vLLM gives its parallel samples seed + i); unseeded, output 0
    keeps the head's key and the others derive theirs from it."""
    if group.seed is not None:
        return sampling_key(group.seed + index, 0)
    head = group.head.sample_key
    return head if index == 0 else sampling_key(head, index)


def seats_of(seq: Sequence) -> int:
    """max_num_seqs seats a running sequence takes: a group's root takes its group's."""
    group = seq.group
    return group.seats if group is not None and group.root is seq else 1


def row_outputs(seq: Sequence) -> tuple[str, int]:
    """What a sampling row of `seq` must give the engine: ("token", 1) one sampled token;
    ("samples", n) the group's first n samples (one row, n draws); ("beam", W) the row's
    W best (token, log-probability) candidates, best first."""
    group = seq.group
    if group is None or (group.kind == "sample" and group.forked):
        return "token", 1
    if group.kind == "sample":
        return "samples", group.width
    return "beam", group.width


def clone(parent: Sequence, seq_id: int) -> Sequence:
    """A new output of parent's group with parent's tokens and state, holding no blocks
    (KVManager.fork shares them)."""
    return Sequence(
        seq_id=seq_id, token_ids=list(parent.token_ids),
        num_prompt_tokens=parent.num_prompt_tokens, max_tokens=parent.max_tokens,
        priority=parent.priority, arrival_order=parent.arrival_order,
        tool_call=parent.tool_call, params=parent.params, sample_key=parent.sample_key,
        detokenizer=copy.deepcopy(parent.detokenizer), grammar=parent.grammar,
        status=SeqStatus.RUNNING,
        block_hashes=list(parent.block_hashes), fsm_state=parent.fsm_state,
        loop_start=parent.loop_start, group=parent.group, index=parent.index,
        cum_logprob=parent.cum_logprob,
    )


def common_prefix(members: list[Sequence]) -> list[int]:
    """The tokens every member starts with, less at least each one's last token (so every
    member still has a token to compute, and its logits, after the prefix)."""
    first = members[0].token_ids
    end = min(m.num_tokens for m in members) - 1
    for m in members[1:]:
        ids = m.token_ids
        i = 0
        while i < end and ids[i] == first[i]:
            i += 1
        end = i
    return first[:end]


def beam_score(seq: Sequence) -> float:
    """vLLM's get_beam_search_score: cumulative log-probability / length ** penalty
    (the length counts the prompt; the engine never stops at EOS)."""
    return seq.cum_logprob / (seq.num_tokens ** LENGTH_PENALTY)


@dataclass(frozen=True)
class BeamChoice:
    parent: Sequence  # the live beam the candidate extends
    token: int
    cum_logprob: float  # parent's plus the token's log-probability


def select_beams(candidates: list[tuple[Sequence, list[tuple[int, float]]]],
                 width: int) -> list[BeamChoice]:
    """The `width` best extensions of the live beams (each with its best candidates, best
    first), best first; ties go to the better-ranked parent, then the better candidate,
    so the choice is deterministic."""
    scored = [(parent.cum_logprob + lp, rank, k, parent, token)
              for rank, (parent, cands) in enumerate(candidates)
              for k, (token, lp) in enumerate(cands)]
    scored.sort(key=lambda x: (-x[0], x[1], x[2]))
    return [BeamChoice(parent, token, cum) for cum, _, _, parent, token in scored[:width]]


def final_outputs(group: SequenceGroup) -> list[Sequence]:
    """The outputs a finished group returns: its samples by index, or its best `width`
    beams by score (beams that ended early included)."""
    if group.kind == "sample":
        return sorted(group.done, key=lambda s: s.index)
    return sorted(group.done, key=beam_score, reverse=True)[:group.width]
