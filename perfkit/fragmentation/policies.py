"""KV memory waste by allocation policy: one trace, one memory budget, many policies.

The profile's request trace (same seed, same lengths; arrivals saturating by
default, see `frag_trace`) is replayed through
  reserve-max, pow2, oracle    contiguous reservations, first fit (`frag_contiguous`)
  paged-<bs>                   the engine's paged allocation per block size (`frag_paged`)
  paged-<bs>+prefix            the same with prefix caching, at the profile's block size
all sharing one KV budget in bytes: `--kv-memory`, or a GPU preset x 0.9 minus
the model's weights, or else the profile's own pool. Every policy reports its
slots by kind (see `frag_types`), averaged over the steps that ran a request and
at its peak, and they sum to its pool.

The waiting queue is not capped (engine.max_waiting is the front door's limit,
not memory's); requests that can never fit are counted as rejected. judgement.py
recommends a block size and says what limited the run.

Policies run in parallel processes (`jobs`, fork), each a pure function of the
trace, slowest first (paged, small blocks); with no shared prefix in the trace the
prefix policy equals paged-<bs> and is not replayed twice. Before they fork, a child
draws the trace while this process loads the compiled kernels (`trace_and_kernels`).
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import NamedTuple

from perfkit.config.presets import GPU_MEMORY
from perfkit.config.profile import pool_blocks
from perfkit.config.schema import ModelConfig, Profile
from perfkit.config.units import format_bytes, parse_size
from perfkit.engine.executor import TOP1_MEAN
from perfkit.errors import PerfkitError
from perfkit.fragmentation.contiguous import (
    reserve_exact,
    reserve_max,
    reserve_pow2,
    simulate_contiguous,
)
from perfkit.fragmentation.groups import expand, replay_paged
from perfkit.fragmentation.judgement import Recommendation, recommend
from perfkit.fragmentation.paged import simulate_paged
from perfkit.fragmentation.trace import lengths_trace
from perfkit.fragmentation.types import Arrivals, PolicyResult
from perfkit.replay.arrivals import ClosedLoop, OpenLoop
from perfkit.replay.trace import Trace

GPU_UTILIZATION = 0.9  # share of device memory the server may use (vLLM's default)
OVERLAP_MAX_REQUESTS = 500_000  # a child draws the trace up to here (trace_and_kernels)
CONTIGUOUS = {"reserve-max": reserve_max, "pow2": reserve_pow2, "oracle": reserve_exact}


@dataclass(frozen=True)
class Budget:
    """The KV memory every policy shares."""

    bytes: int
    source: str  # where it came from, for the output
    kv_bytes_per_token: int  # K and V for every layer

    @property
    def slots(self) -> int:
        return self.bytes // self.kv_bytes_per_token


def weight_bytes(model: ModelConfig) -> int:
    """Bytes of the Llama-style weights perfkit's engine allocates for this shape."""
    return model.weight_bytes


def kv_budget(profile: Profile, kv_memory: str | None, gpu: str | None) -> Budget:
    """--kv-memory, or --gpu (x 0.9, minus weights), or the profile's pool."""
    per_token = profile.model.kv_bytes_per_token
    if kv_memory is not None and gpu is not None:
        raise PerfkitError("--kv-memory and --gpu both set a KV budget; give one of them")
    if kv_memory is not None:
        size = parse_size(kv_memory, "--kv-memory")
        if size < per_token:
            raise PerfkitError(f"--kv-memory: {kv_memory!r} holds no token of this model "
                               f"({format_bytes(per_token)} of K/V per token)")
        return Budget(size, f"--kv-memory {kv_memory}", per_token)
    if gpu is not None:
        if gpu not in GPU_MEMORY:
            raise PerfkitError(f"--gpu: unknown GPU {gpu!r}; choose one of "
                               f"{', '.join(GPU_MEMORY)}")
        weights = weight_bytes(profile.model)
        size = int(GPU_MEMORY[gpu] * GPU_UTILIZATION) - weights
        if size < per_token:
            raise PerfkitError(f"--gpu {gpu}: the model's weights "
                               f"({format_bytes(weights)}) leave no room for KV")
        return Budget(size, f"{gpu} x {GPU_UTILIZATION} - weights {format_bytes(weights)}",
                      per_token)
    blocks, bs = pool_blocks(profile), profile.engine.block_size
    return Budget(blocks * bs * per_token, f"profile pool ({blocks} blocks x {bs})", per_token)


