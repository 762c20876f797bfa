"""No read-buffer limit: a 1 MB chunk and a 128k-token prompt body, through the client."""

from __future__ import annotations

import asyncio
import time

from perfkit.loadgen.client import RemoteServe, Target, open_pool
from perfkit.workload import RequestSpec


def serve_one(url: str, spec: RequestSpec):
    async def go():
        target = Target(url, "m", None, 30.0)
        async with open_pool(target, 1) as pool:
            serve = RemoteServe(pool, target, time.perf_counter())
            return await serve(spec, False)

    return asyncio.run(go())


def test_a_one_megabyte_chunk_is_read_whole(known_server):
    server = known_server(first_chunk_bytes=2**20)
    rec = serve_one(server.url, RequestSpec(0, (1, 2, 3), 4))
    assert rec.error is None and rec.finish_reason == "length"
    assert rec.output_tokens == 4 and len(rec.token_times_s) == 4


def test_a_128k_token_prompt_goes_out_whole(known_server):
    server = known_server()
    prompt = tuple(range(1, 131073))
    rec = serve_one(server.url, RequestSpec(0, prompt, 3))
    assert rec.error is None and rec.prompt_tokens == 131072  # the server's usage says so
    assert rec.output_tokens == 3 and rec.sent_s is not None and rec.sent_s >= rec.arrival_s
