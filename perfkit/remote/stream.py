"""How a remote level's responses arrived: tokens per chunk, and bursts.

A client sees chunks, not tokens. When every chunk carries one token, chunk gaps are token
gaps; when chunks carry several, ITL samples are chunk gaps and are labelled so. A tiny
model on a saturated CPU can deliver a whole response at once (all chunks within ~10 µs,
measured against vLLM's CPU build): TPOT and ITL then read ~0 and mean nothing, so such a
level is marked degenerate and no verdict may rest on its TPOT.
"""

from __future__ import annotations

from perfkit.records import RequestRecord
from perfkit.result.remote import StreamStats

BURST_SPAN_S = 0.001  # all of a request's chunks within 1 ms: delivered at once
DEGENERATE_SHARE = 0.5  # more than half the requests in bursts: the level's TPOT is void


def _burst(rec: RequestRecord) -> bool:
    times = rec.token_times_s
    return rec.output_tokens >= 2 and bool(times) and times[-1] - times[0] < BURST_SPAN_S


def stream_stats(records: list[RequestRecord]) -> StreamStats:
    done = [r for r in records if not r.warmup and r.finish_reason not in ("error", "rejected")
            and r.token_times_s]
    chunks = sum(len(r.token_times_s) for r in done)
    tokens = sum(r.output_tokens for r in done)
    bursts = sum(_burst(r) for r in done)
    share = bursts / len(done) if done else None
    return StreamStats(
        chunks=chunks, output_tokens=tokens,
        tokens_per_chunk=tokens / chunks if chunks else None,
        itl_unit="token" if chunks and tokens <= chunks else "chunk",
        burst_requests=bursts, burst_share=share, burst_span_s=BURST_SPAN_S,
        degenerate=share is not None and share > DEGENERATE_SHARE)
