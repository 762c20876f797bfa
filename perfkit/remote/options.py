"""--target and its companions, as given on the command line (checked by remote/target.py).

A plain dataclass with no I/O, so that perfkit.run can name it without importing the
HTTP client."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


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
