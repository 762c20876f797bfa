"""tests/replay's fixtures (replay_fixtures: tiny traces, prompts, engine profiles)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "replay"))
