"""The profile schema: typed sections that check themselves on construction.

Every field has a default, so a profile file states only what differs.
Ranges are checked in `check()`; unknown keys are rejected by `perfkit.config.typed.build`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from perfkit.config.bounds import (
    MAX_CONCURRENCY,
    MAX_COUNT,
    MAX_OUTPUTS,
    MAX_REPEATS,
    MAX_REQUESTS,
)
from perfkit.config.bounds import at_most as _at_most
from perfkit.config.bounds import positive as _positive
from perfkit.config.bounds import rate as _rate
from perfkit.config.bounds import share as _share
from perfkit.config.dataset import DatasetConfig
from perfkit.config.presets import DTYPE_BYTES
from perfkit.config.typed import FieldError

Dtype = Literal["float32", "float16", "bfloat16"]


@dataclass
class ModelConfig:
    """Real shapes of a decoder-only model; `preset` names where they came from."""

    num_layers: int
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    dtype: Dtype = "float32"
    preset: str | None = None
    rope_theta: float = 10000.0

    def check(self) -> None:
        for name in ("num_layers", "hidden_size", "num_heads", "num_kv_heads", "head_dim",
                     "intermediate_size", "vocab_size"):
            _positive(name, getattr(self, name))
        if self.num_heads % self.num_kv_heads:
            raise FieldError(
                "num_kv_heads",
                f"must divide num_heads ({self.num_heads}), got {self.num_kv_heads}",
            )
        if self.vocab_size < 64:
            raise FieldError("vocab_size", f"must be >= 64, got {self.vocab_size}")

    @property
    def num_parameters(self) -> int:
        """Weights of the Llama-style block perfkit's engine builds for these shapes
        (engine/layers/model.py; a test counts its tensors against this): per layer
        wqkv [h, (heads + 2 kv_heads) d] + wo [heads d, h] + w_gate_up [h, 2 i] +
        w_down [i, h] + 2 norms [h]; then embed and lm_head [vocab, h] and the final norm."""
        h, hd, inter = self.hidden_size, self.head_dim, self.intermediate_size
        per_layer = h * (self.num_heads + 2 * self.num_kv_heads) * hd + self.num_heads * hd * h
        per_layer += 3 * h * inter + 2 * h
        return self.num_layers * per_layer + 2 * self.vocab_size * h + h

    @property
    def weight_bytes(self) -> int:
        return self.num_parameters * DTYPE_BYTES[self.dtype]

    @property
    def kv_bytes_per_token(self) -> int:
        """K and V for every layer: 2 * layers * kv_heads * head_dim * dtype bytes."""
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim * DTYPE_BYTES[self.dtype]


@dataclass
class EngineConfig:
    block_size: int = 16
    num_blocks: int | None = None  # pool size in blocks (used when kv_memory is unset)
    kv_memory: str | None = None  # e.g. "12GiB": KV budget; wins over num_blocks when set
    max_num_seqs: int = 64  # batch cap: running sequences per step
    max_num_batched_tokens: int = 512  # token budget per step (prefill chunks + decodes)
    max_model_len: int = 1024  # prompt + output tokens of one request
    max_waiting: int = 4096  # waiting-queue cap; arrivals beyond it are rejected
    # full_prompt: a waiting request is admitted only when its whole prompt's blocks fit
    # (vLLM v1's default, scheduler_reserve_full_isl); first_chunk: its first chunk's
    admission: Literal["full_prompt", "first_chunk"] = "full_prompt"
    prefix_caching: bool = True
    # a request's several outputs (workload.n, workload.beam_width) share their blocks by
    # reference count, copied on write; false: a fork copies every block (the cost
    # without sharing: the same tokens, more blocks)
    block_sharing: bool = True
    # one block of the pool is vLLM's null block (its block 0, never handed to a request):
    # a pool of N blocks holds N - 1 for requests, as a vLLM server with
    # --num-gpu-blocks-override N (or N blocks from its memory) does; False: all N
    null_block: bool = True
    device: Literal["auto", "cpu", "cuda"] = "auto"
    # auto: decode through a paged kernel reading K/V in place, Triton on CUDA when triton
    # imports, numba on CPU for float32 (engine/layers/cpu_decode.py); else gather
    attention_backend: Literal["auto", "gather", "triton", "numba", "flex"] = "auto"
    sampling: Literal["greedy", "random"] = "greedy"
    seed: int = 0  # model weights and sampling
    cpu_threads: int = 0  # torch intra-op threads on CPU; 0 = torch's default (all cores)
    # auto: float32 weights prepacked for oneDNN on CPU (engine/layers/gemm.py); plain: x @ w
    cpu_gemm: Literal["auto", "plain"] = "auto"
    guard: bool = True  # tool-call FSM mask + loop detection (engine/guard.py)
    guard_loop_ngram: int = 0  # longest repeated cycle (tokens) looked for; 0 = loops off
    guard_loop_repeats: int = 4  # copies of the cycle that end a request with "loop"

    def check(self) -> None:
        _positive("cpu_threads", self.cpu_threads, allow_zero=True)
        _positive("guard_loop_ngram", self.guard_loop_ngram, allow_zero=True)
        if self.guard_loop_repeats < 2:
            raise FieldError("guard_loop_repeats", f"must be >= 2, got {self.guard_loop_repeats}")
        if not 1 <= self.block_size <= 1024:
            raise FieldError("block_size", f"must be between 1 and 1024, got {self.block_size}")
        for name in ("num_blocks", "max_num_seqs", "max_num_batched_tokens", "max_model_len",
                     "max_waiting"):
            _positive(name, getattr(self, name))
            _at_most(name, getattr(self, name), MAX_COUNT)
        _at_most("cpu_threads", self.cpu_threads, 4096)
        if self.kv_memory is not None:
            from perfkit.config.units import parse_size

            try:
                parse_size(self.kv_memory)
            except ValueError as err:
                raise FieldError("kv_memory", str(err).split(": ", 1)[-1]) from None


@dataclass
class LengthDist:
    """Token-length distribution: fixed is exactly `mean` (rounded, at least 1); the drawn
    kinds (uniform, normal, lognormal) are clipped to [min, max]."""

    kind: Literal["fixed", "uniform", "normal", "lognormal"] = "fixed"
    mean: float = 64.0  # fixed value, or the mean of normal/lognormal
    std: float = 0.0  # normal/lognormal spread (of the lengths, not of their log)
    min: int = 1
    max: int = 1 << 20

    def check(self) -> None:
        _positive("mean", self.mean)
        _positive("std", self.std, allow_zero=True)
        _positive("min", self.min)
        _at_most("min", self.min, MAX_COUNT)
        if self.max < self.min:
            raise FieldError("max", f"must be >= min ({self.min}), got {self.max}")
        if self.kind == "uniform" and self.max == 1 << 20:
            raise FieldError("max", "a uniform distribution needs an explicit max")
        if self.kind in ("normal", "lognormal") and not self.min <= self.mean <= self.max:
            # every length is clipped to [min, max]: a mean outside asks for what never comes
            side, bound = ("max", self.max) if self.mean > self.max else ("min", self.min)
            raise FieldError("mean", f"{self.mean:g} lies {'above' if side == 'max' else 'below'} "
                             f"{side} ({bound}), which clips every length to it: set {side} "
                             f"with it (e.g. {side}={round(self.mean)})")


@dataclass
class SharedPrefix:
    """`groups` system prompts of `length` tokens; `share` of requests start with one."""

    groups: int = 0
    length: int = 0
    share: float = 0.0

    def check(self) -> None:
        _positive("groups", self.groups, allow_zero=True)
        _at_most("groups", self.groups, MAX_COUNT)
        _positive("length", self.length, allow_zero=True)
        _share("share", self.share)


@dataclass
class PriorityClass:
    priority: int = 0  # lower runs first
    weight: float = 1.0

    def check(self) -> None:
        _positive("weight", self.weight)


@dataclass
class Arrival:
    kind: Literal["closed", "poisson", "burst", "gamma"] = "closed"
    rate: float = 0.0  # requests per second (poisson, burst, gamma); 0 = all at once
    burst_size: int = 8  # burst: requests per burst
    burstiness: float = 1.0  # gamma: shape of the inter-arrival times (1 = poisson, < 1 bursty)
    # the load's start: rate levels ramp their arrival rate, closed-loop levels their clients
    ramp: Literal["none", "linear", "exponential"] = "none"
    ramp_s: float = 0.0  # seconds to reach the level's full load

    def check(self) -> None:
        _rate("rate", self.rate, allow_zero=True)
        _positive("burst_size", self.burst_size)
        _at_most("burst_size", self.burst_size, MAX_REQUESTS)
        if not 0.01 <= self.burstiness <= 100:
            raise FieldError("burstiness", f"must be in [0.01, 100], got {self.burstiness}")
        if not 0 <= self.ramp_s <= 3600:
            raise FieldError("ramp_s", f"must be in [0, 3600] s, got {self.ramp_s}")
        if self.ramp != "none" and self.ramp_s == 0:
            raise FieldError("ramp_s", f"a {self.ramp} ramp needs ramp_s > 0")


@dataclass
class WorkloadConfig:
    num_requests: int = 64
    prompt_len: LengthDist = field(default_factory=lambda: LengthDist(mean=64))
    output_len: LengthDist = field(default_factory=lambda: LengthDist(mean=32))
    shared_prefix: SharedPrefix = field(default_factory=SharedPrefix)
    dataset: DatasetConfig = field(default_factory=DatasetConfig)  # a file instead
    tool_call_share: float = 0.0
    priorities: list[PriorityClass] = field(default_factory=list)
    arrival: Arrival = field(default_factory=Arrival)
    seed: int = 0
    # fragmentation replays, closed loop: engine steps from a request's finish to its
    # client's next arrival, beyond the next step (a real client's round trip; 0 = next)
    client_delay_steps: int = 0
    # outputs of each request, a fixed value or a distribution (a table like prompt_len):
    # n parallel samples of the prompt, or beam search of width beam_width (its beams
    # are the outputs); they share the prompt's KV blocks (engine.block_sharing)
    n: int | LengthDist = 1
    beam_width: int | LengthDist = 1

    def check(self) -> None:
        _positive("num_requests", self.num_requests)
        _at_most("num_requests", self.num_requests, MAX_REQUESTS)
        _share("tool_call_share", self.tool_call_share)
        _positive("client_delay_steps", self.client_delay_steps, allow_zero=True)
        _at_most("client_delay_steps", self.client_delay_steps, MAX_COUNT)
        for name in ("n", "beam_width"):
            _outputs_check(name, getattr(self, name))
        if self.n != 1 and self.beam_width != 1:
            raise FieldError("beam_width", "give workload.n (parallel samples) or "
                             "workload.beam_width (beam search), not both")


def _outputs_check(name: str, value: int | LengthDist) -> None:
    """Outputs per request: 1 to MAX_OUTPUTS, fixed or drawn."""
    low, high = (value, value) if isinstance(value, int) else (value.min, value.max)
    if not 1 <= low <= high <= MAX_OUTPUTS:
        what = "" if isinstance(value, int) else "a distribution's min and max "
        raise FieldError(name, f"{what}must be between 1 and {MAX_OUTPUTS}, got "
                         f"{low if isinstance(value, int) else f'{low} to {high}'}")


@dataclass
class SweepConfig:
    concurrency: list[int] = field(default_factory=lambda: [1, 2, 4, 8])
    rates: list[float] = field(default_factory=list)  # open-loop levels (req/s)
    repeats: int = 1
    warmup: int = 2  # requests per level excluded from every metric
    nvml_hz: float = 10.0
    # Closed-loop levels measure at least this many requests per client (deterministic:
    # c=8 with 24 measures >= 192), so a high level lasts as long as a low one; 0 = off.
    min_requests_per_client: int = 0
    # Closed-loop levels keep submitting (more seeded requests, up to 8x num_requests)
    # until the measured phase lasts this long; counts then depend on the machine's
    # speed (not gated exactly). 0 = off.
    min_level_s: float = 0.0
    percentiles: list[float] = field(default_factory=lambda: [50.0, 90.0, 99.0])  # reported

    def check(self) -> None:
        if not self.concurrency and not self.rates:
            raise FieldError("concurrency", "give at least one level (or some rates)")
        for i, c in enumerate(self.concurrency):
            _positive(f"concurrency[{i}]", c)
            _at_most(f"concurrency[{i}]", c, MAX_CONCURRENCY)
        for i, r in enumerate(self.rates):
            _rate(f"rates[{i}]", r)
        _positive("repeats", self.repeats)
        _at_most("repeats", self.repeats, MAX_REPEATS)
        _positive("warmup", self.warmup, allow_zero=True)
        _at_most("warmup", self.warmup, MAX_REQUESTS)
        _positive("min_requests_per_client", self.min_requests_per_client, allow_zero=True)
        _positive("min_level_s", self.min_level_s, allow_zero=True)
        if not 1 <= len(self.percentiles) <= 12 or any(not 0 < q < 100 for q in self.percentiles):
            raise FieldError("percentiles", "expected 1 to 12 percentiles, each in (0, 100), "
                             f"got {self.percentiles}")
        if not 0 < self.nvml_hz <= 20:
            raise FieldError("nvml_hz", f"must be in (0, 20] Hz, got {self.nvml_hz}")


@dataclass
class SloConfig:
    """Targets for goodput: a request is good when it meets every set target."""

    ttft_s: float | None = 1.0
    tpot_s: float | None = 0.2
    e2e_s: float | None = None
    # sweep --search: a load meets the SLOs when at least this share of its requests does
    goodput_share: float = 0.9

    def check(self) -> None:
        for name in ("ttft_s", "tpot_s", "e2e_s"):
            _positive(name, getattr(self, name))
        if not 0 < self.goodput_share <= 1:
            raise FieldError("goodput_share", f"must be in (0, 1], got {self.goodput_share}")


@dataclass
class GateRule:
    """Overrides for one metric's gate rule; a field left unset keeps the metric's default
    (see `perfkit gate`: e.g. TTFT p99 is lower-is-better within 15%)."""

    direction: Literal["lower", "higher"] | None = None  # which way is better
    rel_tol: float | None = None  # relative tolerance (0.10 = 10%)
    abs_tol: float | None = None  # absolute tolerance in the metric's unit
    required: bool | None = None  # a required metric missing from a result fails

    def check(self) -> None:
        _positive("rel_tol", self.rel_tol, allow_zero=True)
        _positive("abs_tol", self.abs_tol, allow_zero=True)


@dataclass
class GateConfig:
    rules: dict[str, GateRule] = field(default_factory=dict)


@dataclass
class Profile:
    name: str
    model: ModelConfig
    description: str = ""
    engine: EngineConfig = field(default_factory=EngineConfig)
    workload: WorkloadConfig = field(default_factory=WorkloadConfig)
    sweep: SweepConfig = field(default_factory=SweepConfig)
    slo: SloConfig = field(default_factory=SloConfig)
    gate: GateConfig = field(default_factory=GateConfig)

    def check(self) -> None:
        eng, work = self.engine, self.workload
        if work.shared_prefix.length >= eng.max_model_len:
            raise FieldError(
                "workload.shared_prefix.length",
                f"must be shorter than engine.max_model_len ({eng.max_model_len})",
            )

