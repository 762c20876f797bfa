"""Shared fixtures: tiny setups, written profile files."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# Test helpers shared across folders (levels.py: typed levels from partial dicts).
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture
def write_profile(tmp_path: Path):
    """Write TOML text to a profile file and return its path."""

    def write(text: str, name: str = "p.toml") -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path

    return write


@pytest.fixture
def cli():
    """Invoke `perfkit ARGS...` in-process; returns click's Result (stdout, stderr, exit_code)."""
    from typer.testing import CliRunner

    from perfkit.cli.main import app

    runner = CliRunner()

    def invoke(*args: str, width: int | None = None):
        return runner.invoke(app, list(args), catch_exceptions=False, terminal_width=width)

    return invoke


@pytest.fixture
def stub():
    """Start scriptable OpenAI-style streaming stubs (tests/stub_server.py): stub(**config)."""
    from stub_server import Stub, StubConfig

    started: list[Stub] = []

    def start(**kwargs):
        server = Stub(StubConfig(**kwargs)).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
