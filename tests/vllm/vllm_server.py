"""Start a real `vllm serve` (vLLM's CPU build) on a free loopback port, and stop it.

The executable comes from $PERFKIT_VLLM (its venv's bin/vllm: .ci/vllm-env makes one); the
model is the tiny directory of perfkit.remote.tiny_model, dummy weights. Start-up waits for
GET /health at most $PERFKIT_VLLM_START_S seconds (default 600: a cold start on two cores
takes one to two minutes), then fails with the log's tail. The server runs in its own
process group, which stop() ends (SIGTERM, then SIGKILL after 30 s).

With a `profile_dir` its torch profiler is on (POST /start_profile, /stop_profile), light
enough for CI: no Python stacks, at most PROFILE_ITERATIONS engine steps per profile, the
API server's own process left out.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

BLOCK_SIZE = 32  # vLLM's CPU attention wants a multiple of 32
NUM_BLOCKS = 24  # a pool the default profile saturates at concurrency 8
MAX_MODEL_LEN = 512
MODEL_NAME = "tiny"
PROFILE_ITERATIONS = 8  # with stacks and no bound, one level's trace ran a 23 GB machine OOM


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@dataclass
class VllmServer:
    exe: str
    model_dir: Path
    log_path: Path
    profile_dir: Path | None = None  # the torch profiler's trace folder
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    num_blocks: int = NUM_BLOCKS  # KV blocks of BLOCK_SIZE tokens (the pool's size)
    max_num_seqs: int = 16
    extra_args: tuple[str, ...] = ()  # more `vllm serve` flags (tracing: test_vllm_traces)
    extra_env: tuple[tuple[str, str], ...] = ()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        return [self.exe, "serve", str(self.model_dir), "--load-format", "dummy",
                "--served-model-name", MODEL_NAME, "--host", "127.0.0.1",
                "--port", str(self.port), "--block-size", str(BLOCK_SIZE),
                "--num-gpu-blocks-override", str(self.num_blocks),
                "--max-model-len", str(MAX_MODEL_LEN), "--max-num-seqs", str(self.max_num_seqs),
                "--enable-prompt-tokens-details", *self.profiler_flags(), *self.extra_args]

    def profiler_flags(self) -> list[str]:
        if self.profile_dir is None:
            return []
        return ["--profiler-config.profiler=torch",
                f"--profiler-config.torch_profiler_dir={self.profile_dir}",
                "--profiler-config.torch_profiler_with_stack=false",
                f"--profiler-config.max_iterations={PROFILE_ITERATIONS}",
                "--profiler-config.ignore_frontend=true"]

    def start(self, timeout_s: float) -> VllmServer:
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_HOST_IP": "127.0.0.1",
               "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_TARGET_DEVICE": "cpu",
               "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", **dict(self.extra_env)}
        self.port = free_port()
        # SIGTERM (a CI timeout) becomes KeyboardInterrupt: pytest then runs the fixture's
        # teardown, which stops the server's process group.
        signal.signal(signal.SIGTERM, _interrupt)
        log = self.log_path.open("wb")
        self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                     env=env, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while not ok(f"{self.base}/health"):
            if self.proc.poll() is not None:
                raise RuntimeError(f"vllm serve exited with {self.proc.returncode} during "
                                   f"start-up; log {self.log_path}:\n{self.tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"vllm serve did not answer /health within {timeout_s:g} s "
                                   f"(PERFKIT_VLLM_START_S); log {self.log_path}:\n{self.tail()}")
            time.sleep(1.0)
        return self

    def tail(self, lines: int = 30) -> str:
        text = self.log_path.read_bytes().decode("utf-8", errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        for sig, wait_s in ((signal.SIGTERM, 30.0), (signal.SIGKILL, 10.0)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                return
            try:
                self.proc.wait(wait_s)
                return
            except subprocess.TimeoutExpired:
                continue
