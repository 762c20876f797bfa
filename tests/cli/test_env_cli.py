from __future__ import annotations

import json

import pytest
import torch


def test_env_table(cli):
    result = cli("env")
    assert result.exit_code == 0
    for key in ("python", "torch", "GPU", "NVML", "py-spy", "CPU", "memory"):
        assert key in result.stdout


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only report")
def test_env_json_on_cpu_reports_reasons(cli):
    result = cli("env", "--json")
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert data["gpu"]["available"] is False and data["gpu"]["reason"]
    assert data["nvml"]["available"] is False and data["nvml"]["reason"]
    assert data["cpu_logical_cores"] >= 1
    assert data["pyspy"]["installed"] is True
    assert isinstance(data["pyspy"]["can_attach"], bool)
