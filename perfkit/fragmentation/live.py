"""`fragmentation --live`: the real engine's BlockPool over time, next to the replays.

Runs `Engine(profile)` (tensors, the profile's device) over the trace, stepping
it and submitting each request at its arrival step, and accounts the pool after
every step that ran a request the same way as the replays (`exact.record_engine`,
`exact.account`). Beside it: the scheduler replay, the same Engine with the null
executor (`exact.replay_scheduler`, the same token budget; it must agree at every
step) and the fast paged replay (the same token budget; with prefix caching it may
differ where the engine re-hits a preempted request's own blocks, see `paged`). With
several outputs per request there is no fast replay, and beam search agrees with the
scheduler replay only while their beams keep and drop alike: the model's log-probabilities
decide that in the engine, the null executor's synthetic ones in the replay.

Memory: on CUDA the caching allocator's reserved, allocated and inactive-split
bytes (`measure.cuda_mem`); on CPU the process RSS (psutil), sampled every step.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import psutil

from perfkit.config.profile import usable_blocks
from perfkit.config.schema import Profile
from perfkit.engine.blocks import PoolCounters
from perfkit.engine.engine import Engine
from perfkit.errors import PerfkitError
from perfkit.fragmentation.exact import ExactReplay, Recorder, record_engine, replay_scheduler
from perfkit.fragmentation.paged import simulate_paged
from perfkit.fragmentation.trace import arrival_steps, specs_trace
from perfkit.fragmentation.types import Arrivals, PolicyResult
from perfkit.replay.arrivals import open_loop
from perfkit.workload import RequestSpec, generate


@dataclass
class LiveMemory:
    device: str  # torch device the engine ran on
    rss_peak_bytes: int  # process RSS, the largest sample (every step)
    rss_end_bytes: int
    cuda_reserved_bytes: int | None  # CUDA caching allocator, at the end; None on CPU
    cuda_allocated_bytes: int | None
    cuda_inactive_split_bytes: int | None
    cuda_peak_reserved_bytes: int | None


@dataclass
class Agreement:
    """Per-step (blocks used, slots used) of a replay against the engine's."""

    name: str
    num_steps: int  # the engine's recorded steps
    num_replay_steps: int
    num_equal: int  # steps, in order, whose (blocks, slots) are equal

    @property
    def exact(self) -> bool:
        return self.num_equal == self.num_steps == self.num_replay_steps


@dataclass
class LiveReport:
    engine: PolicyResult  # the engine's pool, accounted like the replays
    kv_timeline: list[tuple[int, int]]  # the engine's own (blocks_used, slots_used) per step
    counters: PoolCounters  # the engine's BlockPool counters
    cached_free: list[int]  # cached-but-free blocks after each recorded step
    memory: LiveMemory
    replays: list[PolicyResult]  # scheduler replay (null forward), fast replay
    agreements: list[Agreement]
    wall_s: float  # the engine run (a timing; everything else is a count)


def _model_engine(profile: Profile) -> Engine:
    try:
        import perfkit.engine.layers.model_executor  # noqa: F401  the tensor half (torch)
    except ImportError as err:
        raise PerfkitError(f"--live needs the engine's model, which cannot be imported here "
                           f"({err}); use --simulate") from None
    return Engine(profile)


def available_bytes(profile: Profile) -> tuple[int, str]:
    """(bytes free for KV tensors, where) on the device the engine would pick."""
    import torch

    want = profile.engine.device
    if want != "cpu" and torch.cuda.is_available():
        free, _ = torch.cuda.mem_get_info()
        return int(free), "the GPU"
    return int(psutil.virtual_memory().available), "this machine"


def _memory(engine: object, rss: list[int]) -> LiveMemory:
    device = str(getattr(engine, "device", "cpu"))
    reserved = allocated = inactive = peak = None
    if device.startswith("cuda"):
        from perfkit.measure.cuda_mem import cuda_memory_stats

        stats = cuda_memory_stats(getattr(engine, "device", None))
        reserved, allocated = stats.reserved_bytes, stats.allocated_bytes
        inactive, peak = stats.inactive_split_bytes, stats.peak_reserved_bytes
    return LiveMemory(device, max(rss, default=0), rss[-1] if rss else 0, reserved,
                      allocated, inactive, peak)


def run_engine(profile: Profile, specs: list[RequestSpec], steps: list[int]) -> LiveReport:
    """Step the real engine over `specs`, submitted at `steps` (see module doc)."""
    engine = _model_engine(profile)
    pool, proc = engine.pool, psutil.Process()
    rec = Recorder(f"engine-{pool.block_size} (live)", pool.block_size, pool.num_blocks,
                   profile.engine.max_model_len)
    rss: list[int] = []
    start = time.perf_counter()
    finished, rejected = record_engine(engine, specs, open_loop(steps), rec,
                                       lambda: rss.append(proc.memory_info().rss))
    wall = time.perf_counter() - start
    own = [(k.blocks_used, k.slots_used) for k in engine.stats.kv_timeline]
    return LiveReport(rec.result(finished, rejected, engine.scheduler.num_preemptions,
                                 pool.counters.copy_on_writes), own,
                      dataclasses.replace(pool.counters), rec.cached_free,
                      _memory(engine, rss), [], [], wall)


def agreement(name: str, live: PolicyResult, replay: PolicyResult) -> Agreement:
    equal = 0
    for a, b in zip(live.timeline, replay.timeline):
        if a != b:
            break
        equal += 1
    return Agreement(name, len(live.timeline), len(replay.timeline), equal)


def live(profile: Profile, num_requests: int, arrivals: Arrivals, step_s: float) -> LiveReport:
    """The engine over the profile's first `num_requests` requests, and both replays."""
    specs = generate(profile.workload, profile.model.vocab_size, profile.engine.max_model_len,
                     num_requests=num_requests)
    steps = arrival_steps(specs, arrivals, step_s)
    eng = profile.engine
    profile = dataclasses.replace(
        profile, engine=dataclasses.replace(eng, max_waiting=max(eng.max_waiting, len(specs))))
    report = run_engine(profile, specs, steps)
    exact: ExactReplay = replay_scheduler(profile, specs, steps,
                                          name=f"paged-{eng.block_size} (scheduler replay)")
    report.replays = [exact.result]
    if all(max(s.n, s.beam_width) == 1 for s in specs):  # the kernel: one output each
        trace = specs_trace(specs, profile.workload.shared_prefix.length, eng.max_model_len,
                            arrivals, step_s)
        report.replays.append(simulate_paged(
            trace, usable_blocks(profile), eng.block_size, eng.max_num_seqs,
            eng.prefix_caching, f"paged-{eng.block_size} (fast replay)", timeline=True,
            max_num_batched_tokens=eng.max_num_batched_tokens,
            full_prompt=eng.admission == "full_prompt"))
    report.agreements = [agreement(r.name, report.engine, r) for r in report.replays]
    return report