@dataclass(frozen=True)
class FragConfig:
    block_sizes: tuple[int, ...] = (8, 16, 32, 64, 128)
    num_requests: int = 10_000
    arrivals: Arrivals = "saturate"
    step_s: float = 0.025  # seconds per engine step, for --arrivals profile
    jobs: int = 2  # processes replaying policies
    clients: int = 0  # --arrivals closed: clients (the delay: workload.client_delay_steps)
    jit: bool = True  # the compiled replays (False: the plain-Python reference)
    # beam search replays: the null executor's mean top-1 probability (fragmentation/groups)
    beam_top1: float = TOP1_MEAN


@dataclass
class FragReport:
    profile: Profile
    budget: Budget
    config: FragConfig
    trace: Trace
    policies: list[PolicyResult]
    recommendation: Recommendation
    policy_cpu_s: dict[str, float] = field(default_factory=dict)  # CPU seconds per replay
    total_s: float = 0.0  # wall seconds, trace + replays
    num_procs: int = 1  # processes that ran the replays
    # a closed loop with a client delay: paged-<block_size>'s preemptions with no delay,
    # the other end of the range a real front end lands in (a bursty one between the two)
    no_delay_preemptions: int | None = None


# -- replays ---------------------------------------------------------------------------
_TRACE: Trace | None = None  # the trace forked workers replay
# with several outputs per request: the profile (paged replays run the Engine), the
# beam model's mean top-1 probability, and the trace as contiguous policies reserve it
_GROUPS: tuple[Profile, float, Trace] | None = None


class Job(NamedTuple):
    """One policy's replay: what the forked worker needs besides the trace."""

    name: str  # the policy
    block_size: int  # paged; 0 for contiguous
    pool: int  # blocks (paged) or slots (contiguous)
    max_num_seqs: int
    max_num_batched_tokens: int  # the token budget per step (paged)
    full_prompt: bool  # admission: the whole prompt's blocks must fit (paged)
    jit: bool  # the compiled replay


def _replay(job: Job) -> tuple[PolicyResult, float]:
    """One policy's replay and the CPU seconds it took."""
    assert _TRACE is not None
    start = time.process_time()
    if _GROUPS is not None:
        profile, top1, outputs = _GROUPS
        if job.name in CONTIGUOUS:
            result = simulate_contiguous(outputs, job.pool, CONTIGUOUS[job.name],
                                         job.max_num_seqs, job.name, use_jit=job.jit)
        else:
            result = replay_paged(profile, _TRACE, job.name, job.block_size, job.pool,
                                  job.name.endswith("+prefix"), top1)
    elif job.name in CONTIGUOUS:
        result = simulate_contiguous(_TRACE, job.pool, CONTIGUOUS[job.name], job.max_num_seqs,
                                     job.name, use_jit=job.jit)
    else:
        result = simulate_paged(_TRACE, job.pool, job.block_size, job.max_num_seqs,
                                job.name.endswith("+prefix"), job.name,
                                max_num_batched_tokens=job.max_num_batched_tokens,
                                full_prompt=job.full_prompt, use_jit=job.jit)
    return result, time.process_time() - start


def _jobs(profile: Profile, budget: Budget, cfg: FragConfig, trace: Trace) -> list[Job]:
    """Replays to run, the slowest (paged, small blocks) first."""
    eng, per_token = profile.engine, budget.kv_bytes_per_token
    rules = (eng.max_num_seqs, eng.max_num_batched_tokens, eng.admission == "full_prompt",
             cfg.jit)
    null = int(eng.null_block)  # each paged pool gives one block to vLLM's null block

    def usable(bs: int) -> int:
        return budget.bytes // (per_token * bs) - null

    jobs: list[Job] = []
    for bs in cfg.block_sizes:
        if usable(bs) < 1:
            held = " but the null block (engine.null_block)" if usable(bs) + null else ""
            raise PerfkitError(f"--block-sizes: the KV budget ({format_bytes(budget.bytes)}) "
                               f"holds no block of {bs} tokens{held}")
        jobs.append(Job(f"paged-{bs}", bs, usable(bs), *rules))
    bs = eng.block_size
    if _has_shared_prefix(trace, bs) or bs not in cfg.block_sizes:
        jobs.append(Job(f"paged-{bs}+prefix", bs, usable(bs), *rules))
    jobs += [Job(name, 0, budget.slots, *rules) for name in CONTIGUOUS]
    return jobs


def _has_shared_prefix(trace: Trace, bs: int) -> bool:
    return trace.prefix_len // bs > 0 and any(g >= 0 for g in trace.prefix_group)


