"""What the probes cost the engine, and the counters per output token and per step.

eBPF: each probe's cost per hit was calibrated when the tracer attached
(measure/probe_cost.py); the engine thread's hits are its GIL acquisitions (one
take_gil/drop_gil pair each), its syscalls and its futex calls, so its probe time is
the sum of hits x cost and `step_share` is that over the level's step time. The fallback
costs the sampling thread's CPU time (and the GIL it takes at each tick).
"""

from __future__ import annotations

from perfkit.measure.contention import ContentionRaw
from perfkit.measure.hwcounters import CounterReadings
from perfkit.result.contention import HwCounters, ProbeCostInfo, ThreadWait

PER_TOKEN = ("instructions", "cycles", "L1-dcache-load-misses", "LLC-load-misses",
             "context-switches", "page-faults")


def cost_info(raw: ContentionRaw, engine: ThreadWait | None, step_s: float
              ) -> ProbeCostInfo | None:
    if raw.source == "sampled" and raw.sampled is not None:
        return ProbeCostInfo(None, None, None, None, None, raw.sampled.cpu_s)
    cost = raw.cost
    if raw.source != "ebpf" or cost is None:
        return None
    gil_us = cost.gil_pair_s * 1e6 if raw.gil_probe == "uprobes" else None  # timed then only
    us = (gil_us, cost.syscall_s * 1e6, cost.futex_s * 1e6)
    if engine is None:
        return ProbeCostInfo(*us, None, None, None)
    c = engine.counts
    spent = ((c.gil_acquires or 0) * cost.gil_pair_s + (c.syscalls or 0) * cost.syscall_s
             + (c.futex_calls or 0) * cost.futex_s)
    return ProbeCostInfo(*us, spent, spent / step_s if step_s > 0 else None, None)


def _per(values: dict[str, float | None], names: tuple[str, ...], n: int
         ) -> dict[str, float | None]:
    return {k: (None if values.get(k) is None or n <= 0 else (values[k] or 0.0) / n)
            for k in names if k in values}


def hw_counters(r: CounterReadings | None, output_tokens: int, steps: int
                ) -> HwCounters | None:
    if r is None:
        return None
    cycles, instr = r.engine.get("cycles"), r.engine.get("instructions")
    return HwCounters(
        window_s=r.window_s, events=dict(r.process), engine_events=dict(r.engine),
        ipc=instr / cycles if instr is not None and cycles else None,
        per_token=_per(r.process, PER_TOKEN, output_tokens),
        per_step=_per(r.engine, PER_TOKEN, steps), hitm_event=r.hitm_event)
