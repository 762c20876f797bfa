from __future__ import annotations

import pytest

# Tiny sweeps: two levels, few requests, so each end-to-end run takes seconds.
TINY = ["--profile", "default", "--concurrency", "1,4", "--requests", "6", "--warmup", "2",
        "--set", "workload.output_len.kind=\"fixed\"", "--set", "workload.output_len.mean=8",
        "--set", "workload.output_len.min=8", "--set", "workload.output_len.max=8",
        "--set", "engine.cpu_threads=1", "--set", "sweep.min_requests_per_client=0"]


@pytest.fixture
def tiny() -> list[str]:
    return list(TINY)
