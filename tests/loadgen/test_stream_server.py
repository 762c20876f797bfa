"""The known-timing server never writes a chunk before it is due, on uvloop too (whose
timers truncate a delay to whole milliseconds and read a clock cached per iteration)."""

from __future__ import annotations

import json
import urllib.request

import pytest

uvloop = pytest.importorskip("uvloop")


def _post(url: str, body: dict[str, object]) -> bytes:
    request = urllib.request.Request(url, json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return bytes(response.read())


def test_no_chunk_is_written_early_on_uvloop(known_server):
    # 5.9 ms and 1.7 ms: delays that whole milliseconds would round down
    server = known_server(0.0059, 0.0017, 6, new_loop=uvloop.new_event_loop)
    for _ in range(30):
        body = _post(f"{server.url}/completions",
                     {"model": "m", "prompt": "a b", "max_tokens": 6, "stream": True})
        assert body.count(b"data: ") == 6 + 2  # six tokens, usage, [DONE]
    with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/stats", timeout=10) as response:
        stats = json.loads(response.read())
    assert stats["chunks"] == 30 * 6
    assert stats["late_min_s"] >= 0.0
