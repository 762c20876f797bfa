"""--target and its companions, as given on the command line: which of them need --target
here, every value checked by remote/target.py before level 1.

Plain code with no I/O, so that perfkit.run and the CLI can name it without importing the
HTTP client."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from perfkit.errors import PerfkitError


@dataclass(frozen=True)
class TargetOptions:
    url: str
    model: str | None = None
    api_key_env: str | None = None
    timeout_s: float | None = None
    scrape_url: str | None = None
    tokenizer: Path | None = None  # --tokenizer DIR: text prompts (loadgen/text.py)
    endpoint: str = "completions"  # --endpoint completions|chat
    server_profile: str | None = None  # --server-profile LEVELS (remote/profile.py)
    server_profile_dir: Path | None = None  # --server-profile-dir DIR
    workers: str | None = None  # --workers N|auto (loadgen/auto.py); None: one, in-process
    workers_per_node: int | None = None  # --workers-per-node N (with --ray)
    ray: str | None = None  # --ray ADDRESS|auto|local: workers as Ray actors (loadgen/ray.py)


def check_remote_flags(target: str | None, api_key_env: str | None, timeout: float | None,
                       scrape_metrics: str | None, device: str | None,
                       tokenizer: Path | None = None, endpoint: str | None = None,
                       workers: str | None = None, ray: str | None = None,
                       workers_per_node: int | None = None) -> None:
    """Remote-only options need --target; engine-only ones refuse it."""
    if target is None:
        for name, value in (("--api-key-env", api_key_env), ("--timeout", timeout),
                            ("--scrape-metrics", scrape_metrics), ("--tokenizer", tokenizer),
                            ("--endpoint", endpoint), ("--workers", workers), ("--ray", ray),
                            ("--workers-per-node", workers_per_node)):
            if value is not None:
                raise PerfkitError(f"{name} needs --target URL")
    elif device is not None:
        raise PerfkitError("--device sets the in-process engine's device; with --target the "
                           "server chooses its own")
