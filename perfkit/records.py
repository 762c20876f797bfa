"""What the sweep records about one request, and the latencies derived from it.

All times are seconds on one monotonic clock (level-relative is fine). Derived
latencies are properties, so a record is the single source of truth:

    arrival ── scheduled ── first token ── token ── token ── finish
    |<-queue->|
    |<-------- TTFT ------->|<-ITL->|<-ITL->|
    |<------------------------- E2E -------------------------->|

TPOT = (E2E - TTFT) / (output_tokens - 1): the mean time per output token after
the first. ITL is every gap between consecutive token times, so a request with
n tokens gives n - 1 ITL samples; TPOT is one number per request.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import pairwise

# Finish reasons that end a request without completing it.
FAILED_REASONS = frozenset({"cancelled", "error"})


@dataclass
class RequestRecord:
    request_id: int
    arrival_s: float  # when the client submitted it
    prompt_tokens: int
    output_tokens: int  # tokens actually generated
    cached_tokens: int = 0  # prompt tokens served from the prefix cache
    first_token_s: float | None = None  # time of the first output token
    token_times_s: list[float] = field(default_factory=list)  # time of every output token
    finish_s: float | None = None  # time the request ended (any reason)
    scheduled_s: float | None = None  # first time the scheduler admitted it to running
    num_preemptions: int = 0
    rejected: str | None = None  # rejection reason (admission control); None if served
    finish_reason: str | None = None  # "length", "stop", "loop", "cancelled", "error", ...
    warmup: bool = False  # a warm-up request: excluded from every metric
    sent_s: float | None = None  # when it was handed to the server (>= arrival_s)
    coalesced_chunks: int = 0  # remote: token chunks read at once with the one before
    error: str | None = None  # remote: what went wrong ("timeout", "http 503", ...)
    # Remote only (None in-process and when absent): the W3C trace id of the traceparent
    # header sent with it, the server's response id (its chunks' "id"), and the wall clock
    # (time.time_ns) of arrival_s, to place its spans and find it in the server's logs.
    trace_id: str | None = None
    response_id: str | None = None
    arrival_unix_ns: int | None = None
    num_outputs: int = 1  # outputs asked for: n samples or beams (choices)
    # outputs 1 .. num_outputs - 1: each one's token times (output 0's are token_times_s)
    more_token_times_s: list[list[float]] = field(default_factory=list)

    @property
    def served(self) -> bool:
        """Admission control let it in (it may still have failed later)."""
        return self.rejected is None

    @property
    def completed(self) -> bool:
        """Served, finished, and not cancelled or errored."""
        return (
            self.served
            and self.finish_s is not None
            and self.finish_reason not in FAILED_REASONS
        )

    @property
    def ttft_s(self) -> float | None:
        """First token - arrival; falls back to token_times_s[0] if first_token_s is unset."""
        first = self.first_token_s
        if first is None and self.token_times_s:
            first = self.token_times_s[0]
        return None if first is None else first - self.arrival_s

    @property
    def e2e_s(self) -> float | None:
        return None if self.finish_s is None else self.finish_s - self.arrival_s

    @property
    def tpot_s(self) -> float | None:
        """None when output_tokens < 2 (no second token) or a time is missing; with
        several outputs, the mean of each output's (last - first) / (tokens - 1)."""
        if self.more_token_times_s:
            per = [(t[-1] - t[0]) / (len(t) - 1)
                   for t in (self.token_times_s, *self.more_token_times_s) if len(t) > 1]
            return sum(per) / len(per) if per else None
        ttft, e2e = self.ttft_s, self.e2e_s
        if self.output_tokens < 2 or ttft is None or e2e is None:
            return None
        return (e2e - ttft) / (self.output_tokens - 1)

    @property
    def itl_s(self) -> list[float]:
        """Gaps between consecutive tokens of one output, every output's."""
        return [later - earlier for times in (self.token_times_s, *self.more_token_times_s)
                for earlier, later in pairwise(times)]

    @property
    def send_late_s(self) -> float | None:
        """The client's own queue: how long after it was due the request went out."""
        return None if self.sent_s is None else self.sent_s - self.arrival_s

    @property
    def queue_s(self) -> float | None:
        return None if self.scheduled_s is None else self.scheduled_s - self.arrival_s

    @property
    def last_seen_s(self) -> float:
        """The latest time this request is known to have been in the system."""
        times = [self.arrival_s, self.scheduled_s, self.first_token_s, self.finish_s]
        times.extend(self.token_times_s[-1:])
        return max(t for t in times if t is not None)
