"""The engine behind the server: admission, in-flight requests, counters.

The AsyncEngine's stepping task runs in the server's own event loop. A step is
synchronous compute (the model runs on the loop's thread), so HTTP I/O waits for
the step in progress; between steps the loop serves sockets. On CPU with small
models a step takes milliseconds; that stall is part of what a sweep through the
server measures, as it is for any single-threaded engine front end.

Admission, in order: the server's token quota (prompt + max_tokens of every
accepted, unfinished request, `--max-queued-tokens`), then the engine's own
reasons (scheduler.check_admission and the guard). HTTP statuses in REJECTIONS.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import Counter
from dataclasses import dataclass, field

from perfkit.engine.async_engine import AsyncEngine, RequestStream
from perfkit.engine.engine import Engine
from perfkit.engine.scheduler import SchedulerOutput
from perfkit.serve.protocol import ApiError, GenerateRequest, ModelInfo, Prompt
from perfkit.workload import RequestSpec

log = logging.getLogger("perfkit.serve")

RETRY_AFTER_S = 1  # Retry-After on 429/503: steps are milliseconds, the queue turns over fast

# engine rejection reason -> (HTTP status, what the client should do)
REJECTIONS: dict[str, tuple[int, str]] = {
    "prompt_too_long": (400, "the prompt has {prompt} tokens; max_model_len is {max_len}"),
    "exceeds_kv_pool": (400, "prompt + max_tokens needs more KV blocks than the whole pool; "
                             "lower max_tokens"),
    "tool_call_budget": (400, "max_tokens is too small for the shortest valid tool call"),
    "structured_budget": (400, "max_tokens is too small for the shortest output the tools or "
                               "response_format allow"),
    "guard_off": (400, "tools and response_format need the guard (the profile sets "
                       "engine.guard = false)"),
    "queue_full": (429, "the waiting queue is full; retry later"),
    "too_many_outputs": (400, "n (or best_of) asks for more outputs than the server runs "
                              "at once (max_num_seqs) or computes in a step; lower it"),
}


@dataclass
class ServeCounters:
    """Counts since start (Prometheus counters)."""

    prompt_tokens: int = 0  # prompts of admitted requests (first admission)
    prefix_queries: int = 0  # tokens looked up in the prefix cache, every admission
    prefix_hits: int = 0  # of those, tokens found cached
    finished: Counter[str] = field(default_factory=Counter)  # by finish_reason
    rejected: Counter[str] = field(default_factory=Counter)  # by reason (incl. token_quota)


def default_quota(engine: Engine) -> int:
    """Twice the pool's token slots: more than that queued waits longer than a pool turnover."""
    return 2 * engine.pool.num_blocks * engine.block_size


