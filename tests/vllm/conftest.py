"""A real vLLM server for the module's tests; all of them skip without $PERFKIT_VLLM."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from vllm_server import VllmServer

from perfkit.remote.tiny_model import write_tiny_model

VLLM_ENV = "PERFKIT_VLLM"


@pytest.fixture(scope="session")
def vllm_exe() -> str:
    exe = os.environ.get(VLLM_ENV)
    if not exe:
        pytest.skip(f"no real vLLM: set {VLLM_ENV} to its bin/vllm (bash .ci/vllm-env DIR)")
    if not Path(exe).is_file():
        pytest.fail(f"{VLLM_ENV}={exe}: no such file")
    return exe


@pytest.fixture(scope="session")
def vllm(vllm_exe: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    root = tmp_path_factory.mktemp("vllm")
    model = write_tiny_model(root / "model", vocab=512, max_len=512)
    server = VllmServer(vllm_exe, model, root / "vllm.log", profile_dir=root / "profiles")
    server.start(float(os.environ.get("PERFKIT_VLLM_START_S", "600")))
    try:
        yield server
    finally:
        server.stop()
