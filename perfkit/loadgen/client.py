"""The HTTP client of a remote sweep: one streaming /completions (or, with --endpoint
chat, /chat/completions) request per spec, over the load generator's own keep-alive
connections (loadgen/http.py).

`RemoteServe` is a `perfkit.sweep.loops.Serve`: the closed and open loops drive it as
they drive the in-process engine, and it returns the same `RequestRecord`.

What a record holds (times in seconds since the level started, perf_counter):
  arrival_s       when the request was due: its scheduled send (open loop: its arrival;
                  closed loop: when its client's previous request ended). Latencies count
                  from here, so a client that sends late does not hide its own delay.
  sent_s          when it was handed to the connection: sent_s - arrival_s is the
                  client's own queue, shown apart.
  token_times_s   arrival of every chunk that carries output, stamped once per read: the
                  chunks of one read share its time (`coalesced_chunks` counts those after
                  the first: their gaps were not timed). A chunk may hold several tokens,
                  so ITL samples are chunk gaps (equal to token gaps when the server
                  streams one token per chunk, as perfkit serve does). With n > 1 (or
                  beam search) this is choice 0's; more_token_times_s holds the other
                  choices', by the chunks' index: TTFT and TPOT are per choice
                  (RequestRecord), output tokens every choice's.
  output_tokens   usage.completion_tokens when the server sends usage, else chunks.
  prompt_tokens   usage.prompt_tokens, else the spec's prompt length.
  cached_tokens   usage.prompt_tokens_details.cached_tokens, else 0 (`cached_reported`
                  says whether any response carried it: vLLM only with
                  --enable-prompt-tokens-details).
  scheduled_s     None: a client cannot see when the server scheduled a request.
A target that refuses every connection for DOWN_AFTER_S is `down`: the loops send no more
requests (sweep/loops.py: Pacing.halted) and the sweep stops after the level.
Failures never raise: 429 and 400 (admission refused) set `rejected` to "http 429" /
"http 400"; other HTTP statuses, timeouts, refused connections and streams that end
early, or that the server aborts (finish_reason "abort"), set finish_reason "error".
Every failure's kind is kept in `errors`. Requests flagged `tool_call` carry perfkit
serve's `tool_call: true` extension; `priority` is sent when not 0 (vLLM's extension).
Every request carries a W3C `traceparent` header, one trace per request (traces/context.py);
the record keeps its trace id, the server's response id (the first event's "id") and its
arrival on the wall clock, for the join with the server's own spans after the level
(traces/join.py).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import aiohttp

from perfkit.loadgen.http import Origin, Pool
from perfkit.loadgen.sse import DONE, SseParser, parse_chunk, response_id, usage_counts
from perfkit.loadgen.text import word_text
from perfkit.records import RequestRecord
from perfkit.traces.context import new_trace_id, traceparent
from perfkit.workload import RequestSpec

ADMISSION_STATUSES = frozenset({400, 413, 429})  # the server refused the request up front
UNREACHABLE = frozenset({"connection refused", "connect error"})
DOWN_AFTER_S = 3.0  # every connection refused this long: the target is down
ABORTED = frozenset({"abort", "error"})  # finish reasons of a request the server cut short


@dataclass(frozen=True)
class Target:
    url: str  # base URL ending in the API version, e.g. http://127.0.0.1:8000/v1
    model: str  # the model name sent with every request
    api_key: str | None = None
    timeout_s: float = 60.0  # longest wait for any byte (connect, first token, next token)
    endpoint: str = "completions"  # or "chat": POST {url}/chat/completions

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}


def open_pool(target: Target, connections: int) -> Pool:
    """A pool of `connections` keep-alive connections (0: unlimited, for open loops)."""
    return Pool(Origin.parse(target.url), connections, target.timeout_s)


def error_kind(err: BaseException) -> str:
    """A short, stable name for a failure, used as a key of the errors summary (from the
    load generator's own client, or from aiohttp's in the start-up probes)."""
    if isinstance(err, aiohttp.ClientConnectorError):
        return ("connection refused" if isinstance(err.os_error, ConnectionRefusedError)
                else "connect error")
    if isinstance(err, ConnectionRefusedError):
        return "connection refused"
    if isinstance(err, asyncio.TimeoutError | TimeoutError):
        return "timeout"
    if isinstance(err, OSError) and not isinstance(err, ConnectionError):
        return "connect error"  # our pool raises OSError only while connecting
    if isinstance(err, aiohttp.ServerDisconnectedError | aiohttp.ClientPayloadError
                  | aiohttp.ClientOSError | ConnectionError):
        return "broken stream"
    if isinstance(err, ValueError):
        return "bad chunk"
    return f"client error ({type(err).__name__})"


Render = Callable[[tuple[int, ...]], str]  # token ids -> text (loadgen/text.py)
TextOf = Callable[[RequestSpec], str]  # a spec's prompt as text (rendered ahead, by id)


def request_body(spec: RequestSpec, model: str, endpoint: str = "completions",
                 text: str | None = None) -> dict[str, object]:
    """Token ids as the prompt (OpenAI's API accepts a list of ints), or `text`, the
    prompt rendered with a tokenizer; chat: one user message (its text: `text`, else the
    words t<id>). Exactly max_tokens out: ignore_eos where the server supports it (vLLM,
    perfkit serve), greedy."""
    body: dict[str, object] = {
        "model": model, "max_tokens": spec.max_tokens,
        "stream": True, "stream_options": {"include_usage": True},
        "ignore_eos": True, "temperature": 0,
    }
    if endpoint == "chat":
        body["messages"] = [{"role": "user",
                             "content": text if text is not None else word_text(spec.prompt)}]
    else:
        body["prompt"] = text if text is not None else list(spec.prompt)
    if spec.priority:  # vLLM's extension (its priority scheduling policy)
        body["priority"] = spec.priority
    if spec.tool_call:  # perfkit serve's extension: a guarded tool call
        body["tool_call"] = True
    if max(spec.n, spec.beam_width) > 1:  # several choices; beams: vLLM's use_beam_search
        body["n"] = max(spec.n, spec.beam_width)
        if spec.beam_width > 1:
            body["use_beam_search"] = True
    return body


JSON_HEADERS = {"Content-Type": "application/json"}


def encode_body(body: dict[str, object]) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode()


@dataclass
class _Stream:
    """What one response stream told us, as it arrives (the HTTP pool's sink: its reads
    come in the connection's own callback, stamped once per read)."""

    t0: float  # the level's origin (perf_counter)
    times: list[float] = field(default_factory=list)  # choice 0's token chunks
    more: dict[int, list[float]] = field(default_factory=dict)  # other choices', by index
    coalesced: int = 0  # token chunks read together with the previous token chunk
    finish_reason: str | None = None
    usage: dict[str, object] | None = None
    done: bool = False
    error: str | None = None
    response_id: str | None = None  # the first event's "id"
    id_read: bool = False  # the first event was read for its id
    status: int | None = None  # the response's HTTP status
    retry_after: str = ""  # its Retry-After header, when refused
    parser: SseParser = field(default_factory=SseParser)

    def head(self, status: int, headers: dict[str, str]) -> None:
        self.status = status
        self.retry_after = headers.get("retry-after", "")

    def body(self, data: bytes, now: float) -> bool:
        """One read's body bytes at `now`; True when the stream is over."""
        if self.status != 200:
            return False  # an error body: read to its end, the connection stays usable
        stamp = now - self.t0
        return any(self.event(event, stamp) for event in self.parser.feed(data))

    def event(self, data: bytes, now: float) -> bool:
        """Take one event read at `now` (level clock); True when the stream is over."""
        if data == DONE or (data[:1] != b"{" and data.strip() == DONE):
            self.done = True
            return True
        if not self.id_read:
            self.id_read = True
            self.response_id = response_id(data)
        try:
            chunk = parse_chunk(data)
        except ValueError:
            self.error = "bad chunk"
            return True
        if chunk.error is not None:
            self.error = "server error"
            return True
        if chunk.has_token:
            times = self.times if not chunk.choice else self.more.setdefault(chunk.choice, [])
            if times and times[-1] == now:  # in the same read as the previous chunk
                self.coalesced += 1
            times.append(now)
        self.finish_reason = chunk.finish_reason or self.finish_reason
        self.usage = chunk.usage or self.usage
        return False


class RemoteServe:
    """Serve specs from `target` over `pool`; `t0` is the level's perf_counter origin."""

    def __init__(self, pool: Pool, target: Target, t0: float,
                 text_of: TextOf | None = None) -> None:
        self.pool = pool
        self.target = target
        self.t0 = t0
        self.text_of = text_of
        self.errors: dict[int, str] = {}  # request id -> failure kind
        self.retry_after_s: list[float] = []  # Retry-After values of refused requests
        self.cached_reported = False  # some usage carried prompt_tokens_details.cached_tokens
        self.refused_since: float | None = None  # first of an unbroken run of refusals
        self.down: str | None = None  # why the target counts as down (no more requests)

    async def __call__(self, spec: RequestSpec, warmup: bool,
                       arrival_s: float | None = None) -> RequestRecord:
        text = None if self.text_of is None else self.text_of(spec)
        body = encode_body(request_body(spec, self.target.model, self.target.endpoint, text))
        sent = time.perf_counter() - self.t0
        rec = RequestRecord(
            request_id=spec.request_id, arrival_s=sent if arrival_s is None else arrival_s,
            prompt_tokens=len(spec.prompt), output_tokens=0, warmup=warmup, sent_s=sent,
            trace_id=new_trace_id(), num_outputs=max(spec.n, spec.beam_width))
        rec.arrival_unix_ns = time.time_ns() - round((sent - rec.arrival_s) * 1e9)
        stream = _Stream(self.t0)
        try:
            await self._request(body, rec, stream)
        except Exception as err:  # whatever goes wrong with one request is recorded, not raised
            stream.error = error_kind(err)
        self._finish(rec, stream)
        return rec

    async def _request(self, body: bytes, rec: RequestRecord, stream: _Stream) -> None:
        target = self.target
        path = "chat/completions" if target.endpoint == "chat" else "completions"
        headers = JSON_HEADERS | target.headers() | {
            "traceparent": traceparent(rec.trace_id or "")}
        await self.pool.post(f"{self.pool.origin.path}/{path}", headers, body, stream)
        if stream.status != 200:
            self._refused(rec, stream)
        elif not stream.done and stream.error is None:
            tail = stream.parser.close()  # a last event without its blank line
            if tail is not None:
                stream.event(tail, time.perf_counter() - self.t0)

    def _refused(self, rec: RequestRecord, stream: _Stream) -> None:
        kind = f"http {stream.status}"
        if stream.status in ADMISSION_STATUSES:
            rec.rejected = kind
            retry = stream.retry_after
            if retry.replace(".", "", 1).isdigit():
                self.retry_after_s.append(float(retry))
        stream.error = kind

    def _finish(self, rec: RequestRecord, stream: _Stream) -> None:
        prompt, completion, cached = usage_counts(stream.usage)
        rec.token_times_s = stream.times
        rec.more_token_times_s = [stream.more.get(i, []) for i in range(1, rec.num_outputs)]
        every = [t for t in (stream.times, *rec.more_token_times_s) if t]
        rec.coalesced_chunks = stream.coalesced
        rec.response_id = stream.response_id
        rec.first_token_s = min(t[0] for t in every) if every else None
        rec.output_tokens = completion if completion is not None else sum(map(len, every))
        rec.prompt_tokens = prompt if prompt is not None else rec.prompt_tokens
        rec.cached_tokens = cached or 0
        self.cached_reported = self.cached_reported or cached is not None
        if stream.error is None and stream.finish_reason is None:
            stream.error = "broken stream"  # ended without saying why (no finish reason)
        elif stream.error is None and stream.finish_reason in ABORTED:
            stream.error = "aborted"  # the server cut it short (shutdown, engine failure)
        if rec.rejected is not None:
            rec.finish_reason = "rejected"
        elif stream.error is not None:
            rec.finish_reason = "error"
            rec.finish_s = time.perf_counter() - self.t0
        else:
            rec.finish_reason = stream.finish_reason
            rec.finish_s = max(t[-1] for t in every) if every else time.perf_counter() - self.t0
        if stream.error is not None:
            rec.error = stream.error
            self.errors[rec.request_id] = stream.error
        self._watch(stream.error)

    def _watch(self, error: str | None) -> None:
        """A target that refused every connection for DOWN_AFTER_S is down: say so once."""
        if error not in UNREACHABLE:
            self.refused_since = None
            return
        now = time.perf_counter()
        if self.refused_since is None:
            self.refused_since = now
        elif self.down is None and now - self.refused_since >= DOWN_AFTER_S:
            self.down = (f"{self.target.url} refused every connection for "
                         f"{now - self.refused_since:.1f} s")
