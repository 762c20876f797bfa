"""HTTP helpers for the server tests (plain urllib: no event loop of the test's own)."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

SETS = ("engine.cpu_threads=1",)


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def http(url: str, body: Any = None, raw: bytes | None = None, timeout: float = 30) -> Reply:
    """GET (no body) or POST JSON (or raw bytes); 4xx/5xx come back as a Reply too."""
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as r:
            return Reply(r.status, dict(r.headers), r.read())
    except urllib.error.HTTPError as err:
        return Reply(err.code, dict(err.headers), err.read())


def sse_events(body: bytes) -> list[Any]:
    """`data: {...}` payloads of an SSE body, parsed; the final `[DONE]` as the string."""
    out: list[Any] = []
    for block in body.decode().split("\n\n"):
        if block:
            assert block.startswith("data: "), block
            payload = block[len("data: "):]
            out.append(payload if payload == "[DONE]" else json.loads(payload))
    return out


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)\{((?:[a-zA-Z_]\w*="[^"]*",?)*)\} (\S+)$')


def parse_metrics(text: str) -> dict[tuple[str, str], float]:
    """Prometheus text -> {(name, labels): value}; asserts every line is HELP, TYPE or a
    `name{labels} value` sample."""
    out = {}
    for line in text.splitlines():
        if line.startswith(("# HELP ", "# TYPE ")):
            continue
        match = SAMPLE.match(line)
        assert match, f"not a sample line: {line!r}"
        out[(match.group(1), match.group(2))] = float(match.group(3))
    return out
