"""A tail (or median) group's client window split by the server's spans (ServerSplit,
result/server_traces.py), means per joined request of the group.

TTFT (the client's first-token time, exactly the sum of its parts per request):
    client TTFT = queue + prefill + API server (server TTFT - queue - prefill)
                  + outside the server (client TTFT - server TTFT)
TPOT (the client's decode window per output token, n - 1 intervals):
    (client e2e - client TTFT) / (n - 1) = decode / (n - 1)
        + API server ((server e2e - server TTFT - decode) / (n - 1))
        + outside the server ((outside e2e - outside TTFT) / (n - 1))
A part the server did not report is None, and so is every part that needs it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from perfkit.records import RequestRecord
from perfkit.result.server_traces import ServerSplit, ServerTiming

Pair = tuple[RequestRecord, ServerTiming]


def _mean(pairs: Sequence[Pair], get: Callable[[RequestRecord, ServerTiming], float | None]
          ) -> float | None:
    values = [v for r, t in pairs if (v := get(r, t)) is not None]
    return sum(values) / len(values) if values else None


def _sub(a: float | None, *rest: float | None) -> float | None:
    if a is None or any(b is None for b in rest):
        return None
    return a - sum(b for b in rest if b is not None)


def _per_token(value: float | None, r: RequestRecord) -> float | None:
    return None if value is None or r.output_tokens < 2 else value / (r.output_tokens - 1)


def _ttft(pairs: Sequence[Pair]) -> ServerSplit:
    return ServerSplit(
        num_joined=len(pairs), window_s=_mean(pairs, lambda r, t: r.ttft_s) or 0.0,
        queue_s=_mean(pairs, lambda r, t: t.queue_s),
        prefill_s=_mean(pairs, lambda r, t: t.prefill_s), decode_s=None,
        api_server_s=_mean(pairs, lambda r, t: _sub(t.ttft_s, t.queue_s, t.prefill_s)),
        outside_server_s=_mean(pairs, lambda r, t: t.outside_ttft_s))


def _tpot(pairs: Sequence[Pair]) -> ServerSplit:
    return ServerSplit(
        num_joined=len(pairs), window_s=_mean(pairs, lambda r, t: r.tpot_s) or 0.0,
        queue_s=None, prefill_s=None,
        decode_s=_mean(pairs, lambda r, t: _per_token(t.decode_s, r)),
        api_server_s=_mean(pairs, lambda r, t: _per_token(
            _sub(t.e2e_s, t.ttft_s, t.decode_s), r)),
        outside_server_s=_mean(pairs, lambda r, t: _per_token(
            _sub(t.outside_e2e_s, t.outside_ttft_s), r)))


def server_split(records: Sequence[RequestRecord], metric: str,
                 timings: dict[int, ServerTiming]) -> ServerSplit | None:
    """None when no request of the group was joined."""
    pairs = [(r, timings[r.request_id]) for r in records if r.request_id in timings]
    if metric == "tpot":
        pairs = [(r, t) for r, t in pairs if r.tpot_s is not None]
    if not pairs:
        return None
    return _ttft(pairs) if metric == "ttft" else _tpot(pairs)
