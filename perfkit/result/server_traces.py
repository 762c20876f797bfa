"""What a server's own OpenTelemetry request spans say about a remote level's requests.

With `--server-traces [HOST:]PORT` perfkit receives the server's spans (vLLM: one
`llm_request` span per request) and joins each to the request that caused it, by the trace
id of the `traceparent` perfkit sent, or by the server's request id where the server did
not propagate the context. Times are seconds, as the server reported them:

    client:  send ─────────────────────── first chunk ──────────── last chunk
    server:     arrival ─ queue ─ prefill ─ first token ─ decode ─ last token ─ e2e
                |<--------- server TTFT ------->|
                |<------------------------ server e2e ------------------------>|

  queue, prefill, decode  inside the engine (vLLM's engine core: waiting to be scheduled,
                          scheduled -> first token, first -> last token)
  outside the server      client TTFT - server TTFT, client e2e - server e2e: network,
                          proxies, the HTTP stream
  API server              server TTFT - queue - prefill (e2e likewise): the server's own
                          work outside the engine (request processing, tokenization,
                          detokenization, the hand-off between its processes)
  outside the engine      API server + outside the server

A value the server did not report is None; so is every value of a request not joined.
"""

from __future__ import annotations

from dataclasses import dataclass

from perfkit.result.dist import Distribution


@dataclass(frozen=True, kw_only=True)
class ServerTiming:
    """One request, joined with its server span."""

    joined_by: str  # "trace id" or "request id"
    queue_s: float | None  # waiting for the scheduler (vLLM gen_ai.latency.time_in_queue)
    prefill_s: float | None  # scheduled -> first token (time_in_model_prefill)
    decode_s: float | None  # first -> last token (time_in_model_decode)
    ttft_s: float | None  # the server's TTFT (time_to_first_token)
    e2e_s: float | None  # the server's e2e (gen_ai.latency.e2e, else the span's duration)
    outside_ttft_s: float | None  # client TTFT - server TTFT
    outside_e2e_s: float | None  # client e2e - server e2e


@dataclass(frozen=True, kw_only=True)
class ServerTraces:
    """A remote level's join of its requests with the server's spans."""

    available: bool  # spans were received and joined (False: see reason)
    reason: str  # why not, when unavailable; a caveat (some not joined) otherwise ""
    receiver: str | None  # HOST:PORT perfkit listened on
    requests: int  # measured requests that completed: those to join
    joined: int  # of them, joined with a server span
    by_trace_id: int  # joined through the traceparent's trace id
    by_request_id: int  # joined through the server's request id (no context propagation)
    wait_s: float | None  # how long the level waited after its last request for late spans
    spans: int  # request spans received while the level ran and waited
    over_client_e2e: int  # joined requests whose server e2e exceeded the client's (clock
    # or join error: a server cannot take longer than the client saw)
    queue: Distribution | None = None  # over joined requests that reported the value
    prefill: Distribution | None = None
    decode: Distribution | None = None
    ttft: Distribution | None = None
    e2e: Distribution | None = None
    # server e2e - (queue + prefill + decode): the API server's share of e2e
    api_server: Distribution | None = None
    outside_ttft: Distribution | None = None
    outside_e2e: Distribution | None = None

    @classmethod
    def unavailable(cls, reason: str, receiver: str | None = None) -> ServerTraces:
        return cls(available=False, reason=reason, receiver=receiver, requests=0, joined=0,
                   by_trace_id=0, by_request_id=0, wait_s=None, spans=0, over_client_e2e=0)

    @property
    def join_share(self) -> float | None:
        return self.joined / self.requests if self.requests else None


@dataclass(frozen=True, kw_only=True)
class ServerSplit:
    """A tail (or median) group of requests, its client window split by the server's spans:
    means per joined request. TTFT groups split the first-token time (queue, prefill, API
    server, outside the server); TPOT groups the decode window per output token (decode,
    API server, outside the server). None: no joined request of the group reported it."""

    num_joined: int  # requests of the group with server timings
    window_s: float  # the client's window over those: TTFT, or decode time per token
    queue_s: float | None  # TTFT only
    prefill_s: float | None  # TTFT only
    decode_s: float | None  # TPOT only (per output token)
    api_server_s: float | None  # the server's time outside its engine
    outside_server_s: float | None  # client - server

    @property
    def outside_engine_s(self) -> float | None:
        """API server + outside the server (either alone when only it is known)."""
        parts = [v for v in (self.api_server_s, self.outside_server_s) if v is not None]
        return sum(parts) if parts else None


@dataclass(frozen=True, kw_only=True)
class OtlpExport:
    """--otlp-export: perfkit's own spans of this level, sent to a collector."""

    url: str
    spans: int  # spans sent (0 when the export failed)
    error: str | None  # why the collector did not take them; None when it did