class ServerState:
    def __init__(self, engine: Engine, model: ModelInfo, max_queued_tokens: int) -> None:
        self.engine = engine
        self.model = model
        self.max_queued_tokens = max_queued_tokens  # 0 = no quota
        self.counters = ServeCounters()
        self.inflight: dict[RequestStream, int] = {}  # accepted, unfinished -> quota tokens
        self.queued_tokens = 0
        self.draining = False  # after SIGTERM/SIGINT: new requests get 503
        self.engine_error: str | None = None
        self.idle = asyncio.Event()  # set while nothing is in flight
        self.idle.set()
        self.async_engine = AsyncEngine(engine)
        self._ids = itertools.count()
        engine.on_step = self._on_step

    async def start(self) -> None:
        await self.async_engine.__aenter__()
        task = self.async_engine._task  # the stepping task: /health watches it
        assert task is not None
        task.add_done_callback(self._engine_stopped)

    async def stop(self) -> None:
        self.cancel_all()
        try:
            await self.async_engine.close()
        except Exception:
            if self.engine_error is None:  # a failed loop was reported when it failed
                raise

    @property
    def engine_alive(self) -> bool:
        task = self.async_engine._task
        return task is not None and not task.done()

    # -- admission ----------------------------------------------------------------------
    def submit(self, gen: GenerateRequest, prompt: Prompt) -> RequestStream:
        """Admit one choice's request (`prompt`, one of gen.prompts)."""
        if self.draining or self.engine_error is not None:
            raise ApiError(503, "the server is shutting down" if self.draining else
                           f"the engine stopped: {self.engine_error}", code="unavailable",
                           type_="service_unavailable", retry_after_s=RETRY_AFTER_S)
        max_len, ids = self.engine.max_model_len, prompt.ids
        if len(ids) >= max_len:  # permanent: say so before any 429 (the engine agrees)
            raise self._rejection("prompt_too_long", len(ids), gen.chat)
        need = len(ids) + gen.max_tokens
        if need > max_len:  # refused, as vLLM does, rather than clamped
            raise ApiError(400, f"This model's maximum context length is {max_len} tokens. "
                           f"However, you requested {need} tokens ({len(ids)} in the "
                           f"prompt, {gen.max_tokens} in the completion); lower max_tokens to "
                           f"at most {max_len - len(ids)}", param="max_tokens",
                           code="context_length_exceeded")
        need = len(ids) + gen.best_of * gen.max_tokens  # every output's tokens
        self._check_quota(need)
        outputs = gen.best_of
        spec = RequestSpec(next(self._ids), ids, gen.max_tokens, gen.priority,
                           tool_call=gen.tool_call, n=1 if gen.beam_search else outputs,
                           beam_width=outputs if gen.beam_search and outputs > 1 else 1)
        stream = self.async_engine.submit(spec, gen.params)
        if stream.rejected is not None:
            raise self._rejection(stream.rejected, len(ids), gen.chat)
        self.inflight[stream] = need
        self.queued_tokens += need
        self.idle.clear()
        return stream

    def _check_quota(self, need: int) -> None:
        quota = self.max_queued_tokens
        if not quota:
            return
        if need > quota:
            self.counters.rejected["token_quota"] += 1
            raise ApiError(400, f"prompt + max_tokens ({need} tokens) exceeds the server's "
                           f"token quota ({quota}, --max-queued-tokens)", param="max_tokens",
                           code="exceeds_token_quota")
        if self.queued_tokens + need > quota:
            self.counters.rejected["token_quota"] += 1
            raise ApiError(429, f"{self.queued_tokens} tokens in flight; this request's {need} "
                           f"would exceed the quota of {quota}; retry later",
                           code="token_quota_exceeded", type_="rate_limit_error",
                           retry_after_s=RETRY_AFTER_S)

    def _rejection(self, reason: str, num_prompt: int, chat: bool) -> ApiError:
        self.counters.rejected[reason] += 1
        status, text = REJECTIONS.get(reason, (400, "rejected"))
        message = text.format(prompt=num_prompt, max_len=self.engine.max_model_len)
        if status == 429:
            return ApiError(429, message, code=reason, type_="rate_limit_error",
                            retry_after_s=RETRY_AFTER_S)
        param = ("messages" if chat else "prompt") if reason == "prompt_too_long" \
            else "tools" if reason == "guard_off" else "max_tokens"
        return ApiError(status, message, param=param, code=reason)

    # -- in flight ----------------------------------------------------------------------
    def release(self, stream: RequestStream) -> None:
        """The handler is done with `stream`: cancel it in the engine if it is unfinished
        (client gone), give back its quota, count its finish."""
        if not request_done(stream):
            self.async_engine.cancel(stream)
        need = self.inflight.pop(stream, None)
        if need is None:
            return
        self.queued_tokens -= need
        self.counters.finished[finish_reason(stream)] += 1
        if not self.inflight:
            self.idle.set()

    def cancel_all(self) -> None:
        """End every in-flight stream now (drain timeout, engine failure)."""
        for stream in list(self.inflight):
            if request_done(stream):
                continue  # finished in the engine; its handler is writing the last tokens
            if self.engine_alive:
                self.async_engine.cancel(stream)
            else:  # no loop to hand out events: end the stream after what it already has
                stream.queue.put_nowait(None)

    # -- hooks ----------------------------------------------------------------------------
    def _on_step(self, out: SchedulerOutput) -> None:
        c = self.counters
        for seq in out.admitted:
            if seq.num_preemptions == 0:
                c.prompt_tokens += seq.num_prompt_tokens
            c.prefix_queries += seq.num_tokens
            c.prefix_hits += seq.num_computed_tokens  # cached tokens at admission

    def _engine_stopped(self, task: asyncio.Task[None]) -> None:
        if task.cancelled() or task.exception() is None:
            return
        err = task.exception()
        self.engine_error = f"{type(err).__name__}: {err}"
        log.error("the engine loop failed; answering 503 from now on", exc_info=err)
        self.cancel_all()


def request_done(stream: RequestStream) -> bool:
    """Every output of the request has ended in the engine (one, or its group's)."""
    group = stream.seq.group
    return stream.seq.finish_reason is not None if group is None else \
        group.finished or stream.seq.finish_reason == "cancelled"


def finish_reason(stream: RequestStream) -> str:
    """The engine's reason (length, stop, loop); "abort" when it was cut short."""
    reason = stream.seq.finish_reason if request_done(stream) else None
    return "abort" if reason in (None, "cancelled") else reason
