"""A replay's input: the requests as lengths, and how they arrive."""

from __future__ import annotations

from dataclasses import dataclass, field

from perfkit.replay.arrivals import ArrivalRule, ClosedLoop


@dataclass
class Trace:
    """A request trace as lengths only (what memory accounting needs; no token ids).

    Requests are in arrival order; the index is the FCFS tie-break."""

    prompt_len: list[int]  # tokens, shared prefix included
    max_tokens: list[int]  # output tokens to generate
    priority: list[int]  # lower runs first
    prefix_group: list[int]  # shared system prompt index, -1 for none
    prefix_len: int  # tokens of every shared prefix (the profile's shared_prefix.length)
    arrivals: ArrivalRule  # OpenLoop(a step per request) or ClosedLoop(clients, delay)
    max_model_len: int
    # outputs per request (workload.n, workload.beam_width); empty: one each
    n: list[int] = field(default_factory=list)
    beam_width: list[int] = field(default_factory=list)

    @property
    def num_requests(self) -> int:
        return len(self.prompt_len)

    @property
    def closed(self) -> ClosedLoop | None:
        """The closed loop the requests are sent in; None for an open loop."""
        return self.arrivals if isinstance(self.arrivals, ClosedLoop) else None

    @property
    def has_groups(self) -> bool:
        """Some request asks for several outputs (parallel samples or beams)."""
        return any(x > 1 for x in self.n) or any(x > 1 for x in self.beam_width)

    def width(self, i: int) -> int:
        """Outputs of request i."""
        return max(self.n[i] if self.n else 1, self.beam_width[i] if self.beam_width else 1)

    def kv_len(self, i: int) -> int:
        """K/V slots request i ever holds: prompt + output - 1, where the engine also
        stops a request at max_model_len tokens."""
        return min(self.prompt_len[i] + self.max_tokens[i], self.max_model_len) - 1
