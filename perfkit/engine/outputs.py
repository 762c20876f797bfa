"""A request's events: one per output token, as the engine appends it (TokenEvent), and
how a step's appended sequences become events (one output or several, engine/group.py).

A request with several outputs streams each output's tokens with its `index`; its beams'
tokens come when the request ends (until then a beam and its tokens can be dropped), best
beam first. Only the request's last event has `finished` set.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from perfkit.engine.group import SequenceGroup, final_outputs
from perfkit.engine.sequence import Sequence, TokenLogprobs


@dataclass
class TokenEvent:
    seq: Sequence  # the output's sequence (a group member when the request has several)
    token: int
    time_s: float  # perfkit.clock.now() when appended
    finished: bool  # the request's last event: every output has ended
    text: str | None = None  # output text this token releases (params.detokenize; "" held)
    logprobs: TokenLogprobs | None = None  # params.logprobs set
    index: int = 0  # which output (choice) of the request: sample index or beam rank
    output_finished: bool | None = None  # this output's last token (None: = finished)

    @property
    def request(self) -> Sequence:
        """The request's sequence (what add_request returned)."""
        return self.seq.head

    @property
    def ends_output(self) -> bool:
        return self.finished if self.output_finished is None else self.output_finished


def output_ended(group: SequenceGroup, seq: Sequence) -> bool:
    """Move a finished output to its group's done list; whether the request ended (its
    head then carries the request's finish reason: its best output's)."""
    group.members.remove(seq)
    group.done.append(seq)
    if not group.finished:
        return False
    group.head.finish_reason = final_outputs(group)[0].finish_reason
    return True


def token_event(seq: Sequence, now: float, text: str | None,
                logprobs: TokenLogprobs | None) -> TokenEvent:
    ended = seq.finish_reason is not None
    return TokenEvent(seq, seq.token_ids[-1], now, ended and seq.group is None, text,
                      logprobs, seq.index, ended)


def beam_events(group: SequenceGroup, now: float,
                token_text: Callable[[Sequence, int], str]) -> list[TokenEvent]:
    """The ended beam group's outputs, best first, every token of each (text: each
    token's own, when the request asked for text; beam search applies no stop strings,
    as vLLM's does not)."""
    events = []
    for rank, beam in enumerate(final_outputs(group)):
        output = beam.token_ids[beam.num_prompt_tokens:]
        text = beam.detokenizer is not None
        events += [TokenEvent(beam, token, now, False,
                              token_text(beam, token) if text else None, None, rank,
                              i == len(output) - 1)
                   for i, token in enumerate(output)]
    return events


def mark_last(events: list[TokenEvent]) -> None:
    """A group's last event of a step ends its request when every output has ended."""
    last: dict[int, TokenEvent] = {}
    for event in events:
        group = event.seq.group
        if group is not None:
            last[id(group)] = event
    for event in last.values():
        group = event.seq.group
        if group is not None and group.finished:
            event.finished = True
