"""How a remote level's responses arrived: tokens per chunk, and bursts.

A client sees chunks, not tokens, and stamps each read once: chunks that arrived before the
client read them come out of one read with one time. Their gaps are not measurements (a
0.02 ms "ITL" from a server that sends every 10 ms); they are counted, left out of ITL, and
past COALESCED_MAX of the gaps the level has no ITL at all. Whose doing: the client's when
its event loop lagged (it read late, so chunks piled up), else the server's or a proxy's
(they sent chunks together).

 When every chunk carries one token, chunk gaps are token
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
COALESCED_MAX = 0.05  # more of the gaps untimed than this: the level reports no ITL
CLIENT_LAG_S = 0.001  # a client loop lag p99 above this: the client read chunks late


def _burst(rec: RequestRecord) -> bool:
    times = rec.token_times_s
    return rec.output_tokens >= 2 and bool(times) and times[-1] - times[0] < BURST_SPAN_S


def _itl(coalesced: int, gaps: int, lag_p99_s: float | None) -> tuple[bool, str]:
    share = coalesced / gaps if gaps else 0.0
    if share <= COALESCED_MAX:
        return True, ""
    lag = ("" if lag_p99_s is None else f"; the client's event loop woke up "
           f"{lag_p99_s * 1e3:.1f} ms late (p99)")
    who = ("the client read late: add --workers" if lag_p99_s is not None
           and lag_p99_s > CLIENT_LAG_S else "the client kept up: the server or a proxy "
           "sent chunks together")
    return False, (f"{share:.0%} of chunk gaps were not timed (chunks read together with "
                   f"the one before){lag}: {who}")


def stream_stats(records: list[RequestRecord], lag_p99_s: float | None = None) -> StreamStats:
    """`lag_p99_s`: the client's loop lag, to say whose doing coalesced chunks were."""
    done = [r for r in records if not r.warmup and r.finish_reason not in ("error", "rejected")
            and r.token_times_s]
    chunks = sum(len(r.token_times_s) for r in done)
    tokens = sum(r.output_tokens for r in done)
    bursts = sum(_burst(r) for r in done)
    share = bursts / len(done) if done else None
    coalesced = sum(r.coalesced_chunks for r in done)
    gaps = chunks - len(done)
    measured, why = _itl(coalesced, gaps, lag_p99_s)
    return StreamStats(
        chunks=chunks, output_tokens=tokens,
        tokens_per_chunk=tokens / chunks if chunks else None,
        itl_unit="token" if chunks and tokens <= chunks else "chunk",
        burst_requests=bursts, burst_share=share, burst_span_s=BURST_SPAN_S,
        degenerate=share is not None and share > DEGENERATE_SHARE,
        coalesced_chunks=coalesced, coalesced_share=coalesced / gaps if gaps > 0 else None,
        itl_measured=measured, itl_reason=why)
