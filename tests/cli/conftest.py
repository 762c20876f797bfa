from __future__ import annotations

import pytest
from typer.testing import CliRunner

from perfkit.cli.main import app


@pytest.fixture
def cli():
    """Invoke `perfkit ARGS...` in-process; returns click's Result (stdout, stderr, exit_code)."""
    runner = CliRunner()

    def invoke(*args: str):
        return runner.invoke(app, list(args), catch_exceptions=False)

    return invoke