def warm_kernels() -> None:
    """Compile (first run) or load (cached) both kernels here, before the workers fork:
    they inherit the machine code instead of each loading or compiling it again."""
    tiny = Trace([1], [1], [0], [-1], 0, OpenLoop((0,)), 8)
    simulate_paged(tiny, 1, 1, 1)
    simulate_contiguous(tiny, 8, reserve_exact, 1, "warm-up")


def _can_fork() -> bool:
    return "fork" in multiprocessing.get_all_start_methods()


def trace_and_kernels(profile: Profile, cfg: FragConfig, num_procs: int) -> Trace:
    """The profile's trace, with the compiled kernels loaded in this process for the
    workers to inherit (`warm_kernels`). Neither needs the other and each is ~0.1 s at
    100k requests (the kernels: mostly numba setting itself up, whatever the trace):
    with more than one process, a forked child draws the trace while this one loads.
    Sending the trace back (pickled, ~0.2 us a request) outweighs the load it hides
    past OVERLAP_MAX_REQUESTS."""
    args = (profile, cfg.num_requests, cfg.arrivals, cfg.step_s, cfg.clients)
    if not cfg.jit:
        return lengths_trace(*args)
    if num_procs <= 1 or cfg.num_requests > OVERLAP_MAX_REQUESTS or not _can_fork():
        trace = lengths_trace(*args)
        warm_kernels()
        return trace
    pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("fork"))
    try:
        drawn = pool.submit(lengths_trace, *args)
        warm_kernels()
        return drawn.result()
    finally:
        pool.shutdown(wait=False)  # the child exits on its own once the trace is sent


def _run_jobs(jobs: list[Job], trace: Trace, num_procs: int,
              groups: tuple[Profile, float] | None = None) -> list[tuple[PolicyResult, float]]:
    """Each job's replay, in `num_procs` forked workers sharing `trace` (inherited, not
    pickled) and the kernels loaded before (`trace_and_kernels`); `groups` (profile, beam
    top-1 mean) when requests have several outputs."""
    global _TRACE, _GROUPS
    _TRACE = trace
    _GROUPS = None if groups is None else (*groups, expand(trace))
    try:
        if num_procs <= 1 or not _can_fork():
            return [_replay(job) for job in jobs]
        ctx = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(max_workers=num_procs, mp_context=ctx) as pool:
            return list(pool.map(_replay, jobs, chunksize=1))
    finally:
        _TRACE = _GROUPS = None


def simulate(profile: Profile, budget: Budget, cfg: FragConfig) -> FragReport:
    """Replay every policy over the profile's trace (see module doc)."""
    start = time.perf_counter()
    procs = min(cfg.jobs, os.cpu_count() or 1)
    trace = trace_and_kernels(profile, cfg, procs)
    if trace.has_groups and trace.closed:
        raise PerfkitError("--arrivals closed: not with several outputs per request "
                           "(workload.n, workload.beam_width); use saturate or profile")
    jobs = _jobs(profile, budget, cfg, trace)
    procs = min(procs, len(jobs))
    groups = (profile, cfg.beam_top1) if trace.has_groups else None
    done = _run_jobs(jobs, trace, procs, groups)
    results = {r.name: (r, s) for r, s in done}
    prefix_name = f"paged-{profile.engine.block_size}+prefix"
    if prefix_name not in results:  # no shared prefix: identical to the plain replay
        plain, _ = results[f"paged-{profile.engine.block_size}"]
        results[prefix_name] = (dataclasses.replace(plain, name=prefix_name), 0.0)
    order = [*CONTIGUOUS, *(f"paged-{bs}" for bs in cfg.block_sizes), prefix_name]
    policies = [results[name][0] for name in order]
    no_delay = _no_delay_preemptions(jobs, trace, f"paged-{profile.engine.block_size}")
    return FragReport(profile, budget, cfg, trace, policies, recommend(policies),
                      {name: results[name][1] for name in order}, time.perf_counter() - start,
                      procs, no_delay)


def _no_delay_preemptions(jobs: list[Job], trace: Trace, name: str) -> int | None:
    """A closed loop with a client delay: the named paged policy's preemptions when each
    client's next request comes with no delay (None for other arrivals)."""
    job = next((j for j in jobs if j.name == name), None)
    loop = trace.closed
    if loop is None or not loop.delay or job is None:
        return None
    no_delay = dataclasses.replace(trace, arrivals=ClosedLoop(loop.clients, 0))
    result, _ = _run_jobs([job], no_delay, 1)[0]
    return result.num_preempted
