"""What happens to a group's block tables (engine/group.py) when it forks, steps its beams,
is preempted and resumes. Bookkeeping only: a fork takes references (KVManager.fork),
and the copy-on-write of a shared block comes at the writer's next allocation.

Running order: a group's members take the place of its root in `Scheduler.running`
(admission order, which preemption and the running loop follow), best beam first.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from perfkit.config.units import cdiv
from perfkit.engine.group import (
    SequenceGroup,
    clone,
    common_prefix,
    output_key,
    row_outputs,
    select_beams,
)
from perfkit.engine.sequence import SeqStatus, Sequence, TokenLogprobs

if TYPE_CHECKING:
    from perfkit.engine.executor import ExecutorOutput
    from perfkit.engine.scheduler import Scheduler

NewId = Callable[[], int]  # the engine's next sequence id


def blocks_at_end(seq: Sequence, max_model_len: int, block_size: int) -> int:
    """Blocks the request holds at its end when it runs alone: its final length's; a
    group's outputs share the prompt's full blocks (each copies the rest), or share
    nothing (SequenceGroup.share False)."""
    final = cdiv(min(seq.num_prompt_tokens + seq.max_tokens, max_model_len), block_size)
    group = seq.group
    if group is None:
        return final
    if not group.share:
        return group.width * final
    return final + (group.width - 1) * (final - seq.num_prompt_tokens // block_size)


def advance(sched: Scheduler, sampling: list[Sequence], result: ExecutorOutput,
            new_id: NewId) -> tuple[list[Sequence], list[TokenLogprobs | None]]:
    """Append the step's tokens: one per row, a group's first sample forks it, a group's
    beams step together. Returns the sequences with a new last token, in row order (a
    fork's outputs and a beam step's survivors in their group's first row's place), and
    each one's logprobs (a row's own sampled token only: output 0 of a fork)."""
    appended: list[Sequence] = []
    logprobs: list[TokenLogprobs | None] = []
    beams: dict[int, list[tuple[Sequence, list[tuple[int, float]]]]] = {}
    for row, seq in enumerate(sampling):
        kind, _ = row_outputs(seq)
        group = seq.group
        own = None if result.logprobs is None else result.logprobs[row]
        if kind == "token":
            seq.token_ids.append(result.token_ids[row])
            if row in result.multi:  # an output of a group: its log-probability
                seq.cum_logprob += result.multi[row][0][1]
            appended.append(seq)
            logprobs.append(own)
        elif group is not None and not group.forked:
            outputs = first_fork(sched, seq, result.multi[row], new_id)
            appended += outputs
            logprobs += [own] + [None] * (len(outputs) - 1)
        elif group is not None:
            if id(group) not in beams:
                beams[id(group)] = []
                appended.append(seq)  # a placeholder: the step's beams go here
                logprobs.append(None)
            beams[id(group)].append((seq, result.multi[row]))
    for cands in beams.values():
        group = cands[0][0].group
        assert group is not None
        at = appended.index(cands[0][0])
        kept = beam_step(sched, group, cands, new_id)
        appended[at:at + 1] = kept
        logprobs[at:at + 1] = [None] * len(kept)
    return appended, logprobs


def _replace_running(sched: Scheduler, old: list[Sequence], new: list[Sequence]) -> None:
    """`new` take the running place of `old` (all running, `old` non-empty)."""
    at = min(sched.running.index(s) for s in old)
    gone = {id(s) for s in old}
    sched.running[:] = [s for s in sched.running if id(s) not in gone]
    sched.running[at:at] = new


def first_fork(sched: Scheduler, root: Sequence, outputs: list[tuple[int, float]],
               new_id: NewId) -> list[Sequence]:
    """The root's first sample: one output per (token, log-probability), sample order or
    best beam first. Output 0 is the root itself; the others share its blocks. Returns
    the members, each with its token appended."""
    group = root.group
    assert group is not None and group.root is root and not group.forked
    members = [root] + [clone(root, new_id()) for _ in outputs[1:]]
    for member in members[1:]:
        sched.kv.fork(root, member)
    for i, (member, (token, logprob)) in enumerate(zip(members, outputs, strict=True)):
        member.index = i
        member.sample_key = output_key(group, i)
        member.token_ids.append(token)
        member.cum_logprob = logprob
    group.root, group.members = None, members
    at = sched.running.index(root)
    sched.running[at:at + 1] = members
    return members


def beam_step(sched: Scheduler, group: SequenceGroup,
              candidates: list[tuple[Sequence, list[tuple[int, float]]]],
              new_id: NewId) -> list[Sequence]:
    """Keep the best `width` extensions of the live beams: a parent keeping k children
    continues as the first and is forked k - 1 times (before any token is appended); a
    parent keeping none is dropped and frees its blocks. Returns the new beams, best
    first, each with its token appended."""
    old = [parent for parent, _ in candidates]
    chosen = select_beams(candidates, group.width)
    taken: set[int] = set()
    kept = []
    for choice in chosen:
        parent = choice.parent
        if id(parent) in taken:  # a further child: a fork of the parent as it was
            beam = clone(parent, new_id())
            sched.kv.fork(parent, beam)
        else:
            beam = parent
            taken.add(id(parent))
        kept.append(beam)
    for parent in old:
        if id(parent) not in taken:
            sched.finish(parent, "dropped")  # its blocks go back (the shared ones stay)
    survivors = [p for p in old if id(p) in taken]
    _replace_running(sched, survivors, kept)
    sched.num_seats += len(kept) - len(survivors)
    for rank, (beam, choice) in enumerate(zip(kept, chosen, strict=True)):
        beam.token_ids.append(choice.token)
        beam.cum_logprob = choice.cum_logprob
        beam.index = rank
    group.members = kept
    return kept


def resume_root(group: SequenceGroup) -> Sequence:
    """A preempted group waits as one root holding its members' common prefix (their
    blocks were freed: they recompute from 0)."""
    for member in group.members:
        member.num_computed_tokens = 0
        member.status = SeqStatus.WAITING
    head = group.head
    root = Sequence(
        seq_id=head.seq_id, token_ids=common_prefix(group.members),
        num_prompt_tokens=head.num_prompt_tokens, max_tokens=head.max_tokens,
        priority=head.priority, arrival_order=head.arrival_order, tool_call=head.tool_call,
        params=head.params, group=group, num_preemptions=1,
    )
    group.root = root
    return root


def resume(sched: Scheduler, group: SequenceGroup) -> None:
    """The root has computed the members' common prefix: they share its blocks again and
    run in its place, each with its own tail still to compute."""
    root = group.root
    assert root is not None and not root.num_uncomputed
    for member in group.members:
        sched.kv.fork(root, member)
        member.status = SeqStatus.RUNNING
    at = sched.running.index(root)
    sched.running[at:at + 1] = group.members
    sched.kv.free(root)
    root.status = SeqStatus.FINISHED
    group.root = None
