"""The profile schema: the model, engine, sweep, SLO and gate sections and the Profile
that holds them, typed sections that check themselves on construction. The [workload]
section (what requests are sent) is in workload.py.

Every field has a default, so a profile file states only what differs.
Ranges are checked in `check()`; unknown keys are rejected by `perfkit.config.typed.build`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from perfkit.config.bounds import MAX_CONCURRENCY, MAX_COUNT, MAX_REPEATS, MAX_REQUESTS
from perfkit.config.bounds import at_most as _at_most
from perfkit.config.bounds import positive as _positive
from perfkit.config.bounds import rate as _rate
from perfkit.config.presets import DTYPE_BYTES
from perfkit.config.typed import FieldError
from perfkit.config.workload import WorkloadConfig

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

