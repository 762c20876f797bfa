"""The engine on a virtual clock: the real Engine (null executor, no tensors) whose time
advances by the step-time model's price of each step it takes.

    now ─ step k: [now, now + t_step(k)) ─ its tokens at its end ─ actions due by then
        ─ step k + 1 ...                     (idle: jump to the next action due)

Invariants, the live loop's (engine/async_engine.py, sweep/loops.py) on this clock:
- A step's tokens are stamped at the end of its period (the step and the event loop's
  turn after it: that is what the model prices), the moment the next step may start.
- Actions due (a submission, a client's next request) run before the next step, so a
  client that finishes at step k submits its next request before step k + 1, as live.
- Scheduling is the engine's own: the scheduler, block pool and prefix cache run as in a
  sweep; only the executor (null) and the clock (this) differ.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass

from perfkit.engine.engine import Engine
from perfkit.engine.scheduler import SchedulerOutput
from perfkit.engine.sequence import Sequence
from perfkit.predict.features import StepFeatures, step_features
from perfkit.predict.step_model import StepModel
from perfkit.records import RequestRecord
from perfkit.workload import RequestSpec

OnEnd = Callable[[RequestRecord], None]


@dataclass
class _InFlight:
    record: RequestRecord
    seq: Sequence
    on_end: OnEnd


class VirtualClock:
    def __init__(self, engine: Engine, model: StepModel) -> None:
        self.engine = engine
        self.model = model
        self.now = 0.0  # seconds since the level started
        self.steps = 0  # steps priced (a count)
        self.busy_s = 0.0  # virtual seconds spent in steps
        self._due: list[tuple[float, int, Callable[[], None]]] = []  # heap: (time, order, act)
        self._order = 0
        self._live: dict[int, _InFlight] = {}  # by seq_id
        self._features = StepFeatures(0, 0, 0)
        self._last = SchedulerOutput()
        engine.on_step = self._on_step

    def time(self) -> float:
        return self.now

    def at(self, when: float, action: Callable[[], None]) -> None:
        """Run `action` once the clock reaches `when` (before any later step)."""
        heapq.heappush(self._due, (when, self._order, action))
        self._order += 1

    def submit(self, spec: RequestSpec, warmup: bool, arrival_s: float | None,
               on_end: OnEnd) -> None:
        """Add the request now; `arrival_s` (open loop) is its intended arrival, None: now.
        `on_end(record)` runs when it ends (at once when admission control rejects it)."""
        seq, rejected = self.engine.add_request(spec)
        record = RequestRecord(
            request_id=spec.request_id, arrival_s=self.now if arrival_s is None else arrival_s,
            prompt_tokens=len(spec.prompt), output_tokens=0, rejected=rejected, warmup=warmup,
            num_outputs=max(spec.n, spec.beam_width))
        record.more_token_times_s = [[] for _ in range(record.num_outputs - 1)]
        if rejected is not None:
            record.finish_reason = "rejected"
            on_end(record)
            return
        self._live[seq.seq_id] = _InFlight(record, seq, on_end)

    def run(self) -> None:
        """Until nothing is due and the engine has no work."""
        engine = self.engine
        while self._due or engine.has_work:
            while self._due and self._due[0][0] <= self.now:
                heapq.heappop(self._due)[2]()
            if engine.has_work:
                self._step()
            elif self._due:
                self.now = max(self.now, self._due[0][0])

    def _on_step(self, out: SchedulerOutput) -> None:
        """Before the step runs (before commit): its features, its admissions' start."""
        self._last = out
        self._features = step_features(out)
        for seq in out.admitted:
            flight = self._live.get(seq.seq_id)
            if flight is not None and flight.record.scheduled_s is None:
                flight.record.scheduled_s = self.now

    def _step(self) -> None:
        events = self.engine.step()
        out = self._last
        if not out.scheduled:
            if not out.preempted:
                raise RuntimeError("scheduler made no progress")  # an engine bug
            return
        period = self.model.step_s(self._features)
        self.now += period
        self.busy_s += period
        self.steps += 1
        for event in events:
            flight = self._live[event.request.seq_id]
            rec = flight.record
            (rec.more_token_times_s[event.index - 1] if event.index
             else rec.token_times_s).append(self.now)
            if event.finished:
                self._end(flight)

    def _end(self, flight: _InFlight) -> None:
        rec, seq = flight.record, flight.seq
        del self._live[seq.seq_id]
        every = [t for t in (rec.token_times_s, *rec.more_token_times_s) if t]
        rec.output_tokens = sum(map(len, every))
        rec.first_token_s = min(t[0] for t in every)
        rec.finish_s = max(t[-1] for t in every)
        rec.cached_tokens = seq.num_cached_tokens
        rec.num_preemptions = seq.num_preemptions
        rec.finish_reason = seq.finish_reason
        flight.on_end(rec)
