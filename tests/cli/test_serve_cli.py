"""`perfkit serve`: bad input exits 2 with one line; SIGTERM drains a live stream, exits 0."""

from __future__ import annotations

import json
import re
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest


@pytest.fixture
def run(cli):
    """`perfkit serve ARGS` on the real app."""
    return lambda *args: cli("serve", *args)


@pytest.mark.parametrize(("args", "message"), [
    (("--port", "70000"), "--port must be between 0 and 65535"),
    (("--drain-timeout", "-1"), "--drain-timeout must be >= 0"),
    (("--max-queued-tokens", "-5"), "--max-queued-tokens must be >= 0"),
    (("--profile", "no-such-profile"), "no built-in profile named 'no-such-profile'"),
    (("--set", "engine.block_size=0"), "block_size"),
    (("--host", "256.1.1.1", "--port", "0"), "cannot listen on 256.1.1.1:0"),
])
def test_bad_options_exit_2_with_one_line(run, args: tuple[str, ...], message: str) -> None:
    result = run(*args)
    assert result.exit_code == 2
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_port_in_use_exits_2(run) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        result = run("--port", str(port), "--set", "engine.cpu_threads=1")
    assert result.exit_code == 2
    assert f"127.0.0.1:{port}: the address is already in use" in result.stderr


def _read_url(proc: subprocess.Popen[bytes], timeout_s: float = 60) -> str:
    """The base URL from the start-up line `perfkit serve: model ... at URL/v1 ...`."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if select.select([proc.stdout], [], [], 0.5)[0]:
            line = proc.stdout.readline().decode()
            match = re.search(r"at (http://127\.0\.0\.1:\d+)/v1", line)
            if match:
                assert "'default'" in line  # the model name
                return match.group(1)
            assert line, f"perfkit serve exited early: {proc.communicate()[1].decode()[-2000:]}"
    raise AssertionError("perfkit serve did not start in time")


def _stream(url: str, max_tokens: int, chunks: list[bytes], first: threading.Event) -> None:
    body = json.dumps({"model": "default", "prompt": [1, 2, 3], "max_tokens": max_tokens,
                       "stream": True}).encode()
    request = urllib.request.Request(f"{url}/v1/completions", data=body,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as reply:
        for line in reply:
            chunks.append(line)
            first.set()


def test_sigterm_lets_the_stream_finish_and_exits_0() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "perfkit", "serve", "--port", "0", "--set",
         "engine.cpu_threads=1", "--drain-timeout", "30"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        url = _read_url(proc)
        chunks: list[bytes] = []
        first = threading.Event()
        reader = threading.Thread(target=_stream, args=(url, 500, chunks, first))
        reader.start()
        assert first.wait(30)
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.05)
        with pytest.raises(urllib.error.HTTPError) as refused:  # draining: no new work
            urllib.request.urlopen(urllib.request.Request(
                f"{url}/v1/completions", data=b'{"model": "default", "prompt": "a"}'), timeout=10)
        assert refused.value.code == 503
        reader.join(60)
        assert proc.wait(60) == 0, proc.stderr.read() if proc.stderr else ""
    finally:
        if proc.poll() is None:
            proc.kill()
    events = [json.loads(c[6:]) for c in chunks if c.startswith(b"data: {")]
    assert len(events) == 500
    assert events[-1]["choices"][0]["finish_reason"] == "length"
    assert chunks[-2:] == [b"data: [DONE]\n", b"\n"]
